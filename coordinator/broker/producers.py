"""Idempotent producers: producer ids, epochs and per-partition sequence checks.

Kafka keeps, per partition and producer, the epoch and the last five batches'
sequence ranges: a retried batch is recognised and answered with the offset it got the
first time; a gap in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER. The state is
rebuilt from the batch headers in the log the first time a partition sees a producer.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode as E

from protocol.record_batch import BatchHeader

from ..durable import JsonFile
from ..log.partition import PartitionLog

RECENT_BATCHES = 5  # max.in.flight.requests.per.connection for idempotence
ID_BLOCK = 1000
INT32_MAX = 2**31 - 1


@dataclass
class ProducerEntry:
    epoch: int
    last_seq: int = -1
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))  # (first, last, base offset)


def next_seq(seq: int, count: int) -> int:
    """Sequences wrap from INT32_MAX to 0."""
    return (seq + count) % (INT32_MAX + 1)


class PartitionProducers:
    def __init__(self, cuts: int = 0) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        self.cuts = cuts  # the log's cut count this state was built at: a cut may remove recorded batches

    @classmethod
    def from_log(cls, plog: PartitionLog) -> "PartitionProducers":
        state = cls(plog.cuts)
        for h, _ in plog.batches():
            if h.producer_id >= 0 and h.base_sequence >= 0:
                state.record(h, h.base_offset)
        return state

    def check(self, h: BatchHeader) -> tuple[E, int | None]:
        """(error, duplicate's base offset or None) for an incoming batch."""
        entry = self.entries.get(h.producer_id)
        if entry is None:
            return E.none, None  # unknown (or expired) producer: accept, as Kafka >= 2.5 does
        if h.producer_epoch < entry.epoch:
            return E.invalid_producer_epoch, None
        last = next_seq(h.base_sequence, h.last_offset_delta)
        if h.producer_epoch > entry.epoch:
            return (E.none, None) if h.base_sequence == 0 else (E.out_of_order_sequence_number, None)
        for first_seq, last_seq, base_offset in entry.recent:
            if first_seq == h.base_sequence and last_seq == last:
                return E.none, base_offset
        if h.base_sequence != next_seq(entry.last_seq, 1):
            return E.out_of_order_sequence_number, None
        return E.none, None

    def fence(self, producer_id: int, epoch: int) -> None:
        """A transaction marker of this epoch was written: older epochs are refused here."""
        entry = self.entries.get(producer_id)
        if entry is not None and epoch > entry.epoch:
            self.entries[producer_id] = ProducerEntry(epoch)

    def record(self, h: BatchHeader, base_offset: int) -> None:
        entry = self.entries.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = self.entries[h.producer_id] = ProducerEntry(h.producer_epoch)
        entry.last_seq = next_seq(h.base_sequence, h.last_offset_delta)
        entry.recent.append((h.base_sequence, entry.last_seq, base_offset))


def _next_block(doc: dict) -> int:
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
            await self.file.save({"next_block": end}, then=lambda end=end: self._claimed(end))
        pid = self.next_id
        self.next_id += 1
        return pid

    def _claimed(self, end: int) -> None:
        self.block_end = max(self.block_end, end)
