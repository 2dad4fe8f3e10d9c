"""KIP-848 consumer groups over raw frames: ConsumerGroupHeartbeat/Describe, Kafka's error
codes, reconciliation order, offsets of consumer groups, the classic/consumer boundary,
and a restart bringing the group back."""

from __future__ import annotations

import datetime

import pytest

from tests.support.consumer_groups import (
    CG_DESCRIBE,
    HB,
    MINUTE,
    describe,
    flat,
    hb,
    owned_of,
    topic_ids,
)
from tests.support.groups_wire import COMMIT, DELETE, DESCRIBE, FETCH, JOIN, LIST, commit_body, join_body
from tests.support.wire_client import WireClient, request_class


@pytest.fixture
def server(server_factory):
    """These cases follow each heartbeat's exact answer: a target at every change (assignment
    batching off, as Kafka runs its request tests; tests/test_assignment_batching.py has it on),
    and a regex resolved again at every topic created (Kafka waits 10 s after the last
    resolution, as tests/test_consumer_group_state_machine.py's regex case has it)."""
    return server_factory(
        "--group-consumer-assignment-interval-ms", "0", "--group-consumer-regex-min-refresh-interval-ms", "0"
    )


async def test_advertised_and_request_validation(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        keys = await conn.api_versions()
        assert keys[HB] == (0, 1) and keys[CG_DESCRIBE] == (0, 1)
        await conn.create_topics("t", partitions=2)
        cases = [
            (hb("", "m", 0, ["t"]), 42, "GroupId can't be empty."),
            (hb("g", "", 0, ["t"]), 42, "MemberId can't be empty."),
            (hb("g", "m", 0, ["t"], rebalance_timeout=datetime.timedelta(milliseconds=-1)), 42, None),
            (hb("g", "m", 0, ["t"], owned=None), 42, "TopicPartitions must be empty when (re-)joining."),
            (hb("g", "m", 0, None), 42, None),
            (hb("g", "m", -3), 42, "MemberEpoch is invalid."),
            (hb("g", "m", -2), 42, "InstanceId can't be null."),
            (hb("g", "m", 0, ["t"], instance_id=""), 42, None),
            (hb("g", "m", 0, ["t"], server_assignor="sticky"), 112, None),  # UNSUPPORTED_ASSIGNOR
            (hb("g", "m", 0, None, subscribed_topic_regex="(unclosed"), 128, None),  # INVALID_REGULAR_EXPRESSION
            (hb("g", "m", 0, None, subscribed_topic_regex=r"(t)\1"), 128, None),  # RE2: no backreferences
            (hb("g", "m", 0, None, subscribed_topic_regex="(?=t)t"), 128, None),  # nor lookaround
            (hb("nope", "m", 3), 69, None),  # GROUP_ID_NOT_FOUND: a heartbeat for a group that is not there
        ]
        await conn.expect_errors(HB, 1, cases)
    finally:
        await conn.close()


async def test_reconciliation_order_describe_offsets_and_the_classic_boundary(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=4)
        a = await conn.request(HB, 1, hb("g1", "a", 0, ["t"]))
        assert a.error_code == 0 and a.member_epoch == 2 and len(flat(owned_of(a))) == 4
        assert a.heartbeat_interval.total_seconds() == 5  # group.consumer.heartbeat.interval.ms
        b = await conn.request(HB, 1, hb("g1", "b", 0, ["t"]))
        assert b.member_epoch == 3 and owned_of(b) == []  # everything is still a's
        a_owned = owned_of(a)
        a2 = await conn.request(HB, 1, hb("g1", "a", 2, owned=a_owned))
        assert a2.member_epoch == 2 and len(flat(owned_of(a2))) == 2  # revoke first, epoch unchanged
        b2 = await conn.request(HB, 1, hb("g1", "b", 3, owned=[]))
        assert b2.assignment is None or owned_of(b2) == []  # not before a has revoked
        a3 = await conn.request(HB, 1, hb("g1", "a", 2, owned=owned_of(a2)))
        assert a3.member_epoch == 3
        b3 = await conn.request(HB, 1, hb("g1", "b", 3, owned=[]))
        assert flat(owned_of(b3)) == flat(a_owned) - flat(owned_of(a2))

        (d,) = await describe(conn, "g1")
        assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
            0,
            "Stable",
            3,
            3,
            "uniform",
        )
        assert {m.member_id for m in d.members} == {"a", "b"}
        assert {m.client_host for m in d.members} == {"/127.0.0.1"}  # InetAddress.toString(), as Kafka's
        assert {tp.topic_name for m in d.members for tp in m.assignment.topic_partitions} == {"t"}
        (missing,) = await describe(conn, "no-such-group")
        assert missing.error_code == 69

        # Offsets: the member's epoch is checked, its id too. KIP-1251 (Kafka 4.3): an older
        # epoch commits the partitions the member has held since then, and only those.
        kept = sorted(p for _, p in flat(owned_of(a2)))
        given = sorted({0, 1, 2, 3} - set(kept))
        r = await conn.request(COMMIT, 9, commit_body(9, "g1", "a", 3, [("t", 0, 5)]))
        assert r.topics[0].partitions[0].error_code == 0
        r = await conn.request(COMMIT, 9, commit_body(9, "g1", "a", 2, [("t", kept[0], 5), ("t", given[0], 6)]))
        assert [p.error_code for p in r.topics[0].partitions] == [0, 113]  # STALE_MEMBER_EPOCH
        r = await conn.request(COMMIT, 9, commit_body(9, "g1", "a", 4, [("t", kept[0], 6)]))
        assert r.topics[0].partitions[0].error_code == 113
        r = await conn.request(COMMIT, 9, commit_body(9, "g1", "zz", 3, [("t", 0, 6)]))
        assert r.topics[0].partitions[0].error_code == 25  # UNKNOWN_MEMBER_ID
        G, T = request_class(FETCH, 9, "OffsetFetchRequestGroup"), request_class(FETCH, 9, "OffsetFetchRequestTopics")
        fetch = request_class(FETCH, 9)(
            groups=(G(group_id="g1", member_id="a", member_epoch=2, topics=(T(name="t", partition_indexes=(0,)),)),),
            require_stable=False,
        )
        assert (await conn.request(FETCH, 9, fetch)).groups[0].error_code == 113
        fetch = request_class(FETCH, 9)(
            groups=(G(group_id="g1", member_id="a", member_epoch=3, topics=(T(name="t", partition_indexes=(0,)),)),),
            require_stable=False,
        )
        got = (await conn.request(FETCH, 9, fetch)).groups[0]
        assert got.error_code == 0 and got.topics[0].partitions[0].committed_offset == 5

        # The classic APIs see it as Kafka does.
        d = (
            await conn.request(
                DESCRIBE, 6, request_class(DESCRIBE, 6)(groups=("g1",), include_authorized_operations=False)
            )
        ).groups[0]
        assert (d.error_code, d.error_message, d.group_state) == (69, "Group g1 is not a classic group.", "Dead")
        listed = await conn.request(LIST, 5, request_class(LIST, 5)(states_filter=(), types_filter=("consumer",)))
        assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups] == [
            ("g1", "consumer", "Stable", "consumer")
        ]
        joined = await conn.request(JOIN, 9, join_body(9, "g1", ptype="connect"))
        assert joined.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL: a consumer group takes `consumer` members only
        joined = await conn.request(JOIN, 9, join_body(9, "g1"))
        assert joined.error_code == 79  # MEMBER_ID_REQUIRED: a classic member may join (it is not kept yet)
        deleted = await conn.request(DELETE, 2, request_class(DELETE, 2)(groups_names=("g1",)))
        assert deleted.results[0].error_code == 68  # NON_EMPTY_GROUP

        # Fencing: an epoch ahead of the member's; leaving (-1); then the group can be deleted.
        assert (await conn.request(HB, 1, hb("g1", "b", 8, owned=[]))).error_code == 110  # FENCED_MEMBER_EPOCH
        for m in ("a", "b"):
            left = await conn.request(HB, 1, hb("g1", m, -1, owned=None))
            assert (left.error_code, left.member_epoch) == (0, -1)
        assert (await conn.request(HB, 1, hb("g1", "a", 3, owned=[]))).error_code == 25  # UNKNOWN_MEMBER_ID
        deleted = await conn.request(DELETE, 2, request_class(DELETE, 2)(groups_names=("g1",)))
        assert deleted.results[0].error_code == 0
        assert (await describe(conn, "g1"))[0].error_code == 69
    finally:
        await conn.close()


