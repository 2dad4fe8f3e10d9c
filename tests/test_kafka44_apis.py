"""The Kafka 4.4 APIs this server added for the admin tools, over real sockets (in-process
server), bad input included: DescribeTopicPartitions (75) with its cursor, pages and ELR fields,
DescribeLogDirs (35) per data dir with partition sizes, DescribeQuorum (55) as a combined node
answers, ListConfigResources (74) and client-metrics config resources, and their ACL checks."""

from __future__ import annotations

import datetime

import pytest

from tests.support.acls import DESCRIBE, TOPIC, create_acls_body
from tests.support.data_plane import batch, create, produce
from tests.support.raw_wire import Wire, api_ranges
from tests.support.wire_client import WireClient, request_class

DESCRIBE_TOPIC_PARTITIONS, CREATE_ACLS, DESCRIBE_LOG_DIRS, DESCRIBE_QUORUM, FIND_COORDINATOR = 75, 30, 35, 55, 10
LIST_CONFIG_RESOURCES, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, CLIENT_METRICS = 74, 32, 44, 16
INVALID_CONFIG = 40
NONE, UNKNOWN_TOPIC, INVALID_TOPIC, TOPIC_DENIED, CLUSTER_DENIED, UNSUPPORTED_VERSION, INVALID_REQUEST = (
    0,
    3,
    17,
    29,
    31,
    35,
    42,
)
ALL_TOPIC_OPERATIONS, NOT_ASKED = 3576, -(2**31)


@pytest.fixture
async def conn(server):
    c = await WireClient("kafka44-apis").connect("127.0.0.1", server.port)
    yield c
    await c.close()


def _dtp(names: tuple[str, ...], limit: int = 2000, cursor: tuple[str, int] | None = None):
    topic = request_class(DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest")
    make_cursor = request_class(DESCRIBE_TOPIC_PARTITIONS, 0, "Cursor")
    return request_class(DESCRIBE_TOPIC_PARTITIONS, 0)(
        topics=tuple(topic(name=n) for n in names),
        response_partition_limit=limit,
        cursor=None if cursor is None else make_cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )


async def _use_groups(conn) -> None:
    """Find a group coordinator: __consumer_offsets exists from then on, as at Kafka."""
    find = request_class(FIND_COORDINATOR, 3)
    assert (await conn.request(FIND_COORDINATOR, 3, find(key="g", key_type=0))).error_code == NONE


async def _page(conn, names: tuple[str, ...], limit: int = 2000, cursor: tuple[str, int] | None = None):
    r = await conn.request(DESCRIBE_TOPIC_PARTITIONS, 0, _dtp(names, limit, cursor))
    rows = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in r.topics]
    nxt = None if r.next_cursor is None else (r.next_cursor.topic_name, r.next_cursor.partition_index)
    return rows, nxt, r


async def test_describe_topic_partitions_pages_as_kafka(conn):
    await create(conn, "dtp-a", partitions=3)
    await create(conn, "dtp-b", partitions=2)
    # pages of 3 partitions: a's three, then b's two; the cursor says where the next page starts
    rows, nxt, r = await _page(conn, ("dtp-b", "dtp-a"), limit=3)
    assert (rows, nxt) == ([("dtp-a", NONE, [0, 1, 2])], ("dtp-b", 0))
    t = r.topics[0]
    assert t.topic_id.int != 0 and not t.is_internal and t.topic_authorized_operations == ALL_TOPIC_OPERATIONS
    p = t.partitions[0]
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas) == (1, 0, (1,), (1,), ())
    assert (p.eligible_leader_replicas, p.last_known_elr) == ((), ())  # ELR on, and empty (not null)
    rows, nxt, _ = await _page(conn, ("dtp-a", "dtp-b"), limit=3, cursor=("dtp-b", 0))
    assert (rows, nxt) == ([("dtp-b", NONE, [0, 1])], None)
    rows, nxt, _ = await _page(conn, ("dtp-a", "dtp-b"), limit=3, cursor=("dtp-a", 1))
    assert (rows, nxt) == ([("dtp-a", NONE, [1, 2]), ("dtp-b", NONE, [0])], ("dtp-b", 1))
    rows, nxt, _ = await _page(conn, ("dtp-a",), limit=0)  # (at least one partition a page)
    assert (rows, nxt) == ([("dtp-a", NONE, [0])], ("dtp-a", 1))
    # all topics (none named): every topic that exists, __consumer_offsets (internal) first
    assert [n for n, _, _ in (await _page(conn, ()))[0]] == ["dtp-a", "dtp-b"]  # (none until a group is used)
    await _use_groups(conn)
    rows, nxt, r = await _page(conn, ())
    assert [n for n, _, _ in rows] == ["__consumer_offsets", "dtp-a", "dtp-b"] and nxt is None
    assert r.topics[0].is_internal and len(rows[0][2]) == 50
    rows, nxt, _ = await _page(conn, (), cursor=("dtp-a", 2))
    assert (rows, nxt) == ([("dtp-a", NONE, [2]), ("dtp-b", NONE, [0, 1])], None)


