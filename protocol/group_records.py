"""Codecs for the classic-group records of `__consumer_offsets` (Kafka's exact bytes).

Every key starts with an int16 that names the record type: 0 and 1 are OffsetCommitKey
(same layout), 2 is GroupMetadataKey; 3-8 are KIP-848 consumer-group records
(protocol/consumer_records.py); 10-15 are KIP-932 share-group records
(protocol/share_records.py); 17 and 19-23 are KIP-1071 streams-group records
(protocol/streams_records.py); other numbers (streams type 18, share type 9) we do
not interpret (decode_key returns UnknownKey so a log written by Kafka still replays).
Every value starts with its own int16 schema version; a null value is a tombstone.

Versions written, as current Kafka does: key 1 / 2; OffsetCommitValue 3 (1 when the
commit carries an expire timestamp, the only version with that field); GroupMetadataValue 3.
Values 4+ are flexible (compact strings, tagged fields). Per KIP-915 a value version newer
than we know is read as the newest flexible one (only tagged fields may be added), so a
newer Kafka's records still load.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any, NamedTuple, cast

from . import consumer_records, share_records, streams_records
from .record_codec import RecordDecodeError, RecordReader, RecordWriter

__all__ = [
    "RecordDecodeError",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "UnknownKey",
    "group_metadata_value",
    "member_metadata",
    "encode_key",
    "decode_key",
    "encode_value",
    "encode_records",
    "decode_value",
    "decode_record",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_MAX = 4
GROUP_METADATA_VALUE_MAX = 4
FLEXIBLE_FROM = 4  # both value schemas


class OffsetCommitKey(NamedTuple):  # tuples: one key and one value are built per commit
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True, init=False)
class GroupMetadataKey:
    group: str

    def __init__(self, group: str) -> None:
        # Written out (every classic group write builds one): compiled, a dataclass's own
        # __init__ is interpreted Python. (object's: the class is frozen)
        object.__setattr__(self, "group", group)


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A record type this coordinator does not interpret (e.g. KIP-848 consumer groups)."""

    version: int
    data: bytes


class OffsetCommitValue(NamedTuple):
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1  # v3+
    expire_timestamp: int = -1  # v1 only


class TxnOffsetCommitKey(NamedTuple):
    """A transactional offset commit (a record of a transactional batch of this producer):
    pending until the producer's marker lands. In memory only; on disk it is an
    OffsetCommit record in a batch carrying the producer id."""

    producer_id: int
    key: OffsetCommitKey


class TxnMarkerKey(NamedTuple):
    """The producer's transaction marker in this partition (a control batch on disk)."""

    producer_id: int
    commit: bool


class MemberMetadata(NamedTuple):  # tuples: every classic group write builds them
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1  # v1+
    group_instance_id: str | None = None  # v3+


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = ()
    current_state_timestamp: int = -1  # v2+


_tuple_new = tuple.__new__


def member_metadata(
    member_id: str,
    client_id: str,
    client_host: str,
    session_timeout: int,
    subscription: bytes,
    assignment: bytes,
    rebalance_timeout: int,
    group_instance_id: str | None,
) -> MemberMetadata:
    """MemberMetadata(...) without its __new__, which is interpreted Python even compiled
    (every classic group write builds these)."""
    return _tuple_new(
        MemberMetadata,
        (
            member_id,
            client_id,
            client_host,
            session_timeout,
            subscription,
            assignment,
            rebalance_timeout,
            group_instance_id,
        ),
    )


def group_metadata_value(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    members: tuple[MemberMetadata, ...],
    current_state_timestamp: int,
) -> GroupMetadataValue:
    """GroupMetadataValue(...) without its __new__ (as member_metadata)."""
    return _tuple_new(
        GroupMetadataValue, (protocol_type, generation, protocol, leader, members, current_state_timestamp)
    )


# The consumer, share and streams group types' keys are GroupKey / MemberKey subclasses.
Key = OffsetCommitKey | GroupMetadataKey | UnknownKey | consumer_records.GroupKey | consumer_records.MemberKey
Value = OffsetCommitValue | GroupMetadataValue


