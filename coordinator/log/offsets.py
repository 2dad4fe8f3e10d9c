"""The `__consumer_offsets` topic: N compacted partition logs, groups placed as Kafka does."""

from __future__ import annotations

import asyncio
import errno
import logging
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Final, NamedTuple, TypeAlias
from pathlib import Path

from aiokafka.errors import KafkaError
from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.memory_records import MemoryRecords
from crc32c import crc32c

from protocol.group_records import (
    Key,
    OffsetCommitKey,
    TxnOffsetCommitKey,
    UnknownKey,
    _decode_offset_commit_value,
    decode_key,
    decode_value,
    encode_key,
    encode_records,
    encode_value,
)
from protocol.record_batch import (
    ABORT_MARKER,
    CorruptBatch,
    build_batch,
    build_control_batch,
    marker_type,
    new_batch_builder,
    next_valid_batch,
)

from ..futures import Done, future_and_callback
from .config import OFFSETS_TOPIC_CONFIG, LogConfig
from . import partition as partition_module
from .loader import say_offline
from ..java_order import java_string_hashcode
from .partition import InvalidBatch, PartitionLog, StorageError, now_ms
from .segment import Segment

log = logging.getLogger(__name__)

TOPIC = "__consumer_offsets"
DEFAULT_PARTITIONS = 50  # offsets.topic.num.partitions

