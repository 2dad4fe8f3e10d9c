"""KIP-848 consumer groups in process (manual clock, in-memory log): reconciliation order,
epochs, fencing, static members, expiry, and the records replayed into a fresh runtime."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode as E

from coordinator.groups.modern.assignors import range_, uniform
from coordinator.groups.modern.consumer.consumer_group import ConsumerGroup
from coordinator.groups.modern.reconciliation import MemberState
from tests.support.group_harness import settle
from tests.support.consumer_shard import (
    owned,
)
from tests.support.consumer_harness import (
    Harness,
    flat,
)


def no_double_owner(group: ConsumerGroup) -> None:
    seen: dict[tuple, str] = {}
    for m in group.members.values():
        for t, ps in m.owns().items():
            for p in ps:
                assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {m.member_id}"
                seen[(t, p)] = m.member_id


async def test_join_alone_gets_everything_then_revoke_before_assign():
    h = Harness()
    h.catalog.add("t", 6)
    a = await h.hb("a", 0, ["t"])
    assert a.error == E.none and a.member_epoch == 2 and flat(a.assignment) == set(range(6))
    b = await h.hb("b", 0, ["t"])
    # b joins at epoch 3, but every partition is still a's: b waits (unreleased), gets nothing yet.
    assert b.member_epoch == 3 and flat(b.assignment) == set()
    assert h.group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    no_double_owner(h.group)
    # a is told to keep half (its epoch stays 2 until it has revoked the rest).
    a2 = await h.hb("a", 2, owned=owned(a))
    assert a2.member_epoch == 2 and len(flat(a2.assignment)) == 3
    assert h.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    no_double_owner(h.group)
    b2 = await h.hb("b", 3, owned=[])
    assert flat(b2.assignment) == set()  # still owned by a (pending revocation)
    # a acknowledges: its heartbeat lists only what it keeps; then it moves to epoch 3.
    a3 = await h.hb("a", 2, owned=owned(a2))
    assert a3.member_epoch == 3
    b3 = await h.hb("b", 3, owned=[])
    assert flat(b3.assignment) == set(range(6)) - flat(a2.assignment)
    assert h.group.state_name == "Stable"
    no_double_owner(h.group)


async def test_fencing_and_unknown_member():
    h = Harness()
    h.catalog.add("t", 2)
    a = await h.hb("a", 0, ["t"])
    assert (await h.hb("a", a.member_epoch + 1, owned=owned(a))).error == E.fenced_member_epoch
    assert (await h.hb("nobody", 2, owned=[])).error == E.unknown_member_id
    assert (await h.hb("a", 2, owned=owned(a))).error == E.none
    b = await h.hb("b", 0, ["t"])  # group epoch 3: a must revoke one partition
    a2 = await h.hb("a", 2, owned=owned(a))
    a3 = await h.hb("a", 2, owned=owned(a2))  # revoked: a moves to epoch 3
    assert a3.member_epoch == 3
    # The answer with epoch 3 may be lost: epoch 2 (the previous) with a subset is accepted...
    assert (await h.hb("a", 2, owned=owned(a2))).error == E.none
    # ...but not while it still lists partitions it no longer has, nor an older epoch.
    assert (await h.hb("a", 2, owned=owned(a))).error == E.fenced_member_epoch
    assert (await h.hb("a", 0, ["t"], owned=[])).error == E.none  # epoch 0: a rejoin under the same id
    assert b.error == E.none


async def test_leave_static_leave_and_rejoin_keeps_assignment():
    h = Harness()
    h.catalog.add("t", 4)
    a = await h.hb("a", 0, ["t"], instance_id="inst-a")
    assert flat(a.assignment) == set(range(4))
    # A second member with the same instance id while it is there: UNRELEASED_INSTANCE_ID.
    assert (await h.hb("a2", 0, ["t"], instance_id="inst-a")).error == E.unreleased_instance_id
    left = await h.hb("a", -2, instance_id="inst-a", owned=None)
    assert left.error == E.none and left.member_epoch == -2
    epoch = h.group.group_epoch
    back = await h.hb("a2", 0, ["t"], instance_id="inst-a")
    assert back.error == E.none and flat(back.assignment) == set(range(4)) and h.group.group_epoch == epoch
    assert set(h.group.members) == {"a2"}
    assert (await h.hb("a2", -2, instance_id="other", owned=None)).error == E.unknown_member_id
    gone = await h.hb("a2", -1, owned=None)
    assert gone.member_epoch == -1 and h.group.state_name == "Empty"
    assert (await h.hb("a2", -1, owned=None)).error == E.unknown_member_id


async def test_session_expiry_frees_partitions():
    h = Harness(session_timeout_ms=10_000)
    h.catalog.add("t", 2)
    a = await h.hb("a", 0, ["t"])
    b = await h.hb("b", 0, ["t"])
    await h.hb("a", a.member_epoch, owned=owned(a))
    h.clock.advance(5_000)
    await h.hb("b", b.member_epoch, owned=[])
    h.clock.advance(6_000)  # a's session is over, b's is not
    await settle()
    assert set(h.group.members) == {"b"}
    b2 = await h.hb("b", h.group.members["b"].member_epoch, owned=[])
    assert flat(b2.assignment) == {0, 1}


async def test_max_size_and_new_partitions_without_rejoin():
    h = Harness(max_size=1)
    info = h.catalog.add("t", 2)
    a = await h.hb("a", 0, ["t"])
    assert (await h.hb("b", 0, ["t"])).error == E.group_max_size_reached
    info.partitions = 4  # partition growth: picked up at the next heartbeat
    a2 = await h.hb("a", a.member_epoch, owned=owned(a))
    assert flat(a2.assignment) == {0, 1, 2, 3} and a2.member_epoch == a.member_epoch + 1
    h.catalog.add("later", 1)  # a topic created after the subscription
    a3 = await h.hb("a", a2.member_epoch, ["t", "later"], owned=owned(a2))
    assert len(a3.assignment) == 2


async def test_regex_subscription():
    h = Harness()
    h.catalog.add("orders-eu", 1)
    h.catalog.add("orders-us", 1)
    h.catalog.add("payments", 1)
    # Kafka resolves a regex after the heartbeat that brought it: its topics come at the next epoch.
    first = await h.hb("a", 0, None, subscribed_topic_regex="orders-.*")
    assert first.member_epoch == 1 and not first.assignment
    h.clock.advance(0)
    await settle()
    a = await h.hb("a", 1, owned=[])
    assert a.member_epoch == 2 and len(a.assignment) == 2
    # Kafka resolves a group's regexes again at most once per 10 s (REGEX_BATCH_REFRESH_MIN_
    # INTERVAL_MS): a topic created within 10 s of the last resolution, or a regex new to the
    # group, waits for a heartbeat after them.
    h.catalog.add("orders-asia", 2)
    h.clock.advance(10_000)  # (10 s to the millisecond: still within)
    await h.hb("a", a.member_epoch, owned=owned(a))
    b = await h.hb("b", 0, None, subscribed_topic_regex="pay.*")
    assert h.group.regex_refresh is None and b.member_epoch == a.member_epoch and not b.assignment
    h.clock.advance(1)
    await h.hb("a", a.member_epoch, owned=owned(a))  # notices the new topic and regex, resolves them after
    h.clock.advance(0)
    await settle()
    a2 = await h.hb("a", a.member_epoch, owned=owned(a))
    assert a2.member_epoch == a.member_epoch + 1 and len(a2.assignment) == 3  # orders-asia among them
    assert h.group.resolved_regexes == {
        "orders-.*": frozenset({"orders-eu", "orders-us", "orders-asia"}),
        "pay.*": frozenset({"payments"}),
    }
    # Nothing changed: no resolution, even past the 10 s, until the refresh interval (10 min).
    h.clock.advance(10_001)
    await h.hb("a", a2.member_epoch, owned=owned(a2))
    assert h.group.regex_refresh is None


async def test_records_replay_into_the_same_group():
    h = Harness()
    h.catalog.add("t", 4)
    a = await h.hb("a", 0, ["t"], instance_id="i-a", server_assignor="range")
    b = await h.hb("b", 0, ["t"])
    await h.hb("a", a.member_epoch, owned=owned(a))
    a_state = h.group.members["a"]
    await h.hb("a", a_state.member_epoch, owned=owned(a_state.assigned))
    await h.hb("b", b.member_epoch, owned=[])
    fresh = h.reload()
    g, g2 = h.group, fresh.group
    assert (g2.group_epoch, g2.assignment_epoch, g2.target) == (g.group_epoch, g.assignment_epoch, g.target)
    for mid, m in g.members.items():
        m2 = g2.members[mid]
        assert (
            m2.member_epoch,
            m2.assigned,
            m2.pending_revocation,
            m2.state,
            m2.instance_id,
            m2.server_assignor,
            m2.subscribed_topic_names,
        ) == (
            m.member_epoch,
            m.assigned,
            m.pending_revocation,
            m.state,
            m.instance_id,
            m.server_assignor,
            m.subscribed_topic_names,
        )
    # a member that leaves leaves tombstones: a reload no longer has it
    await h.hb("b", -1, owned=None)
    assert set(h.reload().group.members) == {"a"}


async def test_failed_append_leaves_no_trace():
    h = Harness()
    h.catalog.add("t", 2)
    a = await h.hb("a", 0, ["t"])
    h.log.failing = True
    b = await h.hb("b", 0, ["t"])
    assert b.error == E.not_coordinator
    assert set(h.group.members) == {"a"} and h.group.group_epoch == 2
    h.log.failing = False
    assert (await h.hb("a", a.member_epoch, owned=owned(a))).error == E.none


def test_assignors_balanced_and_sticky():
    t1, t2 = uuid.uuid4(), uuid.uuid4()
    topics = {t1: 6, t2: 3}
    members = {m: (frozenset({t1, t2}), {}, None) for m in "abc"}
    first = uniform(members, topics)
    assert sorted(sum(len(ps) for ps in a.values()) for a in first.values()) == [3, 3, 3]
    members["d"] = (frozenset({t1, t2}), {}, None)
    second = uniform({m: (s, first.get(m, {}), None) for m, (s, *_) in members.items()}, topics)
    moved = sum(len(ps - second[m].get(t, frozenset())) for m, a in first.items() for t, ps in a.items())
    assert moved <= 3  # only what d needs moves
    r = range_({m: (frozenset({t1}), {}, None) for m in "ab"}, {t1: 5})
    assert r["a"][t1] == frozenset({0, 1, 2}) and r["b"][t1] == frozenset({3, 4})
    # Kafka's order: static members first, by instance id; then the others by member id.
    r = range_(
        {
            "a": (frozenset({t1, t2}), {}, None),
            "b": (frozenset({t1}), {}, "i-2"),
            "c": (frozenset({t1, t2}), {}, "i-1"),
        },
        topics,
    )
    assert (r["c"][t1], r["b"][t1], r["a"][t1]) == ({0, 1}, {2, 3}, {4, 5})
    assert (r["c"][t2], r["a"][t2]) == ({0, 1}, {2})


async def test_member_that_does_not_revoke_within_rebalance_timeout_is_fenced():
    h = Harness(session_timeout_ms=60_000)
    h.catalog.add("t", 2)
    a = await h.hb("a", 0, ["t"], rebalance_timeout_ms=5_000)
    b = await h.hb("b", 0, ["t"])
    a2 = await h.hb("a", a.member_epoch, owned=owned(a))  # told to revoke one; never acknowledges
    assert h.group.members["a"].state is MemberState.UNREVOKED_PARTITIONS and len(flat(a2.assignment)) == 1
    h.clock.advance(5_001)
    await settle()
    assert set(h.group.members) == {"b"}
    b2 = await h.hb("b", h.group.members["b"].member_epoch, owned=[])
    assert flat(b2.assignment) == {0, 1} and b.error == E.none
    assert (await h.hb("a", a.member_epoch, owned=owned(a2))).error == E.unknown_member_id


async def test_random_joins_leaves_and_heartbeats_never_share_a_partition():
    import random

    rng = random.Random(848)
    h = Harness()
    h.catalog.add("t", 12)
    h.catalog.add("u", 5)
    alive: set[str] = set()
    for step in range(400):
        op = rng.random()
        if op < 0.15 and len(alive) < 8:
            m = f"m{step}"
            assert (await h.hb(m, 0, rng.choice([["t"], ["t", "u"]]))).error == E.none
            alive.add(m)
        elif op < 0.22 and alive:
            m = rng.choice(sorted(alive))
            assert (await h.hb(m, -1, owned=None)).error == E.none
            alive.discard(m)
        elif alive:
            m = rng.choice(sorted(alive))
            member = h.group.members[m]
            # A client owns what it was last given (it revokes at once, as librdkafka does).
            r = await h.hb(m, member.member_epoch, owned=owned(member.assigned))
            assert r.error == E.none
        if alive:
            no_double_owner(h.group)
    # Quiet heartbeats bring everyone to the assignment epoch with the target assignment.
    for _ in range(4):
        for m in sorted(alive):
            member = h.group.members[m]
            await h.hb(m, member.member_epoch, owned=owned(member.assigned))
    g = h.group
    assert g.state_name == "Stable"
    assert all(g.members[m].assigned == g.target[m] for m in alive)
    assert sum(len(ps) for m in alive for ps in g.members[m].assigned.values()) == 17 or not any(
        "u" in g.members[m].subscribed_topic_names for m in alive
    )


async def test_clients_never_hold_a_partition_at_once_through_rejoins_and_lost_answers():
    """The KIP-848 safety rule seen from the clients: a partition goes to a client only when
    no other client holds it. Simulated clients behave as the protocol asks (take what an
    answer adds; give up what it leaves out, at once or a heartbeat later, listing it as
    owned until then, as librdkafka revokes in the application's poll; on FENCED_MEMBER_EPOCH
    or UNKNOWN_MEMBER_ID drop everything and rejoin at epoch 0 under the same id), while
    answers get lost (the next heartbeat repeats the epoch), heartbeats omit their
    partitions, members leave and come back under the same id or a new one, and clients
    rejoin at epoch 0 while their partitions are being moved: the cases where a member
    keeping its epoch and assignment on an epoch-0 rejoin (Kafka 4.4's rule) must not turn
    into two holders."""
    import random

    for seed in (848, 4400, 37, 2026):
        rng = random.Random(seed)
        h = Harness()
        tid = h.catalog.add("t", 6).topic_id
        clients = {
            f"c{i}": {"epoch": 0, "held": set(), "revoking": set(), "in": False, "id": f"c{i}"} for i in range(4)
        }
        for _ in range(400):
            c = clients[rng.choice(sorted(clients))]
            if c["revoking"] and rng.random() < 0.5:
                c["held"] -= c["revoking"]  # the application's poll revoked them
                c["revoking"] = set()
            if c["in"] and rng.random() < 0.05:
                c["held"], c["revoking"] = set(), set()  # revoked, then the leave
                assert (await h.hb(c["id"], -1, owned=None)).error == E.none
                c["in"], c["epoch"] = False, 0
                if rng.random() < 0.5:
                    c["id"] += "'"
                continue
            if not c["in"] or rng.random() < 0.04:
                c["held"], c["revoking"] = set(), set()  # a client rejoining at epoch 0 gave up everything
                r = await h.hb(c["id"], 0, ["t"], owned=[])
            else:
                owned_now = None if rng.random() < 0.3 else [(tid, sorted(c["held"]))] if c["held"] else []
                r = await h.hb(c["id"], c["epoch"], owned=owned_now)
            if rng.random() < 0.1:
                continue  # the answer is lost
            if r.error in (E.fenced_member_epoch, E.unknown_member_id):
                c["held"], c["revoking"], c["in"], c["epoch"] = set(), set(), False, 0
                continue
            assert r.error == E.none, r
            c["in"], c["epoch"] = True, r.member_epoch
            if r.assignment is not None:
                given = set(r.assignment.get(tid, ()))
                c["revoking"] = c["held"] - given
                new = given - c["held"]
                others = {p for o in clients.values() if o is not c for p in o["held"]}
                assert not (new & others), f"seed {seed}: {c['id']} given {sorted(new & others)} another client holds"
                c["held"] |= new
            no_double_owner(h.group)
