"""How long real clients wait on the group protocol's timing, the waits a test suite pays:
- a third confluent-kafka KIP-848 member (group.protocol=consumer) joining two on a 6-partition
  topic: from its subscribe to all three holding a stable assignment (two partitions each, none
  shared);
- two confluent-kafka share consumers subscribing at once to a topic a producer keeps writing:
  from their subscribe to both having received records;
- Kafka's Java KafkaConsumer on the consumer protocol (Kafka 4.4's VerifiableConsumer, from
  `make oracle`): from its subscribe to its first assignment.

Each against this server with `--profile test` (what coordinator.testing and the pytest fixtures
run), this server with its defaults, and, with --kafka, a real Kafka 4.4 node with its defaults
(one node: replication factors 1), in turn within one run. Medians of --runs, with ranges.

    python bench/bench_client_waits.py [--runs 3] [--kafka] [--no-java]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import record  # noqa: E402

TIMEOUT = 60.0  # seconds a scenario may take before it counts as failed


class OurServer:
    def __init__(self, *flags: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-waits-"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "--port", "0", "--data-dir", str(self.dir / "d"), *flags],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=open(self.dir / "server.log", "wb"),  # noqa: SIM115  # (the child's; closed with it)
        )
        line = self.proc.stdout.readline().decode()  # type: ignore[union-attr]  # stdout=PIPE
        self.bootstrap = line.split()[1]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


class Kafka44:
    def __init__(self) -> None:
        from tests.support.kafka_oracle import KafkaNode

        self.dir = Path(tempfile.mkdtemp(prefix="bench-waits-kafka-"))
        self.node = KafkaNode(self.dir)
        # Kafka's defaults for what is measured: only what one node needs differs.
        self.node.properties = lambda: {  # type: ignore[method-assign]  # a plain node, without the suite's delay 0
            k: v for k, v in KafkaNode.properties(self.node).items() if k != "group.initial.rebalance.delay.ms"
        }
        self.node.start()
        self.bootstrap = self.node.bootstrap

    def close(self) -> None:
        self.node.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not ready")
        time.sleep(0.05)


def third_member(bootstrap: str) -> float:
    """Seconds from a third KIP-848 member's subscribe to a stable assignment of all three."""
    from confluent_kafka import Consumer

    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 6)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"}

    def stable(consumers: list[Any]) -> bool:
        owned = [{tp.partition for tp in c.assignment()} for c in consumers]
        every = set().union(*owned)
        return len(every) == 6 and sum(map(len, owned)) == 6 and all(len(o) == 6 // len(consumers) for o in owned)

    def until_stable(consumers: list[Any]) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not stable(consumers):
            if time.monotonic() > deadline:
                raise RuntimeError("no stable assignment")
            for c in consumers:
                c.poll(0.01)

    consumers = [Consumer(conf), Consumer(conf)]
    try:
        for c in consumers:
            c.subscribe([topic])
        until_stable(consumers)
        third = Consumer(conf)
        consumers.append(third)
        started = time.monotonic()
        third.subscribe([topic])
        until_stable(consumers)
        return time.monotonic() - started
    finally:
        for c in consumers:
            c.close()


def share_pair(bootstrap: str) -> float:
    """Seconds from two share consumers' subscribe to both having received records."""
    from confluent_kafka import Producer, ShareConsumer

    topic, group = f"s-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        i = 0
        while not stop.is_set():
            producer.produce(topic, value=b"x", partition=i % 2)
            producer.poll(0)
            i += 1
            time.sleep(0.005)
        producer.flush(10)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    consumers = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(2)]
    try:
        started = time.monotonic()
        for c in consumers:
            c.subscribe([topic])
        first: list[float | None] = [None, None]
        deadline = started + TIMEOUT
        while None in first:
            if time.monotonic() > deadline:
                raise RuntimeError("a share consumer received nothing")
            for i, c in enumerate(consumers):
                records = c.poll(0.02)  # (a Messages container)
                if first[i] is None and any(m.error() is None for m in records):
                    first[i] = time.monotonic()
        return max(t for t in first if t is not None) - started
    finally:
        stop.set()
        for c in consumers:
            c.close()
        writer.join(15)


def java_join(bootstrap: str) -> float:
    """Seconds from the Java KafkaConsumer's subscribe (VerifiableConsumer's startup_complete,
    printed just before it) to its first non-empty assignment, by the consumer's own clock."""
    from tests.support.kafka_oracle import classpath

    topic, group = f"j-{uuid.uuid4().hex[:8]}", f"jg-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    proc = subprocess.Popen(
        [
            *("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath()),
            "org.apache.kafka.tools.VerifiableConsumer",
            *("--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group),
            *("--group-protocol", "consumer"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        started = None
        deadline = time.monotonic() + TIMEOUT
        for line in proc.stdout:  # type: ignore[union-attr]  # stdout=PIPE
            if time.monotonic() > deadline:
                break
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event.get("name") == "startup_complete":
                started = event["timestamp"]
            elif event.get("name") == "partitions_assigned" and event.get("partitions") and started is not None:
                return (event["timestamp"] - started) / 1000
        raise RuntimeError("the Java consumer was not assigned a partition")
    finally:
        proc.terminate()
        proc.wait(30)


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f}, {len(values)} runs)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kafka", action="store_true", help="also against a real Kafka 4.4 node (make oracle)")
    ap.add_argument("--no-java", action="store_true", help="skip the Java consumer (needs make oracle)")
    args = ap.parse_args()
    scenarios: dict[str, tuple[str, Callable[[str], float]]] = {
        "third": (
            "a third confluent-kafka KIP-848 member: subscribe to a stable assignment of all three",
            third_member,
        ),
        "share": ("two confluent-kafka share consumers: subscribe to both receiving records", share_pair),
    }
    if not args.no_java:
        scenarios["java"] = ("Java KafkaConsumer, consumer protocol: subscribe to its first assignment", java_join)
    targets: dict[str, Callable[[], Any]] = {
        "this server, --profile test": lambda: OurServer("--profile", "test"),
        "this server, its defaults": lambda: OurServer(),
    }
    if args.kafka:
        targets["Kafka 4.4, its defaults"] = Kafka44
    results: dict[tuple[str, str], list[float]] = {}
    for name, make in targets.items():
        server = make()
        try:
            for key, (_, scenario) in scenarios.items():
                for _ in range(args.runs):
                    results.setdefault((key, name), []).append(scenario(server.bootstrap))
                print(f"{scenarios[key][0]}, {name}: {summary(results[key, name])}", flush=True)
        finally:
            server.close()
    for key, (what, _) in scenarios.items():
        ours = results[key, "this server, --profile test"]
        kafka = results.get((key, "Kafka 4.4, its defaults"))
        shape = {"runs": args.runs, "min": min(ours), "max": max(ours)}
        record(
            f"{what}: this server with --profile test (median of {args.runs})",
            statistics.median(ours),
            "s",
            params=shape,
            peer="Kafka 4.4 with its defaults" if kafka else None,
            peer_value=statistics.median(kafka) if kafka else None,
        )
        defaults = results[key, "this server, its defaults"]
        record(
            f"{what}: this server with its defaults (median of {args.runs})",
            statistics.median(defaults),
            "s",
            params={"runs": args.runs, "min": min(defaults), "max": max(defaults)},
        )


if __name__ == "__main__":
    main()
