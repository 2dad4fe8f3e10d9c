"""Request versions Kafka has retired but old clients still send without ApiVersions.

kio follows current Kafka, which dropped OffsetCommit v0/v1, OffsetFetch v0,
ListOffsets v0, CreateTopics v0/v1 and DeleteTopics v0. Their bodies decode here into the
kio class of the nearest version that kept the same meaning (OffsetFetch v1, ListOffsets
v1, CreateTopics v2, DeleteTopics v1), so handlers see one shape; where
the response differs from the stand-in's (ListOffsets v0, CreateTopics v0/v1, DeleteTopics
v0), its writer is here too.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any, Callable

from kio.schema.create_topics.v2 import request as create_topics_v2
from kio.schema.describe_configs.v1 import request as describe_configs_v1
from kio.schema.list_offsets.v1 import request as list_offsets_v1
from kio.serial import readers as _kio


def _at(reader: Callable[[bytes, int], tuple[Any, int]]) -> Callable[[bytes, int], tuple[Any, int]]:
    """kio readers return (value, bytes read); these return (value, next position)."""

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        value, size = reader(buf, pos)
        return value, pos + size

    return read


read_int16 = _at(_kio.read_int16)
read_int32 = _at(_kio.read_int32)
read_int64 = _at(_kio.read_int64)
read_legacy_array_length = _at(_kio.read_legacy_array_length)
read_legacy_string = _at(_kio.read_legacy_string)
read_nullable_legacy_string = _at(_kio.read_nullable_legacy_string)


def _array(buf: bytes, pos: int, item: Callable[[bytes, int], tuple[Any, int]]) -> tuple[tuple, int]:
    n, pos = read_legacy_array_length(buf, pos)
    if n < 0:
        raise ValueError("null array")
    if n > len(buf) - pos:
        raise ValueError(f"array of {n} items in {len(buf) - pos} bytes")
    items = []
    for _ in range(n):
        value, pos = item(buf, pos)
        items.append(value)
    return tuple(items), pos


def _list_offsets_v0_read(buf: bytes, pos: int):
    """ListOffsets v0 (Burrow, sarama): like v1 plus a max_num_offsets we answer with one."""

    def partition(buf: bytes, pos: int):
        index, pos = read_int32(buf, pos)
        timestamp, pos = read_int64(buf, pos)
        _max_offsets, pos = read_int32(buf, pos)
        return list_offsets_v1.ListOffsetsPartition(partition_index=index, timestamp=timestamp), pos

    def topic(buf: bytes, pos: int):
        name, pos = read_legacy_string(buf, pos)
        partitions, pos = _array(buf, pos, partition)
        return list_offsets_v1.ListOffsetsTopic(name=name, partitions=partitions), pos

    start = pos
    replica_id, pos = read_int32(buf, pos)
    topics, pos = _array(buf, pos, topic)
    return list_offsets_v1.ListOffsetsRequest(replica_id=replica_id, topics=topics), pos - start


def _list_offsets_v0_write(out: Any, response: Any) -> None:
    """The v1 answer in v0's shape: each offset becomes a one-element old_style_offsets array."""
    out.write(struct.pack(">i", len(response.topics)))
    for t in response.topics:
        name = t.name.encode()
        out.write(struct.pack(">h", len(name)) + name + struct.pack(">i", len(t.partitions)))
        for p in t.partitions:
            offsets = [p.offset] if p.offset >= 0 else []
            out.write(struct.pack(">ihi", p.partition_index, p.error_code, len(offsets)))
            out.write(b"".join(struct.pack(">q", o) for o in offsets))


