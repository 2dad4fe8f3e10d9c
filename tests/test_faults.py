"""Faults injected on demand (coordinator/faults.py) against real clients: commits retried
after coordinator errors, an idempotent producer across a lost reply, latency, stalls,
seeded probabilities, and bad specs refused with nothing changed.

The server runs in process on a thread of its own; the test adds and clears rules on the
server's loop, as the HTTP control and the Cluster helper do.
"""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
import uvloop

from coordinator.config import parse_args
from coordinator.server import Server
from tests.support.process import wait_for

TOPIC = "orders"


class InProcessServer:
    """A Server on its own event loop thread; `call(fn)` runs fn on that loop."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.server = Server(parse_args(["--port", "0", "--data-dir", str(data_dir), *args]))
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self.server.start())

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.config.port}"

    def run(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable, *args: Any, **kw: Any) -> Any:
        async def on_loop() -> Any:
            return fn(*args, **kw)

        return self.run(on_loop())

    def close(self) -> None:
        try:
            self.run(self.server.stop(grace_seconds=1))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def broker(tmp_path):
    s = InProcessServer(tmp_path / "data", "--fault-seed", "7")
    yield s
    s.close()


def make_topic(bootstrap: str, name: str = TOPIC, partitions: int = 1) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()


def committed_offset(broker: InProcessServer, group: str, partition: int = 0) -> int | None:
    """The group's committed offset, read from the coordinator's own state."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return c.committed(TopicPartition(TOPIC, partition))
    finally:
        c.close()


# commits retried after coordinator errors --------------------------------------------------


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "REBALANCE_IN_PROGRESS"])
def test_kafka_python_commit_retried_after_injected_error(broker, error):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import CommitFailedError
    from kafka.structs import OffsetAndMetadata

    make_topic(broker.bootstrap)
    group = f"kp-{error.lower()}"
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False, retry_backoff_ms=10
    )
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    try:
        rule = broker.call(broker.server.faults.add, "OffsetCommit", error, group=group)
        offsets = {tp: OffsetAndMetadata(42, "", -1)}
        if error == "REBALANCE_IN_PROGRESS":
            # kafka-python, as the Java consumer, reports this one to the application
            # (CommitFailedError) after asking to rejoin; the application commits again
            with pytest.raises(CommitFailedError):
                consumer.commit(offsets)
            consumer.commit(offsets)
        else:
            consumer.commit(offsets)  # retried inside commit(), after finding the coordinator again
        rules = broker.call(broker.server.faults.list)
        assert rules == [], rules  # fired once, then gone
        assert (
            rule["error_code"]
            == {"NOT_COORDINATOR": 16, "COORDINATOR_LOAD_IN_PROGRESS": 14, "REBALANCE_IN_PROGRESS": 27}[error]
        )
    finally:
        consumer.close()
    assert committed_offset(broker, group) == 42


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "REBALANCE_IN_PROGRESS"])
async def test_aiokafka_commit_retried_after_injected_error(broker, error):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import CommitFailedError

    make_topic(broker.bootstrap)
    group = f"aio-{error.lower()}"
    consumer = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False, retry_backoff_ms=10
    )
    await consumer.start()
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    try:
        broker.call(broker.server.faults.add, "OffsetCommit", error, group=group)
        if error == "REBALANCE_IN_PROGRESS":
            with pytest.raises(CommitFailedError):  # for the application to handle, as in Java
                await consumer.commit({tp: 17})
        await consumer.commit({tp: 17})  # retried inside commit() for the coordinator errors
        assert broker.call(broker.server.faults.list) == []
    finally:
        await consumer.stop()
    assert committed_offset(broker, group) == 17


# a reply lost after the write ---------------------------------------------------------------


def read_values(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Every record value of the topic, as ints, read from the beginning to the end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values, at_end = [], set()
    try:
        while len(at_end) < partitions:
            for m in c.consume(500, 1.0):
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        at_end.add(m.partition())
                    continue
                values.append(int(m.value()))
    finally:
        c.close()
    return values


def test_idempotent_producer_across_lost_replies(broker):
    """Produce requests written and then their replies lost (the connection closes where the
    answer would be): librdkafka sends the same batches again, the broker knows them by their
    producer id and sequence, and the log has every record once."""
    from confluent_kafka import Producer

    make_topic(broker.bootstrap, "idem", partitions=2)
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "retry.backoff.ms": 20,
            "message.timeout.ms": 60_000,
        }
    )
    errors: list = []
    n = 2000
    p.produce("idem", value=b"-1", partition=0)  # the producer id first (InitProducerId)
    assert p.flush(30) == 0
    rule = broker.call(broker.server.faults.add, "Produce", drop="after", times=3, topic="idem")
    for i in range(n):
        p.produce(
            "idem",
            value=str(i).encode(),
            partition=i % 2,
            on_delivery=lambda err, msg: err is not None and errors.append(err),
        )
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and not errors, errors
    assert broker.call(broker.server.faults.list) == [], "every drop fired"
    assert rule["drop"] == "after"
    values = [v for v in read_values(broker.bootstrap, "idem", 2) if v >= 0]
    assert sorted(values) == list(range(n))  # no duplicates, no gaps


