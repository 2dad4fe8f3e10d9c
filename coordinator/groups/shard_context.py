"""What a group manager needs of the shard that owns it (GroupShard), as protocols.

A shard (Kafka's GroupCoordinatorShard) builds its managers (classic, consumer, share,
migration, offsets) and passes itself; a manager sees it only through ShardContext: the
groups of the partition, the clock, the write path of the partition's log, and the other
managers' operations it hands work to (a classic member of a consumer group is served by
the migration, a downgrade converts back through the consumer manager). So managers import
no shard, and the shard the managers.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol

from .classic.classic_group import ClassicGroup, SyncResult
from .clock import Clock
from .modern.consumer.consumer_group import ConsumerGroup, ConsumerMember
from .group import Group
from .offset_store import OffsetStore
from .records import Event
from .topic_image import TopicImage

# Called once a write is durable (NONE) or failed (the client's error code).
Complete = Callable[[int], object]


class Migration(Protocol):
    """Classic members in consumer groups, and groups changing protocol (GroupMigration)."""

    def join(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> Any: ...

    def sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult: ...

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int) -> int: ...

    def leave(
        self, group: ConsumerGroup, members: list[tuple[str, str | None]], answer: Callable[[Any], None]
    ) -> Any: ...

    def upgrade(self, classic: ClassicGroup) -> ConsumerGroup | None: ...

    def retire_classic(self, classic: ClassicGroup) -> None: ...

    def undo_upgrade(self, group: ConsumerGroup) -> None: ...

    def can_downgrade(self, group: ConsumerGroup, leaving: ConsumerMember) -> bool: ...

    def downgrade(self, group: ConsumerGroup, leaving: ConsumerMember, done: Callable[[int], None]) -> None: ...


class ConsumerGroups(Protocol):
    """What other managers ask of the consumer-group manager (ConsumerGroupManager)."""

    @property
    def image(self) -> TopicImage: ...

    def convert_to_classic(self, group: ConsumerGroup, then: Callable[[int], None]) -> None: ...


class ShardContext(Protocol):
    """The shard as its managers see it."""

    @property
    def partition(self) -> int: ...

    @property
    def groups(self) -> dict[str, Group]: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def offsets(self) -> OffsetStore: ...

    @property
    def runtime(self) -> object:
        """Read for its optional settings (group_configs, share_config) only."""
        ...

    @property
    def consumer(self) -> ConsumerGroups: ...

    @property
    def migration(self) -> Migration: ...

    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the shard serves on (futures of answers given later)."""
        ...

    def write(self, records: list[Event], complete: Complete) -> None: ...

    def write_txn(self, producer_id: int, producer_epoch: int, records: list[Event], complete: Complete) -> None: ...

    def after_pending(self, complete: Complete) -> None: ...

    def group_tombstones(self, group: Group) -> list[Event]: ...
