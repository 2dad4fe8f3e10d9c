"""Each client library produces and reads back with manual assignment (no group involved).

Every library produces keyed messages to a 6-partition topic with its own Produce version
(and a compression codec, which the broker stores untouched), then reads every partition
with assign() from the beginning. After a restart the same records come back at the same
offsets.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

PARTITIONS = 6
N = 2000

Row = tuple[int, int, bytes, bytes]  # partition, offset, key, value


def create_topic(bootstrap: str, name: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    admin.close()


def messages() -> list[tuple[bytes, bytes]]:
    return [(f"key-{i % 101}".encode(), f"value-{i}".encode()) for i in range(N)]


# kafka-python ---------------------------------------------------------------------------


def kafka_python_produce(bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, compression_type="gzip")
    for k, v in messages():
        p.send(topic, key=k, value=v)
    p.flush(30)
    p.close()


def kafka_python_read(bootstrap: str, topic: str) -> list[Row]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    c.seek_to_beginning()
    rows: list[Row] = []
    deadline = time.monotonic() + 30
    while len(rows) < N and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=200).values():
            rows += [(m.partition, m.offset, m.key, m.value) for m in msgs]
    c.close()
    return rows


# aiokafka -------------------------------------------------------------------------------


async def _aiokafka_produce(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    await p.start()
    try:
        futures = [await p.send(topic, key=k, value=v) for k, v in messages()]
        await asyncio.gather(*futures)
    finally:
        await p.stop()


async def _aiokafka_read(bootstrap: str, topic: str) -> list[Row]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await c.start()
    rows: list[Row] = []
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        await c.seek_to_beginning()
        deadline = time.monotonic() + 30
        while len(rows) < N and time.monotonic() < deadline:
            for msgs in (await c.getmany(timeout_ms=200)).values():
                rows += [(m.partition, m.offset, m.key, m.value) for m in msgs]
    finally:
        await c.stop()
    return rows


def aiokafka_produce(bootstrap: str, topic: str) -> None:
    asyncio.run(_aiokafka_produce(bootstrap, topic))


def aiokafka_read(bootstrap: str, topic: str) -> list[Row]:
    return asyncio.run(_aiokafka_read(bootstrap, topic))


# confluent-kafka ------------------------------------------------------------------------


def confluent_produce(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "zstd"})
    for i, (k, v) in enumerate(messages()):
        p.produce(topic, key=k, value=v)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def confluent_read(bootstrap: str, topic: str) -> list[Row]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-with-assign", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    rows: list[Row] = []
    deadline = time.monotonic() + 30
    while len(rows) < N and time.monotonic() < deadline:
        rows += [(m.partition(), m.offset(), m.key(), m.value()) for m in c.consume(1000, 0.2) if not m.error()]
    c.close()
    return rows


CLIENTS = {
    "kafka-python": (kafka_python_produce, kafka_python_read),
    "aiokafka": (aiokafka_produce, aiokafka_read),
    "confluent": (confluent_produce, confluent_read),
}


def check(rows: list[Row]) -> None:
    assert sorted(v for *_, v in rows) == sorted(v for _, v in messages())
    partition_of: dict[bytes, int] = {}
    for partition, _offset, key, _ in rows:
        assert partition_of.setdefault(key, partition) == partition, f"{key!r} in two partitions"
    for p in range(PARTITIONS):
        offsets = [o for q, o, *_ in rows if q == p]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets not 0..n-1 in order"
    assert len({p for p, *_ in rows}) > 1  # keys were spread over partitions


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_assign_read_restart(server, client):
    produce, read = CLIENTS[client]
    topic = f"assigned-{client}"
    create_topic(server.bootstrap, topic)
    produce(server.bootstrap, topic)
    before = read(server.bootstrap, topic)
    check(before)
    server.restart()
    after = read(server.bootstrap, topic)
    assert sorted(after) == sorted(before)  # same records at the same offsets


def test_libraries_read_each_others_records(server):
    """librdkafka's gzip batches, stored as they came, are read alike by all three libraries."""
    from confluent_kafka import Producer

    create_topic(server.bootstrap, "mixed")
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, "compression.type": "gzip"})
    for k, v in messages():
        p.produce("mixed", key=k, value=v)
    assert p.flush(30) == 0
    rows = {name: sorted(read(server.bootstrap, "mixed")) for name, (_, read) in CLIENTS.items()}
    check(rows["confluent"])
    assert rows["kafka-python"] == rows["aiokafka"] == rows["confluent"]
