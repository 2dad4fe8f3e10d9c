"""What a group manager needs of the shard that owns it (GroupShard), as protocols.

A shard (Kafka's GroupCoordinatorShard) builds its managers (classic, consumer, share,
migration, offsets) and passes itself; a manager sees it only through ShardContext: the
groups of the partition, the clock, and the other managers' operations it hands work to (a
classic member of a consumer group is served by the migration, a downgrade converts back
through the consumer manager). So managers import no shard, and the shard the managers.

A manager never writes: an operation returns a CoordinatorResult, its records and its
response, and the runtime appends, replays, answers and undoes (coordinator/runtime.py). ShardContext
has no write path on purpose (tests/test_layout.py keeps managers off the log).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from .classic.classic_group import ClassicGroup, JoinRequest, SyncRequest, SyncResult
from .clock import Clock
from .modern.consumer.consumer_group import ConsumerGroup, ConsumerMember
from .group import Group
from .offset_store import OffsetStore
from .records import Event
from ..runtime import Complete as Complete, CoordinatorResult as CoordinatorResult
from .topic_image import TopicImage
from .group_configs import GroupConfigs
from .settings import ShareGroupConfig, StreamsGroupConfig


class Migration(Protocol):
    """Classic members in consumer groups, and groups changing protocol (GroupMigration)."""

    def join(self, out: CoordinatorResult, group: ConsumerGroup, r: JoinRequest) -> Any: ...

    def sync(self, group: ConsumerGroup, r: SyncRequest) -> SyncResult: ...

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int) -> int: ...

    def leave(self, out: CoordinatorResult, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> Any: ...

    def upgrade(self, classic: ClassicGroup) -> ConsumerGroup | None: ...

    def retire_classic(self, classic: ClassicGroup) -> None: ...

    def undo_upgrade(self, group: ConsumerGroup) -> None: ...

    def can_downgrade(self, group: ConsumerGroup, leaving: ConsumerMember) -> bool: ...

    def downgrade(self, out: CoordinatorResult, group: ConsumerGroup, leaving: ConsumerMember) -> None: ...


class ConsumerGroups(Protocol):
    """What other managers ask of the consumer-group manager (ConsumerGroupManager)."""

    @property
    def image(self) -> TopicImage: ...

    def convert_to_classic(self, out: CoordinatorResult, group: ConsumerGroup, then: Complete) -> None: ...


class GroupSettings(Protocol):
    """What the group managers read of the runtime: the group types' broker settings and the
    GROUP config resource's per-group ones (None: every group has the broker's)."""

    share_config: ShareGroupConfig
    streams_config: StreamsGroupConfig
    group_configs: GroupConfigs | None


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
    def runtime(self) -> GroupSettings:
        """Read for the group types' settings (share_config, streams_config, group_configs) only."""
        ...

    @property
    def consumer(self) -> ConsumerGroups: ...

    @property
    def migration(self) -> Migration: ...

    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the shard serves on (futures of answers given later)."""
        ...

    def group_tombstones(self, group: Group) -> list[Event]: ...