async def test_describe_topic_partitions_bad_input(conn):
    await create(conn, "dtp-a", partitions=3)
    rows, nxt, r = await _page(conn, ("nope", "bad name!", "__transaction_state", "dtp-a"))
    assert rows == [
        ("__transaction_state", UNKNOWN_TOPIC, []),
        ("bad name!", INVALID_TOPIC, []),
        ("dtp-a", NONE, [0, 1, 2]),
        ("nope", UNKNOWN_TOPIC, []),
    ]
    assert [t.is_internal for t in r.topics] == [True, False, False, False]  # (Kafka's Topic.isInternal)
    # a cursor on a topic not named, or on a negative partition: INVALID_REQUEST for each topic
    for names, cursor in ((("dtp-a",), ("other", 0)), (("dtp-a",), ("dtp-a", -1))):
        rows, nxt, r = await _page(conn, names, cursor=cursor)
        assert (rows, nxt) == ([("dtp-a", INVALID_REQUEST, [])], None)
        assert r.topics[0].topic_authorized_operations == NOT_ASKED
    # a cursor past the topic's last partition: the topic with no partitions
    assert (await _page(conn, ("dtp-a",), cursor=("dtp-a", 9)))[:2] == ([("dtp-a", NONE, [])], None)


async def test_describe_topic_partitions_checks_describe_on_each_topic(server_factory):
    server = server_factory("--authorizer")  # (a topic no ACL names stays open)
    conn = await WireClient("dtp-acl").connect("127.0.0.1", server.port)
    try:
        for name in ("dtp-a", "dtp-b", "secret"):
            await create(conn, name, partitions=1)
        # only bob may describe "secret"; this connection is User:ANONYMOUS
        r = await conn.request(CREATE_ACLS, 3, create_acls_body((TOPIC, "secret", "User:bob", DESCRIBE)))
        assert r.results[0].error_code == NONE
        await _use_groups(conn)
        rows, nxt, _ = await _page(conn, ())
        assert [n for n, _, _ in rows] == ["__consumer_offsets", "dtp-a", "dtp-b"] and nxt is None
        rows, nxt, r = await _page(conn, ("secret", "dtp-b", "dtp-a"), limit=1)
        assert rows == [("dtp-a", NONE, [0]), ("secret", TOPIC_DENIED, [])] and nxt == ("dtp-b", 0)
        assert (
            r.topics[1].topic_id is None and r.topics[1].topic_authorized_operations == NOT_ASKED
        )  # (zero: kio reads None)
        rows, nxt, _ = await _page(conn, ("secret",))
        assert (rows, nxt) == ([("secret", TOPIC_DENIED, [])], None)
        rows, nxt, _ = await _page(conn, (), cursor=("secret", 0))  # (the page starts past it)
        assert (rows, nxt) == ([], None)
    finally:
        await conn.close()


