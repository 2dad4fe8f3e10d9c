"""Pipeline benchmark: decoding an offsets log on Spark versus one Python process.

Writes a data dir with the project's writers (an N-commit-record `__consumer_offsets` log with
group generations, and the topic logs committed to; see write_log), then prints:
- rows/s of a single-process decode (pipeline.decode over every segment, no Spark);
- rows/s of the `kafka-offsets` data source on Spark (decoded, Arrow batches);
- rows/s of the raw `kafka-log` data source (Arrow, then tuples);
- the full job's wall time (all outputs + report).
With --job, only the whole job as a user runs it: `python -m pipeline.run` in a new process each
time (JVM start, Spark session and exit included; its wall time and the machine's CPU time
while it runs), after one run that is not counted (the first run on a machine also writes the
JVM's class archive, pipeline/jvm_archive.py).
Figures only, no assertions.

    python bench/bench_pipeline.py [--records 1000000 | --ten-million] [--master local[2]] [--data-dir DIR]
                                   [--repeat 3] [--job]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import record  # noqa: E402
from coordinator.log.offsets import OffsetsLog  # noqa: E402
from coordinator.log.partition import PartitionLog  # noqa: E402
from protocol.consumer_protocol import write_assignment  # noqa: E402
from protocol.group_records import (  # noqa: E402
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)


async def write_log(
    data: str, records: int, per_batch: int = 100, groups: int = 1000, members: int = 3, generation_every: int = 5
) -> None:
    """A data dir like a busy cluster's, with rows in every output: commit requests of `per_batch`
    partitions each (100 partitions over 10 topics), one a second, taking turns over `groups`
    groups; before every `generation_every`-th request of a group a new generation of `members`
    consumers, each assigned a share of the partitions; and the topic logs committed to, a batch
    of 10 messages per partition every 10 s, each request committing a few messages behind."""
    log = await OffsetsLog.open(data, background=False)
    now = int(time.time() * 1000)
    partitions = [(f"topic-{p % 10}", p) for p in range(100)]
    requests = -(-records // per_batch)
    for r in range(requests):
        group, turn = f"group-{r % groups}", r // groups
        at = now + r * 1000
        if turn % generation_every == 0:
            ids = [f"{group}-member-{turn}-{m}" for m in range(members)]
            shares = [partitions[m::members] for m in range(members)]
            assignments = [
                write_assignment(0, [(t, [p for tt, p in share if tt == t]) for t in sorted({tt for tt, _ in share})])
                for share in shares
            ]
            value = GroupMetadataValue(
                protocol_type="consumer",
                generation=turn // generation_every + 1,
                protocol="range",
                leader=ids[0],
                members=tuple(
                    MemberMetadata(
                        member_id=i,
                        client_id="bench",
                        client_host="/127.0.0.1",
                        session_timeout=45_000,
                        subscription=b"",
                        assignment=a,
                    )
                    for i, a in zip(ids, assignments)
                ),
                current_state_timestamp=at,
            )
            log.log_for(group).append_records([(encode_key(GroupMetadataKey(group)), encode_value(value))], at)
        produced = 10 * (r // 10 + 1)  # messages in each partition by now
        pairs = [
            (
                encode_key(OffsetCommitKey(group, t, p)),
                encode_value(
                    OffsetCommitValue(
                        offset=max(0, produced - (r + p) % 7), metadata="", commit_timestamp=at, leader_epoch=-1
                    )
                ),
            )
            for t, p in partitions[: min(per_batch, records - r * per_batch)]
        ]
        log.log_for(group).append_records(pairs, at)
    await log.close()
    for t, p in partitions:
        plog = PartitionLog.open_sync(Path(data) / f"{t}-{p}")
        for tick in range(requests // 10 + 1):
            plog.append_records([(None, b"m")] * 10, now + tick * 10_000)
        await plog.close()


def single_process(data: str) -> int:
    from pipeline.decode import decode_segments
    from pipeline.segments import OFFSETS_TOPIC, segment_files

    return sum(b.num_rows for b in decode_segments(segment_files(data, {OFFSETS_TOPIC})))


def timed(label: str, f, rows_hint: int | None = None, repeat: int = 3) -> float:
    """Best of `repeat` runs (the machine may be shared), with the median for context."""
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = f()
        rows = rows if rows is not None else rows_hint
        rates.append(rows / (time.perf_counter() - t0))
    best, median = max(rates), sorted(rates)[len(rates) // 2]
    print(f"{label:<44} {best:>10,.0f} rows/s best of {repeat}, median {median:>9,.0f}  ({rows:,} rows)", flush=True)
    record(f"{label}, {rows:,} rows, best of {repeat}", best, "rows/s", params={"rows": rows, "repeat": repeat})
    return best


def machine_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy (every process, the JVM included), from /proc/stat."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def whole_job(data: str, out: str, master: str, records: int, repeat: int) -> None:
    command = [sys.executable, "-m", "pipeline.run", "--data-dir", data, "--out", out, "--master", master]
    walls, cpus = [], []
    for _ in range(repeat + 1):
        t0, c0 = time.perf_counter(), machine_cpu_seconds()
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
        cpus.append(machine_cpu_seconds() - c0)
    print(
        f"first run {walls[0]:.1f} s; whole job on {records:,} records, new process each: "
        f"{statistics.median(walls[1:]):.1f} s median ({min(walls[1:]):.1f}-{max(walls[1:]):.1f}, {repeat} runs)",
        flush=True,
    )
    print(
        f"machine CPU per timed run (all processes, JVM included): {statistics.median(cpus[1:]):.1f} s median "
        f"({min(cpus[1:]):.1f}-{max(cpus[1:]):.1f})",
        flush=True,
    )
    shape = {"records": records, "runs": repeat, "master": master}
    record(
        f"whole pipeline job (python -m pipeline.run, new process) on {records:,} commit records, median",
        statistics.median(walls[1:]),
        "s",
        params=shape,
    )
    record(
        f"whole pipeline job on {records:,} commit records: machine CPU per run, median",
        statistics.median(cpus[1:]),
        "s",
        params=shape,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--ten-million", action="store_true", help="--records 10000000")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data-dir", help="reuse (or keep) the generated log here")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is printed")
    ap.add_argument("--job", action="store_true", help="only the whole job's wall time, a new process per run")
    args = ap.parse_args()
    records = 10_000_000 if args.ten_million else args.records
    tmp = tempfile.mkdtemp(prefix="bench-pipeline-")
    data = args.data_dir or str(Path(tmp) / "data")
    try:
        if not Path(data).exists():
            t0 = time.perf_counter()
            asyncio.run(write_log(data, records))
            print(f"wrote {records:,} offset records in {time.perf_counter() - t0:.1f} s")
        if args.job:
            whole_job(data, str(Path(tmp) / "out"), args.master, records, args.repeat)
            return
        files = list(Path(data).rglob("*.log"))
        print(f"{len(files)} segment files, {sum(f.stat().st_size for f in files) / 2**20:.0f} MiB")

        single = timed("single process, pipeline.decode (no Spark)", lambda: single_process(data), repeat=args.repeat)

        from pipeline import read_logs, read_offsets
        from pipeline.run import run, spark_session, stop_session

        spark = spark_session(args.master, "bench-pipeline", progress=False)
        spark.sparkContext.setLogLevel("ERROR")
        print(
            f"Spark {spark.version}, master {args.master}, defaultParallelism {spark.sparkContext.defaultParallelism}"
        )
        materialize = lambda df: df.write.format("noop").mode("overwrite").save()  # noqa: E731
        materialize(read_offsets(spark, data))  # warm up: JVM, Python workers and their imports
        arrow = timed(
            "Spark kafka-offsets (decoded), Arrow batches",
            lambda: materialize(read_offsets(spark, data)),
            records,
            args.repeat,
        )
        timed(
            "Spark kafka-log (raw rows), Arrow batches",
            lambda: materialize(read_logs(spark, data)),
            records,
            args.repeat,
        )
        timed(
            "Spark kafka-log (raw rows), tuples",
            lambda: materialize(read_logs(spark, data, arrow="false")),
            records,
            args.repeat,
        )
        print(f"Spark Arrow decode vs one process: {arrow / single:.2f}x")
        t0 = time.perf_counter()
        run(spark, data, str(Path(tmp) / "out"), log=lambda *a: None)
        print(f"full job (all outputs + report) on {records:,} records: {time.perf_counter() - t0:.1f} s")
        stop_session(spark)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
