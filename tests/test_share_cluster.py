"""Share groups with several brokers in one process (the kafka_cluster fixture): ShareFetch
and ShareAcknowledge are served by the partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere,
with KIP-951's leader hint and its endpoint), ShareGroupHeartbeat by the group's coordinator."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from tests.support.share import (
    ACCEPT,
    SACK,
    SFETCH,
    SHB,
    acquired,
    cls,
    part,
    sack,
    set_group_configs,
    sfetch,
    shb,
    until_assigned,
)
from tests.support.wire_client import WireClient


@pytest.mark.kafka_cluster(brokers=2)
async def test_share_partitions_live_on_their_leader(kafka_cluster):
    conns = {}
    for b in kafka_cluster.brokers():
        conns[b["node_id"]] = await WireClient("share-cluster").connect(b["host"], b["port"])
    try:
        any_conn = conns[1]
        await any_conn.create_topics("t", partitions=1)
        coordinator = kafka_cluster.coordinator_of("g")
        assert (await set_group_configs(any_conn, "g", share_auto_offset_reset="earliest")).error_code == 0
        wrong = await conns[3 - coordinator].request(
            SHB, 1, cls(SHB, 1)(group_id="g", member_id="a", member_epoch=0, subscribed_topic_names=("t",))
        )
        assert wrong.error_code == E.not_coordinator
        hb = await until_assigned(
            conns[coordinator], "g", "a", await conns[coordinator].request(SHB, 1, shb("g", "a", 0, ("t",)))
        )
        tid = hb.assignment.topic_partitions[0].topic_id
        leader = kafka_cluster.leader_of("t", 0)
        r = await conns[3 - leader].request(SFETCH, 1, sfetch("g", "a", 0, tid))
        p = part(r)
        assert p.error_code == E.not_leader_or_follower and p.current_leader.leader_id == leader
        assert [n.node_id for n in r.node_endpoints] == [leader]
        r = await conns[leader].request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert part(r).error_code == E.none and acquired(r) == []
        r = await conns[3 - leader].request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 0, [ACCEPT])]}))
        assert part(r).error_code == E.not_leader_or_follower
    finally:
        for c in conns.values():
            await c.close()


@pytest.mark.slow
@pytest.mark.kafka_cluster(brokers=3)
def test_share_consumer_across_a_broker_stop_never_gets_an_accepted_record_again(kafka_cluster):
    """confluent-kafka's ShareConsumer accepts records one poll at a time (explicit
    acknowledgement, committed); the broker leading the partition and then the one
    coordinating the group stop. The share-partition state and the group come back on their
    new brokers: every record is accepted in the end, and none accepted is delivered again."""
    confluent_kafka = pytest.importorskip("confluent_kafka")  # (the wire tests above need no client)
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer (2.16+)")
    from confluent_kafka import KafkaException, Producer, ShareConsumer

    from tests.support.process import wait_for
    from tests.support.share import setup

    bootstrap = kafka_cluster.bootstrap
    setup(bootstrap, "st", "sg", 20, partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "sg", "share.acknowledgement.mode": "explicit"}
    )
    consumer.subscribe(["st"])
    accepted: set[int] = set()
    again: list[int] = []

    def step() -> None:
        polled = set()
        for m in consumer.poll(0.5):
            if m.error() is None:
                if m.offset() in accepted:
                    again.append(m.offset())
                consumer.acknowledge(m)
                polled.add(m.offset())
        try:
            failed = [tp for tp in consumer.commit_sync() or () if getattr(tp, "error", None) is not None]
        except KafkaException:
            return  # not acknowledged (the broker went away): those may come again, unaccepted
        if not failed:
            accepted.update(polled)

    def accepted_at_least(n: int) -> bool:
        step()
        return len(accepted) >= n

    def produce(start: int) -> None:
        for i in range(start, start + 20):
            producer.produce("st", value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0

    try:
        wait_for(lambda: accepted_at_least(20), timeout=60, what="the first records accepted")
        kafka_cluster.stop_broker(kafka_cluster.leader_of("st", 0))
        produce(20)
        wait_for(lambda: accepted_at_least(40), timeout=90, what="records accepted after the leader stopped")
        kafka_cluster.stop_broker(kafka_cluster.coordinator_of("sg"))  # (the last but one running)
        produce(40)
        wait_for(lambda: accepted_at_least(60), timeout=90, what="every record accepted")
    finally:
        consumer.close()
    assert accepted == set(range(60))
    assert again == []


@pytest.mark.kafka_cluster(brokers=3)
async def test_a_member_keeps_one_share_session_per_broker(kafka_cluster):
    """Kafka keeps a ShareSessionCache per broker: a member fetching from partitions led by
    three brokers has a session with each. Opening one on a second broker leaves the first
    broker's session, its epoch and the records acquired there as they were."""
    from tests.support.data_plane import produce
    from tests.support.share import build_batch

    conns = {}
    for b in kafka_cluster.brokers():
        conns[b["node_id"]] = await WireClient("share-cluster").connect(b["host"], b["port"])
    try:
        await conns[1].create_topics("t3", partitions=3)
        assert (await set_group_configs(conns[1], "g3", share_auto_offset_reset="earliest")).error_code == 0
        leaders = {p: kafka_cluster.leader_of("t3", p) for p in range(3)}
        assert sorted(leaders.values()) == [1, 2, 3]  # (every broker leads one)
        for p, leader in leaders.items():
            batch = build_batch([(None, b"p%d-%d" % (p, i)) for i in range(2)])
            assert (await produce(conns[leader], "t3", batch, partition=p))[0] == 0
        hb = await until_assigned(
            conns[kafka_cluster.coordinator_of("g3")],
            "g3",
            "a",
            await conns[kafka_cluster.coordinator_of("g3")].request(SHB, 1, shb("g3", "a", 0, ("t3",))),
        )
        tid = hb.assignment.topic_partitions[0].topic_id
        for p, leader in sorted(leaders.items()):  # a session with each broker, each acquiring its partition
            r = await conns[leader].request(SFETCH, 1, sfetch("g3", "a", 0, tid, partitions=(p,)))
            assert acquired(r, p) == [(0, 1, 1)], (p, r)
        for p, leader in sorted(leaders.items()):  # each session is at its epoch 1, its records still a's
            r = await conns[leader].request(SACK, 1, sack("g3", "a", 1, tid, {p: [(0, 1, [ACCEPT])]}))
            assert r.error_code == E.none and part(r, p).error_code == E.none, (p, r)
        # A new session on broker 2 (epoch 0) leaves broker 1's at its epoch 2.
        p2 = next(p for p, leader in leaders.items() if leader == 2)
        p1 = next(p for p, leader in leaders.items() if leader == 1)
        r = await conns[2].request(SFETCH, 1, sfetch("g3", "a", 0, tid, partitions=(p2,)))
        assert r.error_code == E.none
        r = await conns[1].request(SFETCH, 1, sfetch("g3", "a", 2, tid, partitions=(p1,)))
        assert r.error_code == E.none and part(r, p1).error_code == E.none
    finally:
        for c in conns.values():
            await c.close()


