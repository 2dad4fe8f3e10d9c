"""How long real clients wait on the group protocol's timing, the waits a test suite pays:
- a third confluent-kafka KIP-848 member (group.protocol=consumer) joining two on a 6-partition
  topic: from its subscribe to all three holding a stable assignment (two partitions each, none
  shared);
- two confluent-kafka share consumers subscribing at once to a topic a producer keeps writing:
  from their subscribe to both having received records;
- Kafka's Java KafkaConsumer on the consumer protocol (kafka-clients 4.4, tests/clients/java's
  join-timing scenario, `make java-clients`): from its subscribe to its first non-empty
  assignment, each time in a new group, by the consumer's own clock. The first consumer of a
  fresh JVM ("cold") also pays the JVM's loading and interpreting of the consumer's join path:
  traced against this server, its first request reaches the wire 1-2.5 s after subscribe on a
  loaded 2-core machine, and every answer leaves the server within a few ms; the first
  heartbeat's answer already carries the assignment. That is the client's own cost, the same
  against Kafka. Later consumers of the same JVM ("warm", the median of --java-joins - 1) show
  what the broker and the group protocol make it wait.

Each against this server with `--profile test` (what coordinator.testing and the pytest fixtures
run), this server with its defaults, and, with --kafka, a real Kafka 4.4 node with its defaults
(one node: replication factors 1), and with --kafka-test one with the test profile's group
settings (initial delay 0, assignment intervals 0, heartbeat intervals 250 ms with their
minimums lowered), in turn within one run. Medians of --runs, with ranges.

    python bench/bench_client_waits.py [--runs 3] [--kafka] [--kafka-test] [--only java] [--no-java]
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


# Kafka 4.4's settings nearest to this server's test profile (coordinator/profiles.py): the
# group timing only; its fsync and share record locks do not change what is measured here.
KAFKA_TEST_LIKE = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "1",
    "group.consumer.heartbeat.interval.ms": "250",
    "group.share.assignment.interval.ms": "0",
    "group.share.min.heartbeat.interval.ms": "1",
    "group.share.heartbeat.interval.ms": "250",
}


class Kafka44:
    def __init__(self, settings: dict[str, str] | None = None) -> None:
        from tests.support.kafka_oracle import KafkaNode

        self.dir = Path(tempfile.mkdtemp(prefix="bench-waits-kafka-"))
        self.node = KafkaNode(self.dir)
        # Kafka's defaults for what is measured, or the given settings: only what one node
        # needs differs.
        self.node.properties = lambda: {  # type: ignore[method-assign]  # a plain node, without the suite's delay 0
            **{k: v for k, v in KafkaNode.properties(self.node).items() if k != "group.initial.rebalance.delay.ms"},
            **(settings or {}),
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


def java_join(bootstrap: str, joins: int) -> dict[str, float]:
    """Seconds from a Java KafkaConsumer's subscribe to its first non-empty assignment: the first
    consumer of a fresh JVM ("java") and the median of the later ones ("java-warm")."""
    from tests.support.reference_clients import java_command

    topic = f"j-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    out = subprocess.run(
        java_command("join-timing", bootstrap, topic, str(joins)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT * joins,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith('{"result"')]
    result = json.loads(lines[-1])["result"] if lines else {}
    seconds = result.get("joins") or []
    if not result.get("ok") or len(seconds) < joins:
        raise RuntimeError(f"the Java consumer was not assigned a partition: {result or out.stderr[-2000:]}")
    return {"java": seconds[0], "java-warm": statistics.median(seconds[1:])}


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f}, {len(values)} runs)"


FIGURES = {
    "third": "a third confluent-kafka KIP-848 member: subscribe to a stable assignment of all three",
    "share": "two confluent-kafka share consumers: subscribe to both receiving records",
    "java": "Java KafkaConsumer, consumer protocol: subscribe to its first assignment, the first consumer of its JVM",
    "java-warm": "Java KafkaConsumer, consumer protocol: subscribe to its first assignment, a later consumer "
    "of the same JVM",
}
OURS, DEFAULTS = "this server, --profile test", "this server, its defaults"
KAFKA, KAFKA_TEST = "Kafka 4.4, its defaults", "Kafka 4.4, test-like settings"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kafka", action="store_true", help="also against a real Kafka 4.4 node (make oracle)")
    ap.add_argument("--kafka-test", action="store_true", help="also against Kafka 4.4 with test-like settings")
    ap.add_argument("--no-java", action="store_true", help="skip the Java consumer (needs make java-clients)")
    ap.add_argument("--only", choices=["third", "share", "java"], help="run one scenario")
    ap.add_argument("--java-joins", type=int, default=4, help="consumers per JVM: the first cold, the rest warm")
    args = ap.parse_args()
    scenarios: dict[str, Callable[[str], dict[str, float]]] = {
        "third": lambda b: {"third": third_member(b)},
        "share": lambda b: {"share": share_pair(b)},
    }
    if not args.no_java:
        scenarios["java"] = lambda b: java_join(b, args.java_joins)
    if args.only:
        scenarios = {args.only: scenarios[args.only]}
    targets: dict[str, Callable[[], Any]] = {
        OURS: lambda: OurServer("--profile", "test"),
        DEFAULTS: lambda: OurServer(),
    }
    if args.kafka:
        targets[KAFKA] = Kafka44
    if args.kafka_test:
        targets[KAFKA_TEST] = lambda: Kafka44(KAFKA_TEST_LIKE)
    results: dict[tuple[str, str], list[float]] = {}
    for name, make in targets.items():
        server = make()
        try:
            for scenario in scenarios.values():
                for _ in range(args.runs):
                    for key, value in scenario(server.bootstrap).items():
                        results.setdefault((key, name), []).append(value)
        finally:
            server.close()
        for key, what in FIGURES.items():
            if (key, name) in results:
                print(f"{what}, {name}: {summary(results[key, name])}", flush=True)
    for key, what in FIGURES.items():
        if (key, OURS) not in results:
            continue
        ours = results[key, OURS]
        peer = KAFKA_TEST if (key, KAFKA_TEST) in results else KAFKA
        kafka = results.get((key, peer))
        record(
            f"{what}: this server with --profile test (median of {args.runs})",
            statistics.median(ours),
            "s",
            params={"runs": args.runs, "min": min(ours), "max": max(ours)},
            peer=("Kafka 4.4 with test-like settings" if peer == KAFKA_TEST else "Kafka 4.4 with its defaults")
            if kafka
            else None,
            peer_value=statistics.median(kafka) if kafka else None,
        )
        for name, label in ((DEFAULTS, "this server with its defaults"), (KAFKA, "Kafka 4.4 with its defaults")):
            values = results.get((key, name))
            if values and (name != KAFKA or peer == KAFKA_TEST):  # (else Kafka's is the peer above)
                record(
                    f"{what}: {label} (median of {args.runs})",
                    statistics.median(values),
                    "s",
                    params={"runs": args.runs, "min": min(values), "max": max(values)},
                )


if __name__ == "__main__":
    main()
