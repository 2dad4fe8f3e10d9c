"""protocol/offset_commit.py against independent encoders: kio (v2-v9, from Kafka's JSON
schemas) and aiokafka's retired v0/v1 classes, for requests; kio for responses."""

import io

import pytest
from aiokafka.protocol.commit import OffsetCommitRequest_v0, OffsetCommitRequest_v1
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from tests.support.wire_client import request_class
from coordinator.apis import RequestContext
from protocol.messages import MalformedRequest, RequestHeader, codec, encode_body, encode_uvarint
from protocol.offset_commit import (
    PartitionCommit,
    _read,
    _read_compact,
    read_offset_commit,
    resolve_topic_ids,
    write_offset_commit_response,
    write_response_to,
)

names = st.text(max_size=20) | st.text(min_size=40, max_size=80)  # compact lengths of one byte, or more
partitions = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1), st.none() | names),
    max_size=4,
)
topics = st.lists(st.tuples(names, partitions), max_size=3)


def kio_body(version, group, generation, member, instance, retention, topics) -> bytes:
    req, topic_cls, part_cls = (
        request_class(8, version, n) for n in (None, "OffsetCommitRequestTopic", "OffsetCommitRequestPartition")
    )
    fields = dict(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        topics=tuple(
            topic_cls(
                name=name,
                partitions=tuple(
                    part_cls(
                        partition_index=p,
                        committed_offset=o,
                        committed_metadata=m,
                        **({"committed_leader_epoch": e} if version >= 6 else {}),
                    )
                    for p, o, e, m in parts
                ),
            )
            for name, parts in topics
        ),
    )
    if version >= 7:
        fields["group_instance_id"] = instance
    if 2 <= version <= 4:
        import datetime

        fields["retention_time"] = datetime.timedelta(milliseconds=retention)
    out = io.BytesIO()
    entity_writer(req)(out, req(**fields))
    return out.getvalue()


@settings(max_examples=60, deadline=None)
@given(
    group=names,
    generation=st.integers(-1, 2**31 - 1),
    member=names,
    instance=st.none() | names,
    retention=st.integers(-1, 10**9),
    topics=topics,
)
def test_reads_what_kio_writes(group, generation, member, instance, retention, topics):
    for version in range(2, 10):
        body = b"\xaa" + kio_body(version, group, generation, member, instance, retention, topics)
        req = read_offset_commit(body, 1, version)
        assert (req.group_id, req.generation, req.member_id) == (group, generation, member)
        assert req.instance_id == (instance if version >= 7 else None)
        assert req.retention_ms == (retention if 2 <= version <= 4 else -1)
        assert req.partitions == [
            PartitionCommit(name, p, o, e if version >= 6 else -1, m) for name, parts in topics for p, o, e, m in parts
        ]
        assert req.topics == [(name, len(parts)) for name, parts in topics]
        errors = list(range(len(req.partitions)))
        assert write_response_to(req, version, errors) == write_offset_commit_response(
            version, [(name, [(p, errors.pop(0)) for p, *_ in parts]) for name, parts in topics]
        )


@settings(max_examples=100, deadline=None)
@given(
    group=names,
    generation=st.integers(-1, 2**31 - 1),
    member=names,
    instance=st.none() | names,
    topics=topics,
    tail=st.binary(max_size=3),
)
def test_compact_fast_path_reads_what_the_general_reader_reads(group, generation, member, instance, topics, tail):
    """v8+ bodies with one-byte lengths take the inline reader; it must agree with _read()
    or decline (None), for whole bodies, cut ones and ones with trailing bytes."""
    for version in (8, 9):
        body = kio_body(version, group, generation, member, instance, -1, topics)
        fast = _read_compact(body, 0)
        short = all(
            len(s.encode()) <= 126
            for s in [group, member, instance or ""]
            + [n for n, _ in topics]
            + [m or "" for _, ps in topics for *_, m in ps]
        )
        assert (fast is not None) == short
        if fast is not None:
            assert fast == _read(body, 0, version)
        for cut in range(len(body)):
            assert _read_compact(body[:cut], 0) is None  # truncated: left to _read's error
        fast = _read_compact(body + tail, 0)
        if fast is not None:
            assert fast == _read(body + tail, 0, version)


