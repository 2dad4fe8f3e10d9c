"""The transaction coordinator (Kafka's TransactionCoordinator, transactions v1).

One TransactionMetadata per transactional id, its changes written to `__transaction_state`
(partitioned by transactional id as groups are) before they take effect, so a restart
rebuilds every transaction by replaying the log. Requests for one transactional id are
serialized by its lock; different ids run concurrently.

EndTxn answers once PrepareCommit / PrepareAbort is durable: from then on the outcome is
decided. The markers (control batches on every partition of the transaction; for
`__consumer_offsets` they also apply or drop the pending offsets) are written after, and
CompleteCommit / CompleteAbort closes it. Requests arriving meanwhile get
CONCURRENT_TRANSACTIONS and the client retries, as with Kafka. A transaction found in a
Prepare state at startup, or when its `__transaction_state` partition moves to this
coordinator (`unload` / `load_partition`, the TransactionStateManager's emigration and
immigration), has its markers written again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import re2

from kio.schema.errors import ErrorCode as E

from protocol.record_batch import iter_batch_records
from protocol.transaction_records import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    STATE_NAMES,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

from .. import server_log
from ..apis import Registry, RequestContext, errors_by_topic, ms
from ..broker.transactions import TxnMarker
from ..futures import future_and_callback
from ..log.offsets import TOPIC as OFFSETS_TOPIC, OffsetsLog

log = server_log.get(__name__)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's INVALID_REGULAR_EXPRESSION, not a log line

TOPIC = "__transaction_state"
# Kafka's Topic.isInternal: a client's AddPartitionsToTxn may not add them (TOPIC_AUTHORIZATION_FAILED)
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TOPIC, "__share_group_state"})
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS = 24, 25, 26, 27
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
MAX_EPOCH = 32767  # Short.MaxValue: at MAX_EPOCH - 1 a producer gets a new id instead of an epoch
RETRY_MARKERS_S = 1.0


def _now() -> int:
    return int(time.time() * 1000)


def millis_datetime(ms: int) -> datetime.datetime:
    """kio writes timestamps from datetimes; -1 (none) is the millisecond before the epoch."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


def no_transaction_state(ctx: RequestContext, txn_id: str, error: int) -> Any:
    """DescribeTransactions' entry for a transactional id it cannot describe, with the error."""
    return ctx.nested(
        "TransactionState",
        # (as Kafka: every other field at its zero)
        error_code=error,
        transactional_id=txn_id,
        transaction_state="",
        transaction_timeout=0,
        transaction_start_time=millis_datetime(0),
        producer_id=0,
        producer_epoch=0,
        topics=(),
    )


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = 0
    last_producer_id: int = -1  # before the last epoch bump (KIP-360: a producer may retry InitProducerId)
    last_producer_epoch: int = -1
    # Transactions v2 (KIP-890 part 2): the client's transaction version (2: an EndTxn v5 or an
    # add by Produce v12 / TxnOffsetCommit v5), the id a transaction ending at an exhausted
    # epoch moves to, and the id before that move (an EndTxn retry may still name it).
    client_tv: int = 0
    next_producer_id: int = -1
    previous_producer_id: int = -1
    # Its partition of __transaction_state moved to another coordinator: this copy is stale.
    unloaded: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    def value(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            by_topic,
            self.last_update_ms,
            self.start_ms,
            self.previous_producer_id,
            self.next_producer_id,
            self.client_tv,
        )


class MarkerWriter(Protocol):
    """Where the markers that end a transaction on its topic partitions are written (the
    partitions' producer state, coordinator.broker.partition_states): per partition, NONE or
    the error that partition gave."""

    async def write_txn_markers(
        self, marker: TxnMarker, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], Any]: ...


class OffsetsPartitions(Protocol):
    """Which `__consumer_offsets` partition holds a group (the runtime's writer)."""

    def partition_for(self, group_id: str) -> int: ...


class OffsetsShard(Protocol):
    """One `__consumer_offsets` partition's shard: a marker applies or drops the producer's
    pending offsets there; complete(NONE or the error) once it is durable."""

    def write_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, complete: Callable[[int], object]
    ) -> None: ...


class GroupOffsets(Protocol):
    """What the transaction coordinator asks of the group coordinator's runtime
    (coordinator.groups.runtime.CoordinatorRuntime): the partition a group's transactional
    offsets go to, and the shards its markers end them on."""

    @property
    def writer(self) -> OffsetsPartitions: ...

    @property
    def shards(self) -> Sequence[OffsetsShard]: ...


def _leads_all(ctx: RequestContext, topic: str, partition: int) -> int:
    return E.none