def test_drop_before_leaves_the_request_unhandled(broker):
    """drop="before": the connection closes on the request, which never reaches its handler."""
    from tests.support.wire_client import WireClient

    async def go() -> None:
        c = await WireClient("dropper").connect("127.0.0.1", broker.server.config.port)
        try:
            broker.call(broker.server.faults.add, "CreateTopics", drop="before")
            with pytest.raises(ConnectionError):
                await c.create_topics("never")
        finally:
            await c.close()

    asyncio.run(go())
    assert broker.call(lambda: "never" not in broker.server.topics.topics)


# latency, stalls, probabilities --------------------------------------------------------------

METADATA_V4 = 3, 4


def metadata_request():
    from tests.support.wire_client import request_class

    return request_class(*METADATA_V4)(topics=(), allow_auto_topic_creation=False)


def test_delay_holds_only_the_matching_client(broker):
    """A delayed request is answered after one sent later by a client the rule does not match."""
    from tests.support.wire_client import WireClient

    async def go() -> list[str]:
        port = broker.server.config.port
        slow, fast = (
            await WireClient("slow").connect("127.0.0.1", port),
            await WireClient("fast").connect("127.0.0.1", port),
        )
        answered: list[str] = []
        try:
            broker.call(broker.server.faults.add, "Metadata", delay_ms=1500, client_id="slow")
            late = slow.send(*METADATA_V4, metadata_request())
            late.add_done_callback(lambda _: answered.append("slow"))
            await fast.request(*METADATA_V4, metadata_request())
            answered.append("fast")
            body = await late
            assert body.brokers  # the real answer, late
        finally:
            await slow.close()
            await fast.close()
        return answered

    assert asyncio.run(go()) == ["fast", "slow"]


def test_stall_until_cleared(broker):
    """A stalled request waits until its rule is cleared, then is handled as usual; requests
    behind it on the same connection wait with it (answers keep their order)."""
    from tests.support.wire_client import WireClient

    async def go() -> None:
        port = broker.server.config.port
        held, other = (
            await WireClient("held").connect("127.0.0.1", port),
            await WireClient("other").connect("127.0.0.1", port),
        )
        try:
            rule = broker.call(broker.server.faults.add, "Metadata", stall=True, client_id="held")
            first = held.send(*METADATA_V4, metadata_request())
            second = held.send(*METADATA_V4, metadata_request())
            wait_for(lambda: broker.call(broker.server.faults.list)[0]["fired"] == 1, what="the stall")
            await other.request(*METADATA_V4, metadata_request())  # not matched: answered
            assert not first.done() and not second.done()
            [listed] = broker.call(broker.server.faults.list)
            assert listed["id"] == rule["id"] and listed["times"] == 0  # spent, still holding its request
            assert broker.call(broker.server.faults.clear, rule["id"]) == 1
            assert (await first).brokers and (await second).brokers
        finally:
            await held.close()
            await other.close()

    asyncio.run(go())
    assert broker.call(broker.server.faults.list) == []


def test_stall_with_a_timeout_goes_on_by_itself(broker):
    from tests.support.wire_client import WireClient

    async def go() -> None:
        c = await WireClient("held").connect("127.0.0.1", broker.server.config.port)
        try:
            broker.call(broker.server.faults.add, "Metadata", "LEADER_NOT_AVAILABLE", stall=200)
            body = await c.request(*METADATA_V4, metadata_request())
            assert body.brokers == () and body.controller_id == -1  # the error answer, after the stall
        finally:
            await c.close()

    asyncio.run(go())
    wait_for(lambda: broker.call(broker.server.faults.list) == [], what="the spent stall to go")


def error_pattern(broker: InProcessServer, **rule: Any) -> list[int]:
    """Which of 40 ListOffsets requests a probabilistic rule failed."""
    from tests.support.wire_client import WireClient, request_class

    lo = 2, 1
    request = request_class(*lo)(
        replica_id=-1,
        topics=(
            request_class(*lo, "ListOffsetsTopic")(
                name=TOPIC, partitions=(request_class(*lo, "ListOffsetsPartition")(partition_index=0, timestamp=-1),)
            ),
        ),
    )

    async def go() -> list[int]:
        c = await WireClient("dice").connect("127.0.0.1", broker.server.config.port)
        try:
            added = broker.call(broker.server.faults.add, "ListOffsets", "REQUEST_TIMED_OUT", times=None, **rule)
            answers = [await c.request(*lo, request) for _ in range(40)]
            broker.call(broker.server.faults.clear, added["id"])
            return [i for i, a in enumerate(answers) if a.topics[0].partitions[0].error_code != 0]
        finally:
            await c.close()

    return asyncio.run(go())