@settings(max_examples=60, deadline=None)
@given(
    topics=st.lists(
        st.tuples(
            st.text(max_size=20),  # one-byte lengths: the compact reader's case
            st.lists(
                st.tuples(
                    st.integers(0, 2**31 - 1),
                    st.integers(-1, 2**63 - 1),
                    st.integers(-1, 2**31 - 1),
                    st.just("") | st.just("") | st.none() | st.just("m"),
                ),
                max_size=12,
            ),
        ),
        max_size=3,
    )
)
def test_compact_reader_runs_of_empty_metadata(topics):
    """A topic whose partitions all have empty metadata and no tagged fields (what clients
    send) is read as one run of fixed-size entries; a topic with any other partition, a cut
    body and a body with a tagged field on its last partition are read as _read() reads them."""
    for version in (8, 9):
        body = kio_body(version, "g", -1, "", None, -1, topics)
        assert _read_compact(body, 0) == _read(body, 0, version)
        for cut in range(len(body)):
            assert _read_compact(body[:cut], 0) is None
    if topics and topics[-1][1]:
        body = kio_body(9, "g", -1, "", None, -1, topics)
        # The last partition's tagged fields (then the topic's, then the request's) end the
        # body: give it one tagged field (tag 0, one byte) instead of none.
        tagged = body[:-3] + bytes((1, 0, 1, 7)) + body[-2:]
        assert _read_compact(tagged, 0) is None  # left to _read, which skips it
        assert _read(tagged, 0, 9).partitions == _read(body, 0, 9).partitions


def test_reads_retired_v0_and_v1():
    body = OffsetCommitRequest_v0("g", [("t", [(0, 42, "zk"), (3, 7, None)])]).encode()
    req = read_offset_commit(body, 0, 0)
    assert (req.group_id, req.generation, req.member_id) == ("g", -1, "")
    assert req.partitions == [PartitionCommit("t", 0, 42, -1, "zk"), PartitionCommit("t", 3, 7, -1, None)]
    body = OffsetCommitRequest_v1("g", 5, "m", [("t", [(1, 43, 1_700_000_000_000, "v1")])]).encode()
    req = read_offset_commit(body, 0, 1)
    assert (req.generation, req.member_id) == (5, "m")
    assert req.partitions == [PartitionCommit("t", 1, 43, -1, "v1")]  # v1's timestamp is ignored


def test_unknown_tagged_fields_are_skipped():
    tag = encode_uvarint(1) + encode_uvarint(99) + encode_uvarint(3) + b"xyz"  # one field, tag 99
    body = (
        b"\x02g"
        + (5).to_bytes(4, "big")
        + b"\x02m"
        + b"\x00"  # group, generation, member, null instance
        + b"\x02"
        + b"\x02t"
        + b"\x02"  # one topic "t", one partition
        + (0).to_bytes(4, "big")
        + (9).to_bytes(8, "big")
        + (-1).to_bytes(4, "big", signed=True)
        + b"\x01"
        + tag
        + tag
        + tag
    )
    req = read_offset_commit(body, 0, 9)
    assert req.partitions == [PartitionCommit("t", 0, 9, -1, "")] and req.topics == [("t", 1)]


@pytest.mark.parametrize("version", [0, 1, 5, 8, 9])
def test_every_truncation_is_a_malformed_request(version):
    body = kio_body(max(version, 2), "group", 1, "member", "inst", 5, [("topic", [(0, 1, 2, "md"), (1, 2, 3, None)])])
    if version < 2:
        cls = OffsetCommitRequest_v0 if version == 0 else OffsetCommitRequest_v1
        parts = [(0, 1, "md"), (1, 2, None)] if version == 0 else [(0, 1, -1, "md"), (1, 2, -1, None)]
        body = (
            cls("group", [("topic", parts)]) if version == 0 else cls("group", 1, "member", [("topic", parts)])
        ).encode()
    read_offset_commit(body, 0, version)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequest):
            read_offset_commit(body[:cut], 0, version)


@pytest.mark.parametrize("version", [2, 8])
def test_forged_counts_fail_fast(version):
    flexible = version >= 8
    head = (b"\x02g" if flexible else b"\x00\x01g") + (1).to_bytes(4, "big") + (b"\x01" if flexible else b"\x00\x00")
    if version == 2:
        head += (-1).to_bytes(8, "big", signed=True)
    huge = encode_uvarint(2**32 - 1) if flexible else (2**31 - 1).to_bytes(4, "big")
    with pytest.raises(MalformedRequest):
        read_offset_commit(head + huge + b"\x00" * 8, 0, version)
    null = b"\x00" if flexible else (-1).to_bytes(4, "big", signed=True)
    with pytest.raises(MalformedRequest):
        read_offset_commit(head + null, 0, version)


