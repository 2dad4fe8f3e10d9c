"""End to end with real clients: produce, consume in a 3-member group, hand over, restart.

For each client library: a 6-partition topic, keyed messages, a group of three whose
members commit what they processed; one member leaves half way and the others take over
its partitions from the committed offsets. Every message is seen exactly once, in
partition order. After a server restart the group has nothing left to read and a new
group reads the whole topic again.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import threading
import time
from collections import defaultdict

import pytest

from tests.support.process import kafka_python_subscribe, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

PARTITIONS = 6
SESSION_MS = 6000


def create_topic(bootstrap: str, name: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    admin.close()


def produce(bootstrap: str, topic: str, n: int, **config) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})
    for i in range(n):
        p.produce(topic, key=f"key-{i % 97}".encode(), value=str(i).encode())
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def check_exactly_once(seen: list[tuple[int, int, bytes]], n: int) -> None:
    """seen: (partition, offset, value) in consumption order across all members."""
    values = [int(v) for _, _, v in seen]
    assert len(values) == n and set(values) == set(range(n)), (len(values), len(set(values)))
    last: dict[int, int] = {}
    for partition, offset, _ in seen:
        assert offset > last.get(partition, -1), f"partition {partition} went back to {offset}"
        last[partition] = offset


# one member per library --------------------------------------------------------------------


class KafkaPythonMember(threading.Thread):
    def __init__(self, bootstrap, topic, group, name, sink, lock):
        super().__init__(daemon=True)
        from kafka import KafkaConsumer

        # Every polled batch is committed before the next poll, and a rebalance happens only
        # inside poll(): so processed == committed at every hand-over.
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
        )
        kafka_python_subscribe(self.consumer, topic)
        self.sink, self.lock, self.stop = sink, lock, threading.Event()

    def run(self):
        while not self.stop.is_set():
            batch = self.consumer.poll(timeout_ms=100)
            with self.lock:
                for msgs in batch.values():
                    self.sink.extend((m.partition, m.offset, m.value) for m in msgs)
            if batch:
                self.consumer.commit()
        self.consumer.commit()
        self.consumer.close()


class ConfluentMember(threading.Thread):
    def __init__(self, bootstrap, topic, group, name, sink, lock):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
            }
        )

        def on_revoke(consumer, partitions):
            try:
                consumer.commit(asynchronous=False)
            except Exception:
                pass  # nothing consumed yet

        self.consumer.subscribe([topic], on_revoke=on_revoke)
        self.sink, self.lock, self.stop = sink, lock, threading.Event()

    def run(self):
        while not self.stop.is_set():
            msgs = self.consumer.consume(500, 0.1)
            with self.lock:
                self.sink.extend((m.partition(), m.offset(), m.value()) for m in msgs if not m.error())
            if msgs:
                self.consumer.commit(asynchronous=False)
        self.consumer.close()


def run_threaded_group(member_cls, bootstrap, topic, n):
    sink, lock = [], threading.Lock()
    members = [member_cls(bootstrap, topic, "handover", f"member-{i}", sink, lock) for i in range(3)]
    for m in members:
        m.start()
    wait_for(lambda: len(sink) >= n // 3, timeout=60, what="a third of the messages")
    members[0].stop.set()
    members[0].join(30)
    wait_for(lambda: len(sink) >= n, timeout=60, what="all messages after the hand-over")
    time.sleep(0.5)  # nothing more must arrive (no duplicates)
    for m in members[1:]:
        m.stop.set()
    for m in members[1:]:
        m.join(30)
    return sink


async def run_aiokafka_group(bootstrap, topic, n):
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    sink = []

    async def member(name, stop: asyncio.Event):
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id="handover",
            client_id=name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
        )

        class CommitOnRevoke(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                await consumer.commit()

            async def on_partitions_assigned(self, assigned):
                pass

        consumer.subscribe([topic], listener=CommitOnRevoke())
        await consumer.start()
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                for msgs in batch.values():
                    sink.extend((m.partition, m.offset, m.value) for m in msgs)
                if batch:
                    await consumer.commit()
        finally:
            await consumer.stop()

    stops = [asyncio.Event() for _ in range(3)]
    tasks = [asyncio.create_task(member(f"member-{i}", s)) for i, s in enumerate(stops)]
    deadline = time.monotonic() + 60
    while len(sink) < n // 3:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    stops[0].set()
    await tasks[0]
    while len(sink) < n:
        assert time.monotonic() < deadline + 60, len(sink)
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    for s in stops[1:]:
        s.set()
    await asyncio.gather(*tasks[1:])
    return sink


def committed_total(bootstrap: str, topic: str, group: str) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    total = sum(c.committed(tp) or 0 for tp in tps)
    c.close()
    return total


def read_all(bootstrap: str, topic: str, n: int, group: str | None = None) -> list[int]:
    """Values read by a consumer (of a new group unless given) until n arrived, then 1 s more."""
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"reader-{time.time()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    values: list[int] = []
    deadline = time.monotonic() + 60
    while len(values) < n and time.monotonic() < deadline:
        values += [int(m.value()) for m in c.consume(1000, 0.2) if not m.error()]
    values += [int(m.value()) for m in c.consume(1000, 1.0) if not m.error()]  # nothing more may come
    c.close()
    return values


@pytest.mark.parametrize("client,n", [("kafka-python", 2000), ("confluent", 10_000), ("aiokafka", 2000)])
def test_produce_consume_handover_restart(server, client, n):
    topic = f"events-{client}"
    create_topic(server.bootstrap, topic)
    produce(server.bootstrap, topic, n)
    if client == "aiokafka":
        seen = asyncio.run(run_aiokafka_group(server.bootstrap, topic, n))
    else:
        member = KafkaPythonMember if client == "kafka-python" else ConfluentMember
        seen = run_threaded_group(member, server.bootstrap, topic, n)
    check_exactly_once(seen, n)
    assert committed_total(server.bootstrap, topic, "handover") == n
    server.restart(signal.SIGTERM)
    assert committed_total(server.bootstrap, topic, "handover") == n  # the group resumes at the end
    assert sorted(read_all(server.bootstrap, topic, n)) == list(range(n))  # data intact
    # A restarted member of the group resumes exactly after its last commit.
    produce(server.bootstrap, topic, 10)
    assert sorted(read_all(server.bootstrap, topic, 10, group="handover")) == list(range(10))


def test_idempotent_producer_across_restart(server):
    """librdkafka's idempotent producer retries through a restart: nothing lost, nothing twice."""
    from confluent_kafka import Producer

    create_topic(server.bootstrap, "idem")
    p = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "retry.backoff.ms": 50,
            "message.timeout.ms": 60_000,
        }
    )
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    n = 3000
    for i in range(n):
        p.produce("idem", key=str(i % 13).encode(), value=str(i).encode(), on_delivery=report)
        if i == n // 2:
            p.flush(30)
            server.restart(signal.SIGKILL)  # crash while the producer keeps going
        p.poll(0)
    assert p.flush(60) == 0 and not errors
    values = read_all(server.bootstrap, "idem", n)
    assert sorted(values) == list(range(n))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (make test installs it)")
