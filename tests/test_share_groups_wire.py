"""KIP-932 share groups over raw frames: ShareGroupHeartbeat / ShareGroupDescribe, Kafka's
error codes, the SimpleAssignor (several members per partition), the boundary with
classic and consumer groups, session expiry, and a restart bringing the group back."""

from __future__ import annotations

import asyncio
import datetime
import functools

import pytest

from tests.support.acls import ALL, CREATE_ACLS, DESCRIBE as DESCRIBE_ACL, GROUP, TOPIC, create_acls_body
from tests.support.share import NO_BATCHING, share_join, shb, until_assigned
from tests.support.wire_client import WireClient, request_class
from tests.support.groups_wire import COMMIT, DELETE, DESCRIBE, FETCH, JOIN, LIST, commit_body, join_body

SHB, SDESCRIBE, CG_HB, API_VERSIONS, OFFSET_DELETE = 76, 77, 68, 18, 47
MS0 = datetime.timedelta(0)


@pytest.fixture
def server(server_factory):
    """These cases follow each heartbeat's exact answer: a target at every change (assignment
    batching off, as Kafka runs its request tests; tests/test_share_assignment_batching.py
    has it on)."""
    return server_factory(*NO_BATCHING)


def assigned(resp):
    return {(t.topic_id, p) for t in resp.assignment.topic_partitions for p in t.partitions}


async def sdescribe(conn, *groups):
    r = await conn.request(
        SDESCRIBE, 1, request_class(SDESCRIBE, 1)(group_ids=groups, include_authorized_operations=False)
    )
    return r.groups


