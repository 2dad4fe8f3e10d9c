"""A KIP-1071 streams group (Kafka 4.4's StreamsGroup, StreamsGroupMember and
CurrentAssignmentBuilder), and the group as Kafka's records and back.

Members heartbeat with StreamsGroupHeartbeat; the first one's topology becomes the group's.
The coordinator validates it against the topics, assigns tasks (assignor.py) and moves each
member towards its target: a task another member still owns is not handed out until that
member has revoked it (its next heartbeat no longer reports it), as for consumer groups.
States: Empty, NotReady (no topology, or its topics are not ready), Assigning (the group
epoch is ahead of the target's), Reconciling, Stable; Dead while deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol import streams_records as R

from ..group import ExpirationBase
from ..modern.modern_group import (
    STATIC_LEAVE_EPOCH,
    StaticGroup,
    StaticMemberBase,
    identity_of,
    member_keys_of,
    rebuilt,
    replay_members,
)
from .topology import ConfiguredTopology

# subtopology id -> partitions
Tasks = dict[str, frozenset[int]]

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = STATIC_LEAVE_EPOCH

# Kafka's streams MemberState
STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS, UNKNOWN = 0, 1, 2, 127


@dataclass
class TasksTuple:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def contains_any(self, other: TasksTuple) -> bool:
        return any(
            mine.get(s, frozenset()) & ps
            for mine, theirs in (
                (self.active, other.active),
                (self.standby, other.standby),
                (self.warmup, other.warmup),
            )
            for s, ps in theirs.items()
        )

    def copy(self) -> TasksTuple:
        return TasksTuple(dict(self.active), dict(self.standby), dict(self.warmup))


@dataclass
class StreamsMember(StaticMemberBase):
    """Kafka's StreamsGroupMember."""

    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: TasksTuple = field(default_factory=TasksTuple)
    pending_revocation: TasksTuple = field(default_factory=TasksTuple)
    # (subtopology, partition) -> the epoch at which the active task was assigned (KIP-1251)
    active_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    # last reported changelog offsets and end offsets: (subtopology, partition) -> offset
    task_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    task_end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    session_deadline: float = 0.0
    session_timer: Any = None
    rebalance_timer: Any = None

    # group.SubscribedMember: a streams member subscribes through the group's topology
    subscribed_topic_names: tuple[str, ...] = ()


