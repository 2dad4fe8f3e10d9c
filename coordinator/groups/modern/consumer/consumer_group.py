"""A KIP-848 consumer group (Kafka's ConsumerGroup): members with epochs, a target
assignment computed by the server, and each member's current assignment on its way to it.

Epochs: the group epoch moves whenever what the assignment depends on changes (members,
subscriptions, the subscribed topics' partitions); the target assignment is recomputed
for it (assignment epoch = group epoch); a member's epoch reaches the assignment epoch
once it has revoked what it had to (reconciliation.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, cast

from kio.schema.errors import ErrorCode as E

from protocol import consumer_records as R

from ...metadata_hash import metadata_hash
from ...group import ExpirationBase
from ..modern_group import StaticGroup, StaticMemberBase, identity_of, member_keys_of, rebuilt, replay_members
from ..reconciliation import Assignment, MemberState

LEAVE_EPOCH = -1


class _Built:
    """A member's (or a group's) records as last built, each with what it was built from: a
    record whose inputs compare equal is the same record, so the value already built (and
    written: changed_records then finds it identical to the written one) is returned again
    rather than built and compared field by field at every write of the group."""

    __slots__ = ("keys", "metadata", "target", "current")

    def __init__(self) -> None:
        self.keys: Any = None
        self.metadata: tuple[Any, Any] = ((), None)
        self.target: tuple[Any, Any] = ((), None)
        self.current: tuple[Any, Any] = ((), None)


@dataclass
class ConsumerMember(StaticMemberBase):
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # topic id -> partition -> the member epoch at which it got the partition, for every
    # partition it owns (KIP-1251: a commit at an epoch since then is its own). Keyed by
    # topic first, as `owners`: a topic id hashes in Python, a partition number in C.
    assignment_epochs: dict[uuid.UUID, dict[int, int]] = field(default_factory=dict)
    session_deadline: float = 0.0
    session_timer: Any = None
    revocation_deadline: float | None = None  # when it must have revoked by (rebalance timeout)
    # A member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this group:
    # its session timeout and JoinGroup protocols; None for ConsumerGroupHeartbeat members.
    classic: R.ClassicMemberMetadata | None = None
    # A classic member must send JoinGroup (after REBALANCE_IN_PROGRESS) or SyncGroup (after
    # its join) by this time (its rebalance timeout), or it is fenced, as Kafka's join/sync timeouts.
    classic_deadline: float | None = None
    # Its records as last built (records_of), reused while what they are built from is unchanged.
    built: _Built = field(default_factory=lambda: _Built(), compare=False, repr=False)

    @property
    def session_timeout_ms(self) -> int | None:
        return self.classic.session_timeout_ms if self.classic is not None else None

    def owns(self) -> Assignment:
        out = dict(self.assigned)
        for t, ps in self.pending_revocation.items():
            out[t] = out.get(t, frozenset()) | ps
        return out


def _release(of_topic: dict[int, str] | None, partitions: frozenset[int], member_id: str) -> None:
    """The member no longer owns these partitions of one topic (`of_topic`: partition -> owner)."""
    if of_topic:
        for p in partitions:
            if of_topic.get(p) == member_id:
                del of_topic[p]


class ConsumerGroup(StaticGroup[ConsumerMember]):
    """Implements group.Group for the `consumer` type."""

    kind = "consumer"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        # topic name -> (id, partitions) of the subscribed topics the target was computed from,
        # with the KIP-1101 hash kept with it (the group metadata record's MetadataHash: a group
        # replayed from a Kafka 4.1+ log knows only the hash until its topics are looked up)
        self._subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        # topic id -> partition -> the member owning it (assigned or pending revocation)
        self.owners: dict[uuid.UUID, dict[int, str]] = {}
        # (topic names, regexes) the members subscribe to; None: to be recomputed
        self._subscriptions: tuple[frozenset[str], frozenset[str]] | None = None
        # The classic group this one was upgraded from, until the upgrade is on disk.
        self.converted_from: Any = None
        # regex -> the topic names it matched when last resolved, and (the topic metadata's
        # version, the resolution's start in wall ms) for its ConsumerGroupRegularExpression
        # record; the topic image's version then; the scheduled resolution, if any
        # (consumer_manager)
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        self.regex_resolutions: dict[str, tuple[int, int]] = {}
        self.regex_version: Any = None
        self.regex_refresh: Any = None
        self.built = _Built()  # (keys: its two group-level keys; metadata: both values)

    @property
    def subscription_metadata(self) -> dict[str, tuple[uuid.UUID, int]]:
        return self._subscription_metadata

    @subscription_metadata.setter
    def subscription_metadata(self, metadata: dict[str, tuple[uuid.UUID, int]]) -> None:
        self._subscription_metadata = metadata
        self.metadata_hash = metadata_hash(metadata)

    # ownership ------------------------------------------------------------------------

    def set_owned(self, member: ConsumerMember, assigned: Assignment, pending: Assignment) -> None:
        """The member now owns these; a partition it was not assigned before (a new one, or
        one it was revoking and gets back) is assigned at its current epoch, one it keeps, or
        starts revoking, keeps its assignment epoch (Kafka's CurrentAssignmentBuilder). Only
        the topics whose partitions changed are walked: a member revoking most of what it
        owns still owns it (pending revocation), so nothing moves until it acknowledges."""
        owners = self.owners
        member_id = member.member_id
        before = member.owns()
        was_assigned = member.assigned
        member.assigned, member.pending_revocation = assigned, pending
        after = member.owns()
        for t, was in before.items():
            if t not in after:
                _release(owners.get(t), was, member_id)
        old = member.assignment_epochs
        epochs = {}
        epoch = max(member.member_epoch, 0)
        for t, ps in after.items():
            was = before.get(t, frozenset())
            kept = old.get(t)
            now = assigned.get(t)
            back = now - was_assigned.get(t, frozenset()) if now else None  # assigned anew
            if ps == was and kept is not None and not back:
                epochs[t] = kept  # (never changed in place: shared with the member's past self)
                continue
            if ps != was:
                _release(owners.get(t), was - ps, member_id)
                of_topic = owners.get(t)
                if of_topic is None:
                    of_topic = owners[t] = {}
                for p in ps - was:
                    of_topic[p] = member_id
            kept = kept or {}
            epochs[t] = {p: epoch if back and p in back else kept.get(p, epoch) for p in ps}
        member.assignment_epochs = epochs

    def owned_elsewhere(self, member_id: str) -> Callable[[uuid.UUID, int], bool]:
        owners = self.owners
        return lambda t, p: owners.get(t, {}).get(p, member_id) != member_id

    def remove_member(self, member: ConsumerMember) -> None:
        self.removed_members.add(member.member_id)
        self.dirty = True
        self._subscriptions = None
        self.set_owned(member, {}, {})
        self.members.pop(member.member_id, None)
        self.target.pop(member.member_id, None)
        self.forget_instance(member)
        if member.session_timer is not None:
            member.session_timer.cancel()

    def supports_classic_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's rule for a classic member joining: protocol type `consumer`, and one of its
        protocols supported by every classic member already in the group."""
        if protocol_type != "consumer" or not names:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return any(all(any(n == name for n, _ in c.supported_protocols) for c in classic) for name in names)

    def all_classic_except(self, member_id: str) -> bool:
        """Whether every member but `member_id` (itself a consumer-protocol member) is classic."""
        leaving = self.members.get(member_id)
        return (
            leaving is not None
            and leaving.classic is None
            and all(m.classic is not None for m in self.members.values() if m is not leaving)
        )

    def subscriptions(self) -> tuple[frozenset[str], frozenset[str]]:
        """Every topic name and regex a member subscribes to (cached: read at each heartbeat)."""
        if self._subscriptions is None:
            names: set[str] = set()
            regexes: set[str] = set()
            for m in self.members.values():
                names.update(m.subscribed_topic_names)
                if m.subscribed_topic_regex:
                    regexes.add(m.subscribed_topic_regex)
            self._subscriptions = (frozenset(names), frozenset(regexes))
        return self._subscriptions

    def subscriptions_changed(self) -> None:
        self._subscriptions = None

    def subscriptions_added(self, member: ConsumerMember) -> None:
        """A member joined: its subscription joins the cached union (members joining at once
        would otherwise each walk every member)."""
        if self._subscriptions is None:
            return
        names, regexes = self._subscriptions
        regex = member.subscribed_topic_regex
        if not names.issuperset(member.subscribed_topic_names):
            names = names.union(member.subscribed_topic_names)
        if regex and regex not in regexes:
            regexes = regexes | {regex}
        self._subscriptions = (names, regexes)

    # the Group interface --------------------------------------------------------------

    def live_state(self) -> str:
        return self.epoch_state(MemberState.STABLE)

    def commits_before_v9(self, member: ConsumerMember) -> bool:
        return member.classic is not None

    def commit_epoch_check(self, member: ConsumerMember, epoch: int) -> Any:
        return _commit_epoch_check(member, epoch)

    def fetch_epoch_error(self, member: ConsumerMember, epoch: int) -> int:
        return _epoch_error(member, epoch)

    def expiration_base(self) -> ExpirationBase | None:
        # Kafka: a consumer group's offsets count from their commit (those of topics a
        # member subscribes to are kept: is_subscribed_to).
        return _commit_time


def _epoch_error(member: ConsumerMember, epoch: int) -> int:
    """A commit's or fetch's epoch against the member's: a classic member sends its epoch as
    its generation (ILLEGAL_GENERATION), a consumer-protocol one as its epoch (STALE_MEMBER_EPOCH)."""
    if epoch == member.member_epoch:
        return E.none
    return E.illegal_generation if member.classic is not None else E.stale_member_epoch


def _commit_epoch_check(member: ConsumerMember, epoch: int) -> Any:
    """Kafka 4.3's commit check for a consumer-protocol member (KIP-1251): its current epoch
    commits anything; a newer one is STALE_MEMBER_EPOCH; an older one (a commit racing the
    heartbeat that moved the member on) commits each partition the member still owns and got
    at or before that epoch, and is STALE_MEMBER_EPOCH for the others."""
    if epoch == member.member_epoch or member.classic is not None:
        return _epoch_error(member, epoch)
    if epoch > member.member_epoch:
        return E.stale_member_epoch
    epochs = member.assignment_epochs

    def check(topic_id: Any, partition: int) -> int:
        assigned_at = epochs.get(topic_id, {}).get(partition)
        return E.none if assigned_at is not None and assigned_at <= epoch else E.stale_member_epoch

    return check


def _commit_time(value: Any) -> int:
    return cast(int, value.commit_timestamp)


# persistence: the group as Kafka's records, and back --------------------------------

_STATE_BYTE = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
    MemberState.UNKNOWN: 127,
}
_BYTE_STATE = {v: k for k, v in _STATE_BYTE.items()}


