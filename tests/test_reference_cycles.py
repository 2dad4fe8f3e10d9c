"""Requests leave no reference cycles behind: what a request allocates is freed by reference
counting as soon as it is answered, never left for the cycle collector.

A cycle through one request's objects keeps all of them (its records, its decoded body, its
answer) alive until a collection, and every collection then walks them: the compiled build's
closures made such a cycle on every OffsetCommit (a closure's environment holding the result
that held the closure), about a tenth of the commit's CPU. The check runs on whichever build
the suite runs (CI: the compiled build, then the pure-Python fallback).
"""

from __future__ import annotations

import datetime
import gc
from collections import Counter

from tests.support.consumer_groups import HB, hb
from tests.support.wire_client import WireClient, request_class

JOIN, SYNC, LEAVE, HEARTBEAT, COMMIT, FETCH_OFFSETS = 11, 14, 13, 12, 8, 9
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # consumer protocol v0, topic "t"


def body(api_key: int, version: int, nested: str | None = None, **fields: object) -> object:
    return request_class(api_key, version, nested)(**fields)


async def classic_cycle(c: WireClient, group: str) -> None:
    """JoinGroup (MEMBER_ID_REQUIRED, then joined), SyncGroup, Heartbeat, a member's
    OffsetCommit, OffsetFetch, LeaveGroup."""
    join = {
        "group_id": group,
        "session_timeout": datetime.timedelta(seconds=30),
        "rebalance_timeout": datetime.timedelta(seconds=60),
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": (body(JOIN, 5, "JoinGroupRequestProtocol", name="range", metadata=SUBSCRIPTION),),
    }
    first = await c.request(JOIN, 5, body(JOIN, 5, member_id="", **join))
    joined = await c.request(JOIN, 5, body(JOIN, 5, member_id=first.member_id, **join))
    member, generation = joined.member_id, joined.generation_id
    assign = body(SYNC, 3, "SyncGroupRequestAssignment", member_id=member, assignment=b"")
    synced = await c.request(
        SYNC,
        3,
        body(
            SYNC,
            3,
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
            assignments=(assign,),
        ),
    )
    beat = await c.request(
        HEARTBEAT,
        3,
        body(HEARTBEAT, 3, group_id=group, generation_id=generation, member_id=member, group_instance_id=None),
    )
    committed = await commit(c, group, member, generation)
    fetched = await c.request(
        FETCH_OFFSETS, 7, body(FETCH_OFFSETS, 7, group_id=group, topics=None, require_stable=True)
    )
    left = await c.request(
        LEAVE,
        3,
        body(
            LEAVE,
            3,
            group_id=group,
            members=(body(LEAVE, 3, "MemberIdentity", member_id=member, group_instance_id=None),),
        ),
    )
    errors = (
        first.error_code,
        joined.error_code,
        synced.error_code,
        beat.error_code,
        committed,
        fetched.error_code,
        left.error_code,
    )
    assert errors == (79, 0, 0, 0, 0, 0, 0)


async def commit(c: WireClient, group: str, member: str = "", generation: int = -1) -> int:
    partitions = tuple(
        body(
            COMMIT,
            8,
            "OffsetCommitRequestPartition",
            partition_index=p,
            committed_offset=42,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        for p in range(4)
    )
    r = await c.request(
        COMMIT,
        8,
        body(
            COMMIT,
            8,
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member,
            group_instance_id=None,
            topics=(body(COMMIT, 8, "OffsetCommitRequestTopic", name="t", partitions=partitions),),
        ),
    )
    return max(p.error_code for t in r.topics for p in t.partitions)


async def consumer_cycle(c: WireClient, group: str, member: str) -> None:
    """A KIP-848 member joins, heartbeats and leaves."""
    joined = await c.request(HB, 1, hb(group, member, 0, ["t"], owned=()))
    beat = await c.request(HB, 1, hb(group, member, joined.member_epoch, owned=None))
    left = await c.request(HB, 1, hb(group, member, -1, owned=None))
    assert (joined.error_code, beat.error_code, left.error_code) == (0, 0, 0)


async def test_group_requests_leave_no_reference_cycles(server_factory):
    s = server_factory("--group-initial-rebalance-delay-ms", "0")
    c = await WireClient("cycles").connect("127.0.0.1", s.port)
    await c.create_topics("t", partitions=4)
    for i in range(3):  # warm-up: what a first request builds once (caches, the groups) is not a leak
        await classic_cycle(c, f"g{i}")
        await consumer_cycle(c, f"kip848-{i}", f"m{i}")
        assert await commit(c, f"standalone-{i}") == 0
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds unreachable is kept in gc.garbage
    try:
        for i in range(20):
            await classic_cycle(c, f"g{i % 3}")
            await consumer_cycle(c, f"kip848-{i % 3}", f"m{i}")
            assert await commit(c, f"standalone-{i % 3}") == 0
        gc.collect()
        ours = Counter(
            type(o).__qualname__ for o in gc.garbage if type(o).__module__.split(".")[0] in ("coordinator", "protocol")
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        await c.close()
    assert not ours, f"requests left reference cycles through: {ours.most_common(10)}"
