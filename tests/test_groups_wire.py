"""Group APIs over real sockets: versions, exact error codes, bad input."""

from __future__ import annotations

import datetime

import pytest

from tests.support.groups_wire import (
    COMMIT,
    DELETE,
    DESCRIBE,
    FETCH,
    HEARTBEAT,
    JOIN,
    LEAVE,
    LIST,
    OFFSET_DELETE,
    SUB_T,
    SYNC,
    cls,
    commit_body,
    form,
    hb_body,
    join_body,
    sync_body,
)

from tests.support.wire_client import WireClient

INT32_MIN = -(2**31)


@pytest.fixture
async def conn(server):
    c = await WireClient("wire-test").connect("127.0.0.1", server.port)
    yield c
    await c.close()


@pytest.mark.parametrize("v", range(0, 10))
async def test_join_every_version(conn, v):
    r = await conn.request(JOIN, v, join_body(v, f"g-v{v}"))
    if v >= 4:
        assert r.error_code == 79 and r.member_id  # MEMBER_ID_REQUIRED with the id to use
        r = await conn.request(JOIN, v, join_body(v, f"g-v{v}", r.member_id))
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert r.member_id.startswith("wire-test-")
    assert [m.member_id for m in r.members] == [r.member_id]
    assert r.members[0].metadata == SUB_T


@pytest.mark.parametrize("v", range(0, 6))
async def test_sync_and_heartbeat_every_version(conn, v):
    member, gen = await form(conn, f"g-sync-{v}", v_sync=v)
    hb_v = min(v, 4)
    assert (await conn.request(HEARTBEAT, hb_v, hb_body(hb_v, f"g-sync-{v}", member, gen))).error_code == 0
    assert (await conn.request(HEARTBEAT, hb_v, hb_body(hb_v, f"g-sync-{v}", member, gen + 1))).error_code == 22


async def test_bad_join_input(conn):
    assert (await conn.request(JOIN, 5, join_body(5, ""))).error_code == 24  # INVALID_GROUP_ID
    tiny = datetime.timedelta(milliseconds=1)
    huge = datetime.timedelta(days=20)
    assert (await conn.request(JOIN, 5, join_body(5, "g", session=tiny))).error_code == 26
    assert (await conn.request(JOIN, 5, join_body(5, "g", session=huge))).error_code == 26
    assert (await conn.request(JOIN, 5, join_body(5, "g", ptype=""))).error_code == 23
    assert (await conn.request(JOIN, 5, join_body(5, "g", protocols=()))).error_code == 23
    assert (await conn.request(JOIN, 5, join_body(5, "g", member_id="nobody"))).error_code == 25
    # 10k protocols: accepted, the first one chosen.
    many = tuple((f"p{i}", b"") for i in range(10_000))
    r = await conn.request(JOIN, 3, join_body(3, "g-many", protocols=many))
    assert r.error_code == 0 and r.protocol_name == "p0"
    # Another protocol type for an existing group.
    assert (await conn.request(JOIN, 3, join_body(3, "g-many", ptype="connect", protocols=many))).error_code == 23


async def test_sync_with_unknown_members_and_dead_group(conn):
    member, gen = await form(conn, "g-x")
    # A leader's assignment for members that do not exist is ignored.
    r = await conn.request(JOIN, 5, join_body(5, "g-x", member))
    assert r.generation_id == gen + 1  # a Stable leader rejoining always rebalances
    r = await conn.request(
        SYNC, 3, sync_body(3, "g-x", member, r.generation_id, [(member, b"mine"), ("ghost", b"nothing")])
    )
    assert r.error_code == 0 and r.assignment == b"mine"
    # Leave, delete, then heartbeat and sync the dead group.
    L = cls(LEAVE, 3, "MemberIdentity")
    r = await conn.request(
        LEAVE, 3, cls(LEAVE, 3)(group_id="g-x", members=(L(member_id=member, group_instance_id=None),))
    )
    assert r.error_code == 0 and [m.error_code for m in r.members] == [0]
    r = await conn.request(DELETE, 2, cls(DELETE, 2)(groups_names=("g-x", "never-existed")))
    assert [(x.group_id, x.error_code) for x in r.results] == [("g-x", 0), ("never-existed", 69)]
    assert (await conn.request(HEARTBEAT, 4, hb_body(4, "g-x", member, gen))).error_code == 25
    assert (await conn.request(SYNC, 5, sync_body(5, "g-x", member, gen))).error_code == 25