def _parts(a: Assignment) -> R.Partitions:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(a.items(), key=lambda kv: kv[0].bytes) if ps)


def _assignment(parts: R.Partitions) -> Assignment:
    return {t: frozenset(ps) for t, ps in parts if ps}


def _epochs_of(parts: R.Partitions, epochs: dict[uuid.UUID, dict[int, int]], default: int) -> R.Epochs:
    """The assignment epochs aligned with `parts` (KIP-1251's AssignmentEpochs)."""
    out = []
    for t, ps in parts:
        of_topic = epochs.get(t, {})
        out.append(tuple(of_topic.get(p, default) for p in ps))
    return tuple(out)


def _read_epochs(
    out: dict[uuid.UUID, dict[int, int]], parts: R.Partitions, epochs: R.Epochs, default: int
) -> dict[uuid.UUID, dict[int, int]]:
    """A record's assignment epochs added to `out`; a partition written without one (before
    Kafka 4.3) counts as assigned at the member's epoch, as Kafka reads such records."""
    for i, (t, ps) in enumerate(parts):
        these = epochs[i] if i < len(epochs) else None
        of_topic = out.setdefault(t, {})
        of_topic.update(zip(ps, these) if these is not None else dict.fromkeys(ps, default))
    return out


member_keys = member_keys_of(R, "ConsumerGroup")


