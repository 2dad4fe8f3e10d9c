"""KIP-848 consumer groups: convergence time and heartbeat throughput, over real sockets.

For N members (one pipelined connection): from the first heartbeat (epoch 0) of every
member to the group Stable, every member at the group epoch with exactly its target
partitions (each round: every member heartbeats with what it owns, as a client would,
acknowledging revocations at once; a round that changed nothing is followed by --idle-ms,
while assignment batching holds the target back), with the server's CPU and, beside it, the
CPU of a bare uvloop server answering as many heartbeats (the floor). Then heartbeats/s of
the stable members and the server's CPU per heartbeat; then the same with every member also
committing an offset (OffsetCommit v9 at its epoch) beside each heartbeat, so heartbeats meet pending writes on their shard.

With --in-process, the same convergence without sockets or disk: the group shard driven in
this process over an in-memory log that encodes every record, on a manual clock (the
assignment interval passes after 8 idle rounds): the coordinator's own work, CPU per
convergence (median of --repeat); with --callgrind as well, its instructions per
convergence (callgrind over runs of 1 and 3 convergences, the difference halved).

    python -m bench.bench_consumer_groups --members 10,100,500 --partitions 1000
    python -m bench.bench_consumer_groups --members 100,500 --partitions 3000 --in-process --callgrind
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # (run as a script too, e.g. by bench/ab.py)

from bench.results import record  # noqa: E402
from tests.support.wire_client import WireClient, cpu_seconds, request_class  # noqa: E402
from tests.support.process import ServerProcess  # noqa: E402
from protocol.messages import encode_request  # noqa: E402

HB, COMMIT = 68, 8
CommitTopic = request_class(COMMIT, 9, "OffsetCommitRequestTopic")
CommitPartition = request_class(COMMIT, 9, "OffsetCommitRequestPartition")
MINUTE = datetime.timedelta(minutes=1)


def body(group, member, epoch, topics=None, owned=()):
    TP = request_class(HB, 1, "TopicPartitions")
    kw = {"rebalance_timeout": MINUTE} if epoch == 0 else {}
    return request_class(HB, 1)(
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        subscribed_topic_names=topics,
        topic_partitions=tuple(TP(topic_id=t, partitions=tuple(ps)) for t, ps in owned),
        **kw,
    )


async def converge(conn: WireClient, group: str, members: int, topic: str, idle_s: float) -> tuple[float, int, int]:
    """(seconds, rounds, heartbeats) from the first heartbeat of every member to the group
    Stable: every member at the group epoch with its target. A round in which nothing changed
    while the group is not yet Stable (its target held back by assignment batching) is
    followed by a pause of `idle_s`, as clients that have nothing to report wait for their
    next heartbeat."""
    ids = [f"m{i}" for i in range(members)]
    state = {m: (0, []) for m in ids}  # member -> (epoch, owned)
    started = time.perf_counter()
    rounds = sent = 0
    first = True
    while True:
        rounds += 1
        futures = conn.send_many(
            [
                (HB, 1, body(group, m, state[m][0], [topic] if first else None, [] if first else state[m][1]))
                for m in ids
            ]
        )
        sent += len(futures)
        changed = False
        for m, fut in zip(ids, futures):
            r = await fut
            assert r.error_code == 0, r
            owned = (
                state[m][1]
                if r.assignment is None
                else [(t.topic_id, list(t.partitions)) for t in r.assignment.topic_partitions]
            )
            changed |= (r.assignment is not None and owned != state[m][1]) or r.member_epoch != state[m][0]
            state[m] = (r.member_epoch, owned)
        first = False
        if not changed:
            if await group_state(conn, group) == "Stable":
                return time.perf_counter() - started, rounds, sent
            await asyncio.sleep(idle_s)


async def group_state(conn: WireClient, group: str) -> str:
    described = await conn.request(69, 1, request_class(69, 1)(group_ids=(group,), include_authorized_operations=False))
    return str(described.groups[0].group_state)


async def floor_heartbeats(members: int, rounds: int, answer: bytes) -> float:
    """Server CPU (s) of a bare uvloop server answering `rounds` rounds of `members`
    heartbeat frames with a recorded answer: the floor of the convergence figure."""
    data = Path(tempfile.mkdtemp())
    (data / "answers.json").write_text(json.dumps({str(HB): answer.hex()}))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "bench_churn.py"), "--serve-replay", str(data / "answers.json")],
        stdout=subprocess.PIPE,
    )
    try:
        port = int(proc.stdout.readline().decode().strip().rsplit(":", 1)[1])
        conn = await WireClient("floor").connect("127.0.0.1", port)
        frames = [(HB, 1, body("g", f"m{i}", 1, None, [])) for i in range(members)]
        cpu = process_cpu(proc.pid)
        for _ in range(rounds):
            for fut in conn.send_many(frames):
                await fut
        cpu = process_cpu(proc.pid) - cpu
        await conn.close()
        return cpu
    finally:
        proc.terminate()
        proc.wait()


async def heartbeat_answer(port: int, group: str, member: str, epoch: int) -> bytes:
    """One real answer of ours to a heartbeat that changes nothing, as sent (the floor replays it)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        encode_request(
            HB,
            1,
            1,
            "floor",
            request_class(HB, 1)(group_id=group, member_id=member, member_epoch=epoch, topic_partitions=None),
        )
    )
    size = int.from_bytes(await reader.readexactly(4), "big")
    frame = size.to_bytes(4, "big") + await reader.readexactly(size)
    writer.close()
    return frame


