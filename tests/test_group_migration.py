"""KIP-848 online migration over raw frames: a classic group with members upgraded by a
consumer-protocol member, its classic members reconciled through JoinGroup/SyncGroup/
Heartbeat (revoking before others get their partitions), a restart keeping them, the
downgrade when the last consumer-protocol member leaves, and the migration policy."""

from __future__ import annotations

import io
import struct

from kio.serial import entity_writer

from tests.support.wire_client import WireClient, request_class
from protocol.consumer_protocol import read_assignment, write_assignment
from tests.support.consumer_groups import HB, describe, flat, hb, owned_of, topic_ids
from tests.support.groups_wire import (
    COMMIT,
    HEARTBEAT,
    JOIN,
    LEAVE,
    LIST,
    SYNC,
    commit_body,
    hb_body,
    join_body,
    sync_body,
)

GROUP = "migrating"


def subscription(topics, owned=()):
    """A consumer protocol subscription v1 (with owned partitions), as cooperative clients send."""
    from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription, TopicPartition

    out = io.BytesIO()
    out.write(struct.pack(">h", 1))
    entity_writer(ConsumerProtocolSubscription)(
        out,
        ConsumerProtocolSubscription(
            topics=tuple(topics),
            user_data=None,
            owned_partitions=tuple(TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in owned),
        ),
    )
    return out.getvalue()


# What a classic group's conversion to a consumer group writes first, as Kafka 4.4 does: the
# classic group's tombstone, then the consumer group's member, epoch, target and assignment.
CONVERSION_RECORDS = [
    ("GroupMetadataKey", True),
    ("ConsumerGroupMemberMetadataKey", False),
    ("ConsumerGroupMetadataKey", False),
    ("ConsumerGroupTargetAssignmentMemberKey", False),
    ("ConsumerGroupTargetAssignmentMetadataKey", False),
    ("ConsumerGroupCurrentMemberAssignmentKey", False),
]


async def join(conn, member="", owned=(), v=9):
    r = await conn.request(JOIN, v, join_body(v, GROUP, member, protocols=(("range", subscription(["t"], owned)),)))
    if r.error_code == 79:  # MEMBER_ID_REQUIRED
        r = await conn.request(
            JOIN, v, join_body(v, GROUP, r.member_id, protocols=(("range", subscription(["t"], owned)),))
        )
    return r


async def sync(conn, member, generation, assignments=()):
    return await conn.request(SYNC, 5, sync_body(5, GROUP, member, generation, assignments))


async def group_type(conn):
    listed = await conn.request(LIST, 5, request_class(LIST, 5)(states_filter=(), types_filter=()))
    return {g.group_id: (g.group_type, g.group_state) for g in listed.groups}.get(GROUP)