def records_of(group: ConsumerGroup, member_ids: Any = None) -> dict[Any, Any]:
    """The records that describe the group now (only those of `member_ids` if given):
    what a restart must replay to rebuild it."""
    g = group.group_id
    built = group.built
    if built.keys is None:
        built.keys = (R.ConsumerGroupMetadataKey(g), R.ConsumerGroupTargetAssignmentMetadataKey(g))
    epochs = (group.group_epoch, group.metadata_hash, group.assignment_epoch, group.assignment_timestamp)
    if built.metadata[0] != epochs:
        built.metadata = (
            epochs,
            (
                R.ConsumerGroupMetadataValue(group.group_epoch, group.metadata_hash),
                R.ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch, group.assignment_timestamp),
            ),
        )
    out: dict[Any, Any] = dict(zip(built.keys, built.metadata[1]))
    members = (
        group.members.values() if member_ids is None else [group.members[i] for i in member_ids if i in group.members]
    )
    for m in members:
        mine = m.built
        if mine.keys is None:
            mine.keys = member_keys(g, m.member_id)
        metadata_key, target_key, current_key = mine.keys
        subscription = (
            m.instance_id,
            m.rack_id,
            m.client_id,
            m.client_host,
            m.subscribed_topic_names,
            m.subscribed_topic_regex or "",  # (Kafka writes no regex as an empty string)
            m.rebalance_timeout_ms,
            m.server_assignor,
            m.classic,
        )
        if mine.metadata[0] != subscription:
            mine.metadata = subscription, R.ConsumerGroupMemberMetadataValue(*subscription)
        out[metadata_key] = mine.metadata[1]
        target = group.target.get(m.member_id)
        if target is not None:  # (a member that joined since the last target has none yet, as in Kafka)
            if mine.target[0] != (target,):
                mine.target = (target,), R.ConsumerGroupTargetAssignmentMemberValue(_parts(target))
            out[target_key] = mine.target[1]
        current = (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation)
        if mine.current[0] != current + (m.assignment_epochs,):
            assigned, pending, default = _parts(m.assigned), _parts(m.pending_revocation), max(m.member_epoch, 0)
            mine.current = (
                current + (m.assignment_epochs,),
                R.ConsumerGroupCurrentMemberAssignmentValue(
                    m.member_epoch,
                    m.previous_member_epoch,
                    _STATE_BYTE[m.state],
                    assigned,
                    pending,
                    _epochs_of(assigned, m.assignment_epochs, default),
                    _epochs_of(pending, m.assignment_epochs, default),
                ),
            )
        out[current_key] = mine.current[1]
    # Each subscribed regex as last resolved (Kafka's resolvedRegularExpressions: one no
    # member subscribes to any more is tombstoned, consumer_manager.dropped_keys).
    if group.resolved_regexes:
        regexes = group.subscriptions()[1]
        resolutions = group.regex_resolutions
        for x, topics in group.resolved_regexes.items():
            when = resolutions.get(x)
            if x in regexes and when is not None:
                out[R.ConsumerGroupRegularExpressionKey(g, x)] = R.ConsumerGroupRegularExpressionValue(
                    tuple(sorted(topics)), *when
                )
    return out


