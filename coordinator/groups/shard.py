"""GroupShard: the state machine of one `__consumer_offsets` partition (Kafka's
GroupCoordinatorShard). It owns the groups that hash to the partition, of every type,
their committed offsets and their timers; the runtime owns the log and routes to it.

`replay` is the only way durable state changes: the records of every write once they
are on disk, and the whole partition at startup. It sets what a restart brings back
(offsets, pending transactional offsets, a classic group's stored record, a consumer
group's records) and nothing else; `on_loaded` then turns the loaded records into live
groups, as Kafka's onLoaded does.

Its queue of writes not yet durable (Kafka's deferred-event queue) is CoordinatorShard's
(coordinator/runtime.py); what a write does to the shard is said here: `written` (a consumer,
share or streams group's records, as the next operations see them), `replay_write` once
durable, `revert` for writes that failed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Container, Protocol, cast

from ..errors import E
from ..runtime import CoordinatorShard, PendingWrite

from .classic.classic_group import ClassicGroup, JoinResult, SyncResult
from .classic.classic_manager import ClassicGroupManager, GroupConfig
from .clock import Clock, ShardClock
from .modern.consumer.consumer_group import ConsumerGroup
from .modern.consumer.consumer_manager import ConsumerGroupConfig, ConsumerGroupManager
from .group import Group
from .offset_manager import OffsetManager
from .offset_store import OffsetStore
from .records import (
    Event,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    TxnMarkerKey,
    TxnOffsetCommitKey,
)
from .state import GroupState
from protocol.consumer_records import KEY_TYPES
from protocol.share_records import KEY_TYPES as SHARE_KEYS
from .modern.share.share_group import ShareGroup
from .modern.share.share_manager import ShareGroupManager
from protocol.streams_records import KEY_TYPES as STREAMS_KEYS
from .streams.streams_group import StreamsGroup
from .streams.streams_manager import StreamsGroupManager
from .modern.consumer.migration import GroupMigration
from .shard_context import Complete, CoordinatorResult, GroupSettings
from .topic_image import TopicImage


log = logging.getLogger(__name__)

# complete(error): runs once a write's records are durable and replayed (error NONE), or
# with the error for the client if they could not be written (nothing was replayed).

CONSUMER_KEYS = frozenset(KEY_TYPES)
SHARE_KEY_TYPES = frozenset(SHARE_KEYS)
STREAMS_KEY_TYPES = frozenset(STREAMS_KEYS)


class ShardRuntime(GroupSettings, Protocol):
    """What a shard needs of the runtime that owns it (CoordinatorRuntime): the one write
    path of the partition's log, which replays each write once it is durable."""

    def apply(self, shard: CoordinatorShard, result: CoordinatorResult) -> Any: ...

    def write_marker(
        self, shard: CoordinatorShard, producer_id: int, producer_epoch: int, commit: bool, complete: Complete
    ) -> None: ...