def test_probability_with_a_seed_is_the_same_every_run(broker):
    make_topic(broker.bootstrap)
    first = error_pattern(broker, probability=0.5, seed=11)
    assert 0 < len(first) < 40
    assert error_pattern(broker, probability=0.5, seed=11) == first
    assert error_pattern(broker, probability=0.5, seed=12) != first


def test_probability_with_the_server_seed(tmp_path):
    """--fault-seed: rules without a seed of their own draw from the server's generator."""
    patterns = []
    for run in range(2):
        s = InProcessServer(tmp_path / f"data{run}", "--fault-seed", "5")
        try:
            make_topic(s.bootstrap)
            patterns.append(error_pattern(s, probability=0.3))
        finally:
            s.close()
    assert patterns[0] == patterns[1] and 0 < len(patterns[0]) < 40


def test_rules_match_only_their_group(broker):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    make_topic(broker.bootstrap)
    broker.call(broker.server.faults.add, "OffsetCommit", "NOT_COORDINATOR", group="other-group")
    broker.call(broker.server.faults.add, "OffsetCommit", "NOT_COORDINATOR", topic="other-topic")
    broker.call(broker.server.faults.add, "OffsetCommit", "NOT_COORDINATOR", broker=99)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="mine", enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(5, "", -1)})
    finally:
        consumer.close()
    assert [r["fired"] for r in broker.call(broker.server.faults.list)] == [0, 0, 0]
    assert broker.call(broker.server.faults.clear) == 3


# bad specs ------------------------------------------------------------------------------------

BAD_SPECS = [
    ({"api": "NoSuchApi", "error": 16}, "unknown Kafka API"),
    ({"api": 999, "error": 16}, "no Kafka API has key 999"),
    ({"api": "OffsetCommit", "error": "NOT_A_KAFKA_ERROR"}, "unknown Kafka error"),
    ({"api": "OffsetCommit", "error": 12345}, "no Kafka error has code 12345"),
    ({"api": "OffsetCommit", "error": 0}, "NONE (0) is no error"),
    ({"api": "OffsetCommit"}, "a fault needs an action"),
    ({"api": "OffsetCommit", "error": 16, "times": 0}, "times must be >= 1"),
    ({"api": "OffsetCommit", "error": 16, "probability": 1.5}, "probability must be a number in (0, 1]"),
    ({"api": "OffsetCommit", "delay_ms": -1}, "delay_ms must be >= 0"),
    ({"api": "OffsetCommit", "drop": "sideways"}, "drop must be 'before' or 'after'"),
    ({"api": "OffsetCommit", "error": 16, "drop": "after"}, "error and drop exclude each other"),
    ({"api": "OffsetCommit", "stall": -5}, "stall must be true"),
    ({"api": "OffsetCommit", "error": 16, "group": 7}, "group must be a string"),
    ({"api": "OffsetCommit", "error": 16, "broker": "one"}, "broker must be an integer"),
    ({"api": "OffsetCommit", "error": 16, "colour": "red"}, "unknown field 'colour'"),
    ({"error": 16}, "field 'api' is required"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_SPECS)
def test_bad_specs_are_refused_and_change_nothing(broker, spec, message):
    faults = broker.server.faults
    kept = broker.call(faults.add, "Heartbeat", "REBALANCE_IN_PROGRESS", times=None)
    with pytest.raises(ValueError, match=re.escape(message)):
        broker.call(faults.add_specs, spec)
    assert broker.call(faults.list) == [kept]


# librdkafka reads the error answers and recovers ---------------------------------------------


def test_librdkafka_recovers_from_injected_errors_on_every_step(broker):
    """A confluent-kafka producer and group consumer, with errors injected on Produce,
    FindCoordinator, JoinGroup, SyncGroup, Heartbeat, Fetch and OffsetCommit: each answer
    is read as Kafka's and handled, and every record arrives and is committed."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    make_topic(broker.bootstrap, "steps", partitions=2)
    add = broker.server.faults.add
    broker.call(add, "Produce", "NOT_LEADER_OR_FOLLOWER", times=2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "retry.backoff.ms": 10})
    n = 200
    for i in range(n):
        p.produce("steps", value=str(i).encode(), partition=i % 2)
    assert p.flush(30) == 0

    for api, error in [
        ("FindCoordinator", "COORDINATOR_NOT_AVAILABLE"),
        ("JoinGroup", "COORDINATOR_LOAD_IN_PROGRESS"),
        ("SyncGroup", "REBALANCE_IN_PROGRESS"),
        ("Fetch", "NOT_LEADER_OR_FOLLOWER"),
        ("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS"),
    ]:
        broker.call(add, api, error)
    broker.call(add, "Heartbeat", "REBALANCE_IN_PROGRESS", times=2)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "steps-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 100,
            "retry.backoff.ms": 10,
        }
    )
    c.subscribe(["steps"])
    seen: set[int] = set()
    try:

        def consumed() -> bool:
            for m in c.consume(100, 0.2):
                if not m.error():
                    seen.add(int(m.value()))
            return len(seen) == n

        wait_for(consumed, timeout=60, what="every record")
        wait_for(
            lambda: not [r for r in broker.call(broker.server.faults.list) if r["api"] != "OffsetCommit"],
            timeout=60,
            what="every fault to fire",
        )
        c.commit(asynchronous=False)  # the first attempt fails with COORDINATOR_LOAD_IN_PROGRESS, then retried
        committed = c.committed([TopicPartition("steps", 0), TopicPartition("steps", 1)], timeout=30)
        assert sum(tp.offset for tp in committed) == n
    finally:
        c.close()
    assert broker.call(broker.server.faults.list) == []
    assert sorted(seen) == list(range(n))


# any JSON: a rule, or one clear ValueError -----------------------------------------------------


def test_any_json_spec_is_a_rule_or_one_value_error():
    """Whatever a control client sends, Faults adds the rules or raises ValueError (never
    another exception), and a refused spec adds nothing."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    from coordinator.faults import FIELDS, Faults

    scalars = (
        st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=True) | st.text(max_size=12)
    )
    field_values = (
        st.sampled_from(["OffsetCommit", "Fetch", 8, 0, "NOT_COORDINATOR", 16, "after", "before", True, 1, 0.5])
        | scalars
    )
    json_values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=6,
    )
    specs = st.dictionaries(st.sampled_from([*FIELDS, "colour"]), field_values | json_values, max_size=6)

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(spec=specs | st.lists(specs, max_size=3) | json_values)
    def check(spec):
        faults = Faults(seed=1)
        try:
            added = faults.add_specs(spec)
        except ValueError as e:
            assert str(e) and "\n" not in str(e)
            assert faults.list() == []
        else:
            assert faults.list() == added and len(added) == (len(spec) if isinstance(spec, list) else 1)

    check()


