"""The outputs, as DataFrame transformations: committed offsets, consumer lag, rebalance
timeline (with storm detection) and commit rate. Input: the `kafka-offsets` rows."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from .segments import OFFSETS_TOPIC, log_end_offset, partition_dirs


def commits(offsets: DataFrame) -> DataFrame:
    """One row per OffsetCommit record (tombstone: a deleted offset)."""
    return offsets.where("kind = 'commit'").select(
        "group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp",
        "tombstone", "log_partition", "log_offset", "record_timestamp")


def groups(offsets: DataFrame) -> DataFrame:
    """One row per GroupMetadata record (one generation's membership; tombstone: group deleted),
    and per KIP-848 group epoch (group_type consumer; generation is the epoch)."""
    return offsets.where("kind = 'group'").select(
        "group", "group_type", "generation", "protocol_type", "protocol", "leader", "state_timestamp", "member_count", "members",
        "tombstone", "log_partition", "log_offset", "record_timestamp")


def errors(offsets: DataFrame) -> DataFrame:
    """Bad batches and undecodable records of `__consumer_offsets`: (topic, partition, offset,
    file, error), the shape of the kafka-log source's error rows."""
    return offsets.where("kind = 'error'").select(
        F.lit(OFFSETS_TOPIC).alias("topic"), F.col("log_partition").alias("partition"),
        F.col("log_offset").alias("offset"), "file", "error")


def committed_offsets(commits: DataFrame) -> DataFrame:
    """The last record per (group, topic, partition), tombstones applied: what OffsetFetch answers.

    A group's records all live in one `__consumer_offsets` partition, so log order is
    log_offset order."""
    latest = Window.partitionBy("group", "topic", "partition").orderBy(F.col("log_offset").desc())
    return (commits.withColumn("rank", F.row_number().over(latest)).where("rank = 1 AND NOT tombstone")
            .select("group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp",
                    "expire_timestamp"))


def log_end_offsets(spark: SparkSession, data_dir: str) -> DataFrame:
    """(topic, partition, log_start_offset, log_end_offset) of every topic partition log,
    from batch headers only (the partitions are spread over the executors)."""
    dirs = [(t, p, str(d)) for t, p, d in partition_dirs(data_dir) if t != OFFSETS_TOPIC]
    schema = "topic string, partition int, log_start_offset long, log_end_offset long"
    if not dirs:
        return spark.createDataFrame([], schema)
    n = max(1, min(len(dirs), spark.sparkContext.defaultParallelism))
    rdd = spark.sparkContext.parallelize(dirs, n).map(lambda d: (d[0], d[1], *log_end_offset(d[2])))
    return spark.createDataFrame(rdd, schema)


def consumer_lag(committed: DataFrame, ends: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Per partition: log end offset - committed offset (null when the topic partition has no
    log here); per group: total lag, partitions, partitions without a log."""
    lag = (committed.join(ends, ["topic", "partition"], "left")
           .withColumn("lag", F.when(F.col("log_end_offset").isNotNull(),  # greatest() would skip the null
                                     F.greatest(F.col("log_end_offset") - F.col("offset"), F.lit(0))))
           .select("group", "topic", "partition", "offset", "log_start_offset", "log_end_offset", "lag"))
    totals = lag.groupBy("group").agg(
        F.coalesce(F.sum("lag"), F.lit(0)).alias("total_lag"), F.count("*").alias("partitions"),
        F.count_if(F.col("log_end_offset").isNull()).alias("partitions_without_log"))
    return lag, totals


def rebalance_timeline(groups: DataFrame, storm_window_minutes: int = 5, storm_threshold: int = 10
                       ) -> tuple[DataFrame, DataFrame]:
    """Per group and generation: when, member count, joined/left members, protocol, leader,
    time since the previous generation, rebalances within the storm window that ends there.

    A generation may be stored more than once (e.g. a static member replaced): its last
    record counts. A storm: more than storm_threshold rebalances within storm_window_minutes.
    Returns (timeline, per-group summary)."""
    window_ms = storm_window_minutes * 60_000
    last_per_generation = Window.partitionBy("group", "group_type", "generation").orderBy(F.col("log_offset").desc())
    order = Window.partitionBy("group").orderBy("log_offset")
    recent = Window.partitionBy("group").orderBy("time_ms").rangeBetween(-window_ms, 0)
    timeline = (groups.where("NOT tombstone")
                .withColumn("rank", F.row_number().over(last_per_generation)).where("rank = 1")
                .withColumn("time_ms", F.when(F.col("state_timestamp") >= 0, F.col("state_timestamp"))
                            .otherwise(F.col("record_timestamp")))
                .withColumn("member_ids", F.transform("members", lambda m: m["member_id"]))
                .withColumn("previous_ids", F.coalesce(F.lag("member_ids").over(order), F.array()))
                .withColumn("joined", F.array_except("member_ids", "previous_ids"))
                .withColumn("left", F.array_except("previous_ids", "member_ids"))
                .withColumn("since_previous_ms", F.col("time_ms") - F.lag("time_ms").over(order))
                .withColumn("rebalances_in_window", F.count("*").over(recent))
                .withColumn("storm", F.col("rebalances_in_window") > storm_threshold)
                .select("group", "generation", F.timestamp_millis("time_ms").alias("time"), "member_count",
                        "member_ids", "joined", "left", "group_type", "protocol_type", "protocol", "leader",
                        "since_previous_ms", "rebalances_in_window", "storm"))
    summary = timeline.groupBy("group").agg(
        F.count("*").alias("rebalances"), F.max("generation").alias("last_generation"),
        F.max("rebalances_in_window").alias("max_in_window"), F.bool_or("storm").alias("storm"),
        F.min(F.when(F.col("storm"), F.col("time"))).alias("first_storm_at"))
    return timeline, summary


def commit_rate(commits: DataFrame) -> DataFrame:
    """Per group per minute: offset commit records (one per partition) and commit requests
    (distinct commit timestamps: one OffsetCommit request stamps all its partitions alike)."""
    return (commits.where("NOT tombstone")
            .groupBy("group", F.window(F.timestamp_millis("commit_timestamp"), "1 minute").alias("w"))
            .agg(F.count("*").alias("commits"), F.count_distinct("commit_timestamp").alias("requests"))
            .select("group", F.col("w.start").alias("minute"), "commits", "requests"))
