"""confluent-kafka (librdkafka) group.protocol=consumer members and the group epoch:
members joining together converge with one epoch bump per join (librdkafka resends an
empty regex in every full heartbeat), and synchronous commits racing epoch bumps are not
fenced for partitions the member still owns (KIP-1251)."""

from __future__ import annotations

import pytest

from confluent_kafka import KafkaException

from tests.support.wire_client import WireClient, request_class
from tests.support.process import create_topics, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

TOPIC, PARTITIONS = "epochs", 6


def consumer(server, group, name):
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group,
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


def group_epoch(server, group) -> tuple[int, str]:
    import asyncio

    async def ask():
        conn = await WireClient().connect("127.0.0.1", server.port)
        try:
            r = await conn.request(69, 1, request_class(69, 1)(group_ids=(group,), include_authorized_operations=False))
            return r.groups[0].group_epoch, r.groups[0].group_state
        finally:
            await conn.close()

    return asyncio.run(ask())


def assignments(consumers):
    return [{tp.partition for tp in c.assignment()} for c in consumers]


def split(consumers) -> bool:
    a = assignments(consumers)
    return all(a) and set().union(*a) == set(range(PARTITIONS)) and sum(map(len, a)) == PARTITIONS


def test_three_members_joining_together_bump_the_epoch_once_each_and_read_stable(server_factory):
    from confluent_kafka.admin import AdminClient

    server = server_factory("--group-consumer-heartbeat-interval-ms", "200")
    create_topics(server.port, TOPIC, partitions=PARTITIONS)
    members = [consumer(server, "together", f"c{i}") for i in range(3)]
    try:

        def converged():
            for c in members:
                c.poll(0.05)
            return split(members) and group_epoch(server, "together") == (4, "Stable")

        wait_for(converged, timeout=30, interval=0, what="three members splitting the topic at epoch 4")
        for _ in range(20):  # their later full heartbeats resend the same subscription
            for c in members:
                c.poll(0.05)
        assert group_epoch(server, "together") == (4, "Stable")
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        described = admin.describe_consumer_groups(["together"])["together"].result(10)
        assert str(described.state).endswith("STABLE") and len(described.members) == 3
    finally:
        for c in members:
            c.close()
    assert "Traceback" not in server.log_text()


def test_synchronous_commits_racing_epoch_bumps_are_not_fenced_for_owned_partitions(server_factory):
    """Each member commits synchronously after every message while members join and leave.
    A commit refused with STALE_MEMBER_EPOCH must be for a partition the member no longer owns."""
    from confluent_kafka import KafkaError

    server = server_factory("--group-consumer-heartbeat-interval-ms", "200")
    create_topics(server.port, TOPIC, partitions=PARTITIONS)
    produce(server, 0, 600)  # (the first members commit one by one through these)
    members = [consumer(server, "racing", f"c{i}") for i in range(3)]
    seen: list[int] = []
    commits: list[int] = []
    fenced: list[tuple[str, int]] = []

    def poll_all() -> None:
        for c in members:
            m = c.poll(0.02)
            if m is None or m.error() is not None:
                continue
            seen.append(int(m.value()))
            try:
                c.commit(m, asynchronous=False)
                commits.append(m.partition())
            except KafkaException as e:
                if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                    raise
                if m.partition() in {tp.partition for tp in c.assignment()}:
                    fenced.append((c.memberid() or "", m.partition()))

    try:
        wait_for(
            lambda: (poll_all(), split(members) and len(seen) >= 30)[1],
            timeout=30,
            interval=0,
            what="three members consuming",
        )
        produced = 600
        for round_ in range(4):  # one leaves, one joins, while every member commits every message
            members.pop(0).close()
            members.append(consumer(server, "racing", f"n{round_}"))
            for _ in range(10):  # messages keep coming while the group reconciles
                produce(server, produced, 12)
                produced += 12
                poll_all()
            wait_for(
                lambda: (poll_all(), split(members))[1],
                timeout=40,
                interval=0,
                what=f"the group after change {round_ + 1}",
            )
        wait_for(lambda: (poll_all(), len(set(seen)) >= produced)[1], timeout=40, interval=0, what="every message")
        assert not fenced, f"commits fenced for partitions still owned: {fenced}"
        assert len(commits) >= produced // 2 and set(seen) == set(range(produced))
        assert group_epoch(server, "racing")[1] == "Stable"
    finally:
        for c in members:
            c.close()
    assert "Traceback" not in server.log_text()