class StreamsGroup(StaticGroup[StreamsMember]):
    """Implements group.Group for the `streams` type."""

    kind = "streams"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        # Kafka 4.4 starts a streams group at group epoch 1 with a target at epoch 1
        # (TargetAssignmentMetadata.INITIAL): a first member waiting out the initial rebalance
        # delay is answered epoch 1 with no tasks, not 0 (which its client would take for a
        # join it need not repeat).
        self.group_epoch = self.assignment_epoch = 1
        self.topology: R.StreamsGroupTopologyValue | None = None
        self.configured: ConfiguredTopology | None = None  # in memory only, as Kafka's
        self.validated_topology_epoch = -1
        self.last_assignment_configs: tuple[tuple[str, str], ...] | None = None
        self.target_tuples: dict[str, TasksTuple] = {}  # member id -> its target
        self.endpoint_information_epoch = 0
        self.shutdown_request_member_id: str | None = None
        self.stored_description_epoch = -1
        self.failed_description_epoch = -1
        # the time before which no target is computed for a new group (streams.initial.rebalance.delay.ms)
        self.initial_delay_until = 0.0

    # group.Group ----------------------------------------------------------------------

    def live_state(self) -> str:
        if self.topology is None or self.configured is None or not self.configured.is_ready():
            return "NotReady"
        return self.epoch_state(STABLE)

    def commit_epoch_check(self, member: StreamsMember, generation: int) -> Any:
        # Kafka's StreamsGroup.validateOffsetCommit (a negative epoch without a member is an
        # admin, kafka-streams-groups --reset-offsets, on an empty group: ModernGroup's)
        if generation == member.member_epoch:
            return E.none
        if generation > member.member_epoch:
            return E.stale_member_epoch
        epochs = member.active_epochs

        # KIP-1251: an older epoch commits the partitions of the tasks the member still runs
        # and got at or before it (a commit racing the heartbeat that moved it on).
        def check(topic_id: Any, partition: int) -> int:
            for (_subtopology, p), assigned_at in epochs.items():
                if p == partition and assigned_at <= generation:
                    return E.none
            return E.stale_member_epoch

        return check

    def fetch_epoch_error(self, member: StreamsMember, epoch: int) -> int:
        return E.none if epoch == member.member_epoch else E.stale_member_epoch

    def expiration_base(self) -> ExpirationBase | None:
        # Kafka's StreamsGroup: offsets count from their commit (those of topics the group
        # reads while it has members are kept: is_subscribed_to)
        return _commit_time

    def is_subscribed_to(self, topic: str) -> bool:
        # Kafka's StreamsGroup.isSubscribedToTopic: a topic the configured topology reads
        if not self.members or self.configured is None or self.configured.subtopologies is None:
            return False
        return any(
            topic in s.source_topics or topic in s.repartition_source_topics
            for s in self.configured.subtopologies.values()
        )

    # membership -----------------------------------------------------------------------

    def remove_member(self, member: StreamsMember) -> None:
        for timer in (member.session_timer, member.rebalance_timer):
            if timer is not None:
                timer.cancel()
        member.session_timer = member.rebalance_timer = None
        self.members.pop(member.member_id, None)
        self.target_tuples.pop(member.member_id, None)
        self.forget_instance(member)
        self.removed_members.add(member.member_id)
        self.changed_members.discard(member.member_id)

    def owners(
        self,
    ) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], set[str]], dict[tuple[str, int], set[str]]]:
        """Which process holds each task now, as active (assigned or still to revoke), and
        which processes hold it as standby and as warm-up (StreamsGroup's
        currentActiveTaskProcessId and currentStandby/WarmupTaskProcessIds)."""
        active: dict[tuple[str, int], str] = {}
        standby: dict[tuple[str, int], set[str]] = {}
        warmup: dict[tuple[str, int], set[str]] = {}
        for m in self.members.values():
            for tasks in (m.assigned, m.pending_revocation):
                for s, ps in tasks.active.items():
                    for p in ps:
                        active[(s, p)] = m.process_id
                for s, ps in tasks.standby.items():
                    for p in ps:
                        standby.setdefault((s, p), set()).add(m.process_id)
                for s, ps in tasks.warmup.items():
                    for p in ps:
                        warmup.setdefault((s, p), set()).add(m.process_id)
        return active, standby, warmup


def _commit_time(value: Any) -> int:
    return int(value.commit_timestamp)


# reconciliation (CurrentAssignmentBuilder) --------------------------------------------


def _difference(
    current: Tasks, target: Tasks, unreleased: Any
) -> tuple[dict[str, set[int]], dict[str, set[int]], dict[str, set[int]], bool]:
    kept: dict[str, set[int]] = {}
    revoke: dict[str, set[int]] = {}
    add: dict[str, set[int]] = {}
    has_unreleased = False
    for s in set(current) | set(target):
        cur, tgt = current.get(s, frozenset()), target.get(s, frozenset())
        if cur & tgt:
            kept[s] = set(cur & tgt)
        if cur - tgt:
            revoke[s] = set(cur - tgt)
        pending = {p for p in tgt - cur if not unreleased(s, p)}
        if len(pending) < len(tgt - cur):
            has_unreleased = True
        if pending:
            add[s] = pending
    return kept, revoke, add, has_unreleased


def _frozen(tasks: dict[str, set[int]]) -> Tasks:
    return {s: frozenset(ps) for s, ps in tasks.items() if ps}


def reconcile(
    group: StreamsGroup,
    member: StreamsMember,
    target_epoch: int,
    target: TasksTuple,
    owned: TasksTuple | None,
) -> None:
    """Kafka's streams CurrentAssignmentBuilder.build, on `member` in place. `owned` is what
    the member's heartbeat reports it holds (None: not reported)."""
    if member.state == STABLE:
        if member.member_epoch == target_epoch:
            return
        _next(group, member, member.member_epoch, target_epoch, target, owned)
    elif member.state == UNREVOKED_TASKS:
        if owned is None or owned.contains_any(member.pending_revocation):
            return
        _next(group, member, member.member_epoch + 1, target_epoch, target, owned)
    elif member.state == UNRELEASED_TASKS:
        _next(group, member, member.member_epoch, target_epoch, target, owned)
    else:
        _next(group, member, target_epoch, target_epoch, target, owned)


