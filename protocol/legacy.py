"""Request versions Kafka has retired but old clients still send without ApiVersions.

Also CreateAcls / DescribeAcls / DeleteAcls v0 (v1 without the pattern type: always
LITERAL), DescribeConfigs v0, OffsetForLeaderEpoch v0/v1, Produce v0-2 and Fetch v0-3 (their message sets of format v0/v1
are converted by protocol/legacy_records.py).

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

from kio.schema.create_acls.v1 import request as create_acls_v1
from kio.schema.create_topics.v2 import request as create_topics_v2
from kio.schema.delete_acls.v1 import request as delete_acls_v1
from kio.schema.describe_acls.v1 import request as describe_acls_v1
from kio.schema.describe_configs.v1 import request as describe_configs_v1
from kio.schema.fetch.v4 import request as fetch_v4
from kio.schema.offset_for_leader_epoch.v2 import request as olep_v2
from kio.schema.produce.v3 import request as produce_v3
from kio.schema.list_offsets.v1 import request as list_offsets_v1
from kio.serial import readers as _kio
from kio.static.primitive import i8, i32, i32Timedelta


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
read_nullable_legacy_bytes = _at(_kio.read_nullable_legacy_bytes)


def _array(buf: bytes, pos: int, item: Callable[[bytes, int], tuple[Any, int]]) -> tuple[tuple[Any, ...], int]:
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


def _list_offsets_v0_read(buf: bytes, pos: int) -> tuple[Any, int]:
    """ListOffsets v0 (Burrow, sarama): like v1 plus a max_num_offsets we answer with one."""

    def partition(buf: bytes, pos: int) -> tuple[Any, int]:
        index, pos = read_int32(buf, pos)
        timestamp, pos = read_int64(buf, pos)
        _max_offsets, pos = read_int32(buf, pos)
        return list_offsets_v1.ListOffsetsPartition(partition_index=index, timestamp=timestamp), pos

    def topic(buf: bytes, pos: int) -> tuple[Any, int]:
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


def _create_topics_v0_read(buf: bytes, pos: int) -> tuple[Any, int]:
    """CreateTopics v0 (kafka-go, old sarama): v1/v2's layout without validate_only."""

    def assignment(buf: bytes, pos: int) -> tuple[Any, int]:
        index, pos = read_int32(buf, pos)
        brokers, pos = _array(buf, pos, read_int32)
        return create_topics_v2.CreatableReplicaAssignment(partition_index=index, broker_ids=brokers), pos

    def config(buf: bytes, pos: int) -> tuple[Any, int]:
        name, pos = read_legacy_string(buf, pos)
        value, pos = read_nullable_legacy_string(buf, pos)
        return create_topics_v2.CreatableTopicConfig(name=name, value=value), pos

    def topic(buf: bytes, pos: int) -> tuple[Any, int]:
        name, pos = read_legacy_string(buf, pos)
        partitions, pos = read_int32(buf, pos)
        replication, pos = read_int16(buf, pos)
        assignments, pos = _array(buf, pos, assignment)
        configs, pos = _array(buf, pos, config)
        return create_topics_v2.CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=replication,
            assignments=assignments,
            configs=configs,
        ), pos

    start = pos
    topics, pos = _array(buf, pos, topic)
    timeout, pos = read_int32(buf, pos)
    return create_topics_v2.CreateTopicsRequest(
        topics=topics, timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout)), validate_only=False
    ), pos - start


def _describe_configs_v0_read(buf: bytes, pos: int) -> tuple[Any, int]:
    """DescribeConfigs v0: v1's request without include_synonyms."""

    def resource(buf: bytes, pos: int) -> tuple[Any, int]:
        kind, pos = _at(_kio.read_int8)(buf, pos)
        name, pos = read_legacy_string(buf, pos)
        n, _ = read_legacy_array_length(buf, pos)
        if n < 0:
            keys, pos = None, pos + 4
        else:
            keys, pos = _array(buf, pos, read_legacy_string)
        return describe_configs_v1.DescribeConfigsResource(
            resource_type=kind, resource_name=name, configuration_keys=keys
        ), pos

    start = pos
    resources, pos = _array(buf, pos, resource)
    return describe_configs_v1.DescribeConfigsRequest(resources=resources, include_synonyms=False), pos - start


