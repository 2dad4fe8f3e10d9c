"""Reads the topics out of a consumer's subscription (ConsumerProtocolSubscription)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kio.serial import entity_reader
from kio.serial.readers import Reader


@lru_cache(maxsize=None)
def _reader(version: int) -> Reader[Any]:
    module = __import__(f"kio.schema.consumer_protocol_subscription.v{version}.data", fromlist=["x"])
    return entity_reader(module.ConsumerProtocolSubscription)


@lru_cache(maxsize=4096)
def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """Topic names of a 'consumer' protocol subscription; empty if it does not parse."""
    if len(metadata) < 2:
        return frozenset()
    version = int.from_bytes(metadata[:2], "big", signed=True)
    try:
        sub, _ = _reader(min(max(version, 0), 3))(metadata, 2)
    except Exception:
        return frozenset()
    return frozenset(sub.topics)