async def test_advertised_and_request_validation(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        keys = await conn.api_versions()
        assert keys[SHB] == (1, 1) and keys[SDESCRIBE] == (1, 1)
        await conn.create_topics("t", partitions=2)
        cases = [
            (shb("", "m", 0, ["t"]), 42, "GroupId can't be empty."),
            # (as at Kafka 4.4: no message, and before the group id's check)
            (shb("", "", 0, ["t"]), 42, None),
            (shb("g", "m" * 37, 0, ["t"]), 42, None),
            (shb("g", "m", 0, None), 42, "SubscribedTopicNames must be set in first request."),
            (shb("g", "m", 0, []), 42, "SubscribedTopicNames must be set in first request."),
            (shb("g", "m", 0, ["t"], rack_id=""), 42, "RackId can't be empty."),
            (shb("g", "m", -2), 42, "MemberEpoch is invalid."),
            (shb("nope", "m", 3), 69, "Share group nope not found."),  # GROUP_ID_NOT_FOUND
            (shb("nope", "m", -1), 69, None),
        ]
        await conn.expect_errors(SHB, 1, cases)
        assert (await sdescribe(conn, "g"))[0].error_code == 69  # nothing was kept of the refused joins
    finally:
        await conn.close()


async def test_membership_assignment_describe_and_other_group_types(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("one", partitions=1)
        await conn.create_topics("two", partitions=2)
        joined = await conn.request(SHB, 1, shb("s1", "a", 0, ["one"]))
        # Kafka 4.4 assigns a partition once its share state is initialized, after the join:
        # the heartbeat after moves the group to epoch 3 and assigns it.
        assert (joined.error_code, joined.member_epoch, assigned(joined)) == (0, 2, set())
        a = await until_assigned(conn, "s1", "a", joined)
        assert (a.error_code, a.member_epoch) == (0, 3) and len(assigned(a)) == 1
        assert a.heartbeat_interval.total_seconds() == 5  # group.share.heartbeat.interval.ms
        # Three members on one partition: all of them get it (desired sharing = 3).
        b = await conn.request(SHB, 1, shb("s1", "b", 0, ["one"]))
        c = await conn.request(SHB, 1, shb("s1", "c", 0, ["one"]))
        assert assigned(a) == assigned(b) == assigned(c) and c.member_epoch == 5
        # a's next heartbeat moves it to the new epoch, its assignment unchanged (not sent again).
        a2 = await conn.request(SHB, 1, shb("s1", "a", 3))
        assert (a2.error_code, a2.member_epoch, a2.assignment) == (0, 5, None)
        # An epoch ahead, or behind other than the previous one: FENCED_MEMBER_EPOCH.
        assert (await conn.request(SHB, 1, shb("s1", "a", 9))).error_code == 110
        assert (await conn.request(SHB, 1, shb("s1", "c", 2))).error_code == 110
        assert (await conn.request(SHB, 1, shb("s1", "zz", 5))).error_code == 25  # UNKNOWN_MEMBER_ID

        (d,) = await sdescribe(conn, "s1")
        assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
            0,
            "Stable",
            5,
            5,
            "simple",
        )
        assert sorted(m.member_id for m in d.members) == ["a", "b", "c"]
        a_desc = next(m for m in d.members if m.member_id == "a")
        assert a_desc.member_epoch == 5 and a_desc.subscribed_topic_names == ("one",)
        assert a_desc.client_host == "/127.0.0.1"  # InetAddress.toString(), as Kafka's
        assert [(tp.topic_name, tp.partitions) for tp in a_desc.assignment.topic_partitions] == [("one", (0,))]

        # Two members on two partitions: one each; a third member shares one of them.
        x = await share_join(conn, "s2", "x", ["two"])
        assert len(assigned(x)) == 2
        y = await conn.request(SHB, 1, shb("s2", "y", 0, ["two"]))
        x2 = await conn.request(SHB, 1, shb("s2", "x", x.member_epoch))
        assert len(assigned(y)) == 1 and assigned(x2) == assigned(x) - assigned(y)
        z = await conn.request(SHB, 1, shb("s2", "z", 0, ["two"]))
        assert len(assigned(z)) == 1  # 3 members, 2 partitions: each partition to 2 members

        # The other group APIs see share groups as Kafka does.
        listed = await conn.request(LIST, 5, request_class(LIST, 5)(states_filter=(), types_filter=("share",)))
        assert sorted((g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups) == [
            ("s1", "share", "Stable", "share"),
            ("s2", "share", "Stable", "share"),
        ]
        listed = await conn.request(LIST, 5, request_class(LIST, 5)(states_filter=(), types_filter=("consumer",)))
        assert listed.groups == ()
        dg = (
            await conn.request(
                DESCRIBE, 6, request_class(DESCRIBE, 6)(groups=("s1",), include_authorized_operations=False)
            )
        ).groups[0]
        assert (dg.error_code, dg.error_message) == (69, "Group s1 is not a classic group.")
        joined = await conn.request(JOIN, 9, join_body(9, "s1"))
        assert (joined.error_code, joined.member_id) == (23, "")  # INCONSISTENT_GROUP_PROTOCOL
        cg = await conn.request(
            CG_HB,
            1,
            request_class(CG_HB, 1)(
                group_id="s1",
                member_id="k",
                member_epoch=0,
                rebalance_timeout=a.heartbeat_interval,
                subscribed_topic_names=("one",),
                topic_partitions=(),
            ),
        )
        assert (cg.error_code, cg.error_message) == (69, "Group s1 is not a consumer group.")
        r = await conn.request(COMMIT, 9, commit_body(9, "s1", "a", 4, [("one", 0, 5)]))
        assert r.topics[0].partitions[0].error_code == 69
        G, T = request_class(FETCH, 9, "OffsetFetchRequestGroup"), request_class(FETCH, 9, "OffsetFetchRequestTopics")
        fetched = await conn.request(
            FETCH,
            9,
            request_class(FETCH, 9)(
                groups=(
                    G(group_id="s1", member_id=None, member_epoch=-1, topics=(T(name="one", partition_indexes=(0,)),)),
                ),
                require_stable=False,
            ),
        )
        assert fetched.groups[0].error_code == 69
        # A consumer group's id is not a share group's.
        cg = await conn.request(
            CG_HB,
            1,
            request_class(CG_HB, 1)(
                group_id="c1",
                member_id="k",
                member_epoch=0,
                rebalance_timeout=a.heartbeat_interval,
                subscribed_topic_names=("one",),
                topic_partitions=(),
            ),
        )
        assert cg.error_code == 0
        other = await conn.request(SHB, 1, shb("c1", "a", 0, ["one"]))
        assert (other.error_code, other.error_message) == (69, "Group c1 is not a share group.")
        (notshare,) = await sdescribe(conn, "c1")
        assert (notshare.error_code, notshare.error_message) == (69, "Group c1 is not a share group.")

        # DeleteGroups: not while members are there; leaving empties the group.
        deleted = await conn.request(DELETE, 2, request_class(DELETE, 2)(groups_names=("s1",)))
        assert deleted.results[0].error_code == 68  # NON_EMPTY_GROUP
        for m, _epoch in (("a", 3), ("b", 2), ("c", 3)):
            left = await conn.request(SHB, 1, shb("s1", m, -1))
            assert (left.error_code, left.member_epoch) == (0, -1)
        assert (await conn.request(SHB, 1, shb("s1", "a", -1))).error_code == 25
        (d,) = await sdescribe(conn, "s1")
        assert (d.group_state, d.members) == ("Empty", ())
        deleted = await conn.request(DELETE, 2, request_class(DELETE, 2)(groups_names=("s1",)))
        assert deleted.results[0].error_code == 0
        assert (await sdescribe(conn, "s1"))[0].error_code == 69
    finally:
        await conn.close()


async def test_session_expiry(server_factory):
    server = server_factory(
        *NO_BATCHING, "--group-share-session-timeout-ms", "300", "--group-share-heartbeat-interval-ms", "100"
    )
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=1)
        a = await conn.request(SHB, 1, shb("s", "a", 0, ["t"]))
        b = await conn.request(SHB, 1, shb("s", "b", 0, ["t"]))
        assert a.heartbeat_interval.total_seconds() == 0.1
        # b keeps heartbeating, a does not: a is fenced after its session, b stays.
        epoch = b.member_epoch
        for _ in range(100):
            resp = await conn.request(SHB, 1, shb("s", "b", epoch))
            assert resp.error_code == 0
            epoch = resp.member_epoch
            (d,) = await sdescribe(conn, "s")
            if [m.member_id for m in d.members] == ["b"]:
                break
            await asyncio.sleep(0.1)  # the member's heartbeat interval
        assert [m.member_id for m in d.members] == ["b"]
        assert (await conn.request(SHB, 1, shb("s", "a", a.member_epoch))).error_code == 25
    finally:
        await conn.close()


async def test_group_comes_back_after_restart(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=3)
        a = await conn.request(SHB, 1, shb("s", "a", 0, ["t"]))
        b = await conn.request(SHB, 1, shb("s", "b", 0, ["t"], rack_id="r1"))
        a = await conn.request(SHB, 1, shb("s", "a", a.member_epoch))
        before = (await sdescribe(conn, "s"))[0]
    finally:
        await conn.close()
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        after = (await sdescribe(conn, "s"))[0]
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
            before.group_epoch,
            before.assignment_epoch,
            "Stable",
        )
        assert sorted((m.member_id, m.member_epoch, m.rack_id, m.assignment) for m in after.members) == sorted(
            (m.member_id, m.member_epoch, m.rack_id, m.assignment) for m in before.members
        )
        again = await conn.request(SHB, 1, shb("s", "b", b.member_epoch))
        assert (again.error_code, again.member_epoch) == (0, b.member_epoch)
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_acls_on_share_group_apis(server_factory):
    """With --authorizer, a group the ACLs name for someone else: GROUP_AUTHORIZATION_FAILED."""
    from coordinator.apis import build

    server = server_factory(*NO_BATCHING, "--authorizer")
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=1)
        r = await conn.request(CREATE_ACLS, 3, create_acls_body((GROUP, "g", "User:other", ALL)))
        assert r.results[0].error_code == 0

        async def call(api, v, **values):
            return await conn.request(api, v, build(request_class(api, v), values))

        def nested(api, v, entity, /, **values):
            return build(request_class(api, v, entity), values)

        assert (
            await call(SHB, 1, group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=("t",))
        ).error_code == 30
        assert (await sdescribe(conn, "g"))[0].error_code == 30
        assert (await sdescribe(conn, "open"))[0].error_code == 69  # not named by an ACL: open, and not there
        for api in (78, 79):
            r = await call(
                api,
                1,
                group_id="g",
                member_id="m",
                share_session_epoch=0,
                max_wait=MS0,
                min_bytes=1,
                max_bytes=1,
                max_records=1,
                batch_size=1,
                topics=(),
                forgotten_topics_data=(),
            )
            assert r.error_code == 30, (api, r)
        r = await call(
            90, 1, groups=(nested(90, 1, "DescribeShareGroupOffsetsRequestGroup", group_id="g", topics=None),)
        )
        assert r.groups[0].error_code == 30
        assert (await call(91, 0, group_id="g", topics=())).error_code == 30
        assert (await call(92, 0, group_id="g", topics=())).error_code == 30
        # READ on the topic too: a topic we may DESCRIBE (so subscribe to) but not READ is
        # TOPIC_AUTHORIZATION_FAILED for its partitions, the others served.
        await conn.create_topics("secret", partitions=1)
        acls = [(TOPIC, "secret", "User:other", ALL), (TOPIC, "secret", "User:ANONYMOUS", DESCRIBE_ACL)]
        r = await conn.request(CREATE_ACLS, 3, create_acls_body(*acls))
        assert [x.error_code for x in r.results] == [0, 0]
        hb = await share_join(conn, "open", "m", ("t", "secret"))
        ids = {t.topic_id for t in hb.assignment.topic_partitions}
        assert len(ids) == 2
        FT, FP = request_class(78, 1, "FetchTopic"), request_class(78, 1, "FetchPartition")
        r = await call(
            78,
            1,
            group_id="open",
            member_id="m",
            share_session_epoch=0,
            max_wait=MS0,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=10,
            batch_size=10,
            forgotten_topics_data=(),
            topics=tuple(
                FT(topic_id=i, partitions=(FP(partition_index=0, acknowledgement_batches=()),)) for i in sorted(ids)
            ),
        )
        errors = sorted(p.error_code for t in r.responses for p in t.partitions)
        assert r.error_code == 0 and errors == [0, 29]  # TOPIC_AUTHORIZATION_FAILED for `secret` only
    finally:
        await conn.close()