def test_invalid_utf8_is_a_malformed_request():
    with pytest.raises(MalformedRequest):
        read_offset_commit(b"\x03\xff\xfe", 0, 8)


@pytest.mark.parametrize("version", range(10))
def test_response_matches_kio(version):
    c = codec(8, version)
    ctx = RequestContext(RequestHeader(8, version, 1, "c"), c, "h", None)
    topics = [("orders", [(0, 0), (7, 25), (200_000, 12)]), ("", []), ("ü" * 70, [(1, 0)])]
    expected = encode_body(
        c,
        ctx.response(
            throttle_time=0,
            topics=tuple(
                ctx.nested(
                    "OffsetCommitResponseTopic",
                    name=name,
                    partitions=tuple(
                        ctx.nested("OffsetCommitResponsePartition", partition_index=p, error_code=e) for p, e in parts
                    ),
                )
                for name, parts in topics
            ),
        ),
    )
    assert write_offset_commit_response(version, topics) == expected
    assert write_offset_commit_response(version, []) == encode_body(c, ctx.response(throttle_time=0, topics=()))


@settings(max_examples=60, deadline=None)
@given(
    group=names,
    generation=st.integers(-1, 2**31 - 1),
    member=names,
    instance=st.none() | names,
    topics=st.lists(st.tuples(st.uuids(), partitions), max_size=3),
)
def test_v10_names_topics_by_id(group, generation, member, instance, topics):
    """v10 (Kafka 4.1) sends topic ids where names were: read as ids, resolved to the names
    known (an unknown id stays), answered by id."""
    req_cls, topic_cls, part_cls = (
        request_class(8, 10, n) for n in (None, "OffsetCommitRequestTopic", "OffsetCommitRequestPartition")
    )
    out = io.BytesIO()
    entity_writer(req_cls)(
        out,
        req_cls(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member,
            group_instance_id=instance,
            topics=tuple(
                topic_cls(
                    topic_id=t,
                    partitions=tuple(
                        part_cls(partition_index=p, committed_offset=o, committed_leader_epoch=e, committed_metadata=m)
                        for p, o, e, m in parts
                    ),
                )
                for t, parts in topics
            ),
        ),
    )
    req = read_offset_commit(out.getvalue(), 0, 10)
    assert req.topics == [(t, len(parts)) for t, parts in topics] and req.topic_ids is None
    assert req.partitions == [PartitionCommit(t, p, o, e, m) for t, parts in topics for p, o, e, m in parts]
    known = {t: f"topic-{i}" for i, (t, _) in enumerate(topics) if i % 2 == 0}
    named = resolve_topic_ids(req, known.get)
    assert named.topics == [(known.get(t, t), n) for t, n in req.topics]
    assert [p.topic for p in named.partitions] == [known.get(p.topic, p.topic) for p in req.partitions]
    errors = list(range(len(req.partitions)))
    expected = [(t, [(p, errors.pop(0)) for p, *_ in parts]) for t, parts in topics]
    assert write_response_to(named, 10, list(range(len(req.partitions)))) == write_offset_commit_response(10, expected)
    for cut in range(len(out.getvalue())):
        with pytest.raises(MalformedRequest):
            read_offset_commit(out.getvalue()[:cut], 0, 10)


def test_v10_response_matches_kio():
    import uuid

    c = codec(8, 10)
    ctx = RequestContext(RequestHeader(8, 10, 1, "c"), c, "h", None)
    topics = [(uuid.uuid4(), [(0, 0), (7, 100)]), (uuid.uuid4(), [])]
    expected = encode_body(
        c,
        ctx.response(
            throttle_time=0,
            topics=tuple(
                ctx.nested(
                    "OffsetCommitResponseTopic",
                    topic_id=t,
                    partitions=tuple(
                        ctx.nested("OffsetCommitResponsePartition", partition_index=p, error_code=e) for p, e in parts
                    ),
                )
                for t, parts in topics
            ),
        ),
    )
    assert write_offset_commit_response(10, topics) == expected
