"""Message formats v0 and v1 (magic 0/1, before Kafka 0.11), for clients that never send
ApiVersions and speak Produce v0-2 / Fetch v0-3. Sans-IO.

The log stores record batches v2 only. As Kafka 3.x does, a produced message set is
up-converted to one v2 batch, and Fetch v0-3 answers are down-converted from the stored
batches: magic 0 for Fetch v0/v1, magic 1 for v2/v3.

One message (big-endian): offset int64 | size int32 | crc uint32 (CRC-32 of what follows) |
magic int8 | attributes int8 (codec bits 0-2, LogAppendTime bit 3 in v1) | timestamp int64
(v1 only) | key bytes | value bytes. A compressed message set is one wrapper message whose
value is the compressed inner messages; magic 1 inner offsets are relative (0..n-1) and the
wrapper carries the absolute offset of the last one.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple, cast

from aiokafka.codec import gzip_encode, lz4_decode, lz4_encode, snappy_decode, snappy_encode

from .record_batch import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CorruptBatch,
    Record,
    build_batch_from,
    iter_batch_records,
    iter_batches,
)

_OFFSET_SIZE = struct.Struct(">qi")
MAGIC_AT = 16  # offset (8) + size (4) + crc (4)
NO_TIMESTAMP = -1
TIMESTAMP_TYPE_MASK = 0x08
_ENCODERS = {GZIP: gzip_encode, SNAPPY: snappy_encode, LZ4: lz4_encode}
MAX_DECOMPRESSED = 128 * 1024 * 1024  # largest inner message set accepted from a gzip wrapper


class UnsupportedCompression(ValueError):
    """Stored batches whose codec old message formats cannot carry (zstd)."""


def is_legacy(records: bytes) -> bool:
    """Whether the first entry is a v0/v1 message (same magic byte position as a v2 batch)."""
    return len(records) > MAGIC_AT and records[MAGIC_AT] in (0, 1)


class _Message(NamedTuple):
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _messages(buf: bytes) -> Iterator[_Message]:
    """Every message of a message set, each checked (bounds, CRC) before it is read:
    CorruptBatch on a torn, inconsistent or damaged one. By hand, not with aiokafka's
    legacy reader, which trusts the sizes it reads and can crash on crafted input."""
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < 12:
            raise CorruptBatch(f"{end - pos} bytes at position {pos}: less than a message header")
        _, size = _OFFSET_SIZE.unpack_from(buf, pos)
        stop = pos + 12 + size
        if size < 14 or stop > end:
            raise CorruptBatch(f"message at position {pos} has a bad size {size}")
        (crc,) = struct.unpack_from(">I", buf, pos + 12)
        if zlib.crc32(buf[pos + MAGIC_AT : stop]) != crc:
            raise CorruptBatch(f"message at position {pos}: CRC mismatch")
        magic, attributes = buf[pos + MAGIC_AT], buf[pos + MAGIC_AT + 1]
        if magic not in (0, 1):
            raise CorruptBatch(f"magic {magic} in a message set of format v0/v1")
        at = pos + MAGIC_AT + 2
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if stop - at < 8:
                raise CorruptBatch(f"message at position {pos} is too short")
            (timestamp,) = struct.unpack_from(">q", buf, at)
            at += 8
        key, at = _field(buf, at, stop, pos)
        value, at = _field(buf, at, stop, pos)
        if at != stop:
            raise CorruptBatch(f"message at position {pos} has {stop - at} bytes after its value")
        yield _Message(magic, attributes, timestamp, key, value)
        pos = stop


def _field(buf: bytes, at: int, stop: int, pos: int) -> tuple[bytes | None, int]:
    if stop - at < 4:
        raise CorruptBatch(f"message at position {pos} is too short")
    (n,) = struct.unpack_from(">i", buf, at)
    at += 4
    if n == -1:
        return None, at
    if n < 0 or at + n > stop:
        raise CorruptBatch(f"message at position {pos} has a field of bad length {n}")
    return bytes(buf[at : at + n]), at + n


def _decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == GZIP:  # bounded: a gzip bomb must not take the server's memory
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(data, MAX_DECOMPRESSED)
            if d.unconsumed_tail or not d.eof:
                raise CorruptBatch("gzip message set is truncated or larger than the limit")
            return out
        if codec == SNAPPY:
            return cast(bytes, snappy_decode(data))
        if codec == LZ4:
            return cast(bytes, lz4_decode(data))
    except CorruptBatch:
        raise
    except Exception as e:  # each codec library raises its own errors
        raise CorruptBatch(f"undecodable compressed message set: {e}") from e
    raise CorruptBatch(f"compression codec {codec} cannot be used with message format v0/v1")


def up_convert(message_set: bytes) -> bytes:
    """One v2 batch holding every record of a v0/v1 message set, in order (Kafka's
    up-conversion on produce): offsets from 0, v1 timestamps kept, v0 ones -1, the codec of
    the first compressed wrapper kept."""
    records: list[Record] = []
    compression = NONE
    for m in _messages(message_set):
        codec = m.attributes & 0x07
        if not codec:
            records.append(Record(len(records), m.timestamp, m.key, m.value, []))
            continue
        if compression == NONE:
            compression = codec
        for inner in _messages(_decompress(codec, m.value or b"")):
            if inner.attributes & 0x07:
                raise CorruptBatch("a compressed message inside a compressed message set")
            records.append(Record(len(records), inner.timestamp, inner.key, inner.value, []))
    if not records:
        raise CorruptBatch("no message")
    return build_batch_from(records, base_offset=0, compression=compression)


def _message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    return _OFFSET_SIZE.pack(offset, 4 + len(body)) + struct.pack(">I", crc) + bytes(body)


def down_convert(batches: bytes, magic: int) -> bytes:
    """Stored v2 batches as a message set of `magic` (Kafka's down-conversion for old
    Fetch versions): control batches dropped, headers dropped, each batch's codec kept
    (lz4 cannot be carried by magic 0: sent uncompressed; zstd: UnsupportedCompression)."""
    out = bytearray()
    for pos, h in iter_batches(batches):
        if h.is_control:
            continue
        batch = batches[pos : pos + h.size]
        records = list(iter_batch_records(batch, h))
        if not records:
            continue
        ts_bit = TIMESTAMP_TYPE_MASK if magic == 1 and h.is_log_append_time else 0
        codec = h.compression
        if codec == ZSTD:
            raise UnsupportedCompression("zstd batches cannot be down-converted to message format v0/v1")
        if codec == LZ4 and magic == 0:
            codec = NONE
        if codec == NONE:
            for r in records:
                out += _message(r.offset, magic, ts_bit, r.timestamp, r.key, r.value)
            continue
        first = records[0].offset
        inner = b"".join(
            _message(r.offset - first if magic == 1 else r.offset, magic, ts_bit, r.timestamp, r.key, r.value)
            for r in records
        )
        wrapper_ts = h.max_timestamp if magic == 1 else NO_TIMESTAMP
        out += _message(records[-1].offset, magic, codec | ts_bit, wrapper_ts, None, _ENCODERS[codec](inner))
    return bytes(out)
