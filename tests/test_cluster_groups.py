"""A group coordinator move with a KIP-848 consumer group and with a share group, over the
wire on an in-process 3-broker cluster: the new coordinator, once it has loaded the
`__consumer_offsets` partition, has what Kafka's group immigration brings back (group and
assignment epochs, members with their epochs and assignments, committed offsets), and the
share-partition state (`__share_group_state`) is where it was, and follows its partition's
leader."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from tests.support.consumer_groups import HB, describe, flat, hb, owned_of
from tests.support.groups_wire import COMMIT, FETCH, commit_body
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
from tests.support.wire_client import request_class
from tests.support.cluster_wire import close, connect, create_topic

SDESCRIBE, SHARE_OFFSETS = 77, 90


def members_of(group) -> list[tuple]:
    return sorted(
        (
            m.member_id,
            m.member_epoch,
            sorted(flat([(t.topic_id, list(t.partitions)) for t in m.assignment.topic_partitions])),
            sorted(flat([(t.topic_id, list(t.partitions)) for t in m.target_assignment.topic_partitions])),
        )
        for m in group.members
    )


@pytest.mark.kafka_cluster(brokers=3, group_consumer_assignment_interval_ms=0)
async def test_a_consumer_group_comes_back_whole_on_its_new_coordinator(kafka_cluster):
    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "cg-t", 4, 3) == E.none
        old = kafka_cluster.coordinator_of("cg")
        c = conns[old]
        a = await c.request(HB, 1, hb("cg", "a", 0, ["cg-t"]))
        assert a.error_code == E.none and len(flat(owned_of(a))) == 4
        a_owned = owned_of(a)
        b = await c.request(HB, 1, hb("cg", "b", 0, ["cg-t"]))
        assert b.error_code == E.none
        # a is asked to give up partitions for b: a revocation under way crosses the move
        a = await c.request(HB, 1, hb("cg", "a", a.member_epoch, owned=a_owned))
        assert a.error_code == E.none and a.assignment is not None
        a_owned = owned_of(a)
        b_owned = owned_of(b) if b.assignment is not None else []
        r = await c.request(COMMIT, 9, commit_body(9, "cg", "a", a.member_epoch, [("cg-t", 0, 17)]))
        assert r.topics[0].partitions[0].error_code == E.none
        before = (await describe(c, "cg"))[0]
        new = await kafka_cluster.amove_coordinator("cg")
        assert new != old
        assert (await describe(conns[old], "cg"))[0].error_code == E.not_coordinator
        after = (await describe(conns[new], "cg"))[0]
        assert after.error_code == E.none
        assert (after.group_state, after.group_epoch, after.assignment_epoch, after.assignor_name) == (
            before.group_state,
            before.group_epoch,
            before.assignment_epoch,
            before.assignor_name,
        )
        assert members_of(after) == members_of(before)
        # the members carry on at their epochs with what they own
        again = await conns[new].request(HB, 1, hb("cg", "a", a.member_epoch, owned=a_owned))
        assert again.error_code == E.none and again.member_epoch >= a.member_epoch
        assert (
            await conns[old].request(HB, 1, hb("cg", "b", b.member_epoch, owned=b_owned))
        ).error_code == E.not_coordinator
        G, T = request_class(FETCH, 9, "OffsetFetchRequestGroup"), request_class(FETCH, 9, "OffsetFetchRequestTopics")
        fetched = await conns[new].request(
            FETCH,
            9,
            request_class(FETCH, 9)(
                groups=(
                    G(group_id="cg", member_id=None, member_epoch=-1, topics=(T(name="cg-t", partition_indexes=(0,)),)),
                ),
                require_stable=False,
            ),
        )
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 17
    finally:
        await close(conns)


@pytest.mark.kafka_cluster(brokers=3)
async def test_a_share_group_and_its_share_partition_state_come_back_after_a_coordinator_move(kafka_cluster):
    conns = await connect(kafka_cluster)
    try:
        any_conn = conns[1]
        assert await create_topic(any_conn, "sh-t", 1, 3) == E.none
        assert (await set_group_configs(any_conn, "sh", share_auto_offset_reset="earliest")).error_code == 0
        from tests.support.data_plane import produce
        from tests.support.share import build_batch

        leader = conns[kafka_cluster.leader_of("sh-t", 0)]
        for i in range(6):
            assert (await produce(leader, "sh-t", build_batch([(None, b"v%d" % i)])))[0] == E.none
        old = kafka_cluster.coordinator_of("sh")
        hb1 = await until_assigned(
            conns[old], "sh", "m", await conns[old].request(SHB, 1, shb("sh", "m", 0, ("sh-t",)))
        )
        assert hb1.error_code == E.none
        tid = hb1.assignment.topic_partitions[0].topic_id
        r = await leader.request(SFETCH, 1, sfetch("sh", "m", 0, tid, max_records=6))
        assert acquired(r) == [(0, 5, 1)]  # (first, last, delivery count)
        r = await leader.request(SACK, 1, sack("sh", "m", 1, tid, {0: [(0, 2, [ACCEPT])]}))
        assert part(r).error_code == E.none
        before = (await sdescribe(conns[old], "sh"))[0]
        offsets_before = await share_start(conns[old], "sh", "sh-t")
        new = await kafka_cluster.amove_coordinator("sh")
        assert new != old
        assert (await sdescribe(conns[old], "sh"))[0].error_code == E.not_coordinator
        after = (await sdescribe(conns[new], "sh"))[0]
        assert (after.error_code, after.group_state, after.group_epoch, after.assignment_epoch) == (
            E.none,
            before.group_state,
            before.group_epoch,
            before.assignment_epoch,
        )
        assert [(m.member_id, m.member_epoch) for m in after.members] == [
            (m.member_id, m.member_epoch) for m in before.members
        ]
        # (as Kafka's share coordinator holds it: the acknowledgement written with the start it had)
        assert await share_start(conns[new], "sh", "sh-t") == offsets_before == 0
        again = await conns[new].request(
            SHB, 1, cls(SHB, 1)(group_id="sh", member_id="m", member_epoch=hb1.member_epoch)
        )
        assert again.error_code == E.none and again.member_epoch == hb1.member_epoch
        # The partition's leader moves: its share-partition leaves the old leader with the
        # locks, and the new leader loads it from __share_group_state (Kafka's
        # onBecomingFollower / readState): the records acquired and not acknowledged are
        # available at once; the accepted ones never come again. An acquisition is not
        # written (as in Kafka): they come as read from the log again, first deliveries.
        old_leader = kafka_cluster.leader_of("sh-t", 0)
        new_leader = await kafka_cluster.amove_leader("sh-t", 0)
        r = await conns[old_leader].request(SFETCH, 1, sfetch("sh", "m", 2, tid))
        assert part(r).error_code == E.not_leader_or_follower
        r = await conns[new_leader].request(SFETCH, 1, sfetch("sh", "m", 0, tid, max_records=6))
        assert acquired(r) == [(3, 5, 1)]
        r = await conns[new_leader].request(SACK, 1, sack("sh", "m", 1, tid, {0: [(3, 5, [ACCEPT])]}))
        assert part(r).error_code == E.none
        assert await share_start(conns[new], "sh", "sh-t") == 3
    finally:
        await close(conns)


async def sdescribe(conn, *groups):
    r = await conn.request(
        SDESCRIBE, 1, request_class(SDESCRIBE, 1)(group_ids=groups, include_authorized_operations=False)
    )
    return r.groups


async def share_start(conn, group: str, topic: str) -> int:
    """The share-partition's start offset, as DescribeShareGroupOffsets answers it."""
    G = request_class(SHARE_OFFSETS, 1, "DescribeShareGroupOffsetsRequestGroup")
    T = request_class(SHARE_OFFSETS, 1, "DescribeShareGroupOffsetsRequestTopic")
    r = await conn.request(
        SHARE_OFFSETS,
        1,
        request_class(SHARE_OFFSETS, 1)(groups=(G(group_id=group, topics=(T(topic_name=topic, partitions=(0,)),)),)),
    )
    g = r.groups[0]
    assert g.error_code == E.none, g
    p = g.topics[0].partitions[0]
    assert p.error_code == E.none, p
    return p.start_offset


