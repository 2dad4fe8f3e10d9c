"""Durable offset commits and startup recovery of the __consumer_offsets log.

1. Commits/s with 1, 10, 100 concurrent committing members (fsync=always by default),
   each member in its own group, each waiting for its commit before the next.
2. Startup: write a log of N offset-commit records with the project's log writer, start
   the server on it, time until it is ready, and read its peak RSS.

    python bench/bench_commits.py [--seconds 5] [--records 1000000] [--fsync always]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_groups import SYNC, V_SYNC, form_group  # noqa: E402
from bench.wire_client import WireClient, request_class  # noqa: E402
from coordinator.log.offsets import OffsetsLog  # noqa: E402
from protocol.group_records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value  # noqa: E402

COMMIT, V_COMMIT = 8, 8
CommitReq = request_class(COMMIT, V_COMMIT)
CommitTopic = request_class(COMMIT, V_COMMIT, "OffsetCommitRequestTopic")
CommitPartition = request_class(COMMIT, V_COMMIT, "OffsetCommitRequestPartition")


def start_server(data: str, extra: list[str]) -> tuple[subprocess.Popen, int, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "coordinator", "--port", "0", "--data-dir", data,
                             "--log-level", "WARNING", *extra], cwd=ROOT, stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    return proc, int(line.strip().rsplit(":", 1)[1]), time.perf_counter() - t0


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def bench_commits(port: int, members: int, seconds: float, one_group: bool) -> None:
    """members commit concurrently, all in one group (one partition: fsyncs are shared
    by group commit) or each in its own group (spread over the 50 partitions)."""
    conns = [await WireClient(f"committer-{i}").connect("127.0.0.1", port) for i in range(members)]
    identities = []
    if one_group:
        group = f"commit-group-{members}"
        identities = [(group, m, gen) for m, gen in await form_group(conns, group)]
    else:
        for i, c in enumerate(conns):
            (member, gen), = await form_group([c], f"commit-group-{members}-{i}")
            identities.append((f"commit-group-{members}-{i}", member, gen))
    count = 0
    deadline = time.perf_counter() + seconds

    async def commit_loop(conn: WireClient, group: str, member: str, gen: int) -> None:
        nonlocal count
        offset = 0
        while time.perf_counter() < deadline:
            offset += 1
            r = await conn.request(COMMIT, V_COMMIT, CommitReq(
                group_id=group, generation_id_or_member_epoch=gen, member_id=member, group_instance_id=None,
                topics=(CommitTopic(name="t", partitions=(CommitPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                    committed_metadata=""),)),)))
            assert r.topics[0].partitions[0].error_code == 0
            count += 1

    start = time.perf_counter()
    await asyncio.gather(*(commit_loop(c, *ident) for c, ident in zip(conns, identities)))
    elapsed = time.perf_counter() - start
    layout = "in one group " if one_group else "in own groups"
    print(f"durable commits: {members:>3} concurrent members {layout}: {count / elapsed:>8,.0f} commits/s")
    for c in conns:
        await c.close()


async def write_log(data: str, records: int, groups: int = 1000, partitions_per_topic: int = 100) -> int:
    """N offset commits spread over groups x (10 topics x partitions), like a busy cluster.
    Returns how many distinct (group, topic, partition) keys were committed."""
    keys = set()
    log = await OffsetsLog.open(data, background=False)
    now = int(time.time() * 1000)
    batch = 500
    written = 0
    while written < records:
        g = f"group-{(written // batch) % groups}"
        pairs = [(OffsetCommitKey(g, f"topic-{(written + i) % 10}", (written + i) % partitions_per_topic),
                  OffsetCommitValue(offset=written + i, metadata="", commit_timestamp=now, leader_epoch=-1))
                 for i in range(min(batch, records - written))]
        keys.update(k for k, _ in pairs)
        log.log_for(g).append_records([(encode_key(k), encode_value(v)) for k, v in pairs], now)
        written += len(pairs)
    await log.close()
    return len(keys)


async def bench_recovery(records: int) -> None:
    data = tempfile.mkdtemp(prefix="bench-recovery-")
    try:
        t0 = time.perf_counter()
        keys = await write_log(data, records)
        size = sum(f.stat().st_size for f in Path(data).rglob("*.log")) / 2**20
        print(f"recovery: wrote {records:,} offset records ({size:.0f} MiB, {keys:,} distinct committed "
              f"partitions) in {time.perf_counter() - t0:.1f} s")
        proc, _, ready = start_server(data, [])
        rss = peak_rss_mb(proc.pid)
        print(f"recovery: server ready after {ready:.2f} s on {records:,} records; peak RSS {rss:.0f} MiB "
              f"({rss / keys * 100_000:.0f} MiB per 100k committed partitions, interpreter included)")
        proc.terminate()
        proc.wait()
    finally:
        shutil.rmtree(data, ignore_errors=True)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--fsync", default="always")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="bench-commits-")
    proc, port, ready = start_server(data, ["--fsync", args.fsync])
    print(f"empty server ready in {ready * 1000:.0f} ms (fsync={args.fsync})")
    try:
        for one_group in (True, False):
            for n in (1, 10, 100):
                await bench_commits(port, n, args.seconds, one_group)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    if args.records:
        await bench_recovery(args.records)


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
