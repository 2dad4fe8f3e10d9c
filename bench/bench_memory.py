"""Memory the coordinator holds per idle group, per member and per committed partition.

Starts the server, then grows its state in three steps and reads its resident memory
(VmRSS) after each: `--groups` groups formed by one member each who then leaves (idle,
Empty groups with their stored record); `--groups` / 10 Stable groups of 10 members; and
`--partitions` committed offsets (standalone commits to a topic of 100 partitions).
Prints figures; asserts nothing.

    python bench/bench_memory.py [--groups 10000] [--partitions 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_commits import COMMIT, V_COMMIT, CommitPartition, CommitReq, CommitTopic, start_server  # noqa: E402
from bench.bench_groups import LEAVE, V_LEAVE, LeaveMember, LeaveReq, form_group  # noqa: E402
from bench.results import record  # noqa: E402
from tests.support.wire_client import WireClient  # noqa: E402

TOPIC_PARTITIONS = 100
CONNECTIONS = 16


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def in_waves(conns: list[WireClient], jobs: list, run) -> None:
    """Run job(conn, item) over the connections, CONNECTIONS at a time."""
    for i in range(0, len(jobs), len(conns)):
        await asyncio.gather(*(run(c, job) for c, job in zip(conns, jobs[i : i + len(conns)])))


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=100_000)
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="bench-memory-")
    proc, port, _ = start_server(data, ["--fsync", "never"])
    try:
        conns = [await WireClient(f"mem-{i}").connect("127.0.0.1", port) for i in range(CONNECTIONS)]
        await conns[0].create_topics("t", partitions=TOPIC_PARTITIONS)
        await asyncio.sleep(0.5)
        base = rss_mib(proc.pid)

        async def idle_group(conn: WireClient, group: str) -> None:
            ((member, _),) = await form_group([conn], group)
            await conn.request(
                LEAVE,
                V_LEAVE,
                LeaveReq(group_id=group, members=(LeaveMember(member_id=member, group_instance_id=None),)),
            )

        await in_waves(conns, [f"idle-{i}" for i in range(args.groups)], idle_group)
        idle = rss_mib(proc.pid)
        per_group = (idle - base) * 1024 / args.groups
        print(f"memory: {args.groups:,} idle groups: {idle - base:.1f} MiB, {per_group:.2f} KiB per idle group")
        record(
            f"memory per idle (Empty) group, at {args.groups:,} groups",
            per_group,
            "KiB",
            params={"groups": args.groups},
        )

        stable = args.groups // 10
        members = [await WireClient(f"member-{i}").connect("127.0.0.1", port) for i in range(10)]
        for i in range(stable):
            await form_group(members, f"stable-{i}")
        formed = rss_mib(proc.pid)
        per_member = ((formed - idle) * 1024 - stable * per_group) / (stable * 10)
        print(
            f"memory: {stable:,} Stable groups of 10 members: {formed - idle:.1f} MiB, "
            f"{per_member:.2f} KiB per member (beyond its group's)"
        )
        record(
            f"memory per member of a Stable group, at {stable * 10:,} members",
            per_member,
            "KiB",
            params={"members": stable * 10},
        )

        groups = max(args.partitions // TOPIC_PARTITIONS, 1)

        async def commit_all(conn: WireClient, group: str) -> None:
            await conn.request(
                COMMIT,
                V_COMMIT,
                CommitReq(
                    group_id=group,
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    group_instance_id=None,
                    topics=(
                        CommitTopic(
                            name="t",
                            partitions=tuple(
                                CommitPartition(
                                    partition_index=p,
                                    committed_offset=1000 + p,
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                )
                                for p in range(TOPIC_PARTITIONS)
                            ),
                        ),
                    ),
                ),
            )

        await in_waves(conns, [f"offsets-{i}" for i in range(groups)], commit_all)
        await asyncio.sleep(0.5)
        committed = rss_mib(proc.pid)
        partitions = groups * TOPIC_PARTITIONS
        print(
            f"memory: {partitions:,} committed partitions in {groups:,} groups: {committed - formed:.1f} MiB, "
            f"{(committed - formed) * 1024 * 1024 / partitions:.0f} bytes per committed partition"
        )
        print(f"memory: server RSS {base:.1f} MiB empty, {committed:.1f} MiB with all of it")
        record(
            f"memory per committed partition, at {partitions:,} partitions",
            (committed - formed) * 1024 * 1024 / partitions,
            "bytes",
            params={"partitions": partitions},
        )
        record("server RSS, empty", base, "MiB")
        for c in conns + members:
            await c.close()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
