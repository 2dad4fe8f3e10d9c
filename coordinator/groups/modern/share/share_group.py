"""A KIP-932 share group (Kafka's ShareGroup, ShareGroupMember and SimpleAssignor).

Members heartbeat with ShareGroupHeartbeat; the coordinator assigns partitions, several
members per partition when there are more members than partitions, and a member moves
to its target at once (Kafka's ShareGroupAssignmentBuilder: nothing is revoked first,
since a share-partition may have many consumers and each record is locked on its own).
Which records a member gets is the share-partition's business (coordinator/share/).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol import share_records as R
from protocol.consumer_records import Partitions

from ...group import CommitFrom, ExpirationBase
from ..modern_group import ModernGroup, member_keys_of, rebuilt, replay_members

Assignment = dict[uuid.UUID, frozenset[int]]
LEAVE_EPOCH = -1


@dataclass
class ShareMember:
    """Kafka's ShareGroupMember."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    session_deadline: float = 0.0
    session_timer: Any = None


class ShareGroup(ModernGroup[ShareMember]):
    """Implements group.Group for the `share` type (states Empty, Stable; Dead while deleted)."""

    kind = "share"

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        # topic name -> (id, partitions) of the subscribed topics the target was computed from
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        # Kafka's ShareGroupStatePartitionMetadata: topic id -> (name, partitions) whose
        # share-partition state is being initialized / is initialized, and topic id -> name of
        # those whose state is being deleted; None until the group has the record.
        self.initializing: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        self.initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        self.deleting: dict[uuid.UUID, str] = {}
        self.has_state_metadata = False
        # topic id -> when (clock ms) its partitions were last set initializing: in memory only,
        # as Kafka's InitMapValue timestamp (a restart counts from the replay)
        self.initializing_since: dict[uuid.UUID, float] = {}

    # group.Group ----------------------------------------------------------------------

    def live_state(self) -> str:
        return "Stable"

    def validate_offset_commit(self, commit: CommitFrom, now_ms: float) -> int:
        # Kafka's ShareGroup.validateOffsetCommit: "Group X is not a consumer group."
        return E.group_id_not_found

    def validate_offset_delete(self) -> int:
        return E.group_id_not_found

    def expiration_base(self) -> ExpirationBase | None:
        return None  # a share group commits no offsets

    # membership -----------------------------------------------------------------------

    def subscribed_names(self) -> set[str]:
        return {n for m in self.members.values() for n in m.subscribed_topic_names}

    def remove_member(self, member: ShareMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None
        self.members.pop(member.member_id, None)
        self.target.pop(member.member_id, None)
        self.removed_members.add(member.member_id)
        self.changed_members.discard(member.member_id)

    def assigned_to(self, topic_id: uuid.UUID, partition: int) -> list[str]:
        return [m.member_id for m in self.members.values() if partition in m.assigned.get(topic_id, ())]


# the assignor -------------------------------------------------------------------------


def simple_assign(
    members: dict[str, frozenset[uuid.UUID]],
    counts: dict[uuid.UUID, int],
    previous: dict[str, Assignment],
    assignable: dict[uuid.UUID, frozenset[int]] | None = None,
) -> dict[str, Assignment]:
    """Kafka's SimpleAssignor. When every member subscribes to the same topics
    (SimpleHomogeneousAssignmentBuilder): each partition goes to ceil(members / partitions)
    members ("desired sharing"), the partitions handed out are spread so that no member has
    more than one more than another, and members keep what they had where that stays
    balanced. With different subscriptions (SimpleHeterogeneousAssignmentBuilder) the same
    rule holds topic by topic among the members subscribed to each topic (`_topic_assign`).
    `assignable`: the partitions of each topic that may be assigned (Kafka assigns only those
    whose share-partition state is initialized); None: all `counts` of them."""
    if not members:
        return {}

    def parts_of(topic_id: uuid.UUID) -> list[int]:
        if assignable is None:
            return list(range(counts.get(topic_id, 0)))
        return sorted(p for p in assignable.get(topic_id, ()) if p < counts.get(topic_id, 0))

    subscriptions = set(members.values())
    out: dict[str, Assignment] = {m: {} for m in members}
    if len(subscriptions) == 1:
        topic_ids = sorted(next(iter(subscriptions)), key=lambda t: t.bytes)
        partitions = [(t, p) for t in topic_ids for p in parts_of(t)]
        for m, tps in _homogeneous(sorted(members), partitions, previous).items():
            for t, p in tps:
                out[m][t] = out[m].get(t, frozenset()) | {p}
        return out
    for topic_id in sorted({t for ts in subscriptions for t in ts}, key=lambda t: t.bytes):
        subscribers = sorted(m for m, ts in members.items() if topic_id in ts)
        for m, ps in _topic_assign(topic_id, parts_of(topic_id), subscribers, previous).items():
            if ps:
                out[m][topic_id] = frozenset(ps)
    return out


def _desired_counts(subscribers: list[str], sharing: int, n_parts: int) -> dict[str, int]:
    """TopicAssignmentPartialBuilder's desiredAssignmentCounts, with its double arithmetic
    (sharing * partitions / subscribers, then the difference of successive ceilings), so the
    counts are Kafka's to the last rounding."""
    precise = sharing * n_parts / float(len(subscribers))
    return {m: math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i, m in enumerate(subscribers)}


def _topic_assign(
    topic_id: uuid.UUID, parts: list[int], subscribers: list[str], previous: dict[str, Assignment]
) -> dict[str, list[int]]:
    """Kafka's SimpleHeterogeneousAssignmentBuilder.TopicAssignmentPartialBuilder: one topic
    among the members subscribed to it. Each partition wants `sharing` = ceil(subscribers /
    partitions) members and each subscriber its desired count (sharing * partitions spread
    over the subscribers, differing by at most one). In Kafka's order: keep the subscribers'
    previous partitions of the topic, revoke from members over their count, revoke from
    partitions shared more than wanted, then hand the partitions still short of members to
    the members still short of partitions, round robin. Kafka's round robin gives up on every
    later partition once a pass finds no member able to take one; here each partition gets a
    full pass of its own, so no partition of a subscribed topic is left without a member."""
    by_member: dict[str, list[int]] = {m: [] for m in subscribers}
    n_parts = len(parts)
    if n_parts <= 0 or not subscribers:
        return by_member
    sharing = -(-len(subscribers) // n_parts)
    desired = _desired_counts(subscribers, sharing, n_parts)
    by_partition: dict[int, list[str]] = {p: [] for p in parts}
    for m in subscribers:  # revokeUnassignablePartitions: only what is still assignable is kept
        for p in sorted(previous.get(m, {}).get(topic_id, ())):
            if p in by_partition:
                by_partition[p].append(m)
                by_member[m].append(p)
    for m in subscribers:  # revokeOverfilledMembers
        while len(by_member[m]) > desired[m]:
            by_partition[by_member[m].pop()].remove(m)
    for p, holders in by_partition.items():  # revokeOversharedPartitions
        while len(holders) > sharing:
            by_member[holders.pop()].remove(p)
    unfilled = [m for m in subscribers if len(by_member[m]) < desired[m]]  # assignRemainingPartitions
    at = 0
    for p in parts:
        holders = by_partition[p]
        misses = 0
        while len(holders) < sharing and unfilled and misses < len(unfilled):
            at %= len(unfilled)
            m = unfilled[at]
            if m in holders:
                at, misses = at + 1, misses + 1
                continue
            holders.append(m)
            by_member[m].append(p)
            misses = 0
            if len(by_member[m]) >= desired[m]:
                unfilled.pop(at)
            else:
                at += 1
        if not unfilled:
            break
    return by_member


def _homogeneous(
    member_ids: list[str], partitions: list[tuple[uuid.UUID, int]], previous: dict[str, Assignment]
) -> dict[str, list[tuple[uuid.UUID, int]]]:
    n_members, n_parts = len(member_ids), len(partitions)
    result: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in member_ids}
    if n_parts == 0:
        return result
    sharing = -(-n_members // n_parts)
    total = sharing * n_parts
    # member i wants ceil(total*(i+1)/M) - ceil(total*i/M): counts differ by at most one
    desired = {m: -(-total * (i + 1) // n_members) - -(-total * i // n_members) for i, m in enumerate(member_ids)}
    holders: dict[tuple[uuid.UUID, int], set[str]] = {tp: set() for tp in partitions}
    for m in member_ids:  # stickiness: keep what is still assignable, within the quotas
        for t, ps in sorted(previous.get(m, {}).items(), key=lambda kv: kv[0].bytes):
            for p in sorted(ps):
                tp = (t, p)
                if tp in holders and len(result[m]) < desired[m] and len(holders[tp]) < sharing:
                    holders[tp].add(m)
                    result[m].append(tp)
    for tp in partitions:  # then the partitions still short of members, to the members short of partitions
        while len(holders[tp]) < sharing:
            short = [m for m in member_ids if m not in holders[tp] and len(result[m]) < desired[m]]
            if not short:
                break
            m = max(short, key=lambda x: desired[x] - len(result[x]))
            holders[tp].add(m)
            result[m].append(tp)
    return result


def start_initializing(group: ShareGroup, now_ms: float, retry_ms: float) -> dict[uuid.UUID, frozenset[int]]:
    """Kafka's subscribedTopicsChangeMap and addInitializingTopicsRecords at a heartbeat: the
    partitions of the subscribed topics whose share-partition state is neither initialized nor
    being initialized (for less than `retry_ms`: an initialization that never finished is
    tried again) become initializing (a topic being deleted leaves `deleting`). Their state is
    initialized after the heartbeat (finish_initializing), and they are assigned only then.
    The partitions set initializing, by topic (none: the record is unchanged)."""
    started: dict[uuid.UUID, frozenset[int]] = {}
    for name, (topic_id, count) in group.subscription_metadata.items():
        known = group.initialized.get(topic_id, (name, frozenset()))[1]
        since = group.initializing_since.get(topic_id)
        if topic_id in group.initializing and since is not None and now_ms - since < retry_ms:
            known = known | group.initializing[topic_id][1]
        if known and len(known) >= count:
            continue
        new = frozenset(range(count)) - known
        started[topic_id] = new
        group.initializing[topic_id] = (name, group.initializing.get(topic_id, (name, frozenset()))[1] | new)
        group.initializing_since[topic_id] = now_ms
        group.deleting.pop(topic_id, None)
    if started:
        group.has_state_metadata = True
    return started


def finish_initializing(
    group: ShareGroup, partitions: dict[uuid.UUID, frozenset[int]], initialized: bool = True
) -> bool:
    """Kafka's initializeShareGroupState once the share-partition state is initialized: these
    partitions, if still initializing, move to the initialized topics; or, with `initialized`
    False, its uninitializeShareGroupState once that state could not be written: they leave
    the initializing topics (the next heartbeat initializes them again). True if that changed
    the group's record."""
    changed = False
    for topic_id, ps in partitions.items():
        entry = group.initializing.get(topic_id)
        if entry is None or not (ps & entry[1]):
            continue
        name, pending = entry
        done = ps & pending
        if initialized:
            group.initialized[topic_id] = (name, group.initialized.get(topic_id, (name, frozenset()))[1] | done)
        if pending - done:
            group.initializing[topic_id] = (name, pending - done)
        else:
            del group.initializing[topic_id]
            group.initializing_since.pop(topic_id, None)
        changed = True
    return changed


def initialized_assignment_pending(group: ShareGroup) -> bool:
    """Kafka's initializedAssignmentPending: an initialized topic the group subscribes to
    whose initialized partitions are not what the target assigns (partitions initialized
    since the target was computed): the group epoch moves to assign them."""
    if not group.members or not group.initialized:
        return False
    subscribed = group.subscribed_names()
    if not subscribed:
        return False
    targeted: dict[uuid.UUID, frozenset[int]] = {}
    for assignment in group.target.values():
        for t, ps in assignment.items():
            targeted[t] = targeted.get(t, frozenset()) | ps
    return any(name in subscribed and targeted.get(t) != ps for t, (name, ps) in group.initialized.items())


def assignable(group: ShareGroup) -> dict[uuid.UUID, frozenset[int]]:
    """The partitions the assignor may hand out: those whose state is initialized (Kafka's
    topicAssignablePartitionsMap)."""
    return {t: ps for t, (_, ps) in group.initialized.items()}


def initialize_partitions(group: ShareGroup, partitions: dict[uuid.UUID, tuple[str, frozenset[int]]]) -> bool:
    """AlterShareGroupOffsets (completeAlterShareGroupOffsets, then initializeShareGroupState):
    the altered partitions' state is initialized at their new start. True if that changed
    the group's record."""
    changed = False
    for topic_id, (name, ps) in partitions.items():
        have = group.initialized.get(topic_id, (name, frozenset()))[1]
        if ps <= have and topic_id not in group.deleting:
            continue
        group.initialized[topic_id] = (name, have | ps)
        group.initializing.pop(topic_id, None)
        group.deleting.pop(topic_id, None)
        changed = True
    if changed:
        group.has_state_metadata = True
    return changed


def forget_topics(group: ShareGroup, topic_ids: set[uuid.UUID]) -> bool:
    """DeleteShareGroupOffsets (sharePartitionsEligibleForOffsetDeletion, then
    completeDeleteShareGroupOffsets once the state is gone), and the cleanup when topics are
    deleted (maybeCleanupShareGroupState): the topics leave the record. True if that changed it."""
    changed = False
    for states in (group.initializing, group.initialized, group.deleting):
        for topic_id in topic_ids & states.keys():
            del states[topic_id]
            changed = True
    for topic_id in topic_ids:
        group.initializing_since.pop(topic_id, None)
    return changed


def _state_metadata(group: ShareGroup) -> R.ShareGroupStatePartitionMetadataValue:
    def info(states: dict[uuid.UUID, tuple[str, frozenset[int]]]) -> R.TopicPartitionsInfo:
        return tuple(
            (t, name, tuple(sorted(ps))) for t, (name, ps) in sorted(states.items(), key=lambda kv: kv[0].bytes)
        )

    return R.ShareGroupStatePartitionMetadataValue(
        info(group.initializing),
        info(group.initialized),
        tuple((t, name) for t, name in sorted(group.deleting.items(), key=lambda kv: kv[0].bytes)),
    )


# persistence: the group as Kafka's records, and back --------------------------------


def _parts(a: Assignment) -> Partitions:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(a.items(), key=lambda kv: kv[0].bytes) if ps)


def _assignment(parts: Partitions) -> Assignment:
    return {t: frozenset(ps) for t, ps in parts if ps}


member_keys = member_keys_of(R, "ShareGroup")


def records_of(group: ShareGroup, member_ids: Any = None) -> dict[Any, Any]:
    """The records that describe the group now (only those of `member_ids` if given)."""
    g = group.group_id
    out: dict[Any, Any] = {
        R.ShareGroupMetadataKey(g): R.ShareGroupMetadataValue(group.group_epoch, group.metadata_hash),
        R.ShareGroupTargetAssignmentMetadataKey(g): R.ShareGroupTargetAssignmentMetadataValue(
            group.assignment_epoch, group.assignment_timestamp
        ),
    }
    if group.has_state_metadata:
        out[R.ShareGroupStatePartitionMetadataKey(g)] = _state_metadata(group)
    members = (
        group.members.values() if member_ids is None else [group.members[i] for i in member_ids if i in group.members]
    )
    for m in members:
        out[R.ShareGroupMemberMetadataKey(g, m.member_id)] = R.ShareGroupMemberMetadataValue(
            m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names
        )
        target = group.target.get(m.member_id)
        if target is not None:  # (a member that joined since the last target has none yet, as in Kafka)
            out[R.ShareGroupTargetAssignmentMemberKey(g, m.member_id)] = R.ShareGroupTargetAssignmentMemberValue(
                _parts(target)
            )
        out[R.ShareGroupCurrentMemberAssignmentKey(g, m.member_id)] = R.ShareGroupCurrentMemberAssignmentValue(
            m.member_epoch, m.previous_member_epoch, 0, _parts(m.assigned)
        )
    return out


def group_from_records(group_id: str, stored: dict[Any, Any]) -> ShareGroup | None:
    """Rebuild a group from its replayed records (None if there are none)."""
    if not stored:
        return None
    key = R.ShareGroupMetadataKey(group_id)
    group, meta = rebuilt(ShareGroup, group_id, stored, key, R.ShareGroupTargetAssignmentMetadataKey(group_id))
    if meta is not None:
        group.metadata_hash = meta.metadata_hash
    states = stored.get(R.ShareGroupStatePartitionMetadataKey(group_id))
    if states is not None:
        group.has_state_metadata = True
        group.initializing = {t: (name, frozenset(ps)) for t, name, ps in states.initializing_topics}
        group.initialized = {t: (name, frozenset(ps)) for t, name, ps in states.initialized_topics}
        group.deleting = dict(states.deleting_topics)

    def member(member_id: str, value: R.ShareGroupMemberMetadataValue) -> ShareMember:
        return ShareMember(
            member_id, value.rack_id, value.client_id, value.client_host, tuple(value.subscribed_topic_names)
        )

    def target(member_id: str, value: R.ShareGroupTargetAssignmentMemberValue) -> None:
        group.target[member_id] = _assignment(value.topic_partitions)

    def current(m: ShareMember, value: R.ShareGroupCurrentMemberAssignmentValue) -> None:
        m.member_epoch, m.previous_member_epoch = value.member_epoch, value.previous_member_epoch
        m.assigned = _assignment(value.assigned_partitions)

    replay_members(group, stored, R, "ShareGroup", member, target, current)
    return group
