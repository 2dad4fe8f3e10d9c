"""Topic configs as Kafka validates and honours them: every standard name accepted with a
valid value, bad ones refused; LogAppendTime stamping, broker-side compression.type,
cleanup.policy=compact,delete run by log maintenance."""

from __future__ import annotations

import asyncio
import time

from coordinator.broker.config_defs import BOOLEAN, DOUBLE, INT, LIST, LONG, TOPIC_CONFIG_DEFS
from protocol.record_batch import build_batch, iter_batches, iter_records
from tests.support.data_plane import FETCH, LIST_OFFSETS, cls, create, fetch_body
from tests.support.topic_configs import (
    produce_full,
)
from tests.support.wire_client import WireClient

VALID = {  # a valid non-default value for each config that is not a plain number
    "cleanup.policy": "compact,delete",
    "compression.type": "lz4",
    "message.timestamp.type": "LogAppendTime",
    "message.format.version": "2.8-IV1",
    "leader.replication.throttled.replicas": "0:1,1:1",
    "follower.replication.throttled.replicas": "*",
    "compression.gzip.level": "5",
    "compression.lz4.level": "12",
    "compression.zstd.level": "-5",
    "min.cleanable.dirty.ratio": "0.25",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
}


def a_valid_value(name: str) -> str:
    d = TOPIC_CONFIG_DEFS[name]
    if name in VALID:
        return VALID[name]
    return {BOOLEAN: "true", DOUBLE: "0.3", INT: "2048", LONG: "123456", LIST: ""}.get(d.type, "x")


async def test_every_standard_topic_config_is_accepted_and_bad_values_refused(server):
    conn = await WireClient("cfg").connect("127.0.0.1", server.port)
    assert len(TOPIC_CONFIG_DEFS) >= 35
    for i, name in enumerate(sorted(TOPIC_CONFIG_DEFS)):
        assert (
            await create(conn, f"ok{i}", partitions=1, configs=[(name, a_valid_value(name))], validate_only=True) == 0
        ), name
    assert (
        await create(
            conn,
            "all",
            partitions=1,
            configs=[
                ("cleanup.policy", "compact,delete"),
                ("min.cleanable.dirty.ratio", "0.1"),
                ("file.delete.delay.ms", "0"),
                ("max.compaction.lag.ms", "60000"),
                ("min.compaction.lag.ms", "10"),
            ],
        )
        == 0
    )
    bad = [
        ("min.cleanable.dirty.ratio", "1.5"),
        ("cleanup.policy", "compact,shred"),
        ("segment.bytes", "10"),
        ("message.timestamp.type", "BrokerTime"),
        ("retention.ms", "-2"),
        ("max.compaction.lag.ms", "0"),
        ("preallocate", "yes"),
        ("compression.type", "brotli"),
        ("compression.lz4.level", "18"),
        ("segment.ms", "soon"),
        ("max.message.bytes", "99999999999"),
        ("no.such.config", "1"),
        ("leader.replication.throttled.replicas", "0-1"),
    ]
    for name, value in bad:
        assert await create(conn, "bad", partitions=1, configs=[(name, value)]) == 40, (name, value)
    # across configs, as Kafka's LogConfig.validate
    assert (
        await create(
            conn, "bad", partitions=1, configs=[("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")]
        )
        == 40
    )
    await conn.close()
    assert "Traceback" not in server.log_text()


async def test_log_append_time_and_broker_compression(server):
    conn = await WireClient("lat").connect("127.0.0.1", server.port)
    assert await create(conn, "lat", partitions=1, configs=[("message.timestamp.type", "LogAppendTime")]) == 0
    assert await create(conn, "gz", partitions=1, configs=[("compression.type", "gzip")]) == 0
    old = int(time.time() * 1000) - 3_600_000
    before = int(time.time() * 1000)
    p = await produce_full(conn, "lat", build_batch([(b"k", b"v"), (b"k2", b"v2")], timestamp_ms=old))
    after = int(time.time() * 1000)
    stamped = round(p.log_append_time.timestamp() * 1000)
    assert p.error_code == 0 and before <= stamped <= after
    r = await conn.request(FETCH, 11, fetch_body("lat", 0))
    data = r.responses[0].partitions[0].records
    ((_, h),) = list(iter_batches(data))
    assert h.is_log_append_time and h.max_timestamp == stamped
    assert [rec.timestamp for rec in iter_records(data)] == [stamped, stamped]  # readers use the broker's time
    # CreateTime topics answer -1 (None)
    assert await create(conn, "ct", partitions=1) == 0
    p = await produce_full(conn, "ct", build_batch([(b"k", b"v")], timestamp_ms=old))
    assert p.error_code == 0 and p.log_append_time is None
    p = await produce_full(conn, "gz", build_batch([(b"k", b"v" * 100)], timestamp_ms=old))
    assert p.error_code == 0
    r = await conn.request(FETCH, 11, fetch_body("gz", 0))
    data = r.responses[0].partitions[0].records
    ((_, h),) = list(iter_batches(data))
    assert h.compression == 1  # gzip, whatever the producer sent
    assert [(rec.key, rec.value, rec.timestamp) for rec in iter_records(data)] == [(b"k", b"v" * 100, old)]
    # message.timestamp.before.max.ms refuses an old CreateTime timestamp: INVALID_TIMESTAMP
    assert await create(conn, "fresh", partitions=1, configs=[("message.timestamp.before.max.ms", "60000")]) == 0
    p = await produce_full(conn, "fresh", build_batch([(b"k", b"v")], timestamp_ms=old))
    assert p.error_code == 32
    await conn.close()