def process_cpu(pid: int) -> float:
    """CPU seconds of the process's threads, from the scheduler's nanosecond counters."""
    return sum(int((task / "schedstat").read_text().split()[0]) for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


async def main(args) -> None:
    data = Path(tempfile.mkdtemp())
    server = ServerProcess(
        data / "data",
        [
            "--group-consumer-session-timeout-ms",
            "600000",
            "--group-consumer-assignment-interval-ms",
            str(args.assignment_interval_ms),
        ],
    )
    server.start()
    try:
        conn = await WireClient("bench").connect("127.0.0.1", server.port)
        await conn.create_topics("bench-topic", partitions=args.partitions)
        print(f"assignment interval {args.assignment_interval_ms} ms, {args.partitions:,} partitions")
        print(
            f"{'members':>8} {'converged (ms)':>15} {'CPU (ms)':>9} {'floor (ms)':>10} {'rounds':>7} "
            f"{'heartbeats/s':>13} {'us/heartbeat':>13} {'hb+commit/s':>12} {'us/hb+commit':>13}"
        )
        assert server.proc is not None
        pid = server.proc.pid
        for n in args.members:
            group = f"bench-{n}"
            cpu = process_cpu(pid)
            elapsed, rounds, sent = await converge(conn, group, n, "bench-topic", args.idle_ms / 1000)
            converge_cpu = process_cpu(pid) - cpu
            described = await conn.request(
                69, 1, request_class(69, 1)(group_ids=(group,), include_authorized_operations=False)
            )
            m = described.groups[0].members[0]
            floor = await floor_heartbeats(
                n, rounds, await heartbeat_answer(server.port, group, m.member_id, m.member_epoch)
            )
            rate, hb_cpu = await steady(conn, group, n, args.seconds, pid)
            mixed, mixed_cpu = await steady(conn, group, n, args.seconds, pid, commits=True)
            print(
                f"{n:>8} {elapsed * 1000:>15.1f} {converge_cpu * 1000:>9.1f} {floor * 1000:>10.1f} {rounds:>7} "
                f"{rate:>13.0f} {hb_cpu:>13.1f} {mixed:>12.0f} {mixed_cpu:>13.1f}"
            )
            shape = {
                "members": n,
                "partitions": args.partitions,
                "heartbeat_rounds": rounds,
                "heartbeats": sent,
                "assignment_interval_ms": args.assignment_interval_ms,
                "idle_ms": args.idle_ms,
            }
            what = (
                f"KIP-848 group of {n} members joining at once, {args.partitions:,} partitions, assignment "
                f"interval {args.assignment_interval_ms} ms: first heartbeat to the group Stable"
            )
            record(what, elapsed * 1000, "ms", params=shape)
            record(
                f"{what}: server CPU",
                converge_cpu * 1000,
                "ms",
                params=shape,
                peer="a bare uvloop server answering the same heartbeats",
                peer_value=floor * 1000,
            )
            record(
                f"KIP-848 heartbeats of {n} stable members, one connection", rate, "heartbeats/s", params={"members": n}
            )
            record(
                f"KIP-848 heartbeats of {n} stable members: server CPU per heartbeat",
                hb_cpu,
                "us",
                params={"members": n},
            )
            record(
                f"KIP-848 heartbeats of {n} stable members, each beside a commit: server CPU per pair",
                mixed_cpu,
                "us",
                params={"members": n},
            )
        await conn.close()
    finally:
        server.stop()


async def steady(
    conn: WireClient, group: str, members: int, seconds: float, pid: int, commits: bool = False
) -> tuple[float, float]:
    """Stable members heartbeating at their epoch with nothing changed (owned: null), each
    also committing an offset if `commits`: heartbeats/s and server CPU (us) per heartbeat."""
    described = await conn.request(69, 1, request_class(69, 1)(group_ids=(group,), include_authorized_operations=False))
    epochs = {m.member_id: m.member_epoch for m in described.groups[0].members}
    bodies = []
    for m, e in epochs.items():
        bodies.append((HB, 1, request_class(HB, 1)(group_id=group, member_id=m, member_epoch=e, topic_partitions=None)))
        if commits:
            bodies.append(
                (
                    COMMIT,
                    9,
                    request_class(COMMIT, 9)(
                        group_id=group,
                        generation_id_or_member_epoch=e,
                        member_id=m,
                        group_instance_id=None,
                        topics=(
                            CommitTopic(
                                name="bench-topic",
                                partitions=(
                                    CommitPartition(
                                        partition_index=0,
                                        committed_offset=1,
                                        committed_leader_epoch=-1,
                                        committed_metadata="",
                                    ),
                                ),
                            ),
                        ),
                    ),
                )
            )
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


IDLE_ROUNDS = 8  # (in process: the rounds before the manual clock passes the assignment interval)


async def converge_in_process(members: int, partitions: int) -> tuple[float, int]:
    """(CPU seconds, rounds) of one convergence of the bench's shape on a fresh in-process shard."""
    from coordinator.groups.modern.consumer.consumer_manager import HeartbeatRequest
    from protocol import consumer_records as R
    from tests.support.consumer_harness import Harness
    from tests.support.group_harness import MemoryLog, respond, settle

    class EncodingLog(MemoryLog):
        """Encodes each record as the real log does before keeping it."""

        def append_to(self, p, records, done):
            for k, v in records:
                R.encode_key(k)
                if v is not None:
                    R.encode_value(v)
            super().append_to(p, records, done)

    h = Harness(EncodingLog(), assignment_interval_ms=1000)
    h.catalog.add("bench-topic", partitions)
    ids = [f"m{i}" for i in range(members)]
    state = {m: (0, []) for m in ids}
    heartbeat = h.shard.consumer.heartbeat
    started = time.process_time()
    rounds = 0
    while True:
        rounds += 1
        got = {}
        for m in ids:
            epoch, owned = state[m]
            request = HeartbeatRequest(
                "bench",
                m,
                epoch,
                rebalance_timeout_ms=60_000 if epoch == 0 else -1,
                subscribed_topic_names=["bench-topic"] if rounds == 1 else None,
                owned=owned,
            )
            now = respond(h.shard, heartbeat(request), lambda r, m=m, got=got: got.__setitem__(m, r))
            if now is not None:
                got[m] = now
        await settle()
        changed = False
        for m in ids:
            r = got[m]
            assert r.error == 0, r
            owned = state[m][1] if r.assignment is None else [(t, sorted(ps)) for t, ps in r.assignment.items()]
            changed |= owned != state[m][1] or r.member_epoch != state[m][0]
            state[m] = (r.member_epoch, owned)
        if not changed:
            if h.shard.groups["bench"].state_name == "Stable":
                return time.process_time() - started, rounds
            if rounds == IDLE_ROUNDS:
                h.clock.advance(1000)


def callgrind_instructions(members: int, partitions: int, repeat: int) -> int:
    """Instructions of this script run --in-process for `repeat` convergences, under callgrind."""
    out = Path(tempfile.mkdtemp()) / "callgrind.out"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--in-process",
            "--members",
            str(members),
            "--partitions",
            str(partitions),
            "--repeat",
            str(repeat),
        ],
        capture_output=True,
        check=True,
        env={**os.environ, "BENCH_RESULTS_DIR": ""},
    )
    for line in out.read_text().splitlines():
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no instruction count in {out}")


