"""Codecs for share-group records (KIP-932), in Kafka 4.2's bytes.

Two logs hold them, as in Kafka:

- `__consumer_offsets` (the group coordinator): key types 10 ShareGroupMemberMetadata (a
  member's subscription), 11 ShareGroupMetadata (the group epoch), 12
  ShareGroupTargetAssignmentMetadata (the assignment epoch), 13
  ShareGroupTargetAssignmentMember (a member's target), 14 ShareGroupCurrentMemberAssignment
  (a member's epoch and partitions), 15 ShareGroupStatePartitionMetadata (the topics whose
  share-partition state is being initialized, is initialized, or is being deleted). Type 9
  (ShareGroupPartitionMetadata, dropped by Kafka 4.1) is kept raw.
- `__share_group_state` (the share coordinator): key type 0 ShareSnapshot (the whole state of
  one share-partition) and 1 ShareUpdate (a delta on the last snapshot), keyed by group id,
  topic id and partition.

Keys are non-flexible (int16-length strings); values are version 0, flexible (compact
strings and arrays, tagged fields; unknown tags skipped).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import cast

from .consumer_records import (
    GroupEpochValue,
    GroupKey,
    MemberAssignment,
    MemberKey,
    TargetAssignmentMember,
    TargetAssignmentMetadata,
    _partitions,
    _read_partitions,
    _read_uuid,
    _uuid,
    read_member_epochs,
    read_target_metadata,
    key_codec,
    write_member_epochs,
    write_target_metadata,
)
from .record_codec import RecordDecodeError, RecordReader, RecordWriter


# ---------------------------------------------------------------- __consumer_offsets


# The keys, the group epoch and the target-assignment records are the consumer groups' shapes
# (consumer_records.py), each its own type.


class ShareGroupMemberMetadataKey(MemberKey):
    __slots__ = ()


class ShareGroupMetadataKey(GroupKey):
    __slots__ = ()


class ShareGroupTargetAssignmentMetadataKey(GroupKey):
    __slots__ = ()


class ShareGroupTargetAssignmentMemberKey(MemberKey):
    __slots__ = ()


class ShareGroupCurrentMemberAssignmentKey(MemberKey):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()


class ShareGroupMetadataValue(GroupEpochValue):
    __slots__ = ()  # the hash is a field (Kafka 4.1+), not a tagged one


class ShareGroupTargetAssignmentMetadataValue(TargetAssignmentMetadata):
    __slots__ = ()


class ShareGroupTargetAssignmentMemberValue(TargetAssignmentMember):
    __slots__ = ()


class ShareGroupCurrentMemberAssignmentValue(MemberAssignment):
    __slots__ = ()  # its state is always 0 (stable)


class ShareGroupStatePartitionMetadataKey(GroupKey):
    __slots__ = ()


# (topic id, topic name, partitions) of TopicPartitionsInfo; (topic id, topic name) of TopicInfo
TopicPartitionsInfo = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
TopicInfo = tuple[tuple[uuid.UUID, str], ...]


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: TopicPartitionsInfo = ()
    initialized_topics: TopicPartitionsInfo = ()
    deleting_topics: TopicInfo = ()


_KEY_TYPES: dict[int, type[GroupKey | MemberKey]] = {
    10: ShareGroupMemberMetadataKey,
    11: ShareGroupMetadataKey,
    12: ShareGroupTargetAssignmentMetadataKey,
    13: ShareGroupTargetAssignmentMemberKey,
    14: ShareGroupCurrentMemberAssignmentKey,
    15: ShareGroupStatePartitionMetadataKey,
}
KEY_TYPES = tuple(_KEY_TYPES.values())
METADATA_KEY = ShareGroupMetadataKey  # the group's epoch: a group ends with its tombstone


def is_share_key_version(version: int) -> bool:
    return version in _KEY_TYPES


encode_key, decode_key = key_codec(_KEY_TYPES)


def encode_value(value: object) -> bytes:
    w = RecordWriter(0, True)
    t = type(value)
    if t is ShareGroupMetadataValue:
        g = cast("ShareGroupMetadataValue", value)  # the `t is` check above says which value it is
        w.int32(g.epoch)
        w.int64(g.metadata_hash)
    elif t is ShareGroupMemberMetadataValue:
        v: ShareGroupMemberMetadataValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        w.string(v.rack_id)
        w.string(v.client_id)
        w.string(v.client_host)
        w.array_len(len(v.subscribed_topic_names))
        for name in v.subscribed_topic_names:
            w.string(name)
    elif t is ShareGroupTargetAssignmentMetadataValue:
        return write_target_metadata(
            w, cast("ShareGroupTargetAssignmentMetadataValue", value)
        )  # the `t is` check above says which value it is
    elif t is ShareGroupTargetAssignmentMemberValue:
        _partitions(
            w, cast("ShareGroupTargetAssignmentMemberValue", value).topic_partitions
        )  # the `t is` check above says which value it is
    elif t is ShareGroupCurrentMemberAssignmentValue:
        c: ShareGroupCurrentMemberAssignmentValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        write_member_epochs(w, c)
        _partitions(w, c.assigned_partitions)
    elif t is ShareGroupStatePartitionMetadataValue:
        m: ShareGroupStatePartitionMetadataValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        _topic_partitions_info(w, m.initializing_topics)
        _topic_partitions_info(w, m.initialized_topics)
        w.array_len(len(m.deleting_topics))
        for topic_id, name in m.deleting_topics:
            _uuid(w, topic_id)
            w.string(name)
            w.tags()
    else:
        raise TypeError(f"not a share-group record value: {value!r}")
    w.tags()
    return bytes(w.out)


def decode_value(key: object, data: bytes) -> object:
    r = RecordReader(data, f"{type(key).__name__} value")
    if r.int16() < 0:
        raise r.fail("negative value version")
    r.flexible = True
    t = type(key)
    if t is ShareGroupMetadataKey:
        epoch = r.int32()
        # Kafka 4.0 wrote the epoch alone; 4.1+ adds the metadata hash.
        value: object = ShareGroupMetadataValue(epoch, r.int64() if len(r.buf) - r.pos > 8 else 0)
    elif t is ShareGroupMemberMetadataKey:
        rack, client_id, client_host = r.string(True), r.string(), r.string()
        names = tuple(r.string() for _ in range(r.array_len()))
        value = ShareGroupMemberMetadataValue(rack, client_id, client_host, names)
    elif t is ShareGroupTargetAssignmentMetadataKey:
        return read_target_metadata(ShareGroupTargetAssignmentMetadataValue, r)
    elif t is ShareGroupTargetAssignmentMemberKey:
        value = ShareGroupTargetAssignmentMemberValue(_read_partitions(r))
    elif t is ShareGroupCurrentMemberAssignmentKey:
        value = ShareGroupCurrentMemberAssignmentValue(*read_member_epochs(r), _read_partitions(r))
    elif t is ShareGroupStatePartitionMetadataKey:
        initializing, initialized = _read_topic_partitions_info(r), _read_topic_partitions_info(r)
        deleting = []
        for _ in range(r.array_len()):
            topic_id, name = _read_uuid(r), r.string()
            r.skip_tags()
            deleting.append((topic_id, name))
        value = ShareGroupStatePartitionMetadataValue(initializing, initialized, tuple(deleting))
    else:
        raise RecordDecodeError(f"no value schema for {key!r}")
    r.skip_tags()
    r.end()
    return value


def _topic_partitions_info(w: RecordWriter, topics: TopicPartitionsInfo) -> None:
    w.array_len(len(topics))
    for topic_id, name, partitions in topics:
        _uuid(w, topic_id)
        w.string(name)
        w.array_len(len(partitions))
        for p in partitions:
            w.int32(p)
        w.tags()


def _read_topic_partitions_info(r: RecordReader) -> TopicPartitionsInfo:
    out = []
    for _ in range(r.array_len()):
        topic_id, name = _read_uuid(r), r.string()
        partitions = tuple(r.int32() for _ in range(r.array_len()))
        r.skip_tags()
        out.append((topic_id, name, partitions))
    return tuple(out)


# ---------------------------------------------------------------- __share_group_state

SNAPSHOT_KEY_TYPE, UPDATE_KEY_TYPE = 0, 1
# ShareSnapshot/ShareUpdate delivery states, as Kafka's RecordState ids
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """ShareSnapshotKey (snapshot=True) or ShareUpdateKey: one share-partition's state."""

    snapshot: bool
    group: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int  # AVAILABLE, ACKNOWLEDGED or ARCHIVED
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int = -1
    write_timestamp: int = -1
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1  # tagged field 0 (Kafka 4.2, KIP-1226)


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: not moved by this update
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1  # tagged field 0


