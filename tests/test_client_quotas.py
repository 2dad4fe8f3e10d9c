"""Client quotas: DescribeClientQuotas / AlterClientQuotas over the wire (neither
confluent-kafka 2.16 nor kafka-python 3.0 has them) with Kafka's validation, kept across a
restart; produce and fetch byte rates enforced per (user, client-id) with throttle_time_ms and
the connection muted, seen by confluent-kafka's producer (throttle_cb) and over the wire."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.wire_client import WireClient
from protocol.record_batch import build_batch
from tests.support.data_plane import FETCH, create, fetch_body
from tests.support.data_plane import cls as request_cls
from tests.support.topic_configs import produce_full
from tests.support.quotas import alter

pytestmark = pytest.mark.slow  # confluent-kafka producers throttled for whole quota windows

DESCRIBE, ALTER = 48, 49
EXACT, DEFAULT, ANY = 0, 1, 2
INVALID_REQUEST, UNSUPPORTED_VERSION, UNKNOWN_SERVER_ERROR = 42, 35, -1


async def describe(conn, components, strict=False, v=1):
    """components: [(type, match_type, match)] -> (error, message, {entity: {key: value}})"""
    C = request_cls(DESCRIBE, v, "ComponentData")
    r = await conn.request(
        DESCRIBE,
        v,
        request_cls(DESCRIBE, v)(
            strict=strict, components=tuple(C(entity_type=t, match_type=m, match=name) for t, m, name in components)
        ),
    )
    found = {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {x.key: x.value for x in entry.values}
        for entry in r.entries or ()
    }
    return r.error_code, r.error_message, found


@pytest.fixture
async def conn(server):
    c = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    yield c
    await c.close()


async def test_alter_and_describe(conn, server):
    assert (
        await alter(
            conn,
            [
                (
                    [("user", "alice"), ("client-id", "app")],
                    [("producer_byte_rate", 1024), ("request_percentage", 12.5)],
                ),
                ([("client-id", None)], [("consumer_byte_rate", 2048)]),
                ([("user", None)], [("producer_byte_rate", 4096)]),
                ([("ip", "127.0.0.1")], [("connection_creation_rate", 10)]),
            ],
        )
        == [(0, None)] * 4
    )
    error, _, all_user = await describe(conn, [("user", ANY, None)])
    assert error == 0 and all_user == {
        (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("user", None),): {"producer_byte_rate": 4096.0},
    }
    _, _, exact = await describe(conn, [("user", EXACT, "alice")], strict=True)
    assert exact == {}  # strict: alice's entity also names a client-id
    _, _, exact = await describe(conn, [("user", EXACT, "alice"), ("client-id", EXACT, "app")], strict=True)
    assert list(exact) == [(("client-id", "app"), ("user", "alice"))]
    _, _, default = await describe(conn, [("client-id", DEFAULT, None)])
    assert default == {(("client-id", None),): {"consumer_byte_rate": 2048.0}}
    _, _, ips = await describe(conn, [("ip", ANY, None)])
    assert ips == {(("ip", "127.0.0.1"),): {"connection_creation_rate": 10.0}}
    _, _, everything = await describe(conn, [])
    assert len(everything) == 4

    # removing a key; validate_only changes nothing
    assert await alter(conn, [([("user", "alice"), ("client-id", "app")], [("request_percentage", None)])]) == [
        (0, None)
    ]
    assert await alter(conn, [([("user", "bob")], [("producer_byte_rate", 1)])], validate_only=True) == [(0, None)]
    _, _, all_user = await describe(conn, [("user", ANY, None)])
    assert all_user[(("client-id", "app"), ("user", "alice"))] == {"producer_byte_rate": 1024.0}
    assert (("user", "bob"),) not in all_user

    server.restart()  # kept in the data dir
    again = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    assert (await describe(again, []))[2] == everything | {
        (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 1024.0}
    }
    await again.close()


async def test_bad_alterations_refused_as_kafka(conn, server):
    cases = [
        ([], [("producer_byte_rate", 1)], "Invalid empty client quota entity"),
        ([("group", "g")], [("producer_byte_rate", 1)], "Unhandled client quota entity type: group"),
        ([("user", "")], [("producer_byte_rate", 1)], "Empty user not supported"),
        (
            [("user", "a"), ("ip", "1.2.3.4")],
            [("connection_creation_rate", 1)],
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        ),
        (
            [("ip", "no-such-host.invalid")],
            [("connection_creation_rate", 1)],
            "no-such-host.invalid is not a valid IP or resolvable host.",
        ),
        ([("user", "a")], [("connection_creation_rate", 1)], "Invalid configuration key connection_creation_rate"),
        ([("ip", "1.2.3.4")], [("producer_byte_rate", 1)], "Invalid configuration key producer_byte_rate"),
        ([("user", "a")], [("producer_byte_rate", 0)], "Quota producer_byte_rate must be greater than 0"),
        ([("user", "a")], [("consumer_byte_rate", 10.5)], "consumer_byte_rate cannot be a fractional value."),
        (
            [("ip", "1.2.3.4")],
            [("connection_creation_rate", 2**32)],
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
        (
            [("user", "a")],
            [("producer_byte_rate", 1), ("producer_byte_rate", 2)],
            "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})",
        ),
        # a type given twice: Kafka reads the entity into a map, so the last name counts
        ([("client-id", None), ("client-id", "")], [("producer_byte_rate", 1)], "Empty client-id not supported"),
    ]
    for entity, ops, message in cases:
        assert await alter(conn, [(entity, ops)]) == [(INVALID_REQUEST, message)], message
    # one bad entry does not stop the others
    assert await alter(
        conn, [([("user", "")], [("producer_byte_rate", 1)]), ([("user", "ok")], [("producer_byte_rate", 1)])]
    ) == [(INVALID_REQUEST, "Empty user not supported"), (0, None)]
    assert await alter(conn, [([("user", ""), ("user", "last")], [("producer_byte_rate", 1)])]) == [(0, None)]
    assert list((await describe(conn, []))[2]) == [(("user", "last"),), (("user", "ok"),)]

    filters = [
        ([("", ANY, None)], INVALID_REQUEST, "Invalid empty entity type."),
        (
            [("user", ANY, None), ("user", EXACT, "a")],
            INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        ([("group", ANY, None)], UNSUPPORTED_VERSION, "Unsupported entity type group"),
        (
            [("ip", ANY, None), ("user", ANY, None)],
            INVALID_REQUEST,
            "Invalid entity filter component combination. "
            "IP filter component should not be used with user or clientId filter component.",
        ),
        ([("user", 7, None)], UNKNOWN_SERVER_ERROR, "Unexpected match type: 7"),
    ]
    for components, code, message in filters:
        assert (await describe(conn, components))[:2] == (code, message)
    assert "Traceback" not in server.log_text()


def test_any_alteration_is_answered_with_a_kafka_error_code(server):
    """Whatever entities, keys and values an AlterClientQuotas carries, each entry is answered
    NONE or INVALID_REQUEST, and the connection stays open."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    names = st.none() | st.text(max_size=8)
    ip_names = st.sampled_from([None, "", "1.2.3.4", "::1", "not an address", "a\x00b", "no-such-host.invalid"])
    component = st.tuples(st.sampled_from(["user", "client-id", "group", ""]), names) | st.tuples(
        st.just("ip"), ip_names
    )
    keys = st.sampled_from(
        [
            "producer_byte_rate",
            "consumer_byte_rate",
            "request_percentage",
            "controller_mutation_rate",
            "connection_creation_rate",
            "",
            "nope",
        ]
    )
    values = st.none() | st.floats(allow_nan=True, allow_infinity=True) | st.integers(-1, 2**64).map(float)
    entries = st.lists(
        st.tuples(st.lists(component, max_size=3), st.lists(st.tuples(keys, values), max_size=3)),
        min_size=1,
        max_size=3,
    )

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(entries=entries, validate_only=st.booleans())
    def check(entries, validate_only):
        async def run():
            c = await WireClient("quota-fuzz").connect("127.0.0.1", server.port)
            try:
                answers = await alter(c, entries, validate_only)
                assert (await describe(c, []))[0] == 0
                return answers
            finally:
                await c.close()

        answers = asyncio.run(run())
        assert len(answers) == len(entries) and {code for code, _ in answers} <= {0, INVALID_REQUEST}, answers

    check()
    assert "Traceback" not in server.log_text()