# What an append takes: (key, value) pairs, a key a record key or bytes, a value a record,
# bytes or None (a tombstone).
Records: TypeAlias = "Iterable[tuple[Key | bytes, object]]"
Appended: TypeAlias = "asyncio.Future[int] | None"
# An append waiting for its partition's next batch: its encoded (key, value) records, their
# timestamp, and what to call once it is durable or failed.
Queued: TypeAlias = "tuple[list[tuple[bytes, bytes | None]], int, Done]"


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except Integer.MIN_VALUE maps to 0 (not to itself)."""
    return 0 if n == -(2**31) else abs(n)


def partition_for(group_id: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % partitions


class OffsetsRecord(NamedTuple):
    partition: int
    offset: int
    timestamp: int
    key: Key
    # a record value of the key's type; None: tombstone; bytes: value of an UnknownKey record
    # (quoted: mypyc's NamedTuple looks a bare `object` up among the module's names)
    value: "object"


MAX_MERGED_BATCH_BYTES = 1 << 20  # appends merged into one batch stop growing it past this


class OffsetsLog:
    """Appends are group-committed at the record level: every append() made in one event-loop
    iteration to one partition goes into a single batch — one write, one fsync wait — in call
    order, each caller's records contiguous (so a caller's records stay atomic on disk)."""

    def __init__(self, logs: list[PartitionLog]) -> None:
        self.logs = logs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._partition_of: dict[str, int] = {}  # group id -> partition: hashCode once per group
        self._queued: dict[int, list[Queued]] = {}  # partition -> (records, time, done)
        self._warned: dict[int, float] = {}  # partition -> when its last append failure was logged
        # partition -> producer id -> its transactional records with no marker yet (set by latest())
        self._undecided: dict[int, dict[int, list[tuple[Key, object]]]] = {}
        # The fault seam (tests, drills): called with the partition of each append_to(); an
        # error it returns fails that append as a failed write does, nothing of it written.
        # (An attribute, since a compiled OffsetsLog's methods cannot be replaced.)
        self.fault: Callable[[int], BaseException | None] | None = None

    @classmethod
    async def open(
        cls,
        data_dir: str | Path,
        partitions: int = DEFAULT_PARTITIONS,
        config: LogConfig = OFFSETS_TOPIC_CONFIG,
        *,
        background: bool = True,
        topic: str = TOPIC,
    ) -> OffsetsLog:
        """topic: `__consumer_offsets`, or `__transaction_state` for the transaction coordinator."""
        data_dir = Path(data_dir)
        logs = await asyncio.gather(
            *(PartitionLog.open(data_dir / f"{topic}-{p}", config, background=background) for p in range(partitions))
        )
        return cls(list(logs))

    @property
    def partitions(self) -> int:
        return len(self.logs)

    def partition_for(self, group_id: str) -> int:
        p = self._partition_of.get(group_id)
        if p is None:
            if len(self._partition_of) >= 1_000_000:
                self._partition_of.clear()
            p = self._partition_of[group_id] = partition_for(group_id, len(self.logs))
        return p

    def log_for(self, group_id: str) -> PartitionLog:
        return self.logs[self.partition_for(group_id)]

    def append(
        self, group_id: str, records: Records, done: Done | None = None, timestamp_ms: int | None = None
    ) -> Appended:
        """append_to() the group's partition."""
        return self.append_to(self.partition_for(group_id), records, done, timestamp_ms)

    def append_to(
        self, p: int, records: Records, done: Done | None = None, timestamp_ms: int | None = None
    ) -> Appended:
        """Queue records for partition p's next batch. Once durable (per the log's fsync
        policy) done(None, offset of the first record) is called, or done(error, None) if the
        write failed, with none of them left in the log; without `done`, a future of that
        offset is returned. Keys/values may be dataclasses or encoded bytes."""
        pairs = encode_records(records)
        if not pairs:
            raise InvalidBatch("no records to append")
        fut = None
        if done is None:
            fut, done = future_and_callback()
        fault = self.fault
        if fault is not None and (error := fault(p)) is not None:
            asyncio.get_running_loop().call_soon(done, error, None)  # (reported later, as a failed write)
            return fut
        queue = self._queued.get(p)
        if queue is None:
            if not self._queued:
                loop = self._loop
                if loop is None or loop.is_closed():  # (looked up once: a getpid() call on 3.11)
                    loop = self._loop = asyncio.get_running_loop()
                loop.call_soon(self._write_queued)
            queue = self._queued[p] = []
        # (now_ms(), inline: every append)
        queue.append((pairs, time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms, done))
        return fut

    def append_txn_to(
        self,
        p: int,
        records: Records,
        producer_id: int,
        producer_epoch: int,
        done: Done,
    ) -> None:
        """Records of a transaction (TxnOffsetCommit) as their own transactional batch of
        the producer, so its marker can later commit or abort them; done as append_to()."""
        pairs = [
            (k if type(k) is bytes else encode_key(k), v if v is None or type(v) is bytes else encode_value(v))
            for k, v in records
        ]
        self._append_batch(
            p,
            build_batch(
                pairs, timestamp_ms=now_ms(), producer_id=producer_id, producer_epoch=producer_epoch, transactional=True
            ),
            done,
        )

    def append_marker_to(
        self, p: int, producer_id: int, producer_epoch: int, commit: bool, done: Done, coordinator_epoch: int = 0
    ) -> None:
        """The producer's commit or abort marker (a control batch)."""
        self._append_batch(
            p, build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms()), done
        )

    def _append_batch(self, p: int, batch: bytes, done: Done) -> None:
        plog = self.logs[p]
        loop = asyncio.get_running_loop()
        try:
            base = plog.append(batch)
        except Exception as e:  # a full disk, a closed log: nothing of it stays
            loop.call_soon(done, e, None)
            return
        if plog.config.fsync == "always":
            plog.when_durable(lambda error, _: done(error, None if error else base))
        else:
            loop.call_soon(done, None, base)

    def _write_queued(self) -> None:
        """Write each partition's queued appends as one batch, then wake the callers once
        it is durable."""
        queued, self._queued = self._queued, {}
        durable_waits = False  # whether a partition waits for a sync round this started
        for p, queue in queued.items():
            plog = self.logs[p]
            try:
                base, firsts = self._append_merged(plog, queue)
            except Exception as e:
                if self._warned.get(p, 0.0) + 1.0 <= time.monotonic():  # a full disk fails every append
                    self._warned[p] = time.monotonic()
                    log.error("%s", e.strerror if isinstance(e, OSError) else e)
                _fail(queue, e)
                continue
            if plog.config.fsync == "always":
                plog.when_durable(
                    partial(_wake_when_durable, queue, base, firsts), schedule_sync=False, loop=self._loop
                )
                durable_waits = True
            else:
                _wake(queue, base, firsts)
        if durable_waits:
            partition_module.SYNCER.start_now()  # this already ran a turn after the appends' I/O

    @staticmethod
    def _append_merged(plog: PartitionLog, queue: list[Queued]) -> tuple[int, list[int]]:
        """Append the queued records as few batches as possible: the base offset, and each
        caller's first offset relative to it."""
        batches, firsts, count, max_ts = _encode_merged(queue) if _COMPILED else _build_merged(queue)
        if len(batches) == 1:  # (the usual: one batch, appended as built)
            return plog.append_built(batches[0], count, max_ts), firsts
        return plog.append(b"".join(batches), verify_crc=False), firsts

    def replay(self, partition: int, from_offset: int = 0) -> Iterator[OffsetsRecord]:
        """Decoded records of one partition in log order (startup loading).

        Decoded keys are cached: the same few keys repeat throughout the log."""
        keys: dict[bytes, Key] = {}
        get_key = keys.get
        offset_commit = OffsetCommitKey
        decode_commit = _decode_offset_commit_value
        for h, data in self.logs[partition].batches(from_offset):
            if h.is_control:
                continue
            try:
                records = list(DefaultRecordBatch(data))
            except KafkaError as e:
                raise CorruptBatch(f"partition {partition} offset {h.base_offset}: {e}") from e
            for r in records:
                raw = r.key
                if raw is None:
                    continue
                key = get_key(raw)
                if key is None:
                    key = keys[raw] = decode_key(raw)
                value = r.value
                if type(key) is offset_commit:
                    if value is not None:
                        value = decode_commit(value)
                elif type(key) is not UnknownKey:
                    value = decode_value(key, value)
                offset = r.offset
                if offset >= from_offset:
                    yield OffsetsRecord(partition, offset, r.timestamp, key, value)

    def latest(self, partition: int) -> dict[Key, OffsetsRecord]:
        """The last record per key of one partition (tombstones kept, value None): the state a
        coordinator loads at startup. Much faster than replay(): values superseded later in
        the log are never decoded. Every batch's CRC is checked, those before the recovery
        point too (a bit flipped on disk must not become an offset nobody committed): a bad
        one takes the partition offline (StorageError)."""
        plog = self.logs[partition]
        if plog.offline is not None:
            raise StorageError(errno.EIO, f"offline: {plog.offline}")
        last: dict[bytes, tuple[int, int, bytes | None]] = {}
        # transactional records by producer until its marker: applied on commit, dropped on abort
        pending: dict[int, dict[bytes, tuple[int, int, bytes | None]]] = {}
        expected = 0  # base offsets are outside the CRC: they must only grow
        # ... and stay below the next segment's base offset (its file name)
        limits = {seg.path: (seg.base_offset, nxt.base_offset) for seg, nxt in zip(plog.segments, plog.segments[1:])}
        current = None
        for path, start, chunk in plog.located_chunks():
            if path != current:
                current, floor = path, expected
                base_offset, limit = limits.get(path, (plog.segments[-1].base_offset, None))
                ceiling = (1 << 63) - 1 if limit is None else limit
            records = MemoryRecords(chunk)  # walks the batches of a chunk in C
            next_batch = records.next_batch
            good = 0  # whole batches of this chunk read so far
            try:
                while (batch := next_batch()) is not None:
                    if not batch.validate_crc():
                        raise KafkaError("CRC mismatch")
                    if batch.base_offset < expected or batch.next_offset > ceiling:
                        raise _Misfit()
                    expected = batch.next_offset
                    good += 1
                    if batch.is_control_batch:
                        for r in batch:
                            kind = marker_type(r.key)
                            decided = pending.pop(batch.producer_id, None) if kind is not None else None
                            if decided and kind != ABORT_MARKER:
                                for key, rec in decided.items():
                                    if key not in last or last[key][0] < rec[0]:
                                        last[key] = rec
                        continue
                    into = pending.setdefault(batch.producer_id, {}) if batch.is_transactional else last
                    for r in batch:
                        key = r.key
                        if key is not None:
                            into[key] = (r.offset, r.timestamp, r.value)
                # A chunk is whole batches (cut where the log's scan found them): one that
                # ends early has a length field (outside the CRC) that no longer fits.
                if _position(chunk, good) != len(chunk):
                    raise KafkaError("a batch length does not fit the batches around it")
            except _Misfit:
                # A batch whose offsets do not fit: the whole segment is scanned again to
                # name the right one (a base offset flipped upwards shows only at the next).
                found = Segment.examine(path, base_offset, floor, limit)
                bad, resume = found.valid_bytes, found.resumes_at
                why = (found.problem or "offsets out of order").split(": ", 1)[-1]
                plog.offline = f"{path} bytes {bad}-{resume} are corrupt ({why})" + (
                    "" if resume is None else " and valid batches follow"
                )
                say_offline(plog.directory, plog.offline)
                raise StorageError(errno.EIO, f"offline: {plog.offline}") from None
            except KafkaError as e:
                bad = start + _position(chunk, good)
                data = path.read_bytes()
                resume = next_valid_batch(data, bad + 1)
                plog.offline = f"{path} bytes {bad}-{len(data) if resume is None else resume} are corrupt ({e})" + (
                    "" if resume is None else " and valid batches follow"
                )
                say_offline(plog.directory, plog.offline)
                raise StorageError(errno.EIO, f"offline: {plog.offline}") from e
        out: dict[Key, OffsetsRecord] = {}
        for raw, (offset, ts, raw_value) in last.items():
            record_key = decode_key(raw)  # (not `key`: the batches' raw keys above)
            value = raw_value if type(record_key) is UnknownKey else decode_value(record_key, raw_value)
            out[record_key] = OffsetsRecord(partition, offset, ts, record_key, value)
        self._undecided[partition] = {
            pid: [_decoded(raw, value) for raw, (_, _, value) in records.items()]
            for pid, records in pending.items()
            if records
        }
        return out

    def offline(self) -> dict[int, str]:
        """Partitions that may not be used, and why."""
        return {p: plog.offline for p, plog in enumerate(self.logs) if plog.offline is not None}

    def latest_records(self) -> Iterator[tuple[int, Key | TxnOffsetCommitKey, object]]:
        """(partition, key, value) of the last record of every key, each partition in log
        order: what replaying the whole log gives, without decoding superseded values."""
        for p in range(len(self.logs)):
            yield from self.partition_records(p)

    def partition_records(self, p: int) -> Iterator[tuple[int, Key | TxnOffsetCommitKey, object]]:
        """The same for one partition (what its new coordinator loads)."""
        try:
            latest = self.latest(p)
        except StorageError:
            return  # offline (logged): its groups are refused, the others load
        for r in sorted(latest.values(), key=lambda r: r.offset):
            yield p, r.key, r.value
        for producer_id, records in self._undecided.pop(p, {}).items():
            for key, value in records:
                if type(key) is OffsetCommitKey:
                    yield p, TxnOffsetCommitKey(producer_id, key), value

    def replay_all(self) -> Iterator[OffsetsRecord]:
        for p in range(len(self.logs)):
            yield from self.replay(p)

    async def flush(self) -> None:
        await asyncio.gather(*(plog.flush() for plog in self.logs))

    async def compact(self, now: int | None = None) -> None:
        for plog in self.logs:
            await plog.compact(now_ms() if now is None else now)

    async def close(self) -> None:
        await asyncio.gather(*(plog.close() for plog in self.logs))


