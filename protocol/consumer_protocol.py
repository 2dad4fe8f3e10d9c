"""The consumer protocol embedded in classic JoinGroup/SyncGroup: a member's subscription
(ConsumerProtocolSubscription, v0-3) and its assignment (ConsumerProtocolAssignment, v0-3),
each an int16 version followed by the body. Read and written with kio's classes of Kafka's
schemas; the coordinator needs them only where a group changes between the classic and the
consumer protocol (KIP-848 online migration), so nothing here is on a hot path.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from kio.serial import entity_reader, entity_writer

Partitions = list[tuple[str, list[int]]]  # (topic name, partitions)


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer-protocol subscription or assignment."""


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned: Partitions  # v1+; empty before
    rack_id: str | None  # v3+


@lru_cache(maxsize=None)
def _cls(kind: str, version: int) -> Any:
    module = __import__(f"kio.schema.consumer_protocol_{kind}.v{version}.data", fromlist=["x"])
    return getattr(module, "ConsumerProtocol" + kind.title())


def version_of(data: bytes) -> int:
    """The version a member's metadata was written in, capped to the versions known (as
    Kafka answers a newer client in the newest version it knows)."""
    if len(data) < 2:
        raise ConsumerProtocolError("consumer protocol bytes shorter than their version")
    return cast(int, min(max(struct.unpack_from(">h", data)[0], 0), 3))


def _read(kind: str, data: bytes) -> Any:
    version = version_of(data)
    try:
        value, _ = entity_reader(_cls(kind, version))(memoryview(data), 2)
    except Exception as e:  # kio raises several types on bad input
        raise ConsumerProtocolError(f"malformed consumer protocol {kind}: {e}") from None
    return value


def read_subscription(data: bytes) -> Subscription:
    sub = _read("subscription", data)
    try:
        owned = [(t.topic, list(t.partitions)) for t in getattr(sub, "owned_partitions", None) or ()]
        return Subscription(tuple(sub.topics or ()), owned, getattr(sub, "rack_id", None))
    except TypeError as e:
        raise ConsumerProtocolError(f"malformed consumer protocol subscription: {e}") from None


def read_assignment(data: bytes) -> Partitions:
    """An assignment's partitions; empty bytes (a member the leader gave nothing) are none."""
    if not data:
        return []
    try:
        return [(t.topic, list(t.partitions)) for t in _read("assignment", data).assigned_partitions or ()]
    except TypeError as e:
        raise ConsumerProtocolError(f"malformed consumer protocol assignment: {e}") from None


def write_assignment(version: int, partitions: Partitions) -> bytes:
    cls = _cls("assignment", version)
    tp = __import__(cls.__module__, fromlist=["x"]).TopicPartition
    value = cls(assigned_partitions=tuple(tp(topic=t, partitions=tuple(ps)) for t, ps in partitions), user_data=None)
    out = io.BytesIO()
    out.write(struct.pack(">h", version))
    entity_writer(cls)(out, value)
    return out.getvalue()