def test_confluent_consumer_sees_log_append_time(server):
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("stamped", 1, 1, config={"message.timestamp.type": "LogAppendTime"})])[
        "stamped"
    ].result(30)
    producer = Producer({"bootstrap.servers": server.bootstrap})
    producer.produce("stamped", value=b"x", timestamp=1_000_000)  # 1970: the broker's time wins
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": server.bootstrap, "group.id": "stamp-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("stamped", 0, 0)])
    msg = None
    for _ in range(100):
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            break
    consumer.close()
    kind, ts = msg.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and abs(ts - time.time() * 1000) < 120_000


async def test_compact_delete_runs_compaction_and_retention(server_factory):
    server = server_factory("--log-retention-check-interval-ms", "100", "--log-cleaner-backoff-ms", "100")
    conn = await WireClient("cd").connect("127.0.0.1", server.port)
    assert (
        await create(
            conn,
            "cd",
            partitions=1,
            configs=[("cleanup.policy", "compact,delete"), ("segment.bytes", "14"), ("retention.ms", "600000")],
        )
        == 0
    )
    old, now = int(time.time() * 1000) - 3_600_000, int(time.time() * 1000)
    for i in range(3):  # offsets 0-2: one key, an hour old: retention's
        assert (await produce_full(conn, "cd", build_batch([(b"old", b"%d" % i)], timestamp_ms=old))).error_code == 0
    for i in range(3):  # offsets 3-5: one key, new: compaction keeps the last
        assert (await produce_full(conn, "cd", build_batch([(b"k", b"%d" % i)], timestamp_ms=now))).error_code == 0
    await produce_full(conn, "cd", build_batch([(b"z", b"active")], timestamp_ms=now))  # offset 6, active segment

    async def earliest():
        T, P = cls(LIST_OFFSETS, 7, "ListOffsetsTopic"), cls(LIST_OFFSETS, 7, "ListOffsetsPartition")
        r = await conn.request(
            LIST_OFFSETS,
            7,
            cls(LIST_OFFSETS, 7)(
                replica_id=-1,
                isolation_level=0,
                topics=(T(name="cd", partitions=(P(partition_index=0, current_leader_epoch=-1, timestamp=-2),)),),
            ),
        )
        return r.topics[0].partitions[0].offset

    for _ in range(200):
        if await earliest() == 5:
            break
        await asyncio.sleep(0.05)
    assert await earliest() == 5
    seen = []
    offset = 5
    while offset < 7:
        r = await conn.request(FETCH, 11, fetch_body("cd", offset))
        recs = list(iter_records(r.responses[0].partitions[0].records))
        seen += [(x.offset, x.key, x.value) for x in recs]
        offset = recs[-1].offset + 1
    assert seen == [(5, b"k", b"2"), (6, b"z", b"active")]
    await conn.close()


def test_clients_produce_to_a_topic_their_metadata_creates(server):
    """Produce never creates a topic; the producer's Metadata does (answered
    UNKNOWN_TOPIC_OR_PARTITION once), and the producer retries until it is there."""
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    p = Producer({"bootstrap.servers": server.bootstrap})
    delivered = []
    p.produce("fresh-rd", value=b"x", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p.flush(30) == 0 and delivered == [(None, 0)]
    kp = KafkaProducer(bootstrap_servers=server.bootstrap)
    assert kp.send("fresh-kp", value=b"y").get(timeout=30).offset == 0
    kp.close()
