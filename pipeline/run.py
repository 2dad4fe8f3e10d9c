"""Analytics job over a server data dir: Parquet outputs, report.html and a terminal summary.

    python -m pipeline.run --data-dir DIR --out OUT [--master URL]
    spark-submit --master spark://host:7077 pipeline/run.py --data-dir DIR --out OUT

Outputs under OUT: committed_offsets, consumer_lag, consumer_lag_totals, lag_history, lag_status,
lag_status_groups, group_states, ownership, rebalance_timeline, rebalance_summary, commit_rate,
share_progress, bad_batches (Parquet directories) and report.html.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (read as untyped: see pyproject's mypy settings)
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from pipeline.jvm_archive import Archive

SMALL_INPUT_BYTES = 4 << 20  # segment bytes up to which the job reads the files on the driver
WRITERS = 3  # a small input's outputs written at once
OUTPUTS = (
    "committed_offsets",
    "consumer_lag",
    "consumer_lag_totals",
    "lag_history",
    "lag_status",
    "lag_status_groups",
    "group_states",
    "ownership",
    "rebalance_timeline",
    "rebalance_summary",
    "commit_rate",
    "share_progress",
    "bad_batches",
)


LEAN_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"  # a local JVM's for a short job (spark_session)


def spark_session(master: str | None, app: str = "kafka-coordinator-analytics", progress: bool = True) -> SparkSession:
    """A session on `master` (default local[*]); stop it with `stop_session`."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from pipeline.jvm_archive import Archive

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local workers use this interpreter
    builder = (
        SparkSession.builder.appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", str(progress).lower())
    )
    archive = None
    own_jvm = "PYSPARK_GATEWAY_PORT" not in os.environ and SparkContext._gateway is None
    if own_jvm and (master or "local").startswith("local"):
        # A local JVM that lives for one short job: the C1 compiler alone and a serial
        # collector start faster and run such jobs sooner than the server-class defaults,
        # and the classes the last run loaded are mapped from an archive, not read from jars.
        archive = Archive(LEAN_JVM_OPTIONS)
        builder = builder.config("spark.driver.extraJavaOptions", f"{LEAN_JVM_OPTIONS} {archive.options}".strip())
    if master:
        builder = builder.master(master)
    elif own_jvm:  # not launched by spark-submit: run here
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master("local[*]")
    session = builder.getOrCreate()
    if archive is not None:
        _archives[id(session)] = archive
    return session


def first_value(df: DataFrame) -> Any:
    """The first column of df's first row (None for no rows)."""
    row = df.first()
    return None if row is None else row[0]


def stop_session(spark: SparkSession) -> None:
    """Stop a session from `spark_session` (the first run on a machine then writes the JVM's
    class archive for the next ones, see pipeline/jvm_archive.py)."""
    archive = _archives.pop(id(spark), None)
    archive.stop(spark) if archive is not None else spark.stop()


# The class archive of each session spark_session made (by id: a session is one per JVM, and
# stop_session forgets it), which its stop writes on a machine's first run.
_archives: dict[int, Archive] = {}