def _log_dirs(v: int, topics: dict[str, tuple[int, ...]] | None):
    t = request_class(DESCRIBE_LOG_DIRS, v, "DescribableLogDirTopic")
    return request_class(DESCRIBE_LOG_DIRS, v)(
        topics=None if topics is None else tuple(t(topic=n, partitions=ps) for n, ps in topics.items())
    )


async def test_describe_log_dirs_every_version(server):
    conn = await WireClient("log-dirs").connect("127.0.0.1", server.port)
    try:
        await create(conn, "ld", partitions=2)
        assert (await produce(conn, "ld", batch(5), partition=1))[0] == NONE
        for v in range(1, 6):
            r = await conn.request(DESCRIBE_LOG_DIRS, v, _log_dirs(v, {"ld": (0, 1, 7), "absent": (0,)}))
            (result,) = r.results
            assert result.error_code == NONE and result.log_dir == str(server.data_dir.resolve())
            assert [
                (t.name, [(p.partition_index, p.offset_lag, p.is_future_key) for p in t.partitions])
                for t in result.topics
            ] == [("ld", [(0, 0, False), (1, 0, False)])]
            sizes = [p.partition_size for p in result.topics[0].partitions]
            assert sizes[0] == 0 and sizes[1] > 0  # (the batch's bytes on disk)
            if v >= 4:
                assert result.total_bytes >= result.usable_bytes > 0
            if v >= 5:
                assert result.is_cordoned is False
        # null: every partition, __consumer_offsets' too
        await _use_groups(conn)
        r = await conn.request(DESCRIBE_LOG_DIRS, 5, _log_dirs(5, None))
        assert [t.name for t in r.results[0].topics] == ["__consumer_offsets", "ld"]
        assert len(r.results[0].topics[0].partitions) == 50
    finally:
        await conn.close()


async def test_describe_log_dirs_needs_describe_on_the_cluster(server_factory):
    server = server_factory("--authorizer", "--no-allow-everyone-if-no-acl-found")
    conn = await WireClient("log-dirs-acl").connect("127.0.0.1", server.port)
    try:
        r = await conn.request(DESCRIBE_LOG_DIRS, 4, _log_dirs(4, None))
        assert (r.error_code, r.results) == (CLUSTER_DENIED, ())
        r = await conn.request(DESCRIBE_LOG_DIRS, 2, _log_dirs(2, None))
        assert r.results == ()  # (v1-2 have no error code: no log dir at all)
    finally:
        await conn.close()


def _quorum(v: int, *asks: tuple[str, int]):
    topic, partition = (request_class(DESCRIBE_QUORUM, v, n) for n in ("TopicData", "PartitionData"))
    by_topic: dict[str, list[int]] = {}
    for name, p in asks:
        by_topic.setdefault(name, []).append(p)
    return request_class(DESCRIBE_QUORUM, v)(
        topics=tuple(
            topic(topic_name=n, partitions=tuple(partition(partition_index=p) for p in ps))
            for n, ps in by_topic.items()
        )
    )


async def test_describe_quorum_one_voter_every_version(server):
    conn = await WireClient("quorum").connect("127.0.0.1", server.port)
    try:
        for v in range(0, 3):
            r = await conn.request(DESCRIBE_QUORUM, v, _quorum(v, ("__cluster_metadata", 0)))
            assert r.error_code == NONE
            ((t,),) = [r.topics]
            (p,) = t.partitions
            assert (t.topic_name, p.error_code, p.leader_id, p.leader_epoch) == ("__cluster_metadata", NONE, 1, 1)
            (voter,) = p.current_voters
            assert (voter.replica_id, voter.log_end_offset, p.observers) == (1, p.high_watermark, ())
            if v >= 2:
                assert voter.replica_directory_id is None  # (zero: kio reads None; static quorum, kraft.version 0)
                ((node,),) = [r.nodes]
                assert (node.node_id, [(x.name, x.port) for x in node.listeners]) == (1, [("CONTROLLER", server.port)])
        # anything but exactly __cluster_metadata-0: UNKNOWN_TOPIC_OR_PARTITION per partition
        for asks in (
            (("__cluster_metadata", 1),),
            (("other", 0),),
            (("__cluster_metadata", 0), ("__cluster_metadata", 1)),
        ):
            r = await conn.request(DESCRIBE_QUORUM, 2, _quorum(2, *asks))
            rows = [
                (t.topic_name, p.partition_index, p.error_code, p.error_message) for t in r.topics for p in t.partitions
            ]
            message = "This server does not host this topic-partition."
            assert rows == [(n, i, UNKNOWN_TOPIC, message) for n, i in asks] and r.nodes == ()
        r = await conn.request(DESCRIBE_QUORUM, 2, _quorum(2))
        assert (r.error_code, r.topics) == (NONE, ())
    finally:
        await conn.close()


