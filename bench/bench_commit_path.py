"""Where a durable commit's CPU goes: the pieces bench_commits.py measures together.

1. codec: one OffsetCommit v8 request read by protocol/offset_commit.py, versus the generic
   path (bounds walk + kio); a Heartbeat v4 read with and without the walk.
2. socket floor: a bare uvloop server answering the same OffsetCommit traffic with a fixed
   response (no decoding, no log), 100 connections: what any Python server pays per request.
3. commit path in process: 100 commits per round fed to the real server's connections with
   stand-in transports and --fsync never (no sockets, no disk), microseconds per commit;
   with --callgrind, instructions per commit (two runs under valgrind, differenced).

    python bench/bench_commit_path.py [--callgrind]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_commits import _INT64, commit_frame, topic_for  # noqa: E402
from bench.results import record  # noqa: E402
from tests.support.wire_client import FramePump, cpu_seconds, request_class  # noqa: E402
from protocol.messages import (  # noqa: E402
    _library_codec,
    codec,
    decode_body,
    encode_request,
    read_request_header,
)
from protocol.offset_commit import write_offset_commit_response  # noqa: E402


def per_call_us(fn, n: int = 50_000) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


def bench_codec() -> None:
    frame, _ = commit_frame("commit-group-100", "member-1234567890-abcdef", 1)
    body = bytes(frame[4:])
    _, pos = read_request_header(body, flexible=True)
    hand, generic = codec(8, 8), _library_codec(8, 8)
    by_hand, by_kio = (
        per_call_us(lambda: decode_body(hand, body, pos)),
        per_call_us(lambda: decode_body(generic, body, pos)),
    )
    print(f"codec: OffsetCommit v8, hand reader {by_hand:.1f} us, bounds walk + kio {by_kio:.1f} us per request")
    record("decode an OffsetCommit v8 request, hand reader", by_hand, "us", peer="bounds walk + kio", peer_value=by_kio)
    hb = encode_request(
        12,
        4,
        1,
        "c",
        request_class(12, 4)(
            group_id="group-1", generation_id=3, member_id="member-abcdef-1234", group_instance_id=None
        ),
    )[4:]
    _, pos = read_request_header(hb, flexible=True)
    c = codec(12, 4)
    walked = dataclasses.replace(c, check_first=True)
    alone, with_walk = per_call_us(lambda: decode_body(c, hb, pos)), per_call_us(lambda: decode_body(walked, hb, pos))
    print(f"codec: Heartbeat v4, kio alone {alone:.1f} us, bounds walk + kio {with_walk:.1f} us per request")
    record("decode a Heartbeat v4 request, kio alone", alone, "us", peer="bounds walk + kio", peer_value=with_walk)


class FixedAnswer(asyncio.Protocol):
    """Answers each OffsetCommit v8 frame with the same success body: the socket floor."""

    BODY = b"\0" + write_offset_commit_response(8, [("t", [(0, 0)])])

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
            answer = bytes(buf[8:12]) + self.BODY  # correlation id, then the body
            out.append(len(answer).to_bytes(4, "big") + answer)
            del buf[:end]
        self.transport.write(b"".join(out))


async def serve_fixed_answers() -> None:
    server = await asyncio.get_running_loop().create_server(FixedAnswer, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


async def bench_socket_floor(seconds: float) -> None:
    proc = subprocess.Popen([sys.executable, __file__, "--serve-fixed-answers"], stdout=subprocess.PIPE)
    try:
        port = int(proc.stdout.readline())
        loop = asyncio.get_running_loop()
        deadline = time.perf_counter() + seconds
        pumps = []
        for i in range(100):
            frame, offset_pos = commit_frame("g", f"m{i}", 1)
            pumps.append(
                FramePump(
                    [frame],
                    5,
                    deadline,
                    loop.create_future(),
                    prepare=lambda f, n, at=offset_pos: _INT64.pack_into(f, at, n),
                )
            )
        start, cpu = time.perf_counter(), cpu_seconds(proc.pid)
        for pump in pumps:
            await loop.create_connection(lambda pump=pump: pump, "127.0.0.1", port)
        count = sum(await asyncio.gather(*(p.done for p in pumps)))
        elapsed, cpu = time.perf_counter() - start, cpu_seconds(proc.pid) - cpu
        print(
            f"socket floor: fixed answers to 100 committing connections: {count / elapsed:,.0f} req/s, "
            f"server CPU {cpu / count * 1e6:.1f} us per request"
        )
        record(
            "socket floor: a bare uvloop server's CPU per fixed answer, 100 committing connections",
            cpu / count * 1e6,
            "us",
        )
        for pump in pumps:
            pump.transport.close()
    finally:
        proc.terminate()
        proc.wait()


class StandInTransport:
    """Counts the responses the server writes; wakes the round when all are in."""

    def __init__(self, round_state: dict) -> None:
        self.round = round_state

    def write(self, data: bytes) -> None:
        self.round["left"] -= 1
        if self.round["left"] == 0:
            self.round["done"].set_result(None)

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high=None, low=None) -> None: ...
    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...


async def commit_path(rounds: int, reps: int, partitions: int = 1) -> float:
    """Best microseconds per commit over `reps` runs of `rounds` rounds of 100 standalone
    commits to one group, through Connection.data_received to the response write."""
    from coordinator.config import parse_args
    from coordinator.connection import Connection
    from coordinator.server import Server

    server = Server(
        parse_args(
            [
                "--port",
                "0",
                "--data-dir",
                tempfile.mkdtemp(prefix="bench-path-"),
                "--fsync",
                "never",
                "--log-level",
                "WARNING",
            ]
        )
    )
    await server.start()
    await server.topics.create(topic_for(partitions), partitions)
    state: dict = {}
    conns = []
    for _ in range(100):
        conn = Connection(server.channel, server.listeners[0])
        conn.connection_made(StandInTransport(state))
        conns.append((conn, *commit_frame("g", "", -1, partitions)))
    n = 0

    async def one_round() -> None:
        nonlocal n
        n += 1
        state["left"], state["done"] = len(conns), asyncio.get_running_loop().create_future()
        for conn, frame, offset_pos in conns:
            frame[8:12] = n.to_bytes(4, "big")
            _INT64.pack_into(frame, offset_pos, n)
            conn.data_received(bytes(frame))
        await state["done"]

    for _ in range(10):  # warm up: the group exists, keys are cached
        await one_round()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(rounds):
            await one_round()
        best = min(best, (time.perf_counter() - t) / (rounds * len(conns)) * 1e6)
    await server.stop()
    return best


def callgrind_instructions(rounds: int, partitions: int) -> int:
    """Instructions one run of `rounds` rounds executes, counted by valgrind."""
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--in-process-only",
            str(rounds),
            "--partitions",
            str(partitions),
        ],
        capture_output=True,
        text=True,
    )
    return int(re.search(r"Collected : (\d+)", out.stderr).group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--callgrind", action="store_true", help="also count instructions per commit (slow)")
    ap.add_argument("--serve-fixed-answers", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--partitions", type=int, default=1, help="partitions per commit in the in-process path")
    ap.add_argument("--in-process-only", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    import uvloop

    if args.serve_fixed_answers:
        uvloop.run(serve_fixed_answers())
        return
    if args.in_process_only is not None:
        uvloop.run(commit_path(args.in_process_only, 1, args.partitions))
        return
    bench_codec()
    uvloop.run(bench_socket_floor(args.seconds))
    for partitions in sorted({1, args.partitions}):
        us = uvloop.run(commit_path(60, 8, partitions))
        print(
            f"commit path in process (fsync never, no sockets), {partitions} partition(s) per commit: "
            f"{us:.1f} us per commit, best of 8 x 6,000"
        )
        record(
            f"commit path in process (fsync never, no sockets), {partitions} partition(s) per commit",
            us,
            "us",
            params={"partitions": partitions},
        )
    if args.callgrind:
        for partitions in sorted({1, args.partitions}):
            few, more = callgrind_instructions(1, partitions), callgrind_instructions(11, partitions)
            print(
                f"commit path in process, {partitions} partition(s) per commit: "
                f"{(more - few) / 1000:,.0f} instructions per commit (callgrind)"
            )
            record(
                f"commit path in process (fsync never, no sockets), {partitions} partition(s) per commit: "
                "instructions per commit (callgrind)",
                (more - few) / 1000,
                "instructions",
                params={"partitions": partitions},
            )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")  # the valgrind runs: same dict layouts each time
    main()