def _describe_configs_v0_write(out: Any, response: Any) -> None:
    """v1's answer in v0's shape: is_default instead of config_source, no synonyms."""
    out.write(struct.pack(">ii", _ms(response.throttle_time), len(response.results)))
    for r in response.results:
        out.write(
            struct.pack(">h", r.error_code)
            + _string(r.error_message)
            + struct.pack(">b", r.resource_type)
            + _string(r.resource_name)
            + struct.pack(">i", len(r.configs))
        )
        for c in r.configs:
            out.write(
                _string(c.name)
                + _string(c.value)
                + struct.pack(">???", c.read_only, c.config_source == 5, c.is_sensitive)
            )


LITERAL = 3  # the only ACL pattern type v0 knows


def _acl_fields_v0(buf: bytes, pos: int, string: Callable[..., Any]) -> tuple[tuple[Any, ...], int]:
    """An ACL (or an ACL filter) in v0's order: resource type, name, principal, host,
    operation, permission; `string` reads the strings (filters may hold nulls)."""
    kind, pos = _at(_kio.read_int8)(buf, pos)
    name, pos = string(buf, pos)
    principal, pos = string(buf, pos)
    host, pos = string(buf, pos)
    operation, pos = _at(_kio.read_int8)(buf, pos)
    permission, pos = _at(_kio.read_int8)(buf, pos)
    return (kind, name, principal, host, operation, permission), pos


def _create_acls_v0_read(buf: bytes, pos: int) -> tuple[Any, int]:
    def creation(buf: bytes, pos: int) -> tuple[Any, int]:
        (kind, name, principal, host, operation, permission), pos = _acl_fields_v0(buf, pos, read_legacy_string)
        return create_acls_v1.AclCreation(
            resource_type=kind,
            resource_name=name,
            resource_pattern_type=i8.parse(LITERAL),
            principal=principal,
            host=host,
            operation=operation,
            permission_type=permission,
        ), pos

    start = pos
    creations, pos = _array(buf, pos, creation)
    return create_acls_v1.CreateAclsRequest(creations=creations), pos - start


def _acl_filter_v0(buf: bytes, pos: int) -> tuple[dict[str, Any], int]:
    (kind, name, principal, host, operation, permission), pos = _acl_fields_v0(buf, pos, read_nullable_legacy_string)
    return dict(
        resource_type_filter=kind,
        resource_name_filter=name,
        pattern_type_filter=LITERAL,
        principal_filter=principal,
        host_filter=host,
        operation=operation,
        permission_type=permission,
    ), pos


def _describe_acls_v0_read(buf: bytes, pos: int) -> tuple[Any, int]:
    values, end = _acl_filter_v0(buf, pos)
    return describe_acls_v1.DescribeAclsRequest(**values), end - pos


def _describe_acls_v0_write(out: Any, response: Any) -> None:
    """v1's answer without the pattern types (a v0 filter only matches LITERAL ACLs)."""
    out.write(
        struct.pack(">ih", _ms(response.throttle_time), response.error_code)
        + _string(response.error_message)
        + struct.pack(">i", len(response.resources))
    )
    for r in response.resources:
        out.write(struct.pack(">b", r.resource_type) + _string(r.resource_name) + struct.pack(">i", len(r.acls)))
        for a in r.acls:
            out.write(_string(a.principal) + _string(a.host) + struct.pack(">bb", a.operation, a.permission_type))


def _delete_acls_v0_read(buf: bytes, pos: int) -> tuple[Any, int]:
    def one(buf: bytes, pos: int) -> tuple[Any, int]:
        values, pos = _acl_filter_v0(buf, pos)
        return delete_acls_v1.DeleteAclsFilter(**values), pos

    start = pos
    filters, pos = _array(buf, pos, one)
    return delete_acls_v1.DeleteAclsRequest(filters=filters), pos - start