def test_rule_for_one_broker(tmp_path):
    """broker=N: only requests that broker receives (in a server with several brokers)."""
    from coordinator.testing import Cluster
    from tests.support.wire_client import WireClient

    with Cluster(brokers=2, data_dir=tmp_path / "cluster") as cluster:
        rule = cluster.inject("Metadata", "LEADER_NOT_AVAILABLE", times=None, broker=2)
        ports = {b["node_id"]: b["port"] for b in cluster.brokers()}

        async def ask(port: int):
            c = await WireClient("who").connect("127.0.0.1", port)
            try:
                return await c.request(*METADATA_V4, metadata_request())
            finally:
                await c.close()

        assert asyncio.run(ask(ports[1])).brokers  # broker 1: the real answer
        assert asyncio.run(ask(ports[2])).brokers == ()  # broker 2: the error answer
        [listed] = cluster.faults()
        assert listed["id"] == rule["id"] and listed["fired"] == 1


def test_rules_match_a_streams_group(broker):
    """A rule for one group fires on that streams group's StreamsGroupHeartbeat and
    StreamsGroupDescribe, as on the other group types' requests, and on no other group's."""
    from tests.support.oracle_wire import Conn

    broker.call(broker.server.faults.add, "StreamsGroupHeartbeat", "NOT_COORDINATOR", group="app-a")
    broker.call(broker.server.faults.add, "StreamsGroupDescribe", "NOT_COORDINATOR", group="app-a")
    conn = Conn(broker.server.config.port)
    try:

        def beat(group: str) -> int:
            values = {"group_id": group, "member_id": "m", "member_epoch": 3, "endpoint_information_epoch": 0}
            return conn.call(88, 1, values).error_code

        def describe(*groups: str) -> list[int]:
            answer = conn.call(89, 1, {"group_ids": list(groups), "include_authorized_operations": False})
            return [g.error_code for g in answer.groups]

        assert beat("app-b") == 69  # GROUP_ID_NOT_FOUND: the request went through
        assert describe("app-b") == [69]
        assert [r["fired"] for r in broker.call(broker.server.faults.list)] == [0, 0]
        assert beat("app-a") == 16  # NOT_COORDINATOR, injected
        assert describe("app-b", "app-a") == [16, 16]  # (a request's rule answers all of it)
        assert broker.call(broker.server.faults.list) == []  # each fired its one time
        assert beat("app-a") == 69 and describe("app-a") == [69]  # and is gone
    finally:
        conn.close()
