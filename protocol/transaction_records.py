"""Records of `__transaction_state` (Kafka's TransactionLogKey / TransactionLogValue).

Key: version int16 (0) + transactional id. Value v0: producer id, producer epoch,
timeout, status, partitions (nullable array of topic + partition ids), last update and
start timestamps; v1 is the same, flexible, with tagged previous (0) / next (1) producer ids,
the client's transaction version (2) and the next producer epoch (3). A transaction of a
transactions v2 client (KIP-890 part 2) is written in v1, whose tags it needs; others in v0.
"""

from __future__ import annotations

from typing import NamedTuple

import struct

from .record_codec import RecordReader, RecordWriter

_H, _Q = struct.Struct(">h"), struct.Struct(">q")

# TransactionState ids as Kafka stores them
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = range(8)
STATE_NAMES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


class TransactionLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1  # before the last rotation (an EndTxn v5 retry names it)
    next_producer_id: int = -1  # the id a transaction ending at an exhausted epoch moves to
    client_transaction_version: int = 0


def encode_key(transactional_id: str) -> bytes:
    w = RecordWriter(0, False)
    w.string(transactional_id)
    return bytes(w.out)


def decode_key(data: bytes) -> str:
    r = RecordReader(data, "TransactionLogKey")
    version = r.int16()
    if version != 0:
        raise r.fail(f"version {version}")
    txn_id = r.string()
    r.end()
    return txn_id


TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID, TAG_CLIENT_TRANSACTION_VERSION, TAG_NEXT_PRODUCER_EPOCH = 0, 1, 2, 3


def encode_value(v: TransactionLogValue, version: int = 0) -> bytes:
    """Version 1 (flexible) when asked, as Kafka writes it once `transaction.version` is 1 or
    more, or when the value needs its tagged fields."""
    flexible = (
        version >= 1 or v.client_transaction_version >= 2 or v.previous_producer_id >= 0 or v.next_producer_id >= 0
    )
    w = RecordWriter(1 if flexible else 0, flexible)
    w.int64(v.producer_id)
    w.int16(v.producer_epoch)
    w.int32(v.timeout_ms)
    w.out.append(v.status)
    w.array_len(len(v.partitions))
    for topic, ids in v.partitions.items():
        w.string(topic)
        w.array_len(len(ids))
        for i in ids:
            w.int32(i)
        w.tags()
    w.int64(v.last_update_ms)
    w.int64(v.start_ms)
    if flexible:  # the tagged fields that differ from their defaults, in tag order
        tags = []
        if v.previous_producer_id != -1:
            tags.append((TAG_PREVIOUS_PRODUCER_ID, _Q.pack(v.previous_producer_id)))
        if v.next_producer_id != -1:
            tags.append((TAG_NEXT_PRODUCER_ID, _Q.pack(v.next_producer_id)))
        if v.client_transaction_version != 0:
            tags.append((TAG_CLIENT_TRANSACTION_VERSION, _H.pack(v.client_transaction_version)))
        w.uvarint(len(tags))
        for tag, data in tags:
            w.uvarint(tag)
            w.uvarint(len(data))
            w.out += data
    return bytes(w.out)


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    if data is None:
        return None  # a tombstone: the transactional id expired
    r = RecordReader(data, "TransactionLogValue")
    version = r.int16()
    if version not in (0, 1):
        raise r.fail(f"version {version}")
    r.flexible = version >= 1
    pid, epoch, timeout = r.int64(), r.int16(), r.int32()
    status = r.take(1)[0]
    partitions: dict[str, list[int]] = {}
    nulls = r.buf[r.pos] == 0 if r.flexible else r.buf[r.pos : r.pos + 4] == b"\xff\xff\xff\xff"
    if nulls:  # a null array (nullable in every version): no partitions
        r.take(1 if r.flexible else 4)
    else:
        for _ in range(r.array_len()):
            topic = r.string()
            partitions[topic] = [r.int32() for _ in range(r.array_len())]
            r.skip_tags()
    last_update, start = r.int64(), r.int64()
    previous = next_pid = -1
    client_version = 0
    if r.flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            data = r.take(size)
            if tag == TAG_PREVIOUS_PRODUCER_ID and size == 8:
                previous = _Q.unpack(data)[0]
            elif tag == TAG_NEXT_PRODUCER_ID and size == 8:
                next_pid = _Q.unpack(data)[0]
            elif tag == TAG_CLIENT_TRANSACTION_VERSION and size == 2:
                client_version = _H.unpack(data)[0]
    return TransactionLogValue(
        pid, epoch, timeout, status, partitions, last_update, start, previous, next_pid, client_version
    )
