"""The base of KIP-848 consumer groups and KIP-932 share groups (Kafka's ModernGroup)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode as E

from ..group import CommitFrom


class SubscribedMember(Protocol):
    member_id: str
    subscribed_topic_names: tuple[str, ...]


class StaticMember(SubscribedMember, Protocol):
    member_id: str
    instance_id: str | None
    member_epoch: int
    previous_member_epoch: int


@dataclass
class StaticMemberBase:
    """The fields a consumer and a streams group member (consumer_group.ConsumerMember,
    streams_group.StreamsMember) begin with: who it is and where it runs."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""


def identity_of(value: Any) -> tuple[str | None, str | None, str, str]:
    """StaticMemberBase's fields after the member id, as a member metadata record of a
    consumer or streams group holds them."""
    return value.instance_id, value.rack_id, value.client_id, value.client_host


Member = TypeVar("Member", bound=SubscribedMember)
Static = TypeVar("Static", bound=StaticMember)

INITIAL_EPOCH = 1
STATIC_LEAVE_EPOCH = -2  # a static member left for now: it keeps its assignment for its session


class ModernGroup(Generic[Member]):
    """What KIP-848 consumer groups and KIP-932 share groups have in common (Kafka's
    ModernGroup): members with epochs, a target assignment computed for the group epoch, what
    changed since the group's records were last handed to the log, and the Group answers that
    are the same for both."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.members: dict[str, Member] = {}
        # Kafka 4.4 starts a modern group at group epoch 1 with a target at epoch 1
        # (ModernGroup's constructor, TargetAssignmentMetadata.INITIAL), written to no record:
        # a group's first bump makes it 2, and a group that never bumps writes no epoch.
        self.group_epoch = INITIAL_EPOCH
        self.assignment_epoch = INITIAL_EPOCH
        self.assignment_timestamp = 0  # when the target was last computed (wall ms; 0: never)
        self.target: dict[str, dict[uuid.UUID, frozenset[int]]] = {}  # member id -> its target
        self.metadata_hash = 0  # of the subscribed topics' metadata (KIP-1101)
        self.dead = False
        # What changed since its records were last handed to the log: the group's own
        # records (dirty), the members whose records may differ, the members removed.
        self.dirty = False
        self.changed_members: set[str] = set()
        self.removed_members: set[str] = set()
        # written first with the next change: the tombstone of the classic group it replaces
        self.extra_records: list[tuple[Any, Any]] = []

    # "consumer", "share" or "streams": both the group type ListGroups reports and the
    # protocol type (a modern group speaks only its own protocol)
    kind: str

    @property
    def group_type(self) -> str:
        return self.kind

    @property
    def protocol_type(self) -> str:
        return self.kind

    def is_empty(self) -> bool:
        return not self.members

    def add_member(self, member: Member) -> None:
        self.members[member.member_id] = member

    def validate_delete_group(self) -> int:
        if self.dead:
            return E.group_id_not_found
        return E.none if not self.members else E.non_empty_group

    def mark_deleting(self) -> Callable[[], None]:
        self.dead = True

        def undo() -> None:
            self.dead = False

        return undo

    @property
    def state_name(self) -> str:
        """Dead once deleted, Empty with no member, else as the group type says (`live_state`)."""
        if self.dead:
            return "Dead"
        if not self.members:
            return "Empty"
        return self.live_state()

    def live_state(self) -> str:
        """The state of a live group with members."""
        raise NotImplementedError

    def epoch_state(self, stable: object) -> str:
        """The state of a group with members, by its epochs (Kafka's ModernGroup states):
        Assigning while its target lags the group epoch, Reconciling while a member is not
        at the target's epoch or its state is not `stable`, else Stable."""
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != stable:  # type: ignore[attr-defined]  # every modern member has an epoch and a state
                return "Reconciling"
        return "Stable"

    def validate_offset_commit(self, commit: CommitFrom, now_ms: float) -> Any:
        """Kafka's {Consumer,Streams}Group.validateOffsetCommit: a commit with a negative
        epoch and no member comes from an admin client or a consumer without group
        management, allowed while the group is empty; a member's is checked against its
        epoch (`commit_epoch_check`)."""
        if self.dead:
            return E.coordinator_not_available
        if commit.generation < 0 and not self.members:
            return E.none
        member = self.members.get(commit.member_id)
        if member is None:
            return E.unknown_member_id
        if not commit.transactional and commit.version < 9 and not self.commits_before_v9(member):
            return E.unsupported_version  # members of the new protocols commit with v9+
        return self.commit_epoch_check(member, commit.generation)

    def commits_before_v9(self, member: Member) -> bool:
        """Whether the member may commit with OffsetCommit before v9 (a classic member)."""
        return False

    def commit_epoch_check(self, member: Member, epoch: int) -> Any:
        """NONE, the error, or a PartitionCheck for a commit in this epoch (KIP-1251)."""
        raise NotImplementedError

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        if self.dead:
            return E.coordinator_not_available
        if member_epoch < 0 and not member_id:
            return E.none  # an admin or a consumer outside group management
        member = self.members.get(member_id or "")
        if member is None:
            return E.unknown_member_id
        return self.fetch_epoch_error(member, member_epoch)

    def fetch_epoch_error(self, member: Member, epoch: int) -> int:
        """The error for an OffsetFetch in this epoch, or NONE."""
        raise NotImplementedError

    def validate_offset_delete(self) -> int:
        return E.none

    def is_subscribed_to(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())


class StaticGroup(ModernGroup[Static]):
    """A modern group whose members may be static (KIP-345: consumer and streams groups):
    an instance id names at most one member, and a new member of that instance takes its
    predecessor's place."""

    def __init__(self, group_id: str) -> None:
        super().__init__(group_id)
        self.static_members: dict[str, str] = {}  # instance id -> member id

    def add_member(self, member: Static) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def forget_instance(self, member: Static) -> None:
        """The member leaves: its instance id no longer names it (it may name a successor)."""
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member.member_id:
            del self.static_members[member.instance_id]

    def remove_member(self, member: Static) -> None:
        raise NotImplementedError

    def leave_static(self, member: Static) -> None:
        """The static member leaves for now: it keeps its assignment for its session timeout,
        awaiting its next incarnation."""
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = STATIC_LEAVE_EPOCH
        self.dirty = True
        self.changed_members.add(member.member_id)

    def replace_static(self, old: Static, new: Static) -> None:
        """`new`, the static member's new incarnation under the same instance id, takes `old`'s
        place; the caller carries over what `new` keeps of `old` (Kafka's replace*Member)."""
        self.remove_member(old)
        self.add_member(new)
        self.changed_members.add(new.member_id)


def static_successor(make: Callable[..., Static], old: Static, new_id: str, carried: tuple[str, ...]) -> Static:
    """A static member's new incarnation under `new_id` (Kafka's replace*Member): `make(new_id)`
    at `old`'s previous epoch, taking over the fields named in `carried` (a dict is copied: the
    successor's changes must not reach the member it replaces)."""
    kept = {name: dict(v) if type(v) is dict else v for name in carried for v in (getattr(old, name),)}
    return make(new_id, member_epoch=old.previous_member_epoch, previous_member_epoch=old.previous_member_epoch, **kept)


G = TypeVar("G", bound=ModernGroup[Any])

# A member's records (Kafka's removeMember tombstones them in the reverse order).
MEMBER_ROLES = ("MemberMetadata", "TargetAssignmentMember", "CurrentMemberAssignment")


def record_types(records: ModuleType, group: str, *roles: str) -> tuple[Any, ...]:
    """A group type's record key types in these roles. Kafka names the records of every
    modern group type alike (ConsumerGroupMemberMetadataKey, ShareGroupMemberMetadataKey,
    StreamsGroupMemberMetadataKey, ...), so one list of roles serves them all."""
    return tuple(getattr(records, f"{group}{role}Key") for role in roles)


# A heartbeat's records, in the order Kafka appends them (a group type may add its own after).
HEARTBEAT_ROLES = (
    "MemberMetadata",
    "Metadata",
    "TargetAssignmentMember",
    "TargetAssignmentMetadata",
    "CurrentMemberAssignment",
)


def heartbeat_order(records: ModuleType, group: str, *more_roles: str) -> dict[type, int]:
    """A manager's `record_order`: the group type's key types by HEARTBEAT_ROLES, then more_roles."""
    return {t: i for i, t in enumerate(record_types(records, group, *HEARTBEAT_ROLES, *more_roles))}


def initial_values(records: ModuleType, group: str) -> dict[type, Any]:
    """A manager's `initial_values`: the group's epoch and its target's epoch records as Kafka
    holds them before they are first written (INITIAL_EPOCH, in memory only)."""
    roles = ("Metadata", "TargetAssignmentMetadata")
    return {getattr(records, f"{group}{r}Key"): getattr(records, f"{group}{r}Value")(INITIAL_EPOCH) for r in roles}


def replay_members(
    group: ModernGroup[Any],
    stored: dict[Any, Any],
    records: ModuleType,
    prefix: str,
    member: Callable[[str, Any], Any],
    target: Callable[[str, Any], None],
    current: Callable[[Any, Any], None],
) -> None:
    """A group rebuilt from its records gets its members back: each member metadata record
    makes one (`member(member id, value)`), then the target and current assignment records of
    the members so made are read (`target(member id, value)`, `current(member, value)`); those
    of a member without a metadata record are ignored, as Kafka's replay does."""
    metadata_key, target_key, current_key = record_types(records, prefix, *MEMBER_ROLES)
    for key, value in stored.items():
        if type(key) is metadata_key:
            group.add_member(member(key.member_id, value))
    for key, value in stored.items():
        if type(key) is target_key and key.member_id in group.members:
            target(key.member_id, value)
        elif type(key) is current_key and key.member_id in group.members:
            current(group.members[key.member_id], value)


def member_keys_of(records: ModuleType, group: str) -> Callable[[str, str], tuple[Any, Any, Any]]:
    """member_keys(group id, member id) of a group type: the keys of a member's records."""
    metadata, target, current = record_types(records, group, *MEMBER_ROLES)

    def member_keys(group_id: str, member_id: str) -> tuple[Any, Any, Any]:
        return metadata(group_id, member_id), target(group_id, member_id), current(group_id, member_id)

    return member_keys


def rebuilt(group_type: type[G], group_id: str, stored: dict[Any, Any], metadata: Any, target: Any) -> tuple[G, Any]:
    """A group rebuilt from its replayed records, its epochs set: the group epoch from its
    metadata record `stored[metadata]`, its target's epoch and time from `stored[target]`
    (records it may not have: a group still at its initial epochs wrote neither, as Kafka's);
    and that metadata record (None if absent), for the rest of it."""
    meta = stored.get(metadata)
    group = group_type(group_id)
    if meta is not None:
        group.group_epoch = meta.epoch
    target_meta = stored.get(target)
    if target_meta is not None:
        group.assignment_epoch = target_meta.assignment_epoch
        group.assignment_timestamp = target_meta.assignment_timestamp
    return group, meta