def test_kcat_produce_consume_group_and_offsets_topic(server):
    lines = "".join(f"k{i}:v{i}\n" for i in range(500)).encode()
    subprocess.run(["kcat", "-P", "-b", server.bootstrap, "-t", "kc", "-K:"], input=lines, check=True, timeout=30)
    out = subprocess.run(
        ["kcat", "-C", "-b", server.bootstrap, "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k=%s\n"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
    assert sorted(out.split()) == sorted(f"k{i}=v{i}" for i in range(500))
    out = subprocess.run(
        ["kcat", "-b", server.bootstrap, "-G", "kcat-group", "kc", "-o", "beginning", "-e", "-q", "-f", "%s\n"],
        capture_output=True,
        timeout=60,
    ).stdout.decode()
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(500))
    # The group's commits are in __consumer_offsets, readable like on Kafka (Burrow, kcat).
    wait_for(
        lambda: (
            b"kcat-group"
            in subprocess.run(
                [
                    "kcat",
                    "-C",
                    "-b",
                    server.bootstrap,
                    "-t",
                    "__consumer_offsets",
                    "-o",
                    "beginning",
                    "-e",
                    "-q",
                    "-f",
                    "%k\n",
                ],
                capture_output=True,
                timeout=30,
            ).stdout
        ),
        what="commit records in __consumer_offsets",
    )


def test_offsets_topic_records_decode_as_kafka_writes_them(server):
    """A consumer reading __consumer_offsets sees Kafka's key/value schemas."""
    from confluent_kafka import Consumer, TopicPartition

    from coordinator.log.offsets import partition_for
    from protocol.group_records import GroupMetadataKey, OffsetCommitKey, decode_record

    create_topic(server.bootstrap, "watched")
    produce(server.bootstrap, "watched", 10)
    c = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "watchers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(["watched"])
    got = 0
    deadline = time.monotonic() + 30
    while got < 10 and time.monotonic() < deadline:
        got += len([m for m in c.consume(100, 0.2) if not m.error()])
    c.commit(asynchronous=False)
    c.close()
    reader = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "burrow-like", "enable.auto.commit": False})
    reader.assign([TopicPartition("__consumer_offsets", partition_for("watchers"), 0)])
    keys = defaultdict(list)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (keys[OffsetCommitKey] and keys[GroupMetadataKey]):
        for m in reader.consume(100, 0.2):
            if not m.error():
                key, value = decode_record(m.key(), m.value())
                keys[type(key)].append((key, value))
    reader.close()
    assert {k.topic for k, _ in keys[OffsetCommitKey]} == {"watched"}
    assert sum(v.offset for _, v in keys[OffsetCommitKey][-PARTITIONS:]) <= 10
    assert any(v is not None and v.protocol_type == "consumer" for _, v in keys[GroupMetadataKey])