async def test_upgrade_mixed_reconciliation_restart_and_downgrade(server):
    conn = await WireClient("migration").connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=4)
        tid = (await topic_ids(conn, "t"))["t"]
        # A classic group: member a, the leader, assigns itself all four partitions.
        a = await join(conn)
        assert a.error_code == 0 and a.leader == a.member_id and a.generation_id == 1
        everything = write_assignment(1, [("t", [0, 1, 2, 3])])
        s = await sync(conn, a.member_id, 1, [(a.member_id, everything)])
        assert s.error_code == 0 and read_assignment(s.assignment) == [("t", [0, 1, 2, 3])]
        assert await group_type(conn) == ("classic", "Stable")

        # A consumer-protocol member joins: the group becomes a consumer group, a keeps its
        # partitions (epoch = its generation) until it revokes.
        b = await conn.request(HB, 1, hb(GROUP, "b", 0, ["t"]))
        assert b.error_code == 0 and b.member_epoch == 2 and owned_of(b) == []
        assert (await group_type(conn))[0] == "consumer"
        (d,) = await describe(conn, GROUP)
        assert {m.member_id: (m.member_epoch, m.member_type) for m in d.members} == {
            a.member_id: (1, 0),
            "b": (2, 1),
        }  # member types: 0 classic, 1 consumer protocol

        # a's heartbeat says rejoin; its rejoin (owning all four) is told to keep two.
        r = await conn.request(HEARTBEAT, 4, hb_body(4, GROUP, a.member_id, 1))
        assert r.error_code == 27  # REBALANCE_IN_PROGRESS
        r = await join(conn, a.member_id, owned=[("t", [0, 1, 2, 3])])
        assert (r.error_code, r.generation_id, r.leader, r.members, r.protocol_name) == (0, 1, "", (), "range")
        s = await sync(conn, a.member_id, 1)
        kept = read_assignment(s.assignment)
        assert s.error_code == 0 and len(kept[0][1]) == 2
        b2 = await conn.request(HB, 1, hb(GROUP, "b", 2, owned=[]))
        assert b2.assignment is None or owned_of(b2) == []  # nothing before a revokes
        r = await conn.request(HEARTBEAT, 4, hb_body(4, GROUP, a.member_id, 1))
        assert r.error_code == 27  # still to revoke: rejoin
        r = await join(conn, a.member_id, owned=kept)
        assert (r.error_code, r.generation_id) == (0, 2)
        s = await sync(conn, a.member_id, 2)
        assert read_assignment(s.assignment) == kept
        assert (await conn.request(HEARTBEAT, 4, hb_body(4, GROUP, a.member_id, 2))).error_code == 0
        b3 = await conn.request(HB, 1, hb(GROUP, "b", 2, owned=[]))
        assert flat(owned_of(b3)) == {(tid, p) for p in {0, 1, 2, 3} - set(kept[0][1])}
        # The classic member commits with its epoch as generation.
        c = await conn.request(COMMIT, 9, commit_body(9, GROUP, a.member_id, 2, [("t", kept[0][1][0], 7)]))
        assert c.topics[0].partitions[0].error_code == 0
        c = await conn.request(COMMIT, 9, commit_body(9, GROUP, a.member_id, 1, [("t", kept[0][1][0], 7)]))
        assert c.topics[0].partitions[0].error_code == 22  # ILLEGAL_GENERATION: a classic member's
        c = await conn.request(COMMIT, 8, commit_body(8, GROUP, "b", 2, [("t", 0, 7)]))
        assert c.topics[0].partitions[0].error_code == 35  # UNSUPPORTED_VERSION: b speaks KIP-848, needs v9
        # Errors of the classic requests in a consumer group, as Kafka.
        assert (await sync(conn, a.member_id, 5)).error_code == 22  # ILLEGAL_GENERATION
        assert (await sync(conn, "b", 2)).error_code == 25  # b does not speak the classic protocol
        assert (await conn.request(HEARTBEAT, 4, hb_body(4, GROUP, "nobody", 2))).error_code == 25
        r = await conn.request(JOIN, 9, join_body(9, GROUP, ptype="connect"))
        assert r.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
    finally:
        await conn.close()

    # A restart brings back both members, a still a classic member at epoch 2.
    server.restart()
    conn = await WireClient("migration").connect("127.0.0.1", server.port)
    try:
        assert (await conn.request(HEARTBEAT, 4, hb_body(4, GROUP, a.member_id, 2))).error_code == 0
        (d,) = await describe(conn, GROUP)
        assert {m.member_id for m in d.members} == {a.member_id, "b"}
        # b, the last consumer-protocol member, leaves: a classic group again, which rebalances.
        left = await conn.request(HB, 1, hb(GROUP, "b", -1, owned=None))
        assert (left.error_code, left.member_epoch) == (0, -1)
        assert await group_type(conn) == ("classic", "PreparingRebalance")
        assert (await conn.request(HEARTBEAT, 4, hb_body(4, GROUP, a.member_id, 2))).error_code == 27
        r = await join(conn, a.member_id, owned=kept)
        assert (r.error_code, r.generation_id, r.leader) == (0, 3, a.member_id)
        s = await sync(conn, a.member_id, 3, [(a.member_id, everything)])
        assert s.error_code == 0 and await group_type(conn) == ("classic", "Stable")
        r = await conn.request(
            LEAVE,
            3,
            request_class(LEAVE, 3)(
                group_id=GROUP,
                members=(request_class(LEAVE, 3, "MemberIdentity")(member_id=a.member_id, group_instance_id=None),),
            ),
        )
        assert r.error_code == 0 and r.members[0].error_code == 0
    finally:
        await conn.close()


