"""KIP-848 consumer groups: convergence time and heartbeat throughput, over real sockets.

For N members (one pipelined connection): from the first heartbeat (epoch 0) of every
member to every member at the group's assignment epoch with exactly its target partitions
(each round: every member heartbeats with what it owns, as a client would, acknowledging
revocations at once). Then heartbeats/s of the stable members and the server's CPU per
heartbeat; then the same with every member also committing an offset (OffsetCommit v9 at
its epoch) beside each heartbeat, so heartbeats meet pending writes on their shard.

    python -m bench.bench_consumer_groups --members 10,100,500 --partitions 1000
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # (run as a script too, e.g. by bench/ab.py)

from bench.results import record  # noqa: E402
from tests.support.wire_client import WireClient, cpu_seconds, request_class  # noqa: E402
from tests.support.process import ServerProcess  # noqa: E402

HB, COMMIT = 68, 8
CommitTopic = request_class(COMMIT, 9, "OffsetCommitRequestTopic")
CommitPartition = request_class(COMMIT, 9, "OffsetCommitRequestPartition")
MINUTE = datetime.timedelta(minutes=1)


def body(group, member, epoch, topics=None, owned=()):
    TP = request_class(HB, 1, "TopicPartitions")
    kw = {"rebalance_timeout": MINUTE} if epoch == 0 else {}
    return request_class(HB, 1)(group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics,
                                topic_partitions=tuple(TP(topic_id=t, partitions=tuple(ps)) for t, ps in owned),
                                **kw)


async def converge(conn: WireClient, group: str, members: int, topic: str) -> tuple[float, int]:
    ids = [f"m{i}" for i in range(members)]
    state = {m: (0, []) for m in ids}  # member -> (epoch, owned)
    started = time.perf_counter()
    rounds = 0
    first = True
    while True:
        rounds += 1
        futures = conn.send_many([(HB, 1, body(group, m, state[m][0], [topic] if first else None,
                                               [] if first else state[m][1])) for m in ids])
        epochs = set()
        changed = False
        for m, fut in zip(ids, futures):
            r = await fut
            assert r.error_code == 0, r
            owned = state[m][1] if r.assignment is None else [
                (t.topic_id, list(t.partitions)) for t in r.assignment.topic_partitions]
            changed |= r.assignment is not None and owned != state[m][1]
            state[m] = (r.member_epoch, owned)
            epochs.add(r.member_epoch)
        first = False
        total = sum(len(ps) for _, owned in state.values() for _, ps in owned)
        if len(epochs) == 1 and not changed and total > 0:
            return time.perf_counter() - started, rounds


async def main(args) -> None:
    data = Path(tempfile.mkdtemp())
    server = ServerProcess(data / "data", ["--group-consumer-session-timeout-ms", "600000"])
    server.start()
    try:
        conn = await WireClient("bench").connect("127.0.0.1", server.port)
        await conn.create_topics("bench-topic", partitions=args.partitions)
        print(f"{'members':>8} {'converged (ms)':>15} {'rounds':>7} {'heartbeats/s':>13} {'us/heartbeat':>13} "
              f"{'hb+commit/s':>12} {'us/hb+commit':>13}")
        assert server.proc is not None
        pid = server.proc.pid
        for n in args.members:
            group = f"bench-{n}"
            elapsed, rounds = await converge(conn, group, n, "bench-topic")
            rate, cpu = await steady(conn, group, n, args.seconds, pid)
            mixed, mixed_cpu = await steady(conn, group, n, args.seconds, pid, commits=True)
            print(f"{n:>8} {elapsed * 1000:>15.1f} {rounds:>7} {rate:>13.0f} {cpu:>13.1f} {mixed:>12.0f} "
                  f"{mixed_cpu:>13.1f}")
            record(f"KIP-848 group of {n} members joining at once, {args.partitions:,} partitions: first heartbeat "
                   "to all at the assignment epoch with their target", elapsed * 1000, "ms",
                   params={"members": n, "partitions": args.partitions, "heartbeat_rounds": rounds})
            record(f"KIP-848 heartbeats of {n} stable members, one connection", rate, "heartbeats/s",
                   params={"members": n})
            record(f"KIP-848 heartbeats of {n} stable members: server CPU per heartbeat", cpu, "us",
                   params={"members": n})
            record(f"KIP-848 heartbeats of {n} stable members, each beside a commit: server CPU per pair", mixed_cpu,
                   "us", params={"members": n})
        await conn.close()
    finally:
        server.stop()


async def steady(conn: WireClient, group: str, members: int, seconds: float, pid: int,
                 commits: bool = False) -> tuple[float, float]:
    """Stable members heartbeating at their epoch with nothing changed (owned: null), each
    also committing an offset if `commits`: heartbeats/s and server CPU (us) per heartbeat."""
    described = await conn.request(69, 1, request_class(69, 1)(group_ids=(group,), include_authorized_operations=False))
    epochs = {m.member_id: m.member_epoch for m in described.groups[0].members}
    bodies = []
    for m, e in epochs.items():
        bodies.append((HB, 1, request_class(HB, 1)(group_id=group, member_id=m, member_epoch=e,
                                                  topic_partitions=None)))
        if commits:
            bodies.append((COMMIT, 9, request_class(COMMIT, 9)(
                group_id=group, generation_id_or_member_epoch=e, member_id=m, group_instance_id=None,
                topics=(CommitTopic(name="bench-topic", partitions=(CommitPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=""),)),))))
    done = 0
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for fut in conn.send_many(bodies):
            r = await fut
            assert getattr(r, "error_code", 0) == 0, r  # (a commit's errors are per partition)
        done += len(epochs)
    elapsed = time.perf_counter() - started
    return done / elapsed, (cpu_seconds(pid) - cpu) / done * 1e6


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100, 500])
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=3.0)
    asyncio.run(main(p.parse_args()))