async def in_process(args) -> None:
    for n in args.members:
        runs = [await converge_in_process(n, args.partitions) for _ in range(args.repeat)]
        cpu = statistics.median(c for c, _ in runs) * 1000
        shape = {"members": n, "partitions": args.partitions, "heartbeat_rounds": runs[0][1], "repeat": args.repeat}
        what = (
            f"KIP-848 group of {n} members joining at once, {args.partitions:,} partitions, assignment interval "
            f"1000 ms, in process (no sockets, no disk): coordinator CPU to the group Stable"
        )
        line = f"{n:>8} members: {cpu:.1f} ms CPU per convergence (median of {args.repeat}), {runs[0][1]} rounds"
        record(what, cpu, "ms", params=shape)
        if args.callgrind:
            per = (callgrind_instructions(n, args.partitions, 3) - callgrind_instructions(n, args.partitions, 1)) // 2
            line += f", {per:,} instructions per convergence (callgrind)"
            record(f"{what}: instructions (callgrind)", per, "instructions", params=shape)
        print(line)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100, 500])
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument(
        "--assignment-interval-ms",
        type=int,
        default=1000,
        help="group.consumer.assignment.interval.ms (Kafka's default; 0: a target at every change)",
    )
    p.add_argument(
        "--idle-ms",
        type=float,
        default=100,
        help="pause after a round in which nothing changed, before the group is Stable",
    )
    p.add_argument("--in-process", action="store_true", help="the convergence in process, without sockets or disk")
    p.add_argument("--repeat", type=int, default=5, help="--in-process: convergences per member count")
    p.add_argument("--callgrind", action="store_true", help="--in-process: also count instructions (slow)")
    args = p.parse_args()
    asyncio.run(in_process(args) if args.in_process else main(args))
