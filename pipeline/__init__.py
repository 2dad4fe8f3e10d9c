"""PySpark analytics over the server's on-disk logs (offsets, lag, rebalances, commit rates).

from pipeline import committed_offsets
rows = committed_offsets(spark, "/var/lib/kcoord").collect()
{(r.group, r.topic, r.partition): r.offset for r in rows}  # == what OffsetFetch answers
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def register(spark: "SparkSession") -> None:
    """Make `kafka-log` and `kafka-offsets` known to spark.read.format()."""
    from .datasource import ConsumerOffsetsDataSource, KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
    spark.dataSource.register(ConsumerOffsetsDataSource)


def _load(spark: "SparkSession", fmt: str, data_dir: str, partitions: int | None, **options: str) -> "DataFrame":
    register(spark)
    n = partitions or spark.sparkContext.defaultParallelism
    return spark.read.format(fmt).options(partitions=str(n), **options).load(str(data_dir))


def read_logs(spark: "SparkSession", data_dir: str, partitions: int | None = None, **options: str) -> "DataFrame":
    """Every record of every segment under data_dir, one row each (pipeline.datasource)."""
    return _load(spark, "kafka-log", data_dir, partitions, **options)


def read_offsets(
    spark: "SparkSession", data_dir: str, partitions: int | None = None, on_driver: bool = False, **options: str
) -> "DataFrame":
    """`__consumer_offsets` decoded: commit, group and error rows (pipeline.decode.SCHEMA).

    on_driver: decoded here in one pass and handed to Spark as Arrow, for small inputs (the
    data source's planning and read each start Python workers, seconds on a small machine)."""
    if on_driver:
        return spark.createDataFrame(offsets_table(data_dir))
    return _load(spark, "kafka-offsets", data_dir, partitions, **options)


def offsets_table(data_dir: str) -> pa.Table:
    """`__consumer_offsets` decoded here, in one pass, as an Arrow table (no Spark needed)."""
    import pyarrow as pa

    from .decode import SCHEMA, decode_segments
    from .segments import OFFSETS_TOPIC, segment_files

    batches = list(decode_segments(segment_files(data_dir, {OFFSETS_TOPIC})))
    # (no rows: one empty chunk per column, which Spark's Arrow reader takes, where none it does not)
    return pa.Table.from_batches(batches, SCHEMA) if batches else SCHEMA.empty_table()


def committed_offsets(spark: "SparkSession", data_dir: str) -> "DataFrame":
    """(group, topic, partition, offset, leader_epoch, metadata, commit_timestamp, expire_timestamp):
    the latest commit per group and partition, deleted offsets gone: what OffsetFetch answers."""
    from . import analytics

    return analytics.committed_offsets(analytics.commits(read_offsets(spark, data_dir)))


def committed_offsets_map(spark: "SparkSession", data_dir: str) -> dict[tuple[str, str, int], int]:
    """{(group, topic, partition): offset}, for comparing with OffsetFetch answers."""
    return {(r.group, r.topic, r.partition): r.offset for r in committed_offsets(spark, data_dir).collect()}
