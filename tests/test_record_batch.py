import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.record_batch import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CorruptBatch,
    Record,
    TruncatedBatch,
    build_batch,
    build_batch_from,
    iter_batches,
    iter_records,
    parse_header,
    set_base_offset,
)
from crc32c import crc32c

TS = 1_700_000_000_000


def golden_batch() -> bytes:
    """One record (b"key", b"value") at offset 0, laid out by hand from the v2 spec."""
    record_body = (
        b"\x00"  # record attributes
        b"\x00"  # timestampDelta varint 0
        b"\x00"  # offsetDelta varint 0
        b"\x06"
        b"key"  # key length zigzag(3) = 6
        b"\x0a"
        b"value"  # value length zigzag(5) = 10
        b"\x00"  # header count 0
    )
    record = bytes([len(record_body) * 2]) + record_body  # length zigzag(14) = 28
    after_crc = struct.pack(">hiqqqhii", 0, 0, TS, TS, -1, -1, -1, 1) + record
    crc = 0xDB5E9CDD  # CRC-32C of after_crc, computed independently (aiokafka's pure-Python crc)
    return struct.pack(">qiibI", 0, 49 + len(record), -1, 2, crc) + after_crc


def test_crc32c_reference_vector():
    assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value


def test_golden_bytes():
    gold = golden_batch()
    assert crc32c(gold[21:]) == 0xDB5E9CDD
    assert build_batch([(b"key", b"value")], timestamp_ms=TS) == gold
    h = parse_header(gold)
    assert h.crc == 0xDB5E9CDD and h.batch_length == 64 and h.size == len(gold) == 76
    assert h.record_count == 1 and h.next_offset == 1 and h.magic == 2
    assert list(iter_records(gold)) == [Record(0, TS, b"key", b"value", [])]


def test_header_fields_and_offsets():
    b = build_batch(
        [(b"a", b"1"), (None, b"2"), (b"c", None)],
        timestamp_ms=TS,
        base_offset=40,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        partition_leader_epoch=5,
    )
    h = parse_header(b)
    assert (h.base_offset, h.last_offset_delta, h.record_count) == (40, 2, 3)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, 11)
    assert h.partition_leader_epoch == 5 and h.first_timestamp == h.max_timestamp == TS
    assert [(r.offset, r.key, r.value) for r in iter_records(b)] == [
        (40, b"a", b"1"),
        (41, None, b"2"),
        (42, b"c", None),
    ]


def test_set_base_offset_keeps_crc_valid():
    b = bytearray(build_batch([(b"k", b"v")] * 3, timestamp_ms=TS))
    set_base_offset(b, 0, 1234)
    h = parse_header(b)  # CRC still verifies
    assert h.base_offset == 1234 and h.last_offset == 1236
    assert [r.offset for r in iter_records(b)] == [1234, 1235, 1236]


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_compression_round_trip(codec):
    recs = [(b"key%d" % i, b"value" * 50) for i in range(20)]
    b = build_batch(recs, timestamp_ms=TS, base_offset=100, compression=codec, headers=[("h", b"x")])
    h = parse_header(b)
    assert h.compression == codec and h.record_count == 20
    assert [(r.offset, r.key, r.value, r.headers) for r in iter_records(b)] == [
        (100 + i, k, v, [("h", b"x")]) for i, (k, v) in enumerate(recs)
    ]


def test_build_from_with_gaps_and_kept_last_offset():
    recs = [Record(10, TS, b"a", b"1", []), Record(13, TS + 5, b"b", b"2", [])]
    b = build_batch_from(recs, base_offset=10, last_offset_delta=6)
    h = parse_header(b)
    assert h.next_offset == 17 and h.record_count == 2 and h.max_timestamp == TS + 5
    assert list(iter_records(b)) == recs


def test_multiple_batches_and_iter_batches():
    b1 = build_batch([(b"a", b"1")], timestamp_ms=TS, base_offset=0)
    b2 = build_batch([(b"b", b"2"), (b"c", b"3")], timestamp_ms=TS, base_offset=1)
    buf = b1 + b2
    assert [(p, h.base_offset) for p, h in iter_batches(buf)] == [(0, 0), (len(b1), 1)]
    assert [r.offset for r in iter_records(buf)] == [0, 1, 2]


def test_corruption_detected():
    good = build_batch([(b"k", b"v")], timestamp_ms=TS)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptBatch, match="CRC"):
        parse_header(bad_crc)
    parse_header(bad_crc, verify_crc=False)  # header itself still parses
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    with pytest.raises(CorruptBatch, match="magic"):
        parse_header(bad_magic)
    bad_len = bytearray(good)
    struct.pack_into(">i", bad_len, 8, 10)
    with pytest.raises(CorruptBatch, match="length"):
        parse_header(bad_len)
    for cut in (0, 5, 12, 60, len(good) - 1):
        with pytest.raises(TruncatedBatch):
            parse_header(good[:cut])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200)), min_size=1, max_size=30
    ),
    st.integers(0, 2**40),
    st.sampled_from([NONE, GZIP, ZSTD]),
)
def test_round_trip_property(recs, base, codec):
    b = build_batch(recs, timestamp_ms=TS, base_offset=base, compression=codec)
    assert [(r.offset, r.key, r.value) for r in iter_records(b)] == [(base + i, k, v) for i, (k, v) in enumerate(recs)]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_garbage_never_hangs(data):
    try:
        list(iter_records(data))
    except CorruptBatch:
        pass
