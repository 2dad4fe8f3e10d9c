"""GroupShard: the state machine of one `__consumer_offsets` partition (Kafka's
GroupCoordinatorShard). It owns the groups that hash to the partition, of every type,
their committed offsets and their timers; the runtime owns the log and routes to it.

`replay` is the only way durable state changes: the records of every write once they
are on disk, and the whole partition at startup. It sets what a restart brings back
(offsets, a classic group's stored record) and nothing else; `on_loaded` then turns the
loaded records into live groups, as Kafka's onLoaded does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Container

from kio.schema.errors import ErrorCode as E

from .classic_group import ClassicGroup
from .classic_manager import ClassicGroupManager, GroupConfig
from .clock import Clock
from .consumer_group import ConsumerGroup
from .consumer_manager import ConsumerGroupConfig, ConsumerGroupManager
from .group import Group
from .offset_manager import OffsetManager
from .offset_store import OffsetStore
from .records import (
    Event, GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, TxnMarkerKey, TxnOffsetCommitKey,
)
from .state import GroupState
from protocol.consumer_records import KEY_TYPES as CONSUMER_KEYS
from protocol.share_records import KEY_TYPES as SHARE_KEYS
from .share_group import ShareGroup
from .share_manager import ShareGroupManager
from .migration import GroupMigration
from .topic_image import TopicImage

if TYPE_CHECKING:
    from .runtime import CoordinatorRuntime

log = logging.getLogger(__name__)

# complete(error): runs once a write's records are durable and replayed (error NONE), or
# with the error for the client if they could not be written (nothing was replayed).
Complete = Callable[[int], object]


class GroupShard:
    def __init__(self, partition: int, runtime: CoordinatorRuntime, clock: Clock, config: GroupConfig,
                 offsets: OffsetConfig, consumer: ConsumerGroupConfig | None = None,
                 image: TopicImage | None = None) -> None:
        self.partition = partition
        self.runtime = runtime
        # Why the shard cannot serve (its log partition is offline: corrupt data), or None;
        # every request for its groups is then answered NOT_COORDINATOR.
        self.offline: str | None = None
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.classic = ClassicGroupManager(self, clock, config)
        self.consumer = ConsumerGroupManager(self, clock, consumer or ConsumerGroupConfig(), image or TopicImage())
        self.share = ShareGroupManager(self, clock, image or TopicImage())
        self.migration = GroupMigration(self)
        self.offset_manager = OffsetManager(self, offsets.metadata_max_bytes, offsets.retention_ms,
                                            offsets.existing_partitions)

    def write(self, records: list[Event], complete: Complete) -> None:
        """Append the records to this shard's partition; replay them once durable, then
        complete(NONE); if the append fails, complete(the client's error) and nothing changes."""
        self.runtime.write(self, records, complete)

    def write_txn(self, producer_id: int, producer_epoch: int, records: list[Event], complete: Complete) -> None:
        """The same for a transactional offset commit: one transactional batch of this
        producer; replayed as pending offsets."""
        self.runtime.write_txn(self, producer_id, producer_epoch, records, complete)

    def write_marker(self, producer_id: int, producer_epoch: int, commit: bool, complete: Complete) -> None:
        """The producer's transaction marker: its pending offsets here applied or dropped."""
        self.runtime.write_marker(self, producer_id, producer_epoch, commit, complete)

    # replay ---------------------------------------------------------------------------

    def replay(self, key: object, value: object) -> None:
        if type(key) is OffsetCommitKey:
            if value is None:
                self.offsets.remove(key.group, key.topic, key.partition)
                return
            if key.group not in self.groups:
                # A commit from a consumer without group management: Kafka keeps such
                # offsets under a memberless classic group ("simple group").
                self.groups[key.group] = ClassicGroup(key.group, self.clock.wall())
            self.offsets.put(key.group, key.topic, key.partition, value)  # type: ignore[arg-type]
        elif type(key) is GroupMetadataKey:
            group = self.groups.get(key.group)
            if value is None:
                if type(group) is ClassicGroup:  # (not the consumer group it just became)
                    self._remove_group(key.group)
                return
            if type(group) is ConsumerGroup:
                return  # a classic group's record from before it became a consumer group
            if group is None:
                group = self.groups[key.group] = ClassicGroup(key.group, value.current_state_timestamp)  # type: ignore[attr-defined]
            group.stored = value  # type: ignore[union-attr]
        elif type(key) in CONSUMER_KEYS:
            self.consumer.replay(key, value)
        elif type(key) in SHARE_KEYS:
            self.share.replay(key, value)
        elif type(key) is TxnOffsetCommitKey:
            commit = key.key
            if commit.group not in self.groups:
                self.groups[commit.group] = ClassicGroup(commit.group, self.clock.wall())
            self.offsets.put_pending(key.producer_id, commit.group, commit.topic, commit.partition, value)  # type: ignore[arg-type]
        elif type(key) is TxnMarkerKey:
            self.offsets.complete(key.producer_id, key.commit)
        # Other record types (streams groups) are kept in the log, not interpreted.

    def _remove_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id)
        if type(group) is ClassicGroup and group.state is not GroupState.DEAD:
            group.transition(GroupState.DEAD, self.clock.wall())  # stale references see it gone

    def on_loaded(self) -> None:
        for group_id, group in list(self.groups.items()):
            if type(group) is ClassicGroup and group.stored is not None and not group.members:
                loaded = self.groups[group_id] = ClassicGroup.loaded(group_id, group.stored)
                self.classic.on_loaded(loaded)
        self.consumer.on_loaded()
        self.share.on_loaded()

    def durable_view(self) -> tuple[dict[str, GroupMetadataValue], dict[str, dict[tuple[str, int], OffsetCommitValue]]]:
        """What replay has built: each group's stored record, and the offsets (a fresh
        shard that replays the same log has the same view)."""
        stored = {g: grp.stored for g, grp in self.groups.items() if getattr(grp, "stored", None) is not None}
        return stored, self.offsets.snapshot()  # type: ignore[return-value]

    # groups of every type -------------------------------------------------------------

    def delete_group(self, group_id: str, on_done: Callable[[int], None]) -> None:
        """DeleteGroups for one group: Empty groups only; its offsets go with it."""
        group = self.groups.get(group_id)
        if not group_id:
            return on_done(E.invalid_group_id)
        if group is None:
            return on_done(E.group_id_not_found)
        error = group.validate_delete_group()
        if error != E.none:
            return on_done(error)
        records: list[Event] = [(OffsetCommitKey(group_id, t, p), None) for t, p in self.offsets.of(group_id)]
        records += self.group_tombstones(group)
        undo = group.mark_deleting()  # refuses joins and commits while the tombstones are written

        def written(error: int) -> None:
            if error != E.none:
                undo()
            on_done(error)

        self.write(records, written)

    def group_tombstones(self, group: Group) -> list[Event]:
        """The records that delete the group itself (its offsets aside)."""
        if type(group) is ConsumerGroup:
            records = self.consumer.delete_records(group.group_id)
            if records:
                return records
        if type(group) is ShareGroup:
            return self.share.delete_records(group.group_id)
        return [(GroupMetadataKey(group.group_id), None)]

    def list_groups(self, states: set[str], types: set[str]) -> list[Group]:
        return [g for g in self.groups.values()
                if g.state_name != GroupState.DEAD.value and (not states or g.state_name.lower() in states)
                and (not types or g.group_type in types)]


@dataclass(frozen=True)
class OffsetConfig:
    metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    retention_ms: int = 7 * 86_400_000  # offsets.retention.minutes
    existing_partitions: Container[tuple[str, int]] | None = None  # (topic, partition) pairs; None: all exist
