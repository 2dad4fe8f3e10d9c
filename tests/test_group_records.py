import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    UnknownKey,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
    value_version,
)


def test_offset_commit_key_bytes():
    k = OffsetCommitKey("g", "t", 3)
    raw = encode_key(k)
    assert raw == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(raw) == k
    assert decode_key(b"\x00\x00" + raw[2:]) == k  # v0 has the same layout


def test_group_metadata_key_bytes():
    raw = encode_key(GroupMetadataKey("grp"))
    assert raw == b"\x00\x02\x00\x03grp"
    assert decode_key(raw) == GroupMetadataKey("grp")


def test_unknown_record_type_kept_raw():
    k = decode_key(b"\x00\x09abc")  # 9: a share-group record (3-8 are KIP-848's, decoded)
    assert k == UnknownKey(9, b"abc")
    assert decode_record(b"\x00\x09abc", b"\x00\x00zz") == (k, b"\x00\x00zz")


def test_offset_commit_value_v3_bytes_and_default_versions():
    v = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=7)
    raw = encode_value(v)
    assert raw == (b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 7) + b"\x00\x01m" + struct.pack(">q", 1000))
    assert decode_value(OffsetCommitKey("g", "t", 0), raw) == v
    expiring = OffsetCommitValue(42, "m", 1000, leader_epoch=7, expire_timestamp=5000)
    assert value_version(encode_value(expiring)) == 1  # the only version with expireTimestamp
    assert value_version(encode_value(expiring, 3)) == 3  # asked for: v3, without it
    usual = OffsetCommitValue(offset=42, metadata="", commit_timestamp=1000, leader_epoch=-1)  # one pack
    raw = encode_value(usual)
    assert raw == b"\x00\x03" + struct.pack(">qi", 42, -1) + b"\x00\x00" + struct.pack(">q", 1000)
    assert decode_value(OffsetCommitKey("g", "t", 0), raw) == usual


def test_group_metadata_value_default_v3():
    assert value_version(encode_value(GroupMetadataValue("consumer", 1, "range", "m1"))) == 3


def test_tombstone():
    assert encode_value(None) is None
    assert decode_value(OffsetCommitKey("g", "t", 0), None) is None


def test_flexible_v4_bytes_and_unknown_tags_skipped():
    v = OffsetCommitValue(offset=1, metadata="ab", commit_timestamp=2, leader_epoch=3)
    raw = encode_value(v, 4)
    # compact string: uvarint(len + 1); then an empty tagged-field section
    assert raw == b"\x00\x04" + struct.pack(">qi", 1, 3) + b"\x03ab" + struct.pack(">q", 2) + b"\x00"
    tagged = raw[:-1] + b"\x01" + b"\x05" + b"\x02xy"  # one unknown tag (5) of 2 bytes
    assert decode_value(OffsetCommitKey("g", "t", 0), tagged) == v
    # KIP-915: a newer flexible version is read as the newest known one
    assert decode_value(OffsetCommitKey("g", "t", 0), b"\x00\x05" + raw[2:]) == v


def expected_at(value, version):
    """The value as it reads back after encoding at `version` (absent fields -> defaults)."""
    if isinstance(value, OffsetCommitValue):
        return OffsetCommitValue(
            value.offset,
            value.metadata,
            value.commit_timestamp,
            value.leader_epoch if version >= 3 else -1,
            value.expire_timestamp if version == 1 else -1,
        )
    members = tuple(
        MemberMetadata(
            m.member_id,
            m.client_id,
            m.client_host,
            m.session_timeout,
            m.subscription,
            m.assignment,
            m.rebalance_timeout if version >= 1 else -1,
            m.group_instance_id if version >= 3 else None,
        )
        for m in value.members
    )
    return GroupMetadataValue(
        value.protocol_type,
        value.generation,
        value.protocol,
        value.leader,
        members,
        value.current_state_timestamp if version >= 2 else -1,
    )


text = st.text(max_size=20)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
offset_values = st.builds(OffsetCommitValue, i64, text, i64, i32, i64)
members = st.builds(
    MemberMetadata, text, text, text, i32, st.binary(max_size=30), st.binary(max_size=30), i32, st.none() | text
)
group_values = st.builds(
    GroupMetadataValue, text, i32, st.none() | text, st.none() | text, st.lists(members, max_size=4).map(tuple), i64
)


@settings(max_examples=150, deadline=None)
@given(offset_values, st.integers(0, 4), text, text, i32)
def test_offset_commit_round_trip_every_version(v, version, group, topic, partition):
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_key(key)) == key
    raw = encode_value(v, version)
    assert value_version(raw) == version
    assert decode_value(key, raw) == expected_at(v, version)


