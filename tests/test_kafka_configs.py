"""Kafka 4.4's config listings (DescribeConfigs of a broker, the cluster default, a topic and a
group: names, defaults, sources, synonyms, documentation), the values that are this server's
own, Kafka 4's produce timestamp limits, and what --kafka-version 3.9 brings back. Kafka's
table is coordinator/broker/kafka_configs.json, written from a real 4.4 broker."""

from __future__ import annotations

import time

from coordinator.broker.config_defs import kafka_table
from tests.support.configs import (
    BROKER,
    DEFAULT,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT,
    STATIC,
    TOPIC,
    by_name,
    describe,
    incremental,
)
from tests.support.data_plane import MS, batch, cls, create
from tests.support.wire_client import WireClient

GROUP, GROUP_CONFIG = 32, 8
SET, APPEND = 0, 2
INVALID_CONFIG, INVALID_REQUEST, INVALID_TIMESTAMP = 40, 42, 32
REMOVED_TOPIC_KEYS = {"message.downconversion.enable", "message.format.version", "message.timestamp.difference.max.ms"}
REMOVED_BROKER_KEYS = {"log.message.downconversion.enable", "log.message.format.version"} | {
    "log.message.timestamp.difference.max.ms"
}
NEW_TOPIC_KEYS = {
    "errors.deadletterqueue.group.enable",
    "max.decompressed.message.bytes",
    "remote.copy.lag.bytes",
    "remote.copy.lag.ms",
}


def _syns(entry) -> list[tuple]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


