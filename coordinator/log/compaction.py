"""Log compaction (cleanup.policy=compact): keep the latest record per key.

rewrite() runs in a worker thread and touches only closed segments (immutable) plus a
snapshot prefix of the active one. Its output replaces a run of old segments atomically:

  1. write `<first>.cleaned`, fsync it
  2. rename it to `<first>-<end>.swap`, fsync the directory     <- commit point
  3. delete the old `.log` files with base offsets in (first, end), rename the swap over
     `<first>.log`, fsync the directory

A crash before 2 leaves a `.cleaned` file, deleted at open; a crash after 2 leaves a
`.swap` that finish_interrupted_swaps() completes. Offsets are preserved (gaps appear, as in
Kafka); a rebuilt batch keeps its base offset and last offset delta, so the offset range a
segment covers never shrinks.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from protocol.record_batch import BatchHeader, Record, build_batch_from, iter_batch_records

from .segment import SUFFIX, Segment, fsync_dir, segment_path

log = logging.getLogger(__name__)


@dataclass
class Stats:
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0


@dataclass
class Plan:
    segments: list[Segment]  # the replacements, opened on their .swap files
    swaps: list[tuple[Path, range]] = field(default_factory=list)  # swap file, offsets covered
    stats: Stats = field(default_factory=Stats)


def _name(first: int, end: int, suffix: str) -> str:
    return f"{first:020d}-{end:020d}{suffix}"


def latest_offsets(parts: list[tuple[Segment, int]]) -> dict[bytes, int]:
    """Key -> offset of its last record, over (segment, byte limit) pairs."""
    latest: dict[bytes, int] = {}
    for seg, end in parts:
        for h, data in seg.iter_batches(0, end):
            if h.is_control:
                continue
            for r in iter_batch_records(data, h):
                if r.key is not None:
                    latest[r.key] = r.offset
    return latest


def rewrite(
    directory: Path,
    closed: list[Segment],
    newer: list[tuple[Segment, int]],
    tombstone_horizon_ms: int,
    segment_bytes: int,
    index_interval: int,
) -> Plan:
    """Clean `closed`; `newer` (segment, byte limit) pairs follow it, are not rewritten
    (the active segment, and segments still within min.compaction.lag.ms) but their keys
    supersede older records."""
    latest = latest_offsets([(s, s.size) for s in closed] + newer)
    plan = Plan(segments=[])
    st = plan.stats
    st.segments_in = len(closed)
    # Merge adjacent segments into one output while it stays under segment_bytes; an
    # input's size bounds its cleaned size, so the check is made before cleaning it.
    i = 0
    while i < len(closed):
        first = closed[i].base_offset
        cleaned = directory / f"{first:020d}.cleaned"
        fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        out_size = 0
        try:
            while True:
                seg = closed[i]
                st.bytes_in += seg.size
                for h, data in seg.iter_batches():
                    out = _clean_batch(h, data, latest, tombstone_horizon_ms, st)
                    if out:
                        os.write(fd, out)
                        out_size += len(out)
                i += 1
                if i == len(closed) or out_size + closed[i].size > segment_bytes:
                    break
            os.fsync(fd)
        finally:
            os.close(fd)
        st.bytes_out += out_size
        end = closed[i].base_offset if i < len(closed) else newer[0][0].base_offset
        swap = cleaned.with_name(_name(first, end, ".swap"))
        os.replace(cleaned, swap)
        plan.swaps.append((swap, range(first, end)))
    fsync_dir(directory)
    for swap, covered in plan.swaps:
        seg, res = Segment.recover(swap, covered.start, covered.start, index_interval)
        if res.problem:  # we just wrote and fsynced it: this is a bug, not a torn write
            raise RuntimeError(f"compacted segment unreadable: {res.problem}")
        seg.path = segment_path(directory, covered.start)
        seg.next_offset = max(seg.next_offset, covered.start)
        plan.segments.append(seg)
    st.segments_out = len(plan.segments)
    return plan


def _clean_batch(h: BatchHeader, data: bytes, latest: dict[bytes, int], horizon: int, st: Stats) -> bytes | None:
    if h.is_control:
        return data
    records = list(iter_batch_records(data, h))
    st.records_in += len(records)
    kept = []
    for r in records:
        if r.key is None:
            kept.append(r)  # a compacted topic should have none; never lose data silently
        elif latest.get(r.key) == r.offset:
            if r.value is None and h.max_timestamp < horizon:
                st.tombstones_dropped += 1
            else:
                kept.append(r)
    st.records_kept += len(kept)
    if len(kept) == len(records):
        return data
    if not kept:
        return None
    return rebuilt_batch(kept, h, h.compression, last_offset_delta=h.last_offset_delta)


def rebuilt_batch(records: Iterable[Record], h: BatchHeader, compression: int, **more: Any) -> bytes:
    """A batch of these records in place of the one `h` heads (compacted, or recompressed as
    a topic's compression.type wants): its offsets, producer, sequence, transactional flag and
    leader epoch kept, compressed with `compression` (`more`: build_batch_from's other options)."""
    return build_batch_from(
        records,
        base_offset=h.base_offset,
        compression=compression,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        transactional=h.is_transactional,
        partition_leader_epoch=h.partition_leader_epoch,
        **more,
    )


def install(directory: Path, old: list[Segment], plan: Plan) -> None:
    """Step 3 on the loop: retire the old segments and move the swaps into place."""
    for seg in old:
        seg.close()
    for swap, covered in plan.swaps:
        for seg in old:
            if covered.start < seg.base_offset < covered.stop:
                seg.path.unlink(missing_ok=True)
        os.replace(swap, segment_path(directory, covered.start))
    fsync_dir(directory)


def finish_interrupted_swaps(directory: Path) -> None:
    """At open: drop unfinished rewrites, complete committed ones (see module doc)."""
    for p in sorted(directory.iterdir()):
        if p.name.endswith(".cleaned"):
            log.warning("%s: removing unfinished compaction output %s", directory, p.name)
            p.unlink()
    for p in sorted(directory.iterdir()):
        if not p.name.endswith(".swap"):
            continue
        first, end = (int(x) for x in p.name[: -len(".swap")].split("-"))
        for q in directory.iterdir():
            stem = q.name[: -len(SUFFIX)]
            if q.name.endswith(SUFFIX) and stem.isdigit() and first < int(stem) < end:
                q.unlink()
        os.replace(p, segment_path(directory, first))
        log.warning("%s: completed interrupted compaction swap %s", directory, p.name)
    fsync_dir(directory)
