"""Transactions per second: each transaction writes 10 messages over 3 partitions and the
offsets of a consumer group (send_offsets_to_transaction), then commits; 1 and 10
confluent-kafka producers (one thread each, librdkafka releases the GIL), fsync always.
Prints transactions/s and the server's CPU per transaction (from /proc).

    python bench/bench_transactions.py [--seconds 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from bench.results import record  # noqa: E402
from tests.support.wire_client import cpu_seconds  # noqa: E402
from tests.support.process import ServerProcess, create_topics  # noqa: E402


def run_producer(bootstrap: str, txn_id: str, deadline: float, counts: list[int], i: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(30)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-txn-{txn_id}"})
    metadata = group.consumer_group_metadata()
    n = 0
    while time.monotonic() < deadline:
        p.begin_transaction()
        for m in range(10):
            p.produce("bench-txn", b"x" * 100, partition=m % 3)
        p.send_offsets_to_transaction([TopicPartition("bench-in", 0, n + 1)], metadata, 30)
        p.commit_transaction(30)
        n += 1
    counts[i] = n
    group.close()


def one_run(server: ServerProcess, producers: int, seconds: float, run: int) -> tuple[float, float]:
    counts = [0] * producers
    deadline = time.monotonic() + seconds
    cpu = cpu_seconds(server.proc.pid)
    start = time.monotonic()
    threads = [
        threading.Thread(target=run_producer, args=(server.bootstrap, f"tx-{run}-{i}", deadline, counts, i))
        for i in range(producers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed, cpu = time.monotonic() - start, cpu_seconds(server.proc.pid) - cpu
    total = sum(counts)
    return total / elapsed, cpu / max(total, 1) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", ["--fsync", "always", "--log-level", "WARNING"])
        server.start()
        try:
            create_topics(server.port, "bench-txn", partitions=3)
            create_topics(server.port, "bench-in", partitions=1)
            results: dict[int, list[tuple[float, float]]] = {1: [], 10: []}
            for run in range(args.repeat):
                for producers in results:
                    results[producers].append(one_run(server, producers, args.seconds, run))
            for producers, runs in results.items():
                rates = sorted(r for r, _ in runs)
                cpus = [c for _, c in runs]
                print(
                    f"transactions (10 messages on 3 partitions + group offsets), {producers:2d} producer(s), "
                    f"fsync always: {statistics.median(rates):,.0f}/s (median of {len(runs)}, range "
                    f"{rates[0]:,.0f}-{rates[-1]:,.0f}), server CPU {statistics.median(cpus):,.0f} us each"
                )
                figure = (
                    f"transactions of 10 messages on 3 partitions plus group offsets, confluent-kafka, "
                    f"fsync always, {producers} producer(s), median of {len(runs)}"
                )
                record(figure, statistics.median(rates), "txn/s", params={"producers": producers, "runs": len(runs)})
                record(
                    f"{figure}: server CPU per transaction",
                    statistics.median(cpus),
                    "us",
                    params={"producers": producers, "runs": len(runs)},
                )
        finally:
            server.close()


if __name__ == "__main__":
    main()
