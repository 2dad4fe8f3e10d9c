"""Dynamic broker configs as Kafka's DynamicBrokerConfig takes them: the names Kafka
reconfigures (cleaner, threads, listener SSL/SASL, connection limits, ...) are stored and
described as DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG; other Kafka configs,
security configs without a listener prefix and per-broker configs at the cluster default are
refused with INVALID_REQUEST; max.connections and log.cleaner.backoff.ms take effect (the latter at once)."""

from __future__ import annotations

import asyncio
import socket
import time

from tests.support.wire_client import WireClient
from protocol.record_batch import build_batch
from tests.support.configs import BROKER, DYNAMIC_BROKER, DYNAMIC_DEFAULT, alter, by_name, describe, incremental
from tests.support.data_plane import FETCH, create, fetch_body
from tests.support.topic_configs import produce_full

SET, DELETE = 0, 1
INVALID_REQUEST, INVALID_CONFIG = 42, 40


async def test_dynamic_names_accepted_others_refused(server):
    conn = await WireClient("dyn").connect("127.0.0.1", server.port)
    ok = [
        ("sasl.kerberos.min.time.before.relogin", "58000"),
        ("log.cleaner.threads", "2"),
        ("num.io.threads", "4"),
        ("max.connections.per.ip", "100"),
        ("message.max.bytes", "2000000"),
        ("listener.name.plaintext.ssl.keystore.location", "/tmp/ks.jks"),
        ("producer.id.expiration.ms", "60000"),
        ("my.custom.setting", "anything"),
    ]
    for name, value in ok:
        assert await incremental(conn, BROKER, "1", [(name, SET, value)]) == (0, None), name
    b = by_name(await describe(conn, BROKER, "1"))
    relogin = b["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.config_source, relogin.read_only) == ("58000", DYNAMIC_BROKER, False)
    assert b["log.cleaner.threads"].value == "2" and b["num.io.threads"].config_source == DYNAMIC_BROKER
    custom = b["my.custom.setting"]  # Kafka knows no type for it: described as sensitive, without a value
    assert (custom.value, custom.is_sensitive, custom.config_type, custom.read_only) == (None, True, 0, True)
    assert b["ssl.keystore.password"].is_sensitive and b["ssl.keystore.password"].value is None
    assert b["log.dirs"].read_only if "log.dirs" in b else True
    assert b["num.partitions"].read_only is True and b["max.connections"].read_only is False
    # message.max.bytes is the default of every topic's max.message.bytes
    assert await create(conn, "t", partitions=1) == 0
    from tests.support.configs import TOPIC

    assert by_name(await describe(conn, TOPIC, "t"))["max.message.bytes"].value == "2000000"

    refused = [
        ("1", "group.max.size", "5", "Cannot update these configs dynamically: [group.max.size]"),
        (
            "1",
            "auto.create.topics.enable",
            "false",
            "Cannot update these configs dynamically: [auto.create.topics.enable]",
        ),
        (
            "1",
            "ssl.keystore.location",
            "/tmp/ks.jks",
            "These security configs can be dynamically updated only "
            "per-listener using the listener prefix: [ssl.keystore.location]",
        ),
        (
            "",
            "sasl.kerberos.min.time.before.relogin",
            "1",
            "Cannot update these configs at default cluster level, "
            "broker id must be specified: [sasl.kerberos.min.time.before.relogin]",
        ),
        (
            "1",
            "log.cleaner.threads",
            "two",
            "Invalid value two for configuration log.cleaner.threads: Not a number of type INT",
        ),
        ("1", "log.cleaner.backoff.ms", "-1", None),
        ("1", "sasl.login.refresh.window.factor", "2.0", None),
        ("1", "ssl.client.auth", "maybe", None),
    ]
    for resource, name, value, message in refused:
        code, why = await incremental(conn, BROKER, resource, [(name, SET, value)])
        assert code == INVALID_REQUEST, (name, code, why)
        assert message is None or why == message, why
    # the legacy AlterConfigs validates alike; max.connections may be a cluster default
    assert await alter(conn, BROKER, "1", [("group.max.size", "5")]) == INVALID_REQUEST
    assert (await incremental(conn, BROKER, "", [("max.connections", SET, "500")]))[0] == 0
    d = by_name(await describe(conn, BROKER, ""))
    assert (d["max.connections"].value, d["max.connections"].config_source) == ("500", DYNAMIC_DEFAULT)
    # deleting restores the static value
    assert (await incremental(conn, BROKER, "1", [("num.io.threads", DELETE, None)]))[0] == 0
    assert by_name(await describe(conn, BROKER, "1"))["num.io.threads"].value == "8"
    await conn.close()
    assert "Traceback" not in server.log_text()

    server.restart()  # stored in the data dir
    conn = await WireClient("dyn").connect("127.0.0.1", server.port)
    b = by_name(await describe(conn, BROKER, "1"))
    assert b["sasl.kerberos.min.time.before.relogin"].value == "58000"
    assert b["max.connections"].value == "500"
    await conn.close()


def test_confluent_admin_round_trip(server):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    broker = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("sasl.kerberos.min.time.before.relogin", "58000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("log.cleaner.backoff.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([broker])[broker].result(30)
    described = ConfigResource(ResourceType.BROKER, "1")
    entries = admin.describe_configs([described])[described].result(30)
    assert entries["sasl.kerberos.min.time.before.relogin"].value == "58000"
    assert entries["log.cleaner.backoff.ms"].value == "1000"
    assert entries["log.cleaner.backoff.ms"].source == 2  # DYNAMIC_BROKER_CONFIG
    bad = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)],
    )
    try:
        admin.incremental_alter_configs([bad])[bad].result(30)
        raise AssertionError("a static config was altered")
    except KafkaException as e:
        assert e.args[0].code() == INVALID_REQUEST and "dynamically" in e.args[0].str()


