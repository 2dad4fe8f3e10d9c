"""Reading the server's segment files without Spark: which files, and their records.

A data dir holds `<topic>-<partition>/<20-digit base offset>.log` segments in Kafka's
record-batch v2 format. Batches are CRC-checked; a bad one becomes an error row (with
its file and position) instead of disappearing, and reading that file stops there, as
the broker's own recovery would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from protocol.record_batch import CorruptBatch, iter_batch_records, parse_header

_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


@dataclass(frozen=True)
class SegmentFile:
    topic: str
    partition: int
    path: str
    size: int


def segment_files(data_dir: str | Path) -> list[SegmentFile]:
    out = []
    for directory in sorted(Path(data_dir).iterdir()):
        m = _DIR.match(directory.name)
        if not directory.is_dir() or m is None:
            continue
        for path in sorted(directory.glob("*.log")):
            out.append(SegmentFile(m["topic"], int(m["partition"]), str(path), path.stat().st_size))
    return out


COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers", "attributes", "file", "error")


def read_segment(seg: SegmentFile) -> Iterator[tuple]:
    """Rows in COLUMNS order; a corrupt or torn batch yields one row with `error` set."""
    data = Path(seg.path).read_bytes()
    pos, end = 0, len(data)
    while pos < end:
        try:
            h = parse_header(data, pos)
        except CorruptBatch as e:
            yield (seg.topic, seg.partition, -1, -1, None, None, [], -1, seg.path, f"byte {pos}: {e}")
            return
        batch = data[pos:pos + h.size]
        if h.is_control:
            pos += h.size
            continue
        try:
            records = list(iter_batch_records(batch, h))
        except CorruptBatch as e:  # e.g. a compressed payload that does not decompress
            yield (seg.topic, seg.partition, h.base_offset, -1, None, None, [], h.attributes, seg.path,
                   f"byte {pos}: {e}")
            return
        pos += h.size
        for r in records:
            yield (seg.topic, seg.partition, r.offset, r.timestamp, r.key, r.value,
                   [(k, v) for k, v in r.headers], h.attributes, seg.path, None)
