"""CoordinatorRuntime: the shards of `__consumer_offsets` (Kafka's GroupCoordinatorShards),
how a group is routed to its shard, how a partition is loaded, unloaded and its offsets
expired. Every write goes the one path of coordinator/runtime.py (Runtime): an operation
returns a CoordinatorResult, the runtime appends it, replays it into the shard once durable
(the same `replay` that loads the log at startup), answers, and on a failed append has the
shard revert exactly its effect (`GroupShard.revert`): consumer, share and streams groups
come back as the records of the writes before them describe them; classic groups and
offsets, replayed only once durable, have nothing to undo.

Kafka's runtime replays first and reverts timeline snapshots on failure; here offsets and
classic groups are replayed after the append (no snapshot needed) and consumer groups are
rebuilt from their records, which are their snapshot.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any, Callable, Protocol

from .. import server_log
from ..errors import E

from ..futures import Done
from ..runtime import Complete, CoordinatorShard, PartitionWriter as LogWriter, Runtime, reported
from .classic.classic_manager import GroupConfig
from .clock import Clock
from .group_configs import GroupConfigs
from .modern.consumer.consumer_manager import ConsumerGroupConfig
from .group import Group
from .records import Event, TxnMarkerKey, TxnOffsetCommitKey
from .shard import GroupShard, OffsetConfig
from .settings import ShareGroupConfig, StreamsGroupConfig
from .topic_image import TopicImage

log = server_log.get(__name__)

LOAD_SLICE = 2000  # records a moved partition's load replays between turns of the event loop


class PartitionWriter(LogWriter, Protocol):
    """The log under the shards (coordinator.log.offsets.OffsetsLog; tests use one in memory)."""

    def partition_for(self, group_id: str) -> int: ...

    def append_txn_to(
        self, partition: int, records: list[Event], producer_id: int, producer_epoch: int, done: Done, /
    ) -> None:
        """append_to(), as one transactional batch of the producer: pending offsets until its marker."""

    def append_marker_to(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, done: Done, /
    ) -> None:
        """The producer's commit or abort marker (a control batch), durable as append_to()."""

    def partition_records(self, partition: int, /) -> Iterable[tuple[int, Any, Any]]:
        """(offset, key, value) of the partition's latest records, in log order: what a load replays."""

    def offline(self) -> dict[int, str]:
        """The partitions that could not be read, and why: their shards refuse every request."""


