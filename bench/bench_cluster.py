"""Several brokers in one process (--brokers N, coordinator/topology.py).

1. Start time, 1 and 3 brokers: `python -m coordinator` until its ready line, and
   coordinator.testing.Cluster (in-process) until `start()` returns.
2. Moving a coordinator that holds 1,000 groups and 100k committed offsets (one
   __consumer_offsets partition, 100 offsets per group): unload from the old broker plus
   load from the log on the new one, as ClusterControl.move_coordinator does it.
3. Heartbeats/s and commits/s against 1 broker and against 3 (each request sent to its
   group's coordinator), in one interleaved run, with the server's CPU per request: the
   cost of routing requests by broker.

--repeat N runs every case N times, interleaved, and prints the median and the range.

    python bench/bench_cluster.py [--repeat 3] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_commits import committer  # noqa: E402
from bench.bench_groups import HEARTBEAT, V_HB, HbReq, form_group  # noqa: E402
from bench.results import record  # noqa: E402
from tests.support.wire_client import FramePump, WireClient, cpu_seconds, request_class  # noqa: E402
from protocol.messages import encode_request  # noqa: E402

FIND_COORDINATOR, COMMIT = 10, 8
FindReq = request_class(FIND_COORDINATOR, 4)
CommitReq = request_class(COMMIT, 8)
CommitTopic = request_class(COMMIT, 8, "OffsetCommitRequestTopic")
CommitPartition = request_class(COMMIT, 8, "OffsetCommitRequestPartition")


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):,.3f} (range {min(values):,.3f}-{max(values):,.3f})"


# 1. start time ---------------------------------------------------------------------------


def start_process(brokers: int, extra: list[str] = ()) -> tuple[subprocess.Popen, list[int], float, str]:
    data = tempfile.mkdtemp(prefix="bench-cluster-")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator",
            "--port",
            "0",
            "--data-dir",
            data,
            "--brokers",
            str(brokers),
            "--log-level",
            "WARNING",
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    line = proc.stdout.readline().decode()
    elapsed = time.perf_counter() - t0
    ports = [int(address.rsplit(":", 1)[1]) for address in line.split()[1].split(",")]
    return proc, ports, elapsed, data


def stop_process(proc: subprocess.Popen, data: str) -> None:
    proc.terminate()
    proc.wait(30)
    shutil.rmtree(data, ignore_errors=True)


def bench_start(repeat: int) -> None:
    from coordinator.testing import Cluster

    runs: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeat):
        for brokers in (1, 3):
            proc, _, elapsed, data = start_process(brokers)
            stop_process(proc, data)
            runs.setdefault(("process", brokers), []).append(elapsed)
            t0 = time.perf_counter()
            cluster = Cluster(brokers=brokers).start()
            runs.setdefault(("in-process", brokers), []).append(time.perf_counter() - t0)
            cluster.close()
    for (kind, brokers), values in runs.items():
        print(f"start, {kind}, {brokers} broker(s): {spread(values)} s")
        record(
            f"cluster start ({kind}), {brokers} broker(s), median of {repeat}",
            statistics.median(values),
            "s",
            params={"brokers": brokers, "kind": kind, "repeat": repeat},
        )


# 2. moving a loaded coordinator ------------------------------------------------------------


async def commit_offsets(host: str, port: int, groups: int, per_group: int) -> None:
    conn = await WireClient("loader").connect(host, port)
    await conn.create_topics("t100", partitions=per_group)
    batch = []
    for g in range(groups):
        batch.append(
            (
                COMMIT,
                8,
                CommitReq(
                    group_id=f"g{g}",
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    group_instance_id=None,
                    topics=(
                        CommitTopic(
                            name="t100",
                            partitions=tuple(
                                CommitPartition(
                                    partition_index=p,
                                    committed_offset=1000 + g + p,
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                )
                                for p in range(per_group)
                            ),
                        ),
                    ),
                ),
            )
        )
        if len(batch) == 100:
            answers = await asyncio.gather(*conn.send_many(batch))
            assert all(p.error_code == 0 for a in answers for t in a.topics for p in t.partitions)
            batch = []
    await conn.close()


def bench_move(repeat: int, groups: int = 1000, per_group: int = 100) -> None:
    from coordinator.testing import Cluster

    with Cluster(brokers=3, offsets_partitions=1, log_level="WARNING") as cluster:
        b = cluster.brokers()[cluster.coordinator_of("g0") - 1]
        asyncio.run(commit_offsets(b["host"], b["port"], groups, per_group))
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            cluster.move_coordinator("g0")
            times.append(time.perf_counter() - t0)
        loaded = cluster._server.groups.shards[0]
        assert len(loaded.groups) == groups and loaded.offsets.count() == groups * per_group
    print(f"move a coordinator of {groups:,} groups, {groups * per_group:,} offsets: {spread(times)} s")
    record(
        f"move a coordinator holding {groups:,} groups and {groups * per_group:,} committed offsets "
        f"(unload + load), median of {repeat}",
        statistics.median(times),
        "s",
        params={"groups": groups, "offsets": groups * per_group, "repeat": repeat},
    )


# 3. heartbeats and commits through the routing ---------------------------------------------


async def coordinators(ports: list[int], groups: list[str]) -> dict[str, int]:
    """Each group's coordinator's port, as FindCoordinator tells."""
    conn = await WireClient("finder").connect("127.0.0.1", ports[0])
    out = {}
    for g in groups:
        c = (await conn.request(FIND_COORDINATOR, 4, FindReq(key_type=0, coordinator_keys=(g,)))).coordinators[0]
        out[g] = c.port
    await conn.close()
    return out


async def traffic(
    pid: int, ports: list[int], seconds: float, groups: int = 30, members: int = 10, committers: int = 60
) -> tuple[float, float, float, float]:
    """(heartbeats/s, server CPU us per heartbeat, commits/s, server CPU us per commit)."""
    loop = asyncio.get_running_loop()
    conn = await WireClient("setup").connect("127.0.0.1", ports[0])
    await conn.create_topics("t", partitions=1)
    await conn.close()
    names = [f"hb-{g}" for g in range(groups)]
    where = await coordinators(ports, names)
    frames: dict[int, list[bytearray]] = {}
    clients = []
    for g in names:
        conns = [await WireClient(f"{g}-{m}").connect("127.0.0.1", where[g]) for m in range(members)]
        clients += conns
        for member, gen in await form_group(conns, g):
            frames.setdefault(where[g], []).append(
                bytearray(
                    encode_request(
                        HEARTBEAT,
                        V_HB,
                        0,
                        "hb",
                        HbReq(group_id=g, generation_id=gen, member_id=member, group_instance_id=None),
                    )
                )
            )
    deadline = time.perf_counter() + seconds
    # six connections in all, spread over the coordinators: the same client side for 1 and 3 brokers
    pumps = [
        (port, FramePump(f, 2, deadline, loop.create_future(), 128))
        for port, f in frames.items()
        for _ in range(6 // len(frames))
    ]
    start, cpu = time.perf_counter(), cpu_seconds(pid)
    for port, pump in pumps:
        await loop.create_connection(lambda pump=pump: pump, "127.0.0.1", port)
    beats = sum(await asyncio.gather(*(p.done for _, p in pumps)))
    hb_elapsed, hb_cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu
    for _, pump in pumps:
        pump.transport.close()
    for c in clients:
        await c.close()
    commit_groups = [f"c-{i}" for i in range(committers)]
    where = await coordinators(ports, commit_groups)
    deadline = time.perf_counter() + seconds
    pumps = [(where[g], committer(g, "", -1, deadline, loop.create_future(), 4)) for g in commit_groups]
    start, cpu = time.perf_counter(), cpu_seconds(pid)
    for port, pump in pumps:
        await loop.create_connection(lambda pump=pump: pump, "127.0.0.1", port)
    commits = sum(await asyncio.gather(*(p.done for _, p in pumps)))
    c_elapsed, c_cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu
    for _, pump in pumps:
        pump.transport.close()
    return (beats / hb_elapsed, hb_cpu / max(beats, 1) * 1e6, commits / c_elapsed, c_cpu / max(commits, 1) * 1e6)


def bench_traffic(repeat: int, seconds: float) -> None:
    runs: dict[int, list[tuple[float, float, float, float]]] = {1: [], 3: []}
    for _ in range(repeat):
        for brokers in (1, 3):
            proc, ports, _, data = start_process(brokers, ["--fsync", "never"])
            try:
                runs[brokers].append(asyncio.run(traffic(proc.pid, ports, seconds)))
            finally:
                stop_process(proc, data)
    for brokers, values in runs.items():
        hb, hb_cpu, commits, c_cpu = zip(*values)
        print(
            f"{brokers} broker(s): heartbeats/s {spread(list(hb))}, server CPU/heartbeat {spread(list(hb_cpu))} us; "
            f"commits/s {spread(list(commits))}, server CPU/commit {spread(list(c_cpu))} us"
        )
        shape = {"brokers": brokers, "repeat": repeat, "fsync": "never"}
        record(
            f"heartbeats/s, 300 members in 30 groups, {brokers} broker(s)", statistics.median(hb), "req/s", params=shape
        )
        record(f"server CPU per heartbeat, {brokers} broker(s)", statistics.median(hb_cpu), "us", params=shape)
        record(
            f"commits/s, 60 committers x 4 in flight, {brokers} broker(s)",
            statistics.median(commits),
            "req/s",
            params=shape,
        )
        record(f"server CPU per commit, {brokers} broker(s)", statistics.median(c_cpu), "us", params=shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--only", choices=("start", "move", "traffic"))
    args = parser.parse_args()
    if args.only in (None, "start"):
        bench_start(args.repeat)
    if args.only in (None, "move"):
        bench_move(args.repeat)
    if args.only in (None, "traffic"):
        bench_traffic(args.repeat, args.seconds)


if __name__ == "__main__":
    main()