def _create_topics_v0_read(buf: bytes, pos: int):
    """CreateTopics v0 (kafka-go, old sarama): v1/v2's layout without validate_only."""

    def assignment(buf: bytes, pos: int):
        index, pos = read_int32(buf, pos)
        brokers, pos = _array(buf, pos, read_int32)
        return create_topics_v2.CreatableReplicaAssignment(partition_index=index, broker_ids=brokers), pos

    def config(buf: bytes, pos: int):
        name, pos = read_legacy_string(buf, pos)
        value, pos = read_nullable_legacy_string(buf, pos)
        return create_topics_v2.CreatableTopicConfig(name=name, value=value), pos

    def topic(buf: bytes, pos: int):
        name, pos = read_legacy_string(buf, pos)
        partitions, pos = read_int32(buf, pos)
        replication, pos = read_int16(buf, pos)
        assignments, pos = _array(buf, pos, assignment)
        configs, pos = _array(buf, pos, config)
        return create_topics_v2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication,
                                               assignments=assignments, configs=configs), pos

    start = pos
    topics, pos = _array(buf, pos, topic)
    timeout, pos = read_int32(buf, pos)
    return create_topics_v2.CreateTopicsRequest(topics=topics, timeout=datetime.timedelta(milliseconds=timeout),
                                                validate_only=False), pos - start


def _describe_configs_v0_read(buf: bytes, pos: int):
    """DescribeConfigs v0: v1's request without include_synonyms."""

    def resource(buf: bytes, pos: int):
        kind, pos = _at(_kio.read_int8)(buf, pos)
        name, pos = read_legacy_string(buf, pos)
        n, _ = read_legacy_array_length(buf, pos)
        if n < 0:
            keys, pos = None, pos + 4
        else:
            keys, pos = _array(buf, pos, read_legacy_string)
        return describe_configs_v1.DescribeConfigsResource(resource_type=kind, resource_name=name,
                                                           configuration_keys=keys), pos

    start = pos
    resources, pos = _array(buf, pos, resource)
    return describe_configs_v1.DescribeConfigsRequest(resources=resources, include_synonyms=False), pos - start


def _describe_configs_v0_write(out: Any, response: Any) -> None:
    """v1's answer in v0's shape: is_default instead of config_source, no synonyms."""
    out.write(struct.pack(">ii", int(response.throttle_time.total_seconds() * 1000), len(response.results)))
    for r in response.results:
        out.write(struct.pack(">h", r.error_code) + _string(r.error_message) + struct.pack(">b", r.resource_type)
                  + _string(r.resource_name) + struct.pack(">i", len(r.configs)))
        for c in r.configs:
            out.write(_string(c.name) + _string(c.value)
                      + struct.pack(">???", c.read_only, c.config_source == 5, c.is_sensitive))


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def _topic_errors_write(with_message: bool) -> Callable[[Any, Any], None]:
    """CreateTopics v0/v1 and DeleteTopics v0 answers: no throttle time; [name, error
    (, message from v1 of CreateTopics)] per topic."""

    def write(out: Any, response: Any) -> None:
        results = response.topics if hasattr(response, "topics") else response.responses
        out.write(struct.pack(">i", len(results)))
        for r in results:
            out.write(_string(r.name) + struct.pack(">h", r.error_code))
            if with_message:
                out.write(_string(r.error_message))

    return write


# (api key, version) -> (the version whose classes stand in, reader or None to reuse its own,
# writer or None to reuse its own)
LEGACY: dict[tuple[int, int], tuple[int, Callable | None, Callable | None]] = {
    (8, 0): (2, None, None),  # OffsetCommit v0/v1: protocol/offset_commit.py reads every version
    (8, 1): (2, None, None),
    (9, 0): (1, None, None),  # OffsetFetch v0 (ZooKeeper-era) has v1's exact layout
    (2, 0): (1, _list_offsets_v0_read, _list_offsets_v0_write),
    (19, 0): (2, _create_topics_v0_read, _topic_errors_write(with_message=False)),
    (19, 1): (2, None, _topic_errors_write(with_message=True)),  # v1's request is v2's
    (20, 0): (1, None, _topic_errors_write(with_message=False)),  # v0's request is v1's
    (32, 0): (1, _describe_configs_v0_read, _describe_configs_v0_write),
}