def _next(
    group: StreamsGroup,
    member: StreamsMember,
    epoch: int,
    target_epoch: int,
    target: TasksTuple,
    owned: TasksTuple | None,
) -> None:
    active_owner, standby_owners, warmup_owners = group.owners()
    me = member.process_id

    def holds_elsewhere(s: str, p: int) -> bool:
        # on this process as a standby or warm-up: it must let go of that first
        return me in standby_owners.get((s, p), ()) or me in warmup_owners.get((s, p), ())

    def active_unreleased(s: str, p: int) -> bool:
        return active_owner.get((s, p)) is not None or holds_elsewhere(s, p)

    def other_unreleased(s: str, p: int) -> bool:
        return active_owner.get((s, p)) == me or holds_elsewhere(s, p)

    # (a task the member holds itself is in its current assignment: not in `pending` below)
    a = _difference(member.assigned.active, target.active, active_unreleased)
    st = _difference(member.assigned.standby, target.standby, other_unreleased)
    w = _difference(member.assigned.warmup, target.warmup, other_unreleased)
    kept = TasksTuple(_frozen(a[0]), _frozen(st[0]), _frozen(w[0]))
    revoke = TasksTuple(_frozen(a[1]), _frozen(st[1]), _frozen(w[1]))
    add = TasksTuple(_frozen(a[2]), _frozen(st[2]), _frozen(w[2]))
    unreleased = a[3] or st[3] or w[3]
    old_epoch = member.member_epoch
    if not revoke.is_empty() and (owned is None or owned.contains_any(revoke)):
        # revoke first: the member stays at its epoch until it no longer reports them
        member.state = UNREVOKED_TASKS
        new_epoch = epoch
        member.assigned, member.pending_revocation = kept, revoke
    else:
        assigned = kept
        if not add.is_empty():
            assigned = TasksTuple(
                _union(kept.active, add.active), _union(kept.standby, add.standby), _union(kept.warmup, add.warmup)
            )
        member.state = UNRELEASED_TASKS if unreleased else STABLE
        new_epoch = target_epoch
        member.assigned, member.pending_revocation = assigned, TasksTuple()
    if new_epoch != old_epoch:
        member.previous_member_epoch = old_epoch
        member.member_epoch = new_epoch
    # each active task remembers the epoch it was assigned at (KIP-1251 commit fencing)
    epochs = {}
    for s, ps in member.assigned.active.items():
        for p in ps:
            epochs[(s, p)] = member.active_epochs.get((s, p), member.member_epoch)
    for s, ps in member.pending_revocation.active.items():
        for p in ps:
            epochs[(s, p)] = member.active_epochs.get((s, p), member.member_epoch)
    member.active_epochs = epochs


def _union(a: Tasks, b: Tasks) -> Tasks:
    out = dict(a)
    for s, ps in b.items():
        out[s] = out.get(s, frozenset()) | ps
    return out


# persistence: the group as Kafka's records, and back --------------------------------


def tasks_record(tasks: Tasks) -> R.Tasks:
    return tuple((s, tuple(sorted(ps))) for s, ps in sorted(tasks.items()) if ps)


def tasks_of(record: R.Tasks) -> Tasks:
    return {s: frozenset(ps) for s, ps in record if ps}


def _epochs_record(tasks: Tasks, epochs: dict[tuple[str, int], int], default: int) -> R.TaskEpochs:
    return tuple(tuple(epochs.get((s, p), default) for p in sorted(ps)) for s, ps in sorted(tasks.items()) if ps)


member_keys = member_keys_of(R, "StreamsGroup")


def member_metadata(m: StreamsMember) -> R.StreamsGroupMemberMetadataValue:
    return R.StreamsGroupMemberMetadataValue(
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.rebalance_timeout_ms,
        m.topology_epoch,
        m.process_id,
        None if m.user_endpoint is None else R.Endpoint(*m.user_endpoint),
        tuple(sorted(m.client_tags.items())),
    )