async def test_topic_acls_on_share_heartbeat_and_offsets(server_factory):
    """Kafka's topic checks: DESCRIBE on each subscribed topic for ShareGroupHeartbeat (else
    TOPIC_AUTHORIZATION_FAILED for the whole heartbeat) and DescribeShareGroupOffsets (the topic
    answered with its partitions refused, or left out of an all-topics answer); READ on each
    topic for Alter/DeleteShareGroupOffsets (that topic refused, the others served)."""
    from coordinator.apis import build

    server = server_factory(*NO_BATCHING, "--authorizer")
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=1)
        await conn.create_topics("secret", partitions=1)

        async def call(api, v, **values):
            return await conn.request(api, v, build(request_class(api, v), values))

        def nested(api, v, entity, /, **values):
            return build(request_class(api, v, entity), values)

        def alter_topic(name):
            return nested(
                91,
                0,
                "AlterShareGroupOffsetsRequestTopic",
                topic_name=name,
                partitions=(
                    nested(91, 0, "AlterShareGroupOffsetsRequestPartition", partition_index=0, start_offset=0),
                ),
            )

        def describe(topics):
            return call(
                90, 1, groups=(nested(90, 1, "DescribeShareGroupOffsetsRequestGroup", group_id="g", topics=topics),)
            )

        def dtopic(name):
            return nested(90, 1, "DescribeShareGroupOffsetsRequestTopic", topic_name=name, partitions=(0,))

        # both share-partitions get state while nothing is refused
        r = await call(91, 0, group_id="g", topics=(alter_topic("t"), alter_topic("secret")))
        assert [p.error_code for t in r.responses for p in t.partitions] == [0, 0]
        r = await conn.request(CREATE_ACLS, 3, create_acls_body((TOPIC, "secret", "User:other", ALL)))
        assert r.results[0].error_code == 0

        hb = await call(SHB, 1, group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=("t", "secret"))
        assert (hb.error_code, hb.error_message, hb.member_epoch, hb.assignment) == (29, None, 0, None)
        assert (await sdescribe(conn, "g"))[0].error_code == 69  # the refused join left nothing

        r = await describe((dtopic("secret"), dtopic("t")))
        g = r.groups[0]
        assert g.error_code == 0 and [t.topic_name for t in g.topics] == ["t", "secret"]
        assert [(p.error_code, p.start_offset) for p in g.topics[0].partitions] == [(0, 0)]
        secret = g.topics[1]
        assert secret.topic_id is None  # Uuid.ZERO_UUID (kio reads the zero UUID as None)
        assert [(p.error_code, p.start_offset, p.error_message) for p in secret.partitions] == [
            (29, -1, "Topic authorization failed.")
        ]
        r = await describe(None)
        assert [t.topic_name for t in r.groups[0].topics] == ["t"]
        # a group it may not describe: GROUP_AUTHORIZATION_FAILED in its place, the others served
        r = await conn.request(CREATE_ACLS, 3, create_acls_body((GROUP, "gx", "User:other", ALL)))
        assert r.results[0].error_code == 0
        group = functools.partial(nested, 90, 1, "DescribeShareGroupOffsetsRequestGroup")
        # (each entry answered alone, as Kafka does, a group named twice too)
        asked = (("gx", None), ("g", (dtopic("secret"),)), ("g", (dtopic("t"),)))
        r = await call(90, 1, groups=tuple(group(group_id=g, topics=topics) for g, topics in asked))
        assert [
            (g.group_id, g.error_code, [(t.topic_name, t.partitions[0].error_code) for t in g.topics]) for g in r.groups
        ] == [
            ("gx", 30, []),
            ("g", 0, [("secret", 29)]),
            ("g", 0, [("t", 0)]),
        ]

        r = await call(91, 0, group_id="g", topics=(alter_topic("t"), alter_topic("secret")))
        assert r.error_code == 0
        assert [(t.topic_name, [p.error_code for p in t.partitions]) for t in r.responses] == [
            ("secret", [29]),
            ("t", [0]),
        ]
        D = request_class(92, 0, "DeleteShareGroupOffsetsRequestTopic")
        r = await call(92, 0, group_id="g", topics=(D(topic_name="t"), D(topic_name="secret")))
        assert r.error_code == 0
        assert [(t.topic_name, t.error_code) for t in r.responses] == [("secret", 29), ("t", 0)]

        hb = await call(SHB, 1, group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=("t",))
        assert hb.error_code == 0 and hb.member_epoch > 0
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


