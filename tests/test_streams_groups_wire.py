"""KIP-1071 streams groups over raw frames: StreamsGroupHeartbeat / StreamsGroupDescribe v0-1 as
Kafka 4.4 answers them: bad input refused with Kafka's error codes and nothing kept, the
internal topics created by the coordinator, reconciliation, the IQ endpoints, describe, the
boundary with the other group types and the offset APIs, and a restart bringing the group back."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from tests.support.groups_wire import (
    COMMIT,
    DELETE,
    DESCRIBE,
    FETCH,
    HEARTBEAT,
    JOIN,
    LIST,
    SYNC,
    commit_body,
    hb_body,
    join_body,
    sync_body,
)
from tests.support.streams import (
    NO_DELAY,
    SDESCRIBE,
    SHB,
    active_of,
    describe_body,
    shb,
    subtopology,
    topic_info,
    topology,
    word_count,
)
from tests.support.wire_client import WireClient, request_class

CG_HB = 68
INVALID_REQUEST, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH = 42, 69, 25, 110
STREAMS_INVALID_TOPOLOGY, STALE_MEMBER_EPOCH, NON_EMPTY_GROUP = 130, 113, 68
INCONSISTENT_GROUP_PROTOCOL = 23


@pytest.fixture
def server(server_factory):
    # (no warm-up tasks: a task moves once revoked, the reconciliation these cases follow;
    # tests/test_streams_groups.py has warm-ups)
    return server_factory(*NO_DELAY, "--group-streams-num-warmup-replicas", "0")


async def sdescribe(conn, *groups, v=1, **kw):
    return (await conn.request(SDESCRIBE, v, describe_body(*groups, v=v, **kw))).groups


async def test_advertised_and_request_validation(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        keys = await conn.api_versions()
        assert keys[SHB] == (0, 1) and keys[SDESCRIBE] == (0, 1)
        await conn.create_topics("words", partitions=2)
        wc = word_count()
        bad_changelog = topology(subtopology("0", sources=("words",), changelogs=(topic_info("c", 3),)))
        regex = topology(subtopology("0", regex=("w.*",)))
        cases = [
            (shb("", "m", 0, wc), INVALID_REQUEST, "GroupId can't be empty."),
            (shb("g", "", 0, wc), INVALID_REQUEST, "MemberId can't be empty."),
            (shb("g", "m", 0, wc, instance_id=""), INVALID_REQUEST, "InstanceId can't be empty."),
            (shb("g", "m", 0, wc, rack_id=""), INVALID_REQUEST, "RackId can't be empty."),
            (shb("g", "m", 0, wc, rebalance_timeout_ms=-1), INVALID_REQUEST, None),
            (shb("g", "m", 0, wc, active={"0": [0]}), INVALID_REQUEST, "ActiveTasks must be empty when (re-)joining."),
            (shb("g", "m", 0, None), INVALID_REQUEST, "Topology must be non-null when (re-)joining."),
            (
                shb("g", "m", 0, bad_changelog),
                STREAMS_INVALID_TOPOLOGY,
                "Changelog topic c must have an undefined partition count, but it is set to 3.",
            ),
            (shb("g", "m", 0, regex), INVALID_REQUEST, "Regular expressions for source topics are not supported yet."),
            (shb("g", "m", -3), INVALID_REQUEST, "MemberEpoch is -3, but must be greater than or equal to -2."),
            (shb("g", "m", -2), INVALID_REQUEST, "InstanceId can't be null."),
            (shb("g", "m", 1, wc), INVALID_REQUEST, "Topology can only be provided when (re-)joining."),
            (shb("g", "m", 3), GROUP_ID_NOT_FOUND, "Streams group g not found."),
            (shb("g", "m", -1), GROUP_ID_NOT_FOUND, None),
        ]
        await conn.expect_errors(SHB, 1, cases)
        one_list = shb("g", "m", 1)
        one_list = type(one_list)(**{**_fields(one_list), "active_tasks": ()})
        await conn.expect_errors(
            SHB, 0, [(one_list, INVALID_REQUEST, "If one task-type is non-null, all must be non-null.")]
        )
        g = (await sdescribe(conn, "g"))[0]
        assert (g.error_code, g.error_message) == (GROUP_ID_NOT_FOUND, "Group g not found.")  # nothing was kept
    finally:
        await conn.close()


def _fields(body):
    import dataclasses

    return {f.name: getattr(body, f.name) for f in dataclasses.fields(body)}


async def test_word_count_group_life_cycle(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("words", partitions=2)
        a = await conn.request(SHB, 1, shb("app", "a", 0, word_count(), endpoint=("host-a", 7001)))
        assert (a.error_code, a.member_epoch) == (0, 2)  # (a streams group starts at epoch 1, as Kafka's)
        assert [(s.status_code, s.status_detail) for s in a.status] == [
            (
                3,
                "Internal topics are missing: app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog, "
                "app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition",
            )
        ]
        assert a.acceptable_recovery_lag == 10000 and a.task_offset_interval.total_seconds() == 60
        # the coordinator creates them (the changelog compacted), as the member waits
        for _ in range(100):
            a = await conn.request(SHB, 1, shb("app", "a", a.member_epoch, active={}))
            if not a.status:
                break
            await asyncio.sleep(0.02)
        assert a.status == () and active_of(a) == {"0": [0, 1], "1": [0, 1]}
        meta = await conn.request(
            3,
            12,
            request_class(3, 12)(
                topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            ),
        )
        parts = {t.name: len(t.partitions) for t in meta.topics}
        assert parts["app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"] == 2
        assert parts["app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"] == 2
        # the IQ endpoints: a's source partitions (repartition sources included)
        assert a.endpoint_information_epoch >= 1
        (ep,) = a.partitions_by_user_endpoint
        assert (ep.user_endpoint.host, ep.user_endpoint.port) == ("host-a", 7001)
        assert {t.topic: list(t.partitions) for t in ep.active_partitions} == {
            "words": [0, 1],
            "app-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition": [0, 1],
        }
        # a v0 member joins: b waits for what a still owns; a revokes, then b gets it
        b = await conn.request(SHB, 0, shb("app", "b", 0, word_count(), v=0))
        assert b.error_code == 0 and active_of(b) == {}
        epoch = b.member_epoch
        a = await conn.request(SHB, 1, shb("app", "a", a.member_epoch, active={"0": [0, 1], "1": [0, 1]}))
        keep = active_of(a)
        assert a.member_epoch < epoch and sum(map(len, keep.values())) == 2
        a = await conn.request(SHB, 1, shb("app", "a", a.member_epoch, active=keep))
        assert a.member_epoch == epoch
        b = await conn.request(SHB, 0, shb("app", "b", epoch, active={}, v=0))
        got_b = active_of(b)
        assert sum(map(len, got_b.values())) == 2
        for s in "01":
            assert set(keep.get(s, [])) | set(got_b.get(s, [])) == {0, 1}
        # wrong epochs and unknown members: Kafka's errors
        assert (await conn.request(SHB, 1, shb("app", "a", epoch + 5, active=keep))).error_code == FENCED_MEMBER_EPOCH
        assert (await conn.request(SHB, 1, shb("app", "zz", epoch, active={}))).error_code == UNKNOWN_MEMBER_ID
        # describe, both versions
        (g,) = await sdescribe(conn, "app", include_topology_description=True)
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (0, "Stable", epoch, epoch)
        assert (g.assignor_name, g.topology_description_status, g.topology_description) == ("sticky", 1, None)
        assert g.topology.epoch == 1 and [s.subtopology_id for s in g.topology.subtopologies] == ["0", "1"]
        assert g.topology.subtopologies[1].state_changelog_topics[0].partitions == 2
        members = {m.member_id: m for m in g.members}
        assert members["a"].user_endpoint.port == 7001 and members["b"].process_id == "process-b"
        (g0,) = await sdescribe(conn, "app", v=0)
        assert g0.group_state == "Stable" and len(g0.members) == 2
        # ListGroups: type streams
        listed = await conn.request(LIST, 5, request_class(LIST, 5)(states_filter=(), types_filter=("streams",)))
        assert [(x.group_id, x.group_type, x.protocol_type, x.group_state) for x in listed.groups] == [
            ("app", "streams", "streams", "Stable")
        ]
        # DescribeGroups on the streams group's id: not a classic group
        d = (
            await conn.request(
                DESCRIBE, 5, request_class(DESCRIBE, 5)(groups=("app",), include_authorized_operations=False)
            )
        ).groups[0]
        assert (d.error_code, d.group_state) == (GROUP_ID_NOT_FOUND, "Dead")
        # a consumer heartbeat on its id
        cg = request_class(CG_HB, 1)(
            group_id="app",
            member_id="c",
            member_epoch=0,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=("words",),
            topic_partitions=(),
        )
        assert (await conn.request(CG_HB, 1, cg)).error_code == GROUP_ID_NOT_FOUND
        # classic calls on its id: refused as Kafka refuses them on a group of another type,
        # never taken for a consumer group's migration
        assert (await conn.request(JOIN, 5, join_body(5, "app"))).error_code == INCONSISTENT_GROUP_PROTOCOL
        assert (await conn.request(SYNC, 3, sync_body(3, "app", "a", 1))).error_code == UNKNOWN_MEMBER_ID
        assert (await conn.request(HEARTBEAT, 3, hb_body(3, "app", "a", 1))).error_code == UNKNOWN_MEMBER_ID
        # offsets: a member commits with its epoch (v9+), a newer one is stale
        ok = await conn.request(COMMIT, 9, commit_body(9, "app", "a", epoch, [("words", 0, 5)]))
        assert ok.topics[0].partitions[0].error_code == 0
        stale = await conn.request(COMMIT, 9, commit_body(9, "app", "a", epoch + 3, [("words", 0, 6)]))
        assert stale.topics[0].partitions[0].error_code == STALE_MEMBER_EPOCH
        # DeleteGroups refuses a group with members
        dg = await conn.request(DELETE, 2, request_class(DELETE, 2)(groups_names=("app",)))
        assert dg.results[0].error_code == NON_EMPTY_GROUP
    finally:
        await conn.close()
    # a restart brings the group back: members, epochs, tasks; the offsets too
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        (g,) = await sdescribe(conn, "app")
        assert (g.group_state, g.group_epoch) == ("Stable", epoch) and {m.member_id for m in g.members} == {"a", "b"}
        a = await conn.request(SHB, 1, shb("app", "a", epoch, active=keep))
        assert a.error_code == 0 and a.member_epoch == epoch
        for m in ("a", "b"):
            assert (await conn.request(SHB, 1, shb("app", m, -1))).member_epoch == -1
        (g,) = await sdescribe(conn, "app")
        assert g.group_state == "Empty"
        fetch = await conn.request(
            FETCH,
            8,
            request_class(FETCH, 8)(
                groups=(request_class(FETCH, 8, "OffsetFetchRequestGroup")(group_id="app", topics=None),),
                require_stable=False,
            ),
        )
        assert [(t.name, p.committed_offset) for t in fetch.groups[0].topics for p in t.partitions] == [("words", 5)]
        dg = await conn.request(DELETE, 2, request_class(DELETE, 2)(groups_names=("app",)))
        assert dg.results[0].error_code == 0
        (g,) = await sdescribe(conn, "app")
        assert g.error_code == GROUP_ID_NOT_FOUND
    finally:
        await conn.close()
