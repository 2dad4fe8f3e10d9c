"""Storage-layer figures: durable appends with group commit, recovery and replay time.

    python bench/bench_log.py [--records 1000000] [--big]   (--big: also 10M records)

Prints numbers only; no assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results import record  # noqa: E402
from coordinator.log import LogConfig, OffsetsLog, PartitionLog  # noqa: E402
from coordinator.log import partition, sync  # noqa: E402
from coordinator.log.segment import fsync_dir  # noqa: E402
from protocol.group_records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value  # noqa: E402
from protocol.record_batch import build_batch  # noqa: E402

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None


def commit_batch(group: str, partitions: int, offset: int, ts: int) -> bytes:
    recs = [
        (encode_key(OffsetCommitKey(group, "orders", p)), encode_value(OffsetCommitValue(offset, "", ts, 5)))
        for p in range(partitions)
    ]
    return build_batch(recs, timestamp_ms=ts)


async def durable_appends(directory: Path, concurrency: int, seconds: float) -> tuple[float, float]:
    log = await PartitionLog.open(directory, LogConfig(fsync="always", maintenance_interval_ms=None))
    batch = commit_batch("bench-group", 1, 1, 1_700_000_000_000)
    done = 0
    stop = time.perf_counter() + seconds
    rounds = partition.SYNCER.rounds

    async def worker():
        nonlocal done
        while time.perf_counter() < stop:
            await log.append_durable(batch)
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    rounds = partition.SYNCER.rounds - rounds
    await log.close()
    return done / elapsed, done / max(rounds, 1)


def _logs(directory: Path, n: int) -> list[PartitionLog]:
    return [
        PartitionLog.open_sync(directory / f"p{i}", LogConfig(fsync="never", maintenance_interval_ms=None))
        for i in range(n)
    ]


def sync_many(directory: Path, logs: int = 50, rounds: int = 20) -> tuple[float, float]:
    """Milliseconds to make one appended record in each of `logs` logs durable on the loop:
    one fsync per file, and one syncfs."""
    plogs = _logs(directory, logs)
    batch = commit_batch("bench-group", 1, 1, 1_700_000_000_000)
    times = []
    for threshold in (logs + 1, 1):  # above the file count: fsync each; 1: syncfs
        sync.SYNCFS_FROM_FILES, saved = threshold, sync.SYNCFS_FROM_FILES
        best = float("inf")
        for _ in range(rounds):
            for plog in plogs:
                plog.append(batch)
            t0 = time.perf_counter()
            sync.sync_logs(plogs)
            best = min(best, time.perf_counter() - t0)
        sync.SYNCFS_FROM_FILES = saved
        times.append(best * 1000)
    for plog in plogs:
        plog.close_sync()
    return times[0], times[1]


async def sync_many_beside(directory: Path, logs: int = 50, rounds: int = 20) -> list[tuple[float, float]]:
    """The same by the Syncer, beside the loop: 50 fsyncs in parallel by AIO, then one syncfs
    in its worker thread (what a round of SYNCFS_FROM_FILES files or more does). For each:
    milliseconds until durable and milliseconds of the loop thread's CPU (best of `rounds`)."""
    plogs = _logs(directory, logs)
    batch = commit_batch("bench-group", 1, 1, 1_700_000_000_000)
    out = []
    for threshold in (logs + 1, 1):
        sync.SYNCFS_FROM_FILES, saved = threshold, sync.SYNCFS_FROM_FILES
        wall = cpu = float("inf")
        for _ in range(rounds):
            for plog in plogs:
                plog.append(batch)
            t0, c0 = time.perf_counter(), time.thread_time()
            await asyncio.gather(*(plog.flush() for plog in plogs))
            wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.thread_time() - c0)
        sync.SYNCFS_FROM_FILES = saved
        out.append((wall * 1000, cpu * 1000))
    for plog in plogs:
        plog.close_sync()
    return out