def _delete_acls_v0_write(out: Any, response: Any) -> None:
    out.write(struct.pack(">ii", _ms(response.throttle_time), len(response.filter_results)))
    for f in response.filter_results:
        out.write(struct.pack(">h", f.error_code) + _string(f.error_message) + struct.pack(">i", len(f.matching_acls)))
        for a in f.matching_acls:
            out.write(
                struct.pack(">h", a.error_code)
                + _string(a.error_message)
                + struct.pack(">b", a.resource_type)
                + _string(a.resource_name)
                + _string(a.principal)
                + _string(a.host)
                + struct.pack(">bb", a.operation, a.permission_type)
            )


def _produce_v0_2_read(buf: bytes, pos: int) -> tuple[Any, int]:
    """Produce v0-2: v3's request without transactional_id (message sets of format v0/v1)."""

    def partition(buf: bytes, pos: int) -> tuple[Any, int]:
        index, pos = read_int32(buf, pos)
        records, pos = read_nullable_legacy_bytes(buf, pos)
        return produce_v3.PartitionProduceData(index=index, records=records), pos

    def topic(buf: bytes, pos: int) -> tuple[Any, int]:
        name, pos = read_legacy_string(buf, pos)
        partitions, pos = _array(buf, pos, partition)
        return produce_v3.TopicProduceData(name=name, partition_data=partitions), pos

    start = pos
    acks, pos = read_int16(buf, pos)
    timeout, pos = read_int32(buf, pos)
    topics, pos = _array(buf, pos, topic)
    return produce_v3.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout)),
        topic_data=topics,
    ), pos - start


def _produce_write(version: int) -> Callable[[Any, Any], None]:
    """v3's answer in v0-2's shape: v1 adds the throttle time (at the end), v2 the log
    append time (-1: CreateTime)."""

    def write(out: Any, response: Any) -> None:
        out.write(struct.pack(">i", len(response.responses)))
        for t in response.responses:
            out.write(_string(t.name) + struct.pack(">i", len(t.partition_responses)))
            for p in t.partition_responses:
                out.write(struct.pack(">ihq", p.index, p.error_code, p.base_offset))
                if version >= 2:
                    t_ms = -1 if p.log_append_time is None else round(p.log_append_time.timestamp() * 1000)
                    out.write(struct.pack(">q", t_ms))
        if version >= 1:
            out.write(struct.pack(">i", _ms(response.throttle_time)))

    return write


def _fetch_v0_3_read(version: int) -> Callable[[bytes, int], tuple[Any, int]]:
    """Fetch v0-3: v4's request without isolation_level (and before v3, max_bytes)."""

    def partition(buf: bytes, pos: int) -> tuple[Any, int]:
        index, pos = read_int32(buf, pos)
        offset, pos = read_int64(buf, pos)
        max_bytes, pos = read_int32(buf, pos)
        return fetch_v4.FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=max_bytes), pos

    def topic(buf: bytes, pos: int) -> tuple[Any, int]:
        name, pos = read_legacy_string(buf, pos)
        partitions, pos = _array(buf, pos, partition)
        return fetch_v4.FetchTopic(topic=name, partitions=partitions), pos

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        start = pos
        replica_id, pos = read_int32(buf, pos)
        max_wait, pos = read_int32(buf, pos)
        min_bytes, pos = read_int32(buf, pos)
        max_bytes = 2**31 - 1  # before v3: no limit on the whole answer
        if version >= 3:
            max_bytes, pos = read_int32(buf, pos)
        topics, pos = _array(buf, pos, topic)
        return fetch_v4.FetchRequest(
            replica_id=replica_id,
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait)),
            min_bytes=min_bytes,
            max_bytes=i32.parse(max_bytes),
            isolation_level=i8.parse(0),
            topics=topics,
        ), pos - start

    return read


def _fetch_write(version: int) -> Callable[[Any, Any], None]:
    """v4's answer in v0-3's shape: no last stable offset or aborted transactions; the
    throttle time from v1."""

    def write(out: Any, response: Any) -> None:
        if version >= 1:
            out.write(struct.pack(">i", _ms(response.throttle_time)))
        out.write(struct.pack(">i", len(response.responses)))
        for t in response.responses:
            out.write(_string(t.topic) + struct.pack(">i", len(t.partitions)))
            for p in t.partitions:
                records = p.records or b""
                out.write(struct.pack(">ihqi", p.partition_index, p.error_code, p.high_watermark, len(records)))
                out.write(records)

    return write


