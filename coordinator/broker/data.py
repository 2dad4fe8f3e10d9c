"""The data plane: Produce, Fetch (long-poll), ListOffsets, InitProducerId.

Stored batches are served as they were written (file slices, never re-encoded); the
broker only rewrites a produced batch's base offset, which the CRC does not cover.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol.record_batch import MAGIC, ZSTD, CorruptBatch, iter_batches

from ..apis import BuiltWhenSent, Registry, RequestContext, ms
from ..connection import CloseConnection
from ..log.partition import InvalidBatch, OffsetOutOfRange, PartitionLog, StorageError
from .producers import PartitionProducers, ProducerIds
from .topics import TopicError, Topics

log = logging.getLogger(__name__)

PRODUCE, FETCH, LIST_OFFSETS, INIT_PRODUCER_ID = 0, 1, 2, 22
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
ACKS = (0, 1, -1)
MAGIC_OFFSET = 16  # base offset (8) + length (4) + partition leader epoch or CRC (4)


class DataPlane:
    def __init__(self, topics: Topics, producer_ids: ProducerIds, node_id: int, *,
                 fetch_max_wait_ms: int = 30_000, fetch_max_bytes: int = 57_671_680) -> None:
        self.topics = topics
        # Caps on what a client asks (a 2^31-1 ms long poll, a 2 GiB answer).
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.producer_ids = producer_ids
        self.node_id = node_id
        # Keyed by the log object: a deleted and re-created topic starts afresh.
        self.producers: weakref.WeakKeyDictionary[PartitionLog, PartitionProducers] = weakref.WeakKeyDictionary()
        self.waiters: dict[PartitionLog, set[asyncio.Future]] = {}
        self.watched: weakref.WeakSet[PartitionLog] = weakref.WeakSet()
        self.draining = False

    def register(self, registry: Registry) -> None:
        registry.add(PRODUCE, range(3, 12), self.produce)
        registry.add(FETCH, range(4, 18), self.fetch, cancel_on_close=True)
        registry.add(LIST_OFFSETS, range(0, 11), self.list_offsets)
        registry.add(INIT_PRODUCER_ID, range(0, 6), self.init_producer_id)

    # Produce ----------------------------------------------------------------------------

    def _append(self, version: int, topic: str, partition: int, records: bytes | None) -> tuple[E, int, str | None]:
        """(error, base offset, message): validate, check sequences, append (not yet durable)."""
        info = self.topics.get(topic)
        if info is None:
            try:
                info = self.topics.describe([topic], auto_create=True)[0][1]  # type: ignore[index]
            except TopicError as e:
                return e.code, -1, str(e)
            if info is None or info.error != E.none:
                return (info.error if info else E.unknown_topic_or_partition), -1, None
        if info.internal:
            return E.invalid_topic_exception, -1, f"cannot produce to internal topic {topic}"
        if not 0 <= partition < info.partitions:
            return E.unknown_topic_or_partition, -1, None
        if not records:
            return E.corrupt_message, -1, "no record batch"
        plog = info.logs[partition]
        if len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] != MAGIC:  # same place in old message sets
            return E.invalid_record, -1, f"magic {records[MAGIC_OFFSET]}: Produce v3+ carries record batches v2 only"
        try:
            headers = list(iter_batches(records))
        except CorruptBatch as e:
            return E.corrupt_message, -1, str(e)
        if len(headers) != 1:  # as Kafka: v3+ carries exactly one batch per partition
            return E.invalid_record, -1, f"{len(headers)} record batches; exactly one is allowed"
        h = headers[0][1]
        if h.size > info.max_message_bytes:
            return E.message_too_large, -1, f"batch of {h.size} bytes > max.message.bytes {info.max_message_bytes}"
        if h.is_control:
            return E.invalid_record, -1, "clients may not write control batches"
        if h.compression == ZSTD and version < 7:
            return E.unsupported_compression_type, -1, "zstd needs Produce v7 or later"
        state = None
        if h.producer_id >= 0 and h.base_sequence >= 0:  # idempotent producer
            state = self.producers.get(plog)
            if state is None or state.cuts != plog.cuts:  # (a failed sync cut batches it knew)
                state = self.producers[plog] = PartitionProducers.from_log(plog)
            error, duplicate_of = state.check(h)
            if error != E.none:
                return error, -1, None
            if duplicate_of is not None:
                return E.none, duplicate_of, None  # a retry of a batch we already have
        try:
            base = plog.append(records)  # wakes long-polling fetches (append listener)
        except InvalidBatch as e:
            return E.corrupt_message, -1, str(e)
        except StorageError as e:  # nothing of it stays in the log; other partitions go on
            return E.kafka_storage_error, -1, str(e)
        if state is not None:
            state.record(h, base)
        return E.none, base, None

    async def produce(self, ctx: RequestContext, req: Any) -> Any:
        if getattr(req, "transactional_id", None) or req.acks not in ACKS:
            error, message = ((E.transactional_id_authorization_failed, "transactions are not supported")
                              if req.acks in ACKS else (E.invalid_required_acks, "acks must be 0, 1 or -1"))
            results = [(t.name, p.index, error, -1, message) for t in req.topic_data for p in t.partition_data]
        else:
            results = [(t.name, p.index, *self._append(ctx.version, t.name, p.index, p.records))
                       for t in req.topic_data for p in t.partition_data]
        if req.acks == -1:
            failed = await self._durable({(t, p) for t, p, err, _, _ in results if err == E.none})
            if failed:
                results = [(t, p, E.kafka_storage_error, -1, failed[(t, p)]) if (t, p) in failed else r
                           for r in results for t, p in [r[:2]]]
        if req.acks == 0:
            failed = [(t, p, err) for t, p, err, _, _ in results if err != E.none]
            if failed:  # as Kafka: no answer to carry the error, so the client must reconnect
                raise CloseConnection(f"acks=0 produce failed: {failed[0][0]}-{failed[0][1]} {failed[0][2].name}")
            return None
        by_topic: dict[str, list] = {}
        for topic, partition, error, base, message in results:
            plog = self.topics.partition_log(topic, partition)
            by_topic.setdefault(topic, []).append(ctx.nested(
                "PartitionProduceResponse", index=partition, error_code=error, base_offset=base,
                log_append_time=None, log_start_offset=plog.log_start_offset if plog else -1,
                record_errors=(), error_message=message))
        return ctx.response(throttle_time=0, responses=tuple(
            ctx.nested("TopicProduceResponse", name=name, partition_responses=tuple(parts))
            for name, parts in by_topic.items()))

    async def _durable(self, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], str]:
        """acks=-1: wait for the fsync policy (with fsync=always: on disk); the partitions
        whose sync failed (their appends were cut), with why."""
        tps = [tp for tp in partitions if self.topics.partition_log(*tp) is not None]
        outcomes = await asyncio.gather(*(_policy_flush(self.topics.partition_log(*tp)) for tp in tps),
                                        return_exceptions=True)
        return {tp: str(o) for tp, o in zip(tps, outcomes) if isinstance(o, StorageError)}

    # Fetch ------------------------------------------------------------------------------

    def _watch(self, plog: PartitionLog) -> None:
        """Hook the log once: any append to it (Produce, or group commits to
        __consumer_offsets) wakes the fetches waiting on it."""
        if plog not in self.watched:
            self.watched.add(plog)
            ref = weakref.ref(plog)
            plog.append_listeners.append(lambda: self._wake(ref()))

    def _wake(self, plog: PartitionLog | None) -> None:
        for fut in self.waiters.pop(plog, ()):  # type: ignore[arg-type]
            if not fut.done():
                fut.set_result(None)

    def _read(self, ctx: RequestContext, req: Any, budget: int) -> tuple[list, int]:
        """One pass over the requested partitions: (response topics, bytes read)."""
        total = 0
        answer = []
        for t in req.topics:
            if ctx.version >= 13:
                info = self.topics.by_id.get(t.topic_id)
                name = info.name if info else None
            else:
                name = t.topic
                info = self.topics.get(name)
            parts = []
            for p in t.partitions:
                error, records, plog = E.none, b"", None
                if info is None:
                    error = E.unknown_topic_id if ctx.version >= 13 else E.unknown_topic_or_partition
                elif not 0 <= p.partition < info.partitions:
                    error = E.unknown_topic_or_partition
                else:
                    plog = info.logs[p.partition]
                    try:
                        limit = min(p.partition_max_bytes, budget - total)
                        if limit > 0 or total == 0:
                            records = plog.read(p.fetch_offset, max(limit, 1))
                        if total > 0 and len(records) > limit:
                            records = b""  # only the first partition with data may exceed the limits (KIP-74)
                    except OffsetOutOfRange:
                        error = E.offset_out_of_range
                    except StorageError:  # offline (corrupt): as Kafka's offline log dir
                        error = E.kafka_storage_error
                total += len(records)
                hw = plog.high_watermark if plog else -1
                parts.append(ctx.nested(
                    "PartitionData", partition_index=p.partition, error_code=error, high_watermark=hw,
                    last_stable_offset=hw, log_start_offset=plog.log_start_offset if plog else -1,
                    aborted_transactions=None, preferred_read_replica=-1, records=records))
            answer.append(ctx.nested("FetchableTopicResponse", topic=name, topic_id=getattr(t, "topic_id", None),
                                     partitions=tuple(parts)))
        return answer, total

    async def fetch(self, ctx: RequestContext, req: Any) -> Any:
        # KIP-227: epoch 0 asks for a new session, -1 for none (whatever the id: a session it
        # names is closed); both are full fetches. We hand out no sessions (id 0 in every
        # answer, which the KIP allows), so an incremental fetch (epoch > 0) names a session
        # we do not have.
        if getattr(req, "session_epoch", -1) > 0:
            return ctx.response(throttle_time=0, error_code=E.fetch_session_id_not_found, session_id=0,
                                responses=())
        deadline = time.monotonic() + min(ms(req.max_wait), self.fetch_max_wait_ms) / 1000
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.draining or self._can_answer(ctx, req):
                # Records are read when the answer is written, not held while it waits its turn.
                return BuiltWhenSent(partial(self._fetch_response, ctx, req))
            await self._wait_for_data(ctx, req, remaining)

    def _fetch_response(self, ctx: RequestContext, req: Any) -> Any:
        answer, _ = self._read(ctx, req, min(req.max_bytes, self.fetch_max_bytes))
        return ctx.response(throttle_time=0, error_code=E.none, session_id=0, responses=tuple(answer))

    def _can_answer(self, ctx: RequestContext, req: Any) -> bool:
        """Whether min_bytes are there (each partition counting up to its partition_max_bytes,
        as Kafka's DelayedFetch counts) or a partition has an error to tell; nothing is read."""
        wanted = req.min_bytes
        total = 0
        for t in req.topics:
            info = self.topics.by_id.get(t.topic_id) if ctx.version >= 13 else self.topics.get(t.topic)
            for p in t.partitions:
                if info is None or not 0 <= p.partition < info.partitions:
                    return True
                plog = info.logs[p.partition]
                if plog.offline is not None or not plog.log_start_offset <= p.fetch_offset <= plog.log_end_offset:
                    return True
                if p.fetch_offset < plog.log_end_offset:
                    total += min(plog.bytes_after(p.fetch_offset), max(p.partition_max_bytes, 0))
        return total >= wanted

    async def _wait_for_data(self, ctx: RequestContext, req: Any, timeout: float) -> None:
        """Long-poll: sleep until a produce to one of the partitions, or the timeout."""
        fut = asyncio.get_running_loop().create_future()
        logs = []
        for t in req.topics:
            name = t.topic if ctx.version < 13 else getattr(self.topics.by_id.get(t.topic_id), "name", None)
            for p in t.partitions:
                plog = self.topics.partition_log(name, p.partition)
                if plog is not None:
                    self._watch(plog)
                    self.waiters.setdefault(plog, set()).add(fut)
                    logs.append(plog)
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for plog in logs:
                waiting = self.waiters.get(plog)
                if waiting is not None:
                    waiting.discard(fut)
                    if not waiting:
                        del self.waiters[plog]

    # ListOffsets ------------------------------------------------------------------------

    def list_offsets(self, ctx: RequestContext, req: Any) -> Any:
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                plog = self.topics.partition_log(t.name, p.partition_index)
                error, offset, timestamp = E.none, -1, -1
                if plog is None:
                    error = E.unknown_topic_or_partition
                elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):  # no tiered storage: all is local
                    offset = plog.log_start_offset
                elif p.timestamp == LATEST_TIERED:
                    pass  # nothing is tiered: offset -1, as Kafka without remote storage
                elif p.timestamp == LATEST:
                    offset = plog.log_end_offset
                else:
                    found = plog.max_timestamp() if p.timestamp == MAX_TIMESTAMP else plog.offset_for_timestamp(p.timestamp)
                    if found is not None:
                        offset, timestamp = found
                parts.append(ctx.nested("ListOffsetsPartitionResponse", partition_index=p.partition_index,
                                        error_code=error, timestamp=timestamp, offset=offset,
                                        leader_epoch=0 if plog else -1))
            topics.append(ctx.nested("ListOffsetsTopicResponse", name=t.name, partitions=tuple(parts)))
        return ctx.response(throttle_time=0, topics=tuple(topics))

    # InitProducerId ---------------------------------------------------------------------

    def init_producer_id(self, ctx: RequestContext, req: Any) -> Any:
        if req.transactional_id is not None:
            return ctx.response(throttle_time=0, error_code=E.transactional_id_authorization_failed,
                                producer_id=-1, producer_epoch=-1)
        pid, epoch = getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1)
        if pid >= 0 and 0 <= epoch < 32766:
            return ctx.response(throttle_time=0, error_code=E.none, producer_id=pid, producer_epoch=epoch + 1)
        return ctx.response(throttle_time=0, error_code=E.none, producer_id=self.producer_ids.allocate(),
                            producer_epoch=0)

    def drain(self) -> None:
        """The server is stopping: long-polling fetches answer now with what they have."""
        self.draining = True
        for futs in self.waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result(None)

    async def close(self) -> None:
        self.drain()


async def _policy_flush(plog: PartitionLog) -> None:
    if plog.config.fsync == "always":
        await plog.flush()
