"""The outputs, as DataFrame transformations: committed offsets, consumer lag (now and over
time, with Burrow's verdicts), rebalance timeline (with storm detection) and commit rate.
Input: the `kafka-offsets` rows and the topic logs' batch headers."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from .segments import OFFSETS_TOPIC, batch_times, log_end_offset, partition_dirs


def commits(offsets: DataFrame) -> DataFrame:
    """One row per OffsetCommit record (tombstone: a deleted offset)."""
    return offsets.where("kind = 'commit'").select(
        "group",
        "topic",
        "partition",
        "offset",
        "leader_epoch",
        "metadata",
        "commit_timestamp",
        "expire_timestamp",
        "tombstone",
        "log_partition",
        "log_offset",
        "batch_offset",
        "record_timestamp",
    )


def groups(offsets: DataFrame) -> DataFrame:
    """One row per GroupMetadata record (one generation's membership; tombstone: group deleted),
    and per KIP-848 group epoch (group_type consumer; generation is the epoch)."""
    return offsets.where("kind = 'group'").select(
        "group",
        "group_type",
        "generation",
        "protocol_type",
        "protocol",
        "leader",
        "state_timestamp",
        "member_count",
        "members",
        "tombstone",
        "log_partition",
        "log_offset",
        "record_timestamp",
    )


def errors(offsets: DataFrame) -> DataFrame:
    """Bad batches and undecodable records of `__consumer_offsets`: (topic, partition, offset,
    file, error), the shape of the kafka-log source's error rows."""
    return offsets.where("kind = 'error'").select(
        F.lit(OFFSETS_TOPIC).alias("topic"),
        F.col("log_partition").alias("partition"),
        F.col("log_offset").alias("offset"),
        "file",
        "byte_start",
        "byte_end",
        "error",
    )


def affected_by_bad_batches(bad: DataFrame, commits: DataFrame, groups: DataFrame) -> DataFrame:
    """What each bad range may have held: in `__consumer_offsets`, any record of the groups
    that live in that log partition (a group's records all go to one; which ones the range
    held cannot be known), so their offsets, lag and generations may be stale; in a topic
    log, the partition's messages, so the lag of every group committing to it may be off.
    (group, topic, partition) rows to flag; topic and partition null for a whole group."""
    in_offsets = bad.where(F.col("topic") == OFFSETS_TOPIC).select(F.col("partition").alias("log_partition")).distinct()
    members = commits.select("group", "log_partition").unionByName(groups.select("group", "log_partition")).distinct()
    whole_groups = members.join(in_offsets, "log_partition").select(
        "group", F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int").alias("partition")
    )
    in_topics = bad.where(F.col("topic") != OFFSETS_TOPIC).select("topic", "partition").distinct()
    partitions = commits.select("group", "topic", "partition").distinct().join(in_topics, ["topic", "partition"])
    return whole_groups.unionByName(partitions.select("group", "topic", "partition")).distinct()


def bad_batches_with_groups(bad: DataFrame, commits: DataFrame, groups: DataFrame) -> DataFrame:
    """The bad ranges, each with `affected_groups`: the groups whose rows it may affect (see
    affected_by_bad_batches), sorted."""
    members = (
        commits.select("group", "log_partition")
        .unionByName(groups.select("group", "log_partition"))
        .distinct()
        .select(F.lit(OFFSETS_TOPIC).alias("topic"), F.col("log_partition").alias("partition"), "group")
    )
    readers = commits.select("topic", "partition", "group").distinct()
    return (
        bad.join(members.unionByName(readers), ["topic", "partition"], "left")
        .groupBy(*bad.columns)
        .agg(F.sort_array(F.collect_set("group")).alias("affected_groups"))
    )


def flag_suspect(df: DataFrame, affected: DataFrame) -> DataFrame:
    """df with `suspect`: true for rows of a group (or group and topic partition) that a bad
    range may have affected (affected_by_bad_batches)."""
    whole = affected.where("topic IS NULL").select("group", F.lit(True).alias("_whole"))
    parts = affected.where("topic IS NOT NULL").select("group", "topic", "partition", F.lit(True).alias("_part"))
    out = df.join(whole, "group", "left")
    if "topic" in df.columns:
        out = out.join(parts, ["group", "topic", "partition"], "left")
    else:
        out = out.withColumn("_part", F.lit(None))
    return out.withColumn("suspect", F.coalesce("_whole", "_part", F.lit(False))).drop("_whole", "_part")


def committed_offsets(commits: DataFrame) -> DataFrame:
    """The last record per (group, topic, partition), tombstones applied: what OffsetFetch answers.

    A group's records all live in one `__consumer_offsets` partition, so log order is
    log_offset order."""
    latest = Window.partitionBy("group", "topic", "partition").orderBy(F.col("log_offset").desc())
    return (
        commits.withColumn("rank", F.row_number().over(latest))
        .where("rank = 1 AND NOT tombstone")
        .select(
            "group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp"
        )
    )


def log_end_offsets(spark: SparkSession, data_dir: str, on_driver: bool = False) -> DataFrame:
    """(topic, partition, log_start_offset, log_end_offset) of every topic partition log,
    from batch headers only (the partitions are spread over the executors, or read here
    with on_driver: for small inputs, where starting Python workers costs more)."""
    dirs = [(t, p, str(d)) for t, p, d in partition_dirs(data_dir) if t != OFFSETS_TOPIC]
    schema = "topic string, partition int, log_start_offset long, log_end_offset long"
    if not dirs or on_driver:
        return _local(spark, [(t, p, *log_end_offset(d)) for t, p, d in dirs], schema)
    n = max(1, min(len(dirs), spark.sparkContext.defaultParallelism))
    rdd = spark.sparkContext.parallelize(dirs, n).map(lambda d: (d[0], d[1], *log_end_offset(d[2])))
    return spark.createDataFrame(rdd, schema)


def log_batches(spark: SparkSession, data_dir: str, on_driver: bool = False) -> DataFrame:
    """(topic, partition, base_offset, next_offset, first_timestamp, max_timestamp) of every
    batch of every topic partition log, from headers only (on_driver: as log_end_offsets)."""
    dirs = [(t, p, str(d)) for t, p, d in partition_dirs(data_dir) if t != OFFSETS_TOPIC]
    schema = "topic string, partition int, base_offset long, next_offset long, first_timestamp long, max_timestamp long"
    if not dirs or on_driver:
        return _local(spark, [(t, p, *b) for t, p, d in dirs for b in batch_times(d)], schema)
    n = max(1, min(len(dirs), spark.sparkContext.defaultParallelism))
    rdd = spark.sparkContext.parallelize(dirs, n).flatMap(lambda d: ((d[0], d[1], *b) for b in batch_times(d[2])))
    return spark.createDataFrame(rdd, schema)


def _local(spark: SparkSession, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
    """A DataFrame of rows made on the driver, handed to Spark as Arrow columns (Python rows
    would be unpickled one by one in the JVM). schema: string and int/long columns only."""
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64()}
    fields = [pa.field(name, types[kind]) for name, kind in (f.split() for f in schema.split(", "))]
    columns = list(zip(*rows)) or [()] * len(fields)
    return spark.createDataFrame(
        pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, fields)], schema=pa.schema(fields))
    )


