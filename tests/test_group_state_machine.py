"""Kafka's classic group state machine, driven directly with a manual clock (no sockets, no sleeps)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kio.schema.errors import ErrorCode as E

from coordinator.groups.classic.classic_group import ClassicGroup, JoinResult, SyncResult
from coordinator.groups.classic.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.shard import OffsetConfig
from coordinator.groups.state import GroupState as S
from coordinator.groups.state import IllegalStateTransition
from protocol.offset_commit import PartitionCommit as OffsetRequest
from tests.support.group_harness import MemoryLog, Operations, answered, commit_failed, new_runtime, settle

SESSION, REBALANCE = 10_000, 30_000


class Harness:
    def __init__(self, offsets: OffsetConfig | None = None, **config) -> None:
        self.clock = ManualClock()
        self.memory = MemoryLog(1)
        self.runtime = new_runtime(self.memory, self.clock, GroupConfig(**config), offsets)
        self.shard = self.runtime.shards[0]
        self.c = Operations(self.shard)

    @property
    def log(self) -> list:
        """Every durably "appended" record, in order."""
        return self.memory.records[0]

    async def commit(self, gid, gen, member, instance, parts, version=8) -> list[int]:
        result = self.shard.offset_manager.commit(gid, gen, member, instance, parts, -1, version)
        return await answered(self.shard, result, commit_failed(result))

    def fetch(self, gid, wanted):
        return self.shard.offset_manager.fetch(gid, wanted)

    async def delete_group(self, gid) -> int:
        return await answered(self.shard, self.shard.delete_group(gid))

    def group(self, gid: str = "g") -> ClassicGroup:
        return self.c.groups[gid]

    def join(
        self,
        member="",
        *,
        gid="g",
        instance=None,
        protocols=(("range", b"r"), ("roundrobin", b"rr")),
        v4=True,
        session=SESSION,
        rebalance=REBALANCE,
        ptype="consumer",
        client="client",
        skip=False,
    ):
        return self.c.join(
            gid,
            member,
            instance,
            client,
            "/127.0.0.1",
            session,
            rebalance,
            ptype,
            list(protocols),
            require_known_member_id=v4,
            supports_skip_assignment=skip,
        )

    def new_member(self, **kw):
        """KIP-394 handshake: first join gets MEMBER_ID_REQUIRED and an id; rejoin with it."""
        first = self.join(**kw)
        assert isinstance(first, JoinResult) and first.error == E.member_id_required
        return first.member_id, self.join(first.member_id, **kw)

    def sync(self, member, generation, assignments=None, gid="g", instance=None):
        return self.c.sync(gid, member, instance, generation, "consumer", None, assignments or {})


def result(fut) -> JoinResult | SyncResult:
    assert fut.done(), "still waiting"
    return fut.result()


def at_once(h: Harness, n: int, gid: str = "g", **kw) -> tuple[list[str], list]:
    """n members whose first JoinGroups all arrive before any of them rejoins (KIP-394)."""
    ids = [h.join(gid=gid, **kw).member_id for _ in range(n)]
    return ids, [h.join(mid, gid=gid, **kw) for mid in ids]


async def form_group(h: Harness, n: int, gid: str = "g") -> tuple[list[str], int]:
    """n members join at once and sync; returns (member ids, generation)."""
    ids, futs = at_once(h, n, gid)
    results = [result(f) for f in futs]
    gen = results[0].generation_id
    leader = results[0].leader_id
    syncs = [h.sync(m, gen, gid=gid) for m in ids if m != leader]
    h.sync(leader, gen, {m: m.encode() for m in ids}, gid=gid)
    await settle()
    assert all(result(s).error == E.none for s in syncs)
    assert h.group(gid).is_(S.STABLE)
    return ids, gen


async def test_three_members_joining_at_once_make_one_rebalance():
    h = Harness()
    ids, gen = await form_group(h, 3)
    assert gen == 1
    g = h.group()
    assert g.leader_id == ids[0] and g.protocol_name == "range"
    assert [m.assignment for m in g.members.values()] == [m.encode() for m in ids]


async def test_leader_gets_all_metadata_followers_none():
    h = Harness()
    _, futs = at_once(h, 3)
    results = [result(f) for f in futs]
    leader = [r for r in results if r.member_id == r.leader_id]
    assert len(leader) == 1 and len(leader[0].members) == 3
    assert all(r.members == [] for r in results if r.member_id != r.leader_id)
    assert {r.generation_id for r in results} == {1}


async def test_staggered_joins_rebalance_each_time():
    h = Harness()
    a, fa = h.new_member()
    ra = result(fa)
    assert ra.generation_id == 1 and ra.leader_id == a
    h.sync(a, 1, {a: b"all"})
    await settle()
    assert h.group().is_(S.STABLE)
    # B arrives: the group prepares a rebalance; A learns it from its heartbeat and rejoins.
    b, fb = h.new_member()
    assert h.group().is_(S.PREPARING_REBALANCE)
    assert h.c.heartbeat("g", a, None, 1) == E.rebalance_in_progress
    fa2 = h.join(a)
    assert result(fa2).generation_id == 2 and result(fb).generation_id == 2
    h.sync(b, 2)
    h.sync(a, 2, {a: b"1", b: b"2"})
    await settle()
    # C arrives: a third generation.
    c, fc = h.new_member()
    h.join(a), h.join(b)
    assert result(fc).generation_id == 3
    assert h.group().generation_id == 3 and len(h.group().members) == 3


async def test_leader_missing_join_response_rejoins_in_completing_rebalance():
    h = Harness()
    _, futs = at_once(h, 2)
    leader = result(futs[0]).leader_id
    assert h.group().is_(S.COMPLETING_REBALANCE)
    again = h.join(leader)  # same metadata: answered at once with the same generation
    assert isinstance(again, JoinResult) and again.error == E.none
    assert again.generation_id == 1 and len(again.members) == 2
    assert h.group().is_(S.COMPLETING_REBALANCE)


async def test_follower_sync_waits_for_leader():
    h = Harness()
    (a, b), (fa, fb) = at_once(h, 2)
    leader = result(fa).leader_id
    follower = b if leader == a else a
    waiting = h.sync(follower, 1)
    assert isinstance(waiting, asyncio.Future) and not waiting.done()
    h.sync(leader, 1, {follower: b"F", leader: b"L", "unknown-member": b"x"})
    await settle()
    assert result(waiting).assignment == b"F"
    assert h.group().is_(S.STABLE)
    # Assignments for unknown members are ignored; a member the leader forgot gets b"".
    assert set(h.group().members) == {a, b}


async def test_missing_assignment_is_empty():
    h = Harness()
    (a, b), (fa, fb) = at_once(h, 2)
    leader = result(fa).leader_id
    follower = b if leader == a else a
    waiting = h.sync(follower, 1)
    h.sync(leader, 1, {leader: b"L"})
    await settle()
    assert result(waiting).assignment == b""


async def test_sync_errors():
    h = Harness()
    (a, b), _ = at_once(h, 2)
    assert h.c.sync("g", "nobody", None, 1, None, None, {}).error == E.unknown_member_id
    assert h.c.sync("g", a, None, 7, None, None, {}).error == E.illegal_generation
    assert h.c.sync("g", a, None, 1, "other", None, {}).error == E.inconsistent_group_protocol
    assert h.c.sync("g", a, None, 1, None, "roundrobin", {}).error == E.inconsistent_group_protocol
    assert h.c.sync("", a, None, 1, None, None, {}).error == E.invalid_group_id
    assert h.c.sync("nogroup", a, None, 1, None, None, {}).error == E.unknown_member_id
    # A new member makes the group prepare a rebalance: SyncGroup → REBALANCE_IN_PROGRESS.
    h.new_member()
    assert h.group().is_(S.PREPARING_REBALANCE)
    assert h.c.sync("g", a, None, 1, None, None, {}).error == E.rebalance_in_progress


async def test_rebalance_fails_pending_syncs():
    h = Harness()
    (a, b), (fa, fb) = at_once(h, 2)
    leader = result(fa).leader_id
    follower = b if leader == a else a
    waiting = h.sync(follower, 1)
    h.new_member()  # CompletingRebalance -> PreparingRebalance
    assert result(waiting).error == E.rebalance_in_progress


async def test_heartbeat_answers_per_state():
    h = Harness()
    a, fa = h.new_member()
    assert h.c.heartbeat("g", a, None, 1) == E.none  # CompletingRebalance: keep going
    h.sync(a, 1, {a: b""})
    await settle()
    assert h.c.heartbeat("g", a, None, 1) == E.none  # Stable
    assert h.c.heartbeat("g", a, None, 0) == E.illegal_generation
    assert h.c.heartbeat("g", "x", None, 1) == E.unknown_member_id
    assert h.c.heartbeat("", a, None, 1) == E.invalid_group_id
    assert h.c.heartbeat("none", a, None, 1) == E.unknown_member_id
    h.new_member()
    assert h.c.heartbeat("g", a, None, 1) == E.rebalance_in_progress


async def test_session_expiry_in_stable_triggers_rebalance():
    h = Harness()
    (a, b), gen = await form_group(h, 2)
    for _ in range(3):  # a keeps heartbeating, b is silent
        h.clock.advance(SESSION / 4)
        assert h.c.heartbeat("g", a, None, gen) == E.none
    h.clock.advance(SESSION / 4)
    g = h.group()
    assert b not in g.members and g.is_(S.PREPARING_REBALANCE)
    fa = h.join(a)
    assert result(fa).generation_id == gen + 1 and g.is_(S.COMPLETING_REBALANCE)


async def test_each_member_session_expires_at_its_own_deadline():
    # The group's one session timer, armed for a's deadline, moves earlier for b's shorter
    # session; a member waiting in JoinGroup is alive past its deadline.
    h = Harness(min_session_timeout_ms=1000)
    a = result(h.join(v4=False)).member_id  # generation 1, alone
    fb = h.join(v4=False, session=SESSION // 4)  # b joins: a must rejoin
    fa = h.join(a)
    gen = result(fa).generation_id
    b = result(fb).member_id
    h.sync(b, gen)
    h.sync(a, gen, {a: b"A", b: b"B"})
    await settle()
    assert h.group().is_(S.STABLE)
    h.clock.advance(SESSION // 4 - 1)
    assert b in h.group().members
    h.clock.advance(1)  # neither heartbeats: b's session ends first
    assert list(h.group().members) == [a] and h.group().is_(S.PREPARING_REBALANCE)
    h.clock.advance(SESSION - SESSION // 4 - 1)
    assert a in h.group().members
    h.clock.advance(1)
    assert not h.group().members and h.group().is_(S.EMPTY)
    result(h.join(v4=False))  # c, alone
    fd = h.join(v4=False)  # d waits in JoinGroup for c, which never rejoins
    h.clock.advance(SESSION)  # both sessions end: c's expires; d, still waiting, is alive
    d = result(fd).member_id
    assert list(h.group().members) == [d] and h.group().is_(S.COMPLETING_REBALANCE)


async def test_member_not_rejoining_is_removed_at_rebalance_timeout():
    h = Harness()
    (a, b), gen = await form_group(h, 2)
    h.join(a, protocols=(("roundrobin", b"x"), ("range", b"r")))  # new metadata: rebalance
    g = h.group()
    assert g.is_(S.PREPARING_REBALANCE)
    for _ in range(REBALANCE // 1000 - 1):  # b heartbeats (and hears REBALANCE_IN_PROGRESS) but never rejoins
        h.clock.advance(1000)
        assert h.c.heartbeat("g", b, None, gen) == E.rebalance_in_progress
    h.clock.advance(999)
    assert g.is_(S.PREPARING_REBALANCE)
    h.clock.advance(1)
    assert list(g.members) == [a] and g.is_(S.COMPLETING_REBALANCE) and g.generation_id == gen + 1


async def test_member_not_syncing_is_removed():
    h = Harness()
    (a, b), (fa, fb) = at_once(h, 2, rebalance=SESSION // 2)
    leader = result(fa).leader_id
    follower = b if leader == a else a
    h.sync(leader, 1, {leader: b"L", follower: b"F"})
    await settle()
    assert h.group().is_(S.STABLE)
    h.clock.advance(SESSION // 2)
    assert follower not in h.group().members and h.group().is_(S.PREPARING_REBALANCE)


async def test_sync_timeout_of_each_generation_fires_at_its_own_deadline():
    # The group's sync timer is lazy: armed for generation 1's longer timeout, it must still
    # remove a member that does not sync within generation 2's shorter one, and not before.
    h = Harness()
    slow, quick = SESSION - 1000, SESSION // 4
    (a, b), (fa, fb) = at_once(h, 2, rebalance=slow)
    leader = result(fa).leader_id
    follower = b if leader == a else a
    h.sync(follower, 1)
    h.sync(leader, 1, {a: b"A", b: b"B"})
    await settle()
    assert h.group().is_(S.STABLE)
    h.c.leave("g", [(follower, None)])  # leaves the leader alone: it must rejoin
    rejoined = h.join(leader, rebalance=quick)
    assert result(rejoined).generation_id == 2
    h.clock.advance(quick - 1)
    assert h.group().is_(S.COMPLETING_REBALANCE) and leader in h.group().members
    h.clock.advance(1)  # no SyncGroup in generation 2's rebalance timeout
    assert leader not in h.group().members and h.group().is_(S.EMPTY)
    h.clock.advance(slow)  # generation 1's deadline passes: nothing more happens
    assert h.group().is_(S.EMPTY) and h.group().generation_id == 3


async def test_pending_member_ids_expire_at_their_own_session_timeouts():
    h = Harness(min_session_timeout_ms=1000)
    late = h.join(session=SESSION).member_id  # handed out first, expires last
    h.clock.advance(1000)
    early = h.join(session=SESSION // 2).member_id
    assert set(h.group().pending_members) == {late, early}
    h.clock.advance(SESSION // 2 - 1)
    assert set(h.group().pending_members) == {late, early}
    h.clock.advance(1)
    assert set(h.group().pending_members) == {late}
    assert h.join(early).error == E.unknown_member_id  # its id is no longer valid
    h.clock.advance(SESSION - 1000 - SESSION // 2 - 1)
    assert set(h.group().pending_members) == {late}
    h.clock.advance(1)
    assert not h.group().pending_members
    assert h.join(late).error == E.unknown_member_id


async def test_expiry_in_empty_and_preparing_states():
    h = Harness()
    a, fa = h.new_member()
    h.sync(a, 1, {a: b""})
    await settle()
    left = h.c.leave("g", [(a, None)])
    g = h.group()
    assert not left.done() and g.is_(S.STABLE)  # the empty generation is stored before a leaves
    await settle()
    assert left.result() == (E.none, [(a, None, E.none)])
    assert g.is_(S.EMPTY) and g.generation_id == 2 and g.leader_id is None
    assert g.stored.generation == 2 and not g.stored.members
    # stored once (besides the record of generation 0 the group's creation wrote)
    assert sum(1 for _, v in h.log if v is not None and not v.members and v.generation == 2) == 1
    h.clock.advance(10 * SESSION)  # nothing to expire
    assert g.is_(S.EMPTY)
    # A member blocked in JoinGroup is alive: its session does not expire while it waits.
    b, fb = h.new_member()
    assert result(fb).generation_id == 3
    c, fc = h.new_member()  # b must rejoin; it does
    fb2 = h.join(b)
    assert result(fb2).generation_id == 4


async def test_leave_triggers_rebalance_and_completes_pending_join():
    h = Harness()
    (a, b, c), gen = await form_group(h, 3)
    error, results = h.c.leave("g", [(c, None)])
    assert error == E.none and results == [(c, None, E.none)]
    g = h.group()
    assert g.is_(S.PREPARING_REBALANCE)
    fa = h.join(a)
    assert not fa.done()
    h.c.leave("g", [(b, None), ("ghost", None)])  # b leaving completes the join phase
    assert result(fa).generation_id == gen + 1 and list(g.members) == [a]


async def test_all_members_leave_then_group_reforms_with_new_leader():
    h = Harness()
    (a, b), gen = await form_group(h, 2)
    h.c.leave("g", [(a, None), (b, None)])
    await settle()
    g = h.group()
    assert g.is_(S.EMPTY) and g.leader_id is None and not g.members
    c, fc = h.new_member()
    r = result(fc)
    assert r.leader_id == c and r.generation_id == gen + 2


async def test_join_errors():
    h = Harness(max_size=2)
    assert h.join(gid="").error == E.invalid_group_id
    assert h.join(session=1000).error == E.invalid_session_timeout
    assert h.join(session=10**9).error == E.invalid_session_timeout
    assert h.join("someone").error == E.unknown_member_id  # unknown member id, no group
    assert h.join(ptype="").error == E.inconsistent_group_protocol
    assert h.join(protocols=()).error == E.inconsistent_group_protocol
    (a, b), _ = await form_group(h, 2)
    assert h.join(ptype="connect").error == E.inconsistent_group_protocol
    assert h.join(protocols=(("sticky", b""),)).error == E.inconsistent_group_protocol
    assert h.join().error == E.group_max_size_reached
    assert h.join("not-a-member").error == E.group_max_size_reached  # Kafka checks size first
    h.c.leave("g", [(b, None)])
    assert h.join("not-a-member").error == E.unknown_member_id


async def test_old_versions_never_get_member_id_required():
    h = Harness()
    fut = h.join(v4=False)
    r = result(fut)
    assert r.error == E.none and r.member_id.startswith("client-")


async def test_member_ids_are_the_client_id_and_a_random_uuid():
    # Kafka: clientId + "-" + UUID.randomUUID().toString(), a version 4 UUID in lowercase hex.
    h = Harness()
    ids = [h.join().member_id for _ in range(600)]  # (more than one 4 KiB read of random bytes)
    assert len(set(ids)) == len(ids)
    for member_id in ids:
        client, _, tail = member_id.partition("-")
        parsed = uuid.UUID(tail)
        assert client == "client" and str(parsed) == tail
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


async def test_protocol_is_chosen_by_vote():
    h = Harness()
    roundrobin_first = (("roundrobin", b""), ("range", b""))
    range_first = (("range", b""), ("roundrobin", b""))
    alone = result(h.join(v4=False, protocols=roundrobin_first))
    assert alone.protocol_name == "roundrobin"  # the only member: its own first choice
    others = [h.join(v4=False, protocols=range_first), h.join(v4=False, protocols=range_first + (("sticky", b""),))]
    rejoined = h.join(alone.member_id, v4=False, protocols=roundrobin_first)
    # Two of three prefer range; sticky is not a candidate, as not every member supports it.
    assert [result(f).protocol_name for f in (rejoined, *others)] == ["range"] * 3


async def test_initial_rebalance_delay_waits_for_more_members():
    h = Harness(initial_rebalance_delay_ms=3000)
    f1 = h.join(v4=False)
    h.clock.advance(2000)
    f2 = h.join(v4=False)  # a new member during the delay: another full delay when it ends
    h.clock.advance(3999)
    assert not f1.done()
    h.clock.advance(1)
    assert result(f1).generation_id == 1 and result(f2).generation_id == 1


async def test_initial_delay_extends_for_a_member_still_getting_its_id():
    """KIP-394: a member's first JoinGroup (MEMBER_ID_REQUIRED) during the initial delay
    counts as an arrival: the delay extends, and it joins the first generation."""
    h = Harness(initial_rebalance_delay_ms=50)
    f1 = h.join(v4=False)
    h.clock.advance(40)
    pending = h.join()
    assert pending.error == E.member_id_required
    h.clock.advance(10)  # the first window ends: extended, as a member is arriving
    assert not f1.done()
    f2 = h.join(pending.member_id)  # an arrival in the second window: a third one
    h.clock.advance(99)
    assert not f1.done()
    h.clock.advance(1)
    assert result(f1).generation_id == 1 and result(f2).generation_id == 1
    assert len(h.group().members) == 2


async def test_pending_member_does_not_hold_the_group():
    h = Harness()
    (a, b), gen = await form_group(h, 2)
    ghost = h.join()  # gets an id and never comes back
    assert ghost.error == E.member_id_required
    h.join(a, protocols=(("roundrobin", b""),))  # forces a rebalance
    fb = h.join(b)
    assert not fb.done()
    h.clock.advance(1000)  # the pending-member grace
    assert result(fb).generation_id == gen + 1


async def test_static_member_restart_without_rebalance():
    h = Harness()
    first = result(h.join(instance="i-1", client="app"))  # generation 1, alone
    f2 = h.join(instance="i-2", client="app")
    f1 = h.join(first.member_id, instance="i-1", client="app")
    r1, r2 = result(f1), result(f2)
    gen = h.group().generation_id
    leader = h.group().leader_id
    followers = [r.member_id for r in (r1, r2) if r.member_id != leader]
    syncs = [h.sync(m, gen, instance=None) for m in followers]
    h.sync(leader, gen, {r1.member_id: b"A1", r2.member_id: b"A2"})
    await settle()
    assert [result(s).assignment for s in syncs] == [b"A1" if followers[0] == r1.member_id else b"A2"]
    assert h.group().is_(S.STABLE)
    follower_id = followers[0]
    follower_instance = "i-1" if follower_id == r1.member_id else "i-2"
    # The follower restarts: same instance id, unknown member id, same metadata.
    fut = h.join(instance=follower_instance, client="app")
    await settle()
    r = result(fut)
    assert r.error == E.none and r.generation_id == gen and r.member_id != follower_id
    assert h.group().is_(S.STABLE) and h.group().generation_id == gen
    # The old member id is fenced; the new one gets the old assignment.
    assert h.c.heartbeat("g", follower_id, follower_instance, gen) == E.fenced_instance_id
    s = h.sync(r.member_id, gen, instance=follower_instance)
    assert s.assignment in (b"A1", b"A2")


async def test_static_leader_rejoin_skips_assignment_v9():
    h = Harness()
    f1 = h.join(instance="i-1")
    r1 = result(f1)
    h.sync(r1.member_id, 1, {r1.member_id: b"A"})
    await settle()
    fut = h.join(instance="i-1", skip=True)
    await settle()
    r = result(fut)
    assert r.skip_assignment and r.leader_id == r.member_id and len(r.members) == 1
    assert h.group().generation_id == 1


async def test_illegal_transition_raises():
    g = ClassicGroup("g", 0)
    with pytest.raises(IllegalStateTransition):
        g.transition(S.STABLE, 1)
    with pytest.raises(IllegalStateTransition):
        g.transition(S.COMPLETING_REBALANCE, 1)
    g.transition(S.PREPARING_REBALANCE, 1)
    g.transition(S.EMPTY, 2)
    g.transition(S.DEAD, 3)
    g.transition(S.DEAD, 4)


async def test_many_protocols_and_absurd_values():
    h = Harness()
    protocols = tuple((f"p{i}", b"x") for i in range(10_000))
    fut = h.join(v4=False, protocols=protocols)
    assert result(fut).protocol_name == "p0"
    assert h.join(v4=False, rebalance=-5).error == E.invalid_request


# offsets --------------------------------------------------------------------------------


async def test_offset_commit_validation_and_fetch():
    h = Harness(OffsetConfig(metadata_max_bytes=10))
    (a, b), gen = await form_group(h, 2)
    req = [OffsetRequest("t", 0, 42, 3, "meta"), OffsetRequest("t", 1, 7, -1, "x" * 11)]
    assert await h.commit("g", gen, a, None, req) == [E.none, E.offset_metadata_too_large]
    assert await h.commit("g", gen + 1, a, None, req[:1]) == [E.illegal_generation]
    assert await h.commit("g", gen, "stranger", None, req[:1]) == [E.unknown_member_id]
    assert await h.commit("g", -1, "", None, req[:1]) == [E.unknown_member_id]  # non-empty group
    assert await h.commit("", -1, "", None, req[:1]) == [E.invalid_group_id]
    err, topics = h.fetch("g", [("t", [0, 1])])
    assert err == E.none
    ((_, rows),) = topics
    assert rows[0][1].offset == 42 and rows[0][1].leader_epoch == 3 and rows[1][1] is None
    # Standalone commits (no group management) create an Empty group.
    assert await h.commit("solo", -1, "", None, req[:1]) == [E.none]
    assert h.group("solo").is_(S.EMPTY)
    assert await h.commit("nogroup", 5, "m", None, req[:1]) == [E.illegal_generation]
    assert await h.commit("nogroup", 5, "m", None, req[:1], version=9) == [E.group_id_not_found]  # as Kafka 4
    # CompletingRebalance: REBALANCE_IN_PROGRESS
    h.join(a, protocols=(("roundrobin", b""),))
    h.join(b)
    assert h.group().is_(S.COMPLETING_REBALANCE)
    assert await h.commit("g", gen + 1, a, None, req[:1]) == [E.rebalance_in_progress]


async def test_replay_brings_back_members_assignments_and_offsets():
    """A restart loads what Kafka loads: the Stable group with its members, their
    assignments, leader and generation, and every offset; sessions restart."""
    h = Harness()
    (a, b), gen = await form_group(h, 2)
    await h.commit("g", gen, a, None, [OffsetRequest("t", 0, 10, -1, ""), OffsetRequest("t", 1, 11, -1, "")])
    await h.commit("g", gen, b, None, [OffsetRequest("t", 0, 12, -1, "")])
    clock = ManualClock()
    fresh = new_runtime(h.memory, clock)
    fresh.load(h.memory.all_records())
    assert fresh.shards[0].durable_view() == h.shard.durable_view()
    g = fresh.group("g")
    assert g.is_(S.STABLE) and g.generation_id == gen and g.protocol_name == "range"
    assert g.leader_id == h.group().leader_id
    assert {m: g.members[m].assignment for m in (a, b)} == {a: a.encode(), b: b.encode()}
    assert {k: v.offset for k, v in fresh.shards[0].offsets.of("g").items()} == {("t", 0): 12, ("t", 1): 11}
    manager = fresh.shards[0].classic
    clock.advance(SESSION // 2)
    assert manager.heartbeat("g", a, None, gen) == E.none
    clock.advance(SESSION // 2 + 1)  # b never came back: expired, and the group rebalances
    assert list(g.members) == [a] and g.is_(S.PREPARING_REBALANCE)


async def test_delete_group_only_when_empty():
    h = Harness()
    (a,), gen = await form_group(h, 1)
    await h.commit("g", gen, a, None, [OffsetRequest("t", 0, 1, -1, "")])
    assert await h.delete_group("g") == E.non_empty_group
    await h.c.leave("g", [(a, None)])
    assert await h.delete_group("g") == E.none
    assert "g" not in h.c.groups
    assert await h.delete_group("g") == E.group_id_not_found
    assert h.fetch("g", [("t", [0])])[1][0][1][0][1] is None


async def test_offset_retention_with_injected_clock():
    h = Harness(OffsetConfig(retention_ms=60_000))
    await h.commit("solo", -1, "", None, [OffsetRequest("t", 0, 1, -1, "")])
    h.clock.advance(59_000)
    assert h.runtime.expire_offsets() == 0
    h.clock.advance(2_000)
    assert h.runtime.expire_offsets() == 1
    await settle()
    assert "solo" not in h.c.groups  # Empty with no offsets left: Dead and removed


# a failing disk: every write is all or nothing --------------------------------------------


async def test_static_rejoin_whose_new_id_cannot_be_stored_keeps_the_old_id():
    """Kafka's "reverting to old member id": the member gets the storage error, nothing changes."""
    h = Harness()
    r = result(h.join(instance="i-1", client="app"))
    h.sync(r.member_id, 1, {r.member_id: b"A"})
    await settle()
    stored = h.group().stored
    h.memory.failing = True
    fut = h.join(instance="i-1", client="app")
    await settle()
    failed = result(fut)
    assert failed.error == E.not_coordinator and failed.member_id == ""
    g = h.group()
    assert list(g.members) == [r.member_id] and g.static_members == {"i-1": r.member_id}
    assert g.is_(S.STABLE) and g.leader_id == r.member_id and g.stored == stored
    assert h.c.heartbeat("g", r.member_id, "i-1", 1) == E.none  # the old id goes on
    h.memory.failing = False
    again = h.join(instance="i-1", client="app")
    await settle()
    assert result(again).error == E.none and h.group().static_members == {"i-1": result(again).member_id}


