"""Consumer churn as a CI suite makes it: join-sync-leave cycles of a 1-member classic group,
and new groups created by their first commit. Server CPU per operation, with the floor in the
same run: a bare uvloop server answering the same frames with recorded answers.

Cycle: JoinGroup v5 without a member id (MEMBER_ID_REQUIRED), JoinGroup with it, SyncGroup
with the leader's assignment, LeaveGroup; group records durable (--fsync always by default).
Creation: OffsetCommit v8 of one partition to a group not seen before (generation -1, no
member), sequentially; then from --connections connections at once, with the sync rounds
per group the server counted (its metrics): first commits that arrive while a round runs
share the next one.

The server runs at --log-level (default INFO, the server's own default) and writes its log
to a file in its data dir, as a deployment writes it to disk; the log's bytes per cycle are
printed beside the CPU.

With --callgrind, also the instructions the server process executes per cycle and per
OffsetCommit of 10 partitions (a standalone committer's, over the socket): counted by
valgrind's callgrind over the measured requests only (instrumentation switched on after
start-up and warm-up), so the figure repeats on a loaded machine. The cycle is counted at
INFO and at WARNING too, and the difference is logging's share of a cycle at INFO.

    python bench/bench_churn.py [--seconds 5] [--groups 1000] [--fsync always] [--log-level INFO] [--callgrind]
    python bench/bench_churn.py --port 9092   # drive a server already running (e.g. under a profiler)
    python bench/bench_churn.py --callgrind-compiled   # instructions: the compiled build against pure Python
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import record  # noqa: E402
from protocol.messages import decode_response, encode_request  # noqa: E402
from tests.support.wire_client import WireClient, request_class  # noqa: E402

JOIN, SYNC, LEAVE, COMMIT = 11, 14, 13, 8
SESSION, REBALANCE = datetime.timedelta(seconds=30), datetime.timedelta(seconds=60)
JoinReq, JoinProto = request_class(JOIN, 5), request_class(JOIN, 5, "JoinGroupRequestProtocol")
SyncReq, SyncAssign = request_class(SYNC, 3), request_class(SYNC, 3, "SyncGroupRequestAssignment")
LeaveReq, LeaveMember = request_class(LEAVE, 3), request_class(LEAVE, 3, "MemberIdentity")
CommitReq = request_class(COMMIT, 8)
CommitTopic = request_class(COMMIT, 8, "OffsetCommitRequestTopic")
CommitPartition = request_class(COMMIT, 8, "OffsetCommitRequestPartition")
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # consumer protocol v0, topic "t"
ASSIGNMENT = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"  # t-0


def cpu_seconds(pid: int) -> float:
    """CPU time of the process's threads from the scheduler's nanosecond counters: /proc's
    user and system times tick at 10 ms, coarser than one cycle."""
    return sum(int((task / "schedstat").read_text().split()[0]) for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9


def join(group: str, member: str = "") -> object:
    return JoinReq(
        group_id=group,
        session_timeout=SESSION,
        rebalance_timeout=REBALANCE,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(JoinProto(name="range", metadata=SUBSCRIPTION),),
    )


async def cycle(conn: WireClient, group: str) -> None:
    first = await conn.request(JOIN, 5, join(group))
    joined = await conn.request(JOIN, 5, join(group, first.member_id))
    synced = await conn.request(
        SYNC,
        3,
        SyncReq(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
            assignments=(SyncAssign(member_id=joined.member_id, assignment=ASSIGNMENT),),
        ),
    )
    left = await conn.request(
        LEAVE, 3, LeaveReq(group_id=group, members=(LeaveMember(member_id=joined.member_id, group_instance_id=None),))
    )
    assert (first.error_code, joined.error_code, synced.error_code, left.error_code) == (79, 0, 0, 0)


def commit_body(group: str) -> object:
    return CommitReq(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            CommitTopic(
                name="t",
                partitions=(
                    CommitPartition(
                        partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata=""
                    ),
                ),
            ),
        ),
    )


async def commit(conn: WireClient, group: str) -> None:
    r = await conn.request(COMMIT, 8, commit_body(group))
    assert r.topics[0].partitions[0].error_code == 0, r


async def measure(pid: int, port: int, seconds: float, groups: int, tag: str) -> dict[str, float]:
    """Server CPU per cycle and per new group of the server `pid` on `port`."""
    conn = await WireClient("churn").connect("127.0.0.1", port)
    await conn.create_topics("t", partitions=1)
    for i in range(20):  # warm-up: imports, caches
        await cycle(conn, f"warm-{tag}-{i}")
    cycles, deadline = 0, time.perf_counter() + seconds
    cpu = cpu_seconds(pid)
    while time.perf_counter() < deadline:
        await cycle(conn, f"cycle-{tag}-{cycles % 100}")
        cycles += 1
    cycle_us = (cpu_seconds(pid) - cpu) / cycles * 1e6
    start, cpu = time.perf_counter(), cpu_seconds(pid)
    for i in range(groups):
        await commit(conn, f"new-{tag}-{i}")
    elapsed, create_us = time.perf_counter() - start, (cpu_seconds(pid) - cpu) / groups * 1e6
    await conn.close()
    return {"cycle_us": cycle_us, "cycles": cycles, "create_us": create_us, "groups_per_s": groups / elapsed}


async def raw_answers(port: int) -> dict[int, bytes]:
    """One real answer per API key of the workload, as our server sent it (JoinGroup: the
    successful one), for the floor to replay."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    async def ask(api_key: int, version: int, body: object) -> bytes:
        writer.write(encode_request(api_key, version, 1, "floor", body))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        frame = await reader.readexactly(size)
        return struct.pack(">i", size) + frame

    first = decode_response(JOIN, 5, (await ask(JOIN, 5, join("floor")))[4:])[1]
    answers = {JOIN: await ask(JOIN, 5, join("floor", first.member_id))}
    joined = decode_response(JOIN, 5, answers[JOIN][4:])[1]
    answers[SYNC] = await ask(
        SYNC,
        3,
        SyncReq(
            group_id="floor",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
            assignments=(SyncAssign(member_id=joined.member_id, assignment=ASSIGNMENT),),
        ),
    )
    answers[LEAVE] = await ask(
        LEAVE, 3, LeaveReq(group_id="floor", members=(LeaveMember(member_id=joined.member_id, group_instance_id=None),))
    )
    answers[COMMIT] = await ask(COMMIT, 8, commit_body("floor-new"))
    writer.close()
    return answers