class CoordinatorRuntime(Runtime[PartitionWriter]):
    def __init__(
        self,
        writer: PartitionWriter,
        clock: Clock,
        config: GroupConfig | None = None,
        offsets: OffsetConfig | None = None,
        consumer: ConsumerGroupConfig | None = None,
        image: TopicImage | None = None,
        share: ShareGroupConfig | None = None,
        streams: StreamsGroupConfig | None = None,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        super().__init__(writer)
        self.share_config = share or ShareGroupConfig()
        self.streams_config = streams or StreamsGroupConfig()
        # the GROUP config resource's per-group settings (None: every group has the broker's)
        self.group_configs = group_configs
        self.clock = clock
        self.config = config or GroupConfig()
        offsets = self._offsets = offsets or OffsetConfig()
        self.consumer_config = consumer or ConsumerGroupConfig()
        self.image = image or TopicImage()  # the broker's topics, by name and by id
        self.shards = [
            GroupShard(p, self, clock, self.config, offsets, self.consumer_config, image)
            for p in range(writer.partitions)
        ]
        # group id -> its shard: hot paths look here first, without a call (the hash once per group)
        self.shard_of: dict[str, GroupShard] = {}
        self._expiry: asyncio.Task[Any] | None = None
        self._image = image

    # routing ------------------------------------------------------------------------

    def shard_for(self, group_id: str) -> GroupShard:
        shard = self.shard_of.get(group_id)
        if shard is None:
            if len(self.shard_of) >= 1_000_000:
                self.shard_of.clear()
            shard = self.shard_of[group_id] = self.shards[self.writer.partition_for(group_id)]
        return shard

    def group(self, group_id: str) -> Group | None:
        return self.shard_for(group_id).groups.get(group_id)

    def all_groups(self) -> Iterator[Group]:
        for shard in self.shards:
            yield from shard.groups.values()

    # the group coordinator's transactional writes --------------------------------------

    def write_txn(
        self, shard: CoordinatorShard, producer_id: int, producer_epoch: int, records: list[Event], complete: Complete
    ) -> None:
        if shard.unloaded:
            shard.settle(complete, E.not_coordinator)
            return
        events: list[Event] = [(TxnOffsetCommitKey(producer_id, k), v) for k, v in records]  # type: ignore[arg-type, misc]  # transactional offsets are OffsetCommitKey records; Event's key union is wider
        w = shard.queue_write(events, complete)
        try:
            self.writer.append_txn_to(
                shard.partition, records, producer_id, producer_epoch, partial(reported, shard, w)
            )
        except (struct.error, OverflowError, ValueError) as e:
            reported(shard, w, e, None)

    def write_marker(
        self, shard: CoordinatorShard, producer_id: int, producer_epoch: int, commit: bool, complete: Complete
    ) -> None:
        if shard.unloaded:  # (the transaction coordinator retries on the partition's new shard)
            shard.settle(complete, E.not_coordinator)
            return
        marker = [(TxnMarkerKey(producer_id, commit), None)]
        w = shard.queue_write(marker, complete)  # (a marker waits in the queue as records do)
        self.writer.append_marker_to(shard.partition, producer_id, producer_epoch, commit, partial(reported, shard, w))

    # moving a partition to another broker ---------------------------------------------

    async def unload(self, partition: int) -> None:
        """Kafka's group emigration (CoordinatorRuntime.scheduleUnloadOperation): the shard
        stops serving and writing; returns once its writes already under way are in the log
        (or failed), so that the partition's new coordinator loads them."""
        shard = self.shards[partition]
        shard.on_unloaded()
        self.shard_of.clear()
        if shard.pending:
            settled = asyncio.get_running_loop().create_future()

            def settle(_error: int) -> None:
                if not settled.done():
                    settled.set_result(None)

            shard.after_pending(settle)
            await settled

    async def load_partition(self, partition: int) -> int:
        """Kafka's group immigration (CoordinatorLoader): a fresh shard replays the partition's
        log, then brings its groups to life, members with fresh session deadlines. Returns the
        records replayed."""
        shard = GroupShard(partition, self, self.clock, self.config, self._offsets, self.consumer_config, self._image)
        await asyncio.sleep(0)
        count = 0
        for _, key, value in self.writer.partition_records(partition):
            shard.replay(key, value)
            count += 1
            if not count % LOAD_SLICE:
                # The other shards keep serving while a large one loads (its own groups are
                # answered COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's loading shard).
                await asyncio.sleep(0)
        offline = self.writer.offline().get(partition)
        if offline is not None:
            shard.offline = offline
        shard.on_loaded()
        self.shards[partition] = shard
        self.shard_of.clear()
        log.info("partition %d loaded: %d records, %d groups", partition, count, len(shard.groups))
        return count

    # loading --------------------------------------------------------------------------

    def load(self, records: Iterable[tuple[int, Any, Any]], offline: Callable[[], dict[int, str]] = dict) -> int:
        """Replay (partition, key, value) records in log order, then bring the groups to
        life (members back with fresh session deadlines). `offline()`, asked once the
        records are read, names the partitions that could not be read: their shards
        refuse every request until the log is repaired."""
        started = time.perf_counter()
        count = 0
        shards = self.shards
        for partition, key, value in records:
            shards[partition].replay(key, value)
            count += 1
        for partition, why in offline().items():
            shards[partition].offline = why
        for shard in shards:
            shard.on_loaded()
        groups = sum(len(s.groups) for s in shards)
        members = sum(len(getattr(g, "members", ())) for g in self.all_groups())
        log.info(
            "loaded %d records: %d groups (%d members), %d committed offsets in %.2f s",
            count,
            groups,
            members,
            sum(s.offsets.count() for s in shards),
            time.perf_counter() - started,
        )
        return count

    # offset retention -----------------------------------------------------------------

    def expire_offsets(self) -> int:
        return sum(self.apply(shard, shard.offset_manager.expire()) for shard in self.shards)

    def start_offset_expiry(self, interval_ms: int) -> None:
        """offsets.retention.check.interval.ms"""
        self._expiry = asyncio.get_running_loop().create_task(self._expire_every(interval_ms / 1000))

    async def _expire_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            expired = self.expire_offsets()
            if expired:
                log.info("expiring %d committed offsets", expired)

    async def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
