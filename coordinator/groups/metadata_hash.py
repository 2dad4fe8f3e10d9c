"""Kafka's group metadata hash (KIP-1101): one 64-bit number over the topics a group reads.

Kafka 4.1+ stores it as the MetadataHash of ConsumerGroupMetadataValue (tagged field 0) and
ShareGroupMetadataValue; a heartbeat that sees another value bumps the group epoch. The bytes
are those of group-coordinator's `Utils.computeTopicHash` and `Utils.computeGroupHash`, streamed
into XXH3-64 with seed 0 (hash4j's `Hashing.xxh3_64().hashStream()`), where every int and long is
written little-endian and a String as its UTF-16LE code units followed by its length as an int.
A log this server writes therefore carries the hash a Kafka broker computes for the same topics,
and loading it there bumps no epoch.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Iterable, Mapping

import xxhash

TOPIC_HASH_MAGIC_BYTE = 0  # Utils.TOPIC_HASH_MAGIC_BYTE: the version of the layout below


def _java_string(s: str) -> bytes:
    """hash4j's putString: the UTF-16 code units, then String.length() (code units too)."""
    units = s.encode("utf-16-le")
    return units + struct.pack("<i", len(units) // 2)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def topic_hash(
    name: str, topic_id: uuid.UUID, partitions: int, racks: Mapping[int, Iterable[str]] | None = None
) -> int:
    """Utils.computeTopicHash: magic byte, topic id (most then least significant long), name,
    partition count, then each partition's index and the sorted racks of its replicas, each
    rack as its length and then the string (so a rack's length is written twice). A broker
    without `broker.rack` contributes no rack."""
    h = xxhash.xxh3_64(seed=0)
    msb, lsb = struct.unpack(">qq", topic_id.bytes)
    h.update(struct.pack("<bqq", TOPIC_HASH_MAGIC_BYTE, msb, lsb))
    h.update(_java_string(name))
    h.update(struct.pack("<i", partitions))
    if not racks:  # the partition indexes alone: one stream of ints, hashed as one buffer
        h.update(struct.pack(f"<{partitions}i", *range(partitions)))
        return _signed(h.intdigest())
    for i in range(partitions):
        h.update(struct.pack("<i", i))
        for rack in sorted(racks.get(i, ()), key=_java_order):
            h.update(struct.pack("<i", len(rack.encode("utf-16-le")) // 2))
            h.update(_java_string(rack))
    return _signed(h.intdigest())


@functools.lru_cache(maxsize=4096)
def _rackless_topic_hash(name: str, topic_id: uuid.UUID, partitions: int) -> int:
    """topic_hash of a topic without racks, kept per topic as Kafka's topic hash cache: every
    group subscribing to the topic needs it, a 3,000-partition topic hashes 12 KB."""
    return topic_hash(name, topic_id, partitions)


def group_hash(topic_hashes: Mapping[str, int]) -> int:
    """Utils.computeGroupHash: 0 for no topic, else XXH3-64 over the topic hashes (longs) in
    topic-name order (Java's String order: by UTF-16 code unit)."""
    if not topic_hashes:
        return 0
    h = xxhash.xxh3_64(seed=0)
    for name in sorted(topic_hashes, key=_java_order):
        h.update(struct.pack("<q", topic_hashes[name]))
    return _signed(h.intdigest())


def metadata_hash(metadata: Mapping[str, tuple[uuid.UUID, int]]) -> int:
    """ModernGroup.computeMetadataHash: the group hash of the subscribed topics that exist,
    given as name -> (topic id, partition count)."""
    return group_hash({name: _rackless_topic_hash(name, tid, n) for name, (tid, n) in metadata.items()})


def _java_order(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")