def write_offsets_log(directory: Path, records: int, per_batch: int) -> None:
    """A single partition holding `records` offset commits (fsync: never, for speed)."""
    log = PartitionLog.open_sync(
        directory, LogConfig(fsync="never", maintenance_interval_ms=None, cleanup_policy="compact", retention_ms=None)
    )
    groups = [f"group-{g}" for g in range(100)]
    templates = [commit_batch(g, per_batch, 12345, 1_700_000_000_000) for g in groups]
    for i in range(records // per_batch):
        log.append(templates[i % len(templates)])
    for seg in log.segments:
        seg.fsync()
    fsync_dir(directory)
    log.close_sync()


def recovery(directory: Path) -> tuple[float, float, float, int]:
    """Seconds to open (CRC-verify + index), to decode-replay every record, to load the
    latest record per key (what a coordinator needs at startup), and to open again after
    a clean shutdown."""
    cfg = LogConfig(maintenance_interval_ms=None)
    t0 = time.perf_counter()
    log = PartitionLog.open_sync(directory, cfg)
    t_open = time.perf_counter() - t0
    n = log.log_end_offset
    olog = OffsetsLog([log])
    t0 = time.perf_counter()
    for _ in olog.replay(0):
        pass
    t_replay = time.perf_counter() - t0
    t0 = time.perf_counter()
    olog.latest(0)
    t_latest = time.perf_counter() - t0
    asyncio.run(log.close())  # clean: leaves the segments' checkpoint
    t0 = time.perf_counter()
    PartitionLog.open_sync(directory, cfg).close_sync()
    t_clean = time.perf_counter() - t0
    return t_open, t_replay, t_latest, t_clean, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--big", action="store_true", help="also 10M records")
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    if uvloop:
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    with tempfile.TemporaryDirectory(prefix="bench-log-", dir=".") as tmp:  # on the project's disk
        tmp = Path(tmp)
        how = "beside the loop, by Linux AIO" if partition.SYNCER.uses_aio else "on the loop"
        print(f"durable appends (fsync=always, group commit, {how}, 1-record offset-commit batches):")
        for c in (1, 10, 100):
            rate, per_fsync = asyncio.run(durable_appends(tmp / f"c{c}", c, args.seconds))
            print(f"  {c:>3} concurrent appenders: {rate:>9,.0f} appends/s  ({per_fsync:.1f} appends per sync round)")
            record(
                f"durable log appends (group commit, {how}), {c} concurrent appenders",
                rate,
                "appends/s",
                params={"concurrency": c},
            )
        each, syncfs = sync_many(tmp / "sync")
        if sync._syncfs is not None:
            print(
                f"making 50 logs durable after one append each, on the loop: fsync per file {each:.1f} ms, "
                f"one syncfs {syncfs:.1f} ms (best of 20)"
            )
            record(
                "making 50 logs durable after one append each, on the loop: one syncfs",
                syncfs,
                "ms",
                peer="an fsync per file",
                peer_value=each,
            )
        if partition.SYNCER.uses_aio and sync._syncfs is not None:
            (aio_wall, aio_cpu), (fs_wall, fs_cpu) = asyncio.run(sync_many_beside(tmp / "sync-beside"))
            print(
                f"  beside the loop: 50 fsyncs in parallel by AIO, durable after {aio_wall:.1f} ms "
                f"({aio_cpu:.2f} ms of the loop's CPU); one syncfs in a worker thread {fs_wall:.1f} ms "
                f"({fs_cpu:.2f} ms) (best of 20)"
            )
            record(
                "making 50 logs durable beside the loop: 50 fsyncs by AIO",
                aio_wall,
                "ms",
                peer="one syncfs in a worker thread",
                peer_value=fs_wall,
            )
            record(
                "making 50 logs durable beside the loop: the loop's CPU for 50 fsyncs by AIO",
                aio_cpu,
                "ms",
                peer="one syncfs in a worker thread",
                peer_value=fs_cpu,
            )
        sizes = [args.records] + ([10_000_000] if args.big else [])
        for n in sizes:
            for per_batch in (1, 10):
                d = tmp / f"__consumer_offsets-{n}-{per_batch}"
                t0 = time.perf_counter()
                write_offsets_log(d, n, per_batch)
                t_write = time.perf_counter() - t0
                size = sum(p.stat().st_size for p in d.glob("*.log"))
                t_open, t_replay, t_latest, t_clean, got = recovery(d)
                print(
                    f"{got:,} offset-commit records, {per_batch} per batch, {size / 1e6:.0f} MB"
                    f" (written in {t_write:.1f} s):\n"
                    f"    open (CRC-verify + index) {t_open:6.2f} s  {got / t_open:>10,.0f} rec/s\n"
                    f"    + latest per key (load)   {t_open + t_latest:6.2f} s  {got / (t_open + t_latest):>10,.0f} rec/s\n"
                    f"    + full decode replay      {t_open + t_replay:6.2f} s  {got / (t_open + t_replay):>10,.0f} rec/s\n"
                    f"    open after clean shutdown {t_clean:6.2f} s  (checkpoint: no scan)"
                )
                shape = {"records": got, "per_batch": per_batch}
                record(
                    f"open a __consumer_offsets log of {got:,} records, {per_batch} per batch, CRC-verify + index",
                    t_open,
                    "s",
                    params=shape,
                )
                record(
                    f"open a __consumer_offsets log of {got:,} records, {per_batch} per batch, after a clean shutdown",
                    t_clean,
                    "s",
                    params=shape,
                )
                for p in d.iterdir():
                    p.unlink()


if __name__ == "__main__":
    main()