async def test_max_connections_takes_effect(server):
    conn = await WireClient("limit").connect("127.0.0.1", server.port)
    assert (await incremental(conn, BROKER, "1", [("max.connections", SET, "1")]))[0] == 0
    with socket.create_connection(("127.0.0.1", server.port)) as extra:
        extra.settimeout(10)
        assert extra.recv(1) == b""  # closed at once: the one connection allowed is taken
    assert (await incremental(conn, BROKER, "1", [("max.connections", DELETE, None)]))[0] == 0
    await conn.close()


async def _dirty_compacted_topic(conn, name: str) -> None:
    assert (
        await create(
            conn,
            name,
            partitions=1,
            configs=[("cleanup.policy", "compact"), ("segment.bytes", "14"), ("min.cleanable.dirty.ratio", "0.01")],
        )
        == 0
    )
    now = int(time.time() * 1000)
    for i in range(5):  # each batch rolls a segment: offsets 0-3 closed, one key
        assert (await produce_full(conn, name, build_batch([(b"k", b"%d" % i)], timestamp_ms=now))).error_code == 0


async def _cleaned(conn, name: str) -> list[int]:
    """The offsets left once the cleaner has been at the log (polled: it runs in the background)."""
    from protocol.record_batch import iter_records

    async def offsets() -> list[int]:
        r = await conn.request(FETCH, 11, fetch_body(name, 0))
        return [rec.offset for rec in iter_records(r.responses[0].partitions[0].records)]

    # (the cleaner may run between the produces: done when every older record of the key is gone)
    deadline = time.monotonic() + 30
    while (await offsets())[0] < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return await offsets()


async def test_cleaner_runs_every_backoff(server_factory):
    """A dirty compacted log is cleaned within log.cleaner.backoff.ms, not the retention check."""
    server = server_factory("--log-cleaner-backoff-ms", "100", "--log-retention-check-interval-ms", "3600000")
    conn = await WireClient("clean").connect("127.0.0.1", server.port)
    await _dirty_compacted_topic(conn, "c")
    assert (await _cleaned(conn, "c"))[0] >= 3  # the key's older records are gone
    await conn.close()
    assert "Traceback" not in server.log_text()


async def test_dynamic_backoff_takes_effect_at_once(server_factory):
    """An hour's backoff, then a dynamic 100 ms: the cleaner looks at once (Kafka restarts its
    cleaner threads on the change) and the dirty log is cleaned."""
    server = server_factory("--log-cleaner-backoff-ms", "3600000", "--log-retention-check-interval-ms", "3600000")
    conn = await WireClient("clean").connect("127.0.0.1", server.port)
    await _dirty_compacted_topic(conn, "c")
    assert (await incremental(conn, BROKER, "", [("log.cleaner.backoff.ms", SET, "100")]))[0] == 0
    assert (await _cleaned(conn, "c"))[0] >= 3
    await conn.close()
    assert "Traceback" not in server.log_text()


def test_kafka_python_admin_round_trip(server):
    """kafka-python checks the names against the broker's dynamic configs before it sends them."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    broker = ConfigResource(
        ConfigResourceType.BROKER,
        "1",
        configs={"sasl.kerberos.min.time.before.relogin": "58000", "log.cleaner.threads": "2"},
    )
    admin.alter_configs([broker])
    described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])["broker"]["1"]
    relogin = described["sasl.kerberos.min.time.before.relogin"]
    assert (relogin["value"], relogin["config_source"], relogin["read_only"]) == (
        "58000",
        "DYNAMIC_BROKER_CONFIG",
        False,
    )
    assert described["log.cleaner.threads"]["value"] == "2"
    admin.close()


def test_any_broker_config_change_is_answered_and_what_is_stored_loads_again(server):
    """Whatever names, operations and values an IncrementalAlterConfigs on a broker carries,
    the answer is a Kafka error code with the connection open; whatever was accepted is
    stored as a document the restarted server reads (a stored value it refused would stop
    the start)."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    names = st.sampled_from(
        [
            "log.cleaner.threads",
            "max.connections",
            "message.max.bytes",
            "log.retention.ms",
            "listener.name.plaintext.max.connections",
            "listener.name.x.ssl.key.password",
            "ssl.client.auth",
            "group.max.size",
            "my.custom",
            "",
            "log.cleaner.backoff.ms",
            "sasl.login.refresh.window.factor",
            "log.cleanup.policy",
            "compression.type",
        ]
    )
    values = (
        st.none()
        | st.sampled_from(
            [
                "1",
                "-1",
                "0",
                "2.5",
                "compact",
                "delete,compact",
                "none",
                "zstd",
                "9223372036854775808",
                " 7 ",
                "required",
            ]
        )
        | st.text(max_size=6)
    )
    ops = st.lists(st.tuples(names, st.integers(-1, 4), values), max_size=3)

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(resource=st.sampled_from(["1", "", "2", "x"]), changes=ops)
    def check(resource, changes):
        async def run():
            conn = await WireClient("dyn-fuzz").connect("127.0.0.1", server.port)
            try:
                return await incremental(conn, BROKER, resource, changes)
            finally:
                await conn.close()

        code, _ = asyncio.run(run())
        assert code in (0, INVALID_REQUEST, INVALID_CONFIG), code

    check()
    assert "Traceback" not in server.log_text()
    server.restart()  # every accepted value loads again
    assert "Traceback" not in server.log_text()
