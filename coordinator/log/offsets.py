"""The `__consumer_offsets` topic: N compacted partition logs, groups placed as Kafka does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import NamedTuple
from pathlib import Path

from aiokafka.errors import KafkaError
from aiokafka.record.default_records import DefaultRecordBatch

from protocol.group_records import (
    Key, OffsetCommitKey, UnknownKey, Value, _decode_offset_commit_value, decode_key,
    decode_value, encode_key, encode_value,
)
from protocol.record_batch import CorruptBatch

from .config import OFFSETS_TOPIC_CONFIG, LogConfig
from .partition import PartitionLog, now_ms

TOPIC = "__consumer_offsets"
DEFAULT_PARTITIONS = 50  # offsets.topic.num.partitions


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapping at 32 bits (signed)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


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
    value: Value | bytes | None  # None: tombstone; bytes: value of an UnknownKey record


class OffsetsLog:
    def __init__(self, logs: list[PartitionLog]) -> None:
        self.logs = logs

    @classmethod
    async def open(cls, data_dir: str | Path, partitions: int = DEFAULT_PARTITIONS,
                   config: LogConfig = OFFSETS_TOPIC_CONFIG, *, background: bool = True) -> OffsetsLog:
        data_dir = Path(data_dir)
        logs = await asyncio.gather(*(
            PartitionLog.open(data_dir / f"{TOPIC}-{p}", config, background=background)
            for p in range(partitions)))
        return cls(list(logs))

    @property
    def partitions(self) -> int:
        return len(self.logs)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, len(self.logs))

    def log_for(self, group_id: str) -> PartitionLog:
        return self.logs[self.partition_for(group_id)]

    async def append(self, group_id: str, records: Iterable[tuple[Key | bytes, Value | bytes | None]],
                     timestamp_ms: int | None = None) -> int:
        """Append the group's records as one batch; returns its base offset once durable
        (per the log's fsync policy). Keys/values may be dataclasses or encoded bytes."""
        pairs = [
            (k if isinstance(k, bytes) else encode_key(k),
             v if v is None or isinstance(v, bytes) else encode_value(v))
            for k, v in records
        ]
        plog = self.log_for(group_id)
        return await plog.append_durable_records(pairs, timestamp_ms)

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
        the log are never decoded."""
        last: dict[bytes, tuple[int, int, bytes | None]] = {}
        for h, data in self.logs[partition].batches():
            if h.is_control:
                continue
            try:
                for r in DefaultRecordBatch(data):
                    if r.key is not None:
                        last[r.key] = (r.offset, r.timestamp, r.value)
            except KafkaError as e:
                raise CorruptBatch(f"partition {partition} offset {h.base_offset}: {e}") from e
        out: dict[Key, OffsetsRecord] = {}
        for raw, (offset, ts, value) in last.items():
            key = decode_key(raw)
            if type(key) is not UnknownKey:
                value = decode_value(key, value)
            out[key] = OffsetsRecord(partition, offset, ts, key, value)
        return out

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
