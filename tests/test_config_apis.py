"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and DescribeCluster: over raw
frames (every version's shape, errors) and with confluent-kafka's AdminClient."""

from __future__ import annotations

from aiokafka.protocol.admin import DescribeConfigsRequest_v0, DescribeConfigsResponse_v0

from coordinator.apis import build
from tests.support.configs import (
    BROKER,
    DEFAULT,
    DESCRIBE_CLUSTER,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT,
    STATIC,
    TOPIC,
    TOPIC_CONFIG,
    alter,
    by_name,
    describe,
    incremental,
)
from tests.support.data_plane import cls, create
from tests.support.legacy import roundtrip
from tests.support.process import create_topics
from tests.support.wire_client import WireClient
from coordinator.data_dir import stored_cluster_id


async def test_describe_and_alter_over_the_wire(server):
    conn = await WireClient("cfg").connect("127.0.0.1", server.port)
    assert await create(conn, "t", partitions=1, configs=[("retention.ms", "3600000")]) == 0
    res = await describe(conn, TOPIC, "t", docs=True)
    assert res.error_code == 0
    c = by_name(res)
    assert len(c) >= 35 and c["min.cleanable.dirty.ratio"].value == "0.5"
    r = c["retention.ms"]
    assert (r.value, r.config_source, r.read_only, r.config_type) == ("3600000", TOPIC_CONFIG, False, 5)
    assert [(s.name, s.value, s.source) for s in r.synonyms] == [("retention.ms", "3600000", TOPIC_CONFIG)]
    seg = c["segment.bytes"]
    assert (seg.value, seg.config_source) == ("1073741824", DEFAULT)
    assert [(s.name, s.source) for s in seg.synonyms] == [("log.segment.bytes", DEFAULT)]
    assert c["cleanup.policy"].config_type == 7 and c["cleanup.policy"].documentation
    # only the keys asked for
    assert [x.name for x in (await describe(conn, TOPIC, "t", keys=("segment.ms",))).configs] == ["segment.ms"]
    assert (await describe(conn, TOPIC, "nope")).error_code == 3
    assert (await describe(conn, 99, "x")).error_code == 42

    # IncrementalAlterConfigs: SET, APPEND to a list, DELETE back to the default
    assert await incremental(
        conn, TOPIC, "t", [("cleanup.policy", 2, "compact"), ("min.cleanable.dirty.ratio", 0, "0.2")]
    ) == (0, None)
    c = by_name(await describe(conn, TOPIC, "t"))
    assert c["cleanup.policy"].value == "delete,compact" and c["min.cleanable.dirty.ratio"].value == "0.2"
    assert await incremental(conn, TOPIC, "t", [("cleanup.policy", 3, "delete"), ("retention.ms", 1, None)]) == (
        0,
        None,
    )
    c = by_name(await describe(conn, TOPIC, "t"))
    assert c["cleanup.policy"].value == "compact"
    assert (c["retention.ms"].value, c["retention.ms"].config_source) == ("604800000", DEFAULT)
    assert (await incremental(conn, TOPIC, "t", [("retention.ms", 2, "5")]))[0] == 40  # APPEND to a LONG
    assert (await incremental(conn, TOPIC, "t", [("retention.ms", 0, "x")]))[0] == 40
    assert (await incremental(conn, TOPIC, "t", [("nope", 0, "1")]))[0] == 40
    assert (await incremental(conn, TOPIC, "t", [("retention.ms", 0, "1"), ("retention.ms", 0, "2")]))[0] == 42
    assert (await incremental(conn, TOPIC, "gone", [("retention.ms", 0, "1")]))[0] == 3
    assert (await incremental(conn, TOPIC, "t", [("retention.ms", 0, None)]))[0] == 42  # SET without a value
    assert (await incremental(conn, TOPIC, "t", [("segment.ms", 0, "1000")], validate_only=True))[0] == 0
    assert by_name(await describe(conn, TOPIC, "t"))["segment.ms"].config_source == DEFAULT  # not applied

    # AlterConfigs replaces the whole set
    assert await alter(conn, TOPIC, "t", [("segment.ms", "1000")]) == 0
    c = by_name(await describe(conn, TOPIC, "t"))
    assert c["segment.ms"].value == "1000" and c["cleanup.policy"].config_source == DEFAULT
    assert await alter(conn, TOPIC, "t", [("segment.ms", "0")], v=0) == 40

    # the broker: its configs, then a dynamic default that topics without their own value follow
    b = by_name(await describe(conn, BROKER, "1"))
    # (log.retention.hours is static in Kafka 4: log.retention.ms is the dynamic one)
    assert b["log.retention.hours"].value == "168" and b["log.retention.hours"].read_only is True
    assert b["log.retention.ms"].value is None and b["log.retention.ms"].read_only is False
    assert b["group.initial.rebalance.delay.ms"].read_only is True
    assert b["group.initial.rebalance.delay.ms"].config_source == STATIC  # ours is 0, Kafka's 3000
    assert (await incremental(conn, BROKER, "1", [("log.retention.ms", 0, "7200000")]))[0] == 0
    assert (await incremental(conn, BROKER, "", [("log.cleaner.min.cleanable.ratio", 0, "0.7")]))[0] == 0
    c = by_name(await describe(conn, TOPIC, "t"))
    r = c["retention.ms"]
    assert (r.value, r.config_source) == ("7200000", DYNAMIC_BROKER)
    assert [(s.name, s.value, s.source) for s in r.synonyms] == [
        ("log.retention.ms", "7200000", DYNAMIC_BROKER),
        ("log.retention.hours", "168", DEFAULT),
    ]
    assert (c["min.cleanable.dirty.ratio"].value, c["min.cleanable.dirty.ratio"].config_source) == (
        "0.7",
        DYNAMIC_DEFAULT,
    )
    d = await describe(conn, BROKER, "")
    assert [(x.name, x.value, x.config_source) for x in d.configs] == [
        ("log.cleaner.min.cleanable.ratio", "0.7", DYNAMIC_DEFAULT),
        ("min.insync.replicas", "1", DYNAMIC_DEFAULT),  # (set when Kafka 4 formats its storage)
    ]
    # not dynamic: INVALID_REQUEST, as Kafka's ConfigAdminManager.validateBrokerConfigChange (KAFKA-13609)
    assert (await incremental(conn, BROKER, "1", [("group.max.size", 0, "5")]))[0] == 42
    assert (await incremental(conn, BROKER, "7", [("log.retention.ms", 0, "1")]))[0] == 42  # another broker
    assert (await describe(conn, BROKER, "7")).error_code == 42
    await conn.close()

    # everything survives a restart
    server.restart()
    conn = await WireClient("cfg").connect("127.0.0.1", server.port)
    c = by_name(await describe(conn, TOPIC, "t"))
    assert c["segment.ms"].value == "1000" and c["retention.ms"].value == "7200000"
    await conn.close()
    assert "Traceback" not in server.log_text()


def test_describe_configs_v0_for_old_clients(server_factory):
    server = server_factory("--kafka-version", "3.9")  # (Kafka 4 serves DescribeConfigs from v1)
    create_topics(server.port, "old", partitions=1)
    r = roundtrip(
        server.port,
        DescribeConfigsRequest_v0([(TOPIC, "old", ["retention.ms", "cleanup.policy"])]),
        DescribeConfigsResponse_v0,
    )
    ((error, message, kind, name, configs),) = r.resources
    assert (error, kind, name) == (0, TOPIC, "old")
    assert sorted(configs) == [
        ("cleanup.policy", "delete", False, True, False),
        ("retention.ms", "604800000", False, True, False),
    ]


async def test_describe_cluster_versions(server):
    conn = await WireClient("dc").connect("127.0.0.1", server.port)
    for v in (0, 1, 2):
        body = build(
            cls(DESCRIBE_CLUSTER, v),
            dict(include_cluster_authorized_operations=True, endpoint_type=1, include_fenced_brokers=False),
        )
        r = await conn.request(DESCRIBE_CLUSTER, v, body)
        assert r.error_code == 0 and r.cluster_id == stored_cluster_id(server.data_dir) and r.controller_id == 1
        assert [(b.broker_id, b.port) for b in r.brokers] == [(1, server.port)]
        assert r.cluster_authorized_operations == 0b1111110100000  # no authorizer: every cluster operation
    r = await conn.request(
        DESCRIBE_CLUSTER, 1, cls(DESCRIBE_CLUSTER, 1)(include_cluster_authorized_operations=False, endpoint_type=2)
    )
    assert r.error_code == 115  # UNSUPPORTED_ENDPOINT_TYPE: a broker does not list controllers
    r = await conn.request(DESCRIBE_CLUSTER, 0, cls(DESCRIBE_CLUSTER, 0)(include_cluster_authorized_operations=False))
    assert r.cluster_authorized_operations == -(2**31)
    await conn.close()


def test_confluent_admin_configs_and_cluster(server):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("adm", 1, 1, config={"cleanup.policy": "compact"})])["adm"].result(30)
    topic = ConfigResource(ResourceType.TOPIC, "adm")
    entries = admin.describe_configs([topic])[topic].result(30)
    assert entries["cleanup.policy"].value == "compact"
    assert entries["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    change = ConfigResource(
        ResourceType.TOPIC,
        "adm",
        incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    admin.incremental_alter_configs([change])[change].result(30)
    entries = admin.describe_configs([topic])[topic].result(30)
    assert entries["retention.ms"].value == "86400000"
    assert entries["cleanup.policy"].value == "compact,delete"
    broker = ConfigResource(ResourceType.BROKER, "1")
    b = admin.describe_configs([broker])[broker].result(30)
    assert b["log.segment.bytes"].value == "1073741824" and b["num.partitions"].is_read_only
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert cluster.cluster_id == stored_cluster_id(server.data_dir) and [n.id for n in cluster.nodes] == [1]
    assert cluster.controller.id == 1 and len(cluster.authorized_operations) == 7


async def test_broker_loggers_levels_described_and_changed(server):
    """BROKER_LOGGER (8): the server's loggers with their effective levels, set and unset at
    run time as Kafka's broker does it (tests/test_kafka_oracle.py compares it with Kafka's)."""
    import logging

    conn = await WireClient("cfg").connect("127.0.0.1", server.port)
    saved = {n: logging.getLogger(n).level for n in ("", "coordinator", "coordinator.groups")}
    try:
        loggers = by_name(await describe(conn, 8, "1"))
        assert {"root", "kafka", "org.apache.kafka.coordinator.group", "coordinator.server"} <= set(loggers)
        assert {(c.config_source, c.read_only, c.is_sensitive) for c in loggers.values()} == {(6, False, False)}
        assert await incremental(conn, 8, "1", [("root", 0, "WARN"), ("kafka", 0, "ERROR")]) == (0, None)
        assert logging.getLogger("coordinator").level == logging.ERROR
        loggers = by_name(await describe(conn, 8, "1", keys=("root", "kafka", "coordinator.server")))
        assert {n: c.value for n, c in loggers.items()} == {
            "root": "WARN",
            "kafka": "ERROR",
            "coordinator.server": "ERROR",
        }
        # the Kafka name and the Python one are one logger; unset, it takes its parent's level
        assert await incremental(conn, 8, "1", [("org.apache.kafka.coordinator.group", 0, "TRACE")]) == (0, None)
        assert (
            by_name(await describe(conn, 8, "1", keys=("coordinator.groups",)))["coordinator.groups"].value == "TRACE"
        )
        assert await incremental(conn, 8, "1", [("coordinator.groups", 1, None)]) == (0, None)
        assert logging.getLogger("coordinator.groups").level == logging.NOTSET
        assert await incremental(conn, 8, "1", [("nope", 0, "INFO")]) == (40, "Logger nope does not exist!")
        assert await incremental(conn, 8, "1", [("root", 1, None)]) == (
            42,
            "Removing the log level of the root logger is not allowed",
        )
        assert await incremental(conn, 8, "2", [("root", 0, "INFO")]) == (
            42,
            "Unexpected node id. Expected 1, but received 2",
        )
        assert (await describe(conn, 8, "")).error_message == "Broker id must not be empty"
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
        await conn.close()


def test_server_log_fast_path_follows_levels():
    """INFO lines bypass logging only while every server logger takes INFO: a level raised by
    BROKER_LOGGER silences its logger's INFO lines."""
    import io
    import logging

    from coordinator import server_log

    root, coordinator = logging.getLogger(), logging.getLogger("coordinator")
    saved = (root.level, list(root.handlers), coordinator.level, logging._srcfile)
    stream = io.StringIO()
    try:
        sink = server_log.configure("INFO", stream=stream)
        log = server_log.get("coordinator.test_fast_path")
        log.info("first")
        logging.getLogger("coordinator.test_fast_path").setLevel(logging.WARNING)
        server_log.levels_changed()
        log.info("second")
        sink.flush()
        assert "first" in stream.getvalue() and "second" not in stream.getvalue()
    finally:
        logging.getLogger("coordinator.test_fast_path").setLevel(logging.NOTSET)
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]
        coordinator.setLevel(saved[2])
        logging._srcfile = saved[3]
        server_log._sink = None
        server_log.levels_changed()