def ship_code(spark: SparkSession) -> str:
    """Zip the `pipeline` and `protocol` packages and add them to every executor's Python path
    (what `--py-files` would do). Executors still need aiokafka, crc32c, cramjam, pyarrow."""
    root = Path(__file__).resolve().parent.parent
    fd, path = tempfile.mkstemp(prefix="kcoord-pipeline-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(path, "w") as z:
        for package in ("pipeline", "protocol"):
            for f in sorted((root / package).rglob("*.py")):
                z.write(f, f.relative_to(root))
    spark.sparkContext.addPyFile(path)
    return path


class Outputs:
    """Where the outputs go: a local dir, a file:// URI, or any Hadoop FS URI (hdfs://,
    s3a://, ...) that Spark can write; report.html goes beside the Parquet outputs."""

    def __init__(self, spark: SparkSession, out: str) -> None:
        self.spark = spark
        self.uri = out.rstrip("/") or out
        if out.startswith("file://"):
            self.local: Path | None = Path(out[len("file://") :])
        else:
            self.local = None if "://" in out else Path(out)
        if self.local is not None:
            self.local.mkdir(parents=True, exist_ok=True)

    def of(self, name: str) -> str:
        return str(self.local / name) if self.local is not None else f"{self.uri}/{name}"

    def write_file(self, name: str, write: Callable[[Path], object]) -> str:
        """write(path) makes the file locally; on a Hadoop FS it is then copied there."""
        if self.local is not None:
            write(self.local / name)
            return str(self.local / name)
        with tempfile.TemporaryDirectory() as tmp:
            write(Path(tmp) / name)
            jvm = self.spark._jvm
            assert jvm is not None  # (a live session's gateway)
            target = jvm.org.apache.hadoop.fs.Path(self.of(name))
            fs = target.getFileSystem(self.spark._jsc.hadoopConfiguration())
            fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path(str(Path(tmp) / name)), target)
        return self.of(name)


def check_data_dir(data_dir: str) -> tuple[str | None, bool]:
    """(an error for a data dir that cannot be read, whether it holds any segment file),
    found before Spark starts: a mistyped path costs a line, not a JVM start and a traceback."""
    from pipeline.segments import segment_files

    path = Path(data_dir[len("file://") :] if data_dir.startswith("file://") else data_dir)
    try:
        return None, bool(segment_files(path))
    except OSError as e:
        return f"data dir {data_dir}: {e.strerror or e}", False


