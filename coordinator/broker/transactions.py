"""Transactions as one partition sees them: which producers have a transaction open on it
(from their first transactional batch to their marker), which transactions were aborted,
and the last stable offset (LSO) below which every transaction is decided.

read_committed fetches stop at the LSO and get the aborted transactions of what they
read, so the client drops those records (Kafka's aborted-transaction index). The state
is rebuilt from the batch headers and markers in the log the first time it is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from protocol.record_batch import ABORT_MARKER, BatchHeader, control_batch_marker

from ..apis import RequestContext
from ..log.partition import PartitionLog


class TransactionChecks(Protocol):
    """What a partition leader (the data plane) and the group coordinator ask of the
    transaction coordinator, as Kafka's AddPartitionsToTxnManager asks it over the network:
    whether a producer's partition is in its ongoing transaction (KIP-890 part 1), adding
    it implicitly (transactions v2, KIP-890 part 2), and InitProducerId for a transactional id."""

    def verify(self, txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> int: ...

    async def add_implicitly(
        self, txn_id: str, pid: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]: ...

    async def init_producer_id(self, ctx: RequestContext, req: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """The marker that ends a producer's transaction on a partition: commit or abort, at the
    producer's epoch, from a coordinator of `coordinator_epoch` (a marker from a replaced
    coordinator is fenced), under the client's transaction version (2: KIP-890 part 2, whose
    markers carry the epoch bumped at the end of each transaction)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    transaction_version: int = 0


class PartitionTxns:
    def __init__(self, cuts: int = 0) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[tuple[int, int, int]] = []  # (producer id, first offset, marker offset), log order
        self.cuts = cuts  # the log's cut count this state was built at

    @classmethod
    def from_log(cls, plog: PartitionLog) -> PartitionTxns:
        state = cls(plog.cuts)
        for h, data in plog.batches():
            if not h.is_transactional:
                continue
            if h.is_control:
                state.on_marker(h.producer_id, control_batch_marker(data) != ABORT_MARKER, h.base_offset)
            else:
                state.on_append(h, h.base_offset)
        return state

    def on_append(self, h: BatchHeader, base_offset: int) -> None:
        if h.is_transactional and not h.is_control:
            self.ongoing.setdefault(h.producer_id, base_offset)

    def on_marker(self, producer_id: int, commit: bool, offset: int) -> None:
        first = self.ongoing.pop(producer_id, None)
        if not commit and first is not None:
            self.aborted.append((producer_id, first, offset))

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(self.ongoing.values(), default=high_watermark) if self.ongoing else high_watermark

    def aborted_between(self, start: int, end: int, log_start: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)."""
        if self.aborted and self.aborted[0][2] < log_start:  # gone with retention
            self.aborted = [a for a in self.aborted if a[2] >= log_start]
        return [(pid, first) for pid, first, last in self.aborted if last >= start and first < end]
