"""Kafka record batch v2 (magic 2): build, parse headers, validate, iterate. Sans-IO.

On-disk and on-wire layout of one batch (big-endian):

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | firstTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordCount int32 | records...

batchLength counts the bytes after itself; the CRC-32C covers attributes to the end, so a
broker may rewrite baseOffset and partitionLeaderEpoch without recomputing it.
Record encoding and compression are delegated to aiokafka's (Cython) implementation.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple, TypeAlias

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # CRC covers from here to the end of the batch
MAX_TIMESTAMP_OFFSET = 35
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batch with zero records
MAGIC = 2

# What a batch is read from: a segment's bytes, a frame's view, a buffer being filled.
Buffer: TypeAlias = bytes | bytearray | memoryview

_new = tuple.__new__
_BASE_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")

# attributes bits
COMPRESSION_MASK = 0x07
NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
TIMESTAMP_TYPE_MASK = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1


class CorruptBatch(ValueError):
    """The bytes at a position are not a valid magic-2 batch (bad length, magic or CRC)."""


class TruncatedBatch(CorruptBatch):
    """The buffer ends inside a batch: a torn write, or a partial batch at a Fetch limit."""


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def parse_header(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> BatchHeader:
    """Parse and validate the batch starting at buf[pos]; the whole batch must be in buf.

    Raises TruncatedBatch if buf ends before the batch does, CorruptBatch otherwise.
    """
    end = len(buf)
    if end - pos < LOG_OVERHEAD:
        raise TruncatedBatch(f"{end - pos} bytes at position {pos}: less than a batch header")
    _, length = _BASE_AND_LENGTH.unpack_from(buf, pos)
    if length < MIN_BATCH_LENGTH:
        raise CorruptBatch(f"batch length {length} at position {pos} is below {MIN_BATCH_LENGTH}")
    if end - pos < LOG_OVERHEAD + length:
        if end - pos >= HEADER_SIZE and buf[pos + 16] != MAGIC:
            raise CorruptBatch(f"magic {buf[pos + 16]} at position {pos}, expected {MAGIC}")
        raise TruncatedBatch(f"batch at position {pos} needs {LOG_OVERHEAD + length} bytes, {end - pos} present")
    h = _new(BatchHeader, HEADER.unpack_from(buf, pos))  # (_make without its Python-level call)
    if h.magic != MAGIC:
        raise CorruptBatch(f"magic {h.magic} at position {pos}, expected {MAGIC}")
    if h.record_count < 0 or h.last_offset_delta < 0:
        raise CorruptBatch(f"negative record count or offset delta at position {pos}")
    if verify_crc:
        view = buf if type(buf) is memoryview else memoryview(buf)
        actual = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + length])
        if actual != h.crc:
            raise CorruptBatch(
                f"CRC mismatch at position {pos} (base offset {h.base_offset}):"
                f" stored {h.crc:#010x}, computed {actual:#010x}"
            )
    return h


def iter_batches(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch in buf; raise on a bad or partial one."""
    end = len(buf)
    while pos < end:
        h = parse_header(buf, pos, verify_crc=verify_crc)
        yield pos, h
        pos += h.batch_length + LOG_OVERHEAD


