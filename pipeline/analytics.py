"""The four outputs: committed offsets, consumer lag, rebalance timeline, commit rate."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def committed_offsets(commits: DataFrame) -> DataFrame:
    """Latest record per (group, topic, partition), tombstones applied: what OffsetFetch returns."""
    latest = Window.partitionBy("group", "topic", "partition").orderBy(F.col("log_offset").desc())
    return (commits.withColumn("rank", F.row_number().over(latest)).where("rank = 1 AND NOT tombstone")
            .select("group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp"))


def log_end_offsets(raw: DataFrame) -> DataFrame:
    return (raw.where("error IS NULL AND topic != '__consumer_offsets'")
            .groupBy("topic", "partition").agg((F.max("offset") + 1).alias("log_end_offset")))


def consumer_lag(committed: DataFrame, leo: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Per partition and per group: log end offset - committed offset."""
    lag = (committed.join(leo, ["topic", "partition"], "left")
           .withColumn("log_end_offset", F.coalesce("log_end_offset", F.lit(0)))
           .withColumn("lag", F.greatest(F.col("log_end_offset") - F.col("offset"), F.lit(0)))
           .select("group", "topic", "partition", "offset", "log_end_offset", "lag"))
    totals = lag.groupBy("group").agg(F.sum("lag").alias("total_lag"), F.count("*").alias("partitions"))
    return lag, totals


def rebalance_timeline(groups: DataFrame, storm_window_minutes: int = 5, storm_threshold: int = 10
                       ) -> tuple[DataFrame, DataFrame]:
    """Per group and generation: when, who joined/left, leader; plus storm detection."""
    order = Window.partitionBy("group").orderBy("log_offset")
    ids = F.transform("members", lambda m: m["member_id"])
    timeline = (groups.where("NOT tombstone")
                .withColumn("member_ids", ids)
                .withColumn("previous_ids", F.lag("member_ids").over(order))
                .withColumn("previous_time", F.lag("state_timestamp").over(order))
                .withColumn("joined", F.array_except("member_ids", F.coalesce("previous_ids", F.array())))
                .withColumn("left", F.array_except(F.coalesce("previous_ids", F.array()), "member_ids"))
                .withColumn("since_previous_ms", F.col("state_timestamp") - F.col("previous_time"))
                .withColumn("time", F.timestamp_millis("state_timestamp"))
                .select("group", "generation", "time", "member_count", "joined", "left", "protocol", "leader",
                        "since_previous_ms"))
    per_window = (timeline.groupBy("group", F.window("time", f"{storm_window_minutes} minutes").alias("window"))
                  .agg(F.count("*").alias("rebalances")))
    storms = (per_window.groupBy("group")
              .agg(F.sum("rebalances").alias("rebalances"), F.max("rebalances").alias("max_per_window"))
              .withColumn("storm", F.col("max_per_window") > storm_threshold))
    return timeline, storms


def commit_rate(commits: DataFrame) -> DataFrame:
    """Commits per group per minute (one per partition committed)."""
    return (commits.where("NOT tombstone")
            .groupBy("group", F.window(F.timestamp_millis("commit_timestamp"), "1 minute").alias("w"))
            .agg(F.count("*").alias("commits"))
            .select("group", F.col("w.start").alias("minute"), "commits"))
