"""Durable offset commits and startup recovery of the __consumer_offsets log.

1. Commits/s with 1, 10, 100 concurrent committing members (fsync=always by default),
   all in one group, then each in its own group; each member waits for its commit before
   the next (and, for 100, also with 4 commits in flight). --partitions 1,10: commits of
   1 and of 10 partitions; --floor: the same traffic against a bare uvloop server that
   answers fixed bytes, and our server CPU per commit as a multiple of its. This VM's speed drifts up to 2x
   between runs: --repeat N runs every case N times, interleaved, and prints the median and
   the range.
2. Startup: write a log of N one-record offset-commit batches, start the server on it (no
   recovery point yet), again after killing it while it commits, and after a clean
   shutdown; time until ready, read its peak RSS.

    python bench/bench_commits.py [--seconds 5] [--records 1000000] [--fsync always]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_groups import form_group  # noqa: E402
from bench.results import record  # noqa: E402
from tests.support.wire_client import FramePump, WireClient, cpu_seconds, request_class  # noqa: E402
from crc32c import crc32c  # noqa: E402

from coordinator.log.config import OFFSETS_TOPIC_CONFIG  # noqa: E402
from coordinator.log.offsets import DEFAULT_PARTITIONS, partition_for  # noqa: E402
from protocol.group_records import OffsetCommitKey, encode_key  # noqa: E402
from protocol.messages import encode_request  # noqa: E402

COMMIT, V_COMMIT = 8, 8
CommitReq = request_class(COMMIT, V_COMMIT)
CommitTopic = request_class(COMMIT, V_COMMIT, "OffsetCommitRequestTopic")
CommitPartition = request_class(COMMIT, V_COMMIT, "OffsetCommitRequestPartition")

_SENTINEL = (0x0123456789ABCDEF).to_bytes(8, "big")
_INT64 = struct.Struct(">q")


def topic_for(partitions: int) -> str:
    return "t" if partitions == 1 else f"t{partitions}"


def commit_frame(group: str, member: str, gen: int, partitions: int = 1) -> tuple[bytearray, int]:
    """An OffsetCommit frame for partitions t-0.. t-(partitions-1), and where t-0's
    committed offset sits."""
    frame = bytearray(
        encode_request(
            COMMIT,
            V_COMMIT,
            0,
            "committer",
            CommitReq(
                group_id=group,
                generation_id_or_member_epoch=gen,
                member_id=member,
                group_instance_id=None,
                topics=(
                    CommitTopic(
                        name=topic_for(partitions),
                        partitions=tuple(
                            CommitPartition(
                                partition_index=p,
                                committed_offset=int.from_bytes(_SENTINEL, "big") if p == 0 else 1000 + p,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                            for p in range(partitions)
                        ),
                    ),
                ),
            ),
        )
    )
    pos = frame.find(_SENTINEL)
    assert pos > 0 and frame.find(_SENTINEL, pos + 1) < 0
    return frame, pos


def committer(
    group: str, member: str, gen: int, deadline: float, done: asyncio.Future, in_flight: int = 1, partitions: int = 1
) -> FramePump:
    """One member committing offsets 1, 2, 3... to t-0 (and fixed ones to the other
    partitions): one frame, patched per request."""
    frame, offset_pos = commit_frame(group, member, gen, partitions)
    # v8 response ends: error_code int16, then partition, topic and body tagged fields
    return FramePump(
        [frame], 5, deadline, done, in_flight, prepare=lambda frame, n: _INT64.pack_into(frame, offset_pos, n)
    )


SERVER_PYTHON = [sys.executable]  # --server-python: e.g. the server-only venv `make run` builds


def start_server(data: str, extra: list[str]) -> tuple[subprocess.Popen, int, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [SERVER_PYTHON[0], "-m", "coordinator", "--port", "0", "--data-dir", data, "--log-level", "WARNING", *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    line = proc.stdout.readline().decode()
    return proc, int(line.strip().rsplit(":", 1)[1]), time.perf_counter() - t0


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def bench_commits(
    server_pid: int, port: int, members: int, seconds: float, one_group: bool, in_flight: int = 1, partitions: int = 1
) -> tuple[float, float, float]:
    """members commit concurrently, all in one group (one partition: fsyncs are shared
    by group commit) or each in its own group (spread over the 50 partitions); each waits
    for its commit before the next, or keeps `in_flight` commits outstanding."""
    conns = [await WireClient(f"committer-{i}").connect("127.0.0.1", port) for i in range(members)]
    await conns[0].create_topics(topic_for(partitions), partitions=partitions)
    identities = []
    if one_group:
        group = f"commit-group-{members}"
        identities = [(group, m, gen) for m, gen in await form_group(conns, group)]
    else:
        for i, c in enumerate(conns):
            ((member, gen),) = await form_group([c], f"commit-group-{members}-{i}")
            identities.append((f"commit-group-{members}-{i}", member, gen))
    deadline = time.perf_counter() + seconds
    loop = asyncio.get_running_loop()
    committers = [committer(*ident, deadline, loop.create_future(), in_flight, partitions) for ident in identities]
    figures = await drive(server_pid, port, committers)
    for c in conns:
        await c.close()
    return figures


async def drive(server_pid: int, port: int, committers: list[FramePump]) -> tuple[float, float, float]:
    """Connect the committers, let them run out their deadline: (commits/s, server CPU us
    per commit, this process's CPU us per commit)."""
    loop = asyncio.get_running_loop()
    start, cpu, own = time.perf_counter(), cpu_seconds(server_pid), time.process_time()
    for c in committers:
        await loop.create_connection(lambda c=c: c, "127.0.0.1", port)
    count = sum(await asyncio.gather(*(c.done for c in committers)))
    elapsed, cpu, own = time.perf_counter() - start, cpu_seconds(server_pid) - cpu, time.process_time() - own
    for c in committers:
        c.transport.close()
    return count / elapsed, cpu / max(count, 1) * 1e6, own / max(count, 1) * 1e6


async def bench_floor(
    server_pid: int, port: int, members: int, seconds: float, in_flight: int, partitions: int
) -> tuple[float, float, float]:
    """The same traffic against a bare uvloop server answering every frame with fixed bytes
    (bench_commit_path.py --serve-fixed-answers): what any Python server pays per request."""
    deadline = time.perf_counter() + seconds
    loop = asyncio.get_running_loop()
    return await drive(
        server_pid,
        port,
        [committer("g", f"m{i}", 1, deadline, loop.create_future(), in_flight, partitions) for i in range(members)],
    )


def print_floor(members: int, in_flight: int, partitions: int, runs: list, ours: list) -> None:
    mode = "sync" if in_flight == 1 else f"{in_flight} async"
    rate, server_us = (statistics.median(r[i] for r in runs) for i in range(2))
    ratio = statistics.median(r[1] for r in ours) / server_us
    print(
        f"floor (fixed answers) for {partitions:>2} partitions: {members:>3} members, {mode:>7}: "
        f"{rate:>8,.0f} req/s  (server CPU {server_us:4.1f} us per request; ours in one group: {ratio:.1f}x)"
    )
    shape = {"members": members, "in_flight": in_flight, "partitions": partitions}
    record(
        f"commits of {partitions} partition(s), {members} members in one group, {mode}: server CPU per commit "
        "against a bare server's",
        statistics.median(r[1] for r in ours),
        "us",
        params=shape,
        peer="a bare server answering the same frames",
        peer_value=server_us,
    )


def print_commits(
    members: int,
    one_group: bool,
    in_flight: int,
    partitions: int,
    runs: list[tuple[float, float, float]],
    fsync: str = "always",
) -> None:
    layout = "in one group " if one_group else "in own groups"
    mode = "sync" if in_flight == 1 else f"{in_flight} async"
    rate, server_us, client_us = (statistics.median(r[i] for r in runs) for i in range(3))
    low, high = min(r[0] for r in runs), max(r[0] for r in runs)
    spread = f" (median of {len(runs)} runs, range {low:,.0f}-{high:,.0f})" if len(runs) > 1 else ""
    print(
        f"durable commits of {partitions:>2} partitions: {members:>3} members {layout}, {mode:>7}: "
        f"{rate:>8,.0f} commits/s{spread}"
        f"  (CPU per commit: server {server_us:4.0f} us, bench client {client_us:3.0f} us)"
    )
    shape = {
        "members": members,
        "one_group": one_group,
        "in_flight": in_flight,
        "partitions": partitions,
        "runs": len(runs),
        "fsync": fsync,
    }
    where = "in one group" if one_group else "each in its own group"
    figure = f"commits of {partitions} partition(s), fsync {fsync}, {members} members {where}, {mode}"
    record(figure, rate, "commits/s", params=shape)
    if one_group:
        record(f"{figure}: server CPU per commit", server_us, "us", params=shape)


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write_log(data: str, records: int, groups: int = 1000, partitions_per_topic: int = 100) -> int:
    """N offset commits, one per batch (as members committing one partition each write them),
    spread over groups x (10 topics x partitions) like a busy cluster. Segment files are
    written directly, each batch built from a per-key template: only the offset and CRC
    change. Returns how many distinct (group, topic, partition) keys were committed."""
    now = int(time.time() * 1000)
    seg_bytes = OFFSETS_TOPIC_CONFIG.segment_bytes
    # after the CRC: attributes, lastOffsetDelta, first/max timestamp, producer id/epoch, base sequence, count
    after_crc = struct.pack(">hiqqqhii", 0, 0, now, now, -1, -1, -1, 1)
    # OffsetCommitValue v3 (version, offset, leader epoch, "" metadata, timestamp), then no headers
    value = struct.Struct(">hqihqb")
    head = struct.Struct(">qiibI")  # base offset, length, partition leader epoch, magic, CRC
    templates: dict[tuple[int, int], tuple[int, bytes]] = {}  # (group, key index) -> (partition, body start)
    files: list = [None] * DEFAULT_PARTITIONS
    sizes = [0] * DEFAULT_PARTITIONS
    next_offsets = [0] * DEFAULT_PARTITIONS
    buffers = [bytearray() for _ in range(DEFAULT_PARTITIONS)]

    def flush(p: int) -> None:
        files[p].write(buffers[p])
        buffers[p].clear()

    pack_value, pack_head = value.pack, head.pack
    for w in range(records):
        g, k = (w // 500) % groups, w % partitions_per_topic
        t = templates.get((g, k))
        if t is None:
            group = f"group-{g}"
            key = encode_key(OffsetCommitKey(group, f"topic-{k % 10}", k))
            # attributes, timestamp delta, offset delta, key, value length
            rec = b"\0\0\0" + _zigzag(len(key)) + key + _zigzag(value.size - 1)
            t = templates[g, k] = (partition_for(group), after_crc + _zigzag(len(rec) + value.size) + rec)
        p, start = t
        body = start + pack_value(3, w, -1, 0, now, 0)
        batch = pack_head(next_offsets[p], len(body) + 9, -1, 2, crc32c(body)) + body
        if files[p] is None or sizes[p] + len(batch) > seg_bytes:
            if files[p] is not None:
                flush(p)
                files[p].close()
            directory = Path(data) / f"__consumer_offsets-{p}"
            directory.mkdir(exist_ok=True)
            files[p] = open(directory / f"{next_offsets[p]:020d}.log", "wb")
            sizes[p] = 0
        buffers[p] += batch
        sizes[p] += len(batch)
        next_offsets[p] += 1
        if len(buffers[p]) > 1 << 20:
            flush(p)
    for p, f in enumerate(files):
        if f is not None:
            flush(p)
            f.close()
    return len(templates)


def _start_timed(data: str, label: str, records: int, keys: int) -> tuple[subprocess.Popen, int]:
    proc, port, ready = start_server(data, [])
    rss = peak_rss_mb(proc.pid)
    print(
        f"recovery: {label}: server ready after {ready:.2f} s on {records:,} records; peak RSS {rss:.0f} MiB "
        f"({rss / keys * 100_000:.0f} MiB per 100k committed partitions, interpreter included)"
    )
    record(
        f"startup on {records:,} offset records ({keys:,} committed partitions), {label}",
        ready,
        "s",
        params={"records": records, "keys": keys},
    )
    record(f"startup on {records:,} offset records, {label}: peak RSS", rss, "MiB", params={"records": records})
    return proc, port


async def commit_for(port: int, seconds: float) -> int:
    """Standalone commits (no group membership) from 10 connections; how many were made."""
    loop = asyncio.get_running_loop()
    admin = await WireClient("topic-maker").connect("127.0.0.1", port)
    await admin.create_topics("t", partitions=1)
    await admin.close()
    deadline = time.perf_counter() + seconds
    committers = [committer(f"crash-group-{i}", "", -1, deadline, loop.create_future()) for i in range(10)]
    for c in committers:
        await loop.create_connection(lambda c=c: c, "127.0.0.1", port)
    count = sum(await asyncio.gather(*(c.done for c in committers)))
    for c in committers:
        c.transport.close()
    return count


async def bench_recovery(records: int) -> None:
    """Startup on a log written by another program (no recovery point: every batch is read
    and CRC-checked), then after a crash (SIGKILL) of a server that was committing, then
    after a clean shutdown."""
    data = tempfile.mkdtemp(prefix="bench-recovery-")
    try:
        t0 = time.perf_counter()
        keys = write_log(data, records)
        size = sum(f.stat().st_size for f in Path(data).rglob("*.log")) / 2**20
        print(
            f"recovery: wrote {records:,} one-record offset batches ({size:.0f} MiB, {keys:,} distinct committed "
            f"partitions) in {time.perf_counter() - t0:.1f} s"
        )
        proc, port = _start_timed(data, "first open, no recovery point", records, keys)
        made = await commit_for(port, 2)
        proc.kill()  # SIGKILL: a crash
        proc.wait()
        proc, _ = _start_timed(data, f"after a crash ({made:,} commits since the recovery point)", records, keys)
        proc.terminate()  # SIGTERM: a clean shutdown
        proc.wait()
        proc, _ = _start_timed(data, "after a clean shutdown", records, keys)
        proc.terminate()
        proc.wait()
    finally:
        shutil.rmtree(data, ignore_errors=True)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--fsync", default="always")
    ap.add_argument(
        "--floor", action="store_true", help="also run every one-group case against a server answering fixed bytes"
    )
    ap.add_argument("--partitions", default="1", help="partitions per commit, e.g. 1,10 (each a set of cases)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of every case, interleaved; the median is printed")
    ap.add_argument("--server-python", default=sys.executable, help="the interpreter that runs the server")
    args = ap.parse_args()
    SERVER_PYTHON[0] = args.server_python
    sizes = [int(n) for n in args.partitions.split(",")]
    cases = [(n, one_group, 1, size) for size in sizes for one_group in (True, False) for n in (1, 10, 100)]
    cases += [(100, True, 4, size) for size in sizes] + [(100, False, 4, size) for size in sizes]
    runs: dict[tuple[int, bool, int, int], list] = {case: [] for case in cases}
    floors: dict[tuple[int, int, int], list] = {}
    for _ in range(args.repeat):
        if args.floor:
            floor = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "bench_commit_path.py"), "--serve-fixed-answers"],
                stdout=subprocess.PIPE,
            )
            try:
                floor_port = int(floor.stdout.readline())
                for members, one_group, in_flight, size in cases:
                    if one_group:
                        floors.setdefault((members, in_flight, size), []).append(
                            await bench_floor(floor.pid, floor_port, members, args.seconds, in_flight, size)
                        )
            finally:
                floor.terminate()
                floor.wait()
        data = tempfile.mkdtemp(prefix="bench-commits-")
        proc, port, ready = start_server(data, ["--fsync", args.fsync])
        print(f"empty server ready in {ready * 1000:.0f} ms (fsync={args.fsync})")
        record("server ready, empty data dir", ready * 1000, "ms", params={"fsync": args.fsync})
        try:
            for case in cases:
                members, one_group, in_flight, size = case
                runs[case].append(
                    await bench_commits(proc.pid, port, members, args.seconds, one_group, in_flight, size)
                )
        finally:
            proc.terminate()
            proc.wait()
            shutil.rmtree(data, ignore_errors=True)
    for case in cases:
        if runs[case]:  # (--repeat 0: recovery only)
            print_commits(*case, runs[case], fsync=args.fsync)
    for (members, in_flight, size), floor_runs in floors.items():
        print_floor(members, in_flight, size, floor_runs, runs[members, True, in_flight, size])
    if args.records:
        await bench_recovery(args.records)


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