async def test_list_config_resources_v0_and_v1(server_factory):
    server = server_factory("--brokers", "3")
    conn = await WireClient("list-configs").connect("127.0.0.1", server.port)
    try:
        await create(conn, "lc", partitions=1)

        async def listed(v: int, *types: int):
            body = request_class(LIST_CONFIG_RESOURCES, v)(**({"resource_types": types} if v else {}))
            r = await conn.request(LIST_CONFIG_RESOURCES, v, body)
            return r.error_code, [(c.resource_name, getattr(c, "resource_type", 16)) for c in r.config_resources]

        assert await listed(0) == (NONE, [])  # v0: client-metrics resources only (none kept here)
        brokers = [("1", 4), ("2", 4), ("3", 4)]
        assert await listed(1) == (NONE, [(n, 8) for n, _ in brokers] + brokers + [("lc", 2)])
        assert await listed(1, 2) == (NONE, [("lc", 2)])
        assert await listed(1, 16, 32) == (NONE, [])
        assert await listed(1, 1) == (UNSUPPORTED_VERSION, [])  # (a type it does not list)
        assert await listed(1, 2, 64) == (UNSUPPORTED_VERSION, [])
    finally:
        await conn.close()


async def test_list_config_resources_needs_describe_configs_on_the_cluster(server_factory):
    server = server_factory("--authorizer", "--no-allow-everyone-if-no-acl-found")
    conn = await WireClient("list-configs-acl").connect("127.0.0.1", server.port)
    try:
        r = await conn.request(LIST_CONFIG_RESOURCES, 1, request_class(LIST_CONFIG_RESOURCES, 1)(resource_types=()))
        assert (r.error_code, r.config_resources) == (CLUSTER_DENIED, ())
    finally:
        await conn.close()