def _state_records(server, group):
    """The group's ShareGroupStatePartitionMetadata records in `__consumer_offsets`, in log
    order, as (initializing, initialized, deleting) with topic names (None: a tombstone)."""
    import pathlib

    from coordinator.log.offsets import partition_for
    from protocol import share_records as SR
    from protocol.group_records import decode_record
    from protocol.record_batch import iter_batch_records, parse_header

    out = []
    directory = pathlib.Path(server.data_dir) / f"__consumer_offsets-{partition_for(group, 50)}"
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos < len(data):
            header = parse_header(data, pos)
            for rec in iter_batch_records(data[pos : pos + header.size], header):
                if header.is_control:
                    break
                key, value = decode_record(rec.key, rec.value)
                if type(key) is SR.ShareGroupStatePartitionMetadataKey and key.group == group:
                    out.append(
                        None
                        if value is None
                        else (
                            sorted((n, ps) for _, n, ps in value.initializing_topics),
                            sorted((n, ps) for _, n, ps in value.initialized_topics),
                            sorted(n for _, n in value.deleting_topics),
                        )
                    )
            pos += header.size
    return out


async def test_state_partition_metadata_record(server):
    """Record type 15, ShareGroupStatePartitionMetadata, as Kafka writes it: the subscribed
    topics' partitions initialized at the heartbeat that first sees them (and again when a
    topic grows) and by AlterShareGroupOffsets, a topic whose offsets are deleted or which is
    deleted leaves it, a restart replays it, and DeleteGroups leaves a tombstone."""
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=2)
        await conn.create_topics("u", partitions=1)
        a = await conn.request(SHB, 1, shb("s", "a", 0, ["t"]))
        assert a.error_code == 0
        # Initializing with the heartbeat, initialized once that is written (the next
        # heartbeat finds them so).
        a = await conn.request(SHB, 1, shb("s", "a", a.member_epoch))
        assert _state_records(server, "s") == [([("t", (0, 1))], [], []), ([], [("t", (0, 1))], [])]
        a = await conn.request(SHB, 1, shb("s", "a", a.member_epoch))  # nothing new: nothing written
        assert len(_state_records(server, "s")) == 2
        a = await conn.request(SHB, 1, shb("s", "a", a.member_epoch, ["t", "u"]))
        a = await conn.request(SHB, 1, shb("s", "a", a.member_epoch))
        assert _state_records(server, "s")[-2:] == [
            ([("u", (0,))], [("t", (0, 1))], []),
            ([], [("t", (0, 1)), ("u", (0,))], []),
        ]
        r = await conn.request(
            37,
            3,
            request_class(37, 3)(
                topics=(request_class(37, 3, "CreatePartitionsTopic")(name="t", count=3, assignments=None),),
                timeout=datetime.timedelta(seconds=5),
                validate_only=False,
            ),
        )
        assert r.results[0].error_code == 0
        a = await conn.request(SHB, 1, shb("s", "a", a.member_epoch))
        a = await conn.request(SHB, 1, shb("s", "a", a.member_epoch))
        assert _state_records(server, "s")[-2:] == [
            ([("t", (2,))], [("t", (0, 1)), ("u", (0,))], []),
            ([], [("t", (0, 1, 2)), ("u", (0,))], []),
        ]
        assert (await conn.request(SHB, 1, shb("s", "a", -1))).error_code == 0
        D = request_class(92, 0, "DeleteShareGroupOffsetsRequestTopic")
        r = await conn.request(92, 0, request_class(92, 0)(group_id="s", topics=(D(topic_name="t"),)))
        assert r.error_code == 0 and r.responses[0].error_code == 0
        assert _state_records(server, "s")[-1] == ([], [("u", (0,))], [])
        # AlterShareGroupOffsets initializes what it alters
        T, P = (
            request_class(91, 0, "AlterShareGroupOffsetsRequestTopic"),
            request_class(91, 0, "AlterShareGroupOffsetsRequestPartition"),
        )
        r = await conn.request(
            91,
            0,
            request_class(91, 0)(
                group_id="s", topics=(T(topic_name="t", partitions=(P(partition_index=1, start_offset=0),)),)
            ),
        )
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
        assert _state_records(server, "s")[-1] == ([], [("t", (1,)), ("u", (0,))], [])
    finally:
        await conn.close()
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        written = len(_state_records(server, "s"))
        b = await conn.request(SHB, 1, shb("s", "b", 0, ["u"]))  # u is initialized: no new record
        assert b.error_code == 0 and len(_state_records(server, "s")) == written
        b = await conn.request(SHB, 1, shb("s", "b", b.member_epoch, ["t", "u"]))
        b = await conn.request(SHB, 1, shb("s", "b", b.member_epoch))
        assert _state_records(server, "s")[-2:] == [
            ([("t", (0, 2))], [("t", (1,)), ("u", (0,))], []),
            ([], [("t", (0, 1, 2)), ("u", (0,))], []),
        ]
        # a deleted topic leaves the record (Kafka's maybeCleanupShareGroupState)
        r = await conn.request(
            20,
            6,
            request_class(20, 6)(
                topics=(request_class(20, 6, "DeleteTopicState")(name="u", topic_id=None),),
                timeout=datetime.timedelta(seconds=5),
            ),
        )
        assert r.responses[0].error_code == 0
        b = await conn.request(SHB, 1, shb("s", "b", b.member_epoch))
        assert b.error_code == 0
        assert _state_records(server, "s")[-1] == ([], [("t", (0, 1, 2))], [])
        assert (await conn.request(SHB, 1, shb("s", "b", -1))).error_code == 0
        r = await conn.request(42, 2, request_class(42, 2)(groups_names=("s",)))
        assert r.results[0].error_code == 0
        assert _state_records(server, "s")[-1] is None
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_mixed_subscriptions_assigned_topic_by_topic(server):
    """Kafka's heterogeneous SimpleAssignor over the wire: t (2 partitions) read by a, b and c,
    u (1 partition) by c alone: u's partition is c's, and each of t's partitions goes to
    ceil(3 / 2) = 2 of t's three readers."""
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=2)
        await conn.create_topics("u", partitions=1)
        epochs = {}
        for m, topics in (("a", ["t"]), ("b", ["t"]), ("c", ["t", "u"])):
            r = await conn.request(SHB, 1, shb("mix", m, 0, topics))
            assert r.error_code == 0
            epochs[m] = r.member_epoch
        for m in "abc":  # each moves to the latest target at its next heartbeat
            r = await conn.request(SHB, 1, shb("mix", m, epochs[m]))
            assert r.error_code == 0
        described = (await sdescribe(conn, "mix"))[0]
        names = {}
        for member in described.members:
            names[member.member_id] = {
                (t.topic_name, p) for t in member.assignment.topic_partitions for p in t.partitions
            }
        assert ("u", 0) in names["c"] and all(n == "t" for m in "ab" for n, _ in names[m])
        assert [sum(("t", p) in names[m] for m in "abc") for p in (0, 1)] == [2, 2]
    finally:
        await conn.close()