async def test_assignment_that_cannot_be_stored_fails_every_sync_and_rebalances():
    h = Harness()
    ids, futs = at_once(h, 2)
    results = [result(f) for f in futs]
    leader = results[0].leader_id
    follower = next(m for m in ids if m != leader)
    h.memory.failing = True
    follower_sync = h.sync(follower, 1)
    leader_sync = h.sync(leader, 1, {m: b"x" for m in ids})
    await settle()
    assert result(leader_sync).error == result(follower_sync).error == E.not_coordinator
    g = h.group()
    # (what is stored is still the record the group's creation wrote: generation 0, no members)
    assert g.is_(S.PREPARING_REBALANCE) and g.stored.generation == 0 and not g.stored.members
    assert all(m.assignment == b"" for m in g.members.values())


async def test_last_leave_that_cannot_be_stored_changes_nothing():
    h = Harness()
    (a,), gen = await form_group(h, 1)
    h.memory.failing = True
    left = h.c.leave("g", [(a, None)])
    await settle()
    assert left.result() == (E.not_coordinator, [])
    g = h.group()
    assert g.is_(S.STABLE) and list(g.members) == [a] and g.generation_id == gen
    assert h.c.heartbeat("g", a, None, gen) == E.none


async def test_commit_and_delete_that_cannot_be_stored_change_nothing():
    h = Harness()
    assert await h.commit("solo", -1, "", None, [OffsetRequest("t", 0, 1, -1, "")]) == [E.none]
    h.memory.failing = True
    assert await h.commit(
        "solo", -1, "", None, [OffsetRequest("t", 0, 2, -1, ""), OffsetRequest("t", 1, 2, -1, "x" * 5000)]
    ) == [E.not_coordinator, E.offset_metadata_too_large]
    assert await h.commit("new", -1, "", None, [OffsetRequest("t", 0, 2, -1, "")]) == [E.not_coordinator]
    assert "new" not in h.c.groups  # the simple group comes only with its first stored commit
    assert await h.delete_group("solo") == E.not_coordinator
    assert h.group("solo").is_(S.EMPTY)  # back from Dead
    assert h.fetch("solo", [("t", [0])])[1][0][1][0][1].offset == 1
    h.memory.failing = False
    assert await h.delete_group("solo") == E.none