def lag_history(commits: DataFrame, batches: DataFrame) -> DataFrame:
    """Per commit (group, topic, partition, commit time): the committed offset, the partition's
    log end offset at that time and the lag, in messages and in seconds.

    The log end offset at time T is the end of the last batch whose latest timestamp is <= T
    (a batch's timestamps are its producer's create times, close to its append time, or the
    broker's with LogAppendTime). Lag in seconds is T minus the timestamp of the first
    message not consumed yet (the committed offset), 0 when caught up; that timestamp is the
    first timestamp of the batch holding the offset, exact when the offset starts a batch
    (and at most the batch's time span early otherwise). Both come from window functions over
    one timeline per partition (no join of every commit with every batch). Commits to
    partitions without a topic log here have no end offset and no lag (and are not sorted)."""
    tp = ["topic", "partition"]
    all_commits = commits.where("NOT tombstone").select(
        "group", "topic", "partition", F.col("offset").alias("committed_offset"), "commit_timestamp", "log_offset"
    )
    logs = batches.select(*tp).distinct()
    c = all_commits.join(logs, tp, "left_semi")
    # The end offset at commit time: batches and commits on one time line, batches first at a tie.
    timeline = c.select(
        *tp,
        F.col("commit_timestamp").alias("at"),
        F.lit(1).alias("kind"),
        "group",
        "committed_offset",
        "commit_timestamp",
        "log_offset",
        F.lit(None).cast("long").alias("next_offset"),
    ).unionByName(
        batches.select(
            *tp,
            F.col("max_timestamp").alias("at"),
            F.lit(0).alias("kind"),
            F.lit(None).cast("string").alias("group"),
            F.lit(None).cast("long").alias("committed_offset"),
            F.lit(None).cast("long").alias("commit_timestamp"),
            F.lit(None).cast("long").alias("log_offset"),
            "next_offset",
        )
    )
    so_far = Window.partitionBy(*tp).orderBy("at", "kind").rowsBetween(Window.unboundedPreceding, 0)
    with_end = (
        timeline.withColumn("log_end_offset", F.coalesce(F.max("next_offset").over(so_far), F.lit(0)))
        .where("kind = 1")
        .drop("kind", "at", "next_offset")
    )
    # The first unconsumed message's time: the batch with the greatest base offset <= the committed offset.
    by_offset = c.select(
        *tp,
        F.col("committed_offset").alias("at"),
        F.lit(1).alias("kind"),
        "group",
        "log_offset",
        F.lit(None).cast("long").alias("first_timestamp"),
    ).unionByName(
        batches.select(
            *tp,
            F.col("base_offset").alias("at"),
            F.lit(0).alias("kind"),
            F.lit(None).cast("string").alias("group"),
            F.lit(None).cast("long").alias("log_offset"),
            "first_timestamp",
        )
    )
    upto = Window.partitionBy(*tp).orderBy("at", "kind").rowsBetween(Window.unboundedPreceding, 0)
    times = (
        by_offset.withColumn("message_timestamp", F.last("first_timestamp", ignorenulls=True).over(upto))
        .where("kind = 1")
        .select("group", *tp, "log_offset", "message_timestamp")
    )
    lag = F.greatest(F.col("log_end_offset") - F.col("committed_offset"), F.lit(0))
    columns: list[Column | str] = [
        "group",
        *tp,
        F.timestamp_millis("commit_timestamp").alias("commit_time"),
        "commit_timestamp",
        "committed_offset",
        "log_end_offset",
        "lag",
        "lag_seconds",
        "log_offset",
    ]
    with_log = (
        with_end.join(times, ["group", *tp, "log_offset"], "left")
        .withColumn("lag", lag)
        .withColumn(
            "lag_seconds",
            F.when(lag == 0, F.lit(0.0)).otherwise(
                F.greatest((F.col("commit_timestamp") - F.col("message_timestamp")) / 1000.0, F.lit(0.0))
            ),
        )
        .select(*columns)
    )
    without_log = (
        all_commits.join(logs, tp, "left_anti")
        .withColumn("log_end_offset", F.lit(None).cast("long"))
        .withColumn("lag", F.lit(None).cast("long"))
        .withColumn("lag_seconds", F.lit(None).cast("double"))
        .select(*columns)
    )
    return with_log.unionByName(without_log)