@pytest.mark.kafka_cluster(
    brokers=3,
    group_streams_assignment_interval_ms=0,
    group_streams_initial_rebalance_delay_ms=0,
    group_streams_num_warmup_replicas=0,
)
async def test_a_streams_group_comes_back_whole_on_its_new_coordinator(kafka_cluster):
    """A KIP-1071 streams group across a coordinator move: the new coordinator rebuilds it from
    its records (topology, epochs, members and their tasks) and the members carry on."""
    import asyncio

    from tests.support.streams import SDESCRIBE as STREAMS_DESCRIBE, SHB as STREAMS_HB, active_of, describe_body, shb
    from tests.support.streams import word_count

    conns = await connect(kafka_cluster)
    try:
        assert await create_topic(conns[1], "words", 2, 3) == E.none
        # (a client finds its coordinator first, which creates __consumer_offsets, as Kafka)
        found = await conns[1].request(10, 4, request_class(10, 4)(key_type=0, coordinator_keys=("cg-wc",)))
        old = found.coordinators[0].node_id
        assert old == kafka_cluster.coordinator_of("cg-wc")
        c = conns[old]
        a = await c.request(STREAMS_HB, 1, shb("cg-wc", "a", 0, word_count("cg-wc")))
        for _ in range(100):  # the coordinator creates the internal topics meanwhile
            a = await c.request(STREAMS_HB, 1, shb("cg-wc", "a", a.member_epoch, active={}))
            if not a.status:
                break
            await asyncio.sleep(0.02)
        a_owned = active_of(a)
        assert a_owned == {"0": [0, 1], "1": [0, 1]}
        b = await c.request(STREAMS_HB, 1, shb("cg-wc", "b", 0, word_count("cg-wc")))
        assert b.error_code == E.none
        # a is asked to revoke tasks for b: the revocation crosses the move
        a = await c.request(STREAMS_HB, 1, shb("cg-wc", "a", a.member_epoch, active=a_owned))
        r = await c.request(COMMIT, 9, commit_body(9, "cg-wc", "a", a.member_epoch, [("words", 0, 3)]))
        assert r.topics[0].partitions[0].error_code == E.none
        before = (await c.request(STREAMS_DESCRIBE, 1, describe_body("cg-wc"))).groups[0]
        new = await kafka_cluster.amove_coordinator("cg-wc")
        assert new != old
        gone = (await conns[old].request(STREAMS_DESCRIBE, 1, describe_body("cg-wc"))).groups[0]
        assert gone.error_code == E.not_coordinator
        after = (await conns[new].request(STREAMS_DESCRIBE, 1, describe_body("cg-wc"))).groups[0]
        assert after.error_code == E.none
        assert (after.group_state, after.group_epoch, after.assignment_epoch, after.topology) == (
            before.group_state,
            before.group_epoch,
            before.assignment_epoch,
            before.topology,
        )
        assert sorted(
            (m.member_id, m.member_epoch, m.assignment, m.target_assignment) for m in after.members
        ) == sorted((m.member_id, m.member_epoch, m.assignment, m.target_assignment) for m in before.members)
        again = await conns[new].request(STREAMS_HB, 1, shb("cg-wc", "a", a.member_epoch, active=active_of(a)))
        assert again.error_code == E.none and again.member_epoch >= a.member_epoch
        stale = await conns[old].request(STREAMS_HB, 1, shb("cg-wc", "b", b.member_epoch, active={}))
        assert stale.error_code == E.not_coordinator
    finally:
        await close(conns)