class Replay(asyncio.Protocol):
    """The floor: answers each frame with the answer recorded for its API key (correlation id
    patched), doing none of the work."""

    answers: dict[int, bytes] = {}

    def connection_made(self, transport) -> None:
        self.transport, self.buf = transport, bytearray()

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        out = []
        while len(buf) >= 4:
            end = 4 + int.from_bytes(buf[:4], "big")
            if len(buf) < end:
                break
            answer = self.answers[int.from_bytes(buf[4:6], "big")]
            out.append(answer[:4] + buf[8:12] + answer[8:])
            del buf[:end]
        self.transport.write(b"".join(out))


async def serve_replay(answers_file: str) -> None:
    Replay.answers = {int(k): bytes.fromhex(v) for k, v in json.loads(Path(answers_file).read_text()).items()}
    server = await asyncio.get_running_loop().create_server(Replay, "127.0.0.1", 0)
    print(f"ready 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


async def floor_measure(pid: int, port: int, seconds: float, groups: int) -> dict[str, float]:
    """The same requests against the replaying floor (JoinGroup answered alike both times)."""
    conn = await WireClient("churn").connect("127.0.0.1", port)
    cycles, deadline = 0, time.perf_counter() + seconds
    cpu = cpu_seconds(pid)
    while time.perf_counter() < deadline:
        await conn.request(JOIN, 5, join("g"))
        joined = await conn.request(JOIN, 5, join("g", "member"))
        await conn.request(
            SYNC,
            3,
            SyncReq(
                group_id="g",
                generation_id=joined.generation_id,
                member_id=joined.member_id,
                group_instance_id=None,
                assignments=(SyncAssign(member_id=joined.member_id, assignment=ASSIGNMENT),),
            ),
        )
        await conn.request(
            LEAVE, 3, LeaveReq(group_id="g", members=(LeaveMember(member_id=joined.member_id, group_instance_id=None),))
        )
        cycles += 1
    cycle_us = (cpu_seconds(pid) - cpu) / cycles * 1e6
    cpu = cpu_seconds(pid)
    for i in range(groups):
        await commit(conn, f"new-{i}")
    create_us = (cpu_seconds(pid) - cpu) / groups * 1e6
    await conn.close()
    return {"cycle_us": cycle_us, "create_us": create_us}


def commit10_body() -> object:
    return CommitReq(
        group_id="committer",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            CommitTopic(
                name="t10",
                partitions=tuple(
                    CommitPartition(
                        partition_index=p, committed_offset=42, committed_leader_epoch=-1, committed_metadata=""
                    )
                    for p in range(10)
                ),
            ),
        ),
    )


