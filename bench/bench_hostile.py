"""Server memory (RSS from /proc) under hostile clients, against a fresh server:
abandoned long polls, a client that sends Fetches and never reads, idle/slowloris connections.

    python -m bench.bench_hostile [--polls 2000] [--unread 2000] [--idle 500]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (run as a script too, e.g. by make bench)

from bench.results import record  # noqa: E402
from tests.support.hardening import INT32_MAX, MIB, fetch_frame, fill_partition, rss_bytes  # noqa: E402
from tests.support.process import ServerProcess, create_topics  # noqa: E402


def mib(n: int) -> str:
    return f"{n / MIB:.1f} MiB"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--polls", type=int, default=2000)
    p.add_argument("--unread", type=int, default=2000)
    p.add_argument("--idle", type=int, default=2000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data")
        server.start()
        try:
            pid = server.proc.pid
            create_topics(server.port, "big", partitions=1)
            fill_partition(server.port, "big", 2 * MIB)
            base = rss_bytes(pid)
            print(f"baseline RSS (a 2 MiB partition): {mib(base)}")
            record("server RSS, baseline with a 2 MiB partition", base / MIB, "MiB")

            idle = []
            for _ in range(args.idle):
                s = socket.create_connection(("127.0.0.1", server.port))
                s.sendall(struct.pack(">i", 100) + b"\x00\x12")
                idle.append(s)
            time.sleep(1)
            held = rss_bytes(pid)
            print(
                f"{args.idle} slowloris connections held: RSS {mib(held)}"
                f" ({(held - base) / max(args.idle, 1) / 1024:.1f} KiB each)"
            )
            record(
                f"server RSS, {args.idle:,} slowloris connections (half a frame each) held",
                held / MIB,
                "MiB",
                params={"connections": args.idle},
            )
            for s in idle:
                s.close()
            socks = []
            for i in range(args.polls):
                s = socket.create_connection(("127.0.0.1", server.port))
                s.sendall(fetch_frame(i, "big", max_wait_ms=INT32_MAX, min_bytes=INT32_MAX))
                socks.append(s)
            time.sleep(1)
            polling = rss_bytes(pid)
            print(f"{args.polls} long polls (max_wait, min_bytes 2^31-1) waiting: RSS {mib(polling)}")
            record(
                f"server RSS, {args.polls:,} long polls (max_wait and min_bytes 2^31-1) waiting",
                polling / MIB,
                "MiB",
                params={"polls": args.polls},
            )
            t0 = time.perf_counter()
            fill_partition(server.port, "big", 1 * MIB)
            produced = time.perf_counter() - t0
            print(f"  1 MiB produced while they wait: {produced:.2f} s, RSS {mib(rss_bytes(pid))}")
            record(f"1 MiB produced while {args.polls:,} long polls wait", produced, "s", params={"polls": args.polls})
            for s in socks:
                s.close()
            time.sleep(1)
            closed = rss_bytes(pid)
            print(f"  connections closed: RSS {mib(closed)}")
            record("server RSS after the long polls' connections closed", closed / MIB, "MiB")

            hostile = socket.create_connection(("127.0.0.1", server.port))
            hostile.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            hostile.setblocking(False)
            data = b"".join(fetch_frame(i, "big", max_wait_ms=0, min_bytes=0) for i in range(args.unread))
            sent = 0
            deadline = time.monotonic() + 5
            while sent < len(data) and time.monotonic() < deadline:
                try:
                    sent += hostile.send(data[sent:])
                except BlockingIOError:
                    time.sleep(0.01)
            time.sleep(1)
            print(
                f"a client sent {sent // 1024} KiB of Fetches ({args.unread} x 2 MiB answers) and reads none:"
                f" RSS {mib(rss_bytes(pid))}"
            )
            record(
                f"server RSS, a client sending {args.unread:,} Fetches of 2 MiB answers and reading none",
                rss_bytes(pid) / MIB,
                "MiB",
                params={"fetches": args.unread},
            )
            hostile.close()

        finally:
            server.close()


if __name__ == "__main__":
    main()