def _verdict(status: str, rule: str) -> Column:
    return F.struct(F.lit(status).alias("status"), F.lit(rule).alias("rule"))


# Burrow's partition statuses, by severity; a group's status is its worst partition's, capped at ERR.
BURROW_SEVERITY = {"OK": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}


def as_of(batches: DataFrame, commits: DataFrame) -> DataFrame:
    """One row, `as_of_ms`: the time of the latest record in the data dir, a topic batch's or a
    commit's (0 if there is none)."""
    return (
        batches.select(F.max("max_timestamp").alias("t"))
        .unionByName(commits.select(F.max("commit_timestamp").alias("t")))
        .agg(F.greatest(F.max("t"), F.lit(0)).alias("as_of_ms"))
    )


def lag_status(history: DataFrame, lag: DataFrame, as_of_ms: DataFrame, window: int = 10) -> DataFrame:
    """Burrow's consumer lag evaluation over each partition's last `window` commits (Burrow's
    `intervals`), as of `as_of_ms` (a one-row DataFrame, see `as_of`; joined rather than
    collected, so that nothing waits for it before the outputs are written): OK when
    there is no lag now or the lag was zero at some commit in the window; otherwise, in this
    order, REWIND (a committed offset went back), STOP (no commit for longer than the
    window spans), STALL (commits that do not move the offset), WARN (the lag never
    decreased), else OK. `rule` says which fired. Partitions without a topic log are left out.
    These are the rules of `coordinator.metrics.lag.partition_status`, which the server's
    metrics and `kcoord groups status` use, stated over DataFrames (see its module for why
    the two can judge one group differently)."""
    tp = ["group", "topic", "partition"]
    newest_first = Window.partitionBy(*tp).orderBy(F.col("log_offset").desc())
    oldest_first = Window.partitionBy(*tp).orderBy("log_offset")
    w = (
        history.where("lag IS NOT NULL")
        .withColumn("rank", F.row_number().over(newest_first))
        .where(F.col("rank") <= window)
        .withColumn("prev_offset", F.lag("committed_offset").over(oldest_first))
        .withColumn("prev_lag", F.lag("lag").over(oldest_first))
    )
    first = F.col("prev_offset").isNull()
    per = w.groupBy(*tp).agg(
        F.count("*").alias("commits_in_window"),
        F.bool_or(F.col("lag") == 0).alias("zero_lag_seen"),
        F.bool_or(~first & (F.col("committed_offset") < F.col("prev_offset"))).alias("rewound"),
        F.bool_and(first | (F.col("committed_offset") == F.col("prev_offset"))).alias("offset_fixed"),
        F.bool_and(first | (F.col("lag") >= F.col("prev_lag"))).alias("lag_not_decreasing"),
        F.min("commit_timestamp").alias("window_start_ms"),
        F.max("commit_timestamp").alias("window_end_ms"),
    )
    stopped = (F.col("as_of_ms") - F.col("window_end_ms")) > (F.col("window_end_ms") - F.col("window_start_ms"))
    now = lag.where("lag IS NOT NULL").select(*tp, F.col("lag").alias("current_lag"))
    lagging = (F.col("current_lag") > 0) & ~F.col("zero_lag_seen")
    verdict = (
        F.when(~lagging & (F.col("current_lag") == 0), _verdict("OK", "no lag now"))
        .when(~lagging, _verdict("OK", "the lag was zero within the window"))
        .when(F.col("rewound"), _verdict("REWIND", "a committed offset went back"))
        .when(stopped, _verdict("STOP", "no commit for longer than the window spans"))
        .when(F.col("offset_fixed"), _verdict("STALL", "commits do not move the offset"))
        .when(F.col("lag_not_decreasing"), _verdict("WARN", "the lag never decreased"))
        .otherwise(_verdict("OK", "the lag decreased"))
    )
    return (
        per.join(now, tp)
        .crossJoin(as_of_ms)
        .withColumn("v", verdict)
        .select(
            *tp,
            "v.status",
            "v.rule",
            "current_lag",
            "commits_in_window",
            F.timestamp_millis("window_start_ms").alias("window_start"),
            F.timestamp_millis("window_end_ms").alias("window_end"),
        )
    )


