"""`__share_group_state`: share-partition state kept as Kafka's share coordinator keeps it
(ShareCoordinatorShard), in Kafka's ShareSnapshot / ShareUpdate records.

Every share-partition (group, topic id, partition) lives in partition
abs(hash("group:topicId:partition")) % N of the topic, as Kafka's SharePartitionKey places it.
A write is a ShareUpdate (the state batches that changed, and the start offset if it moved)
carrying the epoch of the snapshot it applies to, or, every
`share.coordinator.snapshot.update.records.per.snapshot` updates, a ShareSnapshot of the
whole state (a new snapshot epoch); and every
`share.coordinator.cold.partition.snapshot.interval.ms` a snapshot of each share-partition whose
last one is that old (snapshot_cold). Replaying a key is its last snapshot, then the updates
of that snapshot's epoch in log order.

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
    encode_state_key,
    encode_state_value,
)

from .. import server_log
from ..log.config import LogConfig
from ..log.offsets import OffsetsLog, partition_for

log = server_log.get(__name__)

TOPIC = "__share_group_state"
STATE_TOPIC_CONFIG = LogConfig(cleanup_policy="delete", retention_ms=None, segment_ms=None)

# (group id, topic id, partition)
Key = tuple[str, uuid.UUID, int]


class FencedStateEpoch(Exception):
    """A write under an older state epoch than the stored one (Kafka's FENCED_STATE_EPOCH)."""

    def __init__(self) -> None:
        super().__init__(
            "The share coordinator rejected the request because the share-group state epoch did not match."
        )


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
    snapshot_offset: int = 0  # where the last snapshot is in the log
    # the last snapshot's (Kafka's ShareGroupOffset): both when it was written, but for a cold
    # snapshot (snapshot_cold), which keeps the create timestamp of the one it repeats
    create_timestamp: int = -1
    write_timestamp: int = -1

    def apply(self, start: int, batches: tuple[StateBatch, ...]) -> None:
        if start >= 0:
            self.start = start
            self.records = {o: s for o, s in self.records.items() if o >= start}
        for b in batches:
            for offset in range(max(b.first_offset, self.start), b.last_offset + 1):
                self.records[offset] = (b.delivery_state, b.delivery_count)


class ShareStateLog:
    def __init__(
        self, log_: OffsetsLog, snapshot_every: int = 500, first_write: Callable[[], None] = lambda: None
    ) -> None:
        self.log = log_
        self.snapshot_every = snapshot_every
        self.states: dict[Key, StoredState] = {}
        self._pruning: set[asyncio.Task] = set()
        # called before each write: the topic comes into existence at its first (Kafka's share
        # coordinator creates __share_group_state when a share-partition's state is first written)
        self.first_write = first_write

    @classmethod
    async def open(
        cls, data_dir: str | Path, partitions: int, fsync: str, fsync_interval_ms: int, snapshot_every: int = 500
    ) -> ShareStateLog:
        return cls(await open_log(data_dir, partitions, fsync, fsync_interval_ms), snapshot_every)

    def partition_of(self, key: Key) -> int:
        group, topic_id, partition = key
        return partition_for(f"{group}:{kafka_uuid(topic_id)}:{partition}", self.log.partitions)

    # loading ----------------------------------------------------------------------------

    def load(self) -> int:
        """Replay every partition: each key's last snapshot and the updates of its epoch."""
        count = 0
        for p, plog in enumerate(self.log.logs):
            if plog.offline is not None:
                log.error("%s-%d is offline (%s): its share-partitions start afresh", TOPIC, p, plog.offline)
                continue
            for _, data in plog.batches(plog.log_start_offset):
                for r in iter_batch_records(data):
                    if r.key is None:
                        continue
                    k = decode_state_key(r.key)
                    key = (k.group, k.topic_id, k.partition)
                    if r.value is None:  # a tombstone: the share-partition's state was deleted
                        self.states.pop(key, None)
                        continue
                    self.replay(key, k, decode_state_value(k, r.value), r.offset)
                    count += 1
        if self.states:
            log.info("loaded %d share-group state records: %d share-partitions", count, len(self.states))
        return count

    def replay(self, key: Key, k: ShareStateKey, value: Any, offset: int) -> None:
        if k.snapshot:
            before = self.states.get(key)
            self.states[key] = state = StoredState(
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
        current = self.states.get(key)
        if current is None or value.snapshot_epoch != current.snapshot_epoch:
            return  # an update of a snapshot that is gone or was superseded
        current.apply(value.start_offset, value.state_batches)
        current.updates += 1

    def _after_snapshot(self, updates: int) -> int:
        """Kafka's ShareCoordinatorShard.handleShareSnapshot: the count starts again only once
        it reached the limit."""
        return 0 if updates >= self.snapshot_every else updates

    # writing ----------------------------------------------------------------------------

    def write(
        self,
        key: Key,
        start: int,
        runs: list[tuple[int, int, int, int]],
        now_ms: int,
        done: Callable[[BaseException | None], None],
        *,
        full: bool = False,
        state_epoch: int | None = None,
        restart: bool = False,
        whole: Callable[[], list[tuple[int, int, int, int]]] | None = None,
        cold: bool = False,
    ) -> None:
        """Persist a share-partition's change: `runs` (first, last, state, count) are the
        state batches that changed (all of them with full=True), `start` its start offset;
        restart: nothing in flight any more (AlterShareGroupOffsets); whole(): every state
        batch of the share-partition now, for when this write is a snapshot. done(None) once
        durable, done(error) if the write failed (nothing of it stays). cold: a snapshot of the
        state as it is (snapshot_cold).

        state_epoch: the share-partition's; a write under an older one than the stored (the
        share-partition was started over since it was loaded) is refused, nothing written:
        done(FencedStateEpoch()), as Kafka's ShareCoordinatorShard.writeState answers
        FENCED_STATE_EPOCH. A newer one (AlterShareGroupOffsets' restart) is stored.

        What is written is applied to `states` at once, in write order, not when durable: a
        snapshot must hold every update queued before it (an update of the older snapshot
        epoch that lands before it is superseded at replay). A failed write makes the next
        one a snapshot of the live share-partition, which rewrites what the log lost."""
        state = self.states.get(key)
        if state is not None and state_epoch is not None and state_epoch < state.state_epoch:
            done(FencedStateEpoch())
            return
        # Kafka's ShareCoordinatorShard.generateShareStateRecord: a snapshot once the updates
        # since the last one reached share.coordinator.snapshot.update.records.per.snapshot (a
        # share-partition's first write, and a full one, as Kafka's initializeState, too)
        snapshot = full or cold or state is None or state.updates >= self.snapshot_every
        created = state is None
        if state is None:
            state = self.states[key] = StoredState()
        if restart:
            state.records = {}
        if state_epoch is not None:
            state.state_epoch = state_epoch
        if snapshot and whole is not None and not full:
            runs = whole()
            state.records = {}
        batches = tuple(StateBatch(*run) for run in runs)
        state.apply(start, batches)
        group, topic_id, partition = key
        if snapshot:
            state.snapshot_epoch += 1
            state.updates = self._after_snapshot(state.updates)
            if not cold:
                state.create_timestamp = now_ms
            state.write_timestamp = now_ms
            value: Any = ShareSnapshotValue(
                state.snapshot_epoch,
                state.state_epoch,
                0,
                state.start,
                state.create_timestamp,
                now_ms,
                _batches_of(state.records),
                # (none in a share-partition's initialization, nor while it is not started)
                -1 if full or state.start < 0 else _complete(state),
            )
        else:
            state.updates += 1
            value = ShareUpdateValue(state.snapshot_epoch, 0, start, batches, _complete(state))
        record_key = encode_state_key(ShareStateKey(snapshot, group, topic_id, partition))
        p = self.partition_of(key)

        def written(error: BaseException | None, first: int | None) -> None:
            if error is not None:
                state.updates = self.snapshot_every  # the next write: a snapshot of the live state
                if created and self.states.get(key) is state:
                    del self.states[key]  # (its first snapshot: it was never started)
            elif snapshot and first is not None:
                state.snapshot_offset = first
                self._prune(p)
            done(error)

        self.first_write()
        self.log.append_to(p, [(record_key, encode_state_value(value))], written, now_ms)

    def initialize(self, key: Key, state_epoch: int, now_ms: int, done: Callable[[BaseException | None], None]) -> None:
        """Kafka's ShareCoordinatorShard.initializeState for a share-partition with no state: its
        first ShareSnapshot (snapshot epoch 0) under `state_epoch` (the group's epoch, as Kafka's
        group coordinator gives it), at start offset -1 (not started)."""
        state = self.states[key] = StoredState(state_epoch=state_epoch, start=-1)

        def written(error: BaseException | None) -> None:
            if error is not None and self.states.get(key) is state:
                del self.states[key]
            done(error)

        self.write(key, -1, [], now_ms, written, full=True)

    def snapshot_cold(self, now_ms: int, interval_ms: int, done: Callable[[], None]) -> int:
        """Kafka's ShareCoordinatorShard.snapshotColdPartitions, per partition of the topic (a
        share coordinator shard): unless every share-partition there was cold-snapshotted
        already (its last snapshot's create and write timestamps differ), each whose last
        snapshot is `interval_ms` old or older gets a new one of its state as it is, which lets
        the log's records before it be pruned. done() once every write is done (written or
        not: one that failed makes the share-partition's next write a snapshot). The number
        of snapshots written."""
        cold: list[Key] = []
        by_partition: dict[int, list[Key]] = {}
        for key in self.states:
            by_partition.setdefault(self.partition_of(key), []).append(key)
        for keys in by_partition.values():
            if all(self.states[k].create_timestamp != self.states[k].write_timestamp for k in keys):
                continue
            cold += [k for k in keys if now_ms - self.states[k].write_timestamp >= interval_ms]
        left = [len(cold)]

        def written(error: BaseException | None) -> None:
            if error is not None:
                log.warning("cold share-partition snapshot not written: %s", error)
            left[0] -= 1
            if left[0] == 0:
                done()

        if not cold:
            done()
        for key in cold:
            log.debug("share-partition %s: its last snapshot is older than %d ms", key, interval_ms)
            self.write(key, -1, [], now_ms, written, cold=True)
        return len(cold)

    def resync(self, key: Key, start: int, runs: list[tuple[int, int, int, int]]) -> None:
        """The share-partition's writes that failed were undone: what this view holds of it is
        its live state again (the next write is a snapshot of it, rewriting what the log lost)."""
        state = self.states.get(key)
        if state is not None:
            state.start = start
            state.records = {}
            state.apply(-1, tuple(StateBatch(*run) for run in runs))

    def delete(self, key: Key, done: Callable[[BaseException | None], None]) -> None:
        """DeleteShareGroupOffsets: the share-partition's state goes: one tombstone, of its
        ShareSnapshot key, written only if it has state (Kafka's ShareCoordinatorShard.deleteState)."""
        group, topic_id, partition = key
        if key not in self.states:
            done(None)
            return

        def written(error: BaseException | None, _: Any) -> None:
            if error is None:
                self.states.pop(key, None)
            done(error)

        tombstone = encode_state_key(ShareStateKey(True, group, topic_id, partition))
        self.log.append_to(self.partition_of(key), [(tombstone, None)], written)

    def _prune(self, p: int) -> None:
        """Records before the oldest snapshot a key of partition p still needs are redundant
        (Kafka's ShareCoordinatorShard.lastRedundantOffset, then DeleteRecords)."""
        needed = [s.snapshot_offset for k, s in self.states.items() if self.partition_of(k) == p]
        if not needed:
            return
        plog = self.log.logs[p]
        upto = min(needed)
        if upto > plog.log_start_offset:
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