async def test_classic_leave_of_a_consumer_group_and_the_migration_policy(server_factory):
    s = server_factory("--group-consumer-migration-policy", "upgrade")
    conn = await WireClient("migration").connect("127.0.0.1", s.port)
    try:
        await conn.create_topics("t", partitions=2)
        a = await join(conn)
        await sync(conn, a.member_id, 1, [(a.member_id, write_assignment(0, [("t", [0, 1])]))])
        assert (await conn.request(HB, 1, hb(GROUP, "b", 0, ["t"]))).error_code == 0
        # Downgrades are not allowed: b leaving keeps a consumer group of one classic member.
        assert (await conn.request(HB, 1, hb(GROUP, "b", -1, owned=None))).error_code == 0
        assert (await group_type(conn))[0] == "consumer"
        # A classic LeaveGroup from a consumer group.
        r = await conn.request(
            LEAVE,
            3,
            request_class(LEAVE, 3)(
                group_id=GROUP,
                members=(
                    request_class(LEAVE, 3, "MemberIdentity")(member_id=a.member_id, group_instance_id=None),
                    request_class(LEAVE, 3, "MemberIdentity")(member_id="nobody", group_instance_id=None),
                ),
            ),
        )
        assert [(m.member_id, m.error_code) for m in r.members] == [(a.member_id, 0), ("nobody", 25)]
        assert await group_type(conn) == ("consumer", "Empty")
    finally:
        await conn.close()
    s = server_factory("--group-consumer-migration-policy", "disabled")
    conn = await WireClient("migration").connect("127.0.0.1", s.port)
    try:
        await conn.create_topics("t", partitions=2)
        a = await join(conn)
        await sync(conn, a.member_id, 1, [(a.member_id, b"")])
        r = await conn.request(HB, 1, hb(GROUP, "b", 0, ["t"]))
        assert (r.error_code, r.error_message) == (69, f"Group {GROUP} is not a consumer group.")
        assert await group_type(conn) == ("classic", "Stable")
    finally:
        await conn.close()


async def test_an_upgrade_that_cannot_complete_leaves_the_classic_group(server_factory):
    """A consumer-protocol member that cannot join the upgraded group (it would exceed
    group.consumer.max.size) gets Kafka's error, and the classic group stays as it was."""
    s = server_factory("--group-consumer-max-size", "1")
    conn = await WireClient("migration").connect("127.0.0.1", s.port)
    try:
        await conn.create_topics("t", partitions=2)
        a = await join(conn)
        await sync(conn, a.member_id, 1, [(a.member_id, write_assignment(0, [("t", [0, 1])]))])
        r = await conn.request(HB, 1, hb(GROUP, "b", 0, ["t"]))
        assert r.error_code == 81  # GROUP_MAX_SIZE_REACHED
        assert await group_type(conn) == ("classic", "Stable")
        assert (await conn.request(HEARTBEAT, 4, hb_body(4, GROUP, a.member_id, 1))).error_code == 0
    finally:
        await conn.close()
    assert "Traceback" not in s.log_text()


async def test_bad_embedded_protocol_bytes_get_errors_not_tracebacks(server):
    """Malformed consumer-protocol bytes where the server must read them: a classic member
    joining a consumer group (UNKNOWN_SERVER_ERROR, as Kafka's IllegalStateException), and a
    classic group whose member holds a garbage assignment, which then cannot be upgraded
    (GROUP_ID_NOT_FOUND); the group stays usable and nothing is logged as a traceback."""
    conn = await WireClient("migration").connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=2)
        assert (await conn.request(HB, 1, hb("modern", "b", 0, ["t"]))).error_code == 0
        r = await conn.request(JOIN, 9, join_body(9, "modern", "m-1", protocols=(("range", b"\x00"),)))
        assert r.error_code == -1  # UNKNOWN_SERVER_ERROR
        a = await join(conn)
        await sync(conn, a.member_id, 1, [(a.member_id, b"\x00\x00\xff\xff\xff\xff")])  # a negative count
        r = await conn.request(HB, 1, hb(GROUP, "b", 0, ["t"]))
        assert r.error_code == 69 and await group_type(conn) == ("classic", "Stable")
        assert (await conn.request(HEARTBEAT, 4, hb_body(4, GROUP, a.member_id, 1))).error_code == 0
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