@settings(max_examples=150, deadline=None)
@given(group_values, st.integers(0, 4), text)
def test_group_metadata_round_trip_every_version(v, version, group):
    key = GroupMetadataKey(group)
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value(v, version)) == expected_at(v, version)


@settings(max_examples=100, deadline=None)
@given(st.one_of(offset_values, group_values), st.integers(0, 4), st.data())
def test_truncation_always_rejected(v, version, data):
    key = OffsetCommitKey("g", "t", 0) if isinstance(v, OffsetCommitValue) else GroupMetadataKey("g")
    raw = encode_value(v, version)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(RecordDecodeError):
        decode_value(key, raw[:cut])
    with pytest.raises(RecordDecodeError):
        decode_value(key, raw + b"\x00")  # trailing garbage


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
def test_garbage_raises_clearly_or_decodes(data):
    for key in (OffsetCommitKey("g", "t", 0), GroupMetadataKey("g")):
        try:
            decode_value(key, data)
        except RecordDecodeError:
            pass
    try:
        decode_key(data)
    except RecordDecodeError:
        pass


def test_huge_declared_lengths_fail_fast():
    with pytest.raises(RecordDecodeError, match="truncated"):
        decode_key(b"\x00\x01\x7f\xff")
    with pytest.raises(RecordDecodeError, match="array length"):
        decode_value(
            GroupMetadataKey("g"),
            b"\x00\x03\x00\x00"
            + struct.pack(">i", 1)
            + b"\xff\xff\xff\xff"
            + struct.pack(">q", 0)
            + struct.pack(">i", 2**31 - 1),
        )


def test_share_group_state_partition_metadata_bytes():
    """Record type 15 (Kafka 4.2's ShareGroupStatePartitionMetadata): key version 15 and the
    group id; value version 0, flexible: InitializingTopics, InitializedTopics (id, name,
    partitions), DeletingTopics (id, name)."""
    import uuid

    from protocol import share_records as SR
    from protocol.group_records import decode_record

    t, u = uuid.UUID(int=1), uuid.UUID(int=2)
    key = SR.ShareGroupStatePartitionMetadataKey("g")
    value = SR.ShareGroupStatePartitionMetadataValue((), ((t, "t", (0, 1)),), ((u, "u"),))
    kb, vb = SR.encode_key(key), SR.encode_value(value)
    assert kb == struct.pack(">hh", 15, 1) + b"g"
    assert vb == (
        struct.pack(">h", 0)
        + b"\x01"  # no initializing topics
        + b"\x02"
        + t.bytes
        + b"\x02t"
        + b"\x03"
        + struct.pack(">ii", 0, 1)
        + b"\x00"
        + b"\x02"
        + u.bytes
        + b"\x02u"
        + b"\x00"
        + b"\x00"
    )
    assert decode_record(kb, vb) == (key, value)
    assert decode_record(kb, None) == (key, None)


@pytest.mark.parametrize("kind", ["ConsumerGroup", "ShareGroup"])
def test_assignment_timestamp_is_kafkas_tagged_field(kind):
    """{Consumer,Share}GroupTargetAssignmentMetadataValue's AssignmentTimestamp (Kafka 4.3,
    KIP-1263): tagged field 0, written only when not its default 0."""
    from protocol import consumer_records, share_records

    R = consumer_records if kind == "ConsumerGroup" else share_records
    key = getattr(R, f"{kind}TargetAssignmentMetadataKey")("g")
    Value = getattr(R, f"{kind}TargetAssignmentMetadataValue")
    value = Value(7, 1_764_150_000_123)
    raw = R.encode_value(value)
    # version 0, AssignmentEpoch, one tagged field: tag 0, 8 bytes, the int64
    assert raw == struct.pack(">hi", 0, 7) + bytes([1, 0, 8]) + struct.pack(">q", 1_764_150_000_123)
    assert R.decode_value(key, raw) == value
    # At its default (0, an older Kafka's record) no tag is written, and such a record reads as 0.
    assert R.encode_value(Value(7)) == struct.pack(">hi", 0, 7) + b"\0"
    assert R.decode_value(key, struct.pack(">hi", 0, 7) + b"\0").assignment_timestamp == 0
    # An unknown tag beside it is skipped; a timestamp of the wrong size is refused.
    assert R.decode_value(key, raw[:6] + bytes([2]) + raw[7:] + bytes([5, 1, 9])) == value
    with pytest.raises(RecordDecodeError):
        R.decode_value(key, struct.pack(">hi", 0, 7) + bytes([1, 0, 4]) + b"\0\0\0\1")
