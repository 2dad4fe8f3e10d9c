"""Records of `__transaction_state` (Kafka's TransactionLogKey / TransactionLogValue).

Key: version int16 (0) + transactional id. Value v0: producer id, producer epoch,
timeout, status, partitions (nullable array of topic + partition ids), last update and
start timestamps; v1 is the same, flexible, with tagged previous / next producer ids and
the client's transaction version. We write v0 (transactions v1 is all we serve) and read both.
"""

from __future__ import annotations

from typing import NamedTuple

from .record_codec import RecordReader, RecordWriter

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
    return txn_id  # type: ignore[return-value]  # the key's id is non-nullable in Kafka's schema; r.string() types every string as nullable


def encode_value(v: TransactionLogValue) -> bytes:
    w = RecordWriter(0, False)
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
    w.int64(v.last_update_ms)
    w.int64(v.start_ms)
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
            partitions[topic] = [r.int32() for _ in range(r.array_len())]  # type: ignore[index]  # topic names are non-nullable in Kafka's schema; r.string() types every string as nullable
            r.skip_tags()
    last_update, start = r.int64(), r.int64()
    r.skip_tags()
    return TransactionLogValue(pid, epoch, timeout, status, partitions, last_update, start)
