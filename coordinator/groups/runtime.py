"""CoordinatorRuntime: the shards of `__consumer_offsets` and the one path every write takes
(Kafka's CoordinatorRuntime).

An operation validates against a shard's state and returns a CoordinatorResult: its
records, what it does once they are durable or failed, and its response. It never touches
the log. The runtime (`apply`) appends the records to the shard's partition; once they are
durable it replays them into the shard (the same `replay` that loads the log at startup),
runs the operation's continuations and answers (`respond`, `answer`: the one way every
group and offset operation is answered). A timer (the shard's clock) and a continuation
are operations too: what they return is written the same way.

Every write, and every answer of an operation that wrote nothing, waits in the shard's
queue of pending writes (Kafka's deferred-event queue, keyed by the last written offset):
it completes only once everything written before it on the shard is durable, in the
order written, however the log reports its appends. So no answer describes state that is
not yet on disk, an operation that changed nothing included.

If an append fails, it and every write queued after it fail together (the log cuts them
all: a later write was computed on top of the failed one), and the shard reverts exactly
their effect (`GroupShard.revert`): consumer groups come back as the records of the writes
before them describe them; classic groups and offsets, replayed only once durable, have
nothing to undo. The continuations then get the error Kafka gives for a failed group write.

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
from ..apis import LATER, RequestContext
from ..errors import E

from ..futures import Done
from .classic.classic_manager import GroupConfig
from .clock import Clock
from .group_configs import GroupConfigs
from .modern.consumer.consumer_manager import ConsumerGroupConfig
from .group import Group
from .records import Event, TxnMarkerKey, TxnOffsetCommitKey
from .shard import DURABLE, FAILED, PENDING, GroupShard, OffsetConfig, PendingWrite
from .shard_context import Complete, CoordinatorResult
from .settings import ShareGroupConfig, StreamsGroupConfig
from .topic_image import TopicImage

log = server_log.get(__name__)

LOAD_SLICE = 2000  # records a moved partition's load replays between turns of the event loop


class PartitionWriter(Protocol):
    """The log under the shards (coordinator.log.offsets.OffsetsLog; tests use one in memory)."""

    @property
    def partitions(self) -> int: ...

    def partition_for(self, group_id: str) -> int: ...

    def append_to(self, partition: int, records: list[Event], done: Done, /) -> object:
        """done(None, first offset) once durable, or done(error, None) with nothing left
        in the log, neither of this append nor of any append made to the partition after it
        and before its failure was reported (those fail too): a sync failure cuts everything
        past the durable offset, a refused append fails its whole round."""

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


def write_error(error: BaseException) -> int:
    """Kafka's answer to a group or offset write that failed. A refused disk or sync
    (KafkaStorageException) and a log being closed map to NOT_COORDINATOR, so the client
    looks the coordinator up again and retries, as it would after a leader change."""
    if isinstance(error, (OSError, RuntimeError)):
        return E.not_coordinator
    log.error("group write failed unexpectedly: %r", error)
    return E.unknown_server_error


class CoordinatorRuntime:
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
        self.writer = writer
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
        self._expiry: asyncio.Task | None = None
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

    # the write path -------------------------------------------------------------------

    def apply(self, shard: GroupShard, result: CoordinatorResult) -> Any:
        """Write an operation's result: each of its writes appended in order (a wait queued
        behind those before it); returns its response."""
        for records, then, txn in result.writes:
            if records is None:
                shard.after_pending(then)  # type: ignore[arg-type]  # wait(), the one records-less write, always has a `then`
            elif txn is None:
                self.write(shard, records, then or _nothing)
            else:
                self.write_txn(shard, txn[0], txn[1], records, then or _nothing)
        return result.response

    def respond(
        self,
        shard: GroupShard,
        result: CoordinatorResult | Any,
        failed: Callable[[int], Any],
        later: Callable[[Any], None],
    ) -> Any:
        """Write the result and settle its response: returned now if it is settled already
        (nothing pending on the shard, or a future already done), else LATER and later(it)
        once its writes, and every write before them on the shard, are durable; failed(the
        error) instead if one of them fails. A response that is a future (a join phase, the
        leader's assignment: the continuations settle it) is given when it settles. A
        response given without a CoordinatorResult (a request refused before anything was
        read that a pending write could change) is returned as it is."""
        if type(result) is not CoordinatorResult:
            return result
        response = result.response
        if isinstance(response, asyncio.Future):
            self.apply(shard, result)
            if response.done():
                return response.result()
            response.add_done_callback(lambda f: later(f.result()))
            return LATER
        settled: list[Any] = []
        waiting = False

        def done(error: int) -> None:
            final = response if error == E.none else failed(error)
            if waiting:
                later(final)
            else:
                settled.append(final)

        writes = result.writes
        if writes and writes[-1][0] is not None:
            # The answer rides on the operation's last write (the last queued on the shard,
            # so everything before it is durable when it is) rather than a wait of its own.
            records, then, txn = writes[-1]
            if then is None:
                writes[-1] = (records, done, txn)
            else:

                def then_answer(error: int, then: Complete = then) -> object:
                    follow_up = then(error)
                    done(error)
                    return follow_up

                writes[-1] = (records, then_answer, txn)
            self.apply(shard, result)
        else:
            self.apply(shard, result)
            if not shard.pending:
                return response
            shard.after_pending(done)
        if settled:
            return settled[0]
        waiting = True
        return LATER

    def answer(
        self,
        ctx: RequestContext,
        shard: GroupShard,
        result: CoordinatorResult | Any,
        build: Callable[[Any], Any],
        failed: Callable[[int], Any],
    ) -> Any:
        """The one way a group or offset request is answered: `respond`, with the response
        body build(response) (its error's, failed(error), if a write fails)."""
        response = self.respond(shard, result, failed, lambda r: ctx.answer(build(r)))
        return LATER if response is LATER else build(response)

    def write(self, shard: GroupShard, records: list[Event], complete: Complete) -> None:
        if shard.unloaded:  # its partition moved: the new coordinator owns it now
            shard.settle(complete, E.not_coordinator)
            return
        w = shard.queue_write(records, complete)
        try:
            self.writer.append_to(shard.partition, records, partial(_written, shard, w))
        except (struct.error, OverflowError, ValueError) as e:
            # A value the record schema cannot hold (validation should have refused it):
            # nothing was queued, so the write fails like any other, leaving no trace.
            _written(shard, w, e, None)

    def write_txn(
        self, shard: GroupShard, producer_id: int, producer_epoch: int, records: list[Event], complete: Complete
    ) -> None:
        if shard.unloaded:
            shard.settle(complete, E.not_coordinator)
            return
        events: list[Event] = [(TxnOffsetCommitKey(producer_id, k), v) for k, v in records]  # type: ignore[arg-type, misc]  # transactional offsets are OffsetCommitKey records; Event's key union is wider
        w = shard.queue_write(events, complete)
        try:
            self.writer.append_txn_to(
                shard.partition, records, producer_id, producer_epoch, partial(_written, shard, w)
            )
        except (struct.error, OverflowError, ValueError) as e:
            _written(shard, w, e, None)

    def write_marker(
        self, shard: GroupShard, producer_id: int, producer_epoch: int, commit: bool, complete: Complete
    ) -> None:
        if shard.unloaded:  # (the transaction coordinator retries on the partition's new shard)
            shard.settle(complete, E.not_coordinator)
            return
        marker = [(TxnMarkerKey(producer_id, commit), None)]
        w = shard.queue_write(marker, complete)  # type: ignore[arg-type]  # a marker waits in the queue as records do; Event does not name its key
        self.writer.append_marker_to(shard.partition, producer_id, producer_epoch, commit, partial(_written, shard, w))

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


def _nothing(_error: int) -> None:
    """The continuation of a write whose operation does nothing more once it is durable."""


def _written(shard: GroupShard, w: PendingWrite, error: BaseException | None, _first: object) -> None:
    """The log's report on one append (in any order): completions leave the shard's queue
    in the order written; a failure fails the append and everything queued after it."""
    if w.state is FAILED:
        if error is None:  # the PartitionWriter contract says this cannot happen
            log.error("partition %d: an append reported durable after an earlier one failed", shard.partition)
        return
    if error is not None:
        shard.fail_from(w, write_error(error))
        return
    w.state = DURABLE
    if shard.pending[0] is w and not shard.drain_scheduled:
        if _nothing_pending_after(shard, w):
            # Every write on the shard is durable: no later report can join the pass, so
            # it runs now rather than on the loop's next turn.
            shard.drain()
            return
        # Drained on the loop's next turn, so that every write the log reports durable in
        # one go (one sync round) is replayed and answered in one pass, one socket write per
        # connection for all their answers and those queued behind them.
        shard.drain_scheduled = True
        shard.loop().call_soon(shard.drain)


def _nothing_pending_after(shard: GroupShard, w: PendingWrite) -> bool:
    """No write queued on the shard after `w` awaits its report (behind it: answers only,
    or writes reported durable already)."""
    for later in reversed(shard.pending):
        if later is w:
            return True
        if later.state is PENDING:
            return False
    return True