def group_from_records(group_id: str, stored: dict[Any, Any]) -> ConsumerGroup | None:
    """Rebuild a group from its replayed records (None if there are none: a group that
    never moved from its initial epochs has only its members' records, as in Kafka)."""
    if not stored:
        return None
    key = R.ConsumerGroupMetadataKey(group_id)
    group, meta = rebuilt(ConsumerGroup, group_id, stored, key, R.ConsumerGroupTargetAssignmentMetadataKey(group_id))
    partitions = stored.get(R.ConsumerGroupPartitionMetadataKey(group_id))
    if partitions is not None:  # a log written before Kafka 4.1 (KIP-1101) names the topics
        group.subscription_metadata = {t.topic_name: (t.topic_id, t.num_partitions) for t in partitions.topics}
    if meta is not None and meta.metadata_hash:
        group.metadata_hash = meta.metadata_hash

    def member(member_id: str, value: R.ConsumerGroupMemberMetadataValue) -> ConsumerMember:
        return ConsumerMember(
            member_id,
            *identity_of(value),
            tuple(value.subscribed_topic_names),
            value.subscribed_topic_regex or None,
            value.server_assignor,
            value.rebalance_timeout_ms,
            classic=value.classic_member_metadata,
        )

    def target(member_id: str, value: R.ConsumerGroupTargetAssignmentMemberValue) -> None:
        group.target[member_id] = _assignment(value.topic_partitions)

    def current(m: ConsumerMember, value: R.ConsumerGroupCurrentMemberAssignmentValue) -> None:
        m.member_epoch, m.previous_member_epoch = value.member_epoch, value.previous_member_epoch
        m.state = _BYTE_STATE.get(value.state, MemberState.UNKNOWN)
        default = max(m.member_epoch, 0)
        group.set_owned(m, _assignment(value.assigned_partitions), _assignment(value.partitions_pending_revocation))
        m.assignment_epochs = _read_epochs(  # (as written: set_owned would count them assigned anew)
            _read_epochs({}, value.assigned_partitions, value.assigned_epochs, default),
            value.partitions_pending_revocation,
            value.pending_revocation_epochs,
            default,
        )

    replay_members(group, stored, R, "ConsumerGroup", member, target, current)
    for key, value in stored.items():
        if type(key) is R.ConsumerGroupRegularExpressionKey:
            group.resolved_regexes[key.regex] = frozenset(value.topics)
            group.regex_resolutions[key.regex] = (value.version, value.timestamp)
    return group