async def test_leave_versions(conn):
    m0, _ = await form(conn, "g-leave0")
    r = await conn.request(LEAVE, 0, cls(LEAVE, 0)(group_id="g-leave0", member_id=m0))
    assert r.error_code == 0
    r = await conn.request(LEAVE, 0, cls(LEAVE, 0)(group_id="g-leave0", member_id=m0))
    assert r.error_code == 25
    m5, _ = await form(conn, "g-leave5")
    L = cls(LEAVE, 5, "MemberIdentity")
    r = await conn.request(
        LEAVE,
        5,
        cls(LEAVE, 5)(
            group_id="g-leave5",
            members=(
                L(member_id=m5, group_instance_id=None, reason="bye"),
                L(member_id="ghost", group_instance_id=None, reason=None),
                L(member_id="", group_instance_id="no-such-instance", reason=None),
            ),
        ),
    )
    assert [m.error_code for m in r.members] == [0, 25, 25]


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("127.0.0.1", "/127.0.0.1"),
        ("::1", "/0:0:0:0:0:0:0:1"),  # Inet6Address.getHostAddress: eight groups, no "::"
        ("2001:db8::a0", "/2001:db8:0:0:0:0:0:a0"),
        ("::ffff:10.0.0.7", "/10.0.0.7"),  # Java's InetAddress makes it an Inet4Address
    ],
)
def test_member_host_is_written_as_java_inet_address(peer, host):
    from coordinator.apis import inet_address_string

    assert inet_address_string(peer) == host


async def test_describe_and_list(conn):
    member, gen = await form(conn, "g-desc")
    r = await conn.request(
        DESCRIBE, 5, cls(DESCRIBE, 5)(groups=("g-desc", "unknown"), include_authorized_operations=False)
    )
    g, unknown = r.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert g.authorized_operations == INT32_MIN
    (m,) = g.members
    # The host is Kafka's RequestContext.clientAddress.toString() (java.net.InetAddress): "/" first.
    assert (m.member_id, m.client_id, m.client_host) == (member, "wire-test", "/127.0.0.1")
    assert m.member_metadata == SUB_T and m.member_assignment == b"assignment"
    assert (unknown.error_code, unknown.group_state, unknown.members) == (0, "Dead", ())
    r = await conn.request(LIST, 4, cls(LIST, 4)(states_filter=("stable",)))
    assert [(x.group_id, x.group_state) for x in r.groups] == [("g-desc", "Stable")]
    r = await conn.request(LIST, 0, cls(LIST, 0)())
    assert [x.group_id for x in r.groups] == ["g-desc"]
    r = await conn.request(DELETE, 0, cls(DELETE, 0)(groups_names=("g-desc",)))
    assert r.results[0].error_code == 68  # NON_EMPTY_GROUP


@pytest.mark.parametrize("v", range(2, 10))
async def test_offset_commit_and_fetch_versions(server, conn, v):
    group = f"g-commit-{v}"
    await conn.create_topics("t")
    member, gen = await form(conn, group)
    r = await conn.request(COMMIT, v, commit_body(v, group, member, gen, [("t", 0, 10), ("t", 1, 20)]))
    assert [p.error_code for t in r.topics for p in t.partitions] == [0, 0]
    r = await conn.request(COMMIT, v, commit_body(v, group, member, gen + 1, [("t", 0, 11)]))
    assert r.topics[0].partitions[0].error_code == 22  # ILLEGAL_GENERATION
    fv = min(v, 7)
    FT = cls(FETCH, fv, "OffsetFetchRequestTopic")
    kw = dict(group_id=group, topics=(FT(name="t", partition_indexes=(0, 1, 2)),))
    if fv >= 7:
        kw["require_stable"] = True
    r = await conn.request(FETCH, fv, cls(FETCH, fv)(**kw))
    assert [(p.partition_index, p.committed_offset) for p in r.topics[0].partitions] == [(0, 10), (1, 20), (2, -1)]


