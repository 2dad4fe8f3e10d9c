"""Records of `__transaction_state` (Kafka's TransactionLogKey / TransactionLogValue).

Key: version int16 (0) + transactional id. Value v0: producer id, producer epoch,
timeout, status, partitions (nullable array of topic + partition ids), last update and
start timestamps; v1 is the same, flexible, with tagged previous / next producer ids and
the client's transaction version. We write v0 (transactions v1 is all we serve) and read both.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .group_records import RecordDecodeError

_H, _I, _Q, _B = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q"), struct.Struct(">b")
_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, status

# TransactionState ids as Kafka stores them
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = range(8)
STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
               "PrepareEpochFence")


class TransactionLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]]
    last_update_ms: int
    start_ms: int


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _H.pack(0) + _H.pack(len(raw)) + raw


def decode_key(data: bytes) -> str:
    try:
        version, n = struct.unpack_from(">hh", data)
        if version != 0 or n < 0 or 4 + n != len(data):
            raise RecordDecodeError(f"TransactionLogKey version {version}, {len(data)} bytes")
        return data[4:].decode()
    except (struct.error, UnicodeDecodeError) as e:
        raise RecordDecodeError(f"TransactionLogKey: {e}") from e


def encode_value(v: TransactionLogValue) -> bytes:
    out = bytearray(_H.pack(0))
    out += _HEAD.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.status)
    out += _I.pack(len(v.partitions))
    for topic, ids in v.partitions.items():
        raw = topic.encode()
        out += _H.pack(len(raw)) + raw + _I.pack(len(ids))
        for i in ids:
            out += _I.pack(i)
    out += _Q.pack(v.last_update_ms) + _Q.pack(v.start_ms)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes, flexible: bool) -> None:
        self.data, self.pos, self.flexible = data, 2, flexible

    def fixed(self, s: struct.Struct) -> tuple:
        out = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return out

    def uvarint(self) -> int:
        shift = n = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 28:
                raise RecordDecodeError("varint too long")

    def length(self) -> int:  # -1: null
        return self.uvarint() - 1 if self.flexible else self.fixed(_I)[0]

    def string(self) -> str:
        n = self.uvarint() - 1 if self.flexible else self.fixed(_H)[0]
        if n < 0 or self.pos + n > len(self.data):
            raise RecordDecodeError("bad string length")
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    if data is None:
        return None  # a tombstone: the transactional id expired
    try:
        version = _H.unpack_from(data)[0]
        if version not in (0, 1):
            raise RecordDecodeError(f"TransactionLogValue version {version}")
        r = _Reader(data, version >= 1)
        pid, epoch, timeout, status = r.fixed(_HEAD)
        partitions: dict[str, list[int]] = {}
        n = r.length()
        for _ in range(max(n, 0)):
            topic = r.string()
            ids = [r.fixed(_I)[0] for _ in range(r.length())]
            r.skip_tags()
            partitions[topic] = ids
        last_update, start = r.fixed(_Q)[0], r.fixed(_Q)[0]
        r.skip_tags()
        return TransactionLogValue(pid, epoch, timeout, status, partitions, last_update, start)
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise RecordDecodeError(f"TransactionLogValue: {e}") from e
