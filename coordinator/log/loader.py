"""Loading a partition log from its directory, as Kafka's LogLoader does: the log start
offset, the segments, and a scan of what was written after the recovery point (a torn tail
cut, corruption found or, for the repair tool, removed). Also the small files beside the
segments that loading reads: the log start offset and the recovery point.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from . import compaction
from .config import LogConfig
from .segment import SUFFIX, Segment, SegmentState, decode_checkpoint, fsync_dir, segment_path, splice_out

log = logging.getLogger(__name__)

LOG_START_FILE = "log-start-offset"
# Kafka's recovery point: segment states (sizes, indexes) known to be on disk. Only bytes
# after them are read and CRC-checked when the log opens, even after a crash.
CHECKPOINT_FILE = "recovery-point"


def seg_size(path: Path) -> int:
    return path.stat().st_size


def say_offline(directory: Path, why: str) -> None:
    """The one line an operator gets for a partition that went offline: what is damaged and
    exactly what to run."""
    log.error(
        "%s: partition offline, nothing cut. To repair: stop the server, run `%s` (it keeps a copy), start it again",
        why,
        repair_command(directory),
    )


def repair_command(directory: Path) -> str:
    return f"python -m coordinator.log repair {directory}"


@dataclass
class LoadedLog:
    """What load() found: the segments (ordered by base offset, the last one active), the
    log start offset, why the log is offline (or None), and the segments read and
    CRC-checked now, past the recovery point."""

    segments: list[Segment]
    log_start_offset: int
    offline: str | None
    scanned: list[Segment]


def load(directory: Path, config: LogConfig, *, repair: bool = False) -> LoadedLog:
    """A torn tail (what a crash mid-write leaves) is cut; damage that valid batches follow
    is corruption: nothing is cut, and the log comes back offline (every append and read
    refused) with one error line saying where and how to repair it, unless `repair` (the
    repair tool), which removes just the corrupt bytes (protocol.record_batch.next_valid_batch
    finds where valid batches resume, the range the analytics pipeline skips too) and keeps
    every valid batch after them."""
    directory.mkdir(parents=True, exist_ok=True)
    compaction.finish_interrupted_swaps(directory)
    log_start = 0
    start_file = directory / LOG_START_FILE
    if start_file.exists():
        try:
            log_start = int(start_file.read_text().strip() or 0)
            if not 0 <= log_start < 2**63:  # (an offset is a non-negative int64)
                raise ValueError(log_start)
        except ValueError:
            log_start = 0
            log.warning("%s: unreadable %s, ignoring it", directory, LOG_START_FILE)
    bases = sorted(
        int(p.name[: -len(SUFFIX)])
        for p in directory.iterdir()
        if p.name.endswith(SUFFIX) and p.name[: -len(SUFFIX)].isdigit()
    )
    while bases and bases[-1] >= 2**63:  # (no offset: a file that only looks like a segment)
        log.warning(
            "%s: %s is not a segment (its name is no offset), ignoring it",
            directory,
            segment_path(directory, bases.pop()).name,
        )
    checkpoint = read_recovery_point(directory)
    missing = sorted(set(checkpoint) - set(bases))
    if missing:  # the recovery point knew them: they were deleted behind the log's back
        log.error(
            "%s: segment files missing: %s; what they held is gone (the recovery point lists them)",
            directory,
            ", ".join(segment_path(directory, b).name for b in missing),
        )
    segments: list[Segment] = []
    scanned: list[Segment] = []
    expected = 0
    offline = None
    for i, base in enumerate(bases):
        path = segment_path(directory, base)
        later = [b for b in bases[i + 1 :] if segment_path(directory, b).stat().st_size > 0]
        state = checkpoint.get(base)
        while True:
            seg, res = Segment.recover(
                path,
                base,
                expected,
                config.index_interval_bytes,
                state=state,
                limit=bases[i + 1] if i + 1 < len(bases) else None,
            )
            if not (repair and res.resumes_at is not None):
                break
            seg.close()
            log.warning(
                "%s: repair removes corrupt bytes %d-%d of %s (%s); the batches after them stay",
                directory,
                res.valid_bytes,
                res.resumes_at,
                path.name,
                res.problem,
            )
            splice_out(path, res.valid_bytes, res.resumes_at)
            state = None  # (the file changed: scan it again, whole)
        segments.append(seg)
        if res.problem and not repair and (res.resumes_at is not None or later):
            end = res.resumes_at if res.resumes_at is not None else seg_size(path)
            offline = (
                f"{path} bytes {res.valid_bytes}-{end} are corrupt ({res.problem.split(': ', 1)[-1]})"
                f" and valid batches follow"
            )
            say_offline(directory, offline)
            break
        if res.scanned_bytes or res.problem:
            scanned.append(seg)
        # an empty segment's name says where offsets resume
        expected = res.next_offset if res.next_offset is not None else max(expected, base)
        if res.problem and not (repair and later):  # (repair keeps the segments after a cut tail)
            dropped = bases[i + 1 :]
            for b in dropped:
                segment_path(directory, b).unlink()
            log.warning(
                "%s: recovery cut the log before offset %d (%s): kept %d bytes of %s%s",
                directory,
                expected,
                res.problem,
                res.valid_bytes,
                path.name,
                f", deleted later segments {dropped}" if dropped else "",
            )
            break
    if not segments:
        segments.append(Segment.create(directory, log_start, config.index_interval_bytes))
        fsync_dir(directory)
    log_start = max(log_start, segments[0].base_offset)
    if log_start > segments[-1].next_offset:  # start checkpoint beyond a truncated end
        log_start = segments[-1].next_offset
    return LoadedLog(segments, log_start, offline, scanned)


def read_recovery_point(directory: Path) -> dict[int, SegmentState]:
    """Segment states of the recovery point. They stay true while the log runs, as
    appends only extend segments; compaction, which rewrites them, removes the file
    first. Unreadable or absent: every segment is scanned."""
    try:
        return decode_checkpoint((directory / CHECKPOINT_FILE).read_bytes())
    except FileNotFoundError:
        return {}
    except ValueError as e:
        log.warning("%s: ignoring %s: %s", directory, CHECKPOINT_FILE, e)
        return {}


def replace_file(directory: Path, name: str, data: bytes) -> None:
    """Write a small file of the log's directory atomically and durably: a crash leaves
    the old one or the new one (blocking: for a worker thread, or at open)."""
    tmp = directory / (name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / name)
    fsync_dir(directory)


def remove_recovery_point(directory: Path) -> None:
    try:
        (directory / CHECKPOINT_FILE).unlink()
    except FileNotFoundError:
        return
    fsync_dir(directory)
