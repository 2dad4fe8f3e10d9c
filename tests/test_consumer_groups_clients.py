"""confluent-kafka with group.protocol=consumer (KIP-848) against the server: members join,
split a topic, rebalance as members leave and join, commit, and resume after a restart."""

from __future__ import annotations

import pytest

import threading
import time

from confluent_kafka import KafkaError, KafkaException

from tests.support.process import PolledMember, create_topics, kafka_python_subscribe, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

TOPIC, GROUP, PARTITIONS = "kip848", "kip848-group", 6


def consumer(server, name):
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([TOPIC])
    return c


def produce(server, start, count):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for i in range(start, start + count):
        p.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(10) == 0


def commit(c, m) -> None:
    """A synchronous commit, retried when the member's epoch moved on between its last
    heartbeat and the commit: STALE_MEMBER_EPOCH, as Kafka answers; librdkafka learns the new
    epoch from its next heartbeat (sent by its own thread), and the retry then succeeds."""
    deadline = time.monotonic() + 15
    while True:
        try:
            c.commit(m, asynchronous=False)
            return
        except KafkaException as e:
            if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Members:
    """Polls every consumer, commits what each got (synchronously), records deliveries."""

    def __init__(self, consumers):
        self.consumers = consumers
        self.seen: list[int] = []
        self.deliveries: dict[int, list[tuple[str, int, int, float]]] = {}  # value -> (who, partition, offset, when)

    def poll(self):
        for c in self.consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                self.seen.append(int(m.value()))
                who = c.memberid() or "?"
                self.deliveries.setdefault(int(m.value()), []).append(
                    (who, m.partition(), m.offset(), time.monotonic())
                )
                commit(c, m)

    def twice(self) -> dict[int, list[tuple[str, int, int, float]]]:
        """The values delivered more than once, with who delivered each (member id, partition,
        offset, time): what a failure shows, to tell two owners of a partition from a commit
        that came too late."""
        return {v: ds for v, ds in sorted(self.deliveries.items()) if len(ds) > 1}

    def assignments(self):
        return [{tp.partition for tp in c.assignment()} for c in self.consumers]

    def split(self, n):
        self.poll()
        a = self.assignments()
        return len(a) == n and all(a) and set().union(*a) == set(range(PARTITIONS)) and sum(map(len, a)) == PARTITIONS

    def until(self, what, predicate, timeout=30):
        wait_for(lambda: (self.poll(), predicate())[1], timeout=timeout, interval=0, what=what)


@pytest.mark.parametrize("assignment_interval_ms", ["0", "1000"])  # batching off, and on at Kafka's default
def test_confluent_consumer_protocol_group(server_factory, assignment_interval_ms):
    from confluent_kafka.admin import AdminClient

    server = server_factory(
        "--group-consumer-heartbeat-interval-ms",
        "200",
        "--group-consumer-assignment-interval-ms",
        assignment_interval_ms,
    )
    create_topics(server.port, TOPIC, partitions=PARTITIONS)
    produce(server, 0, 60)
    members = Members([consumer(server, f"c{i}") for i in range(3)])
    try:
        members.until("3 members splitting 6 partitions", lambda: members.split(3) and len(members.seen) >= 60)
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        described = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
        assert str(described.type).endswith("CONSUMER") and len(described.members) == 3
        assert sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions) == list(
            range(PARTITIONS)
        )

        # One leaves, one joins: the others take over, nothing is delivered twice or lost.
        members.consumers.pop(0).close()
        members.until("2 members after a leave", lambda: members.split(2))
        produce(server, 60, 30)
        members.consumers.append(consumer(server, "c3"))
        members.until("3 members after a join", lambda: members.split(3) and len(members.seen) >= 90)
        assert sorted(members.seen) == list(range(90)), members.twice()

        # The server restarts under the live members: the group comes back from the log,
        # they carry on from their commits, nothing is delivered twice.
        server.restart()
        produce(server, 90, 12)
        members.until("the members consume after the restart", lambda: len(members.seen) >= 102)
        for _ in range(10):
            members.poll()
        assert sorted(members.seen) == list(range(102)), members.twice()
        assert members.split(3)
    finally:
        for c in members.consumers:
            c.close()
    assert "Traceback" not in server.log_text()


MIXED_TOPIC, MIXED_GROUP = "mixed", "mixed-group"