# ---------------------------------------------------------------- writing

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_III = struct.Struct(">iii")  # a member's rebalance timeout, session timeout, subscription length
_V3_HEAD = struct.Struct(">hqih")  # OffsetCommitValue v3: version, offset, leaderEpoch, metadata length
_V3_NO_METADATA = struct.Struct(">hqihq")  # ... with empty metadata, then commitTimestamp


def _string16(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0x7FFF:
        raise ValueError(f"string of {len(b)} bytes is too long for an int16 length")
    return _H.pack(len(b)) + b


_V1_KEY = _H.pack(OFFSET_COMMIT_KEY_VERSION)
_GROUP_V3 = _H.pack(3)
_TIMESTAMP_AND_COUNT = struct.Struct(">qi")  # GroupMetadataValue v3: currentStateTimestamp, then the member count


def _string16_nullable(s: str | None) -> bytes:
    return b"\xff\xff" if s is None else _string16(s)


_names: dict[str | None, bytes] = {}  # protocol types and names, client ids and hosts: a few, written again and again


def _name16(s: str | None) -> bytes:
    raw = _names.get(s)
    if raw is None:
        raw = _string16_nullable(s)
        if len(_names) >= 10_000:
            _names.clear()
        _names[s] = raw
    return raw


# A member's part of a GroupMetadataValue v3: a group writes every member again with each
# generation and each member's assignment, mostly the same bytes as last time.
_members_v3: dict[MemberMetadata, bytes] = {}


def _member_v3(m: MemberMetadata) -> bytes:
    raw = _members_v3.get(m)
    if raw is None:
        raw = b"".join(
            (
                _string16(m.member_id),
                _string16_nullable(m.group_instance_id),
                _name16(m.client_id),
                _name16(m.client_host),
                _III.pack(m.rebalance_timeout, m.session_timeout, len(m.subscription)),
                m.subscription,
                _I.pack(len(m.assignment)),
                m.assignment,
            )
        )
        if len(_members_v3) >= 10_000:
            _members_v3.clear()
        _members_v3[m] = raw
    return raw


_commit_keys: dict[OffsetCommitKey, bytes] = {}  # members commit the same partitions again and again
_group_keys: dict[str, bytes] = {}  # group id -> its GroupMetadataKey
_V2_KEY = _H.pack(GROUP_METADATA_KEY_VERSION)


def encode_key(key: object) -> bytes:
    if type(key) is OffsetCommitKey:  # one per commit: no RecordWriter
        raw = _commit_keys.get(key)
        if raw is None:
            raw = b"".join((_V1_KEY, _string16(key.group), _string16(key.topic), _I.pack(key.partition)))
            if len(_commit_keys) >= 100_000:
                _commit_keys.clear()
            _commit_keys[key] = raw
        return raw
    if type(key) is GroupMetadataKey:  # every write of a classic group
        raw = _group_keys.get(key.group)
        if raw is None:
            raw = _V2_KEY + _string16(key.group)
            if len(_group_keys) >= 100_000:
                _group_keys.clear()
            _group_keys[key.group] = raw
        return raw
    if type(key) is UnknownKey:
        return _H.pack(key.version) + key.data
    if type(key) in consumer_records.KEY_TYPES:
        return consumer_records.encode_key(key)
    if type(key) in share_records.KEY_TYPES:
        return share_records.encode_key(key)
    if type(key) in streams_records.KEY_TYPES:
        return streams_records.encode_key(key)
    if type(key) is share_records.ShareStateKey:  # (__share_group_state's, written through the same log)
        return share_records.encode_state_key(key)
    raise TypeError(f"not a __consumer_offsets or __share_group_state key: {key!r}")


def encode_records(records: Iterable[tuple[object, object]]) -> list[tuple[bytes, bytes | None]]:
    """Each (key, value) encoded as encode_key and encode_value do (bytes stay as they are,
    a value None stays a tombstone): an offset commit's records (most writes, one per
    partition) without the two calls each."""
    pairs: list[tuple[bytes, bytes | None]] = []
    keys = _commit_keys
    pack = _V3_NO_METADATA.pack
    commit_key, commit_value = OffsetCommitKey, OffsetCommitValue  # (compiled: a class is a global's lookup)
    for k, v in records:
        # (its fields as objects: compiled, an int field read as an int is made an object
        # again for pack(), a new one each time)
        fields: tuple[Any, ...] = v if type(v) is commit_value else ()
        if type(k) is commit_key and fields and fields[4] == -1 and not fields[1]:
            raw = keys.get(k)
            pairs.append(
                (encode_key(k) if raw is None else raw, pack(3, fields[0], fields[3], 0, fields[2]))
            )  # (encode_value's usual commit)
        else:
            pairs.append(
                (k if type(k) is bytes else encode_key(k), v if v is None or type(v) is bytes else encode_value(v))
            )
    return pairs


def _group_metadata_v3(g: GroupMetadataValue) -> bytes:
    members = g.members
    return b"".join(
        (
            _GROUP_V3,
            _name16(g.protocol_type),
            _I.pack(g.generation),
            _name16(g.protocol),
            _string16_nullable(g.leader),
            _TIMESTAMP_AND_COUNT.pack(g.current_state_timestamp, len(members)),
            *map(_member_v3, members),
        )
    )


def default_version(value: object) -> int:
    if type(value) is OffsetCommitValue:
        return 1 if value.expire_timestamp != -1 else 3
    return 3


def encode_value(value: object, version: int | None = None) -> bytes | None:
    """Serialize at `version` (default: what current Kafka writes). None stays a tombstone."""
    if value is None:
        return None
    if type(value) is OffsetCommitValue and (version == 3 or version is None and value.expire_timestamp == -1):
        # What every commit writes (default_version, inline)
        offset, metadata, commit_timestamp, leader_epoch, _ = value
        if not metadata:  # the usual commit: one pack
            return _V3_NO_METADATA.pack(3, offset, leader_epoch, 0, commit_timestamp)
        m = metadata.encode()
        if len(m) > 0x7FFF:
            raise ValueError(f"string of {len(m)} bytes is too long for an int16 length")
        return b"".join((_V3_HEAD.pack(3, offset, leader_epoch, len(m)), m, _Q.pack(commit_timestamp)))
    if type(value) is GroupMetadataValue and (version is None or version == 3):
        return _group_metadata_v3(value)  # what every classic group writes (default_version, inline)
    if type(value) not in (OffsetCommitValue, GroupMetadataValue):
        if type(value).__module__ == share_records.__name__:
            if type(value) is share_records.ShareSnapshotValue or type(value) is share_records.ShareUpdateValue:
                return share_records.encode_state_value(value)
            return share_records.encode_value(value)
        if type(value).__module__ == streams_records.__name__:
            return streams_records.encode_value(value)
        return consumer_records.encode_value(value)
    if version is None:
        version = default_version(value)
    if type(value) is OffsetCommitValue:
        if not 0 <= version <= OFFSET_COMMIT_VALUE_MAX:
            raise ValueError(f"OffsetCommitValue has no version {version}")
        w = RecordWriter(version, version >= FLEXIBLE_FROM)
        w.int64(value.offset)
        if version >= 3:
            w.int32(value.leader_epoch)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        if version == 1:
            w.int64(value.expire_timestamp)
        w.tags()
    elif type(value) is GroupMetadataValue and version == 3:
        return _group_metadata_v3(value)
    elif type(value) is GroupMetadataValue:
        if not 0 <= version <= GROUP_METADATA_VALUE_MAX:
            raise ValueError(f"GroupMetadataValue has no version {version}")
        w = RecordWriter(version, version >= FLEXIBLE_FROM)
        w.string(value.protocol_type)
        w.int32(value.generation)
        w.string(value.protocol)
        w.string(value.leader)
        if version >= 2:
            w.int64(value.current_state_timestamp)
        w.array_len(len(value.members))
        for member in value.members:
            w.string(member.member_id)
            if version >= 3:
                w.string(member.group_instance_id)
            w.string(member.client_id)
            w.string(member.client_host)
            if version >= 1:
                w.int32(member.rebalance_timeout)
            w.int32(member.session_timeout)
            w.bytes_(member.subscription)
            w.bytes_(member.assignment)
            w.tags()
        w.tags()
    else:
        raise TypeError(f"not a __consumer_offsets value: {value!r}")
    return bytes(w.out)


# ---------------------------------------------------------------- reading


def decode_key(data: bytes) -> Key:
    # Fast path for OffsetCommitKey, the key of nearly every record loaded at startup.
    if type(data) is bytes and len(data) >= 10 and data[0] == 0 and data[1] < 2:
        (glen,) = _H.unpack_from(data, 2)
        if 0 <= glen <= len(data) - 10:
            (tlen,) = _H.unpack_from(data, 4 + glen)
            if 0 <= tlen and 10 + glen + tlen == len(data):
                try:
                    return OffsetCommitKey(
                        data[4 : 4 + glen].decode(),
                        data[6 + glen : 6 + glen + tlen].decode(),
                        _I.unpack_from(data, 6 + glen + tlen)[0],
                    )
                except UnicodeDecodeError:
                    pass  # the generic reader reports it
    r = RecordReader(data, "key")
    version = r.int16()
    key: Key
    if version in (0, 1):
        key = OffsetCommitKey(r.string(), r.string(), r.int32())
    elif version == 2:
        key = GroupMetadataKey(r.string())
    elif consumer_records.is_consumer_key_version(version):
        key = consumer_records.decode_key(version, r)
    elif share_records.is_share_key_version(version):
        key = share_records.decode_key(version, r)
    elif streams_records.is_streams_key_version(version):
        key = streams_records.decode_key(version, r)
    elif version > 2:
        return UnknownKey(version, bytes(data[2:]))
    else:
        raise r.fail(f"negative key version {version}")
    r.end()
    return key


def decode_value(key: object, data: bytes | None) -> object:
    """Decode the value belonging to `key` (the key's type says which schema: a classic value, or a
    KIP-848 or KIP-932 record's); None = tombstone."""
    if data is None:
        return None
    if type(key) is OffsetCommitKey:
        return _decode_offset_commit_value(data)
    if type(key) is GroupMetadataKey:
        return _decode_group_metadata_value(data)
    if type(key) in consumer_records.KEY_TYPES:
        return consumer_records.decode_value(key, data)
    if type(key) in share_records.KEY_TYPES:
        return share_records.decode_value(key, data)
    if type(key) in streams_records.KEY_TYPES:
        return streams_records.decode_value(key, data)
    raise RecordDecodeError(f"no value schema for {key!r}")


def decode_record(key: bytes, value: bytes | None) -> tuple[Key, object]:
    """Decode one `__consumer_offsets` record; values of unknown record types stay raw bytes."""
    k = decode_key(key)
    if type(k) is UnknownKey:
        return k, value
    return k, decode_value(k, value)


def value_version(data: bytes) -> int:
    if len(data) < 2:
        raise RecordDecodeError("value: truncated version")
    return cast(int, _H.unpack_from(data)[0])


def _decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    # Fast path for v3, what Kafka and we write: replay decodes millions of these.
    if type(data) is not bytes:
        data = bytes(data)
    n = len(data)
    if n >= 24 and data[0] == 0 and data[1] == 3:
        _, offset, epoch, mlen = _V3_HEAD.unpack_from(data)
        if 0 <= mlen and 24 + mlen == n:
            try:
                metadata = data[16 : 16 + mlen].decode() if mlen else ""
            except UnicodeDecodeError:
                pass  # the generic reader reports it
            else:
                return OffsetCommitValue(offset, metadata, _Q.unpack_from(data, 16 + mlen)[0], epoch)
    r = RecordReader(data, "OffsetCommitValue")
    version = r.int16()
    if version < 0:
        raise r.fail(f"bad version {version}")
    r.flexible = version >= FLEXIBLE_FROM
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    r.skip_tags()
    r.end()
    return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)


def _decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = RecordReader(data, "GroupMetadataValue")
    version = r.int16()
    if version < 0:
        raise r.fail(f"bad version {version}")
    r.flexible = version >= FLEXIBLE_FROM
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        members.append(
            member_metadata(
                member_id,
                client_id,
                client_host,
                session_timeout,
                subscription,
                assignment,
                rebalance_timeout,
                instance_id,
            )
        )
    r.skip_tags()
    r.end()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, tuple(members), state_ts)
