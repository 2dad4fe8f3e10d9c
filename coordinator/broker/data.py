"""The data plane: Produce, Fetch (long-poll), ListOffsets, InitProducerId, and the
partition side of transactions (transactional batches, the last stable offset; the state
and the markers are partition_states.py's, which the transaction coordinator shares).

Stored batches are served as they were written (file slices, never re-encoded); the
broker only rewrites a produced batch's base offset, which the CRC does not cover.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import weakref
from collections import Counter, OrderedDict
from functools import partial
from typing import Any, NamedTuple, cast

from kio.schema.errors import ErrorCode as E

from protocol.legacy_records import UnsupportedCompression, down_convert, is_legacy, up_convert
from protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    GZIP,
    LOG_OVERHEAD,
    LZ4,
    MAGIC,
    NONE,
    SNAPPY,
    ZSTD,
    CorruptBatch,
    iter_batch_records,
    iter_batches,
    parse_header,
    stamp_log_append_time,
)

from ..futures import LongPolls
from ..apis import BuiltWhenSent, CloseConnection, Registry, RequestContext, ms
from ..log.compaction import rebuilt_batch
from ..log.partition import LEADER_EPOCH, InvalidBatch, OffsetOutOfRange, PartitionLog, StorageError
from .config_defs import LONG_MAX
from .fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
)
from .partition_states import PartitionStates, durable
from .producers import ProducerIds, java_map_order
from .quotas import ByteRateQuota, quota_user
from .topics import Topics
from .transactions import TransactionChecks

log = logging.getLogger(__name__)

PRODUCE, FETCH, LIST_OFFSETS, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 22, 23
PRODUCE_LATEST = 13  # (the Produce version a batch the broker writes itself is checked as)
DESCRIBE_PRODUCERS = 61
# add.partitions.to.txn.retry.backoff.ms / .max.ms: a Produce v12+ whose implicit add finds the
# previous transaction still completing retries for this long before answering
ADD_RETRY_BACKOFF_S, ADD_RETRY_MAX_S = 0.02, 0.1
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -2, -1, -3, -4, -5, -6
# The first ListOffsets version that may ask each special timestamp (ReplicaManager's
# timestampMinSupportedVersion); any other negative one, or an older version, is UNSUPPORTED_VERSION
SPECIAL_TIMESTAMP_VERSIONS = {
    EARLIEST: 1,
    LATEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}
ACKS = (0, 1, -1)
MAGIC_OFFSET = 16  # base offset (8) + length (4) + partition leader epoch or CRC (4)
LEGACY_RECORD_OVERHEAD = 14  # LegacyRecord.RECORD_OVERHEAD_V0: a smaller entry is corrupt
TRANSACTIONAL_BIT = 0x10  # of a batch's attributes' low byte
READ_COMMITTED = 1
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP: a record the producer gave no timestamp
# compression.type -> the codec stored batches get (producer: none, keep the producer's)
CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
# One partition's Produce outcome: (topic, partition, error, base offset, error message,
# log append time or -1, record errors as (batch index, message)).
_Produced = tuple[str, int, E, int, str | None, int, list[tuple[int, str]]]

# The message of a partition refused before its log was looked at (Kafka's ProduceRequest.
# validateRecords, its PartitionResponse(error)): answered with no log start offset and no message.
NO_LOG_INFO_MESSAGE = "\0no log info"

# Errors Kafka's ReplicaManager answers a produced partition with "unknown log append info": no
# log start offset (-1) and no message, where a refused record (INVALID_RECORD, INVALID_TIMESTAMP)
# or any other failure carries the log's start offset.
NO_LOG_INFO = frozenset(
    {
        E.invalid_topic_exception,  # (an internal topic: refused before its log is looked up)
        E.invalid_required_acks,  # (refused before any log is)
        E.unknown_topic_or_partition,
        E.unknown_topic_id,
        E.not_leader_or_follower,
        E.message_too_large,
        E.record_list_too_large,
        E.corrupt_message,
        E.kafka_storage_error,
    }
)


class RecordErrors(Exception):
    """Kafka's RecordValidationException: a batch refused for some of its records, each named
    by its index in the batch (Produce v8+ returns them as record_errors)."""

    def __init__(self, code: E, message: str, errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.code = code
        self.errors = errors


class DataPlane:
    def __init__(
        self,
        topics: Topics,
        states: PartitionStates,
        producer_ids: ProducerIds,
        node_id: int,
        fetch_session_slots: int = 1000,
        *,
        transactions: TransactionChecks,
        fetch_max_wait_ms: int = 30_000,
        fetch_max_bytes: int = 57_671_680,
        topology: Any = None,
        produce_quota: ByteRateQuota | None = None,
        fetch_quota: ByteRateQuota | None = None,
    ) -> None:
        self.topics = topics
        # Which broker leads each partition (coordinator.topology.Topology); None: this one.
        self.topology = topology
        # Caps on what a client asks (a 2^31-1 ms long poll, a 2 GiB answer).
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.sessions = FetchSessionCache(fetch_session_slots)
        self.producer_ids = producer_ids
        self.node_id = node_id
        # Each partition's producers and transactions (shared with the transaction coordinator,
        # which writes the markers); the methods bound once, as the produce path calls them.
        self.states = states
        self.producers = states.producers
        self.producer_state = states.producer_state
        self.txn_state = states.txn_state
        self.last_stable_offset = states.last_stable_offset
        # The transaction coordinator, as the checks it offers: it serves transactional
        # InitProducerId and verifies transactional batches.
        self.transactions = transactions
        self.waiters: LongPolls[PartitionLog] = LongPolls()
        self.watched: weakref.WeakSet[PartitionLog] = weakref.WeakSet()
        self.draining = False
        # producer_byte_rate / consumer_byte_rate enforcement (coordinator.broker.quotas); None: no quota
        self.produce_quota = produce_quota
        self.fetch_quota = fetch_quota

    def register(self, registry: Registry) -> None:
        registry.add(PRODUCE, range(0, 14), self.produce)
        registry.add(FETCH, range(0, 19), self.fetch, cancel_on_close=True)
        registry.add(LIST_OFFSETS, range(0, 12), self.list_offsets)
        registry.add(INIT_PRODUCER_ID, range(0, 6), self.init_producer_id)
        registry.add(OFFSET_FOR_LEADER_EPOCH, range(0, 5), self.offset_for_leader_epoch)
        registry.add(DESCRIBE_PRODUCERS, range(0, 1), self.describe_producers)

    # Produce ----------------------------------------------------------------------------

    def leader_error(self, ctx: RequestContext, topic: str, partition: int, current_epoch: int = -1) -> E:
        """NOT_LEADER_OR_FOLLOWER (or a fenced / unknown leader epoch) for a partition the
        broker this request reached does not lead; NONE if it does. The partition exists."""
        if self.topology is None:
            return E.none
        return cast(E, self.topology.leader_error(ctx.connection.listener.node_id, topic, partition, current_epoch))

    def current_leader(self, ctx: RequestContext, topic: str, partition: int) -> Any:
        """KIP-951's hint with NOT_LEADER_OR_FOLLOWER: the partition's leader and epoch now."""
        st = self.topology.state(topic, partition)
        return ctx.nested("LeaderIdAndEpoch", leader_id=st.leader, leader_epoch=st.epoch)

    def node_endpoints(self, ctx: RequestContext, nodes: set[int]) -> tuple[Any, ...]:
        """KIP-951: the addresses of the leaders named in current_leader hints."""
        protocol = ctx.connection.listener.protocol
        return tuple(
            ctx.nested("NodeEndpoint", node_id=n, host=host, port=port, rack=None)
            for n in sorted(nodes)
            for host, port in [self.topology.endpoint(n, protocol)]
        )

    def _append(
        self,
        version: int,
        topic: str,
        partition: int,
        records: bytes | None,
        transactional_id: str | None = None,
        ctx: RequestContext | None = None,
    ) -> tuple[E, int, str | None, int, list[tuple[int, str]]]:
        """(error, base offset, message, log append time or -1, record errors): validate,
        check sequences, apply the topic's compression.type and message.timestamp.type,
        append (not yet durable). With ctx, a partition the broker it reached does not lead
        is NOT_LEADER_OR_FOLLOWER."""
        try:
            return (*self._append_batch(version, topic, partition, records, transactional_id, ctx), [])
        except RecordErrors as e:
            return e.code, -1, str(e), -1, e.errors

    def _append_batch(
        self,
        version: int,
        topic: str,
        partition: int,
        records: bytes | None,
        transactional_id: str | None,
        ctx: RequestContext | None,
    ) -> tuple[E, int, str | None, int]:
        info = self.topics.get(topic)
        if info is None:  # as Kafka: Produce never creates a topic (the producer's Metadata does)
            return E.unknown_topic_or_partition, -1, None, -1
        if not 0 <= partition < info.partitions:
            return E.unknown_topic_or_partition, -1, None, -1
        # (Kafka's order: the partition exists, the request's records are well-formed, the
        # topic is not internal (ReplicaManager), then the leader's log takes them)
        refused = _refused_by_request(version, records)
        if refused is not None:
            return refused, -1, NO_LOG_INFO_MESSAGE, -1
        if info.internal:
            return E.invalid_topic_exception, -1, f"cannot produce to internal topic {topic}", -1
        if ctx is not None and self.leader_error(ctx, topic, partition) != E.none:
            return E.not_leader_or_follower, -1, None, -1
        if not records:
            return E.corrupt_message, -1, "no record batch", -1
        plog = info.logs[partition]
        if version < 3 and is_legacy(records):  # message format v0/v1: stored as one v2 batch (Kafka 3.x)
            try:
                records = up_convert(records)
            except CorruptBatch as e:
                return E.corrupt_message, -1, str(e), -1
        if len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] != MAGIC:  # same place in old message sets
            return E.invalid_record, -1, NO_LOG_INFO_MESSAGE, -1
        try:
            headers = list(iter_batches(records))
        except CorruptBatch as e:
            return E.corrupt_message, -1, str(e), -1
        if len(headers) != 1:  # as Kafka: v3+ carries exactly one batch per partition
            return E.invalid_record, -1, NO_LOG_INFO_MESSAGE, -1
        h = headers[0][1]
        if h.size > info.max_message_bytes:
            return E.message_too_large, -1, f"batch of {h.size} bytes > max.message.bytes {info.max_message_bytes}", -1
        if h.is_transactional:
            if not transactional_id or h.producer_id < 0:
                return E.invalid_record, -1, "transactional records need a transactional id and producer id", -1
            # KIP-890 part 1: only a partition added to the producer's ongoing transaction
            # (same producer id and epoch) takes its batches, so no transaction is left hanging
            # (transaction.partition.verification.enable, on by default; Produce v12+ added it
            # just before, KIP-890 part 2).
            if version >= 12 or self.topics.broker_configs.value("transaction.partition.verification.enable"):
                error = self.transactions.verify(transactional_id, h.producer_id, h.producer_epoch, topic, partition)
                if error != E.none:
                    code, message = produce_verification_error(error, version)
                    return code, -1, message, -1
        if not _valid_batch(h):  # (Kafka's InvalidRecordException: no message, the log's start offset)
            return E.invalid_record, -1, None, -1
        try:  # (before the sequence checks, as Kafka's LogValidator runs before the producer state)
            _validate_records(info, f"{topic}-{partition}", records, h)
        except CorruptBatch as e:
            return E.corrupt_message, -1, str(e), -1
        state = None
        if h.producer_id >= 0 and h.base_sequence >= 0:  # idempotent producer
            state = self.producer_state(plog)
            error, duplicate_of = state.check(h)
            if error != E.none:
                return error, -1, None, -1
            if duplicate_of is not None:  # a retry of a batch we already have: answered as the
                # first time, with (as Kafka's UnifiedLog) its max timestamp as the append time
                return E.none, duplicate_of[0], None, duplicate_of[1]
        try:
            records, append_time = self._as_topic_stores(info, records, h)
        except CorruptBatch as e:
            return E.corrupt_message, -1, str(e), -1
        try:
            base = plog.append(records)  # wakes long-polling fetches (append listener)
        except InvalidBatch as e:
            return E.corrupt_message, -1, str(e), -1
        except StorageError as e:  # nothing of it stays in the log; other partitions go on
            return E.kafka_storage_error, -1, str(e), -1
        if state is not None:
            state.record(h, base)
        if h.is_transactional:
            self.txn_state(plog).on_append(h, base)
        return E.none, base, None, append_time

    async def append_as_broker(self, topic: str, partition: int, records: bytes) -> tuple[E, str | None]:
        """A batch the broker itself produces (a share group's dead letters, KIP-1191), checked
        and stored as a Produce with acks=-1 stores a client's: (error, message)."""
        error, _, message, _, _ = self._append(PRODUCE_LATEST, topic, partition, records)
        if error == E.none:
            failed = await durable(self.topics, {(topic, partition)})
            if failed:
                return E.kafka_storage_error, failed[(topic, partition)]
        return error, message

    @staticmethod
    def _as_topic_stores(info: Any, records: bytes, h: Any) -> tuple[bytes, int]:
        """The batch as the topic's configs want it stored, and its log append time (-1:
        CreateTime): recompressed when compression.type names a codec, stamped with the
        broker's time under LogAppendTime (Kafka's LogValidator)."""
        v = info.values
        now = int(time.time() * 1000)
        codec = CODECS.get(v["compression.type"])
        if codec is not None and codec != h.compression:
            records = rebuilt_batch(iter_batch_records(records, h), h, codec)
        if info.log_append_time:
            return stamp_log_append_time(records, now), now
        return records, -1

    async def produce(self, ctx: RequestContext, req: Any) -> Any:
        quota = self.produce_quota
        if (
            quota is None
            or not quota.enabled()
            or quota.quota(quota_user(ctx.connection), ctx.header.client_id or "") is None
        ):
            return await self._produce(ctx, req)
        # Kafka reads a connection's next request only once the previous one is answered and
        # its throttle time is over: a client with a produce quota that pipelines has its
        # requests taken one at a time here, each after the throttle the one before earned.
        conn = ctx.connection
        before = getattr(conn, "quota_turn", None)
        turn = asyncio.get_running_loop().create_future()
        conn.quota_turn = turn
        try:
            if before is not None:
                await asyncio.shield(before)
            wait = getattr(conn, "throttled_until", 0.0) - asyncio.get_running_loop().time()
            if wait > 0:
                await asyncio.sleep(wait)
            return await self._produce(ctx, req)
        finally:
            turn.set_result(None)
            if getattr(conn, "quota_turn", None) is turn:
                conn.quota_turn = None

    async def _produce(self, ctx: RequestContext, req: Any) -> Any:
        transactional_id = getattr(req, "transactional_id", None)
        topic_data: Any = req.topic_data
        ids: dict[str, Any] = {}  # v13: the id each topic name was asked by, for the answer
        if ctx.version >= 13:  # (KIP-516: topics by id; an unknown id is a name no topic has)
            topic_data = []
            for t in req.topic_data:
                info = self.topics.by_id.get(t.topic_id) if t.topic_id is not None else None
                name = info.name if info is not None else f"\0{t.topic_id}"
                ids[name] = t.topic_id
                topic_data.append(_NamedTopic(name, t.partition_data))
        refused: dict[tuple[str, int], tuple[E, str | None]] = {}
        if transactional_id and ctx.version >= 12 and req.acks in ACKS:
            # Kafka reads a connection's next request only once it answered this one, so a
            # producer's pipelined batches append in the order sent. Adding partitions to the
            # transaction waits on the coordinator: the connection's next Produce waits for
            # this one's appends, or its batches (to partitions already added) would land first.
            conn = ctx.connection
            before = getattr(conn, "produce_turn", None)
            turn = conn.produce_turn = asyncio.get_running_loop().create_future()
            try:
                if before is not None:
                    await asyncio.shield(before)
                refused = await self._add_to_transaction(ctx, topic_data, transactional_id)
                return await self._answer_produce(ctx, req, topic_data, ids, refused, transactional_id, turn)
            finally:
                if not turn.done():
                    turn.set_result(None)
                if getattr(conn, "produce_turn", None) is turn:
                    conn.produce_turn = None
        return await self._answer_produce(ctx, req, topic_data, ids, refused, transactional_id, None)

    async def _answer_produce(
        self,
        ctx: RequestContext,
        req: Any,
        topic_data: Any,
        ids: dict[str, Any],
        refused: dict[tuple[str, int], tuple[E, str | None]],
        transactional_id: str | None,
        turn: asyncio.Future[None] | None,
    ) -> Any:
        """Append the batches not refused, then (after their sync, for acks=-1) answer; the
        connection's next transactional Produce may go on (turn) once the appends are made."""
        results: list[_Produced]
        message: str | None
        # Kafka's KafkaApis refuses the whole request before anything else (its error response:
        # no log info, the exception's message) if a partition's first batch cannot be framed,
        # or is transactional while the request has no transactional id (to authorize WRITE on)
        whole: tuple[E, str | None] | None = None
        transactional, corrupt = _first_batches(topic_data)
        if corrupt is not None:
            whole = (E.corrupt_message, corrupt)
        elif transactional and transactional_id is None:
            whole = (E.transactional_id_authorization_failed, None)
        if whole is not None:
            results = [(t.name, p.index, whole[0], -1, whole[1], -1, []) for t in topic_data for p in t.partition_data]
        elif req.acks not in ACKS:
            error, message = E.invalid_required_acks, "acks must be 0, 1 or -1"
            results = [(t.name, p.index, error, -1, message, -1, []) for t in topic_data for p in t.partition_data]
        else:
            results = [
                (t.name, p.index, refused[(t.name, p.index)][0], -1, refused[(t.name, p.index)][1], -1, [])
                if (t.name, p.index) in refused
                else (t.name, p.index, *self._append(ctx.version, t.name, p.index, p.records, transactional_id, ctx))
                for t in topic_data
                for p in t.partition_data
            ]
        if turn is not None:
            turn.set_result(None)
        if req.acks == -1:
            failed = await durable(self.topics, {(t, p) for t, p, err, *_ in results if err == E.none})
            if failed:
                results = [
                    (t, p, E.kafka_storage_error, -1, failed[(t, p)], -1, []) if (t, p) in failed else r
                    for r in results
                    for t, p in [r[:2]]
                ]
        throttle = self._produce_throttle(ctx)
        if req.acks == 0:
            errors = [(t, p, err) for t, p, err, *_ in results if err != E.none]
            if errors:  # as Kafka: no answer to carry the error, so the client must reconnect
                raise CloseConnection(f"acks=0 produce failed: {errors[0][0]}-{errors[0][1]} {errors[0][2].name}")
            return None
        by_topic: dict[str, list[Any]] = {}
        leaders: set[int] = set()
        for topic, partition, error, base, message, append_time, record_errors in results:
            plog = self.topics.partition_log(topic, partition)
            if ids and error == E.unknown_topic_or_partition and topic.startswith("\0"):
                error, message = E.unknown_topic_id, None
            if whole is not None:
                plog = None
            elif error in NO_LOG_INFO or message is NO_LOG_INFO_MESSAGE:
                plog, message = None, None
            hint = {}
            if error == E.not_leader_or_follower and ctx.version >= 10:
                hint["current_leader"] = leader = self.current_leader(ctx, topic, partition)
                leaders.add(leader.leader_id)
            by_topic.setdefault(topic, []).append(
                ctx.nested(
                    "PartitionProduceResponse",
                    index=partition,
                    error_code=error,
                    base_offset=base,
                    log_append_time=None if append_time < 0 else _datetime(append_time),
                    log_start_offset=plog.log_start_offset if plog else -1,
                    record_errors=tuple(
                        ctx.nested("BatchIndexAndErrorMessage", batch_index=i, batch_index_error_message=m)
                        for i, m in record_errors
                    )
                    if ctx.version >= 8
                    else (),  # (record errors came with v8, KIP-467)
                    error_message=message,
                    **hint,
                )
            )
        return ctx.response(
            throttle_time=throttle,
            node_endpoints=self.node_endpoints(ctx, leaders) if leaders else (),
            responses=tuple(
                ctx.nested("TopicProduceResponse", topic_id=ids[name], partition_responses=tuple(parts))
                if ids
                else ctx.nested("TopicProduceResponse", name=name, partition_responses=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )

    async def _add_to_transaction(
        self, ctx: RequestContext, topic_data: Any, transactional_id: str
    ) -> dict[tuple[str, int], tuple[E, str | None]]:
        """Produce v12+ (transactions v2, KIP-890 part 2): the partitions of the request's
        transactional batches not yet in the producer's transaction are added to it, as
        Kafka's leader does with AddPartitionsToTxn; a transaction still being completed is
        waited for a little (Kafka's add.partitions.to.txn.retry.backoff.*). The partitions
        refused, with their error (base offset -1) and message."""
        wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for t in topic_data:
            for p in t.partition_data:
                plog = self.topics.partition_log(t.name, p.index)
                if plog is None or not p.records or len(p.records) < 61:
                    continue  # (refused as usual by the append)
                try:
                    h = parse_header(p.records, 0, verify_crc=False)
                except CorruptBatch:
                    continue
                if not h.is_transactional or h.is_control or h.producer_id < 0:
                    continue
                state = self.producers.get(plog)
                entry = state.entries.get(h.producer_id) if state is not None else None
                if (
                    entry is not None
                    and entry.epoch == h.producer_epoch
                    and h.producer_id in self.txn_state(plog).ongoing
                ):
                    continue  # already in this transaction here: its first batch was verified
                wanted.setdefault((h.producer_id, h.producer_epoch), []).append((t.name, p.index))
        refused: dict[tuple[str, int], tuple[E, str | None]] = {}
        if len(wanted) > 1:  # as Kafka: one producer per request
            for tps in wanted.values():
                for tp in tps:
                    refused[tp] = (
                        E.invalid_producer_id_mapping,
                        "Transactional records contained more than one producer ID",
                    )
            return refused
        for (pid, epoch), tps in wanted.items():
            deadline = time.monotonic() + ADD_RETRY_MAX_S
            while True:
                results = await self.transactions.add_implicitly(transactional_id, pid, epoch, tps)
                if time.monotonic() >= deadline or not any(e == E.concurrent_transactions for e in results.values()):
                    break
                await asyncio.sleep(ADD_RETRY_BACKOFF_S)
            for tp, error in results.items():
                if error != E.none:
                    refused[tp] = produce_verification_error(error, ctx.version)
        return refused

    def _produce_throttle(self, ctx: RequestContext) -> int:
        """Kafka's produce quota: the request's bytes count against producer_byte_rate of its
        (user, client-id), whatever became of its batches; over it, the connection is muted
        for the throttle time, which the answer also carries."""
        if self.produce_quota is None or not self.produce_quota.enabled():
            return 0
        throttle = self.produce_quota.record(
            quota_user(ctx.connection), ctx.header.client_id or "", ctx.size, int(time.time() * 1000)
        )
        _mute(ctx, throttle)
        return throttle

    def describe_producers(self, ctx: RequestContext, req: Any) -> Any:
        """DescribeProducers (KIP-664): each partition's active producers as its leader keeps
        them, with the first offset of the transaction each has open there (-1: none)."""
        now = int(time.time() * 1000)
        expiration = self.states.producer_id_expiration_ms()
        topics = []
        for t in req.topics:
            parts = []
            for index in t.partition_indexes:
                plog = self.topics.partition_log(t.name, index)
                error, active, message = E.none, (), None
                if plog is None:
                    error = E.unknown_topic_or_partition
                    if self.topics.get(t.name) is None:  # (Kafka's text for an unknown topic, none for a partition)
                        message = "This server does not host this topic-partition."
                elif (error := self.leader_error(ctx, t.name, index)) != E.none:
                    pass
                elif plog.offline is not None:
                    error = E.kafka_storage_error
                else:
                    open_txns = self.txn_state(plog).ongoing
                    state = self.producer_state(plog)
                    state.expire(now, expiration, open_txns)
                    entries = state.entries
                    active = tuple(
                        ctx.nested(
                            "ProducerState",
                            producer_id=pid,
                            producer_epoch=entries[pid].epoch,
                            last_sequence=entries[pid].last_seq,
                            last_timestamp=entries[pid].last_timestamp,
                            coordinator_epoch=entries[pid].coordinator_epoch,
                            current_txn_start_offset=open_txns.get(pid, -1),
                        )
                        for pid in java_map_order(list(entries))  # (Kafka's order)
                    )
                parts.append(
                    ctx.nested(
                        "PartitionResponse",
                        partition_index=index,
                        error_code=error,
                        error_message=message,
                        active_producers=active,
                    )
                )
            topics.append(ctx.nested("TopicResponse", name=t.name, partitions=tuple(parts)))
        return ctx.response(throttle_time=0, topics=tuple(topics))

    # Fetch ------------------------------------------------------------------------------

    def _watch(self, plog: PartitionLog) -> None:
        """Hook the log once: any append to it (Produce, or group commits to
        __consumer_offsets) wakes the fetches waiting on it."""
        if plog not in self.watched:
            self.watched.add(plog)
            ref = weakref.ref(plog)
            plog.append_listeners.append(lambda: self._wake(ref()))

    def _wake(self, plog: PartitionLog | None) -> None:
        if plog is not None:
            self.waiters.wake(plog)

    def _targets(self, ctx: RequestContext, topics: Any) -> list[CachedPartition]:
        """The partitions a Fetch request lists, with their fetch state."""
        out = []
        for t in topics:
            if ctx.version >= 13:
                info = self.topics.by_id.get(t.topic_id)
                name, topic_id = (info.name if info else None), t.topic_id
            else:
                name, topic_id = t.topic, None
            for p in t.partitions:
                out.append(
                    CachedPartition(
                        name,
                        topic_id,
                        p.partition,
                        p.fetch_offset,
                        p.partition_max_bytes,
                        leader_epoch=getattr(p, "current_leader_epoch", -1),
                    )
                )
        return out

    def _read(
        self, ctx: RequestContext, targets: list[CachedPartition], budget: int, read_committed: bool = False
    ) -> tuple[list[Any], int]:
        """One pass over the partitions: ([(target, PartitionData)], bytes read)."""
        total = 0
        answer = []
        for target in targets:
            error, records, plog, hint = E.none, b"", None, None
            info = self.topics.get(target.topic) if target.topic is not None else None
            if ctx.version >= 13 and info is not None and info.topic_id != target.topic_id:
                info = None  # (re-created under the same name: another topic)
            if info is None or target.topic is None:
                error = E.unknown_topic_id if ctx.version >= 13 else E.unknown_topic_or_partition
            elif not 0 <= target.partition < info.partitions:
                error = E.unknown_topic_or_partition
            elif (error := self.leader_error(ctx, target.topic, target.partition, target.leader_epoch)) != E.none:
                # (KIP-951: the leader hint goes with a fenced epoch too, as Kafka's KafkaApis adds it)
                if ctx.version >= 12 and error in (E.not_leader_or_follower, E.fenced_leader_epoch):
                    hint = self.current_leader(ctx, target.topic, target.partition)
            else:
                plog = info.logs[target.partition]
                try:
                    limit = min(target.max_bytes, budget - total)
                    if limit > 0 or total == 0:
                        records = plog.read(target.fetch_offset, max(limit, 1))
                    if total > 0 and len(records) > limit:
                        records = b""  # only the first partition with data may exceed the limits (KIP-74)
                    if ctx.version < 10 and info.values.get("compression.type") == "zstd":
                        records, error = b"", E.unsupported_compression_type  # as Kafka: zstd needs v10
                    if ctx.version < 4 and records:  # old clients read message format v0 / v1
                        records, error = self._down_convert(info, records, 0 if ctx.version < 2 else 1)
                except OffsetOutOfRange:
                    error = E.offset_out_of_range
                except StorageError:  # offline (corrupt): as Kafka's offline log dir
                    error = E.kafka_storage_error
            hw = plog.high_watermark if plog and error == E.none else -1
            # As Kafka: a partition its KafkaApis refuses (unknown topic or partition) is answered
            # with an empty aborted list, one its log read refuses (offset out of range, ...) with
            # none, and either without a log start offset.
            lso, aborted = hw, (() if info is None or error == E.unknown_topic_or_partition else None)
            if plog is not None and error == E.none and plog.offline is None:
                # Only a read_committed fetch builds a partition's transaction state (a scan of
                # its log, once); others report the LSO if the state is known, else the HW.
                txns = self.txn_state(plog) if read_committed else self.states.txns.get(plog)
                if txns is not None and txns.cuts == plog.cuts:
                    lso = txns.last_stable_offset(hw)
                if read_committed and txns is not None:  # (txn_state always builds one)
                    records, end = _below(records, lso)
                    aborted = tuple(
                        ctx.nested("AbortedTransaction", producer_id=pid, first_offset=first)
                        for pid, first in txns.aborted_between(target.fetch_offset, end, plog.log_start_offset)
                    )
            total += len(records)
            extra = {} if hint is None else {"current_leader": hint}
            answer.append(
                (
                    target,
                    ctx.nested(
                        "PartitionData",
                        partition_index=target.partition,
                        error_code=error,
                        high_watermark=hw,
                        last_stable_offset=lso,
                        log_start_offset=plog.log_start_offset if plog and error == E.none else -1,
                        aborted_transactions=aborted,
                        preferred_read_replica=-1,
                        records=records,
                        **extra,
                    ),
                )
            )
        return answer, total

    @staticmethod
    def _down_convert(info: Any, records: bytes, magic: int) -> tuple[bytes, E]:
        """Stored batches for Fetch v0-3, as Kafka 3.x: refused (UNSUPPORTED_VERSION) when the
        topic sets message.downconversion.enable=false; zstd cannot be carried."""
        if not info.values.get("message.downconversion.enable", True):
            return b"", E.unsupported_version
        try:
            return down_convert(records, magic), E.none
        except UnsupportedCompression:
            return b"", E.unsupported_compression_type

    @staticmethod
    def _by_topic(ctx: RequestContext, answer: list[Any]) -> tuple[Any, ...]:
        """Response topics: consecutive partitions of one topic grouped, as Kafka's FetchResponse.of."""
        topics: list[tuple[CachedPartition, list[Any]]] = []
        for target, data in answer:
            if not topics or (topics[-1][0].topic, topics[-1][0].topic_id) != (target.topic, target.topic_id):
                topics.append((target, []))
            topics[-1][1].append(data)
        return tuple(
            ctx.nested("FetchableTopicResponse", topic=t.topic, topic_id=t.topic_id, partitions=tuple(parts))
            for t, parts in topics
        )

    async def fetch(self, ctx: RequestContext, req: Any) -> Any:
        """KIP-227 as Kafka's FetchManager.newContext: epoch 0 = full fetch opening a session,
        -1 = full fetch without one (a session id given with either is closed), > 0 =
        incremental fetch in the session named."""
        session_id, epoch = getattr(req, "session_id", 0), getattr(req, "session_epoch", FINAL_EPOCH)
        session = None
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.remove(session_id)
            targets = self._targets(ctx, req.topics)
        else:
            session = self.sessions.get(session_id)
            if session is None:
                return self._session_error(ctx, E.fetch_session_id_not_found)
            if session.epoch != epoch:
                return self._session_error(ctx, E.invalid_fetch_session_epoch)
            if session.uses_topic_ids != (ctx.version >= 13):
                return self._session_error(ctx, E.fetch_session_topic_id_error)
            self._update_session(ctx, session, req)
            if not session.partitions:  # nothing left to fetch: Kafka drops the session
                self.sessions.remove(session.id)
                session = None
                targets = []
            else:
                session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
                self.sessions.touch(session)
                targets = list(session.partitions.values())
        deadline = time.monotonic() + min(ms(req.max_wait), self.fetch_max_wait_ms) / 1000
        while True:
            remaining = deadline - time.monotonic()
            if (
                remaining <= 0
                or self.draining
                or self._can_answer(ctx, targets, req.min_bytes, getattr(req, "isolation_level", 0) == READ_COMMITTED)
            ):
                break
            await self._wait_for_data(targets, remaining)
        # Records are read when the answer is written, not held while it waits its turn.
        return BuiltWhenSent(partial(self._fetch_response, ctx, req, targets, session, epoch))

    def _fetch_response(
        self, ctx: RequestContext, req: Any, targets: list[CachedPartition], session: FetchSession | None, epoch: int
    ) -> Any:
        quota = self.fetch_quota if self.fetch_quota is not None and self.fetch_quota.enabled() else None
        user, client_id = "", ctx.header.client_id or ""
        max_bytes = min(req.max_bytes, self.fetch_max_bytes)
        window = None
        if quota is not None:
            user = quota_user(ctx.connection)
            window = quota.max_value_in_window(user, client_id)
            if window is not None:  # as Kafka: no answer larger than the quota's window holds
                max_bytes = min(max_bytes, window)
        answer, size = self._read(ctx, targets, max_bytes, getattr(req, "isolation_level", 0) == READ_COMMITTED)
        if quota is not None and window is not None:
            # Kafka's fetch quota: the answer's bytes count against consumer_byte_rate; over it,
            # the client gets an empty answer with the throttle time (the bytes are taken back)
            # and its connection is muted that long.
            now = int(time.time() * 1000)
            throttle = quota.record(user, client_id, size, now)
            if throttle:
                quota.unrecord(user, client_id, size, now)
                _mute(ctx, throttle)
                return ctx.response(
                    throttle_time=throttle,
                    error_code=E.none,
                    session_id=session.id if session is not None else INVALID_SESSION_ID,
                    responses=(),
                )
        if session is not None:  # incremental: only the partitions with news
            if session.id in self.sessions.sessions:
                answer = [(t, d) for t, d in answer if self._news(session, t, d)]
            response_id = session.id
        elif epoch == INITIAL_EPOCH:
            response_id = self._open_session(ctx, answer)
        else:
            response_id = INVALID_SESSION_ID
        leaders = {
            d.current_leader.leader_id
            for _, d in answer
            if ctx.version >= 16 and d.error_code == E.not_leader_or_follower
        }
        return ctx.response(
            throttle_time=0,
            error_code=E.none,
            session_id=response_id,
            responses=self._by_topic(ctx, answer),
            node_endpoints=self.node_endpoints(ctx, leaders) if leaders else (),
        )

    @staticmethod
    def _session_error(ctx: RequestContext, error: E) -> Any:
        return ctx.response(throttle_time=0, error_code=error, session_id=INVALID_SESSION_ID, responses=())

    @staticmethod
    def _key(target: CachedPartition) -> tuple[Any, ...]:
        return (target.topic_id if target.topic_id is not None else target.topic, target.partition)

    def _open_session(self, ctx: RequestContext, answer: list[Any]) -> int:
        partitions = OrderedDict()
        for target, data in answer:
            target.must_respond(b"", data.error_code, data.high_watermark, data.log_start_offset)
            partitions[self._key(target)] = target
        return self.sessions.create(ctx.version >= 13, partitions)

    def _update_session(self, ctx: RequestContext, session: FetchSession, req: Any) -> None:
        """Add or update the partitions the request lists; drop the forgotten ones."""
        for target in self._targets(ctx, req.topics):
            key = self._key(target)
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = target  # high watermark -1: always in the next answer
            else:
                cached.fetch_offset, cached.max_bytes = target.fetch_offset, target.max_bytes
                cached.leader_epoch = target.leader_epoch
        for f in getattr(req, "forgotten_topics_data", None) or ():
            topic = f.topic_id if ctx.version >= 13 else f.topic
            for p in f.partitions:
                session.partitions.pop((topic, p), None)

    @staticmethod
    def _news(session: FetchSession, target: CachedPartition, data: Any) -> bool:
        if not target.must_respond(data.records, data.error_code, data.high_watermark, data.log_start_offset):
            return False
        if data.records:  # partitions that got data go to the back: the others' turn next (Kafka)
            session.partitions.move_to_end(DataPlane._key(target))
        return True

    def _can_answer(
        self, ctx: RequestContext, targets: list[CachedPartition], min_bytes: int, read_committed: bool = False
    ) -> bool:
        """Whether min_bytes are there (each partition counting up to its max_bytes, as
        Kafka's DelayedFetch counts) or a partition has an error to tell; nothing is read."""
        total = 0
        for target in targets:
            info = self.topics.get(target.topic) if target.topic is not None else None
            if (
                info is None
                or target.topic is None
                or (ctx.version >= 13 and info.topic_id != target.topic_id)
                or not 0 <= target.partition < info.partitions
                or self.leader_error(ctx, target.topic, target.partition, target.leader_epoch) != E.none
            ):
                return True
            plog = info.logs[target.partition]
            offset = target.fetch_offset
            if plog.offline is not None or not plog.log_start_offset <= offset <= plog.log_end_offset:
                return True
            # (read_committed: only what lies below the LSO counts, else an open transaction
            # would answer every poll at once, empty)
            end = self.last_stable_offset(plog) if read_committed else plog.log_end_offset
            if offset < end:
                total += min(plog.bytes_after(offset), max(target.max_bytes, 0))
                if plog.offline is not None:  # (it found a batch that does not fit)
                    return True
        return total >= min_bytes

    async def _wait_for_data(self, targets: list[CachedPartition], timeout: float) -> None:
        """Long-poll: sleep until a produce to one of the partitions, or the timeout."""
        logs = []
        for target in targets:
            plog = self.topics.partition_log(target.topic, target.partition) if target.topic is not None else None
            if plog is not None:
                self._watch(plog)
                logs.append(plog)
        await self.waiters.wait(logs, timeout)

    # ListOffsets ------------------------------------------------------------------------

    def list_offsets(self, ctx: RequestContext, req: Any) -> Any:
        topics = []
        version = max(ctx.version, 1)  # (v0, for old clients, asks what v1 asks)
        asked = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        # v1+ refuses a partition asked twice; v0 (Kafka 3.9's handleListOffsetRequestV0, for
        # old clients) answers each entry as asked.
        duplicated = {tp for tp, n in Counter(asked).items() if n > 1} if len(asked) > 1 and ctx.version else set()
        answered: set[tuple[str, int]] = set()
        for t in req.topics:
            parts = []
            for p in t.partitions:
                plog = self.topics.partition_log(t.name, p.partition_index)
                error, offset, timestamp = E.none, -1, -1
                if duplicated and (t.name, p.partition_index) in duplicated:
                    # answered once, INVALID_REQUEST (Kafka's answer is a map by partition)
                    if (t.name, p.partition_index) in answered:
                        continue
                    answered.add((t.name, p.partition_index))
                    plog, error = None, E.invalid_request
                elif p.timestamp < 0 and version < SPECIAL_TIMESTAMP_VERSIONS.get(p.timestamp, 99):
                    plog, error = None, E.unsupported_version
                elif plog is None:
                    error = E.unknown_topic_or_partition
                elif (
                    error := self.leader_error(ctx, t.name, p.partition_index, getattr(p, "current_leader_epoch", -1))
                ) != E.none:
                    pass
                elif plog.offline is not None:  # corrupt: no offset of it can be trusted (Kafka's offline log dir)
                    error = E.kafka_storage_error
                elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):  # no tiered storage: all is local
                    offset = plog.log_start_offset
                elif p.timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                    pass  # nothing is tiered: offset and epoch -1, as Kafka without remote storage
                elif p.timestamp == LATEST:
                    offset = (
                        self.last_stable_offset(plog)
                        if getattr(req, "isolation_level", 0) == READ_COMMITTED
                        else plog.log_end_offset
                    )
                else:
                    try:
                        found = (
                            plog.max_timestamp()
                            if p.timestamp == MAX_TIMESTAMP
                            else plog.offset_for_timestamp(p.timestamp)
                        )
                    except StorageError:  # (the lookup found a batch that does not fit: offline now)
                        found, error = None, E.kafka_storage_error
                    if found is not None:
                        offset, timestamp = found
                parts.append(
                    ctx.nested(
                        "ListOffsetsPartitionResponse",
                        partition_index=p.partition_index,
                        error_code=error,
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=plog.leader_epoch if plog and error == E.none and offset >= 0 else -1,
                    )
                )
            topics.append(ctx.nested("ListOffsetsTopicResponse", name=t.name, partitions=tuple(parts)))
        return ctx.response(throttle_time=0, topics=tuple(topics))

    # OffsetForLeaderEpoch ---------------------------------------------------------------

    def offset_for_leader_epoch(self, ctx: RequestContext, req: Any) -> Any:
        """Kafka's LeaderEpochFileCache.endOffsetFor over the partition's leader epochs (the
        topology's history; epoch 0 alone until its leadership first moves): the current
        epoch ends at the log end offset, an older one where the next begins, a later or
        undefined one is unknown (-1, -1). Asked of a broker that does not lead the
        partition, NOT_LEADER_OR_FOLLOWER; a current_leader_epoch older than the partition's
        is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (KIP-320)."""
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                plog = self.topics.partition_log(t.topic, p.partition)
                error, epoch, end = E.none, -1, -1
                current = getattr(p, "current_leader_epoch", -1)
                if plog is None:
                    error = E.unknown_topic_or_partition
                elif plog.offline is not None:
                    error = E.kafka_storage_error
                elif self.topology is not None:
                    error = self.leader_error(ctx, t.topic, p.partition, current)
                    if error == E.none:
                        epoch, end = self.topology.state(t.topic, p.partition).end_offset_for(
                            p.leader_epoch, plog.log_end_offset
                        )
                elif current > LEADER_EPOCH:
                    error = E.unknown_leader_epoch
                elif p.leader_epoch == LEADER_EPOCH:
                    epoch, end = LEADER_EPOCH, plog.log_end_offset
                parts.append(
                    ctx.nested(
                        "EpochEndOffset", error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end
                    )
                )
            topics.append(ctx.nested("OffsetForLeaderTopicResult", topic=t.topic, partitions=tuple(parts)))
        return ctx.response(throttle_time=0, topics=tuple(topics))

    # InitProducerId ---------------------------------------------------------------------

    def init_producer_id(self, ctx: RequestContext, req: Any) -> Any:
        if req.transactional_id is not None:
            return asyncio.ensure_future(self.transactions.init_producer_id(ctx, req))
        pid, epoch = getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1)
        if pid >= 0 and 0 <= epoch < 32766:
            return ctx.response(throttle_time=0, error_code=E.none, producer_id=pid, producer_epoch=epoch + 1)
        return asyncio.ensure_future(self._new_producer_id(ctx))

    async def _new_producer_id(self, ctx: RequestContext) -> Any:
        try:
            pid = await self.producer_ids.allocate()
        except OSError as e:
            # Kafka's ProducerIdManager answers a block it cannot get yet this way: retriable.
            log.warning("cannot reserve producer ids: %s", e.strerror or e)
            return ctx.response(
                throttle_time=0, error_code=E.coordinator_load_in_progress, producer_id=-1, producer_epoch=-1
            )
        return ctx.response(throttle_time=0, error_code=E.none, producer_id=pid, producer_epoch=0)

    def drain(self) -> None:
        """The server is stopping: long-polling fetches answer now with what they have."""
        self.draining = True
        self.waiters.wake_all()

    async def close(self) -> None:
        self.drain()


def _refused_by_request(version: int, records: bytes | None) -> E | None:
    """Kafka's ProduceRequest.validateRecords (v3+), run before the partition's log is looked
    at: exactly one record batch (the whole ones MemoryRecords reads), of magic 2, zstd only
    from v7."""
    if version < 3:
        return None
    data = records or b""
    pos, count = 0, 0
    while len(data) - pos >= LOG_OVERHEAD:
        size = int.from_bytes(data[pos + 8 : pos + LOG_OVERHEAD], "big", signed=True)
        if size < LEGACY_RECORD_OVERHEAD:
            return E.corrupt_message
        if len(data) - pos > MAGIC_OFFSET and data[pos + MAGIC_OFFSET] > MAGIC:
            return E.corrupt_message  # (no such magic, or a negative one)
        if len(data) - pos < LOG_OVERHEAD + size:
            break  # (a partial batch at the end is not read)
        count += 1
        if count == 2:
            return E.invalid_record
        if data[pos + MAGIC_OFFSET] != MAGIC:
            return E.invalid_record
        if version < 7 and len(data) - pos > ATTRIBUTES_OFFSET + 1 and data[pos + ATTRIBUTES_OFFSET + 1] & 7 == ZSTD:
            return E.unsupported_compression_type
        pos += LOG_OVERHEAD + size
    return E.invalid_record if count == 0 else None


def _valid_batch(h: Any) -> bool:
    """Kafka's LogValidator.validateBatch for a client's batch: its offset range and record
    count agree, it is not a control batch, and a producer id comes with a sequence."""
    return (
        h.last_offset_delta >= 0
        and h.record_count > 0
        and h.last_offset_delta + 1 == h.record_count
        and not h.is_control
        and not (h.producer_id >= 0 and h.base_sequence < 0)
    )


def _first_batches(topic_data: Any) -> tuple[bool, str | None]:
    """Kafka's RequestUtils.hasTransactionalRecords: each partition's first batch, in the
    request's order, read as MemoryRecords frames it (a partial one is no batch): (whether one
    is transactional, which stops the reading; the CorruptRecordException's message if a
    frame is invalid, None)."""
    for t in topic_data:
        for p in t.partition_data:
            data = p.records or b""
            if len(data) < LOG_OVERHEAD:
                continue
            size = int.from_bytes(data[8:LOG_OVERHEAD], "big", signed=True)
            if size < LEGACY_RECORD_OVERHEAD:
                return False, f"Record size {size} is less than the minimum record overhead ({LEGACY_RECORD_OVERHEAD})"
            if len(data) <= MAGIC_OFFSET:
                continue
            magic = int.from_bytes(data[MAGIC_OFFSET : MAGIC_OFFSET + 1], "big", signed=True)
            if not 0 <= magic <= MAGIC:
                return False, f"Invalid magic found in record: {magic}"
            if len(data) >= LOG_OVERHEAD + size and magic == MAGIC and data[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_BIT:
                return True, None
    return False, None


class _NamedTopic(NamedTuple):
    """A Produce v13 topic entry once its id is resolved to a name."""

    name: str
    partition_data: Any


def produce_verification_error(error: int, version: int) -> tuple[E, str | None]:
    """The Produce error (and message) for the coordinator's verdict on a transactional batch
    (Kafka's AddPartitionsToTxnManager and ReplicaManager.handleProduceAppend): a fenced epoch
    is INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE reaches only Produce v11 clients (older
    ones and v12+ get INVALID_TXN_STATE); a coordinator busy or away is NOT_ENOUGH_REPLICAS,
    which every client retries without a metadata refresh."""
    if error == E.producer_fenced:
        return E.invalid_producer_epoch, None
    if error == E.transaction_abortable and version != 11:
        error = E.invalid_txn_state
    if error == E.invalid_txn_state:
        return E.invalid_txn_state, "Partition was not added to the transaction"
    if error in (
        E.concurrent_transactions,
        E.coordinator_load_in_progress,
        E.coordinator_not_available,
        E.not_coordinator,
    ):
        return (
            E.not_enough_replicas,
            f"Unable to verify the partition has been added to the transaction. Underlying error: {E(error).name.upper()}",
        )
    return E(error), None


def _validate_records(info: Any, partition: str, records: bytes, h: Any) -> None:
    """Kafka's LogValidator.validateRecord on each record of a produced batch: a compacted
    topic (cleanup.policy with compact, also compact,delete) takes no record without a key
    (validateKey), and CreateTime timestamps lie within message.timestamp.{before,after}.max.ms
    (validateTimestamp). Every record is checked and the batch refused with all their
    errors (processRecordErrors): INVALID_TIMESTAMP if any is a timestamp's, else INVALID_RECORD."""
    v = info.values
    compacted = "compact" in v["cleanup.policy"]
    before = after = LONG_MAX
    if not info.log_append_time:
        # (message.timestamp.difference.max.ms: 3.9's, gone in Kafka 4)
        difference = v.get("message.timestamp.difference.max.ms", LONG_MAX)
        before = min(v["message.timestamp.before.max.ms"], difference)
        after = min(v["message.timestamp.after.max.ms"], difference)
    if not compacted and before == after == LONG_MAX:
        return  # nothing to check: the records are not decoded
    now = int(time.time() * 1000)
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    for index, r in enumerate(iter_batch_records(records, h)):
        if compacted and r.key is None:
            errors.append((index, f"Compacted topic cannot accept message without key in topic partition {partition}"))
        elif r.timestamp != NO_TIMESTAMP and (now - r.timestamp > before or r.timestamp - now > after):
            bad_timestamp = True
            errors.append(
                (
                    index,
                    f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. "
                    f"The timestamp should be within [{now - before}, {now + after}]",
                )
            )
    if not errors:
        return
    if bad_timestamp:
        raise RecordErrors(
            E.invalid_timestamp, "One or more records have been rejected due to invalid timestamp", errors
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordErrors(
        E.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record "
        f"errors in total, and only showing the first three errors at most: [{shown}]",
        errors,
    )


def _mute(ctx: RequestContext, throttle: int) -> None:
    """Mute the request's connection for its throttle time (KIP-219), whatever the request's
    version: Kafka's KafkaApis sends a throttled Produce or Fetch answer at once and mutes the
    channel (RequestHandlerHelper.throttle). A client from before KIP-219 (Produce < v6, Fetch
    < v8) does not back off itself; its next request waits, unread, until the mute ends."""
    mute = getattr(ctx.connection, "throttle", None)
    if throttle and mute is not None:
        mute(throttle)


def _below(records: bytes, lso: int) -> tuple[bytes, int]:
    """The whole batches of `records` that lie below the LSO, and the offset after them."""
    pos, end = 0, None
    while pos + 12 <= len(records):
        h = parse_header(records, pos, verify_crc=False)
        if h.base_offset >= lso:
            return records[:pos], h.base_offset
        pos += h.size
        end = h.next_offset
    return records, end if end is not None else lso


def _datetime(ms: int) -> datetime.datetime:
    """kio writes ProduceResponse's log_append_time from a datetime (None: -1)."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