async def test_broker_listing_is_kafka_44s_with_this_servers_own_values(server):
    conn = await WireClient("cfg").connect("127.0.0.1", server.port)
    b = by_name(await describe(conn, BROKER, "1", docs=True))
    kafka = {row[0]: row for row in kafka_table()["broker"]}
    assert set(b) == set(kafka) and len(b) >= 350
    assert not REMOVED_BROKER_KEYS & set(b)
    for prefix in ("group.", "offsets.", "transaction.", "share."):
        assert {n for n in kafka if n.startswith(prefix)} <= set(b)
    # a list is joined item by item, not character by character
    assert b["group.consumer.assignors"].value == "uniform,range"
    # what is really served and where the data is
    assert b["listeners"].value == f"PLAINTEXT://127.0.0.1:{server.port}"
    assert _syns(b["listeners"])[0] == ("listeners", f"PLAINTEXT://127.0.0.1:{server.port}", STATIC)
    assert b["log.dirs"].value == str(server.data_dir.resolve())
    assert (b["node.id"].value, b["broker.id"].value, b["process.roles"].value) == ("1", "1", "broker,controller")
    # Kafka's defaults, types and documentation, and its dynamic (not read-only) configs
    after = b["log.message.timestamp.after.max.ms"]
    assert (after.value, after.config_source, after.config_type) == ("3600000", DEFAULT, 5)
    assert after.documentation == kafka["log.message.timestamp.after.max.ms"][4]
    assert b["log.retention.hours"].read_only and not b["log.retention.ms"].read_only
    assert b["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"  # (Java's double)
    # the cluster default Kafka 4's storage format writes, as 4.4 formats it
    mir = b["min.insync.replicas"]
    assert (mir.value, mir.config_source) == ("1", DYNAMIC_DEFAULT)
    assert _syns(mir) == [("min.insync.replicas", "1", DYNAMIC_DEFAULT), ("min.insync.replicas", "1", DEFAULT)]
    cluster = await describe(conn, BROKER, "")
    assert [(c.name, c.value, c.config_source) for c in cluster.configs] == [("min.insync.replicas", "1", 3)]
    # bad input: Kafka's error codes and words, nothing changed
    assert await incremental(conn, BROKER, "1", [("log.retention.hours", SET, "1")]) == (
        INVALID_REQUEST,
        "Cannot update these configs dynamically: [log.retention.hours]",
    )
    assert await incremental(conn, BROKER, "", [("min.insync.replicas", SET, "0")]) == (
        INVALID_REQUEST,
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
    )
    assert await incremental(conn, BROKER, "1", [("log.message.format.version", SET, "3.0")]) == (0, None)
    assert (await incremental(conn, BROKER, "1", [("max.decompressed.message.bytes", SET, "0")]))[0] == INVALID_REQUEST
    assert by_name(await describe(conn, BROKER, "1"))["max.decompressed.message.bytes"].value == "2147483639"
    await conn.close()


async def test_topic_and_group_listings_are_kafka_44s(server):
    conn = await WireClient("cfg").connect("127.0.0.1", server.port)
    assert await create(conn, "t", partitions=1) == 0
    t = by_name(await describe(conn, TOPIC, "t", docs=True))
    assert set(t) == {row[0] for row in kafka_table()["topic"]}
    assert NEW_TOPIC_KEYS <= set(t) and not REMOVED_TOPIC_KEYS & set(t)
    assert t["message.timestamp.after.max.ms"].value == "3600000"
    assert _syns(t["min.insync.replicas"]) == [
        ("min.insync.replicas", "1", DYNAMIC_DEFAULT),
        ("min.insync.replicas", "1", DEFAULT),
    ]
    assert _syns(t["remote.copy.lag.ms"]) == [("log.remote.copy.lag.ms", "0", DEFAULT)]
    for name in REMOVED_TOPIC_KEYS:
        assert await incremental(conn, TOPIC, "t", [(name, SET, "1")]) == (
            INVALID_CONFIG,
            f"Unknown topic config name: {name}",
        )
    assert await incremental(conn, TOPIC, "t", [("remote.copy.lag.bytes", SET, "-2")]) == (
        INVALID_CONFIG,
        "Invalid value -2 for configuration remote.copy.lag.bytes: Value must be at least -1",
    )
    assert await incremental(conn, TOPIC, "t", [("retention.ms", APPEND, "1")]) == (
        INVALID_CONFIG,
        "Can't APPEND to key retention.ms because its type is not LIST.",
    )
    # invalid values in Kafka's words: the item a list refuses, a double as Java writes it
    for name, value, shown, why in (
        ("cleanup.policy", "compact,bogus", "bogus", "String must be one of: compact, delete"),
        ("min.cleanable.dirty.ratio", "2", "2.0", "Value must be no more than 1"),
        ("compression.gzip.level", "10", "10", "Value must be between 1 and 9 or equal to -1"),
    ):
        message = f"Invalid value {shown} for configuration {name}: {why}"
        assert await incremental(conn, TOPIC, "t", [(name, SET, value)]) == (INVALID_CONFIG, message)
    assert by_name(await describe(conn, TOPIC, "t"))["cleanup.policy"].value == "delete"  # nothing changed

    g = by_name(await describe(conn, GROUP, "g", docs=True))
    assert set(g) == {row[0] for row in kafka_table()["group"]} and len(g) == 21
    assert _syns(g["streams.session.timeout.ms"]) == [("group.streams.session.timeout.ms", "45000", DEFAULT)]
    assert g["streams.assignor.name"].value == "sticky" and g["share.partition.max.record.locks"].value == "2000"
    assert g["errors.deadletterqueue.copy.record.enable"].documentation
    refused = [
        (
            "streams.session.timeout.ms",
            "1",
            "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            "streams.heartbeat.interval.ms",
            "0",
            "Invalid value 0 for configuration streams.heartbeat.interval.ms: Value must be at least 1",
        ),
        ("streams.num.standby.replicas", "3", "streams.num.standby.replicas must be less than or equal to 2"),
        (
            "streams.initial.rebalance.delay.ms",
            "-1",
            "Invalid value -1 for configuration streams.initial.rebalance.delay.ms: Value must be at least 0",
        ),
        (
            "streams.assignor.name",
            "foo",
            "streams.assignor.name 'foo' is not a registered task assignor. Registered assignors are: [sticky].",
        ),
        (
            "streams.rack.aware.assignment.tags",
            "a,,b",
            "Configuration 'streams.rack.aware.assignment.tags' values must not be empty.",
        ),
        (
            "share.partition.max.record.locks",
            "10001",
            "share.partition.max.record.locks must be in the range 100 to 4000 inclusive.",
        ),
        (
            "errors.deadletterqueue.topic.name",
            "__x",
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
        ),
        (
            "errors.deadletterqueue.copy.record.enable",
            "yes",
            "Invalid value yes for configuration errors.deadletterqueue.copy.record.enable: "
            "Expected value to be either true or false",
        ),
        (
            "consumer.session.timeout.ms",
            "44999",
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.",
        ),
        (
            "share.assignment.interval.ms",
            "15001",
            "share.assignment.interval.ms must be in the range 0 to 15000 inclusive.",
        ),
    ]
    for name, value, message in refused:
        assert await incremental(conn, GROUP, "g", [(name, SET, value)]) == (INVALID_CONFIG, message)
    assert await incremental(conn, GROUP, "g", [("streams.rack.aware.assignment.tags", APPEND, "a")]) == (
        INVALID_CONFIG,
        "Can't APPEND to key streams.rack.aware.assignment.tags because its type is not LIST.",
    )
    assert await incremental(conn, GROUP, "", [("streams.session.timeout.ms", SET, "50000")]) == (
        INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    assert by_name(await describe(conn, GROUP, "g"))["streams.session.timeout.ms"].config_source == DEFAULT
    # a group's own values, as Kafka shows them (a list parsed and written again)
    ops = [("streams.num.standby.replicas", SET, "1"), ("streams.rack.aware.assignment.tags", SET, "a, b")]
    assert await incremental(conn, GROUP, "g", ops) == (0, None)
    g = by_name(await describe(conn, GROUP, "g"))
    assert _syns(g["streams.num.standby.replicas"]) == [
        ("streams.num.standby.replicas", "1", GROUP_CONFIG),
        ("group.streams.num.standby.replicas", "0", DEFAULT),
    ]
    assert g["streams.rack.aware.assignment.tags"].value == "a,b"
    await conn.close()


async def _produce_at(conn, topic: str, timestamp: int, n: int = 2):
    v = 11
    P, T = cls(0, v, "PartitionProduceData"), cls(0, v, "TopicProduceData")
    body = cls(0, v)(
        transactional_id=None,
        acks=-1,
        timeout=5000 * MS,
        topic_data=(T(name=topic, partition_data=(P(index=0, records=batch(n, ts=timestamp)),)),),
    )
    return (await conn.request(0, v, body)).responses[0].partition_responses[0]


async def test_future_timestamps_beyond_an_hour_are_refused_per_record(server):
    conn = await WireClient("ts").connect("127.0.0.1", server.port)
    assert await create(conn, "t", partitions=1) == 0
    now = int(time.time() * 1000)
    p = await _produce_at(conn, "t", now + 2 * 3_600_000)
    assert (p.error_code, p.base_offset) == (INVALID_TIMESTAMP, -1)
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in p.record_errors] == [0, 1]
    message = p.record_errors[1].batch_index_error_message
    assert message.startswith(f"Timestamp {now + 2 * 3_600_000} of message with offset 1 is out of range.")
    assert (await _produce_at(conn, "t", now + 60_000)).error_code == 0  # within the hour
    # the topic's own limit, then the broker's (a dynamic default of every topic)
    assert await incremental(conn, TOPIC, "t", [("message.timestamp.after.max.ms", SET, "86400000")]) == (0, None)
    assert (await _produce_at(conn, "t", now + 2 * 3_600_000)).error_code == 0
    assert await create(conn, "u", partitions=1) == 0
    ops = [("log.message.timestamp.after.max.ms", SET, "60000")]
    assert await incremental(conn, BROKER, "1", ops) == (0, None)
    u = by_name(await describe(conn, TOPIC, "u"))["message.timestamp.after.max.ms"]
    assert (u.value, u.config_source) == ("60000", DYNAMIC_BROKER)
    assert (await _produce_at(conn, "u", now + 10 * 60_000)).error_code == INVALID_TIMESTAMP
    # LogAppendTime: the broker stamps the batch, the producer's timestamps are not checked
    assert await create(conn, "v", partitions=1, configs=[("message.timestamp.type", "LogAppendTime")]) == 0
    assert (await _produce_at(conn, "v", now + 2 * 3_600_000)).error_code == 0
    await conn.close()


async def test_kafka_version_39_has_39s_configs(server_factory):
    server = server_factory("--kafka-version", "3.9")
    conn = await WireClient("cfg").connect("127.0.0.1", server.port)
    assert await create(conn, "t", partitions=1, configs=[("message.format.version", "2.8-IV1")]) == 0
    t = by_name(await describe(conn, TOPIC, "t"))
    assert set(t) == {row[0] for row in kafka_table("3.9")["topic"]}
    assert REMOVED_TOPIC_KEYS <= set(t) and not NEW_TOPIC_KEYS & set(t)
    assert t["message.timestamp.after.max.ms"].value == str(2**63 - 1)
    assert (await _produce_at(conn, "t", int(time.time() * 1000) + 2 * 3_600_000)).error_code == 0
    b = by_name(await describe(conn, BROKER, "1"))
    assert REMOVED_BROKER_KEYS <= set(b) and "max.decompressed.message.bytes" not in b
    assert (await describe(conn, BROKER, "")).configs == ()  # (3.9's format writes no cluster default)
    g = await describe(conn, GROUP, "g")  # (3.9 serves no group configs)
    assert (g.error_code, g.configs) == (INVALID_REQUEST, ())
    b = by_name(await describe(conn, BROKER, "1"))
    assert set(b) == {row[0] for row in kafka_table("3.9")["broker"]}  # (Kafka 3.9.1's 314)
    assert await incremental(conn, BROKER, "1", [("group.max.size", SET, "5")]) == (
        INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(group.max.size)",
    )
    await conn.close()
