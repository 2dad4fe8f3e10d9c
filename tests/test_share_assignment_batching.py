"""Kafka 4.3's assignment batching of share groups (KIP-1263): the target assignment computed
at most once per `group.share.assignment.interval.ms`, members keeping the last target
meanwhile, the computation's time in ShareGroupTargetAssignmentMetadata's tagged field and
replayed, the group config `share.assignment.interval.ms` and the broker's bounds."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from kio.schema.errors import ErrorCode as E

from protocol import share_records as R
from tests.support.assignment_batching import (
    INTERVAL,
    OPS,
    ShareBatching,
    check_computation_time_replayed,
    check_startup_refuses_an_interval_beyond_the_max,
    run_ops,
)
from tests.support.share import SHB, set_group_configs, shb
from tests.support.wire_client import WireClient


def partitions_of(assignment) -> int:
    return sum(len(ps) for ps in (assignment or {}).values())


@pytest.mark.parametrize("interval", [0, INTERVAL])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_batching_loses_no_partition_and_every_member_converges(interval, ops):
    async def run() -> None:
        h = ShareBatching(interval)
        h.catalog.add("t", 12)
        h.catalog.add("u", 5)
        alive = await run_ops(h, interval, ops, lambda g: None)
        if not alive:
            return
        # Once the interval has passed, one heartbeat each brings every member to the target.
        h.clock.advance(interval + 1)
        for m in sorted(alive):
            assert (await h.beat(m)).error == E.none
        g = h.sgroup
        assert g.assignment_epoch == g.group_epoch
        assert all(g.members[m].member_epoch == g.assignment_epoch for m in alive)
        assert all(g.members[m].assigned == g.target.get(m, {}) for m in alive)
        # No partition lost: every partition of a subscribed topic is with some member.
        held: set = set()
        for m in alive:
            held.update((t, p) for t, ps in g.members[m].assigned.items() for p in ps)
        subscribed_u = any("u" in g.members[m].subscribed_topic_names for m in alive)
        assert len(held) == (17 if subscribed_u else 12)

    asyncio.run(run())


async def test_members_keep_the_last_target_until_the_interval_has_passed():
    h = ShareBatching(INTERVAL)
    h.catalog.add("t", 6)
    a = await h.shb("a", 0, ["t"])
    g = h.sgroup
    # Kafka 4.4: the join's target assigns nothing (no partition's state is initialized yet);
    # the heartbeat after the initialization moves the group epoch, and the interval holds
    # the target that assigns them back until it has passed since the join's.
    assert (a.member_epoch, partitions_of(a.assignment)) == (2, 0)
    a1 = await h.shb("a", 2)
    assert (g.group_epoch, g.assignment_epoch, a1.member_epoch, a1.assignment) == (3, 2, 2, None)
    h.clock.advance(INTERVAL)
    a = await h.shb("a", 2)
    assert (a.member_epoch, partitions_of(a.assignment)) == (3, 6)
    b = await h.shb("b", 0, ["t"])
    assert (g.group_epoch, g.assignment_epoch) == (4, 3)
    assert b.member_epoch == 3 and partitions_of(b.assignment) == 0
    a2 = await h.shb("a", 3)
    assert a2.member_epoch == 3 and a2.assignment is None  # nothing new for a either
    h.clock.advance(INTERVAL)
    a3 = await h.shb("a", 3)  # the heartbeat after the interval computes it
    assert (g.group_epoch, g.assignment_epoch) == (4, 4)
    assert a3.member_epoch == 4 and partitions_of(a3.assignment) == 3
    b2 = await h.shb("b", 3)
    assert b2.member_epoch == 4 and partitions_of(b2.assignment) == 3
    # A leave moves the group epoch; the leaver's partitions wait for the next computation.
    await h.shb("b", -1)
    assert (g.group_epoch, g.assignment_epoch) == (5, 4)
    h.clock.advance(INTERVAL)
    assert partitions_of((await h.shb("a", 4)).assignment) == 6


async def test_the_computation_time_is_recorded_and_replayed():
    await check_computation_time_replayed(ShareBatching, R.ShareGroupTargetAssignmentMetadataValue)


async def test_the_group_config_sets_the_interval_within_the_brokers_bounds(server_factory):
    server = server_factory(
        "--group-share-assignment-interval-ms", "0", "--group-share-max-assignment-interval-ms", "60000"
    )
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=4)
        # Refused: not a number, negative (Kafka: at least 0).
        assert (await set_group_configs(conn, "g", share_assignment_interval_ms="soon")).error_code == E.invalid_config
        assert (await set_group_configs(conn, "g", share_assignment_interval_ms="-1")).error_code == E.invalid_config
        assert (await set_group_configs(conn, "g", share_assignment_interval_ms="60000")).error_code == 0
        a = await conn.request(SHB, 1, shb("g", "a" * 22, 0, ["t"]))
        b = await conn.request(SHB, 1, shb("g", "b" * 22, 0, ["t"]))
        assert a.member_epoch == 2 and b.member_epoch == 2 and not b.assignment.topic_partitions
        # Back to the broker's 0: the next heartbeat computes the target.
        assert (await set_group_configs(conn, "g", share_assignment_interval_ms="0")).error_code == 0
        a2 = await conn.request(SHB, 1, shb("g", "a" * 22, 2))
        assert a2.member_epoch == 3 and len(a2.assignment.topic_partitions[0].partitions) == 2
        # The other group is at the broker's interval, 0: a target at every change.
        assert (await conn.request(SHB, 1, shb("other", "a" * 22, 0, ["t"]))).member_epoch == 2
        assert (await conn.request(SHB, 1, shb("other", "b" * 22, 0, ["t"]))).member_epoch == 3
    finally:
        await conn.close()


@pytest.mark.process
def test_bounds_that_exclude_the_interval_stop_the_server_at_startup(tmp_path):
    check_startup_refuses_an_interval_beyond_the_max(tmp_path, "share")


async def test_a_dropped_topic_leaves_the_assignment_before_the_next_target():
    """Kafka's ShareGroupAssignmentBuilder: a member's assignment is its target's partitions of
    the topics it subscribes to; one that drops a topic loses its partitions at that
    heartbeat (same epoch), though the interval holds back the target that leaves them out."""
    h = ShareBatching(INTERVAL)
    t = h.catalog.add("t", 2)
    u = h.catalog.add("u", 2)
    a = await h.shb("a", 0, ["t", "u"])
    h.clock.advance(INTERVAL)
    a = await h.shb("a", a.member_epoch)
    assert (a.member_epoch, set(a.assignment)) == (3, {t.topic_id, u.topic_id})
    dropped = await h.shb("a", 3, ["t"])
    g = h.sgroup
    assert (g.group_epoch, g.assignment_epoch) == (4, 3)
    assert (dropped.member_epoch, set(dropped.assignment)) == (3, {t.topic_id})
    h.clock.advance(INTERVAL)
    again = await h.shb("a", 3)
    assert (again.member_epoch, again.assignment) == (4, None)  # the new target: the same partitions
