"""KIP-848 epochs in process: librdkafka's empty regex, KIP-1251 assignment epochs (Kafka
4.3's commit check), and the member epoch after a revocation-only change."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode as E

from coordinator.groups.modern.consumer.consumer_group import records_of
from protocol import consumer_records as R
from protocol.offset_commit import PartitionCommit
from tests.support.group_harness import answered, commit_failed, settle
from tests.support.consumer_harness import GROUP, Harness, flat
from tests.support.consumer_shard import owned


async def commit_errors(h: Harness, member_id: str, epoch: int, *partitions: tuple[str, int]) -> list[int]:
    result = h.shard.offset_manager.commit(
        GROUP, epoch, member_id, None, [PartitionCommit(t, p, 1, -1, "") for t, p in partitions]
    )
    return await answered(h.shard, result, commit_failed(result))


async def test_an_empty_regex_is_no_regex_and_a_resent_subscription_bumps_nothing():
    h = Harness()
    h.catalog.add("t", 2)
    a = await h.hb("a", 0, ["t"], subscribed_topic_regex="")
    assert a.error == E.none and h.group.group_epoch == 2
    assert h.group.members["a"].subscribed_topic_regex is None
    # librdkafka's full heartbeat: the same names and "" again, every time.
    for _ in range(3):
        again = await h.hb("a", a.member_epoch, ["t"], owned=owned(a), subscribed_topic_regex="")
        assert again.error == E.none and again.member_epoch == 2
    b = await h.hb("b", 0, ["t"], subscribed_topic_regex="")
    b2 = await h.hb("b", b.member_epoch, ["t"], owned=owned(b), subscribed_topic_regex="")
    assert h.group.group_epoch == 3 and b2.error == E.none  # one bump per join
    assert h.reload().group.members["a"].subscribed_topic_regex is None


async def test_a_commit_at_an_older_epoch_is_accepted_for_partitions_held_since_then():
    h = Harness()
    t = h.catalog.add("t", 4)
    a = await h.hb("a", 0, ["t"])
    assert a.member_epoch == 2 and flat(a.assignment) == {0, 1, 2, 3}
    await h.hb("b", 0, ["t"])  # epoch 3: a must give up two partitions
    a2 = await h.hb("a", 2, owned=owned(a))
    a3 = await h.hb("a", 2, owned=owned(a2))  # revoked: a is at epoch 3, keeps what it got at 2
    assert a3.member_epoch == 3
    kept = sorted(flat(a2.assignment))
    given = sorted({0, 1, 2, 3} - set(kept))
    epochs = h.group.members["a"].assignment_epochs
    assert {p: epochs[t.topic_id][p] for p in kept} == {p: 2 for p in kept}
    # A commit racing the heartbeat that moved a to epoch 3, still at epoch 2:
    assert await commit_errors(h, "a", 2, *[("t", p) for p in kept]) == [E.none, E.none]
    # ...but not for partitions a no longer owns, nor at an epoch from the future.
    assert await commit_errors(h, "a", 2, ("t", kept[0]), ("t", given[0])) == [E.none, E.stale_member_epoch]
    assert await commit_errors(h, "a", 4, ("t", kept[0])) == [E.stale_member_epoch]
    b2 = await h.hb("b", 3, owned=[])
    assert flat(b2.assignment) == set(given)
    epochs_b = h.group.members["b"].assignment_epochs
    assert {epochs_b[t.topic_id][p] for p in given} == {3}
    # b got its partitions at epoch 3: an epoch-2 commit of them is stale; epoch 3 is fine.
    assert await commit_errors(h, "b", 2, ("t", given[0])) == [E.stale_member_epoch]
    assert await commit_errors(h, "b", 3, ("t", given[0])) == [E.none]


async def test_assignment_epochs_are_written_and_replayed_and_old_records_default_to_the_member_epoch():
    h = Harness()
    h.catalog.add("t", 2)
    a = await h.hb("a", 0, ["t"])
    b = await h.hb("b", 0, ["t"])
    a2 = await h.hb("a", 2, owned=owned(a))
    a3 = await h.hb("a", 2, owned=owned(a2))
    await h.hb("b", b.member_epoch, owned=[])
    fresh = h.reload()
    assert records_of(fresh.group) == records_of(h.group)
    assert fresh.group.members["a"].assignment_epochs == h.group.members["a"].assignment_epochs
    value = records_of(h.group)[R.ConsumerGroupCurrentMemberAssignmentKey(GROUP, "a")]
    assert value.assigned_epochs and a3.error == E.none
    # A record without epochs (written before Kafka 4.3): each partition counts as
    # assigned at the member's epoch.
    key = R.ConsumerGroupCurrentMemberAssignmentKey(GROUP, "a")
    old = R.ConsumerGroupCurrentMemberAssignmentValue(
        value.member_epoch,
        value.previous_member_epoch,
        value.state,
        value.assigned_partitions,
        value.partitions_pending_revocation,
    )
    decoded = R.decode_value(key, R.encode_value(old))
    assert decoded == old and decoded.assigned_epochs == ()
    h.log.records[0].append((key, old))
    legacy = h.reload()
    epochs = legacy.group.members["a"].assignment_epochs
    assert {e for of_topic in epochs.values() for e in of_topic.values()} == {value.member_epoch}


def test_assignment_epochs_are_kafkas_tagged_field():
    """TopicPartitions.AssignmentEpochs: tag 0, a nullable compact []int32 aligned with
    Partitions (Kafka 4.3's ConsumerGroupCurrentMemberAssignmentValue)."""
    topic = uuid.UUID(int=1)
    value = R.ConsumerGroupCurrentMemberAssignmentValue(3, 2, 0, ((topic, (0, 1)),), (), ((1, 3),))
    data = R.encode_value(value)
    expected = (
        b"\x00\x00"
        + (3).to_bytes(4, "big")
        + (2).to_bytes(4, "big")
        + b"\x00"
        + b"\x02"
        + topic.bytes
        + b"\x03"
        + (0).to_bytes(4, "big")
        + (1).to_bytes(4, "big")
        + b"\x01\x00\x09\x03"
        + (1).to_bytes(4, "big")
        + (3).to_bytes(4, "big")  # tag 0, 9 bytes
        + b"\x01"
        + b"\x00"
    )  # no pending revocation, no tags on the value
    assert data == expected
    assert R.decode_value(R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"), data) == value
    bad = data.replace(b"\x09\x03", b"\x05\x02", 1)[:-4]  # one epoch for two partitions
    try:
        R.decode_value(R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"), bad)
    except R.RecordDecodeError:
        pass
    else:
        raise AssertionError("a misaligned AssignmentEpochs must not load")


async def test_a_revocation_only_change_moves_the_member_to_the_new_epoch():
    """The target drops a deleted topic's partitions; the member, which dropped them itself
    when the topic went, lists only what it keeps: it moves to the new epoch at once, and
    stays there in later heartbeats (Kafka's computeNextAssignment)."""
    h = Harness()
    h.catalog.add("t", 2)
    gone = h.catalog.add("gone", 2)
    a = await h.hb("a", 0, ["t", "gone"])
    assert a.member_epoch == 2 and len(a.assignment) == 2
    del h.catalog.topics["gone"], h.catalog.by_id[gone.topic_id]
    still = [(tid, ps) for tid, ps in owned(a) if tid != gone.topic_id]
    a2 = await h.hb("a", 2, owned=still)
    assert a2.member_epoch == h.group.group_epoch == 3
    for _ in range(2):
        later = await h.hb("a", 3, owned=None)
        assert later.error == E.none and later.member_epoch == 3
    assert h.group.state_name == "Stable"
    # A member that still lists the partitions must revoke them first (epoch unchanged).
    h2 = Harness()
    h2.catalog.add("t", 2)
    gone2 = h2.catalog.add("gone", 2)
    c = await h2.hb("c", 0, ["t", "gone"])
    del h2.catalog.topics["gone"], h2.catalog.by_id[gone2.topic_id]
    c2 = await h2.hb("c", 2, owned=owned(c))
    assert c2.member_epoch == 2
    c3 = await h2.hb("c", 2, owned=owned(c2))
    assert c3.member_epoch == 3


async def test_a_dropped_topic_is_revoked_before_the_target_leaves_it_out():
    """Kafka's CurrentAssignmentBuilder.updateCurrentAssignment: a member that stops
    subscribing to a topic is told at once to give up its partitions, at its epoch, while the
    assignment interval still holds back the target that leaves them out; ConsumerGroupDescribe
    shows them as the member's until it has (Kafka 4.4 answers so, seen on a real node)."""
    h = Harness(assignment_interval_ms=10_000)
    t = h.catalog.add("t", 3)
    u = h.catalog.add("u", 2)
    a = await h.hb("a", 0, ["t", "u"])
    assert a.member_epoch == 2 and set(a.assignment) == {t.topic_id, u.topic_id}
    dropped = await h.hb("a", 2, ["t"], owned=owned(a))
    g = h.group
    assert dropped.member_epoch == 2 and set(dropped.assignment) == {t.topic_id}
    assert (g.group_epoch, g.assignment_epoch, g.state_name) == (3, 2, "Assigning")
    member = g.members["a"]
    assert member.state.name == "UNREVOKED_PARTITIONS" and set(member.pending_revocation) == {u.topic_id}
    assert set(member.owns()) == {t.topic_id, u.topic_id}  # what Describe shows
    revoked = await h.hb("a", 2, owned=owned(dropped))
    assert revoked.error == E.none and member.state.name == "STABLE" and set(member.owns()) == {t.topic_id}
    h.clock.advance(10_000)
    settled = await h.hb("a", 2, owned=owned(dropped))
    assert settled.member_epoch == 3 and flat(settled.assignment) == {0, 1, 2}
    assert records_of(h.reload().group) == records_of(h.group)


async def test_a_resolved_regex_is_written_and_tombstoned_when_no_member_subscribes_to_it():
    """Kafka 4.4's ConsumerGroupRegularExpression records (key type 16): each resolution of
    a subscribed regex writes its topics (sorted) with the metadata version and the time it
    started, before the epoch it bumps; the target follows at the next heartbeat; the regex's
    last subscriber moving to another regex, or leaving, tombstones it after its own records
    and before the group epoch (consumerGroupHeartbeat, consumerGroupFenceMembers). A reload
    has the regex as resolved."""
    h = Harness()
    h.catalog.add("orders-us", 1)
    h.catalog.add("orders-eu", 1)
    h.catalog.add("payments", 1)
    log = h.log.records[0]

    def since(n: int) -> list[tuple[str, object]]:
        return [(type(k).__name__.removeprefix("ConsumerGroup"), v) for k, v in log[n:]]

    def regex_record(topics: tuple[str, ...]) -> R.ConsumerGroupRegularExpressionValue:
        return R.ConsumerGroupRegularExpressionValue(topics, h.catalog.changes, h.clock.wall())

    first = await h.hb("a", 0, None, subscribed_topic_regex="orders-.*")
    assert first.member_epoch == 1 and [k for k, _ in since(0)] == ["MemberMetadataKey", "CurrentMemberAssignmentKey"]
    n = len(log)
    h.clock.advance(0)  # the resolution, apart from the heartbeat
    await settle()
    resolved = since(n)
    assert [k for k, _ in resolved] == ["RegularExpressionKey", "MetadataKey"]
    assert resolved[0][1] == regex_record(("orders-eu", "orders-us")) and resolved[1][1].epoch == 2
    n = len(log)
    a = await h.hb("a", 1, owned=[])
    assert a.member_epoch == 2 and len(a.assignment) == 2
    assert [k for k, _ in since(n)] == [
        "TargetAssignmentMemberKey",
        "TargetAssignmentMetadataKey",
        "CurrentMemberAssignmentKey",
    ]
    # b subscribes to the resolved regex (the epoch moves: no resolution to wait for); a moves
    # to another regex: b still uses the first, nothing is tombstoned.
    b = await h.hb("b", 0, None, subscribed_topic_regex="orders-.*")
    assert b.error == E.none and h.group.group_epoch == 3
    n = len(log)
    h.clock.advance(10_001)  # (a regex new to the group is resolved 10 s after the last resolution at the soonest)
    await h.hb("a", 2, None, owned=owned(a), subscribed_topic_regex="pay.*")
    assert not any(v is None for _, v in since(n))
    # b leaves: its three tombstones, then the regex's, then the epoch
    n = len(log)
    assert (await h.hb("b", -1, owned=None)).error == E.none
    left = since(n)
    assert [(k, v is None) for k, v in left] == [
        ("CurrentMemberAssignmentKey", True),
        ("TargetAssignmentMemberKey", True),
        ("MemberMetadataKey", True),
        ("RegularExpressionKey", True),
        ("MetadataKey", False),
    ]
    assert log[n + 3][0] == R.ConsumerGroupRegularExpressionKey(GROUP, "orders-.*")
    h.clock.advance(0)
    await settle()
    fresh = h.reload().group
    assert fresh.resolved_regexes == h.group.resolved_regexes == {"pay.*": frozenset({"payments"})}
    assert records_of(fresh) == records_of(h.group)


async def test_reconciling_sets_the_previous_epoch_and_a_partition_back_from_revocation_is_assigned_anew():
    """Kafka's updateMemberEpoch: a member told to revoke at its epoch has that epoch as its
    previous one too; a partition it was revoking and gets back counts as assigned at its new
    epoch (AssignmentEpochs). Seen in a real 4.4 node's records (the differential suite's
    regex scenario: by name, then by a regex still to be resolved)."""
    h = Harness()
    t = h.catalog.add("rx-a", 2)
    a = await h.hb("a", 0, ["rx-a"])
    assert a.member_epoch == 2
    moved = await h.hb("a", 2, [], owned=owned(a), subscribed_topic_regex="rx-.*")
    member = h.group.members["a"]
    assert moved.member_epoch == 2 and member.state.name == "UNREVOKED_PARTITIONS"
    assert (member.member_epoch, member.previous_member_epoch) == (2, 2)
    assert member.assignment_epochs == {t.topic_id: {0: 2, 1: 2}}
    h.clock.advance(0)
    await settle()
    back = await h.hb("a", 2, owned=[])
    assert flat(back.assignment) == {0, 1} and member.state.name == "STABLE"
    assert member.assignment_epochs == {t.topic_id: {0: back.member_epoch, 1: back.member_epoch}}
    assert records_of(h.reload().group) == records_of(h.group)