async def callgrind_per_op(fsync: str, workload: str, n: int, log_level: str = "WARNING", pure: bool = False) -> float:
    """Instructions the server executes per operation (workload "cycle" or "commit10"),
    counted by callgrind from after the warm-up to the end of the n operations. pure: with
    KCOORD_PURE=1 (the compiled build, if there is one, unused)."""
    data = Path(tempfile.mkdtemp(prefix="bench-churn-cg-"))
    out = data / "callgrind.out"
    log = open(data / "server.log", "wb")  # noqa: SIM115  # (handed to the child, closed once it started)
    proc = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            *("-m", "coordinator", "--port", "0", "--data-dir", str(data / "d"), "--log-level", log_level),
            *("--fsync", fsync, "--group-initial-rebalance-delay-ms", "0"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=log,
        env={**os.environ, "PYTHONHASHSEED": "0", "KCOORD_PURE": "1" if pure else ""},
    )
    log.close()
    try:
        port = int(proc.stdout.readline().decode().strip().rsplit(":", 1)[1])  # type: ignore[union-attr]  # stdout is a pipe: Popen was given stdout=PIPE
        conn = await WireClient("churn").connect("127.0.0.1", port)
        await conn.create_topics("t", partitions=1)
        await conn.create_topics("t10", partitions=10)
        body = commit10_body()

        async def one(i: int) -> None:
            if workload == "cycle":
                await cycle(conn, f"cg-{i % 100}")
            else:
                r = await conn.request(COMMIT, 8, body)
                assert r.topics[0].partitions[0].error_code == 0, r

        for i in range(30):  # warm-up, uncounted
            await one(i)
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True, check=True)
        for i in range(n):
            await one(i)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], capture_output=True, check=True)
        await conn.close()
    finally:
        proc.terminate()
        proc.wait()
    total = 0
    for dump in data.glob("callgrind.out.*"):
        for line in dump.read_text().splitlines():
            if line.startswith("totals:"):
                total += int(line.split()[1])
    return total / n


# The INFO lines a churn cycle writes (classic_manager's generation line, naming the member
# that joined, and its empty line, naming the member that left, with the shapes of the ids
# the bench's client gets; the manager hands them to the log made, as f-strings): logged
# through the server's own sink, alone, so that their instructions are counted without a
# whole server's noise.
_MEMBER = "churn-594ebcd0-d6eb-4fef-b87f-a12e398601b1"
CYCLE_LINES: tuple[tuple[str, tuple[object, ...]], ...] = (
    (
        f"group cg-1: generation 3 with 1 members, protocol range, leader {_MEMBER}"
        f" (member {_MEMBER} joined, client churn, host /127.0.0.1)",
        (),
    ),
    (f"group cg-1: generation 4 is empty (member {_MEMBER} left, client churn, host /127.0.0.1)", ()),
)
FLUSH_EVERY = 100  # cycles per write: the sink writes every 100 ms, 100 cycles at 1,000 cycles/s