async def test_group_comes_back_after_restart_and_empty_classic_group_upgrades(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=3)
        # A classic group with only committed offsets (no members) ...
        r = await conn.request(COMMIT, 9, commit_body(9, "g2", "", -1, [("t", 1, 42)]))
        assert r.topics[0].partitions[0].error_code == 0
        # ... becomes a consumer group when a consumer-protocol member joins it.
        a = await conn.request(HB, 1, hb("g2", "a", 0, ["t"], instance_id="i-a"))
        assert a.error_code == 0 and len(flat(owned_of(a))) == 3
        before = (await describe(conn, "g2"))[0]
    finally:
        await conn.close()
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        after = (await describe(conn, "g2"))[0]
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
            before.group_epoch,
            before.assignment_epoch,
            before.group_state,
        )
        assert [(m.member_id, m.instance_id, m.member_epoch) for m in after.members] == [("a", "i-a", 2)]
        # The member carries on at its epoch; its committed offsets are there.
        again = await conn.request(HB, 1, hb("g2", "a", 2, owned=owned_of(a)))
        assert again.error_code == 0 and again.member_epoch == 2
        G, T = request_class(FETCH, 9, "OffsetFetchRequestGroup"), request_class(FETCH, 9, "OffsetFetchRequestTopics")
        fetch = request_class(FETCH, 9)(
            groups=(G(group_id="g2", member_id="a", member_epoch=2, topics=(T(name="t", partition_indexes=(1,)),)),),
            require_stable=False,
        )
        assert (await conn.request(FETCH, 9, fetch)).groups[0].topics[0].partitions[0].committed_offset == 42
        # A static member leaves for a while (-2) and a new incarnation takes over its partitions.
        left = await conn.request(HB, 1, hb("g2", "a", -2, owned=None, instance_id="i-a"))
        assert left.member_epoch == -2
        b = await conn.request(HB, 1, hb("g2", "a-next", 0, ["t"], instance_id="i-a"))
        assert b.error_code == 0 and flat(owned_of(b)) == flat(owned_of(a)) and b.member_epoch == 2
        other = await conn.request(HB, 1, hb("g2", "c", 0, ["t"], instance_id="i-a"))
        assert other.error_code == 111  # UNRELEASED_INSTANCE_ID
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_regex_subscription_picks_up_new_topics(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("orders-eu", "orders-us", "payments", "o" * 200, partitions=1)
        # A pattern that backtracks exponentially in Python's re (2^200 paths on that name) is linear in RE2.
        slow = await conn.request(HB, 1, hb("g3", "x", 0, None, subscribed_topic_regex="(o|o)*Z"))
        assert slow.error_code == 0 and owned_of(slow) == []
        assert (await conn.request(HB, 1, hb("g3", "x", -1, owned=None))).error_code == 0
        # Kafka resolves a regex apart from the heartbeat that brought it: its topics come
        # in a later epoch (the resolution runs on the server right after the answer).
        first = await conn.request(HB, 1, hb("g3", "a", 0, None, subscribed_topic_regex="orders-.*"))
        assert first.error_code == 0 and owned_of(first) == []
        a = await conn.request(HB, 1, hb("g3", "a", first.member_epoch, owned=[]))
        assert a.member_epoch == first.member_epoch + 1 and len(owned_of(a)) == 2
        await conn.create_topics("orders-asia", partitions=2)  # created after the subscription
        noticed = await conn.request(HB, 1, hb("g3", "a", a.member_epoch, owned=owned_of(a)))
        assert noticed.member_epoch == a.member_epoch
        a2 = await conn.request(HB, 1, hb("g3", "a", a.member_epoch, owned=owned_of(a)))
        assert a2.member_epoch == a.member_epoch + 1 and len(flat(owned_of(a2))) == 4
        (d,) = await describe(conn, "g3")
        assert d.members[0].subscribed_topic_regex == "orders-.*"
    finally:
        await conn.close()


async def test_a_regex_beside_a_topic_name_is_assigned_in_a_later_epoch(server):
    """Kafka resolves regular expressions asynchronously: the named topic is assigned at
    once, the regex's matches at the next epoch (librdkafka's suite expects this order)."""
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("named", "rx-1", "rx-2", partitions=1)
        a = await conn.request(HB, 1, hb("g5", "a", 0, ["named"], subscribed_topic_regex="rx-.*"))
        assert a.error_code == 0 and a.member_epoch == 2 and len(owned_of(a)) == 1
        a2 = await conn.request(HB, 1, hb("g5", "a", 2, owned=owned_of(a)))
        assert a2.member_epoch == 3 and len(owned_of(a2)) == 3
        (d,) = await describe(conn, "g5")
        assert (d.group_epoch, d.group_state) == (3, "Stable")
    finally:
        await conn.close()


async def test_a_regex_matches_internal_topics_as_kafkas_resolution_does(server):
    """Kafka 4.4's TopicRegexResolver matches every topic of its metadata image, internal
    ones too: a regex naming __consumer_offsets gets its partitions."""
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("plain", partitions=1)
        # (Kafka creates __consumer_offsets when a client first looks a group's coordinator up)
        found = await conn.request(10, 1, request_class(10, 1)(key="g7", key_type=0))
        assert found.error_code == 0
        a = await conn.request(HB, 1, hb("g7", "a", 0, None, subscribed_topic_regex="__consumer_offsets|plain"))
        a2 = await conn.request(HB, 1, hb("g7", "a", a.member_epoch, owned=owned_of(a)))
        (d,) = await describe(conn, "g7")
        names = {tp.topic_name for m in d.members for tp in m.assignment.topic_partitions}
        assert a2.error_code == 0 and names == {"__consumer_offsets", "plain"}
    finally:
        await conn.close()


async def test_a_revocation_only_change_moves_the_member_to_the_new_epoch(server):
    """A subscribed topic is deleted: the target drops its partitions, the member (which
    dropped them itself) lists only what it keeps, and is at the new epoch from then on."""
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("kept", "doomed", partitions=2)
        a = await conn.request(HB, 1, hb("g6", "a", 0, ["kept", "doomed"]))
        assert a.member_epoch == 2 and len(owned_of(a)) == 2
        (d,) = await describe(conn, "g6")
        names = {tp.topic_id: tp.topic_name for m in d.members for tp in m.assignment.topic_partitions}
        delete = request_class(20, 4)(topic_names=("doomed",), timeout=MINUTE)
        assert (await conn.request(20, 4, delete)).responses[0].error_code == 0
        kept = [(t, ps) for t, ps in owned_of(a) if names[t] == "kept"]
        a2 = await conn.request(HB, 1, hb("g6", "a", 2, owned=kept))
        assert a2.error_code == 0 and a2.member_epoch == 3
        for _ in range(2):
            later = await conn.request(HB, 1, hb("g6", "a", 3, owned=None))
            assert later.error_code == 0 and later.member_epoch == 3
    finally:
        await conn.close()


async def test_classic_member_apis_and_offset_delete_on_a_consumer_group(server):
    """A consumer group seen through the classic APIs: its members are unknown to them
    (UNKNOWN_MEMBER_ID), and OffsetDelete spares the topics it still consumes, as Kafka."""
    from tests.support.groups_wire import HEARTBEAT, LEAVE, OFFSET_DELETE, SYNC, cls, hb_body, sync_body

    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", "other", partitions=1)
        a = await conn.request(HB, 1, hb("cg", "a", 0, ["t"]))
        assert a.error_code == 0
        r = await conn.request(COMMIT, 9, commit_body(9, "cg", "a", a.member_epoch, [("t", 0, 3), ("other", 0, 4)]))
        assert [t.partitions[0].error_code for t in r.topics] == [0, 0]
        assert (await conn.request(HEARTBEAT, 4, hb_body(4, "cg", "a", a.member_epoch))).error_code == 25
        assert (await conn.request(SYNC, 5, sync_body(5, "cg", "a", a.member_epoch))).error_code == 25
        L = cls(LEAVE, 5, "MemberIdentity")
        r = await conn.request(
            LEAVE, 5, cls(LEAVE, 5)(group_id="cg", members=(L(member_id="a", group_instance_id=None, reason=None),))
        )
        assert [m.error_code for m in r.members] == [25]

        T, P = cls(OFFSET_DELETE, 0, "OffsetDeleteRequestTopic"), cls(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition")
        body = cls(OFFSET_DELETE, 0)(
            group_id="cg",
            topics=(
                T(name="t", partitions=(P(partition_index=0),)),
                T(name="other", partitions=(P(partition_index=0),)),
            ),
        )
        r = await conn.request(OFFSET_DELETE, 0, body)
        assert r.error_code == 0
        # GROUP_SUBSCRIBED_TO_TOPIC for what a member consumes; the rest is deleted
        assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [("t", 86), ("other", 0)]
        assert (await conn.request(HB, 1, hb("cg", "a", -1, None, owned=None))).error_code == 0  # leaves
        r = await conn.request(OFFSET_DELETE, 0, body)
        assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [("t", 0), ("other", 0)]

        # Empty, it turns back into a classic group when a classic member joins
        first = await conn.request(JOIN, 9, join_body(9, "cg"))
        assert first.error_code == 79  # MEMBER_ID_REQUIRED (KIP-394), as for any classic group
        joined = await conn.request(JOIN, 9, join_body(9, "cg", member_id=first.member_id))
        assert (joined.error_code, joined.generation_id) == (0, 1)
        (d,) = (
            await conn.request(
                DESCRIBE, 5, request_class(DESCRIBE, 5)(groups=("cg",), include_authorized_operations=False)
            )
        ).groups
        assert (d.error_code, d.group_state, d.protocol_type) == (0, "CompletingRebalance", "consumer")
    finally:
        await conn.close()


async def test_offset_commit_and_fetch_v10_by_topic_id(server):
    """v10 (Kafka 4.1) names topics by id: resolved to the broker's topics, an unknown id
    answered UNKNOWN_TOPIC_ID per partition; the group's topics all listed by id."""
    import uuid

    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", "u", partitions=2)
        ids = await topic_ids(conn, "t", "u")
        nowhere = uuid.uuid4()
        T, P = (
            request_class(COMMIT, 10, "OffsetCommitRequestTopic"),
            request_class(COMMIT, 10, "OffsetCommitRequestPartition"),
        )
        commit = request_class(COMMIT, 10)(
            group_id="g10",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=(
                T(
                    topic_id=ids["t"],
                    partitions=(
                        P(partition_index=0, committed_offset=7, committed_metadata="x"),
                        P(partition_index=5, committed_offset=1, committed_metadata=None),
                    ),
                ),
                T(topic_id=nowhere, partitions=(P(partition_index=0, committed_offset=3, committed_metadata=None),)),
                T(topic_id=ids["u"], partitions=(P(partition_index=1, committed_offset=9, committed_metadata=None),)),
            ),
        )
        r = await conn.request(COMMIT, 10, commit)
        assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics] == [
            (ids["t"], [(5, 3), (0, 0)]),
            (nowhere, [(0, 100)]),
            (ids["u"], [(1, 0)]),
        ]  # 3, 100: unknown partition, id (refused by KafkaApis: first, as Kafka answers)
        only_unknown = request_class(COMMIT, 10)(
            group_id="g10",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=(
                T(topic_id=nowhere, partitions=(P(partition_index=0, committed_offset=3, committed_metadata=None),)),
            ),
        )
        r = await conn.request(COMMIT, 10, only_unknown)
        assert r.topics[0].partitions[0].error_code == 100

        G, FT = (
            request_class(FETCH, 10, "OffsetFetchRequestGroup"),
            request_class(FETCH, 10, "OffsetFetchRequestTopics"),
        )
        fetch = request_class(FETCH, 10)(
            require_stable=True,
            groups=(
                G(
                    group_id="g10",
                    topics=(
                        FT(topic_id=ids["t"], partition_indexes=(0, 1)),
                        FT(topic_id=nowhere, partition_indexes=(0,)),
                    ),
                ),
            ),
        )
        (g,) = (await conn.request(FETCH, 10, fetch)).groups
        assert g.error_code == 0 and [
            (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
            for t in g.topics
        ] == [(ids["t"], [(0, 7, 0), (1, -1, 0)]), (nowhere, [(0, -1, 100)])]
        everything = request_class(FETCH, 10)(require_stable=False, groups=(G(group_id="g10", topics=None),))
        (g,) = (await conn.request(FETCH, 10, everything)).groups
        assert [(t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in g.topics] == [
            (ids["t"], [(0, 7)]),
            (ids["u"], [(1, 9)]),
        ]
        # The same offsets by name, in v9.
        G9, T9 = request_class(FETCH, 9, "OffsetFetchRequestGroup"), request_class(FETCH, 9, "OffsetFetchRequestTopics")
        (g,) = (
            await conn.request(
                FETCH,
                9,
                request_class(FETCH, 9)(
                    require_stable=False, groups=(G9(group_id="g10", topics=(T9(name="u", partition_indexes=(1,)),)),)
                ),
            )
        ).groups
        assert g.topics[0].partitions[0].committed_offset == 9
    finally:
        await conn.close()