async def test_client_metrics_subscriptions_kept_described_and_listed(server_factory, tmp_path):
    server = server_factory(data_dir=tmp_path / "cm")
    conn = await WireClient("client-metrics").connect("127.0.0.1", server.port)
    alter, resource, op = (
        request_class(INCREMENTAL_ALTER_CONFIGS, 1, n) for n in (None, "AlterConfigsResource", "AlterableConfig")
    )
    describe, asked = request_class(DESCRIBE_CONFIGS, 4), request_class(DESCRIBE_CONFIGS, 4, "DescribeConfigsResource")

    async def set_(name: str, *configs: tuple[str, int, str | None], validate_only: bool = False):
        r = await conn.request(
            INCREMENTAL_ALTER_CONFIGS,
            1,
            alter(
                resources=(
                    resource(
                        resource_type=CLIENT_METRICS,
                        resource_name=name,
                        configs=tuple(op(name=k, config_operation=o, value=v) for k, o, v in configs),
                    ),
                ),
                validate_only=validate_only,
            ),
        )
        return r.responses[0].error_code, r.responses[0].error_message

    async def described(name: str):
        r = await conn.request(
            DESCRIBE_CONFIGS,
            4,
            describe(
                resources=(asked(resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None),),
                include_synonyms=False,
                include_documentation=False,
            ),
        )
        result = r.results[0]
        return result.error_code, result.error_message, [(c.name, c.value, c.config_source) for c in result.configs]

    async def listed():
        r = await conn.request(LIST_CONFIG_RESOURCES, 0, request_class(LIST_CONFIG_RESOURCES, 0)())
        return [c.resource_name for c in r.config_resources]

    try:
        defaults = [("interval.ms", "300000", 5), ("match", "", 5), ("metrics", "", 5)]
        assert await described("cm") == (NONE, "", defaults)  # (an unknown one: the defaults, as Kafka)
        assert await set_(
            "cm", ("interval.ms", 0, "1000"), ("metrics", 0, "org.a,org.b"), ("match", 0, "client_id=x.*")
        ) == (NONE, None)
        assert await described("cm") == (
            NONE,
            "",
            [("interval.ms", "1000", 7), ("match", "client_id=x.*", 7), ("metrics", "org.a,org.b", 7)],
        )
        assert await listed() == ["cm"]
        # bad input: Kafka's ClientMetricsConfigs errors, nothing changed
        for configs, error, message in (
            (
                (("interval.ms", 0, "abc"),),
                INVALID_CONFIG,
                "Invalid value abc for configuration interval.ms: Not a number of type INT",
            ),
            (
                (("interval.ms", 0, "50"),),
                INVALID_REQUEST,
                "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
            ),
            ((("foo", 0, "1"),), INVALID_REQUEST, "Unknown client metrics configuration: foo"),
            ((("match", 0, "client_id=["),), INVALID_CONFIG, "Illegal client matching pattern: client_id=["),
            ((("match", 0, "user=x"),), INVALID_CONFIG, "Illegal client matching pattern: user=x"),
            ((("metrics", 2, "x"),), INVALID_CONFIG, "Can't APPEND to key metrics because its type is not LIST."),
        ):
            assert await set_("cm", *configs) == (error, message), configs
        assert await set_("", ("interval.ms", 0, "1000")) == (INVALID_REQUEST, "Subscription name can't be empty")
        assert (await described(""))[:2] == (INVALID_REQUEST, "Client metrics subscription name must not be empty")
        assert await set_("other", ("interval.ms", 0, "1000"), validate_only=True) == (NONE, None)
        assert await listed() == ["cm"]
    finally:
        await conn.close()
    server.close()  # kept across a restart; deleting every setting removes the subscription
    server = server_factory(data_dir=tmp_path / "cm")
    conn = await WireClient("client-metrics").connect("127.0.0.1", server.port)
    try:
        assert (await described("cm"))[2][0] == ("interval.ms", "1000", 7)
        assert await set_("cm", ("interval.ms", 1, None), ("metrics", 1, None), ("match", 1, None)) == (NONE, None)
        assert await listed() == []
    finally:
        await conn.close()


def test_delegation_tokens_are_refused_as_kafka_refuses_them_without_sasl(server):
    """Kafka 4.4 lists the four delegation token APIs and answers them on a listener without
    SASL with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64), no token and no timestamps (-1; kio
    cannot read those back, so those answers are read as bytes here)."""
    w = Wire(server.port)
    try:
        keys = api_ranges(w.call(18, 3, client_software_name="t", client_software_version="1"))
        assert [keys[k] for k in (38, 39, 40, 41)] == [(1, 3), (1, 2), (1, 2), (1, 3)]
        r = w.call(41, 3, owners=None)
        assert (r.error_code, r.tokens) == (64, ())

        def raw(api: int, **values) -> bytes:
            w.send(w.request_bytes(api, 1, 7, **values))
            data = w.read_frame()
            assert data is not None and data[:4] == (7).to_bytes(4, "big")
            return data[4:]

        # error code, owner User:ANONYMOUS, three timestamps of -1, no token id nor hmac, throttle 0
        assert raw(38, renewers=(), max_lifetime=datetime.timedelta(milliseconds=-1)) == (
            b"\0\x40" + b"\0\4User" + b"\0\x09ANONYMOUS" + b"\xff" * 24 + b"\0\0" + b"\0" * 4 + b"\0" * 4
        )
        zero = datetime.timedelta(0)
        for api, values in ((39, {"renew_period": zero}), (40, {"expiry_time_period": zero})):
            assert raw(api, hmac=b"", **values) == b"\0\x40" + b"\xff" * 8 + b"\0" * 4
    finally:
        w.close()