async def log_lines(cycles: int) -> None:
    """--log-lines: the cycle's INFO lines, `cycles` times, through the server's sink into a file."""
    from coordinator import server_log

    with tempfile.TemporaryDirectory() as tmp, open(Path(tmp) / "server.log", "w") as out:
        sink = server_log.configure("INFO", "text", out)
        log = server_log.get("coordinator.groups.classic.classic_manager")
        sink.pending = True  # (written below, every FLUSH_EVERY cycles, not by the loop's timer)
        for i in range(cycles):
            for msg, args in CYCLE_LINES:
                log.info(msg, *args)
            if i % FLUSH_EVERY == FLUSH_EVERY - 1:
                sink.flush()
                sink.pending = True


def callgrind_log_lines(cycles: int) -> float:
    """Instructions of one cycle's INFO lines: callgrind's totals of --log-lines with `cycles`
    cycles against none (the interpreter's start-up)."""

    def total(n: int) -> int:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                __file__,
                "--log-lines",
                str(n),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            check=True,
        )
        return int(next(x for x in done.stderr.splitlines() if "Collected" in x).split()[-1])

    return (total(cycles) - total(0)) / cycles


def sync_rounds(metrics_port: int) -> float:
    """Sync rounds the server has run: the count of its kcoord_log_sync_seconds histogram."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("kcoord_log_sync_seconds_count"):
                return float(line.split()[-1])
    raise RuntimeError("no kcoord_log_sync_seconds_count in the metrics")


async def concurrent_creation(fsync: str, groups: int, connections: int) -> dict[str, float]:
    """New groups by their first commit from several connections at once: groups/s and sync
    rounds per group (first commits that arrive while a round runs share the next one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics_port = s.getsockname()[1]
    data = tempfile.mkdtemp(prefix="bench-churn-")
    proc, port = start(
        [
            *("-m", "coordinator", "--port", "0", "--data-dir", data, "--log-level", "WARNING", "--fsync", fsync),
            *("--metrics-port", str(metrics_port)),
        ]
    )
    try:
        conns = [await WireClient("churn").connect("127.0.0.1", port) for _ in range(connections)]
        await conns[0].create_topics("t", partitions=1)
        for i, conn in enumerate(conns):  # warm-up
            await commit(conn, f"warm-{i}")

        async def one_connection(k: int, conn: WireClient) -> None:
            for i in range(k, groups, connections):
                await commit(conn, f"new-{i}")

        rounds = sync_rounds(metrics_port)
        started = time.perf_counter()
        await asyncio.gather(*(one_connection(k, conn) for k, conn in enumerate(conns)))
        elapsed = time.perf_counter() - started
        rounds = sync_rounds(metrics_port) - rounds
        for conn in conns:
            await conn.close()
    finally:
        proc.terminate()
        proc.wait()
    return {"groups_per_s": groups / elapsed, "rounds_per_group": rounds / groups}


def start(args: list[str], log: Path | None = None) -> tuple[subprocess.Popen, int]:
    """A child process (its stderr: the file `log`, or ours) and the port its ready line names."""
    stderr = open(log, "wb") if log is not None else None  # noqa: SIM115  # (the child holds it)
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr)
    if stderr is not None:
        stderr.close()
    line = proc.stdout.readline().decode()
    return proc, int(line.strip().rsplit(":", 1)[1])