def _decoded(raw_key: bytes, raw_value: bytes | None) -> tuple[Key, object]:
    key = decode_key(raw_key)
    return key, raw_value if type(key) is UnknownKey else decode_value(key, raw_value)


class _Misfit(Exception):
    """A batch whose offsets do not fit between its neighbours (latest() finds which)."""


def _position(chunk: bytes, batches: int) -> int:
    """Where the batch after the first `batches` whole ones starts (error messages only)."""
    pos = 0
    for _ in range(batches):
        pos += int.from_bytes(chunk[pos + 8 : pos + 12], "big") + 12
    return pos


def _wake_when_durable(
    queue: list[Queued], base: int, firsts: list[int], error: BaseException | None, _: object
) -> None:
    if error is not None:
        _fail(queue, error)
    else:
        _wake(queue, base, firsts)


def _wake(queue: list[Queued], base: int, firsts: list[int]) -> None:
    for (_, _, done), first in zip(queue, firsts):
        done(None, base + first)


def _fail(queue: list[Queued], e: BaseException) -> None:
    for _, _, done in queue:
        done(e, None)


def _varint_bytes(n: int) -> bytearray:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return out


_COMPILED: Final = not __file__.endswith(".py")  # (this module, by mypyc: protocol/compiled.py)
_NO_HEADERS: Final[list[tuple[str, bytes | None]]] = []  # (never mutated: aiokafka's builder only reads it)

