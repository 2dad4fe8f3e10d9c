"""What a group manager needs of the shard that owns it (GroupShard), as protocols.

A shard (Kafka's GroupCoordinatorShard) builds its managers (classic, consumer, share,
migration, offsets) and passes itself; a manager sees it only through ShardContext: the
groups of the partition, the clock, and the other managers' operations it hands work to (a
classic member of a consumer group is served by the migration, a downgrade converts back
through the consumer manager). So managers import no shard, and the shard the managers.

A manager never writes: an operation returns a CoordinatorResult, its records and its
response, and the runtime appends, replays, answers and undoes (runtime.py). ShardContext
has no write path on purpose (tests/test_layout.py keeps managers off the log).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol

from .classic.classic_group import ClassicGroup, JoinRequest, SyncRequest, SyncResult
from .clock import Clock
from .modern.consumer.consumer_group import ConsumerGroup, ConsumerMember
from .group import Group
from .offset_store import OffsetStore
from .records import Event
from .topic_image import TopicImage
from .group_configs import GroupConfigs
from .settings import ShareGroupConfig, StreamsGroupConfig

# Called once a write is durable (NONE) or failed (the client's error code). What it returns,
# if a CoordinatorResult, is a follow-up operation: the runtime appends its records too.
Complete = Callable[[int], object]


class CoordinatorResult:
    """What an operation returns (Kafka's CoordinatorResult): its writes and its response.

    Each write is records plus `then(error)`, what the operation does once they are durable
    and replayed (NONE) or could not be written (the client's error): live state that waits
    for the disk (a classic group going Stable, a static member's new id) and futures it
    settles. A wait (`wait`) is a `then` with no records: it runs once every write queued
    before it on the shard is durable. The runtime appends the writes in order, each its own
    append (a later one fails with an earlier one), and answers `response` once they are all
    durable; a response that is a future (a join phase, the leader's assignment) is answered
    when it settles. An operation with nothing to write returns a result without writes: its
    answer still waits for the shard's pending writes.
    """

    __slots__ = ("writes", "response")

    def __init__(self, response: Any = None) -> None:
        # (records, then, (producer id, producer epoch) of a transactional write or None);
        # records None: a wait
        self.writes: list[tuple[list[Event] | None, Complete | None, tuple[int, int] | None]] = []
        self.response = response

    def add(self, records: list[Event], then: Complete | None = None) -> None:
        self.writes.append((records, then, None))

    def add_txn(self, producer_id: int, producer_epoch: int, records: list[Event], then: Complete | None) -> None:
        """Transactional offsets: one transactional batch of this producer, replayed as
        pending offsets until its marker."""
        self.writes.append((records, then, (producer_id, producer_epoch)))

    def wait(self, then: Complete) -> None:
        self.writes.append((None, then, None))


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