@pytest.mark.slow
@pytest.mark.kafka_cluster(brokers=3)
def test_share_consumers_on_partitions_led_by_every_broker(kafka_cluster):
    """confluent-kafka's ShareConsumer on three brokers, a partition led by each: every record is
    delivered once to three consumers (implicit acknowledgement), and with explicit
    acknowledgement a released record comes back once more, the others never (each consumer
    holds a share session with every broker it fetches from)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer (2.16+)")
    from confluent_kafka import AcknowledgeType, ShareConsumer

    from tests.support.process import wait_for
    from tests.support.share import setup

    bootstrap = kafka_cluster.bootstrap
    setup(bootstrap, "every", "spread", 0, partitions=3, replication_factor=3)
    assert sorted(kafka_cluster.leader_of("every", p) for p in range(3)) == [1, 2, 3]
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(90):
        producer.produce("every", value=b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0

    consumers = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "spread"}) for _ in range(3)]
    for c in consumers:
        c.subscribe(["every"])
    got: list[tuple[int, int]] = []
    try:
        wait_for(
            lambda: (
                [got.extend((m.partition(), m.offset()) for m in c.poll(0.2) if m.error() is None) for c in consumers]
                and len(got) >= 90
            ),
            timeout=60,
            what="every record",
        )
        for c in consumers:  # (the last polls' records accepted)
            c.poll(0.2)
    finally:
        for c in consumers:
            c.close()
    assert sorted(got) == sorted((p, o) for p in range(3) for o in range(30))

    explicit = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "spread-x", "share.acknowledgement.mode": "explicit"}
    )
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, "spread-x", incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # (kept: a destroyed handle fails its futures)
    admin.incremental_alter_configs([resource])[resource].result(30)
    explicit.subscribe(["every"])
    seen: dict[tuple[int, int], list[int]] = {}
    try:

        def step() -> bool:
            for m in explicit.poll(0.3):
                if m.error() is not None:
                    continue
                key = (m.partition(), m.offset())
                seen.setdefault(key, []).append(m.delivery_count())
                release = m.offset() == 0 and len(seen[key]) == 1
                explicit.acknowledge(m, AcknowledgeType.RELEASE if release else AcknowledgeType.ACCEPT)
            explicit.commit_sync()
            return len(seen) == 90 and all(len(seen[(p, 0)]) == 2 for p in range(3))

        wait_for(step, timeout=60, what="every record, the released ones twice")
        for _ in range(3):
            step()
    finally:
        explicit.close()
    assert {k: v for k, v in seen.items() if k[1] == 0} == {(p, 0): [1, 2] for p in range(3)}
    assert all(v == [1] for k, v in seen.items() if k[1] != 0)
