"""Spark Python Data Sources over the server's data dir (pyspark >= 4, `pyspark.sql.datasource`).

- `spark.read.format("kafka-log").load(data_dir)`: one row per record of every segment
  (topic, partition, offset, timestamp, key, value, headers, batch attributes, producer id),
  plus one row per bad batch with `file` and `error` set.
- `spark.read.format("kafka-offsets").load(data_dir)`: `__consumer_offsets` decoded in the
  same pass into typed columns (pipeline.decode.SCHEMA), which spares Spark a round trip of
  every key and value through the JVM.

Segment files are packed by size into about `partitions` input partitions (default: the
session's defaultParallelism, see pipeline.read_logs); Python pays ~0.1 s per task, so one
task per small file would be slow. Rows reach Spark as Arrow batches unless `arrow=false`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadLimit
    from pyspark.sql.types import StructType

from .segments import (
    OFFSETS_TOPIC,
    BadBatch,
    SegmentFile,
    batches,
    read_segment,
    segment_file,
    segment_files,
    whole_batches_end,
)

RAW_SCHEMA = (
    "topic string, partition int, offset long, timestamp long, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, attributes int, producer_id long, "
    "file string, byte_start long, byte_end long, error string"
)
BATCH_ROWS = 65_536


class FilesPartition(InputPartition):
    def __init__(self, files: list[SegmentFile]) -> None:
        self.files = files


def pack(files: list[SegmentFile], n: int) -> list[list[SegmentFile]]:
    """Greedy: biggest files first, each onto the lightest of n bins."""
    bins: list[list[SegmentFile]] = [[] for _ in range(max(1, min(n, len(files))))]
    sizes = [0] * len(bins)
    for f in sorted(files, key=lambda f: -f.size):
        i = sizes.index(min(sizes))
        bins[i].append(f)
        sizes[i] += f.size
    return [b for b in bins if b]


def _error_row(seg: SegmentFile, bad: BadBatch) -> tuple[Any, ...]:
    return (
        seg.topic,
        seg.partition,
        bad.base_offset,
        None,
        None,
        None,
        None,
        None,
        None,
        seg.path,
        bad.position,
        bad.end,
        bad.describe(),
    )


def raw_rows(files: list[SegmentFile]) -> Iterator[tuple[Any, ...]]:
    """Tuples in RAW_SCHEMA order; a bad batch is one row with `error` set."""
    for seg in files:
        for item in read_segment(seg):
            if isinstance(item, BadBatch):
                yield _error_row(seg, item)
                continue
            h, records = item
            for r in records:
                yield (
                    seg.topic,
                    seg.partition,
                    r.offset,
                    r.timestamp,
                    r.key,
                    r.value,
                    r.headers,
                    h.attributes,
                    h.producer_id,
                    seg.path,
                    None,
                    None,
                    None,
                )


def error_rows(files: list[SegmentFile]) -> Iterator[tuple[Any, ...]]:
    """Only the bad-batch rows (RAW_SCHEMA): CRC and framing checked, records not decoded."""
    for seg in files:
        for item in batches(Path(seg.path).read_bytes()):
            if type(item) is BadBatch:
                yield _error_row(seg, item)


def _raw_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            ("attributes", pa.int32()),
            ("producer_id", pa.int64()),
            ("file", pa.string()),
            ("byte_start", pa.int64()),
            ("byte_end", pa.int64()),
            ("error", pa.string()),
        ]
    )


def raw_batches(files: list[SegmentFile], batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    schema = _raw_arrow_schema()
    rows: list[tuple[Any, ...]] = []
    for row in raw_rows(files):
        rows.append(row)
        if len(rows) >= batch_rows:
            yield pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(zip(*rows), schema)], schema=schema)
            rows = []
    if rows:
        yield pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(zip(*rows), schema)], schema=schema)


class _Reader(DataSourceReader):
    def __init__(self, path: str, partitions: int, topics: set[str] | None, options: dict[str, Any]) -> None:
        self.path, self.n, self.topics = path, partitions, topics
        self.arrow = options.get("arrow", "true").lower() != "false"
        self.errors_only = options.get("errorsonly", "false").lower() == "true"

    def partitions(self) -> list[InputPartition]:
        return [FilesPartition(b) for b in pack(segment_files(self.path, self.topics), self.n)] or [FilesPartition([])]


def files_of(partition: InputPartition) -> list[SegmentFile]:
    assert isinstance(partition, FilesPartition)  # (what partitions() handed Spark)
    return partition.files


class KafkaLogReader(_Reader):
    def read(self, partition: InputPartition) -> Iterator[Any]:
        files = files_of(partition)
        if self.errors_only:
            return error_rows(files)
        return raw_batches(files) if self.arrow else raw_rows(files)


class ConsumerOffsetsReader(_Reader):
    def read(self, partition: InputPartition) -> Iterator[Any]:
        from .decode import decode_segments

        return decode_segments(files_of(partition))  # Arrow only: its decoder builds columns


class _Source(DataSource):
    """Options: path (the data dir), partitions (input partitions; default 2, pipeline.read_logs
    passes defaultParallelism), topics (comma-separated filter), arrow (kafka-log: false yields
    tuples instead of Arrow batches, for comparison; errorsOnly=true: only bad-batch rows, from
    a CRC and framing check without decoding records)."""

    reader_class: type[_Reader] = KafkaLogReader
    fixed_topics: set[str] | None = None

    def reader(self, schema: StructType) -> DataSourceReader:
        topics = self.options.get("topics")
        return self.reader_class(
            self.options["path"],
            int(self.options.get("partitions", 2)),
            self.fixed_topics or (set(topics.split(",")) if topics else None),
            {k.lower(): v for k, v in self.options.items()},
        )


class KafkaLogDataSource(_Source):
    @classmethod
    def name(cls) -> str:
        return "kafka-log"

    def schema(self) -> str:
        return RAW_SCHEMA


class ConsumerOffsetsDataSource(_Source):
    reader_class = ConsumerOffsetsReader
    fixed_topics = {OFFSETS_TOPIC}

    @classmethod
    def name(cls) -> str:
        return "kafka-offsets"

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        from .decode import SCHEMA

        return from_arrow_schema(SCHEMA)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ConsumerOffsetsStreamReader(self.options["path"], int(self.options.get("partitions", 2)))


class ConsumerOffsetsStreamReader(DataSourceStreamReader):
    """`kafka-offsets` as a stream (pipeline.run.follow): each micro-batch gets the
    `__consumer_offsets` batches appended since the last one. Its offsets are, per segment
    file, the position after the last whole batch (a batch still being written waits for the
    next trigger). Segments are assumed to only grow: a segment that compaction rewrote is
    not read again (the server compacts `__consumer_offsets` only when asked)."""

    def __init__(self, path: str, partitions: int) -> None:
        self.path, self.n = path, partitions

    def initialOffset(self) -> dict[str, Any]:
        return {}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None) -> dict[str, Any]:
        """{segment path: end of its whole batches}; `start` (Spark >= 4.2) is where the
        last micro-batch ended: headers are read from there on."""
        start = start or {}
        out = dict(start)  # (a segment deleted since, by retention, keeps its last position)
        for f in segment_files(self.path, {OFFSETS_TOPIC}):
            try:
                out[f.path] = whole_batches_end(f.path, start.get(f.path, 0))
            except FileNotFoundError:
                pass
        return out

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[FilesPartition]:
        ranges = []
        for path, stop in sorted(end.items()):
            if stop > start.get(path, 0):
                try:
                    ranges.append(segment_file(path, start.get(path, 0), stop))
                except FileNotFoundError:
                    pass  # deleted by retention meanwhile: what it held is gone from the log too
        return [FilesPartition(files) for files in pack(ranges, self.n)] or [FilesPartition([])]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from .decode import decode_segments

        return decode_segments(files_of(partition))

    def commit(self, end: dict[str, Any]) -> None:
        pass  # nothing to release: the files stay the server's