def lag_status_groups(partitions: DataFrame) -> DataFrame:
    """Per group, from lag_status: the worst partition, with STOP, STALL and REWIND counted as
    ERR, as Burrow."""
    severity = F.create_map(*[x for k, v in BURROW_SEVERITY.items() for x in (F.lit(k), F.lit(v))])
    return (
        partitions.withColumn("severity", severity[F.col("status")])
        .groupBy("group")
        .agg(
            F.max("severity").alias("worst"),
            F.sum("current_lag").alias("total_lag"),
            F.count("*").alias("partitions"),
            F.count_if(F.col("status") != "OK").alias("partitions_not_ok"),
        )
        .withColumn("status", F.when(F.col("worst") >= 3, "ERR").when(F.col("worst") == 2, "WARN").otherwise("OK"))
        .select("group", "status", "total_lag", "partitions", "partitions_not_ok")
    )


def deleted_offsets(commits: DataFrame) -> DataFrame:
    """(group, topic, partition, deleted_at): partitions whose last record is a tombstone
    (OffsetDelete, DeleteGroups, expiry): what OffsetFetch no longer answers."""
    latest = Window.partitionBy("group", "topic", "partition").orderBy(F.col("log_offset").desc())
    return (
        commits.withColumn("rank", F.row_number().over(latest))
        .where("rank = 1 AND tombstone")
        .select("group", "topic", "partition", F.timestamp_millis("record_timestamp").alias("deleted_at"))
    )