def check_out(out: str) -> str | None:
    """An error for a local --out that cannot be made a writable directory, found before Spark
    starts (a Hadoop FS URI is Spark's to check)."""
    if "://" in out and not out.startswith("file://"):
        return None
    path = Path(out[len("file://") :] if out.startswith("file://") else out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as e:
        return f"output dir {out}: {e.strerror or e}"
    return None


class Progress:
    def __init__(self, steps: int, log: Callable[[str], object]) -> None:
        self.steps, self.done, self.log, self.t0 = steps, 0, log, time.perf_counter()
        self.lock = threading.Lock()

    def __call__(self, what: str) -> None:
        with self.lock:
            self.done += 1
            self.log(f"[{self.done}/{self.steps} {time.perf_counter() - self.t0:6.1f} s] {what}")


def is_small(data_dir: str) -> bool:
    """A small data dir is read on the driver in one pass: the data sources' Python workers
    would cost more than the reading (on a cluster the driver sees the same shared volume)."""
    from pipeline.segments import segment_files

    return sum(f.size for f in segment_files(data_dir)) <= SMALL_INPUT_BYTES


def run(
    spark: SparkSession,
    data_dir: str,
    out: str,
    storm_threshold: int = 10,
    storm_window_minutes: int = 5,
    verify_topics: bool = False,
    log: Callable[[str], object] = print,
    lag_window: int = 10,
    offsets: DataFrame | None = None,
) -> dict[str, object]:
    """Write every output and the report; returns the summary shown at the end.

    `__consumer_offsets` is always CRC-checked (it is decoded); topic logs only have their
    batch headers read for end offsets, unless verify_topics (a CRC pass over all their data)."""
    from pyspark.sql import functions as F

    from pipeline import analytics, read_logs, read_offsets, report
    from pipeline.segments import OFFSETS_TOPIC, partition_dirs

    started = time.perf_counter()
    if spark.conf.get("spark.sql.shuffle.partitions") == "200":  # Spark's default: 200 tiny tasks here
        spark.conf.set("spark.sql.shuffle.partitions", str(2 * spark.sparkContext.defaultParallelism))
    # Standard Parquet timestamps (not Spark's legacy INT96), as the driver-side writer below makes.
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    step = Progress(8, log)
    outputs = Outputs(spark, out)

    small = is_small(data_dir)
    if small:
        spark.conf.set("spark.sql.shuffle.partitions", "1")  # a task per shuffle is all it needs
        # Expressions and operators interpreted, not compiled to Java: on a few thousand rows a
        # fresh JVM spends longer generating and compiling code (Janino, then C1) than running
        # it. (factoryMode is internal, honoured since Spark 2.4; Spark's own tests use it.)
        spark.conf.set("spark.sql.codegen.wholeStage", "false")
        spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        # One plan per query, not one per stage: adaptive execution re-plans after every
        # shuffle, which a cold JVM pays for in seconds, and has nothing to adapt in one partition.
        spark.conf.set("spark.sql.adaptive.enabled", "false")
    # The outputs of a small input, to a local dir, are written on the driver from Arrow and
    # kept for the report: a fresh JVM's Parquet writer, and reading the files back, cost more.
    kept: dict[str, object] | None = {} if small and outputs.local is not None else None

    # A small input's outputs are written by a few threads, each a Spark job of its own: such a
    # job is mostly the driver planning it, which runs beside another job's tasks that way. A
    # large input's jobs each keep every core busy, so they run one after another.
    writers = ThreadPoolExecutor(WRITERS if small else 1, thread_name_prefix="output-writer")
    writes = []

    def write(df: DataFrame, name: str) -> None:
        if kept is None or outputs.local is None:
            df.write.mode("overwrite").parquet(outputs.of(name))
        else:
            kept[name] = write_parquet_dir(df.toArrow(), outputs.local / name)

    def save(df: DataFrame, name: str) -> None:
        writes.append(writers.submit(write, df, name))

    cached = []

    def cache(df: DataFrame) -> DataFrame:
        cached.append(df.cache())
        return df

    # Making a DataFrame is a round trip to the JVM per column expression and an analysis of
    # the plan so far: the outputs that need nothing from the jobs below are made by other
    # threads, beside those jobs and the main thread's work.
    def membership(commits: DataFrame, groups: DataFrame) -> None:
        step("ownership, rebalance timeline and storms, commit rate")
        save(analytics.ownership(groups).orderBy("group", "generation", "topic", "partition"), "ownership")
        timeline = cache(analytics.rebalance_timeline(groups, storm_window_minutes, storm_threshold))
        save(timeline.orderBy("group", "generation"), "rebalance_timeline")
        save(analytics.rebalance_summary(timeline).orderBy("group"), "rebalance_summary")
        save(analytics.commit_rate(commits).orderBy("group", "minute"), "commit_rate")

    def lag_over_time(commits: DataFrame) -> tuple[DataFrame, DataFrame, Future[Any]]:
        step("lag over time (topic log batch times)")
        batches = cache(analytics.log_batches(spark, data_dir, small))
        history = cache(analytics.lag_history(commits, batches))
        save(history.drop("log_offset").orderBy("group", "topic", "partition", "commit_time"), "lag_history")
        as_of = analytics.as_of(batches, commits)
        return history, as_of, writers.submit(lambda: first_value(as_of))  # (the report's as-of time)

    planners = ThreadPoolExecutor(2, thread_name_prefix="output-planner")
    try:
        verifying = ", CRC-checking topic logs" if verify_topics else ""
        step(
            f"decoding __consumer_offsets segments (CRC-checked){verifying}"
            + (" on the driver (a small input)" if small else "")
        )
        # (`offsets`: rows decoded already, by the streaming job or while the JVM started)
        offsets = cache(read_offsets(spark, data_dir, on_driver=small) if offsets is None else offsets)
        # The first job in the writers' queue: a large input's single writer runs it before any
        # output, so it fills the cache alone (jobs beside it would read the files again).
        counting = writers.submit(lambda: {r.kind: r["count"] for r in offsets.groupBy("kind").count().collect()})
        commits, groups = analytics.commits(offsets), analytics.groups(offsets)
        membership_planned = planners.submit(membership, commits, groups)
        history_planned = planners.submit(lag_over_time, commits)
        counts = counting.result()
        bad = analytics.errors(offsets)
        topics = sorted({t for t, _, _ in partition_dirs(data_dir) if t != OFFSETS_TOPIC})
        if not counts.get("error"):  # known to be empty: Spark then plans the joins below as nothing
            bad = bad.limit(0)
        if verify_topics and topics:
            bad = bad.unionByName(
                read_logs(spark, data_dir, topics=",".join(topics), errorsOnly="true").select(
                    "topic", "partition", "offset", "file", "byte_start", "byte_end", "error"
                )
            )
        bad = cache(analytics.bad_batches_with_groups(bad, commits, groups).orderBy("file", "byte_start"))
        save(bad, "bad_batches")
        bad_rows = bad.collect()
        # Rows that a bad range may have made stale are flagged `suspect` (none without bad ranges).
        affected = cache(analytics.affected_by_bad_batches(bad, commits, groups)) if bad_rows else None

        def flagged(df: DataFrame) -> DataFrame:
            if affected is None:
                return df.withColumn("suspect", F.lit(False))
            return analytics.flag_suspect(df, affected)

        step("committed offsets and consumer lag (topic log end offsets)")
        committed = cache(analytics.committed_offsets(commits))
        save(flagged(committed).orderBy("group", "topic", "partition"), "committed_offsets")
        lag = cache(
            analytics.consumer_lag(
                committed, analytics.log_end_offsets(spark, data_dir, small), analytics.deleted_offsets(commits)
            )
        )  # also behind the totals and status
        lag_totals = analytics.consumer_lag_totals(lag)
        states = cache(analytics.group_states(groups, commits))
        save(flagged(lag).orderBy("group", "topic", "partition"), "consumer_lag")
        save(
            flagged(lag_totals.join(states.select("group", "group_type", "state"), "group", "left")).orderBy("group"),
            "consumer_lag_totals",
        )
        save(flagged(states).orderBy("group"), "group_states")

        step("share-group progress (__share_group_state)")
        from pipeline.share import share_progress

        shares = share_progress(spark, data_dir, analytics.log_end_offsets(spark, data_dir, small))
        save(shares.orderBy("group", "topic", "partition"), "share_progress")

        step(f"Burrow's verdicts (the last {lag_window} commits of each partition)")
        history, as_of, as_of_ms = history_planned.result()
        status = cache(analytics.lag_status(history, lag.where("NOT deleted"), as_of, lag_window))
        save(status.orderBy("group", "topic", "partition"), "lag_status")
        save(analytics.lag_status_groups(status).orderBy("group"), "lag_status_groups")

        step("report")
        membership_planned.result()  # (then every write is in `writes`)
        for done in [*writes, as_of_ms]:
            done.result()  # an output's error is the job's
    finally:  # on an error, the outputs not started yet are dropped
        planners.shutdown(cancel_futures=True)
        writers.shutdown(cancel_futures=True)
    frames = report_frames(spark, outputs, kept, lag_totals)
    summary: dict[str, object] = {
        "data dir": data_dir,
        "offset commit records": counts.get("commit", 0),
        "group metadata records": counts.get("group", 0),
        "bad batches": len(bad_rows),
        "bad batch files": ", ".join(sorted({r.file for r in bad_rows})) or "-",
        "groups with offsets": len(frames["consumer_lag_totals"]),
        "groups in a rebalance storm": int(frames["rebalance_summary"]["storm"].sum())
        if len(frames["rebalance_summary"])
        else 0,
        "share-partitions": len(frames["share_progress"]),
    }
    as_of_text = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(as_of_ms.result() / 1000))
    report_at = outputs.write_file(
        "report.html", lambda path: report.write_html(path, summary, frames, lag_window, as_of_text)
    )
    for df in cached:
        df.unpersist()
    summary["seconds"] = round(time.perf_counter() - started, 1)
    step(f"done in {summary['seconds']} s")
    log(report.terminal_summary(summary, frames, [r.error for r in bad_rows]))
    log(f"outputs: {outputs.of('{' + ','.join(OUTPUTS) + '}')}  report: {report_at}")
    return summary