def next_valid_batch(buf: bytes | bytearray | mmap.mmap, pos: int) -> int | None:
    """The position of the first whole batch at or after `pos` whose magic, length and CRC
    are right, or None: where reading resumes after corrupt bytes. The server names the
    corrupt range with it (and repair keeps what follows); the pipeline skips exactly that
    range, so both agree on what is lost."""
    end = len(buf)
    while True:
        pos = buf.find(b"\x02", pos + 16) - 16  # the magic byte sits 16 bytes into a batch
        if pos < 0 or pos + HEADER_SIZE > end:
            return None
        length = int.from_bytes(buf[pos + 8 : pos + 12], "big")
        stop = pos + LOG_OVERHEAD + length
        if length >= MIN_BATCH_LENGTH and stop <= end:
            crc = int.from_bytes(buf[pos + 17 : pos + 21], "big")
            if crc32c(buf[pos + 21 : stop]) == crc:
                return pos
        pos += 1


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Assign offsets to the batch at buf[pos] (a writable buffer); the CRC stays valid."""
    _INT64.pack_into(buf, pos, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def stamp_log_append_time(batch: Buffer, now_ms: int) -> bytes:
    """The one batch with the broker's time (message.timestamp.type=LogAppendTime): the
    timestamp-type bit set and max timestamp = now_ms, CRC recomputed; readers give every
    record that time (Kafka's setMaxTimestamp(LOG_APPEND_TIME, now))."""
    buf = bytearray(batch)
    attributes = int.from_bytes(buf[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2], "big")
    buf[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = (attributes | TIMESTAMP_TYPE_MASK).to_bytes(2, "big")
    _INT64.pack_into(buf, MAX_TIMESTAMP_OFFSET, now_ms)
    _UINT32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def build_batch(
    records: Iterable[tuple[bytes | None, bytes | None]],
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    compression: int = NONE,
    headers: list[tuple[str, bytes | None]] | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One batch holding (key, value) records at consecutive offsets from base_offset."""
    hdrs = headers or []
    return build_batch_from(
        (Record(i, timestamp_ms, k, v, hdrs) for i, (k, v) in enumerate(records)),
        base_offset=base_offset,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        partition_leader_epoch=partition_leader_epoch,
        relative=True,
    )


def new_batch_builder() -> DefaultRecordBatchBuilder:
    """A builder for one plain batch (no compression, no producer): append(offset delta,
    timestamp, key, value, headers) per record, then build() (base offset 0: the log
    assigns the real one)."""
    return DefaultRecordBatchBuilder(MAGIC, NONE, 0, NO_PRODUCER_ID, -1, -1, 2**31 - 1)


def build_batch_from(
    records: Iterable[Record],
    *,
    base_offset: int,
    compression: int = NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    last_offset_delta: int | None = None,
    relative: bool = False,
) -> bytes:
    """A batch from Records with their own offsets and timestamps (gaps allowed).

    Offsets are absolute unless relative=True. last_offset_delta may be raised above the
    last record's delta, as compaction does to keep a batch's last offset when its final
    record was removed.
    """
    builder = DefaultRecordBatchBuilder(
        MAGIC,
        compression,
        int(transactional),
        producer_id,
        producer_epoch,
        base_sequence,
        2**31 - 1,  # batch_size: never refuse a record
    )
    shift = 0 if relative else base_offset
    for r in records:
        builder.append(r.offset - shift, r.timestamp, r.key, r.value, r.headers)
    buf = builder.build()
    _INT64.pack_into(buf, 0, base_offset)
    if partition_leader_epoch != NO_PARTITION_LEADER_EPOCH:
        set_partition_leader_epoch(buf, 0, partition_leader_epoch)
    if last_offset_delta is not None:
        _INT32.pack_into(buf, 23, last_offset_delta)
        _UINT32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def iter_batch_records(batch: Buffer, h: BatchHeader | None = None) -> Iterator[Record]:
    """Records of exactly one whole batch (bytes-like, starting at its base offset)."""
    if h is None:
        h = parse_header(batch)
    data = bytes(batch[: h.batch_length + LOG_OVERHEAD])
    try:
        for r in DefaultRecordBatch(data):
            yield Record(r.offset, r.timestamp, r.key, r.value, r.headers)
    except Exception as e:  # aiokafka's CorruptRecordException, each codec's own errors, bad UTF-8 header keys
        raise CorruptBatch(f"batch at base offset {h.base_offset}: {e}") from e


def iter_records(buf: Buffer, *, verify_crc: bool = True) -> Iterator[Record]:
    """Every record of every whole batch in buf, in order."""
    view = memoryview(buf)
    for pos, h in iter_batches(view, verify_crc=verify_crc):
        yield from iter_batch_records(view[pos : pos + h.batch_length + LOG_OVERHEAD], h)


# Control records (Kafka's EndTransactionMarker): key = version int16 (0) + type int16,
# value = version int16 (0) + coordinator epoch int32.
ABORT_MARKER, COMMIT_MARKER = 0, 1
_MARKER = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


def build_control_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """A transaction marker: one control record in a transactional batch with the control
    bit set, base offset 0 (the log assigns the real one), no sequence."""
    key = _MARKER.pack(0, COMMIT_MARKER if commit else ABORT_MARKER)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    buf = bytearray(
        build_batch(
            [(key, value)],
            timestamp_ms=timestamp_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=True,
        )
    )
    attributes = int.from_bytes(buf[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2], "big") | CONTROL_MASK
    buf[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = attributes.to_bytes(2, "big")
    _UINT32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def marker_type(key: bytes | None) -> int | None:
    """COMMIT_MARKER / ABORT_MARKER for a control record's key; None for other control
    records (or a key too short to say)."""
    if key is None or len(key) < 4:
        return None
    _, kind = _MARKER.unpack_from(key)
    return kind if kind in (ABORT_MARKER, COMMIT_MARKER) else None


def control_batch_coordinator_epoch(batch: Buffer) -> int:
    """The coordinator epoch a transaction marker batch carries (-1 if it says none)."""
    for r in iter_batch_records(batch):
        if r.value is not None and len(r.value) >= _MARKER_VALUE.size:
            return int(_MARKER_VALUE.unpack_from(r.value)[1])
        break
    return -1


def control_batch_marker(batch: Buffer) -> int | None:
    """The marker type of a whole control batch (its first record's key)."""
    for r in iter_batch_records(batch):
        return marker_type(r.key)
    return None