def test_any_describe_filter_is_answered_with_a_kafka_error_code(server):
    """Whatever components a DescribeClientQuotas filter has, the answer is NONE with entries
    or one of the controller's errors, and the connection stays open."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    component = st.tuples(
        st.sampled_from(["user", "client-id", "ip", "group", ""]),
        st.integers(-1, 3) | st.integers(-128, 127),
        st.none() | st.text(max_size=6),
    )

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(components=st.lists(component, max_size=4), strict=st.booleans())
    def check(components, strict):
        async def run():
            c = await WireClient("quota-fuzz").connect("127.0.0.1", server.port)
            try:
                return await describe(c, components, strict=strict)
            finally:
                await c.close()

        code, message, _ = asyncio.run(run())
        # (an answer's message: "" when it succeeds, as Kafka's; the error's text otherwise)
        assert code in (0, INVALID_REQUEST, UNSUPPORTED_VERSION, UNKNOWN_SERVER_ERROR) and (code == 0) == (
            message == ""
        ), (code, message)

    check()
    assert "Traceback" not in server.log_text()


@pytest.mark.parametrize("v", [5, 9])  # (v5: before KIP-219, answered at once all the same, as Kafka)
async def test_produce_quota_throttles_and_mutes(server_factory, v):
    server = server_factory("--quota-window-num", "2")
    admin = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    assert await create(admin, "q", partitions=1) == 0
    assert await alter(admin, [([("client-id", "slow")], [("producer_byte_rate", 10_000)])]) == [(0, None)]
    conn = await WireClient("slow").connect("127.0.0.1", server.port)
    P, T = request_cls(0, v, "PartitionProduceData"), request_cls(0, v, "TopicProduceData")
    r = await conn.request(
        0,
        v,
        request_cls(0, v)(
            transactional_id=None,
            acks=1,
            timeout=5000 * _MS,
            topic_data=(
                T(
                    name="q",
                    partition_data=(
                        P(index=0, records=build_batch([(b"k", b"x" * 50_000)], timestamp_ms=int(time.time() * 1000))),
                    ),
                ),
            ),
        ),
    )
    assert r.responses[0].partition_responses[0].error_code == 0  # taken, and throttled
    throttle = r.throttle_time.total_seconds() * 1000
    # 50 KB against 10 KB/s, measured over at least 1 s: (50 - 10) / 10 x 1 s
    assert 3900 <= throttle <= 4100
    # muted: the next request is read only once the throttle time is over
    sent = time.monotonic()
    await conn.request(18, 3, request_cls(18, 3)(client_software_name="t", client_software_version="1"))
    assert time.monotonic() - sent >= throttle / 1000 * 0.9
    # another client id has no quota
    other = await WireClient("fast").connect("127.0.0.1", server.port)
    r = await other.request(0, 9, request_cls(0, 9)(transactional_id=None, acks=1, timeout=5000 * _MS, topic_data=()))
    assert r.throttle_time.total_seconds() == 0
    for c in (admin, conn, other):
        await c.close()


async def test_a_produce_delayed_by_a_fault_still_counts_against_its_quota(server_factory):
    import json
    import urllib.request

    from tests.support.process import free_port

    port = free_port()
    server = server_factory("--quota-window-num", "2", "--metrics-port", str(port), "--enable-test-control")
    admin = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    assert await create(admin, "q", partitions=1) == 0
    assert await alter(admin, [([("client-id", "slow")], [("producer_byte_rate", 10_000)])]) == [(0, None)]
    fault = json.dumps({"api": "Produce", "delay_ms": 1, "client_id": "slow"}).encode()
    await asyncio.to_thread(
        urllib.request.urlopen,
        urllib.request.Request(f"http://127.0.0.1:{port}/faults", data=fault, method="POST"),
        timeout=30,
    )
    conn = await WireClient("slow").connect("127.0.0.1", server.port)
    P, T = request_cls(0, 9, "PartitionProduceData"), request_cls(0, 9, "TopicProduceData")
    r = await conn.request(
        0,
        9,
        request_cls(0, 9)(
            transactional_id=None,
            acks=1,
            timeout=5000 * _MS,
            topic_data=(
                T(
                    name="q",
                    partition_data=(
                        P(index=0, records=build_batch([(b"k", b"x" * 50_000)], timestamp_ms=int(time.time() * 1000))),
                    ),
                ),
            ),
        ),
    )
    assert r.responses[0].partition_responses[0].error_code == 0 and r.throttle_time.total_seconds() > 0
    for c in (admin, conn):
        await c.close()


async def test_fetch_quota_caps_and_throttles(server_factory):
    server = server_factory("--quota-window-num", "2")
    admin = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    assert await create(admin, "f", partitions=1) == 0
    now = int(time.time() * 1000)
    for i in range(20):
        await produce_full(admin, "f", build_batch([(b"k", b"%d" % i + b"y" * 1000)], timestamp_ms=now))
    assert await alter(admin, [([("user", "ANONYMOUS"), ("client-id", "reader")], [("consumer_byte_rate", 3000)])]) == [
        (0, None)
    ]
    conn = await WireClient("reader").connect("127.0.0.1", server.port)
    r = await conn.request(FETCH, 11, fetch_body("f", 0))
    first = r.responses[0].partitions[0].records
    assert 0 < len(first) <= 3 * 1100  # no more than the quota's window holds
    throttled = None
    for _ in range(10):  # keep reading until over the quota: an empty answer with the throttle time
        r = await conn.request(FETCH, 11, fetch_body("f", 0))
        if r.throttle_time.total_seconds() > 0:
            throttled = r
            break
    assert throttled is not None and throttled.responses == ()
    # a client id without a quota reads on
    other = await WireClient("other").connect("127.0.0.1", server.port)
    r = await other.request(FETCH, 11, fetch_body("f", 0))
    assert r.throttle_time.total_seconds() == 0 and len(r.responses[0].partitions[0].records) > 3 * 1100
    for c in (admin, conn, other):
        await c.close()
    assert "Traceback" not in server.log_text()


def _old_fetch_body(topic, v):
    """A Fetch from before KIP-219 (v4-v7: no current leader epoch, no rack)."""
    F, T = request_cls(FETCH, v, "FetchPartition"), request_cls(FETCH, v, "FetchTopic")
    fields = {"session_id": 0, "session_epoch": -1, "forgotten_topics_data": ()} if v >= 7 else {}
    partition = {"log_start_offset": -1} if v >= 5 else {}
    return request_cls(FETCH, v)(
        replica_id=-1,
        max_wait=0 * _MS,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=(
            T(topic=topic, partitions=(F(partition=0, fetch_offset=0, partition_max_bytes=1 << 20, **partition),)),
        ),
        **fields,
    )


@pytest.mark.parametrize("v", [4, 7])
async def test_a_throttled_fetch_before_v8_is_answered_at_once_and_muted(server_factory, v):
    """Kafka answers a throttled Fetch at once whatever its version (KafkaApis: "Send the
    response immediately") and mutes the channel; a client from before KIP-219 does not back
    off, so the request it sends next is read only once the throttle time is over."""
    server = server_factory("--quota-window-num", "2")
    admin = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    assert await create(admin, "old", partitions=1) == 0
    now = int(time.time() * 1000)
    for i in range(20):
        await produce_full(admin, "old", build_batch([(b"k", b"%d" % i + b"y" * 1000)], timestamp_ms=now))
    assert await alter(admin, [([("client-id", "old-reader")], [("consumer_byte_rate", 3000)])]) == [(0, None)]
    conn = await WireClient("old-reader").connect("127.0.0.1", server.port)
    throttled = None
    for _ in range(10):  # read until over the quota: an empty answer carrying the throttle time
        r = await conn.request(FETCH, v, _old_fetch_body("old", v))
        if r.throttle_time.total_seconds() > 0:
            throttled = r
            break
    assert throttled is not None and throttled.responses == ()
    throttle = throttled.throttle_time.total_seconds()
    sent = time.monotonic()
    await conn.request(18, 3, request_cls(18, 3)(client_software_name="t", client_software_version="1"))
    assert time.monotonic() - sent >= throttle * 0.9  # (a lower bound: load only lengthens it)
    for c in (admin, conn):
        await c.close()
    assert "Traceback" not in server.log_text()


def test_kafka_python_pinned_before_fetch_v8_reads_everything_under_a_fetch_quota(server_factory):
    """kafka-python pinned to broker 1.1 (Fetch v7, before KIP-219) with a consumer_byte_rate
    quota: its fetches are throttled (it sees the throttle time in its metrics) and it reads
    every record once, in order."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    server = server_factory("--quota-window-num", "2")
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    for i in range(12):  # one batch each: a batch larger than the quota's window is never let through
        producer.send("pinned", value=b"%03d" % i + b"z" * 1000, partition=0)
        producer.flush()
    producer.close()

    async def set_quota():
        admin = await WireClient("quota-admin").connect("127.0.0.1", server.port)
        assert await alter(admin, [([("client-id", "pinned")], [("consumer_byte_rate", 4000)])]) == [(0, None)]
        await admin.close()

    asyncio.run(set_quota())
    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        client_id="pinned",
        api_version=(1, 1),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=60_000,
    )
    consumer.assign([TopicPartition("pinned", 0)])
    got = []
    for m in consumer:
        got.append(m.value[:3])
        if len(got) == 12:
            break
    throttle = max(
        (v for group in consumer.metrics().values() for k, v in group.items() if k == "throttle-time-max"), default=0
    )
    consumer.close()
    assert got == [b"%03d" % i for i in range(12)]
    assert throttle > 0
    assert "Traceback" not in server.log_text()


def test_confluent_producer_is_throttled_near_its_quota(server_factory):
    from confluent_kafka import Producer

    server = server_factory("--quota-window-num", "2")

    async def setup():
        admin = await WireClient("quota-admin").connect("127.0.0.1", server.port)
        assert await create(admin, "rated", partitions=1) == 0
        assert await alter(admin, [([("client-id", "rated-producer")], [("producer_byte_rate", 20_000)])]) == [
            (0, None)
        ]
        await admin.close()

    asyncio.run(setup())
    throttles = []
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "client.id": "rated-producer",
            "linger.ms": 5,
            "batch.size": 5000,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    total = 120_000
    started = time.monotonic()
    for _ in range(total // 1000):
        producer.produce("rated", value=b"z" * 1000)
        producer.poll(0)
    assert producer.flush(60) == 0
    elapsed = time.monotonic() - started
    assert throttles and max(throttles) > 0  # librdkafka saw throttle_time_ms
    # the producer was held near its quota: far below what it sends unthrottled
    assert total / elapsed < 2 * 20_000


_MS = __import__("datetime").timedelta(milliseconds=1)
