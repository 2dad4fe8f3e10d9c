"""Group coordinator benchmark: heartbeat throughput, rebalance latency, join-sync-leave cycles.

Starts the server in a subprocess (its own port and data dir) and drives it over raw
sockets with pipelined requests. Prints figures; asserts nothing.

    python bench/bench_groups.py [--groups 100] [--members 10] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import record  # noqa: E402
from tests.support.wire_client import FramePump, WireClient, cpu_seconds, request_class  # noqa: E402
from protocol.messages import encode_request  # noqa: E402

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
V_JOIN, V_SYNC, V_HB, V_LEAVE = 5, 3, 3, 3
SESSION = datetime.timedelta(seconds=30)
REBALANCE = datetime.timedelta(seconds=60)

JoinReq = request_class(JOIN, V_JOIN)
JoinProto = request_class(JOIN, V_JOIN, "JoinGroupRequestProtocol")
SyncReq = request_class(SYNC, V_SYNC)
SyncAssign = request_class(SYNC, V_SYNC, "SyncGroupRequestAssignment")
HbReq = request_class(HEARTBEAT, V_HB)
LeaveReq = request_class(LEAVE, V_LEAVE)
LeaveMember = request_class(LEAVE, V_LEAVE, "MemberIdentity")

SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # consumer protocol v0, topic "t"


def start_server(extra: list[str]) -> tuple[subprocess.Popen, int]:
    data = tempfile.mkdtemp(prefix="bench-groups-")
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "--port", "0", "--data-dir", data, "--log-level", "WARNING", *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    line = proc.stdout.readline().decode()
    port = int(line.strip().rsplit(":", 1)[1])
    return proc, port


def join_body(group: str, member_id: str = "") -> object:
    return JoinReq(
        group_id=group,
        session_timeout=SESSION,
        rebalance_timeout=REBALANCE,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(JoinProto(name="range", metadata=SUBSCRIPTION),),
    )


async def join_member(conn: WireClient, group: str):
    """KIP-394 handshake then the real join; returns the JoinGroup response."""
    first = await conn.request(JOIN, V_JOIN, join_body(group))
    return await conn.request(JOIN, V_JOIN, join_body(group, first.member_id))


async def form_group(conns: list[WireClient], group: str) -> list[tuple[str, int]]:
    """All members join at once, the leader assigns, everyone syncs. Returns (member id, generation)."""
    first = await asyncio.gather(*(c.request(JOIN, V_JOIN, join_body(group)) for c in conns))
    joined = await asyncio.gather(
        *(c.request(JOIN, V_JOIN, join_body(group, f.member_id)) for c, f in zip(conns, first))
    )
    syncs = []
    for c, j in zip(conns, joined):
        assignments = tuple(SyncAssign(member_id=m.member_id, assignment=b"a") for m in j.members)
        syncs.append(
            c.request(
                SYNC,
                V_SYNC,
                SyncReq(
                    group_id=group,
                    generation_id=j.generation_id,
                    member_id=j.member_id,
                    group_instance_id=None,
                    assignments=assignments,
                ),
            )
        )
    results = await asyncio.gather(*syncs)
    assert all(r.error_code == 0 for r in results), [r.error_code for r in results]
    return [(j.member_id, j.generation_id) for j in joined]


async def bench_heartbeats(
    server_pid: int, port: int, groups: int, members: int, seconds: float, connections: int
) -> None:
    conns = [await WireClient(f"hb-{i}").connect("127.0.0.1", port) for i in range(connections)]
    all_members = []
    for g in range(groups):
        group_conns = [conns[(g * members + m) % connections] for m in range(members)]
        formed = await form_group(group_conns, f"hb-group-{g}")
        all_members += [(f"hb-group-{g}", m, gen, c) for (m, gen), c in zip(formed, group_conns)]
    # Heartbeats go out over fresh connections as pre-encoded frames (FramePump): a client
    # that encodes and decodes with kio is slower than the server and would be measured.
    frames: list[list[bytearray]] = [[] for _ in range(connections)]
    for i, (g, m, gen, _) in enumerate(all_members):
        frames[i % connections].append(
            bytearray(
                encode_request(
                    HEARTBEAT, V_HB, 0, "hb", HbReq(group_id=g, generation_id=gen, member_id=m, group_instance_id=None)
                )
            )
        )
    loop = asyncio.get_running_loop()
    deadline = time.perf_counter() + seconds
    window = 256  # requests in flight per connection
    # v3 response: correlation id, throttle time, error code
    pumps = [FramePump(f, 2, deadline, loop.create_future(), window) for f in frames]
    start, cpu = time.perf_counter(), cpu_seconds(server_pid)
    for pump in pumps:
        await loop.create_connection(lambda pump=pump: pump, "127.0.0.1", port)
    count = sum(await asyncio.gather(*(p.done for p in pumps)))
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(server_pid) - cpu
    print(
        f"heartbeats: {groups} groups x {members} members, {connections} connections x {window} in flight: "
        f"{count / elapsed:,.0f} req/s (server CPU {cpu / max(count, 1) * 1e6:.1f} us per heartbeat)"
    )
    shape = {"groups": groups, "members": members, "connections": connections, "in_flight": window}
    figure = (
        f"heartbeats, {groups * members:,} members in {groups} groups, {connections} connections x {window} in flight"
    )
    record(figure, count / elapsed, "req/s", params=shape)
    record(f"{figure}: server CPU per heartbeat", cpu / max(count, 1) * 1e6, "us", params=shape)
    for pump in pumps:
        pump.transport.close()
    for c in conns:
        await c.close()


async def bench_rebalance(port: int, n: int) -> None:
    conns = [await WireClient(f"rb-{i}").connect("127.0.0.1", port) for i in range(n)]
    t0 = time.perf_counter()
    await form_group(conns, f"rebalance-{n}-{time.time()}")
    elapsed = time.perf_counter() - t0
    print(f"rebalance: {n} members joining at once, first JoinGroup to last SyncGroup: {elapsed * 1000:.0f} ms")
    record(
        f"classic rebalance, {n} members joining at once, first JoinGroup to last SyncGroup",
        elapsed * 1000,
        "ms",
        params={"members": n},
    )
    for c in conns:
        await c.close()


async def bench_cycles(server_pid: int, port: int, seconds: float) -> None:
    conn = await WireClient("cycle").connect("127.0.0.1", port)
    cycles = 0
    deadline = time.perf_counter() + seconds
    start, cpu = time.perf_counter(), cpu_seconds(server_pid)
    while time.perf_counter() < deadline:
        group = f"cycle-{cycles % 100}"
        ((member, gen),) = await form_group([conn], group)
        await conn.request(
            LEAVE, V_LEAVE, LeaveReq(group_id=group, members=(LeaveMember(member_id=member, group_instance_id=None),))
        )
        cycles += 1
    cpu = cpu_seconds(server_pid) - cpu
    rate = cycles / (time.perf_counter() - start)
    print(
        f"join-sync-leave cycles (one member, sequential): {rate:,.0f}/s "
        f"(server CPU {cpu / max(cycles, 1) * 1e6:,.0f} us per cycle)"
    )
    record("join-sync-leave cycles, one member, sequential", rate, "cycles/s")
    record("join-sync-leave cycles: server CPU per cycle", cpu / max(cycles, 1) * 1e6, "us")
    await conn.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5)
    args = ap.parse_args()
    # No initial rebalance delay: the figures are the coordinator's own work.
    proc, port = start_server(["--fsync", "never", "--group-initial-rebalance-delay-ms", "0"])
    try:
        await bench_heartbeats(proc.pid, port, args.groups, args.members, args.seconds, args.connections)
        for n in (10, 100, 500):
            await bench_rebalance(port, n)
        await bench_cycles(proc.pid, port, args.seconds)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