def write_parquet_dir(table: pa.Table, path: Path) -> pa.Table:
    """What Spark's overwrite would leave: `path` holding one Parquet file and _SUCCESS."""
    import pyarrow.parquet as pq

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    pq.write_table(table, path / "part-00000.parquet")
    (path / "_SUCCESS").touch()
    return table


REPORT_OUTPUTS = (
    "consumer_lag_totals",
    "rebalance_summary",
    "commit_rate",
    "bad_batches",
    "lag_status",
    "lag_status_groups",
    "share_progress",
)


def report_frames(
    spark: SparkSession, outputs: Outputs, kept: dict[str, Any] | None, lag_totals: DataFrame
) -> dict[str, Any]:
    """The pandas frames the report shows: whole small outputs, and of the large ones what the
    report charts (its TOP groups, the latest ROWS rebalances). `kept`: the outputs' Arrow
    tables when they were written on the driver, else they are read back from `outputs`."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from pipeline import report

    if kept is not None:

        def naive(table: pa.Table) -> Any:  # as Spark's toPandas gives them: UTC wall times, no zone
            return table.cast(
                pa.schema(
                    [
                        f.with_type(pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) else f
                        for f in table.schema
                    ]
                )
            ).to_pandas()

        frames = {name: naive(kept[name]) for name in REPORT_OUTPUTS}
        history, owners = naive(kept["lag_history"]), naive(kept["ownership"])
        top_lag = frames["consumer_lag_totals"].sort_values("total_lag", ascending=False)["group"].head(report.TOP)
        frames["lag_history"] = history[history["group"].isin(top_lag)]
        busiest = owners.groupby("group")["generation"].nunique().sort_values(ascending=False).head(report.TOP)
        frames["ownership"] = owners[owners["group"].isin(busiest.index)]
        frames["rebalance_timeline"] = (
            naive(kept["rebalance_timeline"]).sort_values("time", ascending=False).head(report.ROWS)
        )
        return frames

    def read(name: str) -> DataFrame:
        return spark.read.parquet(outputs.of(name))

    frames = {name: read(name).toPandas() for name in REPORT_OUTPUTS}
    top_lag = [r.group for r in lag_totals.orderBy(F.desc("total_lag")).limit(report.TOP).collect()]
    frames["lag_history"] = read("lag_history").where(F.col("group").isin(top_lag)).toPandas()
    owners = read("ownership")
    busiest = [
        r.group
        for r in owners.groupBy("group")
        .agg(F.count_distinct("generation").alias("n"))
        .orderBy(F.desc("n"))
        .limit(report.TOP)
        .collect()
    ]
    frames["ownership"] = owners.where(F.col("group").isin(busiest)).toPandas()
    frames["rebalance_timeline"] = read("rebalance_timeline").orderBy(F.desc("time")).limit(report.ROWS).toPandas()
    return frames


def follow(
    spark: SparkSession, data_dir: str, out: str, interval_seconds: float = 10.0, **job_options: Any
) -> StreamingQuery:
    """`--follow`: start (and return) a Structured Streaming query over the growing log.

    Each trigger gets the `__consumer_offsets` batches appended since the last one
    (datasource.ConsumerOffsetsStreamReader); their decoded rows are written under
    `<out>/_decoded/` in a directory named by the batch id, replacing whatever a crashed run
    left there, so a micro-batch that Spark runs again after a restart (same id, same offsets,
    from the checkpoint under `<out>/_checkpoint/`) is not counted twice; then every output is
    computed again (run) from all decoded rows and the topic logs as they are now. A
    transactional commit whose marker arrives in a later micro-batch than its records is not
    counted."""
    from pipeline import register

    register(spark)
    outputs = Outputs(spark, out)
    decoded = outputs.of("_decoded")

    def process(rows: DataFrame, batch_id: int) -> None:
        rows.write.mode("overwrite").parquet(f"{decoded}/batch={batch_id}")
        everything = spark.read.option("basePath", decoded).parquet(decoded).drop("batch")
        run(spark, data_dir, out, offsets=everything, **job_options)

    n = spark.sparkContext.defaultParallelism
    return (
        spark.readStream.format("kafka-offsets")
        .option("partitions", str(n))
        .load(data_dir)
        .writeStream.foreachBatch(process)
        .option("checkpointLocation", outputs.of("_checkpoint"))
        .trigger(processingTime=f"{interval_seconds} seconds")
        .start()
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pipeline.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data-dir", required=True, help="the server's data dir (on a cluster: same path everywhere)")
    ap.add_argument("--out", required=True, help="where the Parquet outputs and report.html go")
    ap.add_argument("--master", default=None, help="Spark master URL (default local[*]; under spark-submit, its own)")
    ap.add_argument("--storm-threshold", type=int, default=10, help="more rebalances than this in a window: a storm")
    ap.add_argument("--storm-window-minutes", type=int, default=5)
    ap.add_argument(
        "--lag-window", type=int, default=10, help="commits per partition Burrow's rules look at (Burrow's `intervals`)"
    )
    ap.add_argument(
        "--no-ship-code",
        action="store_true",
        help="do not send pipeline/ and protocol/ to executors (they have the package installed)",
    )
    ap.add_argument(
        "--verify-topics",
        action="store_true",
        help="also CRC-check every batch of the topic logs (reads all their data)",
    )
    ap.add_argument("--fail-on-bad-batches", action="store_true", help="exit status 3 if any batch was bad")
    ap.add_argument(
        "--follow",
        action="store_true",
        help="keep running: a Structured Streaming job that updates the outputs as the log grows "
        "(checkpoint in OUT/_checkpoint; a restart resumes there)",
    )
    ap.add_argument("--interval", type=float, default=10.0, help="with --follow: seconds between triggers")
    args = ap.parse_args(argv)
    problem, has_segments = check_data_dir(args.data_dir)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if not has_segments:
        print(
            f"warning: {args.data_dir} holds no segment files (is it a server's --data-dir?); nothing to do",
            file=sys.stderr,
        )
        return 4
    problem = check_out(args.out)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from pipeline import offsets_table

    with ThreadPoolExecutor(1) as background:
        # A small input is decoded here while the JVM starts.
        decoding = (
            background.submit(offsets_table, args.data_dir) if not args.follow and is_small(args.data_dir) else None
        )
        spark = spark_session(args.master)
    spark.sparkContext.setLogLevel("WARN")
    shipped = None
    try:
        # A small input, read on the driver, starts no Python worker unless topic logs are CRC-checked.
        if not args.no_ship_code and (decoding is None or args.verify_topics):
            shipped = ship_code(spark)
        if args.follow:
            query = follow(
                spark,
                args.data_dir,
                args.out,
                args.interval,
                storm_threshold=args.storm_threshold,
                storm_window_minutes=args.storm_window_minutes,
                verify_topics=args.verify_topics,
                lag_window=args.lag_window,
            )
            print(
                f"following {args.data_dir} every {args.interval:g} s; outputs in {args.out}; Ctrl-C stops",
                file=sys.stderr,
            )
            try:
                query.awaitTermination()
            except KeyboardInterrupt:
                query.stop()
            return 0
        offsets = spark.createDataFrame(decoding.result()) if decoding else None
        summary = run(
            spark,
            args.data_dir,
            args.out,
            args.storm_threshold,
            args.storm_window_minutes,
            args.verify_topics,
            lag_window=args.lag_window,
            offsets=offsets,
        )
    except OSError as e:  # a local output that cannot be written, a segment that cannot be read
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        stop_session(spark)
        if shipped:
            os.unlink(shipped)
    return 3 if summary["bad batches"] and args.fail_on_bad_batches else 0


if __name__ == "__main__":
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # as in coordinator/__main__.py
    if not __package__:  # `spark-submit pipeline/run.py` from a checkout: make `pipeline` importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