# The batches the log writes for appends are those aiokafka's DefaultRecordBatchBuilder
# builds (no compression, no producer, base offset 0), byte for byte. Compiled, they are
# encoded here, without the builder's method call per record; as Python, by the builder.
_HEAD: Final = struct.Struct(">qiibI")  # base offset, batch length, partition leader epoch, magic, crc
_TAIL: Final = struct.Struct(">hiqqqhii")  # attributes ... record count: what the CRC covers before the records
_SMALL_VARINTS: Final = 4096  # zigzag varints of 0..this-1 made once: offset deltas, lengths
_VARINTS: Final = [bytes(_varint_bytes(n)) for n in range(_SMALL_VARINTS)]
_NULL: Final = bytes(_varint_bytes(-1))  # a null value's length
# A record's attributes, timestamp delta 0 and offset delta, by offset delta (one part, not
# three, for the records of a batch's first caller)
_FEW_RECORDS: Final = 1024
_HEADS: Final = [bytes(2) + _VARINTS[n] for n in range(_FEW_RECORDS)]


def _varint(n: int) -> bytes:
    """Kafka's zigzag varint of n (a record's lengths, offset and timestamp deltas)."""
    return _VARINTS[n] if 0 <= n < _SMALL_VARINTS else bytes(_varint_bytes(n))