async def callgrind_compiled(fsync: str, log_level: str, runs: int) -> None:
    """Instructions per cycle and per 10-partition commit with the compiled build and with
    pure Python (KCOORD_PURE=1), each the median of `runs` counts, taken in turn."""
    from protocol import compiled

    built = compiled.compiled_files()
    if isinstance(built, str):
        sys.exit(f"no compiled build to measure ({built}): pip install -e . with a C compiler")
    shape = {"fsync": fsync, "log_level": log_level, "modules": len(compiled.HOT)}
    for workload, n, figure in (
        ("cycle", 200, f"join-sync-leave cycle of a 1-member classic group, fsync {fsync}, log level {log_level}"),
        (
            "commit10",
            300,
            f"OffsetCommit of 10 partitions by a standalone committer, fsync {fsync}, log level {log_level}",
        ),
    ):
        counts: dict[bool, list[float]] = {True: [], False: []}
        for i in range(2 * runs):
            counts[i % 2 == 0].append(await callgrind_per_op(fsync, workload, n, log_level, pure=i % 2 == 0))
        pure, ours = (statistics.median(counts[x]) for x in (True, False))
        print(
            f"{figure}: {ours:,.0f} instructions per operation compiled ({len(compiled.HOT)} modules), "
            f"{pure:,.0f} pure Python: {(ours - pure) / pure * 100:+.1f}% (callgrind, medians of {runs})"
        )
        record(
            f"{figure}: server instructions per operation, compiled build (callgrind, medians of {runs})",
            ours,
            "instructions",
            params={**shape, "compiled": counts[False], "pure": counts[True]},
            peer="pure Python (KCOORD_PURE=1)",
            peer_value=pure,
        )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--fsync", default="always")
    ap.add_argument("--log-level", default="INFO", help="the server's (default INFO, its own default)")
    ap.add_argument("--port", type=int, help="drive this running server instead (its pid: --pid)")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--connections", type=int, default=8, help="committing at once, for the concurrent creation")
    ap.add_argument("--callgrind", action="store_true", help="also count the server's instructions (slow)")
    ap.add_argument("--callgrind-runs", type=int, default=3, help="counts at each log level, for logging's share")
    ap.add_argument(
        "--callgrind-compiled",
        action="store_true",
        help="only count the server's instructions, compiled build (protocol/compiled.py) against KCOORD_PURE=1",
    )
    ap.add_argument("--serve-replay", help=argparse.SUPPRESS)
    ap.add_argument("--log-lines", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_replay:
        return await serve_replay(args.serve_replay)
    if args.log_lines is not None:
        return await log_lines(args.log_lines)
    if args.callgrind_compiled:
        return await callgrind_compiled(args.fsync, args.log_level, args.callgrind_runs)
    if args.port:
        figures = await measure(args.pid, args.port, args.seconds, args.groups, str(time.time()))
        print(figures)
        return
    data = tempfile.mkdtemp(prefix="bench-churn-")
    proc, port = start(
        [
            "-m",
            "coordinator",
            "--port",
            "0",
            "--data-dir",
            data,
            "--log-level",
            args.log_level,
            "--fsync",
            args.fsync,
            "--group-initial-rebalance-delay-ms",
            "0",
        ],
        log=Path(data) / "server.log",
    )
    try:
        logged = (Path(data) / "server.log").stat().st_size
        ours = await measure(proc.pid, port, args.seconds, args.groups, "a")
        answers = await raw_answers(port)
    finally:
        proc.terminate()
        proc.wait()
    # (the whole run's log over its cycles: the 1,000 commits log nothing, the warm-up's 20 cycles little)
    log_bytes = ((Path(data) / "server.log").stat().st_size - logged) / (ours["cycles"] + 20)
    answers_file = Path(data) / "answers.json"
    answers_file.write_text(json.dumps({k: v.hex() for k, v in answers.items()}))
    floor, floor_port = start([__file__, "--serve-replay", str(answers_file)])
    try:
        bare = await floor_measure(floor.pid, floor_port, args.seconds, args.groups)
    finally:
        floor.terminate()
        floor.wait()
    peer = "a bare uvloop server replaying recorded answers"
    print(
        f"join-sync-leave cycle, 1 member, fsync {args.fsync}, log level {args.log_level}: server CPU "
        f"{ours['cycle_us']:,.0f} us per cycle ({ours['cycles']} cycles; floor {bare['cycle_us']:,.0f} us); "
        f"{log_bytes:,.0f} bytes of log per cycle"
    )
    print(
        f"new group by its first commit: server CPU {ours['create_us']:,.0f} us per group, "
        f"{ours['groups_per_s']:,.0f} groups/s (floor {bare['create_us']:,.0f} us)"
    )
    shape = {"fsync": args.fsync, "log_level": args.log_level}
    at_level = f", log level {args.log_level}"
    record(
        f"join-sync-leave cycle of a 1-member classic group, fsync {args.fsync}{at_level}: server CPU per cycle",
        ours["cycle_us"],
        "us",
        params=shape,
        peer=peer,
        peer_value=bare["cycle_us"],
    )
    record(
        f"join-sync-leave cycle of a 1-member classic group, fsync {args.fsync}{at_level}: log written per cycle",
        log_bytes,
        "bytes",
        params=shape,
    )
    record(
        f"{args.groups:,} new groups with one commit each, fsync {args.fsync}: server CPU per group",
        ours["create_us"],
        "us",
        params=shape,
        peer=peer,
        peer_value=bare["create_us"],
    )
    record(
        f"{args.groups:,} new groups with one commit each, fsync {args.fsync}",
        ours["groups_per_s"],
        "groups/s",
        params=shape,
    )
    together = await concurrent_creation(args.fsync, args.groups, args.connections)
    print(
        f"new groups by their first commit from {args.connections} connections at once, fsync {args.fsync}: "
        f"{together['groups_per_s']:,.0f} groups/s, {together['rounds_per_group']:.2f} sync rounds per group"
    )
    figure = f"{args.groups:,} new groups with one commit each from {args.connections} connections at once, fsync {args.fsync}"
    at_once = {"fsync": args.fsync, "connections": args.connections}
    record(figure, together["groups_per_s"], "groups/s", params=at_once)
    record(f"{figure}: sync rounds per group", together["rounds_per_group"], "rounds", params=at_once)
    if args.callgrind:
        for workload, n, figure in (
            ("cycle", 200, f"join-sync-leave cycle of a 1-member classic group, fsync {args.fsync}"),
            ("commit10", 300, f"OffsetCommit of 10 partitions by a standalone committer, fsync {args.fsync}"),
        ):
            per_op = await callgrind_per_op(args.fsync, workload, n, args.log_level)
            print(
                f"{figure}{at_level}: {per_op:,.0f} instructions per operation in the server (callgrind, {n} operations)"
            )
            record(
                f"{figure}{at_level}: server instructions per operation (callgrind)",
                per_op,
                "instructions",
                params=shape,
            )
            if workload == "cycle" and args.log_level == "INFO":
                # A whole server's count moves by several percent from run to run on a loaded
                # machine (timers fire after a number of operations that depends on the
                # speed), as much as logging costs now: the levels in turn, medians of a few.
                counts: dict[str, list[float]] = {"INFO": [per_op], "WARNING": []}
                for i in range(2 * args.callgrind_runs - 1):
                    level = "WARNING" if i % 2 == 0 else "INFO"
                    counts[level].append(await callgrind_per_op(args.fsync, workload, n, level))
                loud, quiet = (statistics.median(counts[x]) for x in ("INFO", "WARNING"))
                share = (loud - quiet) / loud * 100
                print(
                    f"{figure}: medians of {args.callgrind_runs}: {loud:,.0f} instructions at INFO "
                    f"{sorted(round(x) for x in counts['INFO'])}, {quiet:,.0f} at WARNING "
                    f"{sorted(round(x) for x in counts['WARNING'])}; logging's share at INFO {share:.1f}%"
                )
                lines = callgrind_log_lines(1000)
                alone = lines / (quiet + lines) * 100
                print(
                    f"{figure}: its {len(CYCLE_LINES)} INFO lines alone: {lines:,.0f} instructions (written every "
                    f"{FLUSH_EVERY} cycles), {alone:.1f}% of a cycle at INFO"
                )
                what = f"{figure}: its {len(CYCLE_LINES)} INFO lines alone, written every {FLUSH_EVERY} cycles"
                record(f"{what}: instructions (callgrind)", lines, "instructions", params=shape)
                record(
                    f"{what}: share of the cycle at INFO (against the cycle's median at WARNING)",
                    alone,
                    "%",
                    params={**shape, "warning_median": quiet},
                )
                record(
                    f"{figure}: logging's share of the server's instructions per cycle at INFO "
                    f"(callgrind, against WARNING, medians of {args.callgrind_runs})",
                    share,
                    "%",
                    params={**shape, "info": counts["INFO"], "warning": counts["WARNING"], "warning_median": quiet},
                )


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