class TransactionCoordinator:
    def __init__(
        self,
        txn_log: OffsetsLog,
        topics: Any,
        markers: MarkerWriter,
        groups: GroupOffsets,
        producer_ids: Any,
        *,
        leader_error: Callable[[RequestContext, str, int], int] = _leads_all,
        max_timeout_ms: int = 900_000,
        abort_check_interval_ms: int = 10_000,
        id_expiration_ms: int = 604_800_000,
        remove_expired_interval_ms: int = 3_600_000,
        owner: Callable[[RequestContext, str], int] | None = None,
        leader_epoch: Callable[[int], int] = lambda partition: 0,
        transaction_version: Callable[[], int] = lambda: 0,
    ) -> None:
        self.log = txn_log
        self.topics = topics  # the broker's topics (coordinator.broker.topics.Topics)
        self.markers = markers
        # leader_error(ctx, topic, partition): NONE if the broker the request reached leads the
        # partition, else NOT_LEADER_OR_FOLLOWER (WriteTxnMarkers as a partition leader serves it)
        self.leader_error = leader_error
        self.groups = groups  # the group coordinator's runtime: markers for __consumer_offsets
        self.producer_ids = producer_ids
        self.max_timeout_ms = max_timeout_ms  # transaction.max.timeout.ms
        self.abort_check_interval_ms = abort_check_interval_ms
        self.id_expiration_ms = id_expiration_ms  # transactional.id.expiration.ms
        self.remove_expired_interval_ms = remove_expired_interval_ms
        self.txns: dict[str, TransactionMetadata] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: list[asyncio.Task[None]] = []
        # owner(ctx, transactional_id): NONE if the broker the request reached coordinates the
        # id, else NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (the topology's check).
        self.owner = owner
        # The coordinator epoch is the leader epoch of the id's __transaction_state partition
        # when this coordinator loaded it (Kafka's TransactionStateManager): it rises with
        # every move, and every marker carries it, so a partition leader refuses the markers
        # of a coordinator that has been replaced (TRANSACTION_COORDINATOR_FENCED).
        self.leader_epoch = leader_epoch  # (the topology's, with several brokers)
        self.coordinator_epochs: dict[int, int] = {}
        # The finalized transaction.version: from 1 on, TransactionLogValue is written in its
        # version 1 for every transaction, as Kafka's TransactionLog.valueToBytes does.
        self.transaction_version = transaction_version

    def register(self, registry: Registry) -> None:
        registry.add(ADD_PARTITIONS_TO_TXN, range(0, 6), self.add_partitions_to_txn)
        registry.add(ADD_OFFSETS_TO_TXN, range(0, 5), self.add_offsets_to_txn)
        registry.add(END_TXN, range(0, 6), self.end_txn)
        registry.add(WRITE_TXN_MARKERS, range(1, 3), self.write_txn_markers)
        registry.add(DESCRIBE_TRANSACTIONS, range(0, 1), self.describe_transactions)
        registry.add(LIST_TRANSACTIONS, range(0, 3), self.list_transactions)

    # loading ----------------------------------------------------------------------------

    def load(self) -> int:
        """Replay every partition of `__transaction_state` (at startup)."""
        return sum(self.load_partition(p) for p in range(len(self.log.logs)))

    def load_partition(self, partition: int) -> int:
        """Replay one `__transaction_state` partition (the last record of each id wins), then
        finish the transactions it holds in PrepareCommit / PrepareAbort: their outcome was
        decided, their markers may not all be written (Kafka's
        TransactionStateManager.loadTransactionsForTxnTopicPartition, then the coordinator's
        completion of the pending ones on immigration). An ongoing transaction comes back
        with its partitions and its start time, so its timeout runs on."""
        self.coordinator_epochs[partition] = self.leader_epoch(partition)
        loaded: dict[str, TransactionMetadata] = {}
        for _, data in self.log.logs[partition].batches():
            for r in iter_batch_records(data):
                if r.key is None:
                    continue
                txn_id = decode_key(r.key)
                v = decode_value(r.value)
                if v is None:
                    loaded.pop(txn_id, None)
                    continue
                loaded[txn_id] = TransactionMetadata(
                    txn_id,
                    v.producer_id,
                    v.producer_epoch,
                    v.timeout_ms,
                    v.status,
                    {(t, p) for t, ps in v.partitions.items() for p in ps},
                    v.start_ms,
                    v.last_update_ms,
                    client_tv=v.client_transaction_version,
                    next_producer_id=v.next_producer_id,
                    previous_producer_id=v.previous_producer_id,
                )
        self.txns.update(loaded)
        for meta in loaded.values():
            if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
                self._spawn(self._complete(meta))
        if loaded:
            log.info("%s-%d: loaded %d transactional ids", TOPIC, partition, len(loaded))
        return len(loaded)

    async def unload(self, partition: int) -> int:
        """Drop the transactional ids of one `__transaction_state` partition from memory
        (Kafka's TransactionStateManager.removeTransactionsForTxnTopicPartition, on
        emigration). What a request or a marker completion holding an id's lock is writing
        finishes first, so the log the new coordinator loads holds it; whatever waits for
        the lock after finds the id unloaded and answers NOT_COORDINATOR."""
        gone = [m for m in self.txns.values() if self.log.partition_for(m.transactional_id) == partition]
        for meta in gone:
            async with meta.lock:
                meta.unloaded = True
                if self.txns.get(meta.transactional_id) is meta:
                    del self.txns[meta.transactional_id]
        return len(gone)

    def start(self) -> None:
        # Two sweeps, as Kafka's two schedules (transaction-abort every 10 s, transactionalId-expiration hourly).
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.create_task(self._every(self.abort_check_interval_ms, self.abort_timed_out)),
            loop.create_task(self._every(self.remove_expired_interval_ms, self.expire_ids)),
        ]

    async def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # the write path ---------------------------------------------------------------------

    async def _write(self, meta: TransactionMetadata, changes: dict[str, Any]) -> int:
        """Store the metadata with `changes` applied; apply them only once durable. The
        error for the client if the write failed (nothing changed): NOT_COORDINATOR, as
        Kafka answers when its log append fails, so the client retries."""
        new = dataclasses.replace(meta, **changes, last_update_ms=_now())
        fut, done = future_and_callback()
        try:
            self.log.append(
                meta.transactional_id,
                [(encode_key(meta.transactional_id), encode_value(new.value(), self.transaction_version()))],
                done,
            )
            await fut
        except Exception as e:  # (OSError from a full disk, a closed log)
            log.warning("transaction %s: writing its state failed: %s", meta.transactional_id, e)
            return E.not_coordinator
        for f, v in changes.items():
            setattr(meta, f, v)
        meta.last_update_ms = new.last_update_ms
        return E.none

    # InitProducerId ---------------------------------------------------------------------

    async def _new_producer_id(self) -> tuple[int, int]:
        """(error, producer id): a block that cannot be made durable is Kafka's
        ProducerIdManager "block not ready yet", COORDINATOR_LOAD_IN_PROGRESS (retriable)."""
        try:
            return E.none, await self.producer_ids.allocate()
        except OSError as e:
            log.warning("cannot reserve producer ids: %s", e.strerror or e)
            return E.coordinator_load_in_progress, -1

    def _not_here(self, ctx: RequestContext, transactional_id: str | None) -> int:
        if self.owner is None or not transactional_id:
            return E.none
        return self.owner(ctx, transactional_id)

    async def init_producer_id(self, ctx: RequestContext, req: Any) -> Any:
        error = self._not_here(ctx, req.transactional_id)
        if error != E.none:
            return ctx.response(throttle_time=0, error_code=error, producer_id=-1, producer_epoch=-1)
        error, pid, epoch = await self._init(
            req.transactional_id,
            ms(req.transaction_timeout),
            getattr(req, "producer_id", -1),
            getattr(req, "producer_epoch", -1),
        )
        if error == E.producer_fenced and ctx.version < 4:
            error = E.invalid_producer_epoch  # (PRODUCER_FENCED is KIP-588, v4+)
        return ctx.response(throttle_time=0, error_code=error, producer_id=pid, producer_epoch=epoch)

    async def _init(self, txn_id: str, timeout_ms: int, pid: int, epoch: int) -> tuple[int, int, int]:
        if not txn_id:
            return E.invalid_request, -1, -1
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return E.invalid_transaction_timeout, -1, -1
        meta = self.txns.get(txn_id)
        if meta is None:
            meta = self.txns[txn_id] = TransactionMetadata(txn_id, -1, -1, timeout_ms, EMPTY)
            async with meta.lock:
                error, new_pid = await self._new_producer_id()
                if error == E.none:
                    error = await self._write(meta, {"producer_id": new_pid, "producer_epoch": 0})
                if error != E.none:
                    self.txns.pop(txn_id, None)
                    return error, -1, -1
                return E.none, meta.producer_id, meta.producer_epoch
        async with meta.lock:
            if meta.unloaded:  # its partition moved while we waited
                return E.not_coordinator, -1, -1
            if self.txns.get(txn_id) is not meta:  # expired while we waited: start afresh
                return await self._init(txn_id, timeout_ms, pid, epoch)
            if pid >= 0:  # KIP-360: the producer says who it was
                retry = pid == meta.last_producer_id and epoch == meta.last_producer_epoch
                if not retry and (pid != meta.producer_id or epoch != meta.producer_epoch):
                    return E.producer_fenced, -1, -1
                if retry and meta.state not in (PREPARE_COMMIT, PREPARE_ABORT, ONGOING):
                    return E.none, meta.producer_id, meta.producer_epoch  # its earlier one went through
            if meta.state in (PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE):
                return E.concurrent_transactions, -1, -1
            if meta.state == ONGOING:
                # A new producer instance: the one before it is fenced (the epoch bumped) and its
                # transaction aborted; as Kafka's coordinator, the answer is CONCURRENT_TRANSACTIONS
                # once PrepareAbort is durable, and the producer's retry finds it completed.
                epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH - 1 else meta.producer_epoch
                error = await self._write(
                    meta, {"state": PREPARE_ABORT, "producer_epoch": epoch, "last_producer_epoch": -1}
                )
                if error != E.none:
                    return error, -1, -1
                self._spawn(self._complete(meta))
                return E.concurrent_transactions, -1, -1
            if meta.producer_epoch >= MAX_EPOCH - 1:
                error, new_pid = await self._new_producer_id()
                if error != E.none:
                    return error, -1, -1
                new_epoch = 0
            else:
                new_pid, new_epoch = meta.producer_id, meta.producer_epoch + 1
            error = await self._write(
                meta,
                {
                    "producer_id": new_pid,
                    "producer_epoch": new_epoch,
                    "timeout_ms": timeout_ms,
                    "state": EMPTY,
                    "partitions": set(),
                    "start_ms": -1,
                    "last_producer_id": meta.producer_id,
                    "last_producer_epoch": meta.producer_epoch,
                },
            )
            if error != E.none:
                return error, -1, -1
            return E.none, meta.producer_id, meta.producer_epoch

    async def _fence_and_abort(self, meta: TransactionMetadata) -> int:
        """Abort the ongoing transaction under a bumped epoch, so the producer that began it
        is fenced on every partition its markers reach (held under meta.lock)."""
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH - 1 else meta.producer_epoch
        error = await self._write(meta, {"state": PREPARE_ABORT, "producer_epoch": epoch})
        if error != E.none:
            return error
        await self._markers_and_complete(meta)
        return E.none

    # AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------

    def _check(self, txn_id: str, pid: int, epoch: int, version_fenced: bool) -> tuple[int, TransactionMetadata | None]:
        """Kafka's checks shared by AddPartitions, AddOffsets and EndTxn."""
        if not txn_id:
            return E.invalid_request, None
        meta = self.txns.get(txn_id)
        if meta is not None and meta.unloaded:
            return E.not_coordinator, None
        if meta is None or meta.producer_id != pid:
            return E.invalid_producer_id_mapping, None
        if epoch != meta.producer_epoch:
            return (E.producer_fenced if version_fenced else E.invalid_producer_epoch), None
        return E.none, meta

    def _recheck(self, meta: TransactionMetadata, pid: int, epoch: int, version_fenced: bool) -> int:
        """_check again once meta.lock is held: the id may have moved, expired or been bumped
        while the request waited."""
        if meta.unloaded:
            return E.not_coordinator
        error, current = self._check(meta.transactional_id, pid, epoch, version_fenced)
        return error if current is meta or error != E.none else E.invalid_producer_id_mapping

    async def _add(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        partitions: list[tuple[str, int]],
        version_fenced: bool,
        client_tv: int = 0,
    ) -> dict[tuple[str, int], int]:
        unknown = [tp for tp in partitions if tp[0] != OFFSETS_TOPIC and self.topics.partition_log(*tp) is None]
        if unknown:  # nothing is added: the known ones are not attempted
            return {
                tp: (E.unknown_topic_or_partition if tp in unknown else E.operation_not_attempted) for tp in partitions
            }
        error, meta = self._check(txn_id, pid, epoch, version_fenced)
        if meta is not None:
            async with meta.lock:
                error = self._recheck(meta, pid, epoch, version_fenced)
                if error == E.none:
                    error = await self._add_locked(meta, partitions, client_tv)
        return {tp: error for tp in partitions}

    async def _add_locked(self, meta: TransactionMetadata, partitions: list[tuple[str, int]], client_tv: int) -> int:
        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE):
            return E.concurrent_transactions
        if meta.state == DEAD:
            return E.invalid_txn_state
        if meta.state == ONGOING and set(partitions) <= meta.partitions:
            return E.none  # already in: nothing to write
        changes: dict[str, Any] = {
            "state": ONGOING,
            "partitions": meta.partitions | set(partitions),
            "client_tv": client_tv,
        }
        if meta.state != ONGOING:
            changes["start_ms"] = _now()
        return await self._write(meta, changes)

    async def add_implicitly(
        self, txn_id: str, pid: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """KIP-890 part 2: a transactions v2 producer's Produce v12+ or TxnOffsetCommit v5+ adds
        its partition (or its group's) to the ongoing transaction, as the partition leader's
        AddPartitionsToTxn v5 does in Kafka; per partition, the coordinator's error."""
        return await self._add(txn_id, pid, epoch, partitions, True, client_tv=2)

    async def add_partitions_to_txn(self, ctx: RequestContext, req: Any) -> Any:
        if ctx.version < 4:
            partitions = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
            error = self._not_here(ctx, req.v3_and_below_transactional_id)
            if error != E.none:
                return ctx.response(
                    throttle_time=0, results_by_topic_v3_and_below=self._by_topic(ctx, {tp: error for tp in partitions})
                )
            if any(topic in INTERNAL_TOPICS for topic, _ in partitions):
                # As Kafka's KafkaApis: an internal topic is not authorized to a client, and any
                # partition refused fails the request, the others not attempted.
                topics = self.topics
                results: dict[tuple[str, int], int] = {
                    tp: E.topic_authorization_failed
                    if tp[0] in INTERNAL_TOPICS
                    else E.unknown_topic_or_partition
                    if topics.partition_log(*tp) is None
                    else E.operation_not_attempted
                    for tp in partitions
                }
            else:
                results = await self._add(
                    req.v3_and_below_transactional_id,
                    req.v3_and_below_producer_id,
                    req.v3_and_below_producer_epoch,
                    partitions,
                    ctx.version >= 2,
                )
            return ctx.response(throttle_time=0, results_by_topic_v3_and_below=self._by_topic(ctx, results))
        out = []
        for t in req.transactions:  # v4+: a broker verifying or adding for its producers (KIP-890)
            partitions = [(x.name, p) for x in t.topics for p in x.partitions]
            if t.verify_only:
                results = {
                    tp: self.verify(t.transactional_id, t.producer_id, t.producer_epoch, *tp) for tp in partitions
                }
            else:
                results = await self._add(
                    t.transactional_id,
                    t.producer_id,
                    t.producer_epoch,
                    partitions,
                    True,
                    client_tv=2 if ctx.version >= 5 else 0,
                )
            out.append(
                ctx.nested(
                    "AddPartitionsToTxnResult",
                    transactional_id=t.transactional_id,
                    topic_results=self._by_topic(ctx, results),
                )
            )
        return ctx.response(throttle_time=0, error_code=E.none, results_by_transaction=tuple(out))

    @staticmethod
    def _by_topic(ctx: RequestContext, results: dict[tuple[str, int], int]) -> tuple[Any, ...]:
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), error in results.items():
            by_topic.setdefault(topic, []).append(
                ctx.nested("AddPartitionsToTxnPartitionResult", partition_index=partition, partition_error_code=error)
            )
        return tuple(
            ctx.nested("AddPartitionsToTxnTopicResult", name=topic, results_by_partition=tuple(parts))
            for topic, parts in by_topic.items()
        )

    async def add_offsets_to_txn(self, ctx: RequestContext, req: Any) -> Any:
        error = self._not_here(ctx, req.transactional_id)
        if error != E.none:
            return ctx.response(throttle_time=0, error_code=error)
        # (an empty group id is a key like any other at Kafka: it names a __consumer_offsets partition)
        tp = (OFFSETS_TOPIC, self.groups.writer.partition_for(req.group_id))
        results = await self._add(req.transactional_id, req.producer_id, req.producer_epoch, [tp], ctx.version >= 2)
        return ctx.response(throttle_time=0, error_code=results[tp])

    def verify(self, txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> int:
        """KIP-890 part 1, the coordinator's answer to a leader verifying a transactional write
        (handleVerifyPartitionsInTransaction): the partition must be in the producer's
        transaction, under its current epoch; a transaction being completed is
        CONCURRENT_TRANSACTIONS, a partition not in it TRANSACTION_ABORTABLE (the leader
        maps these for its client's version)."""
        meta = self.txns.get(txn_id) if txn_id else None
        if meta is None or meta.producer_id != pid:
            return E.invalid_producer_id_mapping
        if epoch != meta.producer_epoch:
            return E.producer_fenced
        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return E.concurrent_transactions
        return E.none if (topic, partition) in meta.partitions else E.transaction_abortable

    # EndTxn -----------------------------------------------------------------------------

    async def end_txn(self, ctx: RequestContext, req: Any) -> Any:
        """EndTxn; v5 (transactions v2, KIP-890 part 2) bumps the producer epoch at the end of
        every transaction and answers the producer id and epoch to use next (a new producer id
        once the epoch is exhausted)."""
        error = self._not_here(ctx, req.transactional_id)
        pid, epoch = -1, -1
        if error != E.none:
            pass
        elif not req.transactional_id:
            error = E.invalid_request
        elif (meta := self.txns.get(req.transactional_id)) is None:
            error = E.invalid_producer_id_mapping
        else:
            async with meta.lock:
                if meta.unloaded:
                    error = E.not_coordinator
                elif self.txns.get(meta.transactional_id) is not meta:  # expired while we waited
                    error = E.invalid_producer_id_mapping
                else:
                    error = await self._end(
                        meta, req.producer_id, req.producer_epoch, req.committed, 2 if ctx.version >= 5 else 0
                    )
                    if error == E.none:
                        pid, epoch = meta.producer_id, meta.producer_epoch
                        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT) and meta.next_producer_id >= 0:
                            pid, epoch = meta.next_producer_id, 0  # (what the transaction completes into)
        if error == E.producer_fenced and ctx.version < 2:
            error = E.invalid_producer_epoch  # (PRODUCER_FENCED is KIP-588, v2+)
        return ctx.response(throttle_time=0, error_code=error, producer_id=pid, producer_epoch=epoch)

    async def _end(self, meta: TransactionMetadata, pid: int, epoch: int, commit: bool, client_tv: int) -> int:
        """Kafka's endTransaction checks and transition, under meta.lock. A transactions v2
        transaction's epoch was bumped when it ended, so a retry of that EndTxn names the
        epoch before (or, across a new producer id, the old id at the exhausted epoch)."""
        v2 = meta.client_tv >= 2
        retry_on_bump = v2 and meta.producer_epoch == epoch + 1
        retry_on_overflow = (
            v2 and meta.previous_producer_id == pid and epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0
        )
        if not v2 or meta.state in (ONGOING, EMPTY, DEAD, PREPARE_EPOCH_FENCE):
            valid = epoch == meta.producer_epoch
        elif meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
            valid = retry_on_bump
        else:  # (the same epoch after a completed one: the next transaction, with nothing added)
            valid = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
        if meta.producer_id != pid and not retry_on_overflow:
            return E.invalid_producer_id_mapping
        if not valid:
            return E.producer_fenced
        nothing_added = meta.state == EMPTY or (
            v2 and meta.state in (COMPLETE_COMMIT, COMPLETE_ABORT) and epoch == meta.producer_epoch
        )
        if nothing_added and commit:
            return E.invalid_txn_state  # no transaction to commit
        if meta.state == ONGOING or (nothing_added and client_tv >= 2):
            # (transactions v2: an abort with nothing added still bumps the epoch, as a
            # producer whose first write failed may not know whether its partition was added)
            changes: dict[str, Any] = {"state": PREPARE_COMMIT if commit else PREPARE_ABORT, "client_tv": client_tv}
            if client_tv >= 2:
                if meta.producer_epoch >= MAX_EPOCH - 1:
                    error, changes["next_producer_id"] = await self._new_producer_id()
                    if error != E.none:
                        return error
                changes["producer_epoch"] = meta.producer_epoch + 1
            error = await self._write(meta, changes)
            if error == E.none:
                self._spawn(self._complete(meta))
            return error
        if meta.state in (COMPLETE_COMMIT, COMPLETE_ABORT):  # a retry of the EndTxn that ended it
            return E.none if (meta.state == COMPLETE_COMMIT) == commit else E.invalid_txn_state
        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return E.concurrent_transactions if (meta.state == PREPARE_COMMIT) == commit else E.invalid_txn_state
        if meta.state == PREPARE_EPOCH_FENCE:
            return E.concurrent_transactions
        return E.invalid_txn_state  # Empty or Dead: no transaction to end

    async def _complete(self, meta: TransactionMetadata) -> None:
        async with meta.lock:
            # (unloaded: the coordinator it moved to completes it after loading)
            if meta.state in (PREPARE_COMMIT, PREPARE_ABORT) and not meta.unloaded:
                await self._markers_and_complete(meta)

    async def _markers_and_complete(self, meta: TransactionMetadata) -> None:
        """Write the markers until every partition has one (a failed write is retried; a
        deleted topic is skipped), then CompleteCommit / CompleteAbort. Held under meta.lock."""
        commit = meta.state == PREPARE_COMMIT
        coordinator_epoch = self.coordinator_epochs.get(self.log.partition_for(meta.transactional_id), 0)
        marker = TxnMarker(meta.producer_id, meta.producer_epoch, coordinator_epoch, commit, meta.client_tv)
        left = set(meta.partitions)
        while left:
            topics = [tp for tp in left if tp[0] != OFFSETS_TOPIC]
            results = await self.markers.write_txn_markers(marker, topics) if topics else {}
            for tp, error in results.items():
                # (a partition that refuses the marker as fenced will refuse it again, as
                # Kafka's marker channel gives up on those)
                if error in (
                    E.none,
                    E.unknown_topic_or_partition,
                    E.invalid_producer_epoch,
                    E.transaction_coordinator_fenced,
                ):
                    left.discard(tp)
            for tp in [tp for tp in left if tp[0] == OFFSETS_TOPIC]:
                if await self._offsets_marker(tp[1], marker) == E.none:
                    left.discard(tp)
            if left:
                log.warning(
                    "transaction %s: markers for %d partitions not written yet; retrying",
                    meta.transactional_id,
                    len(left),
                )
                await asyncio.sleep(RETRY_MARKERS_S)
        complete: dict[str, Any] = {"state": COMPLETE_COMMIT if commit else COMPLETE_ABORT, "partitions": set()}
        if meta.next_producer_id >= 0:  # the epoch is exhausted: the producer goes on under a new id
            complete.update(
                producer_id=meta.next_producer_id,
                producer_epoch=0,
                previous_producer_id=meta.producer_id,
                next_producer_id=-1,
            )
        while await self._write(meta, complete) != E.none:
            await asyncio.sleep(RETRY_MARKERS_S)

    async def _offsets_marker(self, partition: int, marker: TxnMarker) -> int:
        """The marker on a `__consumer_offsets` partition: the group coordinator applies or
        drops the producer's pending offsets there; NONE or the error once durable."""
        fut, done = future_and_callback()
        self.groups.shards[partition].write_marker(
            marker.producer_id, marker.producer_epoch, marker.commit, lambda error: done(None, error)
        )
        error: int = await fut
        return error

    # WriteTxnMarkers --------------------------------------------------------------------

    async def write_txn_markers(self, ctx: RequestContext, req: Any) -> Any:
        """WriteTxnMarkers as a partition leader serves it (a coordinator's markers, or the
        admin client's abortTransaction for a hanging transaction, KIP-664): each marker on
        each partition named, refused there if older than the producer's epoch or the last
        marker's coordinator epoch; the pending offsets of __consumer_offsets partitions are
        applied or dropped by the group coordinator."""
        out = []
        for m in req.markers:
            version = getattr(m, "transaction_version", 0)
            results: dict[tuple[str, int], int] = {}
            to_write = []
            for t in m.topics:
                for p in t.partition_indexes:
                    tp = (t.name, p)
                    if t.name == OFFSETS_TOPIC:
                        results[tp] = E.unknown_topic_or_partition if not 0 <= p < len(self.groups.shards) else E.none
                    elif self.topics.partition_log(*tp) is None:
                        results[tp] = E.unknown_topic_or_partition
                    else:
                        results[tp] = self.leader_error(ctx, *tp)
                        if results[tp] == E.none:
                            to_write.append(tp)
            marker = TxnMarker(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result, version)
            if to_write:
                results.update(await self.markers.write_txn_markers(marker, to_write))
            for tp in [tp for tp, error in results.items() if tp[0] == OFFSETS_TOPIC and error == E.none]:
                error = await self._offsets_marker(tp[1], marker)
                results[tp] = E.not_leader_or_follower if error == E.not_coordinator else error
            by_topic: dict[str, list[tuple[int, Any]]] = {}
            for (topic, partition), error in results.items():
                by_topic.setdefault(topic, []).append((partition, error))
            topics = errors_by_topic(
                ctx, "WritableTxnMarkerTopicResult", "WritableTxnMarkerPartitionResult", by_topic.items()
            )
            out.append(ctx.nested("WritableTxnMarkerResult", producer_id=m.producer_id, topics=topics))
        return ctx.response(markers=tuple(out))

    # timeouts ---------------------------------------------------------------------------

    @staticmethod
    async def _every(interval_ms: int, sweep: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            sweep()

    def expire_ids(self) -> None:
        """transactional.id.expiration.ms: an id with no transaction open (Empty, CompleteCommit,
        CompleteAbort: Kafka's expiration-allowed states) and nothing pending whose last update is
        that old is removed: a tombstone in the log, then gone from memory, so DescribeTransactions
        answers TRANSACTIONAL_ID_NOT_FOUND, ListTransactions leaves it out and InitProducerId
        starts it afresh under a new producer id (TransactionStateManager.removeExpiredTransactionalIds)."""
        now = _now()
        for meta in list(self.txns.values()):
            if (
                meta.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)
                and not meta.lock.locked()
                and meta.last_update_ms <= now - self.id_expiration_ms
            ):
                self._spawn(self._expire(meta))

    async def _expire(self, meta: TransactionMetadata) -> None:
        async with meta.lock:
            if (
                meta.state not in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)
                or meta.last_update_ms > _now() - self.id_expiration_ms  # (used while we waited)
                or self.txns.get(meta.transactional_id) is not meta
                or meta.unloaded
            ):
                return
            fut, done = future_and_callback()
            try:
                self.log.append(meta.transactional_id, [(encode_key(meta.transactional_id), None)], done)
                await fut
            except Exception as e:  # kept; tried again at the next sweep
                log.warning("transaction %s: writing its expiry failed: %s", meta.transactional_id, e)
                return
            meta.state = DEAD  # (a request that already holds it sees it gone)
            del self.txns[meta.transactional_id]
            log.info("transactional id %s expired (unused for %d ms)", meta.transactional_id, self.id_expiration_ms)

    def abort_timed_out(self) -> None:
        """transaction.timeout.ms: a transaction open longer is aborted under a bumped
        epoch, fencing the producer that let it run over (Kafka's abortTimedOutTransactions)."""
        now = _now()
        for meta in list(self.txns.values()):
            if meta.state == ONGOING and meta.start_ms + meta.timeout_ms < now and not meta.lock.locked():
                log.info(
                    "transaction %s (producer %d) timed out after %d ms: aborting it",
                    meta.transactional_id,
                    meta.producer_id,
                    meta.timeout_ms,
                )
                self._spawn(self._abort_timed_out(meta))

    async def _abort_timed_out(self, meta: TransactionMetadata) -> None:
        async with meta.lock:
            if meta.state == ONGOING and not meta.unloaded:
                await self._fence_and_abort(meta)

    # DescribeTransactions / ListTransactions --------------------------------------------

    def describe_transactions(self, ctx: RequestContext, req: Any) -> Any:
        states = []
        for txn_id in req.transactional_ids:
            error = self._not_here(ctx, txn_id)  # (NOT_COORDINATOR: the admin client asks the coordinator)
            meta = self.txns.get(txn_id) if error == E.none else None
            if meta is None:
                states.append(no_transaction_state(ctx, txn_id, error or E.transactional_id_not_found))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(meta.partitions):
                by_topic.setdefault(topic, []).append(partition)
            states.append(
                ctx.nested(
                    "TransactionState",
                    error_code=E.none,
                    transactional_id=txn_id,
                    transaction_state=STATE_NAMES[meta.state],
                    transaction_timeout=meta.timeout_ms,
                    transaction_start_time=millis_datetime(meta.start_ms if meta.start_ms >= 0 else -1),
                    producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch,
                    topics=tuple(ctx.nested("TopicData", topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
                )
            )
        return ctx.response(throttle_time=0, transaction_states=tuple(states))

    def list_transactions(self, ctx: RequestContext, req: Any) -> Any:
        pattern = getattr(req, "transactional_id_pattern", None)  # v2 (KIP-1152)
        matcher = None
        if pattern:  # (null or empty: no filter)
            try:  # RE2 syntax, matched against the whole id, as Kafka's RE2/J Pattern.matches()
                matcher = re2.compile(pattern, _RE2_OPTIONS).fullmatch
            except re2.error:
                return ctx.response(
                    throttle_time=0,
                    error_code=E.invalid_regular_expression,
                    unknown_state_filters=(),
                    transaction_states=(),
                )
        wanted = set(req.state_filters)
        unknown = tuple(s for s in req.state_filters if s not in STATE_NAMES)
        pids = set(req.producer_id_filters)
        min_duration = getattr(req, "duration_filter", -1)
        now = _now()
        out = []
        for meta in self.txns.values():
            if wanted and STATE_NAMES[meta.state] not in wanted or pids and meta.producer_id not in pids:
                continue
            if min_duration >= 0 and (meta.state != ONGOING or now - meta.start_ms < min_duration):
                continue
            if matcher is not None and matcher(meta.transactional_id) is None:
                continue
            if self._not_here(ctx, meta.transactional_id) != E.none:
                continue  # (each broker lists the ids it coordinates; the admin client asks them all)
            out.append(
                ctx.nested(
                    "TransactionState",
                    transactional_id=meta.transactional_id,
                    producer_id=meta.producer_id,
                    transaction_state=STATE_NAMES[meta.state],
                )
            )
        return ctx.response(
            throttle_time=0, error_code=E.none, unknown_state_filters=unknown, transaction_states=tuple(out)
        )