def test_embedded_protocol_readers_refuse_any_bytes_cleanly():
    """read_subscription / read_assignment on arbitrary bytes: a value or ConsumerProtocolError,
    never another exception (the coordinator turns that one into Kafka's error)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from protocol.consumer_protocol import ConsumerProtocolError, read_subscription

    @settings(max_examples=300, deadline=None)
    @given(
        st.binary(max_size=64)
        | st.builds(
            lambda v, b: v + b, st.sampled_from([b"\x00\x00", b"\x00\x01", b"\x00\x03"]), st.binary(max_size=40)
        )
    )
    def check(data):
        for read in (read_subscription, read_assignment):
            try:
                read(data)
            except ConsumerProtocolError:
                pass

    check()


def _records_since(h, n: int) -> list[tuple[str, bool]]:
    return [(type(k).__name__, v is None) for k, v in h.log.records[0][n:]]


async def test_a_converted_classic_group_writes_kafkas_records():
    """Kafka 4.4's conversions to a consumer group, in process: an Empty classic group that a
    consumer-protocol member joins is tombstoned first (maybeDeleteEmptyClassicGroup), in the
    batch of the consumer group's first records, so a restart, or the consumer group's later
    deletion, cannot bring the classic group back; a classic group with members is tombstoned,
    then written as converted (createConsumerGroupRecords: subscriptions, epoch at its
    generation, targets, target metadata, current assignments) before the joining member's
    heartbeat's records."""
    from coordinator.groups.modern.consumer.consumer_group import ConsumerGroup
    from protocol.consumer_protocol import write_assignment
    from tests.support.consumer_harness import GROUP as CG, Harness
    from tests.support.group_harness import Operations, settle

    async def classic_member(h: Harness) -> str:
        ops = Operations(h.shard)
        joined = await ops.join(
            CG, "", None, "c", "h", 10000, 30000, "consumer", [("range", subscription(["t"]))], False
        )
        synced = ops.sync(
            CG, joined.member_id, None, 1, None, None, {joined.member_id: write_assignment(1, [("t", [0, 1])])}
        )
        if not hasattr(synced, "error"):
            synced = await synced
        assert synced.error == 0
        await settle()
        return joined.member_id

    h = Harness()
    h.catalog.add("t", 2)
    member = await classic_member(h)
    left = Operations(h.shard).leave(CG, [(member, None)])
    if hasattr(left, "__await__"):
        await left
    await settle()
    n = len(h.log.records[0])
    assert (await h.hb("b", 0, ["t"])).error == 0
    assert _records_since(h, n) == CONVERSION_RECORDS
    assert type(h.reload().shard.groups[CG]) is ConsumerGroup

    h = Harness()
    h.catalog.add("t", 2)
    member = await classic_member(h)
    n = len(h.log.records[0])
    assert (await h.hb("b", 0, ["t"])).error == 0
    written = h.log.records[0][n:]
    assert _records_since(h, n)[:6] == CONVERSION_RECORDS
    assert [getattr(k, "member_id", None) for k, _ in written[1:6]] == [member, None, member, None, member]
    assert (written[2][1].epoch, written[4][1].assignment_epoch, written[4][1].assignment_timestamp) == (1, 1, 0)
    # then the heartbeat's: b's subscription, the epoch it bumps, the new target, b's assignment
    assert [t for t, _ in _records_since(h, n + 6)][:2] == [
        "ConsumerGroupMemberMetadataKey",
        "ConsumerGroupMetadataKey",
    ]
    assert written[6][0].member_id == "b" and written[7][1].epoch == 2
    fresh = h.reload().shard.groups[CG]
    assert type(fresh) is ConsumerGroup and set(fresh.members) == {member, "b"}
