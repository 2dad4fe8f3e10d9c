"""Idempotent producers: producer ids, epochs and per-partition sequence checks.

Kafka keeps, per partition and producer, the epoch and the last five batches'
sequence ranges: a retried batch is recognised and answered with the offset it got the
first time; a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER. The state is
rebuilt from the batch headers in the log the first time a partition sees a producer.
Transaction markers raise a producer's epoch and record the coordinator epoch that wrote
them; a marker older than either is refused (ProducerAppendInfo.appendEndTxnMarker).
What DescribeProducers reports (Kafka's ProducerStateManager.activeProducers) is this
state. A producer idle for producer.id.expiration.ms with no transaction open is
forgotten (removeExpiredProducers).
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol.record_batch import BatchHeader, control_batch_coordinator_epoch

from ..durable import JsonFile
from ..log.partition import PartitionLog
from .transactions import TxnMarker

RECENT_BATCHES = 5  # max.in.flight.requests.per.connection for idempotence
ID_BLOCK = 1000
INT32_MAX = 2**31 - 1


@dataclass
class ProducerEntry:
    epoch: int
    last_seq: int = -1
    # (first, last sequence, base offset, max timestamp) of the last batches
    recent: deque[Any] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))
    last_timestamp: int = -1  # the last batch's max timestamp, or the last marker's
    coordinator_epoch: int = -1  # of the last marker written for it here


def java_map_order(producer_ids: list[int]) -> list[int]:
    """Producer ids (in the order they were added) in the order Kafka's ProducerStateManager
    lists them: its producers are a java.util.HashMap<Long, ...>, iterated bucket by bucket
    (Long.hashCode spread by h ^ h >>> 16, masked by the table's size: 16, doubled past 3/4
    full), a bucket in insertion order. (The table size is taken from the current count: a
    Java map that once held more keeps its larger table.)"""
    capacity = 16
    while len(producer_ids) > capacity * 3 // 4:
        capacity <<= 1

    def bucket(pid: int) -> int:
        h = (pid ^ (pid >> 32)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(producer_ids, key=bucket)  # (a stable sort: insertion order within a bucket)


def next_seq(seq: int, count: int) -> int:
    """Sequences wrap from INT32_MAX to 0."""
    return (seq + count) % (INT32_MAX + 1)


class PartitionProducers:
    def __init__(self, cuts: int = 0) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        self.cuts = cuts  # the log's cut count this state was built at: a cut may remove recorded batches
        self.swept_ms = 0  # when expired producers were last removed

    @classmethod
    def from_log(cls, plog: PartitionLog) -> "PartitionProducers":
        state = cls(plog.cuts)
        for h, data in plog.batches():
            if h.is_control:
                if h.producer_id >= 0:
                    state.on_marker(
                        h.producer_id, h.producer_epoch, control_batch_coordinator_epoch(data), h.max_timestamp
                    )
            elif h.producer_id >= 0 and h.base_sequence >= 0:
                state.record(h, h.base_offset)
        return state

    def check(self, h: BatchHeader) -> tuple[E, tuple[int, int] | None]:
        """(error, None or a duplicate's base offset and max timestamp) for an incoming batch."""
        entry = self.entries.get(h.producer_id)
        if entry is None:
            return E.none, None  # unknown (or expired) producer: accept, as Kafka >= 2.5 does
        if h.producer_epoch < entry.epoch:
            return E.invalid_producer_epoch, None
        last = next_seq(h.base_sequence, h.last_offset_delta)
        if h.producer_epoch > entry.epoch:
            return (E.none, None) if h.base_sequence == 0 else (E.out_of_order_sequence_number, None)
        for first_seq, last_seq, base_offset, max_timestamp in entry.recent:
            if first_seq == h.base_sequence and last_seq == last:
                return E.none, (base_offset, max_timestamp)
        if h.base_sequence != next_seq(entry.last_seq, 1):
            return E.out_of_order_sequence_number, None
        return E.none, None

    def check_marker(self, marker: TxnMarker) -> E:
        """A marker's epoch may not be older than the producer's here (under transactions v2,
        whose markers carry the epoch bumped at the end of each transaction, not even the
        same), nor its coordinator epoch older than the last marker's."""
        entry = self.entries.get(marker.producer_id)
        if entry is None:
            return E.none
        epoch = marker.producer_epoch
        if epoch < entry.epoch or (marker.transaction_version >= 2 and epoch == entry.epoch):
            return E.invalid_producer_epoch
        if marker.coordinator_epoch < entry.coordinator_epoch:
            return E.transaction_coordinator_fenced
        return E.none

    def on_marker(self, producer_id: int, epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """A transaction marker of this epoch was written: older epochs are refused here."""
        entry = self.entries.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.entries[producer_id] = ProducerEntry(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp

    def expire(self, now_ms: int, expiration_ms: int, open_txns: dict[int, int]) -> None:
        """Forget the producers idle for expiration_ms with no transaction open here."""
        for pid in [
            pid
            for pid, entry in self.entries.items()
            if pid not in open_txns and now_ms - entry.last_timestamp >= expiration_ms
        ]:
            del self.entries[pid]

    def record(self, h: BatchHeader, base_offset: int) -> None:
        entry = self.entries.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = self.entries[h.producer_id] = ProducerEntry(h.producer_epoch)
        entry.last_seq = next_seq(h.base_sequence, h.last_offset_delta)
        entry.recent.append((h.base_sequence, entry.last_seq, base_offset, h.max_timestamp))
        entry.last_timestamp = h.max_timestamp


def _next_block(doc: dict[str, Any]) -> int:
    end = doc["next_block"]
    if type(end) is not int or end < 0:
        raise ValueError(f"next_block {end!r} is not a producer id")
    return end


class ProducerIds:
    """Hands out producer ids that stay unique across restarts, as Kafka's ProducerIdManager
    does: ids come from blocks of ID_BLOCK, and a block's end is durable before any id in it
    is handed out, so a crash at any point skips ids but never reuses one."""

    def __init__(self, data_dir: Path) -> None:
        self.file = JsonFile(Path(data_dir) / "producer_ids.json")
        self.next_id: int = self.file.load(0, parse=_next_block)
        self.block_end = self.next_id  # nothing handed out until a block is durable

    async def allocate(self) -> int:
        """A new producer id. OSError if the next block cannot be made durable."""
        while self.next_id >= self.block_end:
            end = self.next_id + ID_BLOCK
            await self.file.save({"next_block": end}, then=functools.partial(self._claimed, end))
        pid = self.next_id
        self.next_id += 1
        return pid

    def _claimed(self, end: int) -> None:
        self.block_end = max(self.block_end, end)
