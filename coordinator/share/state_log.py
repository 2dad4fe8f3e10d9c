"""`__share_group_state`: share-partition state kept as Kafka's share coordinator keeps it, in
Kafka's ShareSnapshot / ShareUpdate records: a shard per partition of the topic (Kafka's
ShareCoordinatorShard), written through the coordinators' one runtime (coordinator/runtime.py).

Every share-partition (group, topic id, partition) lives in partition
abs(hash("group:topicId:partition")) % N of the topic, as Kafka's SharePartitionKey places it.
A write is a ShareUpdate (the state batches that changed, and the start offset if it moved)
carrying the epoch of the snapshot it applies to, or, every
`share.coordinator.snapshot.update.records.per.snapshot` updates, a ShareSnapshot of the
whole state (a new snapshot epoch); and every
`share.coordinator.cold.partition.snapshot.interval.ms` a snapshot of each share-partition whose
last one is that old (snapshot_cold). Replaying a key is its last snapshot, then the updates
of that snapshot's epoch in log order.

A shard's operations (write_state, initialize, delete, snapshot_cold) validate and return a
CoordinatorResult, its records and its response; they never touch the log. The runtime
appends the records, replays them into the shard's `durable` state once they are (the
replay a load does), and answers. What the next operations compute on is `states`: the
durable state and the writes still pending, replayed as they are queued (as Kafka's runtime
replays first), so that a snapshot holds every update queued before it (an update of the
older snapshot epoch that lands before it is superseded at replay). A failed write is
reverted: its share-partitions' `states` are the durable state again, with the writes
queued before it replayed on top.

The topic is not compacted (a snapshot and an update have different keys): as Kafka's
share coordinator prunes its records with DeleteRecords, the log start of each partition
moves up to the oldest snapshot still needed by a key of it, once per snapshot written.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kio.schema.errors import ErrorCode as E

from protocol.record_batch import iter_batch_records
from protocol.share_records import (
    ACKNOWLEDGED,
    ARCHIVED,
    ShareSnapshotValue,
    ShareStateKey,
    ShareUpdateValue,
    StateBatch,
    decode_state_key,
    decode_state_value,
)

from .. import server_log
from ..apis import LATER
from ..log.config import LogConfig
from ..log.offsets import OffsetsLog, partition_for
from ..runtime import CoordinatorResult, CoordinatorShard, PendingWrite, Runtime

log = server_log.get(__name__)

TOPIC = "__share_group_state"
STATE_TOPIC_CONFIG = LogConfig(cleanup_policy="delete", retention_ms=None, segment_ms=None)

# (group id, topic id, partition)
Key = tuple[str, uuid.UUID, int]
# A share-partition's state batches, (first offset, last offset, state, delivery count) each,
# and what gives all of them when a write turns out to be a snapshot
Runs = list[tuple[int, int, int, int]]
Whole = Callable[[], Runs] | None


# Kafka's FencedStateEpochException: a write under an older state epoch than the stored one
FENCED_MESSAGE = "The share coordinator rejected the request because the share-group state epoch did not match."


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


@dataclass
class StoredState:
    """What replay gives for one share-partition, and where its records stand."""

    state_epoch: int = 0
    start: int = 0
    records: dict[int, tuple[int, int]] = field(default_factory=dict)  # offset -> (state, delivery count)
    snapshot_epoch: int = -1
    # Kafka's snapshotUpdateCount: ShareUpdates since the last snapshot written for the limit;
    # a snapshot resets it only once it reached the limit (one written for another reason, as
    # AlterShareGroupOffsets' initialization, keeps it), as ShareCoordinatorShard does
    updates: int = 0
    snapshot_offset: int = 0  # where the last snapshot is in the log (in a shard's durable state)
    # the last snapshot's (Kafka's ShareGroupOffset): both when it was written, but for a cold
    # snapshot (snapshot_cold), which keeps the create timestamp of the one it repeats
    create_timestamp: int = -1
    write_timestamp: int = -1

    def copy(self) -> StoredState:
        return StoredState(
            self.state_epoch,
            self.start,
            dict(self.records),
            self.snapshot_epoch,
            self.updates,
            self.snapshot_offset,
            self.create_timestamp,
            self.write_timestamp,
        )

    def apply(self, start: int, batches: tuple[StateBatch, ...]) -> None:
        if start >= 0:
            self.start = start
            self.records = {o: s for o, s in self.records.items() if o >= start}
        for b in batches:
            for offset in range(max(b.first_offset, self.start), b.last_offset + 1):
                self.records[offset] = (b.delivery_state, b.delivery_count)


class ShareStateShard(CoordinatorShard):
    """One partition of `__share_group_state` (Kafka's ShareCoordinatorShard): the state of
    the share-partitions that live there."""

    def __init__(
        self, partition: int, apply: Callable[[CoordinatorShard, CoordinatorResult], object], snapshot_every: int
    ) -> None:
        super().__init__(partition, apply)
        self.snapshot_every = snapshot_every
        self.durable: dict[Key, StoredState] = {}  # what the log holds
        self.states: dict[Key, StoredState] = {}  # and the writes pending on it: what operations read

    # replay -----------------------------------------------------------------------------

    def replay(self, states: dict[Key, StoredState], k: ShareStateKey, value: Any, offset: int) -> None:
        """One record into `states` (the durable state at load and once a write is durable,
        the state operations read as soon as it is queued)."""
        key = (k.group, k.topic_id, k.partition)
        if value is None:  # a tombstone: the share-partition's state was deleted
            states.pop(key, None)
            return
        if k.snapshot:
            before = states.get(key)
            states[key] = state = StoredState(
                value.state_epoch,
                value.start_offset,
                {},
                value.snapshot_epoch,
                self._after_snapshot(before.updates if before is not None else 0),
                offset,
                value.create_timestamp,
                value.write_timestamp,
            )
            state.apply(-1, value.state_batches)
            return
        current = states.get(key)
        if current is None or value.snapshot_epoch != current.snapshot_epoch:
            return  # an update of a snapshot that is gone or was superseded
        current.apply(value.start_offset, value.state_batches)
        current.updates += 1

    def _after_snapshot(self, updates: int) -> int:
        """Kafka's ShareCoordinatorShard.handleShareSnapshot: the count starts again only once
        it reached the limit."""
        return 0 if updates >= self.snapshot_every else updates

    def on_loaded(self) -> None:
        self.states = {key: state.copy() for key, state in self.durable.items()}

    def written(self, records: list[Any]) -> None:
        for k, value in records:
            self.replay(self.states, k, value, -1)

    def replay_write(self, records: list[Any], offset: int) -> None:
        for i, (k, value) in enumerate(records):
            self.replay(self.durable, k, value, offset + i)

    def revert(self, failed: list[PendingWrite]) -> None:
        """The failed writes' share-partitions are their durable state again, with the writes
        still pending before them replayed on top. Each is next written as a snapshot of the
        share-partition as it is live: a change the live state keeps though its write failed
        (an expired lock, Kafka keeps it too) is in the log again with the next write."""
        keys = {(k.group, k.topic_id, k.partition) for w in failed for k, _ in w.records or ()}
        for key in keys:
            durable = self.durable.get(key)
            if durable is None:
                self.states.pop(key, None)
            else:
                self.states[key] = durable.copy()
        for w in self.pending:
            for k, value in w.records or ():
                if (k.group, k.topic_id, k.partition) in keys:
                    self.replay(self.states, k, value, -1)
        for key in keys:
            state = self.states.get(key)
            if state is not None:
                state.updates = max(state.updates, self.snapshot_every)

    def last_redundant_offset(self) -> int | None:
        """Kafka's ShareCoordinatorShard.lastRedundantOffset: the records before the oldest
        snapshot a share-partition here still needs are redundant (None: no state here)."""
        return min((s.snapshot_offset for s in self.durable.values()), default=None)

    # operations -------------------------------------------------------------------------

    def write_state(
        self,
        key: Key,
        start: int,
        runs: Runs,
        now_ms: int,
        *,
        full: bool = False,
        state_epoch: int | None = None,
        whole: Whole = None,
    ) -> CoordinatorResult:
        """A share-partition's change (Kafka's ShareCoordinatorShard.writeState): `runs`
        (first, last, state, count) are the state batches that changed, `start` its start
        offset; full: `runs` are its whole state from `start` (a share-partition initialized or
        started over); whole(): every state batch of the share-partition now, for when this
        write is a snapshot. The response: NONE, or FENCED_STATE_EPOCH for a write under an
        older state epoch than the stored one (the share-partition was started over since it
        was loaded), nothing written. A newer one (AlterShareGroupOffsets' restart) is stored."""
        state = self.states.get(key)
        if state is not None and state_epoch is not None and state_epoch < state.state_epoch:
            return CoordinatorResult(E.fenced_state_epoch)
        result = CoordinatorResult(E.none)
        result.add([self._record(key, start, runs, now_ms, full, state_epoch, whole, False)])
        return result

    def initialize(self, key: Key, state_epoch: int, now_ms: int) -> CoordinatorResult:
        """Kafka's ShareCoordinatorShard.initializeState for a share-partition with no state: its
        first ShareSnapshot (snapshot epoch 0) under `state_epoch` (the group's epoch, as Kafka's
        group coordinator gives it), at start offset -1 (not started)."""
        return self.write_state(key, -1, [], now_ms, full=True, state_epoch=state_epoch)

    def delete(self, key: Key) -> CoordinatorResult:
        """DeleteShareGroupOffsets: the share-partition's state goes: one tombstone, of its
        ShareSnapshot key, written only if it has state (Kafka's ShareCoordinatorShard.deleteState)."""
        result = CoordinatorResult(E.none)
        if key in self.states:
            result.add([(ShareStateKey(True, *key), None)])
        return result

    def snapshot_cold(self, now_ms: int, interval_ms: int) -> CoordinatorResult:
        """Kafka's ShareCoordinatorShard.snapshotColdPartitions: unless every share-partition
        here was cold-snapshotted already (its last snapshot's create and write timestamps
        differ), each whose last snapshot is `interval_ms` old or older gets a new one of its
        state as it is, which lets the log's records before it be pruned: one write, a snapshot
        each."""
        states = self.states
        result = CoordinatorResult(E.none)
        if all(s.create_timestamp != s.write_timestamp for s in states.values()):
            return result
        cold = [k for k, s in states.items() if now_ms - s.write_timestamp >= interval_ms]
        if cold:
            for key in cold:
                log.debug("share-partition %s: its last snapshot is older than %d ms", key, interval_ms)
            result.add([self._record(key, -1, [], now_ms, False, None, None, True) for key in cold])
        return result

    def _record(
        self, key: Key, start: int, runs: Runs, now: int, full: bool, epoch: int | None, whole: Whole, cold: bool
    ) -> tuple[ShareStateKey, Any]:
        """The record of a share-partition's write: a ShareUpdate, or a ShareSnapshot when it
        is the first, full or cold, under a new state epoch, or when the updates since the last
        reached share.coordinator.snapshot.update.records.per.snapshot (Kafka's
        ShareCoordinatorShard.generateShareStateRecord)."""
        state = self.states.get(key)
        new = StoredState() if state is None else state.copy()
        snapshot = (
            full
            or cold
            or state is None
            or new.updates >= self.snapshot_every
            or (epoch is not None and epoch != new.state_epoch)
        )
        if epoch is not None:
            new.state_epoch = epoch
        if snapshot and whole is not None:
            runs = whole()
            new.records = {}
        batches = tuple(StateBatch(*run) for run in runs)
        if full:
            new.records, new.start = {}, start
        new.apply(start, batches)
        if not snapshot:
            return ShareStateKey(False, *key), ShareUpdateValue(new.snapshot_epoch, 0, start, batches, _complete(new))
        value = ShareSnapshotValue(
            new.snapshot_epoch + 1,
            new.state_epoch,
            0,
            new.start,
            new.create_timestamp if cold else now,
            now,
            _batches_of(new.records),
            # (none in a share-partition's initialization, nor while it is not started)
            -1 if full or new.start < 0 else _complete(new),
        )
        return ShareStateKey(True, *key), value


class ShareCoordinator:
    """Kafka's ShareCoordinatorService: a shard per partition of `__share_group_state`, written
    through one Runtime over the topic's log (an operation's answer comes once it is durable,
    or with the write's error), and the log pruned below what the shards still need."""

    def __init__(
        self, log_: OffsetsLog, snapshot_every: int = 500, first_write: Callable[[], None] = lambda: None
    ) -> None:
        self.log = log_
        self.runtime: Runtime[OffsetsLog] = Runtime(log_)
        self.shards = [ShareStateShard(p, self.runtime.apply, snapshot_every) for p in range(log_.partitions)]
        self._pruning: set[asyncio.Task[Any]] = set()
        # called before each write: the topic comes into existence at its first (Kafka's share
        # coordinator creates __share_group_state when a share-partition's state is first written)
        self.first_write = first_write

    @classmethod
    async def open(
        cls, data_dir: str | Path, partitions: int, fsync: str, fsync_interval_ms: int, snapshot_every: int = 500
    ) -> ShareCoordinator:
        return cls(await open_log(data_dir, partitions, fsync, fsync_interval_ms), snapshot_every)

    def shard_of(self, key: Key) -> ShareStateShard:
        group, topic_id, partition = key
        return self.shards[partition_for(f"{group}:{kafka_uuid(topic_id)}:{partition}", len(self.shards))]

    def stored(self, key: Key) -> StoredState | None:
        """The share-partition's state as written (its pending writes included)."""
        return self.shard_of(key).states.get(key)

    @property
    def states(self) -> dict[Key, StoredState]:
        """Every share-partition's state as written, across the shards."""
        return {key: state for shard in self.shards for key, state in shard.states.items()}

    # loading ----------------------------------------------------------------------------

    def load(self) -> int:
        """Replay every partition: each key's last snapshot and the updates of its epoch."""
        count = 0
        for shard, plog in zip(self.shards, self.log.logs):
            if plog.offline is not None:
                log.error(
                    "%s-%d is offline (%s): its share-partitions start afresh", TOPIC, shard.partition, plog.offline
                )
                continue
            for _, data in plog.batches(plog.log_start_offset):
                for r in iter_batch_records(data):
                    if r.key is not None:
                        k = decode_state_key(r.key)
                        value = None if r.value is None else decode_state_value(k, r.value)
                        shard.replay(shard.durable, k, value, r.offset)
                        count += value is not None
            shard.on_loaded()
        states = sum(len(shard.durable) for shard in self.shards)
        if states:
            log.info("loaded %d share-group state records: %d share-partitions", count, states)
        return count

    # writing ----------------------------------------------------------------------------

    def write(
        self,
        key: Key,
        start: int,
        runs: Runs,
        now_ms: int,
        done: Callable[[int], None],
        *,
        full: bool = False,
        state_epoch: int | None = None,
        whole: Whole = None,
    ) -> None:
        """ShareStateShard.write_state, done(its error code) once durable or failed."""
        shard = self.shard_of(key)
        self._run(
            shard, shard.write_state(key, start, runs, now_ms, full=full, state_epoch=state_epoch, whole=whole), done
        )

    def initialize(self, key: Key, state_epoch: int, now_ms: int, done: Callable[[int], None]) -> None:
        shard = self.shard_of(key)
        self._run(shard, shard.initialize(key, state_epoch, now_ms), done)

    def delete(self, key: Key, done: Callable[[int], None]) -> None:
        shard = self.shard_of(key)
        self._run(shard, shard.delete(key), done)

    def snapshot_cold(self, now_ms: int, interval_ms: int, done: Callable[[], None]) -> int:
        """Every shard's cold share-partitions snapshotted; done() once every write is done
        (written or not: one that failed makes the share-partition's next write a snapshot).
        The number of snapshots written."""
        results = [(shard, shard.snapshot_cold(now_ms, interval_ms)) for shard in self.shards]
        written = [(shard, result) for shard, result in results if result.writes]
        left = [len(written)]
        count = sum(len(records or ()) for _, result in written for records, _, _ in result.writes)

        def settled(error: int) -> None:
            if error != E.none:
                log.warning("cold share-partition snapshots not written: error %d", error)
            left[0] -= 1
            if left[0] == 0:
                done()

        if not written:
            done()
        for shard, result in written:
            self._run(shard, result, settled)
        return count

    def _run(self, shard: ShareStateShard, result: CoordinatorResult, done: Callable[[Any], None]) -> None:
        """Have the runtime write an operation's result: done(its response) once durable, or
        done(the write's error code); a snapshot written lets the log be pruned."""
        snapshot = any(k.snapshot for records, _, _ in result.writes for k, _ in records or ())
        if result.writes:
            self.first_write()

        def answered(response: Any) -> None:
            if snapshot and response == E.none:
                self._prune(shard)
            done(response)

        now = self.runtime.respond(shard, result, int, answered)
        if now is not LATER:
            done(now)

    def _prune(self, shard: ShareStateShard) -> None:
        """DeleteRecords below the shard's last redundant offset."""
        upto = shard.last_redundant_offset()
        plog = self.log.logs[shard.partition]
        if upto is not None and upto > plog.log_start_offset:
            task = asyncio.get_running_loop().create_task(plog.delete_records_before(upto))
            self._pruning.add(task)
            task.add_done_callback(self._pruning.discard)

    async def close(self) -> None:
        for task in list(self._pruning):
            await asyncio.gather(task, return_exceptions=True)
        await self.log.close()


def _batches_of(records: dict[int, tuple[int, int]]) -> tuple[StateBatch, ...]:
    out: list[list[int]] = []
    for offset in sorted(records):
        state, count = records[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == state and out[-1][3] == count:
            out[-1][1] = offset
        else:
            out.append([offset, offset, state, count])
    return tuple(StateBatch(*b) for b in out)


async def open_log(data_dir: str | Path, partitions: int, fsync: str, fsync_interval_ms: int) -> OffsetsLog:
    """__share_group_state's partitions, opened (the server opens them before its topics,
    which hold every internal topic's logs)."""
    config = dataclasses.replace(
        STATE_TOPIC_CONFIG,
        fsync=fsync,  # type: ignore[arg-type]  # fsync is one of the flag's checked choices, a plain str to mypy
        fsync_interval_ms=fsync_interval_ms,
    )
    return await OffsetsLog.open(data_dir, partitions, config, topic=TOPIC)


def _complete(state: StoredState) -> int:
    """KIP-1226's delivery-complete count Kafka writes with a share-partition's state: its
    records from the start offset that are Acknowledged or Archived."""
    return sum(1 for o, (s, _) in state.records.items() if o >= state.start and s in (ACKNOWLEDGED, ARCHIVED))