def _encode_merged(queue: list[Queued]) -> tuple[list[bytearray], list[int], int, int]:
    """The queued appends as batches (a new one once one holds MAX_MERGED_BATCH_BYTES of
    keys and values), each caller's first offset relative to the first batch's, and the
    record count and greatest timestamp of the last batch."""
    batches: list[bytearray] = []
    firsts: list[int] = []
    parts: list[bytes] = []
    count = size = before = 0  # records and bytes in this batch, records in earlier ones
    first_ts = max_ts = queue[0][1]
    varints = _VARINTS
    small = _SMALL_VARINTS
    null = _NULL
    zero = varints[0]  # (a record's attributes, and its count of headers)
    for pairs, ts, _ in queue:
        if count and size > MAX_MERGED_BATCH_BYTES:
            batches.append(_finish_batch(parts, count, first_ts, max_ts))
            before += count
            parts, count, size = [], 0, 0
            first_ts = max_ts = ts
        firsts.append(before + count)
        if ts > max_ts:
            max_ts = ts
        # (attributes, timestamp delta): the same for all the caller's records
        head = zero + _varint(ts - first_ts)
        heads = _HEADS if ts == first_ts else None
        for k, v in pairs:
            n = len(k)
            kv = varints[n] if n < small else _varint(n)
            if v is None:
                vl = null
            else:
                m = len(v)
                vl = varints[m] if m < small else _varint(m)
                n += m
            size += n
            if heads is not None and count < _FEW_RECORDS:
                head_and_offset = heads[count]
            else:
                head_and_offset = head + (varints[count] if count < small else _varint(count))
            n += len(head_and_offset) + len(kv) + len(vl) + 1
            parts.append(varints[n] if n < small else _varint(n))
            parts.append(head_and_offset)
            parts.append(kv)
            parts.append(k)
            parts.append(vl)
            if v is not None:
                parts.append(v)
            parts.append(zero)
            count += 1
    batches.append(_finish_batch(parts, count, first_ts, max_ts))
    return batches, firsts, count, max_ts


def _build_merged(queue: list[Queued]) -> tuple[list[bytearray], list[int], int, int]:
    """_encode_merged() through aiokafka's builder (Cython): faster than the encoder above
    where that runs as Python."""
    batches: list[bytearray] = []
    firsts: list[int] = []
    builder = new_batch_builder()
    count = size = before = 0
    max_ts = queue[0][1]
    for pairs, ts, _ in queue:
        if count and size > MAX_MERGED_BATCH_BYTES:
            batches.append(builder.build())
            before += count
            builder, count, size = new_batch_builder(), 0, 0
            max_ts = ts
        firsts.append(before + count)
        if ts > max_ts:
            max_ts = ts
        for k, v in pairs:
            builder.append(count, ts, k, v, _NO_HEADERS)
            count += 1
            size += len(k) + (len(v) if v is not None else 0)
    batches.append(builder.build())
    return batches, firsts, count, max_ts


def _finish_batch(parts: list[bytes], count: int, first_ts: int, max_ts: int) -> bytearray:
    """The batch of these encoded records: header, CRC-32C over attributes to the end."""
    records = b"".join(parts)
    tail = _TAIL.pack(0, count - 1, first_ts, max_ts, -1, -1, -1, count)
    batch = bytearray(_HEAD.pack(0, len(records) + 49, -1, 2, crc32c(records, crc32c(tail))))
    batch += tail
    batch += records
    return batch
