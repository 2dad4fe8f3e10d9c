"""Reading the server's segment files without Spark: which files, their batches, end offsets.

A data dir holds `<topic>-<partition>/<20-digit base offset>.log` segments in Kafka's
record-batch v2 format. Every batch is CRC-checked. Corrupt bytes (a bad CRC, a broken
length or magic, garbage) are reported as one bad range (file, byte range, base offset when
readable, why) and never silently dropped; reading resumes at the next whole batch whose
magic, length and CRC are right (protocol.record_batch.next_valid_batch, the same search the
server uses to name the corrupt range and that repair keeps after), so the rest still counts.
A torn tail (nothing valid after it) is one bad range to the end of the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
import json
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from aiokafka.errors import KafkaError
from aiokafka.record.default_records import DefaultRecordBatch
from crc32c import crc32c

from protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptBatch,
    next_valid_batch,
    parse_header,
)

OFFSETS_TOPIC = "__consumer_offsets"
LOG_START_FILE = "log-start-offset"  # written by coordinator.log.partition on retention
_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_SEGMENT = re.compile(r"^\d{20}\.log$")


@dataclass(frozen=True)
class SegmentFile:
    topic: str
    partition: int
    path: str
    size: int
    start: int = 0  # the byte range read: all of it, or (streaming) what was appended since
    end: int | None = None

    @property
    def base_offset(self) -> int:
        return int(Path(self.path).name[:20])


class BadBatch(NamedTuple):
    position: int  # where the corrupt bytes start
    base_offset: int  # -1 when the header itself is unreadable
    reason: str
    end: int = -1  # where they end: the next valid batch, or the end of the file

    def describe(self) -> str:
        at = f" (base offset {self.base_offset})" if self.base_offset >= 0 else ""
        return f"bytes {self.position}-{self.end}{at}: {self.reason}"


def partition_dirs(data_dir: str | Path, topics: set[str] | None = None) -> list[tuple[str, int, Path]]:
    out = []
    for directory in sorted(Path(data_dir).iterdir()):
        m = _DIR.match(directory.name)
        if m is None or not directory.is_dir() or (topics is not None and m["topic"] not in topics):
            continue
        out.append((m["topic"], int(m["partition"]), directory))
    return out


def segment_files(data_dir: str | Path, topics: set[str] | None = None) -> list[SegmentFile]:
    out = []
    for topic, partition, directory in partition_dirs(data_dir, topics):
        for path in sorted(p for p in directory.iterdir() if _SEGMENT.match(p.name)):
            try:
                out.append(SegmentFile(topic, partition, str(path), path.stat().st_size))
            except FileNotFoundError:
                pass  # deleted by the server's retention since the listing
    return out


def segment_file(path: str | Path, start: int = 0, end: int | None = None) -> SegmentFile:
    """The SegmentFile of a path `<data dir>/<topic>-<partition>/<base>.log`."""
    path = Path(path)
    m = _DIR.match(path.parent.name)
    if m is None:
        raise ValueError(f"{path}: not in a <topic>-<partition> directory")
    return SegmentFile(m["topic"], int(m["partition"]), str(path), path.stat().st_size, start, end)


def batches(
    data: bytes, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader, memoryview] | BadBatch]:
    """Each batch of a segment's bytes (from pos to end) as (position, header, bytes), or a
    BadBatch (module doc). Control batches are included (they take offsets); records are
    not decoded here."""
    view = memoryview(data)
    end = len(data) if end is None else end
    while pos < end:
        try:
            h = parse_header(view, pos, verify_crc=False)
            bad = (
                None
                if crc32c(view[pos + ATTRIBUTES_OFFSET : pos + h.size]) == h.crc
                else (h.base_offset, "CRC-32C mismatch")
            )
        except CorruptBatch as e:  # a broken length or magic, garbage, a torn tail
            bad = (-1, str(e))
        if bad is None:
            yield pos, h, view[pos : pos + h.size]
            pos += h.size
            continue
        resume = next_valid_batch(data, pos + 1)
        yield BadBatch(pos, bad[0], bad[1], end if resume is None else resume)
        if resume is None:
            return
        pos = resume


def read_segment(seg: SegmentFile, markers: bool = False) -> Iterator[tuple[BatchHeader, list[Any]] | BadBatch]:
    """(header, records) per data batch (control batches too with markers=True), or BadBatch.

    A batch whose CRC is right but whose payload does not decode (e.g. a broken compressed
    block) is reported as a BadBatch too."""
    try:
        data = Path(seg.path).read_bytes()
    except FileNotFoundError:
        return  # deleted by the server's retention since it was listed: gone from the log too
    for item in batches(data, seg.start, seg.end):
        if isinstance(item, BadBatch):
            yield item
            continue
        pos, h, batch = item
        if h.is_control and not markers:
            continue
        try:  # aiokafka's records (offset, timestamp, key, value, headers), as protocol.record_batch uses
            records = list(DefaultRecordBatch(bytes(batch)))
        except KafkaError as e:
            yield BadBatch(pos, h.base_offset, f"records do not decode: {e}", pos + h.size)
            continue
        yield h, records


def log_end_offset(directory: str | Path) -> tuple[int, int]:
    """(log start offset, log end offset) of one partition directory, read-only.

    The end is the offset after the last whole batch of the last segment (control batches
    count); an empty segment's name says where offsets resume. CRCs are not checked here:
    only batch headers are read."""
    directory = Path(directory)
    segments = sorted(p for p in directory.iterdir() if _SEGMENT.match(p.name))
    start_file = directory / LOG_START_FILE
    start = int(start_file.read_text().strip() or 0) if start_file.exists() else 0
    if not segments:
        return start, start
    start = max(start, int(segments[0].name[:20]))
    last = segments[-1]
    end, pos, size = int(last.name[:20]), 0, last.stat().st_size  # empty: the name is the next offset
    with open(last, "rb") as f:
        while pos + HEADER_SIZE <= size:  # headers only: segments can be large
            f.seek(pos)
            h = BatchHeader._make(HEADER.unpack(f.read(HEADER_SIZE)))
            if h.magic != MAGIC or h.batch_length < MIN_BATCH_LENGTH or pos + h.size > size:
                break  # a torn tail: the end is after the last whole batch
            end, pos = h.next_offset, pos + h.size
    return start, max(start, end)


def batch_times(directory: str | Path) -> Iterator[tuple[int, int, int, int]]:
    """(base offset, next offset, first timestamp, max timestamp) of every whole batch of one
    partition directory, from headers only: the first record's timestamp and the latest
    (both the broker's append time for a LogAppendTime batch). Control batches count (they
    take offsets). A torn tail ends a segment, as in log_end_offset."""
    for path in sorted(p for p in Path(directory).iterdir() if _SEGMENT.match(p.name)):
        pos, size = 0, path.stat().st_size
        with open(path, "rb") as f:
            while pos + HEADER_SIZE <= size:
                f.seek(pos)
                h = BatchHeader._make(HEADER.unpack(f.read(HEADER_SIZE)))
                if h.magic != MAGIC or h.batch_length < MIN_BATCH_LENGTH or pos + h.size > size:
                    break
                first = h.max_timestamp if h.is_log_append_time else h.first_timestamp
                yield h.base_offset, h.next_offset, first, h.max_timestamp
                pos += h.size


def whole_batches_end(path: str | Path, pos: int = 0) -> int:
    """Where the whole batches of a segment that grows end, reading headers from `pos` (a
    previous answer): a batch still being written is not counted yet. Corrupt bytes that a
    valid batch follows are passed over (the reader reports them); a file shorter than `pos`
    (rewritten by compaction) is not followed past its end."""
    data = Path(path).read_bytes()
    size = len(data)
    pos = min(pos, size)
    while pos + HEADER_SIZE <= size:
        h = BatchHeader._make(HEADER.unpack_from(data, pos))
        if h.magic == MAGIC and h.batch_length >= MIN_BATCH_LENGTH and pos + h.size <= size:
            pos += h.size
            continue
        resume = next_valid_batch(data, pos + 1)
        if resume is None:
            break  # a batch still being written (or a torn tail): wait for more
        pos = resume
    return pos


CATALOG_FILE = "topics.json"  # the server's topic catalog: names, ids, partition counts


def topic_names(data_dir: str | Path) -> dict[str, str]:
    """topic id (as written in the catalog) -> topic name."""
    path = Path(data_dir) / CATALOG_FILE
    try:
        catalog = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {entry["topic_id"]: name for name, entry in catalog.items() if isinstance(entry, dict)}