def _offset_for_leader_epoch_v0_1_read(buf: bytes, pos: int) -> tuple[Any, int]:
    """OffsetForLeaderEpoch v0/v1: v2's request without current_leader_epoch."""

    def partition(buf: bytes, pos: int) -> tuple[Any, int]:
        index, pos = read_int32(buf, pos)
        epoch, pos = read_int32(buf, pos)
        return olep_v2.OffsetForLeaderPartition(
            partition=index, current_leader_epoch=i32.parse(-1), leader_epoch=epoch
        ), pos

    def topic(buf: bytes, pos: int) -> tuple[Any, int]:
        name, pos = read_legacy_string(buf, pos)
        partitions, pos = _array(buf, pos, partition)
        return olep_v2.OffsetForLeaderTopic(topic=name, partitions=partitions), pos

    start = pos
    topics, pos = _array(buf, pos, topic)
    return olep_v2.OffsetForLeaderEpochRequest(topics=topics), pos - start


def _offset_for_leader_epoch_write(version: int) -> Callable[[Any, Any], None]:
    """v2's answer in v0/v1's shape: no throttle time; the leader epoch from v1."""

    def write(out: Any, response: Any) -> None:
        out.write(struct.pack(">i", len(response.topics)))
        for t in response.topics:
            out.write(_string(t.topic) + struct.pack(">i", len(t.partitions)))
            for p in t.partitions:
                out.write(struct.pack(">hi", p.error_code, p.partition))
                if version >= 1:
                    out.write(struct.pack(">i", p.leader_epoch))
                out.write(struct.pack(">q", p.end_offset))

    return write


def _ms(td: datetime.timedelta | int) -> int:
    """A millisecond field: kio's timedelta, or the int milliseconds handlers give."""
    return td if isinstance(td, int) else int(td.total_seconds() * 1000)


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
LEGACY: dict[tuple[int, int], tuple[int, Callable[..., Any] | None, Callable[..., Any] | None]] = {
    (8, 0): (2, None, None),  # OffsetCommit v0/v1: protocol/offset_commit.py reads every version
    (8, 1): (2, None, None),
    (9, 0): (1, None, None),  # OffsetFetch v0 (ZooKeeper-era) has v1's exact layout
    (2, 0): (1, _list_offsets_v0_read, _list_offsets_v0_write),
    (19, 0): (2, _create_topics_v0_read, _topic_errors_write(with_message=False)),
    (19, 1): (2, None, _topic_errors_write(with_message=True)),  # v1's request is v2's
    (20, 0): (1, None, _topic_errors_write(with_message=False)),  # v0's request is v1's
    (32, 0): (1, _describe_configs_v0_read, _describe_configs_v0_write),
    (30, 0): (1, _create_acls_v0_read, None),  # CreateAcls: the same answer as v1
    (29, 0): (1, _describe_acls_v0_read, _describe_acls_v0_write),
    (31, 0): (1, _delete_acls_v0_read, _delete_acls_v0_write),
    # v1 "is the same as version 0" (only the throttling moved, KIP-219): v1's classes read and write v0
    (34, 0): (1, None, None),  # AlterReplicaLogDirs
    (35, 0): (1, None, None),  # DescribeLogDirs
    (38, 0): (1, None, None),  # CreateDelegationToken
    (39, 0): (1, None, None),  # RenewDelegationToken
    (40, 0): (1, None, None),  # ExpireDelegationToken
    (41, 0): (1, None, None),  # DescribeDelegationToken
    # Produce v0-2 / Fetch v0-3: message formats v0/v1 (converted by the data plane)
    **{(0, v): (3, _produce_v0_2_read, _produce_write(v)) for v in range(3)},
    **{(1, v): (4, _fetch_v0_3_read(v), _fetch_write(v)) for v in range(4)},
    **{(23, v): (2, _offset_for_leader_epoch_v0_1_read, _offset_for_leader_epoch_write(v)) for v in range(2)},
}
