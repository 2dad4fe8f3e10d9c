"""Wire-path throughput: N connections pipelining ApiVersions (or Metadata) requests at the server.

The server runs as its own process on its own port; the load comes from separate client
processes (raw asyncio + uvloop sockets, pre-encoded requests, responses only counted and
timed, never decoded) so the client does not compete with the server's event loop.

    python bench/bench_wire.py                        # ApiVersions v3, 8 connections, 5 s
    python bench/bench_wire.py --mode metadata        # Metadata v12 for __consumer_offsets
    python bench/bench_wire.py --profile /tmp/s.prof  # run the server under cProfile

Prints requests/s and p50/p99 latency (write of a request to arrival of its response).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import pstats
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_API_VERSIONS_RPS = 30_000

from bench.results import record  # noqa: E402


def build_request(mode: str, version: int | None) -> bytes:
    from coordinator.apis import build
    from protocol.messages import codec, encode_request

    if mode == "apiversions":
        v = 3 if version is None else version
        values = {"client_software_name": "bench-wire", "client_software_version": "1.0"}
        return encode_request(18, v, 1, "bench", build(codec(18, v).request_type, values))
    v = 12 if version is None else version
    c = codec(3, v)
    topic_type = sys.modules[c.request_type.__module__].MetadataRequestTopic
    topics = (build(topic_type, {"name": "__consumer_offsets", "topic_id": None}),)
    values = {
        "topics": topics,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return encode_request(3, v, 1, "bench", build(c.request_type, values))


class Load(asyncio.Protocol):
    """Keeps `depth` requests in flight; records each response's latency."""

    def __init__(self, request: bytes, depth: int, stop_at: float, latencies: list[float], done: asyncio.Future):
        self.request, self.depth, self.stop_at = request, depth, stop_at
        self.latencies, self.done = latencies, done
        self.sent: deque[float] = deque()
        self.buf = bytearray()
        self.count = 0

    def connection_made(self, transport):
        self.transport = transport
        now = time.perf_counter()
        self.sent.extend([now] * self.depth)
        transport.write(self.request * self.depth)

    def data_received(self, data):
        buf = self.buf
        buf += data
        pos, n, end = 0, 0, len(buf)
        while end - pos >= 4:
            (size,) = struct.unpack_from(">i", buf, pos)
            if end - pos - 4 < size:
                break
            pos += 4 + size
            n += 1
        if pos:
            del buf[:pos]
        if not n:
            return
        now = time.perf_counter()
        sent, lat = self.sent, self.latencies
        for _ in range(n):
            lat.append(now - sent.popleft())
        self.count += n
        if now < self.stop_at:
            sent.extend([now] * n)
            self.transport.write(self.request * n)
        elif not sent and not self.done.done():
            self.done.set_result(self.count)

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"server closed the connection: {exc}"))


def client_process(port: int, connections: int, depth: int, seconds: float, request: bytes, start_at: float, out):
    import uvloop

    async def run():
        loop = asyncio.get_running_loop()
        latencies: list[float] = []
        while time.time() < start_at:  # all processes start together
            await asyncio.sleep(0.005)
        stop_at = time.perf_counter() + seconds
        futures = []
        for _ in range(connections):
            done = loop.create_future()
            await loop.create_connection(lambda d=done: Load(request, depth, stop_at, latencies, d), "127.0.0.1", port)
            futures.append(done)
        t0 = time.perf_counter()
        counts = await asyncio.gather(*futures)
        return sum(counts), time.perf_counter() - t0, latencies

    count, elapsed, latencies = uvloop.run(run())
    out.put((count, elapsed, latencies))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir: str, profile: str | None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    prefix = [sys.executable, "-m", "cProfile", "-o", profile] if profile else [sys.executable]
    args = [
        *prefix,
        "-m",
        "coordinator",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        data_dir,
        "--log-level",
        "WARNING",
    ]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline().decode()
    if not line.startswith("ready"):
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, port


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("apiversions", "metadata"), default="apiversions")
    ap.add_argument(
        "--version", type=int, default=None, help="api version (default: 3 for ApiVersions, 12 for Metadata)"
    )
    ap.add_argument("--connections", "-n", type=int, default=8)
    ap.add_argument("--seconds", "-t", type=float, default=5.0)
    ap.add_argument("--depth", type=int, default=32, help="requests in flight per connection")
    ap.add_argument("--processes", type=int, default=2, help="client processes")
    ap.add_argument("--port", type=int, default=None, help="use a running server instead of starting one")
    ap.add_argument("--profile", default=None, help="run the server under cProfile, write stats here, print the top")
    args = ap.parse_args()

    request = build_request(args.mode, args.version)
    proc = None
    with tempfile.TemporaryDirectory(prefix="bench-wire-") as tmp:
        if args.port is None:
            proc, port = start_server(tmp, args.profile)
        else:
            port = args.port
        try:
            ctx = mp.get_context("spawn")
            out = ctx.Queue()
            procs_n = max(1, min(args.processes, args.connections))
            per = [args.connections // procs_n + (i < args.connections % procs_n) for i in range(procs_n)]
            start_at = time.time() + 1.0
            workers = [
                ctx.Process(target=client_process, args=(port, n, args.depth, args.seconds, request, start_at, out))
                for n in per
            ]
            for w in workers:
                w.start()
            results = [out.get() for _ in workers]
            for w in workers:
                w.join()
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)

    total = sum(r[0] for r in results)
    elapsed = max(r[1] for r in results)
    lat = sorted(x for r in results for x in r[2])
    rps = total / elapsed
    version = struct.unpack_from(">h", request, 6)[0]  # size, api key, api version
    label = f"{'ApiVersions' if args.mode == 'apiversions' else 'Metadata'} v{version}"
    print(f"{label}: {args.connections} connections x depth {args.depth}, {procs_n} client processes, {elapsed:.1f} s")
    print(
        f"  {total} requests, {rps:,.0f} req/s, latency p50 {percentile(lat, 50) * 1e3:.2f} ms, "
        f"p99 {percentile(lat, 99) * 1e3:.2f} ms"
    )
    shape = {"connections": args.connections, "depth": args.depth, "client_processes": procs_n}
    figure = f"{label}, {args.connections} pipelining connections x depth {args.depth}"
    record(figure, rps, "req/s", params=shape)
    record(f"{figure}: latency p50", percentile(lat, 50) * 1e3, "ms", params=shape)
    record(f"{figure}: latency p99", percentile(lat, 99) * 1e3, "ms", params=shape)
    if args.mode == "apiversions":
        verdict = "meets" if rps >= TARGET_API_VERSIONS_RPS else "BELOW"
        print(f"  {verdict} the target of {TARGET_API_VERSIONS_RPS:,} ApiVersions req/s")
    if args.profile:
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
