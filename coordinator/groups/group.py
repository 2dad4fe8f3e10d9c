"""What every group type offers the rest of the coordinator (Kafka's `Group` interface).

The offset manager, DescribeGroups/ListGroups and group deletion speak to groups only
through this, so a second type (KIP-848 consumer groups) plugs in beside ClassicGroup.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode as E

from .records import OffsetCommitValue

# Given a committed offset, the time (epoch ms) its retention counts from.
ExpirationBase = Callable[[OffsetCommitValue], int]

# (topic id, partition) -> the error for committing it, or NONE (Kafka's CommitPartitionValidator)
PartitionCheck = Callable[[Any, int], int]


class Group(Protocol):
    group_id: str

    @property
    def group_type(self) -> str:
        """'classic' or 'consumer', as ListGroups v5 reports it."""

    @property
    def state_name(self) -> str:
        """The state as DescribeGroups and ListGroups spell it."""

    @property
    def protocol_type(self) -> str | None: ...

    def is_empty(self) -> bool:
        """No members."""

    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        now_ms: float,
        version: int = 9,
        transactional: bool = False,
    ) -> int | PartitionCheck:
        """The error for a commit (OffsetCommit of `version`, or TxnOffsetCommit) from this
        member in this generation (or epoch), or NONE; or a PartitionCheck when the answer
        depends on the partition (KIP-1251: a consumer group member's older epoch)."""

    def validate_offset_delete(self) -> int:
        """NONE if OffsetDelete may act on this group now."""

    def validate_delete_group(self) -> int:
        """NONE if DeleteGroups may remove this group now."""

    def mark_deleting(self) -> Callable[[], None]:
        """Refuse every request while the group's tombstones are written (Dead); returns
        what undoes it if they cannot be."""

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether a live member consumes the topic (its offsets are kept, not deleted)."""

    def expiration_base(self) -> ExpirationBase | None:
        """How retention counts for this group's offsets now; None: none expire now."""


class SubscribedMember(Protocol):
    subscribed_topic_names: tuple[str, ...]


Member = TypeVar("Member", bound=SubscribedMember)


class ModernGroup(Generic[Member]):
    """What KIP-848 consumer groups and KIP-932 share groups have in common (Kafka's
    ModernGroup): members with epochs, a target assignment computed for the group epoch, what
    changed since the group's records were last handed to the log, and the Group answers that
    are the same for both."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.members: dict[str, Member] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0  # when the target was last computed (wall ms; 0: never)
        self.target: dict[str, dict[uuid.UUID, frozenset[int]]] = {}  # member id -> its target
        self.metadata_hash = 0  # of the subscribed topics' metadata (KIP-1101)
        self.dead = False
        # What changed since its records were last handed to the log: the group's own
        # records (dirty), the members whose records may differ, the members removed.
        self.dirty = False
        self.changed_members: set[str] = set()
        self.removed_members: set[str] = set()

    def is_empty(self) -> bool:
        return not self.members

    def validate_delete_group(self) -> int:
        if self.dead:
            return E.group_id_not_found
        return E.none if not self.members else E.non_empty_group

    def mark_deleting(self) -> Callable[[], None]:
        self.dead = True

        def undo() -> None:
            self.dead = False

        return undo

    def is_subscribed_to(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.members.values())
