"""Codecs for the KIP-848 consumer-group records of `__consumer_offsets` (Kafka's bytes).

Key types (the key's leading int16) and their values, as Kafka's group-coordinator
schemas define them (`../shared/kafka-schemas/group-coordinator/`): 3 ConsumerGroupMetadata
(the group epoch), 4 ConsumerGroupPartitionMetadata (the subscribed topics' metadata),
5 ConsumerGroupMemberMetadata (a member's subscription), 6 ConsumerGroupTargetAssignmentMetadata
(the assignment epoch, and since Kafka 4.3 when it was computed: KIP-1263),
7 ConsumerGroupTargetAssignmentMember (a member's target), 8 ConsumerGroupCurrentMemberAssignment
(a member's epoch, state and current partitions, and since Kafka 4.3 the epoch at which each
partition was assigned: KIP-1251), 16 ConsumerGroupRegularExpression (the topics a subscribed
regular expression matched when the group last resolved it, with the metadata version and the
time of that resolution).
Keys are non-flexible (int16-length strings); values are version 0, flexible (compact
strings and arrays, tagged fields, unknown tags skipped so a newer Kafka's records load).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, cast

from .record_codec import (
    RecordDecodeError,
    RecordReader,
    RecordWriter,
    read_epochs_tag,
    read_int32s,
    write_epochs_tag,
    write_int32s,
)

# topic id -> partitions, sorted by topic id when written
Partitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


# ---------------------------------------------------------------- shapes shared with share groups
# Kafka's share-group records (KIP-932, share_records.py) copy these consumer-group schemas:
# the same keys, the same target-assignment records, the same leading fields of a member's
# current assignment. Each record type is its own subclass (its key type, its value schema).


@dataclass(frozen=True, slots=True)
class GroupKey:
    """A key that names a group: the group's metadata, partition metadata and target
    assignment metadata records."""

    group: str


@dataclass(frozen=True, slots=True)
class MemberKey:
    """A key that names one member of a group: its metadata, target and current assignment."""

    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    """{Consumer,Share}GroupMetadataValue: the group epoch and KIP-1101's metadata hash
    (0 in logs written before Kafka 4.1)."""

    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class TargetAssignmentMetadata:
    """{Consumer,Share}GroupTargetAssignmentMetadataValue."""

    assignment_epoch: int
    # When the assignment calculation finished (ms since the epoch; tagged field 0, Kafka 4.3,
    # KIP-1263): the next one waits for the group's assignment interval from then. 0: unknown.
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class TargetAssignmentMember:
    """{Consumer,Share}GroupTargetAssignmentMemberValue: a member's target partitions."""

    topic_partitions: Partitions = ()


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """The leading fields of {Consumer,Share}GroupCurrentMemberAssignmentValue."""

    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState byte: 0 stable, 1 unrevoked, 2 unreleased, 127 unknown
    assigned_partitions: Partitions = ()


# ---------------------------------------------------------------- consumer-group records


class ConsumerGroupMetadataKey(GroupKey):
    __slots__ = ()


class ConsumerGroupPartitionMetadataKey(GroupKey):
    __slots__ = ()


class ConsumerGroupMemberMetadataKey(MemberKey):
    __slots__ = ()


class ConsumerGroupTargetAssignmentMetadataKey(GroupKey):
    __slots__ = ()


class ConsumerGroupTargetAssignmentMemberKey(MemberKey):
    __slots__ = ()


class ConsumerGroupCurrentMemberAssignmentKey(MemberKey):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey(GroupKey):
    """A group's resolved regular expression: the group id, then the regex (both non-flexible
    strings, as a member key's two)."""

    regex: str


class ConsumerGroupMetadataValue(GroupEpochValue):
    __slots__ = ()  # the hash is tagged field 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member of a consumer group that speaks the classic protocol (JoinGroup/SyncGroup):
    its session timeout and the (name, subscription) protocols of its JoinGroup."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None  # tagged field 0


class ConsumerGroupTargetAssignmentMetadataValue(TargetAssignmentMetadata):
    __slots__ = ()


class ConsumerGroupTargetAssignmentMemberValue(TargetAssignmentMember):
    __slots__ = ()