class MixedMembers:
    """kafka-python consumers (the classic protocol) and confluent-kafka ones
    (group.protocol=consumer) in one group; every poll commits what it got."""

    def __init__(self, server):
        self.server = server
        self.classic: list[PolledMember] = []
        self.modern: list[PolledMember] = []
        self.lock = threading.Lock()
        self._seen: list[int] = []

    @property
    def seen(self) -> list[int]:
        with self.lock:
            return list(self._seen)

    def add_classic(self, name):
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError as PyKafkaError

        c = KafkaConsumer(
            bootstrap_servers=self.server.bootstrap,
            group_id=MIXED_GROUP,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=200,
            session_timeout_ms=10_000,
        )
        kafka_python_subscribe(c, MIXED_TOPIC)

        def poll() -> set[int]:
            batches = c.poll(timeout_ms=100)
            with self.lock:
                self._seen.extend(int(r.value) for records in batches.values() for r in records)
            if batches:
                try:
                    c.commit()
                except PyKafkaError:
                    pass  # a rebalance began: those offsets are consumed again, at least once
            return {tp.partition for tp in c.assignment()}

        self.classic.append(PolledMember(poll, c.close))

    def add_modern(self, name):
        from confluent_kafka import Consumer

        c = Consumer(
            {
                "bootstrap.servers": self.server.bootstrap,
                "group.id": MIXED_GROUP,
                "client.id": name,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([MIXED_TOPIC])

        def poll() -> set[int]:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                with self.lock:
                    self._seen.append(int(m.value()))
                try:
                    c.commit(m, asynchronous=False)
                except KafkaException:
                    pass
            return {tp.partition for tp in c.assignment()}

        self.modern.append(PolledMember(poll, c.close))

    def split(self, n):
        owned = [m.owned for m in self.classic + self.modern]
        return (
            len(owned) == n
            and all(owned)
            and set().union(*owned) == set(range(PARTITIONS))
            and sum(map(len, owned)) == PARTITIONS
        )

    def until(self, what, predicate, timeout=40):
        wait_for(predicate, timeout=timeout, what=what)

    def close(self):
        for m in self.classic + self.modern:
            m.close()


def produce_to(server, topic, start, count):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for i in range(start, start + count):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(10) == 0


def test_classic_group_upgrades_and_downgrades_online_with_real_clients(server_factory):
    """kafka-python consumers form a classic group; a confluent-kafka consumer with
    group.protocol=consumer joins it (Kafka's online upgrade): the three share the topic,
    the kafka-python ones still speaking JoinGroup/SyncGroup/Heartbeat; when it leaves, the
    group is a classic one again (downgrade) and the other two take everything back."""
    from confluent_kafka.admin import AdminClient

    server = server_factory("--group-consumer-heartbeat-interval-ms", "200")
    create_topics(server.port, MIXED_TOPIC, partitions=PARTITIONS)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})

    def group_type():
        return str(admin.describe_consumer_groups([MIXED_GROUP])[MIXED_GROUP].result(10).type).rsplit(".", 1)[-1]

    produce_to(server, MIXED_TOPIC, 0, 60)
    members = MixedMembers(server)
    try:
        members.add_classic("py-a")
        members.add_classic("py-b")
        members.until(
            "two classic members splitting the topic", lambda: members.split(2) and len(set(members.seen)) >= 60
        )
        assert group_type() == "CLASSIC"

        members.add_modern("kip848")
        members.until("three members, one of each protocol", lambda: members.split(3))
        assert group_type() == "CONSUMER"
        described = admin.describe_consumer_groups([MIXED_GROUP])[MIXED_GROUP].result(10)
        assert sorted(m.client_id for m in described.members) == ["kip848", "py-a", "py-b"]
        produce_to(server, MIXED_TOPIC, 60, 30)
        members.until("the new messages consumed", lambda: len(set(members.seen)) >= 90)
        time.sleep(1)  # time for a message to come a second time, which it must not
        assert sorted(set(members.seen)) == list(range(90))
        assert sorted(v for v in members.seen if v >= 60) == list(range(60, 90))  # no rebalance: each once

        members.modern.pop().close()
        members.until("the classic members taking everything back", lambda: members.split(2))
        assert group_type() == "CLASSIC"
        produce_to(server, MIXED_TOPIC, 90, 12)
        members.until("messages after the downgrade", lambda: len(set(members.seen)) >= 102)
        assert sorted(set(members.seen)) == list(range(102))
    finally:
        members.close()
    assert "Traceback" not in server.log_text()
