"""The `__consumer_offsets` topic: N compacted partition logs, groups placed as Kafka does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from protocol.group_records import (
    Key, UnknownKey, Value, decode_key, decode_value, encode_key, encode_value,
)
from protocol.record_batch import iter_batch_records

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


@dataclass(frozen=True, slots=True)
class OffsetsRecord:
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
        for h, data in self.logs[partition].batches(from_offset):
            if h.is_control:
                continue
            for r in iter_batch_records(data, h):
                raw = r.key
                if raw is None:
                    continue
                key = keys.get(raw)
                if key is None:
                    key = keys[raw] = decode_key(raw)
                value = r.value if type(key) is UnknownKey else decode_value(key, r.value)
                yield OffsetsRecord(partition, r.offset, r.timestamp, key, value)

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
