"""Kafka 4.3's assignment batching of consumer groups (KIP-1263): the target assignment
computed at most once per `group.consumer.assignment.interval.ms`, members keeping the last
target meanwhile (the assignment epoch behind the group epoch), the computation's time in the
target metadata record and replayed, the group-level config, and classic members of a mixed
group told to rejoin only for a newer target (KAFKA-20272)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from kio.schema.errors import ErrorCode as E

from coordinator.groups.modern.consumer.consumer_group import ConsumerGroup
from protocol import consumer_records as R
from tests.support.assignment_batching import (
    INTERVAL,
    OPS,
    ConsumerBatching,
    check_computation_time_replayed,
    check_startup_refuses_an_interval_beyond_the_max,
    run_ops,
)
from tests.support.consumer_groups import HB, describe, hb, owned_of
from tests.support.consumer_harness import Harness
from tests.support.consumer_shard import owned
from tests.support.groups_wire import HEARTBEAT, JOIN, SYNC, hb_body, join_body, sync_body
from tests.support.share import set_group_configs
from tests.support.wire_client import WireClient

MIXED = "mixed"


async def classic_join(conn):
    """A classic member (consumer protocol, subscribed to "t") joins the group: KIP-394's
    MEMBER_ID_REQUIRED round first."""
    r = await conn.request(JOIN, 9, join_body(9, MIXED))
    return await conn.request(JOIN, 9, join_body(9, MIXED, r.member_id))


def no_double_owner(group: ConsumerGroup) -> None:
    seen: dict[tuple, str] = {}
    for m in group.members.values():
        for t, ps in m.owns().items():
            for p in ps:
                assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {m.member_id}"
                seen[(t, p)] = m.member_id


async def quiet_rounds(h: Harness, alive: set[str], rounds: int = 6) -> None:
    """Every member heartbeats with what it holds (revoking at once, as librdkafka does)."""
    for _ in range(rounds):
        for m in sorted(alive):
            member = h.group.members[m]
            assert (await h.hb(m, member.member_epoch, owned=owned(member.assigned))).error == E.none
            no_double_owner(h.group)


@pytest.mark.parametrize("interval", [0, INTERVAL])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_batching_never_gives_a_partition_to_two_members_and_every_member_converges(interval, ops):
    async def run() -> None:
        h = ConsumerBatching(interval)
        h.catalog.add("t", 12)
        h.catalog.add("u", 5)
        alive = await run_ops(h, interval, ops, no_double_owner)
        if not alive:
            return
        # Once the interval has passed, heartbeats bring every member to the target.
        h.clock.advance(interval + 1)
        await quiet_rounds(h, alive)
        g = h.group
        assert g.assignment_epoch == g.group_epoch and g.state_name == "Stable"
        assert all(g.members[m].assigned == g.target[m] for m in alive)
        subscribed_u = any("u" in g.members[m].subscribed_topic_names for m in alive)
        assert sum(len(ps) for m in alive for ps in g.members[m].assigned.values()) == (17 if subscribed_u else 12)

    asyncio.run(run())


async def test_members_keep_the_last_target_until_the_interval_has_passed():
    h = Harness(assignment_interval_ms=INTERVAL)
    h.catalog.add("t", 6)
    a = await h.hb("a", 0, ["t"])
    assert a.member_epoch == 2 and len(owned(a)[0][1]) == 6  # the first target: at once
    b = await h.hb("b", 0, ["t"])
    c = await h.hb("c", 0, ["t"])
    g = h.group
    # Two joins, one computation: the group epoch moves on, the target stays a's.
    assert (g.group_epoch, g.assignment_epoch, g.state_name) == (4, 2, "Assigning")
    assert b.member_epoch == c.member_epoch == 2 and not owned(b) and not owned(c)
    a2 = await h.hb("a", 2, owned=owned(a))
    assert a2.member_epoch == 2 and a2.assignment is None  # nothing new for a either
    h.clock.advance(INTERVAL)
    a3 = await h.hb("a", 2, owned=owned(a))  # the heartbeat after the interval computes it
    assert (g.group_epoch, g.assignment_epoch) == (4, 4)
    assert all(len({p for ps in g.target[m].values() for p in ps}) == 2 for m in "abc")
    assert a3.member_epoch == 2 and len(owned(a3)[0][1]) == 2  # a revokes four first
    await quiet_rounds(h, {"a", "b", "c"})
    assert g.state_name == "Stable"


async def test_the_computation_time_is_recorded_and_replayed():
    await check_computation_time_replayed(ConsumerBatching, R.ConsumerGroupTargetAssignmentMetadataValue)


async def test_the_group_config_sets_the_interval_within_the_brokers_bounds(server_factory):
    server = server_factory(
        "--group-consumer-assignment-interval-ms", "0", "--group-consumer-max-assignment-interval-ms", "60000"
    )
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=4)
        # Refused: not a number, negative (Kafka: at least 0).
        bad = await set_group_configs(conn, "g", consumer_assignment_interval_ms="soon")
        assert bad.error_code == E.invalid_config
        bad = await set_group_configs(conn, "g", consumer_assignment_interval_ms="-1")
        assert bad.error_code == E.invalid_config
        assert (await set_group_configs(conn, "g", consumer_assignment_interval_ms="60000")).error_code == 0
        a = await conn.request(HB, 1, hb("g", "a", 0, ["t"]))
        b = await conn.request(HB, 1, hb("g", "b", 0, ["t"]))
        (d,) = await describe(conn, "g")
        assert (d.group_epoch, d.assignment_epoch, d.group_state) == (3, 2, "Assigning")
        assert b.member_epoch == 2 and owned_of(b) == []
        # Back to the broker's 0: the next heartbeat computes the target.
        assert (await set_group_configs(conn, "g", consumer_assignment_interval_ms="0")).error_code == 0
        a2 = await conn.request(HB, 1, hb("g", "a", 2, owned=owned_of(a)))
        (d,) = await describe(conn, "g")
        assert d.assignment_epoch == 3 and len(owned_of(a2)[0][1]) == 2
        # The other group is at the broker's interval, 0: a target at every change.
        other = await conn.request(HB, 1, hb("other", "a", 0, ["t"]))
        assert other.member_epoch == 2
        assert (await conn.request(HB, 1, hb("other", "b", 0, ["t"]))).member_epoch == 3
    finally:
        await conn.close()


async def test_the_broker_interval_is_a_dynamic_config_for_running_groups(server_factory):
    """Kafka 4.3 made group.consumer.assignment.interval.ms and group.share.assignment.interval.ms
    dynamic broker configs (GroupCoordinatorConfig.RECONFIGURABLE_CONFIGS): set with a real
    admin client, they reach groups that are already holding their target back; a value
    outside the static min and max is capped, not refused; a bad one is INVALID_REQUEST."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from tests.support.configs import BROKER as BROKER_RESOURCE, incremental
    from tests.support.share import SHB, shb

    server = server_factory(
        *("--group-consumer-assignment-interval-ms", "60000", "--group-consumer-max-assignment-interval-ms", "60000"),
        *("--group-share-assignment-interval-ms", "60000", "--group-share-max-assignment-interval-ms", "60000"),
    )
    admin = AdminClient({"bootstrap.servers": server.bootstrap})

    def alter(resource_name: str, **configs: str) -> None:
        entries = [
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
        ]
        resource = ConfigResource(ResourceType.BROKER, resource_name, incremental_configs=entries)
        admin.incremental_alter_configs([resource])[resource].result(30)

    def refused(**configs: str) -> str:
        with pytest.raises(KafkaException) as e:
            alter("1", **configs)
        assert e.value.args[0].code() == E.invalid_request
        return e.value.args[0].str()

    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=4)
        a = await conn.request(HB, 1, hb("g", "a", 0, ["t"]))
        await conn.request(HB, 1, hb("g", "b", 0, ["t"]))
        (d,) = await describe(conn, "g")
        assert (d.group_epoch, d.assignment_epoch, d.group_state) == (3, 2, "Assigning")
        sa = await conn.request(SHB, 1, shb("sg", "a" * 22, 0, ["t"]))
        sb = await conn.request(SHB, 1, shb("sg", "b" * 22, 0, ["t"]))
        assert sb.member_epoch == 2 and not sb.assignment.topic_partitions

        # This broker's consumer interval, the cluster default's share interval: both reach
        # the running groups at their next heartbeat.
        await asyncio.to_thread(alter, "1", group_consumer_assignment_interval_ms="0")
        # (librdkafka names no cluster default: the request is sent as Kafka's admin tools send it)
        set_default = [("group.share.assignment.interval.ms", 0, "0")]
        assert await incremental(conn, BROKER_RESOURCE, "", set_default) == (0, None)
        a2 = await conn.request(HB, 1, hb("g", "a", 2, owned=owned_of(a)))
        (d,) = await describe(conn, "g")
        assert d.assignment_epoch == 3 and len(owned_of(a2)[0][1]) == 2
        sa2 = await conn.request(SHB, 1, shb("sg", "a" * 22, sa.member_epoch))
        assert sa2.member_epoch == 3 and len(sa2.assignment.topic_partitions[0].partitions) == 2

        broker = ConfigResource(ResourceType.BROKER, "1")
        entries = await asyncio.to_thread(lambda: admin.describe_configs([broker])[broker].result(30))
        interval = entries["group.consumer.assignment.interval.ms"]
        assert (interval.value, interval.source, interval.is_read_only) == ("0", 2, False)  # DYNAMIC_BROKER_CONFIG
        share = entries["group.share.assignment.interval.ms"]
        assert (share.value, share.source) == ("0", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
        bound = entries["group.consumer.max.assignment.interval.ms"]
        assert (bound.value, bound.source, bound.is_read_only) == ("60000", 4, True)  # STATIC_BROKER_CONFIG

        # Above the max: stored as given, used as the max (the groups' default shows it).
        await asyncio.to_thread(alter, "1", group_consumer_assignment_interval_ms="100000")
        group = ConfigResource(ResourceType.GROUP, "other")
        got = await asyncio.to_thread(lambda: admin.describe_configs([group])[group].result(30))
        assert got["consumer.assignment.interval.ms"].value == "60000"

        assert "Not a number of type INT" in await asyncio.to_thread(
            refused, group_consumer_assignment_interval_ms="soon"
        )
        await asyncio.to_thread(refused, group_share_assignment_interval_ms="-1")
        message = await asyncio.to_thread(refused, group_consumer_min_assignment_interval_ms="5")
        assert "Cannot update these configs dynamically" in message
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


@pytest.mark.process
def test_bounds_that_exclude_the_interval_stop_the_server_at_startup(tmp_path):
    check_startup_refuses_an_interval_beyond_the_max(tmp_path, "consumer")


async def test_a_classic_member_of_a_mixed_group_rejoins_only_for_a_newer_target(server):
    """KAFKA-20272: the group epoch runs ahead of the target while batching holds it back; a
    classic member told to rejoin then would find nothing new."""
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=4)
        # The longest interval Kafka allows by default: nothing is recomputed in this test's time.
        assert (await set_group_configs(conn, MIXED, consumer_assignment_interval_ms="15000")).error_code == 0
        a = await conn.request(HB, 1, hb(MIXED, "a", 0, ["t"]))  # the group's first target: at once
        assert a.member_epoch == 2
        classic = await classic_join(conn)
        assert classic.error_code == 0 and classic.generation_id == 2
        assert (await conn.request(SYNC, 5, sync_body(5, MIXED, classic.member_id, 2))).error_code == 0
        (d,) = await describe(conn, MIXED)
        assert (d.group_epoch, d.assignment_epoch) == (3, 2)
        beat = await conn.request(HEARTBEAT, 4, hb_body(4, MIXED, classic.member_id, 2))
        assert beat.error_code == 0  # the group epoch moved, the target did not: no rejoin
        # The target is recomputed (interval 0 now, at a's next heartbeat): now it rejoins.
        assert (await set_group_configs(conn, MIXED, consumer_assignment_interval_ms="0")).error_code == 0
        await conn.request(HB, 1, hb(MIXED, "a", 2, owned=owned_of(a)))
        (d,) = await describe(conn, MIXED)
        assert d.assignment_epoch == 3
        beat = await conn.request(HEARTBEAT, 4, hb_body(4, MIXED, classic.member_id, 2))
        assert beat.error_code == E.rebalance_in_progress
    finally:
        await conn.close()
