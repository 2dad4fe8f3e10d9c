"""What each partition's leader keeps of its producers and their transactions (Kafka's
ProducerStateManager and transaction index, per log), and the markers that end a
transaction there.

This is the layer under both the data plane (which appends producers' batches) and the
transaction coordinator (which writes the markers), as Kafka's ReplicaManager is under
KafkaApis and the TransactionMarkerChannelManager: built first and given to both, so
neither needs the other to write a marker.
"""

from __future__ import annotations

import asyncio
import time
import weakref

from kio.schema.errors import ErrorCode as E

from protocol.record_batch import build_control_batch

from ..log.partition import PartitionLog, StorageError
from .producers import PartitionProducers
from .topics import Topics
from .transactions import PartitionTxns, TxnMarker

PRODUCER_ID_EXPIRATION_CHECK_MS = 600_000  # producer.id.expiration.check.interval.ms


class PartitionStates:
    def __init__(self, topics: Topics) -> None:
        self.topics = topics
        # Keyed by the log object: a deleted and re-created topic starts afresh.
        self.producers: weakref.WeakKeyDictionary[PartitionLog, PartitionProducers] = weakref.WeakKeyDictionary()
        self.txns: weakref.WeakKeyDictionary[PartitionLog, PartitionTxns] = weakref.WeakKeyDictionary()

    def txn_state(self, plog: PartitionLog) -> PartitionTxns:
        state = self.txns.get(plog)
        if state is None or state.cuts != plog.cuts:  # (a failed sync cut batches it knew)
            state = self.txns[plog] = PartitionTxns.from_log(plog)
        return state

    def last_stable_offset(self, plog: PartitionLog) -> int:
        return self.txn_state(plog).last_stable_offset(plog.high_watermark)

    def producer_state(self, plog: PartitionLog) -> PartitionProducers:
        """The partition's producers; those past producer.id.expiration.ms are swept out
        every producer.id.expiration.check.interval.ms, as Kafka's background check does."""
        state = self.producers.get(plog)
        if state is None or state.cuts != plog.cuts:  # (a failed sync cut batches it knew)
            state = self.producers[plog] = PartitionProducers.from_log(plog)
            state.swept_ms = int(time.time() * 1000)  # (the first sweep one interval after loading)
        now = int(time.time() * 1000)
        if now - state.swept_ms >= PRODUCER_ID_EXPIRATION_CHECK_MS:
            state.swept_ms = now
            state.expire(now, self.producer_id_expiration_ms(), self.txn_state(plog).ongoing)
        return state

    def producer_id_expiration_ms(self) -> int:
        return int(self.topics.broker_configs.value("producer.id.expiration.ms"))

    async def write_txn_markers(self, marker: TxnMarker, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], E]:
        """End a transaction on its topic partitions: a commit or abort marker (a control
        batch) appended to each, durable per the fsync policy; the LSO moves past it and
        the producer's older epochs are fenced there. Per partition: NONE, or the error (a
        deleted topic: UNKNOWN_TOPIC_OR_PARTITION, the coordinator drops it; a marker older
        than the producer's epoch or the last marker's coordinator epoch:
        INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED, nothing written; a failed
        write: KAFKA_STORAGE_ERROR, nothing of it stays and the coordinator retries)."""
        results: dict[tuple[str, int], E] = {}
        now = int(time.time() * 1000)
        written = set()
        for tp in partitions:
            plog = self.topics.partition_log(*tp)
            if plog is None:
                results[tp] = E.unknown_topic_or_partition
                continue
            producers = self.producer_state(plog)
            error = producers.check_marker(marker)
            if error != E.none:
                results[tp] = error
                continue
            try:
                base = plog.append(
                    build_control_batch(
                        marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch, now
                    )
                )
            except StorageError:
                results[tp] = E.kafka_storage_error
                continue
            self.txn_state(plog).on_marker(marker.producer_id, marker.commit, base)
            producers.on_marker(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, now)
            written.add(tp)
            results[tp] = E.none
        for tp in await durable(self.topics, written):
            results[tp] = E.kafka_storage_error
        return results


async def durable(topics: Topics, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """acks=-1 and markers: wait for the fsync policy (with fsync=always: on disk); the
    partitions whose sync failed (their appends were cut), with why."""
    logs = {tp: plog for tp in partitions if (plog := topics.partition_log(*tp)) is not None}
    outcomes = await asyncio.gather(*map(_policy_flush, logs.values()), return_exceptions=True)
    return {tp: str(o) for tp, o in zip(logs, outcomes) if isinstance(o, StorageError)}


async def _policy_flush(plog: PartitionLog) -> None:
    if plog.config.fsync == "always":
        await plog.flush()
