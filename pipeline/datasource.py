"""`spark.read.format("kafka-log").load(data_dir)`: a Spark Python Data Source over segments.

One row per record; segment files are packed into about defaultParallelism input
partitions by size. Rows are handed to Spark as Arrow batches (cheaper than tuples).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .segments import COLUMNS, SegmentFile, read_segment, segment_files

SCHEMA = ("topic string, partition int, offset long, timestamp long, key binary, value binary, "
          "headers array<struct<key:string,value:binary>>, attributes int, file string, error string")
ARROW_BATCH_ROWS = 65_536


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


class KafkaLogReader(DataSourceReader):
    def __init__(self, path: str, partitions: int, topics: set[str] | None) -> None:
        self.path, self.n, self.topics = path, partitions, topics

    def partitions(self) -> list[InputPartition]:
        files = [f for f in segment_files(self.path) if self.topics is None or f.topic in self.topics]
        return [FilesPartition(b) for b in pack(files, self.n)] or [FilesPartition([])]

    def read(self, partition: FilesPartition):
        import pyarrow as pa

        schema = pa.schema([
            ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64()),
            ("key", pa.binary()), ("value", pa.binary()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            ("attributes", pa.int32()), ("file", pa.string()), ("error", pa.string()),
        ])
        columns: list[list] = [[] for _ in COLUMNS]
        appends = [c.append for c in columns]
        for seg in partition.files:
            for row in read_segment(seg):
                for append, value in zip(appends, row):
                    append(value)
                if len(columns[0]) >= ARROW_BATCH_ROWS:
                    yield _batch(pa, schema, columns)
                    columns = [[] for _ in COLUMNS]
                    appends = [c.append for c in columns]
        if columns[0]:
            yield _batch(pa, schema, columns)


def _batch(pa, schema, columns):
    columns[6] = [[{"key": k, "value": v} for k, v in hs] for hs in columns[6]]
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)


class KafkaLogDataSource(DataSource):
    """Options: path (the data dir), partitions (default: Spark's default parallelism),
    topics (comma-separated filter)."""

    @classmethod
    def name(cls) -> str:
        return "kafka-log"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> DataSourceReader:
        topics = self.options.get("topics")
        return KafkaLogReader(self.options["path"], int(self.options.get("partitions", 2)),
                              set(topics.split(",")) if topics else None)