def encode_state_key(key: ShareStateKey) -> bytes:
    w = RecordWriter(SNAPSHOT_KEY_TYPE if key.snapshot else UPDATE_KEY_TYPE, False)
    w.string(key.group)
    _uuid(w, key.topic_id)
    w.int32(key.partition)
    return bytes(w.out)


def decode_state_key(data: bytes) -> ShareStateKey:
    r = RecordReader(data, "share-state key")
    version = r.int16()
    if version not in (SNAPSHOT_KEY_TYPE, UPDATE_KEY_TYPE):
        raise r.fail(f"unknown share-state record type {version}")
    key = ShareStateKey(version == SNAPSHOT_KEY_TYPE, r.string(), _read_uuid(r), r.int32())
    r.end()
    return key


def _batches(w: RecordWriter, batches: tuple[StateBatch, ...]) -> None:
    w.array_len(len(batches))
    for b in batches:
        w.int64(b.first_offset)
        w.int64(b.last_offset)
        w.out.append(b.delivery_state & 0xFF)
        w.int16(b.delivery_count)
        w.tags()


def _read_batches(r: RecordReader) -> tuple[StateBatch, ...]:
    out = []
    for _ in range(r.array_len()):
        first, last = r.int64(), r.int64()
        state = r.take(1)[0]
        out.append(StateBatch(first, last, state, r.int16()))
        r.skip_tags()
    return tuple(out)