def records_of(group: StreamsGroup, member_ids: Any = None) -> dict[Any, Any]:
    """The records that describe the group now (only those of `member_ids` if given)."""
    g = group.group_id
    out: dict[Any, Any] = {
        R.StreamsGroupMetadataKey(g): R.StreamsGroupMetadataValue(
            group.group_epoch,
            group.metadata_hash,
            group.validated_topology_epoch,
            group.last_assignment_configs,
            group.stored_description_epoch,
            group.failed_description_epoch,
        ),
        R.StreamsGroupTargetAssignmentMetadataKey(g): R.StreamsGroupTargetAssignmentMetadataValue(
            group.assignment_epoch, group.assignment_timestamp
        ),
    }
    if group.topology is not None:
        out[R.StreamsGroupTopologyKey(g)] = group.topology
    members = (
        group.members.values() if member_ids is None else [group.members[i] for i in member_ids if i in group.members]
    )
    for m in members:
        out[R.StreamsGroupMemberMetadataKey(g, m.member_id)] = member_metadata(m)
        target = group.target_tuples.get(m.member_id)
        if target is not None:
            out[R.StreamsGroupTargetAssignmentMemberKey(g, m.member_id)] = R.StreamsGroupTargetAssignmentMemberValue(
                tasks_record(target.active), tasks_record(target.standby), tasks_record(target.warmup)
            )
        a, pr = m.assigned, m.pending_revocation
        out[R.StreamsGroupCurrentMemberAssignmentKey(g, m.member_id)] = R.StreamsGroupCurrentMemberAssignmentValue(
            m.member_epoch,
            m.previous_member_epoch,
            m.state,
            tasks_record(a.active),
            tasks_record(a.standby),
            tasks_record(a.warmup),
            tasks_record(pr.active),
            tasks_record(pr.standby),
            tasks_record(pr.warmup),
            _epochs_record(a.active, m.active_epochs, m.member_epoch),
            _epochs_record(pr.active, m.active_epochs, m.member_epoch),
        )
    return out


def group_from_records(group_id: str, stored: dict[Any, Any]) -> StreamsGroup | None:
    """Rebuild a group from its replayed records (None if they hold no group epoch)."""
    key = R.StreamsGroupMetadataKey(group_id)
    if key not in stored:
        return None
    group, meta = rebuilt(StreamsGroup, group_id, stored, key, R.StreamsGroupTargetAssignmentMetadataKey(group_id))
    group.metadata_hash = meta.metadata_hash
    group.validated_topology_epoch = meta.validated_topology_epoch
    group.last_assignment_configs = meta.last_assignment_configs
    group.stored_description_epoch = meta.stored_description_topology_epoch
    group.failed_description_epoch = meta.failed_description_topology_epoch
    group.topology = stored.get(R.StreamsGroupTopologyKey(group_id))

    def member(member_id: str, v: R.StreamsGroupMemberMetadataValue) -> StreamsMember:
        return StreamsMember(
            member_id,
            *identity_of(v),
            v.rebalance_timeout_ms,
            v.topology_epoch,
            v.process_id,
            None if v.user_endpoint is None else (v.user_endpoint.host, v.user_endpoint.port),
            dict(v.client_tags),
        )

    def target(member_id: str, value: R.StreamsGroupTargetAssignmentMemberValue) -> None:
        group.target_tuples[member_id] = TasksTuple(
            tasks_of(value.active_tasks), tasks_of(value.standby_tasks), tasks_of(value.warmup_tasks)
        )

    def current(m: StreamsMember, c: R.StreamsGroupCurrentMemberAssignmentValue) -> None:
        m.member_epoch, m.previous_member_epoch, m.state = c.member_epoch, c.previous_member_epoch, c.state
        m.assigned = TasksTuple(tasks_of(c.active_tasks), tasks_of(c.standby_tasks), tasks_of(c.warmup_tasks))
        m.pending_revocation = TasksTuple(
            tasks_of(c.active_tasks_pending_revocation),
            tasks_of(c.standby_tasks_pending_revocation),
            tasks_of(c.warmup_tasks_pending_revocation),
        )
        for tasks, epochs in (
            (c.active_tasks, c.active_task_epochs),
            (c.active_tasks_pending_revocation, c.active_pending_epochs),
        ):
            for i, (s, ps) in enumerate(tasks):
                these = epochs[i] if i < len(epochs) else None
                for j, p in enumerate(ps):
                    m.active_epochs[(s, p)] = these[j] if these is not None else c.member_epoch

    replay_members(group, stored, R, "StreamsGroup", member, target, current)
    return group
