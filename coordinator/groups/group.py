"""What every group type offers the rest of the coordinator (Kafka's `Group` interface).

The offset manager, DescribeGroups/ListGroups and group deletion speak to groups only
through this, so every type (classic/, modern/consumer/, modern/share/, and streams/ to
come) plugs in beside the others.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol

from .records import OffsetCommitValue

# Given a committed offset, the time (epoch ms) its retention counts from.
ExpirationBase = Callable[[OffsetCommitValue], int]

# (topic id, partition) -> the error for committing it, or NONE (Kafka's CommitPartitionValidator)
PartitionCheck = Callable[[Any, int], int]


class CommitFrom(NamedTuple):
    """Who commits, as validate_offset_commit reads it: a member (or none: an admin, a consumer
    outside group management) in a generation (a modern group's member epoch), with an
    OffsetCommit of `version` or a TxnOffsetCommit (`transactional`). (A tuple: one is made
    per commit, which a frozen dataclass's interpreted __init__ made several times dearer.)"""

    member_id: str
    instance_id: str | None
    generation: int
    version: int = 9
    transactional: bool = False


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

    def validate_offset_commit(self, commit: CommitFrom, now_ms: float) -> int | PartitionCheck:
        """The error for this commit, or NONE; or a PartitionCheck when the answer depends on
        the partition (KIP-1251: a consumer group member's older epoch)."""

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