def consumer_lag(committed: DataFrame, ends: DataFrame, deleted: DataFrame | None = None) -> DataFrame:
    """Per partition: log end offset - committed offset (null when the topic partition has no
    log here); a partition whose offset was deleted is a row with `deleted` set and no offset."""
    lag = (
        committed.join(ends, ["topic", "partition"], "left")
        .withColumn(
            "lag",
            F.when(
                F.col("log_end_offset").isNotNull(),  # greatest() would skip the null
                F.greatest(F.col("log_end_offset") - F.col("offset"), F.lit(0)),
            ),
        )
        .withColumn("deleted", F.lit(False))
        .select("group", "topic", "partition", "offset", "log_start_offset", "log_end_offset", "lag", "deleted")
    )
    if deleted is not None:
        lag = lag.unionByName(
            deleted.select(
                "group",
                "topic",
                "partition",
                F.lit(None).cast("long").alias("offset"),
                F.lit(None).cast("long").alias("log_start_offset"),
                F.lit(None).cast("long").alias("log_end_offset"),
                F.lit(None).cast("long").alias("lag"),
                F.lit(True).alias("deleted"),
            )
        )
    return lag


def consumer_lag_totals(lag: DataFrame) -> DataFrame:
    """Per group, from consumer_lag: total lag, partitions, partitions without a log, deleted
    partitions."""
    live = ~F.col("deleted")
    return lag.groupBy("group").agg(
        F.coalesce(F.sum("lag"), F.lit(0)).alias("total_lag"),
        F.count_if(live).alias("partitions"),
        F.count_if(live & F.col("log_end_offset").isNull()).alias("partitions_without_log"),
        F.count_if(F.col("deleted")).alias("deleted_partitions"),
    )


def group_states(groups: DataFrame, commits: DataFrame) -> DataFrame:
    """Per group, as its last record leaves it: group_type, state (Dead: deleted; Empty: no
    members; else Stable, as the coordinator loads a group with members), generation (a
    consumer group's epoch), members, when. A group with committed offsets and no group
    record (a consumer without group management) is an Empty classic group, as in Kafka."""
    last = Window.partitionBy("group").orderBy(F.col("log_offset").desc())
    recorded = (
        groups.withColumn("rank", F.row_number().over(last))
        .where("rank = 1")
        .select(
            "group",
            "group_type",
            F.when(F.col("tombstone"), "Dead")
            .when(F.col("member_count") == 0, "Empty")
            .otherwise("Stable")
            .alias("state"),
            "generation",
            F.coalesce("member_count", F.lit(0)).alias("member_count"),
            F.timestamp_millis("record_timestamp").alias("since"),
        )
    )
    offsets_only = (
        commits.groupBy("group")
        .agg(F.max("record_timestamp").alias("ts"))
        .join(recorded.select("group"), "group", "left_anti")
        .select(
            "group",
            F.lit("classic").alias("group_type"),
            F.lit("Empty").alias("state"),
            F.lit(None).cast("int").alias("generation"),
            F.lit(0).alias("member_count"),
            F.timestamp_millis("ts").alias("since"),
        )
    )
    return recorded.unionByName(offsets_only)


