"""confluent-kafka with group.protocol=consumer (KIP-848) against the server: members join,
split a topic, rebalance as members leave and join, commit, and resume after a restart."""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException

from tests.conftest import create_topics, wait_for

TOPIC, GROUP, PARTITIONS = "kip848", "kip848-group", 6


def consumer(server, name):
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                  "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False})
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

    def poll(self):
        for c in self.consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                self.seen.append(int(m.value()))
                commit(c, m)

    def assignments(self):
        return [{tp.partition for tp in c.assignment()} for c in self.consumers]

    def split(self, n):
        self.poll()
        a = self.assignments()
        return len(a) == n and all(a) and set().union(*a) == set(range(PARTITIONS)) and sum(map(len, a)) == PARTITIONS

    def until(self, what, predicate, timeout=30):
        wait_for(lambda: (self.poll(), predicate())[1], timeout=timeout, interval=0, what=what)


def test_confluent_consumer_protocol_group(server_factory):
    from confluent_kafka.admin import AdminClient

    server = server_factory("--group-consumer-heartbeat-interval-ms", "200")
    create_topics(server.port, TOPIC, partitions=PARTITIONS)
    produce(server, 0, 60)
    members = Members([consumer(server, f"c{i}") for i in range(3)])
    try:
        members.until("3 members splitting 6 partitions", lambda: members.split(3) and len(members.seen) >= 60)
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        described = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
        assert str(described.type).endswith("CONSUMER") and len(described.members) == 3
        assert sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions) == list(
            range(PARTITIONS))

        # One leaves, one joins: the others take over, nothing is delivered twice or lost.
        members.consumers.pop(0).close()
        members.until("2 members after a leave", lambda: members.split(2))
        produce(server, 60, 30)
        members.consumers.append(consumer(server, "c3"))
        members.until("3 members after a join", lambda: members.split(3) and len(members.seen) >= 90)
        assert sorted(members.seen) == list(range(90))

        # The server restarts under the live members: the group comes back from the log,
        # they carry on from their commits, nothing is delivered twice.
        server.restart()
        produce(server, 90, 12)
        members.until("the members consume after the restart", lambda: len(members.seen) >= 102)
        for _ in range(10):
            members.poll()
        assert sorted(members.seen) == list(range(102))
        assert members.split(3)
    finally:
        for c in members.consumers:
            c.close()
    assert "Traceback" not in server.log_text()