# Per topic entry of a Partitions, the epoch at which each of its partitions was assigned
# (KIP-1251's AssignmentEpochs, tagged field 0 of TopicPartitions), or None if not written.
Epochs = tuple[tuple[int, ...] | None, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue(MemberAssignment):
    partitions_pending_revocation: Partitions = field(default=())
    # KIP-1251 (Kafka 4.3): aligned with the two above; () when the record has none
    assigned_epochs: Epochs = ()
    pending_revocation_epochs: Epochs = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    """The topics the regex matched (sorted), the topic metadata's version when it was
    resolved and when the resolution started (ms since the epoch)."""

    topics: tuple[str, ...]
    version: int
    timestamp: int


_KEY_TYPES: dict[int, type[GroupKey | MemberKey]] = {
    3: ConsumerGroupMetadataKey,
    4: ConsumerGroupPartitionMetadataKey,
    5: ConsumerGroupMemberMetadataKey,
    6: ConsumerGroupTargetAssignmentMetadataKey,
    7: ConsumerGroupTargetAssignmentMemberKey,
    8: ConsumerGroupCurrentMemberAssignmentKey,
    16: ConsumerGroupRegularExpressionKey,
}
KEY_TYPES = tuple(_KEY_TYPES.values())
METADATA_KEY = ConsumerGroupMetadataKey  # the group's epoch: a group ends with its tombstone


def is_consumer_key_version(version: int) -> bool:
    return version in _KEY_TYPES


# ---------------------------------------------------------------- keys


def write_key(key_type: int, key: GroupKey | MemberKey) -> bytes:
    """A group record's key: the key type as its version, then (non-flexible) the group id
    and, for a member's record, the member id."""
    w = RecordWriter(key_type, False)
    w.string(key.group)
    if isinstance(key, MemberKey):
        w.string(key.member_id)
    elif type(key) is ConsumerGroupRegularExpressionKey:
        w.string(key.regex)
    return bytes(w.out)


def read_key(cls: type[GroupKey | MemberKey], r: RecordReader) -> GroupKey | MemberKey:
    """The rest of a key whose type `write_key` wrote: a `cls`."""
    group = r.string()
    if issubclass(cls, MemberKey) or cls is ConsumerGroupRegularExpressionKey:
        return cls(group, r.string())  # (both take the second string)
    return cls(group)


def key_codec(
    key_types: dict[int, type[GroupKey | MemberKey]],
) -> tuple[Callable[[Any], bytes], Callable[[int, RecordReader], GroupKey | MemberKey]]:
    """(encode_key, decode_key) of a group type's records, given its key classes by key type."""
    versions = {t: v for v, t in key_types.items()}

    def encode_key(key: Any) -> bytes:
        return write_key(versions[type(key)], key)

    def decode_key(version: int, r: RecordReader) -> GroupKey | MemberKey:
        return read_key(key_types[version], r)

    return encode_key, decode_key


encode_key, decode_key = key_codec(_KEY_TYPES)


# ---------------------------------------------------------------- values

_UUID = struct.Struct(">QQ")


def _uuid(w: RecordWriter, u: uuid.UUID) -> None:
    w.out += u.bytes


def _read_uuid(r: RecordReader) -> uuid.UUID:
    return uuid.UUID(bytes=r.take(16))


def _partitions(w: RecordWriter, parts: Partitions) -> None:
    w.array_len(len(parts))
    for topic_id, ps in parts:
        _uuid(w, topic_id)
        write_int32s(w, ps)
        w.tags()


def _read_partitions(r: RecordReader) -> Partitions:
    out = []
    for _ in range(r.array_len()):
        topic_id = _read_uuid(r)
        ps = read_int32s(r, r.array_len())
        r.skip_tags()
        out.append((topic_id, ps))
    return tuple(out)


def _epoch_partitions(w: RecordWriter, parts: Partitions, epochs: Epochs) -> None:
    """TopicPartitions of the current assignment, each with its AssignmentEpochs when known."""
    w.array_len(len(parts))
    for i, (topic_id, ps) in enumerate(parts):
        _uuid(w, topic_id)
        write_int32s(w, ps)
        write_epochs_tag(w, epochs[i] if i < len(epochs) else None)


def _read_epoch_partitions(r: RecordReader) -> tuple[Partitions, Epochs]:
    out = []
    epochs: list[tuple[int, ...] | None] = []
    for _ in range(r.array_len()):
        topic_id = _read_uuid(r)
        ps = read_int32s(r, r.array_len())
        out.append((topic_id, ps))
        epochs.append(read_epochs_tag(r, len(ps)))
    return tuple(out), (tuple(epochs) if any(e is not None for e in epochs) else ())


def write_target_metadata(w: RecordWriter, v: TargetAssignmentMetadata) -> bytes:
    """A TargetAssignmentMetadataValue's fields after its version: the assignment epoch, and
    its AssignmentTimestamp (tag 0, Kafka 4.3, KIP-1263) unless it is the default 0 (a tagged
    field at its default is not written)."""
    w.int32(v.assignment_epoch)
    if not v.assignment_timestamp:
        w.tags()
        return bytes(w.out)
    w.uvarint(1)  # one tagged field
    w.uvarint(0)  # its tag
    w.uvarint(8)
    w.int64(v.assignment_timestamp)
    return bytes(w.out)


def read_target_metadata(cls: type[TargetAssignmentMetadata], r: RecordReader) -> TargetAssignmentMetadata:
    """A TargetAssignmentMetadataValue as a `cls`: AssignmentTimestamp (tag 0) read, any
    other tag skipped; 0 if absent (an older Kafka's record)."""
    epoch, timestamp = r.int32(), 0
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        data = r.take(r.uvarint())
        if tag == 0:
            if len(data) != 8:
                raise r.fail(f"AssignmentTimestamp of {len(data)} bytes")
            timestamp = int.from_bytes(data, "big", signed=True)
    r.end()
    return cls(epoch, timestamp)


def write_member_epochs(w: RecordWriter, c: MemberAssignment) -> None:
    """A CurrentMemberAssignmentValue's member epoch, previous epoch and MemberState byte."""
    w.int32(c.member_epoch)
    w.int32(c.previous_member_epoch)
    w.out.append(c.state & 0xFF)


def read_member_epochs(r: RecordReader) -> tuple[int, int, int]:
    """(member epoch, previous member epoch, state) as `write_member_epochs` wrote them."""
    epoch, previous = r.int32(), r.int32()
    state = r.take(1)[0]
    return epoch, previous, state if state < 128 else state - 256


def _classic_tag(w: RecordWriter, c: ClassicMemberMetadata) -> None:
    """The tagged-field section holding ClassicMemberMetadata (tag 0). Kafka writes a
    nullable struct in a tagged field as: tag, size, presence varint 1, the struct."""
    inner = RecordWriter(0, True)
    inner.out = bytearray()
    inner.int32(c.session_timeout_ms)
    inner.array_len(len(c.supported_protocols))
    for name, metadata in c.supported_protocols:
        inner.string(name)
        inner.bytes_(metadata)
        inner.tags()
    inner.tags()
    w.uvarint(1)  # one tagged field
    w.uvarint(0)  # its tag
    w.uvarint(len(inner.out) + 1)
    w.uvarint(1)  # present (not null)
    w.out += inner.out


def _read_classic_tags(r: RecordReader) -> ClassicMemberMetadata | None:
    """The member metadata value's tagged fields: ClassicMemberMetadata (tag 0) read,
    any other tag skipped."""
    classic = None
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        data = r.take(r.uvarint())
        if tag != 0:
            continue
        t = RecordReader(data, "ClassicMemberMetadata")
        t.flexible = True
        if t.uvarint() <= 0:
            continue  # null
        session_timeout = t.int32()
        protocols = []
        for _ in range(t.array_len()):
            name = t.string()
            protocols.append((name, t.bytes_()))
            t.skip_tags()
        t.skip_tags()
        t.end()
        classic = ClassicMemberMetadata(session_timeout, tuple(protocols))
    return classic


def encode_value(value: object) -> bytes:
    w = RecordWriter(0, True)
    t = type(value)
    if t is ConsumerGroupMetadataValue:
        g = cast("ConsumerGroupMetadataValue", value)  # the `t is` check above says which value it is
        w.int32(g.epoch)
        if g.metadata_hash:  # (a tagged field at its default is not written)
            w.uvarint(1)  # one tagged field
            w.uvarint(0)  # its tag: MetadataHash
            w.uvarint(8)
            w.int64(g.metadata_hash)
            return bytes(w.out)
    elif t is ConsumerGroupPartitionMetadataValue:
        topics = cast(
            "ConsumerGroupPartitionMetadataValue", value
        ).topics  # the `t is` check above says which value it is
        w.array_len(len(topics))
        for tm in topics:
            _uuid(w, tm.topic_id)
            w.string(tm.topic_name)
            w.int32(tm.num_partitions)
            w.array_len(0)  # PartitionMetadata (racks): none known here
            w.tags()
    elif t is ConsumerGroupMemberMetadataValue:
        v: ConsumerGroupMemberMetadataValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        w.string(v.instance_id)
        w.string(v.rack_id)
        w.string(v.client_id)
        w.string(v.client_host)
        w.array_len(len(v.subscribed_topic_names))
        for name in v.subscribed_topic_names:
            w.string(name)
        w.string(v.subscribed_topic_regex)
        w.int32(v.rebalance_timeout_ms)
        w.string(v.server_assignor)
        if v.classic_member_metadata is not None:
            _classic_tag(w, v.classic_member_metadata)
            return bytes(w.out)
    elif t is ConsumerGroupTargetAssignmentMetadataValue:
        return write_target_metadata(
            w, cast("ConsumerGroupTargetAssignmentMetadataValue", value)
        )  # the `t is` check above says which value it is
    elif t is ConsumerGroupTargetAssignmentMemberValue:
        _partitions(
            w, cast("ConsumerGroupTargetAssignmentMemberValue", value).topic_partitions
        )  # the `t is` check above says which value it is
    elif t is ConsumerGroupRegularExpressionValue:
        x = cast("ConsumerGroupRegularExpressionValue", value)  # the `t is` check above says which value it is
        w.array_len(len(x.topics))
        for name in x.topics:
            w.string(name)
        w.int64(x.version)
        w.int64(x.timestamp)
    elif t is ConsumerGroupCurrentMemberAssignmentValue:
        c: ConsumerGroupCurrentMemberAssignmentValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        write_member_epochs(w, c)
        _epoch_partitions(w, c.assigned_partitions, c.assigned_epochs)
        _epoch_partitions(w, c.partitions_pending_revocation, c.pending_revocation_epochs)
    else:
        raise TypeError(f"not a consumer-group record value: {value!r}")
    w.tags()
    return bytes(w.out)


def decode_value(key: object, data: bytes) -> object:
    r = RecordReader(data, f"{type(key).__name__} value")
    version = r.int16()
    if version < 0:
        raise r.fail(f"negative value version {version}")
    r.flexible = True  # every version is flexible (KIP-915: newer ones add only tagged fields)
    t = type(key)
    if t is ConsumerGroupMetadataKey:
        epoch, digest = r.int32(), 0
        for _ in range(r.uvarint()):  # MetadataHash (tag 0) read, any other tag skipped
            tag = r.uvarint()
            data = r.take(r.uvarint())
            if tag == 0:
                if len(data) != 8:
                    raise r.fail(f"MetadataHash of {len(data)} bytes")
                digest = int.from_bytes(data, "big", signed=True)
        r.end()
        return ConsumerGroupMetadataValue(epoch, digest)
    elif t is ConsumerGroupPartitionMetadataKey:
        topics = []
        for _ in range(r.array_len()):
            topic_id = _read_uuid(r)
            name = r.string()
            count = r.int32()
            for _ in range(r.array_len()):  # PartitionMetadata: partition and racks, not used
                r.int32()
                for _ in range(r.array_len()):
                    r.string()
                r.skip_tags()
            r.skip_tags()
            topics.append(TopicMetadata(topic_id, name, count))
        value: object = ConsumerGroupPartitionMetadataValue(tuple(topics))
    elif t is ConsumerGroupMemberMetadataKey:
        instance_id, rack_id, client_id, client_host = (r.string(True), r.string(True), r.string(), r.string())
        names = tuple(r.string() for _ in range(r.array_len()))
        regex, rebalance_timeout, assignor = r.string(True), r.int32(), r.string(True)
        classic = _read_classic_tags(r)
        r.end()
        return ConsumerGroupMemberMetadataValue(
            instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout, assignor, classic
        )
    elif t is ConsumerGroupTargetAssignmentMetadataKey:
        return read_target_metadata(ConsumerGroupTargetAssignmentMetadataValue, r)
    elif t is ConsumerGroupTargetAssignmentMemberKey:
        value = ConsumerGroupTargetAssignmentMemberValue(_read_partitions(r))
    elif t is ConsumerGroupCurrentMemberAssignmentKey:
        epoch, previous, state = read_member_epochs(r)
        assigned, assigned_epochs = _read_epoch_partitions(r)
        pending, pending_epochs = _read_epoch_partitions(r)
        value = ConsumerGroupCurrentMemberAssignmentValue(
            epoch, previous, state, assigned, pending, assigned_epochs, pending_epochs
        )
    elif t is ConsumerGroupRegularExpressionKey:
        matched = tuple(r.string() for _ in range(r.array_len()))
        value = ConsumerGroupRegularExpressionValue(matched, r.int64(), r.int64())
    else:
        raise RecordDecodeError(f"no value schema for {key!r}")
    r.skip_tags()
    r.end()
    return value