class GroupShard(CoordinatorShard):
    def __init__(
        self,
        partition: int,
        runtime: ShardRuntime,
        clock: Clock,
        config: GroupConfig,
        offsets: OffsetConfig,
        consumer: ConsumerGroupConfig | None = None,
        image: TopicImage | None = None,
    ) -> None:
        super().__init__(partition, runtime.apply)
        self.runtime = runtime
        # Why the shard cannot serve (its log partition is offline: corrupt data), or None;
        # every request for its groups is then answered NOT_COORDINATOR.
        self.offline: str | None = None
        self.clock = clock = ShardClock(clock, self._timer_fired)
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.classic = ClassicGroupManager(self, clock, config)
        self.consumer = ConsumerGroupManager(self, clock, consumer or ConsumerGroupConfig(), image or TopicImage())
        self.share = ShareGroupManager(self, clock, image or TopicImage())
        self.streams = StreamsGroupManager(self, clock, image or TopicImage())
        self.migration = GroupMigration(self, self.classic, self.consumer)
        self.offset_manager = OffsetManager(
            self, offsets.metadata_max_bytes, offsets.retention_ms, offsets.existing_partitions
        )

    def write_marker(self, producer_id: int, producer_epoch: int, commit: bool, complete: Complete) -> None:
        """The producer's transaction marker: its pending offsets here applied or dropped."""
        self.runtime.write_marker(self, producer_id, producer_epoch, commit, complete)

    def _timer_fired(self, result: object) -> None:
        """What a timer's operation returned (its clock's `fired`): a CoordinatorResult is written."""
        if type(result) is CoordinatorResult:
            self.runtime.apply(self, result)

    # what a write does to the shard (CoordinatorShard's queue calls these) --------------

    def written(self, records: list[Event]) -> None:
        """A consumer, share or streams group's records, as the next operations see them
        (offsets and classic groups change only at replay)."""
        for key, value in records:
            t = type(key)
            if t is OffsetCommitKey:
                continue  # (most records)
            if t in CONSUMER_KEYS:
                self.consumer.written_record(key, value)
            elif t in SHARE_KEY_TYPES:
                self.share.written_record(key, value)
            elif t in STREAMS_KEY_TYPES:
                self.streams.written_record(key, value)

    def revert(self, failed: list[PendingWrite]) -> None:
        """Undo exactly the failed writes: the consumer groups they wrote come back as the
        durable records and the writes still pending before them describe them (a classic
        group's record and offsets are replayed only once durable: nothing to undo)."""
        groups: dict[str, None] = {}
        shares: dict[str, None] = {}
        streams: dict[str, None] = {}
        for w in failed:
            for key, _ in w.records or ():
                if type(key) in CONSUMER_KEYS or type(key) is GroupMetadataKey:
                    groups[key.group] = None
                elif type(key) in SHARE_KEY_TYPES:
                    shares[key.group] = None
                elif type(key) in STREAMS_KEY_TYPES:
                    streams[key.group] = None
        still_pending = [w.records for w in self.pending if w.records is not None]
        if groups:
            self.consumer.revert(list(groups), still_pending)
        if shares:
            self.share.revert(list(shares), still_pending)
        if streams:
            self.streams.revert(list(streams), still_pending)

    # replay ---------------------------------------------------------------------------

    def replay_write(self, records: list[Event], offset: int) -> None:
        """replay() each record of a durable write, in order; an offset commit's (most
        records) put here without two calls each, its group's offsets looked up once."""
        groups = self.groups
        replay = self.replay
        group_of = None  # the group whose offsets `offsets` are
        offsets: dict[tuple[str, int], OffsetCommitValue] = {}
        for key, value in records:
            if type(key) is OffsetCommitKey and value is not None:
                group_id, topic, partition = key
                if group_id is not group_of:
                    if group_id not in groups:  # a simple group's commit: replay() makes the group
                        replay(key, value)
                        group_of = None
                        continue
                    offsets, group_of = self.offsets.of_writable(group_id), group_id
                offsets[topic, partition] = value  # type: ignore[assignment]  # an OffsetCommitKey's record is an OffsetCommitValue or a tombstone
            else:
                replay(key, value)
                group_of = None  # (a tombstone or a group's record may have dropped its offsets)

    def replay(self, key: object, value: object) -> None:
        if type(key) is OffsetCommitKey:
            group_id, topic, partition = key  # (one unpack, not three field lookups: every commit's records)
            if value is None:
                self.offsets.remove(group_id, topic, partition)
                return
            if group_id not in self.groups:
                # A commit from a consumer without group management: Kafka keeps such
                # offsets under a memberless classic group ("simple group").
                self.groups[group_id] = ClassicGroup(group_id, self.clock.wall())
            self.offsets.put(group_id, topic, partition, value)  # type: ignore[arg-type]  # an OffsetCommitKey's record is an OffsetCommitValue or a tombstone
        elif type(key) is GroupMetadataKey:
            group = self.groups.get(key.group)
            if value is None:
                if type(group) is ClassicGroup:  # (not the consumer group it just became)
                    self._remove_group(key.group)
                return
            if type(group) is ConsumerGroup:
                return  # a classic group's record from before it became a consumer group
            # A GroupMetadata record is a classic group's (a consumer group's stale ones end above).
            stored = cast("GroupMetadataValue", value)
            if group is None:
                group = self.groups[key.group] = ClassicGroup(key.group, stored.current_state_timestamp)
            cast("ClassicGroup", group).stored = stored
        elif type(key) in CONSUMER_KEYS:
            self.consumer.replay(key, value)
        elif type(key) in SHARE_KEYS:
            self.share.replay(key, value)
        elif type(key) in STREAMS_KEY_TYPES:
            self.streams.replay(key, value)
        elif type(key) is TxnOffsetCommitKey:
            commit = key.key
            if commit.group not in self.groups:
                self.groups[commit.group] = ClassicGroup(commit.group, self.clock.wall())
            self.offsets.put_pending(key.producer_id, commit.group, commit.topic, commit.partition, value)  # type: ignore[arg-type]  # an OffsetCommitKey's record is an OffsetCommitValue or a tombstone
        elif type(key) is TxnMarkerKey:
            self.offsets.complete(key.producer_id, key.commit)
        # Other record types (streams type 18, share type 9) are kept in the log, not interpreted.

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
        self.streams.on_loaded()

    def on_unloaded(self) -> None:
        """Kafka's GroupCoordinatorShard.onUnloaded: the partition moved away. Members
        waiting in a join or a sync are told NOT_COORDINATOR, so they find the new
        coordinator; timers stop; writes are refused from now on (runtime.write)."""
        self.unloaded = True
        self.clock.fenced = True
        for group in self.groups.values():
            if type(group) is not ClassicGroup:
                continue
            for member in group.members.values():
                join, sync = member.join_waiter, member.sync_waiter
                member.join_waiter = member.sync_waiter = None
                if join is not None and not join.done():
                    join.set_result(JoinResult(E.not_coordinator, member.member_id))
                if sync is not None and not sync.done():
                    sync.set_result(SyncResult(E.not_coordinator))

    def durable_view(
        self,
    ) -> tuple[
        dict[str, GroupMetadataValue],
        dict[str, dict[Any, Any]],
        dict[str, dict[tuple[str, int], OffsetCommitValue]],
        dict[int, dict[Any, Any]],
    ]:
        """What replay has built, for every group type: each classic group's stored record,
        each consumer, share and streams group's records, the committed offsets and the transactional offsets
        pending their marker (a fresh shard that replays the same log has the same view)."""
        stored = {
            g: grp.stored for g, grp in self.groups.items() if type(grp) is ClassicGroup and grp.stored is not None
        }
        consumer = {g: dict(records) for g, records in self.consumer.stored.items()}
        consumer.update((g, dict(records)) for g, records in self.share.stored.items())
        consumer.update((g, dict(records)) for g, records in self.streams.stored.items())
        pending = {pid: dict(offsets) for pid, offsets in self.offsets.pending.items() if offsets}
        return stored, consumer, self.offsets.snapshot(), pending

    # groups of every type -------------------------------------------------------------

    def delete_group(self, group_id: str) -> CoordinatorResult:
        """DeleteGroups for one group: Empty groups only; its offsets go with it. The
        response is the group's error code."""
        group = self.groups.get(group_id)
        if not group_id:
            return CoordinatorResult(E.invalid_group_id)
        if group is None:
            return CoordinatorResult(E.group_id_not_found)
        error = group.validate_delete_group()
        if error != E.none:
            return CoordinatorResult(error)
        records: list[Event] = [(OffsetCommitKey(group_id, t, p), None) for t, p in self.offsets.of(group_id)]
        records += self.group_tombstones(group)
        undo = group.mark_deleting()  # refuses joins and commits while the tombstones are written

        def written(error: int) -> None:
            if error != E.none:
                undo()

        result = CoordinatorResult(E.none)
        result.add(records, written)
        return result

    def group_tombstones(self, group: Group) -> list[Event]:
        """The records that delete the group itself (its offsets aside)."""
        if type(group) is ConsumerGroup:
            records = self.consumer.delete_records(group.group_id)
            if records:
                return records
        if type(group) is ShareGroup:
            return self.share.delete_records(group.group_id)
        if type(group) is StreamsGroup:
            return self.streams.delete_records(group.group_id)
        return [(GroupMetadataKey(group.group_id), None)]

    def list_groups(self, states: set[str], types: set[str]) -> list[Group]:
        return [
            g
            for g in self.groups.values()
            if g.state_name != GroupState.DEAD.value
            and (not states or g.state_name.lower() in states)
            and (not types or g.group_type in types)
        ]


@dataclass(frozen=True)
class OffsetConfig:
    metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    retention_ms: int = 7 * 86_400_000  # offsets.retention.minutes
    existing_partitions: Container[tuple[str, int]] | None = None  # (topic, partition) pairs; None: all exist
