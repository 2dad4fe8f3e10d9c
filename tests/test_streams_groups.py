"""KIP-1071 streams groups in process (a GroupShard, a manual clock, a topic catalog): the
topology's validation against the topics (Kafka's statuses, the internal topics the
coordinator creates), the sticky task assignor's properties, reconciliation (a task moves
only once its owner revoked it), standby tasks and no warm-ups (as Kafka 4.4), static
members, session expiry, the initial rebalance delay, refused heartbeats changing nothing, a
failed write undone, and a restart rebuilding the group from its records."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from coordinator.groups.streams.assignor import AssignorMember, sticky_assign
from coordinator.groups.streams.streams_group import STABLE, UNRELEASED_TASKS, UNREVOKED_TASKS
from coordinator.groups.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    RequestError,
    check_request_topology,
    configure_topics,
)
from protocol import streams_records as R
from tests.support.group_harness import settle
from tests.support.streams_harness import GROUP, Harness, flat, tasks, word_count

NONE, INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH = 0, 42, 25, 110
STREAMS_INVALID_TOPOLOGY, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID = 130, 111, 82


# ---------------------------------------------------------------- the topology


def counts(**topics: int):
    return lambda name: topics.get(name.replace("-", "_"))


def test_topology_statuses_as_kafka_reports_them():
    wc = word_count()
    # no input topic: MISSING_SOURCE_TOPICS, nothing to create yet
    c = configure_topics(wc, lambda name: None)
    assert c.status == (MISSING_SOURCE_TOPICS, "Source topics words are missing.") and not c.is_ready()
    assert c.subtopologies is None and not c.to_create
    # the input exists: both internal topics are to be created, with the input's partitions
    # and their configs; the repartition count follows the subtopology writing to it
    c = configure_topics(wc, counts(words=4))
    assert c.status == (
        MISSING_INTERNAL_TOPICS,
        "Internal topics are missing: app-count-changelog, app-count-repartition",
    )
    assert {n: (t.partitions, dict(t.configs)) for n, t in c.to_create.items()} == {
        "app-count-changelog": (4, {"cleanup.policy": "compact"}),
        "app-count-repartition": (4, {"cleanup.policy": "delete"}),
    }
    assert {s: x.number_of_tasks for s, x in c.subtopologies.items()} == {"0": 4, "1": 4}
    # all there: ready
    c = configure_topics(wc, counts(words=4, app_count_changelog=4, app_count_repartition=4))
    assert c.is_ready() and c.status is None and not c.to_create
    assert c.subtopologies["1"].stateful and not c.subtopologies["0"].stateful
    # an internal topic with another partition count: INCORRECTLY_PARTITIONED_TOPICS
    c = configure_topics(wc, counts(words=4, app_count_changelog=3, app_count_repartition=4))
    assert c.status == (
        INCORRECTLY_PARTITIONED_TOPICS,
        "Existing topic app-count-changelog has different number of partitions: expected 4, found 3",
    )


def test_copartitioned_sources_must_agree_and_fix_repartition_topics():
    join = R.StreamsGroupTopologyValue(
        1,
        (
            R.Subtopology(
                "0",
                ("left", "right"),
                copartition_groups=(R.CopartitionGroup((0, 1)),),
                state_changelog_topics=(R.TopicInfo("app-store-changelog"),),
            ),
        ),
    )
    c = configure_topics(join, counts(left=3, right=2))
    assert c.status == (INCORRECTLY_PARTITIONED_TOPICS, "Topics not co-partitioned: [{left=3, right=2}]")
    c = configure_topics(join, counts(left=3, right=3))
    assert c.to_create["app-store-changelog"].partitions == 3
    # a repartition topic copartitioned with an input takes the input's count
    mixed = R.StreamsGroupTopologyValue(
        1,
        (
            R.Subtopology("0", ("a",), repartition_sink_topics=("rep",)),
            R.Subtopology(
                "1",
                ("b",),
                repartition_source_topics=(R.TopicInfo("rep"),),
                copartition_groups=(R.CopartitionGroup((0,), (), (0,)),),
            ),
        ),
    )
    c = configure_topics(mixed, counts(a=8, b=2))
    assert c.to_create["rep"].partitions == 2 and c.subtopologies["1"].number_of_tasks == 2


def malformed_topologies() -> tuple[R.StreamsGroupTopologyValue, ...]:
    """A changelog with a partition count, a source regex, a copartition group naming a topic
    its subtopology lacks, a subtopology id twice."""
    bad_changelog = R.StreamsGroupTopologyValue(
        1, (R.Subtopology("0", ("t",), state_changelog_topics=(R.TopicInfo("c", 3),)),)
    )
    regex = R.StreamsGroupTopologyValue(1, (R.Subtopology("0", source_topic_regex=("t.*",)),))
    bad_index = R.StreamsGroupTopologyValue(
        1, (R.Subtopology("0", ("t",), copartition_groups=(R.CopartitionGroup((5,)),)),)
    )
    twice = R.StreamsGroupTopologyValue(1, (R.Subtopology("0", ("t",)), R.Subtopology("0", ("u",))))
    return bad_changelog, regex, bad_index, twice


def test_malformed_topologies_are_refused():
    bad_changelog, regex, bad_index, twice = malformed_topologies()
    for topology, code in (
        (bad_changelog, STREAMS_INVALID_TOPOLOGY),
        (regex, INVALID_REQUEST),
        (bad_index, STREAMS_INVALID_TOPOLOGY),
        (twice, STREAMS_INVALID_TOPOLOGY),
    ):
        try:
            check_request_topology(topology)
        except RequestError as e:
            assert e.code == code
        else:
            raise AssertionError(f"accepted {topology}")


# ---------------------------------------------------------------- the assignor


@st.composite
def groups(draw):
    n_processes = draw(st.integers(1, 4))
    members = {}
    for i in range(draw(st.integers(1, 7))):
        members[f"m{i}"] = AssignorMember(f"p{draw(st.integers(0, n_processes - 1))}")
    subtopologies = {str(s): (draw(st.integers(0, 6)), draw(st.booleans())) for s in range(draw(st.integers(1, 3)))}
    # a previous assignment, possibly overlapping and stale, as members report it
    all_tasks = [(s, p) for s, (n, _) in subtopologies.items() for p in range(n)]
    for m in members.values():
        for s, p in draw(st.lists(st.sampled_from(all_tasks), max_size=4)) if all_tasks else []:
            m.active.setdefault(s, frozenset())
            m.active[s] = m.active[s] | {p}
        for s, p in draw(st.lists(st.sampled_from(all_tasks), max_size=3)) if all_tasks else []:
            m.standby[s] = m.standby.get(s, frozenset()) | {p}
    return members, subtopologies, draw(st.integers(0, 2))


@settings(max_examples=150, deadline=None)
@given(groups())
def test_assignor_properties(case):
    members, subtopologies, standbys = case
    out = sticky_assign(members, subtopologies, standbys)
    all_tasks = {(s, p) for s, (n, _) in subtopologies.items() for p in range(n)}
    # every task has exactly one active owner
    owners: dict = {}
    for m, (active, _) in out.items():
        for s, ps in active.items():
            for p in ps:
                assert (s, p) not in owners
                owners[(s, p)] = m
    assert set(owners) == all_tasks
    # balance: no member has more than its share of active tasks
    share = -(-len(all_tasks) // len(members))
    assert all(sum(len(ps) for ps in a.values()) <= share for a, _ in out.values())
    # standbys: stateful tasks only, never on the process running the task active, never
    # twice on one process, at most `standbys` copies
    processes = {m: members[m].process_id for m in members}
    copies: dict = {}
    for m, (_, standby) in out.items():
        for s, ps in standby.items():
            assert subtopologies[s][1]
            for p in ps:
                assert processes[owners[(s, p)]] != processes[m]
                copies.setdefault((s, p), []).append(processes[m])
    for ps in copies.values():
        assert len(ps) == len(set(ps)) <= standbys
    # enough processes: every stateful task gets all its standbys
    if len(set(processes.values())) > standbys:
        for s, (n, stateful) in subtopologies.items():
            for p in range(n if stateful else 0):
                assert len(copies.get((s, p), [])) == standbys
    # stickiness: assigning again from the result keeps every active task where it is, when
    # no member holds more than the even share rounded down (Kafka's assignor balances by
    # process first, so a member of a lightly loaded process may hold one more, and its quota,
    # shrinking as members fill up, may take it back; the standbys are placed again)
    again = {m: AssignorMember(members[m].process_id, dict(a), dict(sb)) for m, (a, sb) in out.items()}
    if all(sum(len(ps) for ps in a.values()) <= len(all_tasks) // len(members) for a, _ in out.values()):
        assert {m: a for m, (a, _) in sticky_assign(again, subtopologies, standbys).items()} == {
            m: a for m, (a, _) in out.items()
        }


def test_assignor_keeps_tasks_where_they_are_when_a_member_joins():
    subtopologies = {"0": (6, True)}
    first = sticky_assign({"a": AssignorMember("pa")}, subtopologies, 0)
    assert first["a"][0] == {"0": frozenset(range(6))}
    members = {"a": AssignorMember("pa", first["a"][0]), "b": AssignorMember("pb")}
    second = sticky_assign(members, subtopologies, 1)
    # a keeps three of its six, b gets the other three; each holds a standby of the other's
    assert second["a"][0]["0"] <= frozenset(range(6)) and len(second["a"][0]["0"]) == 3
    assert second["b"][0]["0"] == frozenset(range(6)) - second["a"][0]["0"]
    assert second["a"][1]["0"] == second["b"][0]["0"] and second["b"][1]["0"] == second["a"][0]["0"]


# ---------------------------------------------------------------- the heartbeat


async def ready(h: Harness, partitions: int = 4) -> None:
    h.catalog.add("words", partitions)


async def test_first_member_initializes_topology_and_waits_for_internal_topics():
    h = Harness(num_warmup_replicas=0)
    await ready(h)
    a = await h.hb("a", 0)
    assert a.error == NONE and a.member_epoch == 2  # (a streams group starts at epoch 1, as Kafka's)
    assert a.status == [
        (MISSING_INTERNAL_TOPICS, "Internal topics are missing: app-count-changelog, app-count-repartition")
    ]
    assert flat(a.assignment) == set()  # NotReady: nothing assigned
    assert sorted(h.catalog.created) == [
        ("app-count-changelog", 4, {"cleanup.policy": "compact"}),
        ("app-count-repartition", 4, {"cleanup.policy": "delete"}),
    ]
    assert h.group.state_name == "NotReady"
    # the topics now exist: the next heartbeat gets every task
    a = await h.hb("a", 2, owned=tasks())
    assert a.status == [] and a.member_epoch == 3
    assert flat(a.assignment) == {(s, p) for s in "01" for p in range(4)}
    assert h.group.state_name == "Stable"


async def test_reconciliation_waits_for_revocation():
    h = Harness(num_warmup_replicas=0)
    await ready(h, 2)
    a = await h.hb("a", 0)
    a = await h.hb("a", a.member_epoch, owned=tasks())
    everything = flat(a.assignment)
    assert len(everything) == 4
    b = await h.hb("b", 0)
    # b's tasks are still a's: b waits for them (UNRELEASED), at the new epoch
    assert b.member_epoch == a.member_epoch + 1 and flat(b.assignment) == set()
    ea, eb = a.member_epoch, b.member_epoch
    assert h.group.members["b"].state == UNRELEASED_TASKS
    target_b = flat(h.group.target_tuples["b"])
    assert len(target_b) == 2
    # a is asked to revoke them: it keeps its epoch until it does
    owned_all = tasks({"0": [0, 1], "1": [0, 1]})
    a = await h.hb("a", ea, owned=owned_all)
    assert a.member_epoch == ea and flat(a.assignment) == everything - target_b
    assert h.group.members["a"].state == UNREVOKED_TASKS
    a = await h.hb("a", ea, owned=owned_all)  # still reports them: nothing moves
    assert h.group.members["a"].state == UNREVOKED_TASKS
    still_a = {s: [p for p in range(2) if (s, p) in everything - target_b] for s in "01"}
    a = await h.hb("a", ea, owned=tasks(still_a))
    assert a.member_epoch == eb and h.group.members["a"].state == STABLE
    b = await h.hb("b", eb, owned=tasks())
    assert flat(b.assignment) == target_b and h.group.members["b"].state == STABLE
    assert h.group.state_name == "Stable"


async def test_standby_replicas_and_no_warmups():
    h = Harness(num_standby_replicas=1)  # (group.streams.num.warmup.replicas left at 2)
    await ready(h, 2)
    a = await h.hb("a", 0)
    a = await h.hb("a", a.member_epoch, owned=tasks())
    assert flat(a.assignment, "standby") == set()  # one process: nowhere for a standby
    await h.hb("b", 0)
    # b's process has no state of a's stateful tasks, yet the ones for b go to b at once: Kafka
    # 4.4's AssignmentRefiner keeps the assignor's target, with no warm-up tasks
    target_a, target_b = h.group.target_tuples["a"], h.group.target_tuples["b"]
    assert not flat(target_a, "warmup") and not flat(target_b, "warmup")
    assert flat(target_a) | flat(target_b) == {(s, p) for s in "01" for p in range(2)}
    assert flat(target_b) and not flat(target_a) & flat(target_b)
    # standbys: each stateful task once, on the other process (never beside its active task)
    assert flat(target_a, "standby") == flat(target_b) & {("1", 0), ("1", 1)}
    assert flat(target_b, "standby") == flat(target_a) & {("1", 0), ("1", 1)}


async def test_refused_heartbeats_change_nothing():
    h = Harness(num_warmup_replicas=0)
    await ready(h)
    a = await h.hb("a", 0)
    a = await h.hb("a", a.member_epoch, owned=tasks())
    e = a.member_epoch
    before = (list(h.log.records[0]), dict(h.shard.streams.written[GROUP]))
    other = word_count(epoch=1)
    other = R.StreamsGroupTopologyValue(1, other.subtopologies[:1])
    bad_changelog, regex, bad_index, twice = malformed_topologies()
    cases = [
        (h.hb("a", e + 5, owned=tasks()), FENCED_MEMBER_EPOCH),  # ahead of the member's epoch
        (h.hb("a", e - 1, owned=tasks()), NONE),  # its previous epoch is still accepted
        (h.hb("a", e - 2, owned=tasks()), FENCED_MEMBER_EPOCH),  # behind, and not the previous one
        (h.hb("nobody", e, owned=tasks()), UNKNOWN_MEMBER_ID),
        (h.hb("b", 0, topology=other), INVALID_REQUEST),  # "Topology updates are not supported yet."
        (h.hb("a", e, owned=tasks({"9": [0]})), INVALID_REQUEST),  # "Subtopology 9 does not exist in the topology."
        (h.hb("a", e, owned=tasks({"0": [4]})), INVALID_REQUEST),  # task 4 of 4
        (h.hb("x", 3, group="nope"), 69),  # GROUP_ID_NOT_FOUND
        (h.hb("nobody", -1), UNKNOWN_MEMBER_ID),  # a leave of a member it does not have
        (h.hb("z", -2, instance_id="nope"), UNKNOWN_MEMBER_ID),  # "Instance id nope is unknown."
        (h.hb("a", e, topology=word_count(), owned=tasks()), INVALID_REQUEST),  # only a join brings one
        # malformed topologies in a join: refused before the group is looked at
        (h.hb("b", 0, topology=bad_changelog), STREAMS_INVALID_TOPOLOGY),
        (h.hb("b", 0, topology=twice), STREAMS_INVALID_TOPOLOGY),
        (h.hb("b", 0, topology=bad_index), STREAMS_INVALID_TOPOLOGY),
        (h.hb("b", 0, topology=regex), INVALID_REQUEST),
        (h.hb("b", 0, owned=tasks({"0": [1]})), INVALID_REQUEST),  # "ActiveTasks must be empty when (re-)joining."
        (h.hb("b", 0, rebalance_timeout_ms=-1), INVALID_REQUEST),
    ]
    for call, code in cases:
        r = await call
        assert r.error == code, (r.error, r.message)
    assert (list(h.log.records[0]), dict(h.shard.streams.written[GROUP])) == before
    assert set(h.group.members) == {"a"}


async def test_a_full_group_refuses_a_member():
    h = Harness(num_warmup_replicas=0, max_size=2)  # group.streams.max.size
    await ready(h)
    assert (await h.hb("a", 0)).error == NONE
    assert (await h.hb("b", 0)).error == NONE
    before = (list(h.log.records[0]), dict(h.shard.streams.written[GROUP]), h.group.group_epoch)
    c = await h.hb("c", 0)
    assert (c.error, c.message) == (81, "The streams group has reached its maximum capacity of 2 members.")
    # GROUP_MAX_SIZE_REACHED, nothing kept: no record, the same epoch, the same members
    assert (list(h.log.records[0]), dict(h.shard.streams.written[GROUP]), h.group.group_epoch) == before
    assert set(h.group.members) == {"a", "b"}
    a = h.group.members["a"]
    assert (await h.hb("a", 0)).error == NONE  # a member that is in may join again
    assert set(h.group.members) == {"a", "b"} and h.group.members["a"].process_id == a.process_id


async def test_static_member_leaves_temporarily_and_its_successor_takes_its_tasks():
    h = Harness(num_warmup_replicas=0)
    await ready(h, 2)
    a = await h.hb("a", 0, instance_id="i1")
    a = await h.hb("a", a.member_epoch, owned=tasks(), instance_id="i1")
    held = flat(a.assignment)
    assert (await h.hb("other", 0, instance_id="i1")).error == UNRELEASED_INSTANCE_ID
    assert (await h.hb("other", a.member_epoch, instance_id="i1", owned=tasks())).error == FENCED_INSTANCE_ID
    left = await h.hb("a", -2, instance_id="i1")
    assert left.error == NONE and left.member_epoch == -2
    epoch = h.group.group_epoch
    a2 = await h.hb("a2", 0, instance_id="i1", process_id="p-a")  # (its state dir keeps the process id)
    assert a2.error == NONE and flat(a2.assignment) == held and h.group.group_epoch == epoch
    assert set(h.group.members) == {"a2"}


async def test_session_expiry_and_leave_free_the_tasks():
    h = Harness(num_warmup_replicas=0, session_timeout_ms=45_000)
    await ready(h, 2)
    a = await h.hb("a", 0)
    await h.hb("a", a.member_epoch, owned=tasks())
    await h.hb("b", 0)
    h.clock.advance(46_000)  # neither heartbeats: both expire
    await settle()
    assert h.group.members == {} and h.group.state_name == "Empty"
    c = await h.hb("c", 0)
    assert len(flat(c.assignment)) == 4  # nobody holds them any more: all at once
    gone = await h.hb("c", -1)
    assert gone.error == NONE and gone.member_epoch == -1 and h.group.members == {}


async def test_initial_rebalance_delay_waits_for_the_others():
    h = Harness(num_warmup_replicas=0, initial_rebalance_delay_ms=3000)
    await ready(h, 2)
    h.catalog.add("app-count-changelog", 2)
    h.catalog.add("app-count-repartition", 2)
    a = await h.hb("a", 0)
    # (answered epoch 1, the new group's target epoch, with no tasks and ASSIGNMENT_DELAYED)
    assert (a.member_epoch, flat(a.assignment), h.group.assignment_epoch) == (1, set(), 1)
    assert a.status == [(5, "Assignment delayed due to the configured initial rebalance delay.")]
    b = await h.hb("b", 0)
    assert flat(b.assignment) == set() and h.group.assignment_epoch == 1
    h.clock.advance(3000)
    await settle()
    # the delay is over: one target for both
    assert h.group.assignment_epoch == h.group.group_epoch
    assert len(flat(h.group.target_tuples["a"])) == len(flat(h.group.target_tuples["b"])) == 2


async def test_failed_write_is_undone_and_restart_rebuilds_the_group():
    h = Harness(num_standby_replicas=1, num_warmup_replicas=0)
    await ready(h, 2)
    a = await h.hb("a", 0)
    await h.hb("a", a.member_epoch, owned=tasks())
    await h.hb("b", 0, user_endpoint=("host-b", 8080))
    written = dict(h.shard.streams.written[GROUP])
    members_before = set(h.group.members)
    h.log.failing = True
    r = await h.hb("c", 0)
    assert r.error != NONE
    assert set(h.group.members) == members_before and dict(h.shard.streams.written[GROUP]) == written
    h.log.failing = False
    # a restart brings back the same group from its records
    fresh = h.reload()
    g, g2 = h.group, fresh.group
    assert (g2.group_epoch, g2.assignment_epoch, g2.topology, g2.validated_topology_epoch) == (
        g.group_epoch,
        g.assignment_epoch,
        g.topology,
        g.validated_topology_epoch,
    )
    for m in g.members.values():
        m2 = g2.members[m.member_id]
        assert (m2.member_epoch, m2.assigned, m2.process_id, m2.user_endpoint, m2.state) == (
            m.member_epoch,
            m.assigned,
            m.process_id,
            m.user_endpoint,
            m.state,
        )
        assert g2.target_tuples[m.member_id] == g.target_tuples[m.member_id]
    assert fresh.shard.durable_view()[1][GROUP] == h.shard.durable_view()[1][GROUP]
    # and it goes on: a's next heartbeat is answered from the reloaded state
    a = await fresh.hb("a", g.members["a"].member_epoch, owned=g.members["a"].assigned)
    assert a.error == NONE
