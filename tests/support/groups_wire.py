"""Classic group requests over the raw wire client: JoinGroup, SyncGroup, Heartbeat, OffsetCommit bodies, a formed group."""

from __future__ import annotations

import datetime

from tests.support.wire_client import request_class

JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, DELETE = 11, 12, 13, 14, 15, 16, 42


COMMIT, FETCH, OFFSET_DELETE = 8, 9, 47


SUB_T = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # consumer subscription v0 to topic "t"


S10, S30 = datetime.timedelta(seconds=10), datetime.timedelta(seconds=30)


def cls(api, v, name=None):
    return request_class(api, v, name)


def join_body(v, group, member_id="", protocols=(("range", SUB_T),), ptype="consumer", session=S10, instance=None):
    P = cls(JOIN, v, "JoinGroupRequestProtocol")
    kw = dict(
        group_id=group,
        session_timeout=session,
        member_id=member_id,
        protocol_type=ptype,
        protocols=tuple(P(name=n, metadata=m) for n, m in protocols),
    )
    if v >= 1:
        kw["rebalance_timeout"] = S30
    if v >= 5:
        kw["group_instance_id"] = instance
    if v >= 8:
        kw["reason"] = "test"
    return cls(JOIN, v)(**kw)


def sync_body(v, group, member, generation, assignments=()):
    A = cls(SYNC, v, "SyncGroupRequestAssignment")
    kw = dict(
        group_id=group,
        generation_id=generation,
        member_id=member,
        assignments=tuple(A(member_id=m, assignment=a) for m, a in assignments),
    )
    if v >= 3:
        kw["group_instance_id"] = None
    if v >= 5:
        kw["protocol_type"] = "consumer"
        kw["protocol_name"] = "range"
    return cls(SYNC, v)(**kw)


def hb_body(v, group, member, generation):
    kw = dict(group_id=group, generation_id=generation, member_id=member)
    if v >= 3:
        kw["group_instance_id"] = None
    return cls(HEARTBEAT, v)(**kw)


async def form(conn, group, v_join=5, v_sync=3):
    first = await conn.request(JOIN, v_join, join_body(v_join, group))
    member = first.member_id
    if first.error_code == 79:
        joined = await conn.request(JOIN, v_join, join_body(v_join, group, member))
    else:
        joined = first
    assert joined.error_code == 0
    synced = await conn.request(
        SYNC,
        v_sync,
        sync_body(v_sync, group, joined.member_id, joined.generation_id, [(joined.member_id, b"assignment")]),
    )
    assert synced.error_code == 0 and synced.assignment == b"assignment"
    return joined.member_id, joined.generation_id


def commit_body(v, group, member, gen, offsets):
    T, P = cls(COMMIT, v, "OffsetCommitRequestTopic"), cls(COMMIT, v, "OffsetCommitRequestPartition")
    topics = {}
    for topic, p, off in offsets:
        kw = dict(partition_index=p, committed_offset=off, committed_metadata="m")
        if v >= 6:
            kw["committed_leader_epoch"] = 4
        topics.setdefault(topic, []).append(P(**kw))
    kw = dict(
        group_id=group,
        generation_id_or_member_epoch=gen,
        member_id=member,
        topics=tuple(T(name=t, partitions=tuple(ps)) for t, ps in topics.items()),
    )
    if 2 <= v <= 4:
        kw["retention_time"] = datetime.timedelta(milliseconds=-1)
    if v >= 7:
        kw["group_instance_id"] = None
    return cls(COMMIT, v)(**kw)