def ownership(groups: DataFrame) -> DataFrame:
    """Who owned which partition in each generation (a consumer group's epoch): one row per
    (group, generation, topic, partition) with the member's id, instance id, client id and
    host; from the generation's last record (see pipeline.decode for where partitions come from)."""
    last_per_generation = Window.partitionBy("group", "group_type", "generation").orderBy(F.col("log_offset").desc())
    time_ms = F.when(F.col("state_timestamp") >= 0, F.col("state_timestamp")).otherwise(F.col("record_timestamp"))
    return (
        groups.where("NOT tombstone")
        .withColumn("rank", F.row_number().over(last_per_generation))
        .where("rank = 1")
        .select(
            "group",
            "group_type",
            "generation",
            F.timestamp_millis(time_ms).alias("since"),
            F.explode("members").alias("m"),
        )
        .select(
            "group",
            "group_type",
            "generation",
            "since",
            F.explode("m.partitions").alias("p"),
            F.col("m.member_id").alias("member_id"),
            F.col("m.group_instance_id").alias("group_instance_id"),
            F.col("m.client_id").alias("client_id"),
            F.col("m.client_host").alias("client_host"),
        )
        .select(
            "group",
            "group_type",
            "generation",
            "since",
            F.col("p.topic").alias("topic"),
            F.col("p.partition").alias("partition"),
            "member_id",
            "group_instance_id",
            "client_id",
            "client_host",
        )
    )


def rebalance_timeline(groups: DataFrame, storm_window_minutes: int = 5, storm_threshold: int = 10) -> DataFrame:
    """Per group and generation: when, member count, joined/left members, protocol, leader,
    time since the previous generation, rebalances within the storm window that ends there.

    A generation may be stored more than once (e.g. a static member replaced): its last
    record counts. A storm: more than storm_threshold rebalances within storm_window_minutes."""
    window_ms = storm_window_minutes * 60_000
    last_per_generation = Window.partitionBy("group", "group_type", "generation").orderBy(F.col("log_offset").desc())
    order = Window.partitionBy("group").orderBy("log_offset")
    recent = Window.partitionBy("group").orderBy("time_ms").rangeBetween(-window_ms, 0)
    return (
        groups.where("NOT tombstone")
        .withColumn("rank", F.row_number().over(last_per_generation))
        .where("rank = 1")
        .withColumn(
            "time_ms",
            F.when(F.col("state_timestamp") >= 0, F.col("state_timestamp")).otherwise(F.col("record_timestamp")),
        )
        .withColumn("member_ids", F.transform("members", lambda m: m["member_id"]))
        .withColumn("previous_ids", F.coalesce(F.lag("member_ids").over(order), F.array()))
        .withColumn("joined", F.array_except("member_ids", "previous_ids"))
        .withColumn("left", F.array_except("previous_ids", "member_ids"))
        .withColumn("since_previous_ms", F.col("time_ms") - F.lag("time_ms").over(order))
        .withColumn("rebalances_in_window", F.count("*").over(recent))
        .withColumn("storm", F.col("rebalances_in_window") > storm_threshold)
        .select(
            "group",
            "generation",
            F.timestamp_millis("time_ms").alias("time"),
            "member_count",
            "member_ids",
            "joined",
            "left",
            "group_type",
            "protocol_type",
            "protocol",
            "leader",
            "since_previous_ms",
            "rebalances_in_window",
            "storm",
        )
    )


def rebalance_summary(timeline: DataFrame) -> DataFrame:
    """Per group, from rebalance_timeline: rebalances, the last generation, the most within a
    storm window, whether and when a storm began."""
    return timeline.groupBy("group").agg(
        F.count("*").alias("rebalances"),
        F.max("generation").alias("last_generation"),
        F.max("rebalances_in_window").alias("max_in_window"),
        F.bool_or("storm").alias("storm"),
        F.min(F.when(F.col("storm"), F.col("time"))).alias("first_storm_at"),
    )


def commit_rate(commits: DataFrame) -> DataFrame:
    """Per group per minute: offset commit records (one per committed partition) and the
    record batches that carried them. The log does not say how many requests there were: a
    request's partitions share one batch, but a server may put several requests in one batch
    (this one merges appends that arrive together; Kafka does not), so `batches` is at most
    the number of requests, never more."""
    return (
        commits.where("NOT tombstone")
        .groupBy("group", F.window(F.timestamp_millis("commit_timestamp"), "1 minute").alias("w"))
        .agg(F.count("*").alias("commits"), F.count_distinct("log_partition", "batch_offset").alias("batches"))
        .select("group", F.col("w.start").alias("minute"), "commits", "batches")
    )