def _count_tag(w: RecordWriter, count: int) -> None:
    """The tagged-field section: DeliveryCompleteCount (tag 0) unless it is its default -1."""
    if count == -1:
        w.uvarint(0)
        return
    w.uvarint(1)
    w.uvarint(0)
    w.uvarint(4)
    w.int32(count)


def _read_count_tag(r: RecordReader) -> int:
    count = -1
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        data = r.take(r.uvarint())
        if tag == 0 and len(data) == 4:
            count = int.from_bytes(data, "big", signed=True)
    return count


def encode_state_value(value: ShareSnapshotValue | ShareUpdateValue) -> bytes:
    w = RecordWriter(0, True)
    if type(value) is ShareSnapshotValue:
        w.int32(value.snapshot_epoch)
        w.int32(value.state_epoch)
        w.int32(value.leader_epoch)
        w.int64(value.start_offset)
        w.int64(value.create_timestamp)
        w.int64(value.write_timestamp)
    else:
        w.int32(value.snapshot_epoch)
        w.int32(value.leader_epoch)
        w.int64(value.start_offset)
    _batches(w, value.state_batches)
    _count_tag(w, value.delivery_complete_count)
    return bytes(w.out)


def decode_state_value(key: ShareStateKey, data: bytes) -> ShareSnapshotValue | ShareUpdateValue:
    r = RecordReader(data, ("ShareSnapshot" if key.snapshot else "ShareUpdate") + " value")
    if r.int16() < 0:
        raise r.fail("negative value version")
    r.flexible = True
    value: ShareSnapshotValue | ShareUpdateValue
    if key.snapshot:
        snapshot_epoch, state_epoch, leader_epoch, start = r.int32(), r.int32(), r.int32(), r.int64()
        created, written = r.int64(), r.int64()
        batches = _read_batches(r)
        value = ShareSnapshotValue(
            snapshot_epoch, state_epoch, leader_epoch, start, created, written, batches, _read_count_tag(r)
        )
    else:
        snapshot_epoch, leader_epoch, start = r.int32(), r.int32(), r.int64()
        batches = _read_batches(r)
        value = ShareUpdateValue(snapshot_epoch, leader_epoch, start, batches, _read_count_tag(r))
    r.end()
    return value
