"""PySpark analytics over the server's on-disk logs (offsets, lag, rebalances, commit rates)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_logs(spark: "SparkSession", data_dir: str, partitions: int | None = None) -> "DataFrame":
    """Every record of every segment under data_dir (see pipeline.datasource)."""
    from .datasource import KafkaLogDataSource

    spark.dataSource.register(KafkaLogDataSource)
    n = partitions or spark.sparkContext.defaultParallelism
    return spark.read.format("kafka-log").option("partitions", str(n)).load(str(data_dir))


def committed_offsets(spark: "SparkSession", data_dir: str) -> "DataFrame":
    """(group, topic, partition, offset, ...) as OffsetFetch would answer for this log."""
    from . import analytics, decode

    return analytics.committed_offsets(decode.commits(read_logs(spark, data_dir)))
