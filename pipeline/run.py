"""`python -m pipeline.run --data-dir DIR --out OUT [--master URL]` (or via spark-submit)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def spark_session(master: str | None, app: str = "kafka-coordinator-analytics"):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this venv (and its `pipeline`)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.appName(app)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "true"))
    if master:
        builder = builder.master(master)
    elif not os.environ.get("SPARK_HOME") and "--master" not in " ".join(sys.argv):
        builder = builder.master("local[*]")
    return builder.getOrCreate()


def run(spark, data_dir: str, out: str, storm_threshold: int = 10, log=print) -> dict[str, object]:
    from . import analytics, decode, read_logs, report

    started = time.perf_counter()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = read_logs(spark, data_dir).cache()
    log("[1/5] reading segments ...")
    errors = raw.where("error IS NOT NULL").select("file", "error").toPandas()
    records = raw.where("error IS NULL").count()
    commits = decode.commits(raw).cache()
    groups = decode.groups(raw).cache()
    log("[2/5] committed offsets ...")
    committed = analytics.committed_offsets(commits).cache()
    committed.write.mode("overwrite").partitionBy("group").parquet(str(out_dir / "committed_offsets"))
    log("[3/5] consumer lag ...")
    lag, lag_totals = analytics.consumer_lag(committed, analytics.log_end_offsets(raw))
    lag.write.mode("overwrite").partitionBy("group").parquet(str(out_dir / "consumer_lag"))
    lag_totals.write.mode("overwrite").parquet(str(out_dir / "consumer_lag_totals"))
    log("[4/5] rebalance timeline ...")
    timeline, storms = analytics.rebalance_timeline(groups, storm_threshold=storm_threshold)
    timeline.write.mode("overwrite").partitionBy("group").parquet(str(out_dir / "rebalance_timeline"))
    storms.write.mode("overwrite").parquet(str(out_dir / "rebalance_storms"))
    log("[5/5] commit rate and report ...")
    rate = analytics.commit_rate(commits)
    rate.write.mode("overwrite").partitionBy("group").parquet(str(out_dir / "commit_rate"))
    frames = {"consumer_lag_totals": lag_totals.toPandas(), "rebalance_storms": storms.toPandas(),
              "rebalance_timeline": timeline.orderBy("group", "time").toPandas(),
              "commit_rate": rate.orderBy("group", "minute").toPandas()}
    summary: dict[str, object] = {
        "records read": records,
        "bad batches": len(errors),
        "bad batch files": ", ".join(sorted(set(errors["file"]))) or "-",
        "groups with offsets": frames["consumer_lag_totals"].shape[0],
        "seconds": round(time.perf_counter() - started, 1),
    }
    images = report.plots(frames["consumer_lag_totals"], frames["rebalance_storms"], frames["commit_rate"])
    report.write_html(out_dir / "report.html", summary, frames, images)
    log(report.terminal_summary(summary, frames["consumer_lag_totals"], frames["rebalance_storms"]))
    log(f"report: {out_dir / 'report.html'}")
    raw.unpersist()
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.run", description=__doc__)
    ap.add_argument("--data-dir", required=True, help="the server's data dir")
    ap.add_argument("--out", required=True, help="where the Parquet outputs and report.html go")
    ap.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    ap.add_argument("--storm-threshold", type=int, default=10, help="rebalances per 5 minutes that make a storm")
    args = ap.parse_args(argv)
    spark = spark_session(args.master)
    try:
        run(spark, args.data_dir, args.out, args.storm_threshold)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