async def test_offset_commit_to_unknown_topics_and_partitions(conn):
    """Kafka checks topics before the group: UNKNOWN_TOPIC_OR_PARTITION (3) for partitions
    of topics that do not exist, or beyond a topic's partition count; the group's error
    only for the others; nothing written for refused partitions."""
    await conn.create_topics("known", partitions=2)
    member, gen = await form(conn, "g-unknown")

    def errors(r):
        return [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]

    r = await conn.request(
        COMMIT,
        8,
        commit_body(8, "g-unknown", member, gen, [("known", 0, 5), ("known", 2, 5), ("known", -1, 5), ("nope", 0, 5)]),
    )
    # (as Kafka's OffsetCommitResponse.Builder: what KafkaApis refused first, a topic's together)
    assert errors(r) == [("known", 2, 3), ("known", -1, 3), ("known", 0, 0), ("nope", 0, 3)]
    # a wrong generation: the group's error for known partitions only
    r = await conn.request(COMMIT, 8, commit_body(8, "g-unknown", member, gen + 1, [("known", 1, 6), ("nope", 0, 6)]))
    assert errors(r) == [("nope", 0, 3), ("known", 1, 22)]
    # nothing known: the group is not even looked at (an empty group id included)
    for group in ("g-unknown", ""):
        r = await conn.request(COMMIT, 8, commit_body(8, group, "ghost", 99, [("nope", 0, 7)]))
        assert errors(r) == [("nope", 0, 3)]
    # __consumer_offsets exists, as in Kafka
    r = await conn.request(COMMIT, 2, commit_body(2, "g-internal", "", -1, [("__consumer_offsets", 0, 1)]))
    assert errors(r) == [("__consumer_offsets", 0, 0)]
    r = await conn.request(FETCH, 5, cls(FETCH, 5)(group_id="g-unknown", topics=None))
    assert sorted((t.name, p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions) == [
        ("known", 0, 5)
    ]
    # OffsetDelete: unknown partitions get 3 too; the group's own error is top-level only
    D, DT, DP = (
        cls(OFFSET_DELETE, 0),
        cls(OFFSET_DELETE, 0, "OffsetDeleteRequestTopic"),
        cls(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition"),
    )

    def delete_body(group):
        return D(
            group_id=group,
            topics=(
                DT(name="known", partitions=(DP(partition_index=0),)),
                DT(name="nope", partitions=(DP(partition_index=0),)),
            ),
        )

    await conn.request(
        LEAVE,
        3,
        cls(LEAVE, 3)(
            group_id="g-unknown", members=(cls(LEAVE, 3, "MemberIdentity")(member_id=member, group_instance_id=None),)
        ),
    )
    r = await conn.request(OFFSET_DELETE, 0, delete_body("g-unknown"))
    assert r.error_code == 0 and errors(r) == [("known", 0, 0), ("nope", 0, 3)]
    r = await conn.request(OFFSET_DELETE, 0, delete_body("no-such-group"))
    assert r.error_code == 69 and r.topics == ()  # GROUP_ID_NOT_FOUND


async def test_offset_fetch_all_and_batched(conn):
    await conn.create_topics("t", "u")
    for g in ("ga", "gb"):
        await conn.request(COMMIT, 2, commit_body(2, g, "", -1, [("t", 0, 5), ("u", 3, 7)]))
    # v2+: a null topic list means all partitions; the topics array must be there.
    r = await conn.request(FETCH, 5, cls(FETCH, 5)(group_id="ga", topics=None))
    assert r.error_code == 0
    assert sorted((t.name, p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions) == [
        ("t", 0, 5),
        ("u", 3, 7),
    ]
    G = cls(FETCH, 9, "OffsetFetchRequestGroup")
    r = await conn.request(
        FETCH,
        9,
        cls(FETCH, 9)(
            groups=(
                G(group_id="ga", member_id=None, member_epoch=-1, topics=None),
                G(group_id="gb", member_id=None, member_epoch=-1, topics=None),
                G(group_id="gc", member_id=None, member_epoch=-1, topics=None),
            ),
            require_stable=False,
        ),
    )
    assert [(g.group_id, len(g.topics), g.error_code) for g in r.groups] == [("ga", 2, 0), ("gb", 2, 0), ("gc", 0, 0)]


async def test_offset_delete(conn):
    await conn.create_topics("t", "other")
    member, gen = await form(conn, "g-od")
    await conn.request(COMMIT, 8, commit_body(8, "g-od", member, gen, [("t", 0, 1), ("other", 0, 2)]))
    T, P = cls(OFFSET_DELETE, 0, "OffsetDeleteRequestTopic"), cls(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition")
    r = await conn.request(
        OFFSET_DELETE,
        0,
        cls(OFFSET_DELETE, 0)(
            group_id="g-od",
            topics=(
                T(name="t", partitions=(P(partition_index=0),)),
                T(name="other", partitions=(P(partition_index=0),)),
            ),
        ),
    )
    assert r.error_code == 0
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [("t", 86), ("other", 0)]
    r = await conn.request(OFFSET_DELETE, 0, cls(OFFSET_DELETE, 0)(group_id="nope", topics=()))
    assert r.error_code == 69
