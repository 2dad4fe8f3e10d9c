"""Unit tests of the sans-IO wire layer: framing, request headers, bodies of every served version.

Oracles: kafka-python 3.0 (its own code generated from Kafka's JSON schemas) and aiokafka's
hand-written protocol classes (old versions only) are independent of kio, which our codec
uses. Flexible versions are also checked against bytes built by hand from the schemas in
/work/shared/kafka-schemas/client/.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import (
    ApiVersionsRequest as KpApiVersionsRequest,
    ApiVersionsResponse as KpApiVersionsResponse,
    FindCoordinatorRequest as KpFindCoordinatorRequest,
    FindCoordinatorResponse as KpFindCoordinatorResponse,
    MetadataRequest as KpMetadataRequest,
    MetadataResponse as KpMetadataResponse,
)

from coordinator.apis import RequestContext, build, nested_type, new_context
from protocol.framing import FrameDecoder, FrameError, frame
from protocol.messages import (
    MalformedRequest,
    RequestHeader,
    UnknownApi,
    codec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
)

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10
SERVED = {API_VERSIONS: range(0, 5), METADATA: range(0, 13), FIND_COORDINATOR: range(0, 7)}
ALL_SERVED = [(k, v) for k, vs in SERVED.items() for v in vs]


# --- hand-built primitives (names follow the protocol guide) ------------------------------


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def boolean(v):
    return b"\x01" if v else b"\x00"


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def string(s: str | None) -> bytes:  # STRING / NULLABLE_STRING: int16 length
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def compact_string(s: str | None) -> bytes:  # COMPACT_(NULLABLE_)STRING: uvarint length + 1
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def compact_array(items: list[bytes] | None) -> bytes:
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def header_v1(key, version, corr, client_id="cid") -> bytes:
    return i16(key) + i16(version) + i32(corr) + string(client_id)


def header_v2(key, version, corr, client_id="cid", tags=NO_TAGS) -> bytes:
    # The client id stays a non-compact STRING even in header v2.
    return header_v1(key, version, corr, client_id) + tags


# --- framing ------------------------------------------------------------------------------


def test_frame_decoder_whole_split_and_multiple_frames():
    d = FrameDecoder()
    assert d.feed(frame(b"abc")) == [b"abc"]
    data = frame(b"hello") + frame(b"") + frame(b"world!")
    # one byte at a time: frames come out exactly when complete
    out = []
    for i in range(len(data)):
        out += d.feed(data[i : i + 1])
    assert out == [b"hello", b"", b"world!"]
    assert d.buffered == 0
    # several frames and a partial one in a single chunk
    assert d.feed(frame(b"x") + frame(b"yy") + frame(b"zzz")[:5]) == [b"x", b"yy"]
    assert d.buffered == 5
    assert d.feed(frame(b"zzz")[5:]) == [b"zzz"]
    assert d.buffered == 0


def test_frame_decoder_large_frame_in_chunks_then_more_frames():
    d = FrameDecoder()
    big = bytes(range(256)) * 4096  # 1 MiB
    data = frame(big) + frame(b"after") + frame(b"last")[:3]
    out = []
    for i in range(0, len(data), 1000):
        out += d.feed(data[i : i + 1000])
    assert out == [big, b"after"] and all(type(f) is bytes for f in out)
    assert d.buffered == 3
    assert d.feed(frame(b"last")[3:]) == [b"last"] and d.buffered == 0


def test_frame_decoder_large_produce_frame_read_in_place_then_more_frames():
    """A Produce frame of a MiB or more arriving in parts is filled in place (handed out as
    the bytearray it was read into); the frames after it in its last chunk follow it."""
    d = FrameDecoder()
    big = b"\x00\x00" + bytes(range(256)) * 4096  # api key 0: Produce
    data = frame(big) + frame(b"after") + frame(b"last")[:3]
    out = []
    for i in range(0, len(data), 1000):
        out += d.feed(data[i : i + 1000])
    assert out == [big, b"after"] and type(out[0]) is bytearray
    assert d.buffered == 3
    assert d.feed(frame(b"last")[3:]) == [b"last"] and d.buffered == 0


@given(st.lists(st.binary(max_size=40), max_size=8), st.lists(st.integers(0, 400), max_size=10))
def test_frame_decoder_any_split_gives_the_same_frames(payloads, cuts):
    data = b"".join(frame(p) for p in payloads)
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    d = FrameDecoder()
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out += d.feed(data[a:b])
    assert out == payloads and d.buffered == 0


def test_frame_decoder_partial_size_prefix():
    d = FrameDecoder()
    f = frame(b"payload")
    assert d.feed(f[:2]) == []
    assert d.feed(f[2:3]) == []
    assert d.feed(f[3:]) == [b"payload"]


def test_frame_decoder_negative_size():
    with pytest.raises(FrameError, match="negative"):
        FrameDecoder().feed(i32(-1) + b"whatever")


def test_frame_decoder_over_limit_raises_before_the_body_arrives():
    d = FrameDecoder(max_frame_bytes=1000)
    assert d.feed(frame(b"x" * 1000)) == [b"x" * 1000]  # the limit itself is allowed
    with pytest.raises(FrameError, match="exceeds"):
        d.feed(i32(1001))  # only the size prefix: no body was sent
    with pytest.raises(FrameError):
        FrameDecoder().feed(i32(2**31 - 1))


# --- request header -----------------------------------------------------------------------


def test_header_v1_with_client_id():
    h, pos = read_request_header(header_v1(3, 4, 77, "my-client") + b"BODY")
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 4, 77, "my-client")
    assert pos == 10 + len("my-client")


def test_header_null_and_empty_client_id():
    h, pos = read_request_header(header_v1(3, 0, -5, None))
    assert h.client_id is None and h.correlation_id == -5 and pos == 10
    h, pos = read_request_header(header_v1(3, 0, 1, ""))
    assert h.client_id == "" and pos == 10


def test_header_v2_tagged_fields_are_skipped():
    tags = uvarint(2) + uvarint(0) + uvarint(3) + b"abc" + uvarint(200) + uvarint(1) + b"z"
    raw = header_v2(18, 3, 9, "cid", tags=tags)
    h, pos = read_request_header(raw + b"BODY", flexible=True)
    assert h.client_id == "cid" and raw + b"BODY" == (raw + b"BODY")[:pos] + b"BODY"
    # with a body after them, the whole request still decodes
    body = compact_string("kafka-python") + compact_string("3.0.12") + NO_TAGS
    header, req = decode_request(raw + body)
    assert header.correlation_id == 9
    assert (req.client_software_name, req.client_software_version) == ("kafka-python", "3.0.12")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        i16(18) + i16(0) + i32(1),  # 8 bytes: no client id length
        header_v1(18, 0, 1, None)[:9],  # 9 bytes
        i16(18) + i16(0) + i32(1) + i16(5) + b"ab",  # client id cut short
        i16(18) + i16(0) + i32(1) + i16(-2),  # negative length other than -1
        i16(18) + i16(0) + i32(1) + i16(2) + b"\xff\xfe",  # not UTF-8
    ],
    ids=["empty", "8-bytes", "9-bytes", "short-client-id", "length-minus-2", "bad-utf8"],
)
def test_bad_headers_raise_malformed(raw):
    with pytest.raises(MalformedRequest):
        read_request_header(raw)
    with pytest.raises((MalformedRequest, UnknownApi)):
        decode_request(raw)


@pytest.mark.parametrize(
    "tags",
    [uvarint(1), uvarint(1) + uvarint(0) + uvarint(10) + b"abc", b"\x80"],
    ids=["count-without-field", "field-longer-than-frame", "truncated-varint"],
)
def test_truncated_header_tagged_fields(tags):
    with pytest.raises(MalformedRequest):
        read_request_header(header_v2(18, 3, 1, "c", tags=tags), flexible=True)


# --- requests: kafka-python encodes, we decode ---------------------------------------------


def kp_frame(msg, corr: int, client_id: str | None = "kp-client") -> bytes:
    msg.with_header(correlation_id=corr, client_id=client_id)
    data = bytes(msg.encode(header=True, framed=True))
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    return data[4:]


def kp_metadata_request(v: int, topics: list[str] | None):
    T = KpMetadataRequest.MetadataRequestTopic
    return KpMetadataRequest[v](
        topics=None if topics is None else [T(name=t, version=v) for t in topics],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )


@pytest.mark.parametrize("v", SERVED[API_VERSIONS])
def test_api_versions_request_from_kafka_python(v):
    kw = {"client_software_name": "kafka-python", "client_software_version": "3.0.12"} if v >= 3 else {}
    header, req = decode_request(kp_frame(KpApiVersionsRequest[v](**kw), corr=1000 + v))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        18,
        v,
        1000 + v,
        "kp-client",
    )
    if v >= 3:
        assert (req.client_software_name, req.client_software_version) == ("kafka-python", "3.0.12")


@pytest.mark.parametrize("v", SERVED[METADATA])
def test_metadata_request_from_kafka_python(v):
    header, req = decode_request(kp_frame(kp_metadata_request(v, ["t1", "t2"]), corr=v, client_id=None))
    assert (header.api_key, header.api_version, header.client_id) == (3, v, None)
    assert [t.name for t in req.topics] == ["t1", "t2"]
    if v >= 4:
        assert req.allow_auto_topic_creation is False
    if 8 <= v <= 10:
        assert req.include_cluster_authorized_operations is True
    if v >= 8:
        assert req.include_topic_authorized_operations is True
    if v >= 1:  # null = all topics (v0 has no null: an empty list means all)
        _, req = decode_request(kp_frame(kp_metadata_request(v, None), corr=v))
        assert req.topics is None
    _, req = decode_request(kp_frame(kp_metadata_request(v, []), corr=v))
    assert req.topics == ()


@pytest.mark.parametrize("v", SERVED[FIND_COORDINATOR])
def test_find_coordinator_request_from_kafka_python(v):
    if v < 4:
        kw = {"key": "my-group"} | ({"key_type": 1} if v >= 1 else {})
    else:
        kw = {"key_type": 1, "coordinator_keys": ["g1", "", "g3"]}
    header, req = decode_request(kp_frame(KpFindCoordinatorRequest[v](**kw), corr=-7))
    assert (header.api_key, header.api_version, header.correlation_id) == (10, v, -7)
    if v < 4:
        assert req.key == "my-group"
    else:
        assert list(req.coordinator_keys) == ["g1", "", "g3"]
    if v >= 1:
        assert req.key_type == 1


# --- requests: aiokafka (hand-written, old versions) encodes, we decode ----------------------


def aio_frame(struct_obj, corr: int, client_id: str = "aiokafka") -> bytes:
    return struct_obj.build_request_header(corr, client_id).encode() + struct_obj.encode()


def test_requests_from_aiokafka():
    from aiokafka.protocol.admin import ApiVersionRequest_v0, ApiVersionRequest_v1, ApiVersionRequest_v2
    from aiokafka.protocol.coordination import FindCoordinatorRequest_v0, FindCoordinatorRequest_v1
    from aiokafka.protocol import metadata as am

    for v, cls in enumerate([ApiVersionRequest_v0, ApiVersionRequest_v1, ApiVersionRequest_v2]):
        h, _ = decode_request(aio_frame(cls(), corr=v))
        assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (18, v, v, "aiokafka")
    for v in range(6):
        cls = getattr(am, f"MetadataRequest_v{v}")
        args = (["a", "b"], False) if v >= 4 else (["a", "b"],)
        h, req = decode_request(aio_frame(cls(*args), corr=50 + v))
        assert (h.api_version, h.correlation_id) == (v, 50 + v)
        assert [t.name for t in req.topics] == ["a", "b"]
        if v >= 4:
            assert req.allow_auto_topic_creation is False
    _, req = decode_request(aio_frame(FindCoordinatorRequest_v0("grp"), corr=1))
    assert req.key == "grp"
    _, req = decode_request(aio_frame(FindCoordinatorRequest_v1("grp", 0), corr=1))
    assert (req.key, req.key_type) == ("grp", 0)


# --- requests: we encode (client direction), kafka-python decodes ------------------------------


@pytest.mark.parametrize("v", SERVED[FIND_COORDINATOR])
def test_our_find_coordinator_request_read_by_kafka_python(v):
    c = codec(FIND_COORDINATOR, v)
    fields = {"key": "grp", "key_type": 0} if v < 4 else {"key_type": 0, "coordinator_keys": ("a", "b")}
    data = encode_request(FIND_COORDINATOR, v, 31, "ours", build(c.request_type, fields))
    msg = KpFindCoordinatorRequest.decode(data, version=v, header=True, framed=True)
    assert (msg.header.correlation_id, msg.header.client_id) == (31, "ours")
    assert (msg.key if v < 4 else list(msg.coordinator_keys)) == ("grp" if v < 4 else ["a", "b"])


# --- responses: we encode, kafka-python decodes ------------------------------------------------


def test_new_context_is_the_dataclass_built_with_its_defaults():
    header = RequestHeader(3, 12, 7, "client")
    c = codec(METADATA, 12)
    made = new_context(header, c, "127.0.0.1", None, 42)
    assert made == RequestContext(header, c, "127.0.0.1", None, size=42)  # (every field compared: none left unset)


def _response_entities() -> list[type]:
    """A response class of kio's (with the nested entity classes) for each distinct shape."""
    from kio.index import load_payload_module
    from kio.schema.index import api_key_map, schema_name_map
    from kio.static.constants import EntityType

    shapes: dict[tuple, type] = {}  # (a class per shape: versions repeat most of their classes)
    for key, name in sorted(api_key_map.items()):
        for version in sorted(schema_name_map.get(name, {})):
            module = load_payload_module(key, version, EntityType.response)
            for v in vars(module).values():
                if isinstance(v, type) and hasattr(v, "__dataclass_fields__"):
                    shape = tuple(
                        (f.name, str(f.type), f.default, f.default_factory, tuple(f.metadata.items()))
                        for f in dataclasses.fields(v)
                    )
                    shapes.setdefault(shape, v)
    return list(shapes.values())


@functools.cache
def records_drawn_small() -> None:
    """Record sets drawn as none or a few bytes (kio registers no strategy for them), from the
    first example on, once in this process: a registration clears hypothesis' whole strategy
    cache, so registering at every example had every example build its strategies again."""
    from kio.static.primitive import Records

    st.register_type_strategy(Records, st.none() | st.binary(max_size=8))


@pytest.mark.slow  # hypothesis values for every response class of every version
@pytest.mark.parametrize(
    "cls", _response_entities(), ids=lambda c: ".".join([*c.__module__.split(".")[2:4], c.__name__])
)
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_build_makes_the_entity_its_constructor_makes(cls, data):
    """build() sets the slots itself: the same entity as the dataclass constructor, with the
    defaults of the fields left out and error codes given as ints typed."""
    records_drawn_small()
    entity = data.draw(st.from_type(cls))
    values = {f.name: getattr(entity, f.name) for f in dataclasses.fields(cls)}
    given_fields = {
        k: v
        for k, v in values.items()
        if data.draw(st.booleans()) or cls.__dataclass_fields__[k].default is dataclasses.MISSING
    }
    as_ints = {
        k: int(v) if cls.__dataclass_fields__[k].metadata.get("kafka_type") == "error_code" else v
        for k, v in given_fields.items()
    }
    built = build(cls, {**as_ints, "not_a_field": 1})
    assert built == cls(**given_fields)
    assert type(built) is cls


def our_metadata_response(v: int):
    c = codec(METADATA, v)
    R = c.response_type
    P, T, B = (
        nested_type(R, n) for n in ("MetadataResponsePartition", "MetadataResponseTopic", "MetadataResponseBroker")
    )
    part = build(
        P,
        dict(
            error_code=0,
            partition_index=3,
            leader_id=1,
            leader_epoch=7,
            replica_nodes=(1,),
            isr_nodes=(1,),
            offline_replicas=(),
        ),
    )
    topic = build(T, dict(error_code=0, name="t1", topic_id=uuid.UUID(int=12345), is_internal=True, partitions=(part,)))
    broker = build(B, dict(node_id=1, host="broker.example", port=9092, rack=None))
    return c, build(R, dict(throttle_time=5, brokers=(broker,), cluster_id="cl-1", controller_id=1, topics=(topic,)))


@pytest.mark.parametrize("v", SERVED[METADATA])
def test_metadata_response_read_by_kafka_python(v):
    c, body = our_metadata_response(v)
    resp = KpMetadataResponse.decode(encode_response(c, 4242, body), version=v, header=True, framed=True)
    assert resp.header.correlation_id == 4242
    b = resp.brokers[0]
    assert (b.node_id, b.host, b.port) == (1, "broker.example", 9092)
    t = resp.topics[0]
    assert (t.error_code, t.name, len(t.partitions)) == (0, "t1", 1)
    p = t.partitions[0]
    assert (p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == (3, 1, [1], [1])
    if v >= 1:
        assert resp.controller_id == 1 and t.is_internal is True
    if v >= 2:
        assert resp.cluster_id == "cl-1"
    if v >= 3:
        assert resp.throttle_time_ms == 5
    if v >= 7:
        assert p.leader_epoch == 7
    if v >= 10:
        assert t.topic_id == uuid.UUID(int=12345)


@pytest.mark.parametrize("v", SERVED[FIND_COORDINATOR])
def test_find_coordinator_response_read_by_kafka_python(v):
    c = codec(FIND_COORDINATOR, v)
    if v < 4:
        body = build(
            c.response_type,
            dict(throttle_time=3, error_code=0, error_message=None, node_id=1, host="h.example", port=19092),
        )
    else:
        coord = nested_type(c.response_type, "Coordinator")
        body = build(
            c.response_type,
            dict(
                throttle_time=3,
                coordinators=(
                    build(
                        coord, dict(key="g1", node_id=1, host="h.example", port=19092, error_code=0, error_message=None)
                    ),
                    build(coord, dict(key="", node_id=-1, host="", port=-1, error_code=42, error_message="empty")),
                ),
            ),
        )
    resp = KpFindCoordinatorResponse.decode(encode_response(c, 8, body), version=v, header=True, framed=True)
    assert resp.header.correlation_id == 8
    if v < 4:
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, "h.example", 19092)
        if v >= 1:
            assert resp.throttle_time_ms == 3 and resp.error_message is None
    else:
        got = [(x.key, x.node_id, x.host, x.port, x.error_code, x.error_message) for x in resp.coordinators]
        assert got == [("g1", 1, "h.example", 19092, 0, None), ("", -1, "", -1, 42, "empty")]


@pytest.mark.parametrize("v", SERVED[API_VERSIONS])
def test_api_versions_response_read_by_kafka_python(v):
    c = codec(API_VERSIONS, v)
    assert not c.flexible_response  # ApiVersions answers always use response header v0
    av = nested_type(c.response_type, "ApiVersion")
    keys = tuple(build(av, dict(api_key=k, min_version=vs.start, max_version=vs.stop - 1)) for k, vs in SERVED.items())
    body = build(c.response_type, dict(error_code=0, api_keys=keys, throttle_time=0))
    resp = KpApiVersionsResponse.decode(encode_response(c, 99, body), version=v, header=True, framed=True)
    assert resp.header.correlation_id == 99 and resp.error_code == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in resp.api_keys} == {(18, 0, 4), (3, 0, 12), (10, 0, 6)}


def test_old_responses_read_by_aiokafka():
    from aiokafka.protocol.admin import ApiVersionResponse_v0, ApiVersionResponse_v1, ApiVersionResponse_v2
    from aiokafka.protocol.api import ResponseHeader_v0
    from aiokafka.protocol.coordination import FindCoordinatorResponse_v0, FindCoordinatorResponse_v1
    from aiokafka.protocol import metadata as am
    import io

    def read(resp_cls, data):
        buf = io.BytesIO(data[4:])
        corr = ResponseHeader_v0.decode(buf).correlation_id
        out = resp_cls.decode(buf)
        assert buf.read() == b"", "aiokafka left bytes unread"
        return corr, out

    for v, cls in enumerate([ApiVersionResponse_v0, ApiVersionResponse_v1, ApiVersionResponse_v2]):
        c = codec(API_VERSIONS, v)
        av = nested_type(c.response_type, "ApiVersion")
        body = build(
            c.response_type,
            dict(error_code=0, throttle_time=0, api_keys=(build(av, dict(api_key=18, min_version=0, max_version=4)),)),
        )
        corr, out = read(cls, encode_response(c, v, body))
        assert corr == v and out.error_code == 0 and [tuple(x) for x in out.api_versions] == [(18, 0, 4)]
    for v in range(6):
        c, body = our_metadata_response(v)
        corr, out = read(getattr(am, f"MetadataResponse_v{v}"), encode_response(c, v, body))
        assert corr == v and out.brokers[0][:3] == (1, "broker.example", 9092)
    for v, cls in enumerate([FindCoordinatorResponse_v0, FindCoordinatorResponse_v1]):
        c = codec(FIND_COORDINATOR, v)
        body = build(
            c.response_type, dict(throttle_time=0, error_code=0, error_message=None, node_id=1, host="h", port=7)
        )
        corr, out = read(cls, encode_response(c, v, body))
        assert (out.coordinator_id, out.host, out.port) == (1, "h", 7)


# --- responses: kafka-python encodes, we decode (client direction) ------------------------------


@pytest.mark.parametrize("v", SERVED[FIND_COORDINATOR])
def test_kafka_python_find_coordinator_response_read_by_us(v):
    if v < 4:
        msg = KpFindCoordinatorResponse[v](
            throttle_time_ms=0, error_code=0, error_message=None, node_id=5, host="x", port=1234
        )
    else:
        C = KpFindCoordinatorResponse.Coordinator
        msg = KpFindCoordinatorResponse[v](
            throttle_time_ms=0,
            coordinators=[C(key="g", node_id=5, host="x", port=1234, error_code=0, error_message=None, version=v)],
        )
    msg.with_header(correlation_id=55)
    data = bytes(msg.encode(header=True, framed=True))
    corr, body = decode_response(FIND_COORDINATOR, v, data[4:])
    assert corr == 55
    got = body if v < 4 else body.coordinators[0]
    assert (got.node_id, got.host, got.port) == (5, "x", 1234)


@pytest.mark.parametrize("v", SERVED[API_VERSIONS])
def test_kafka_python_api_versions_response_read_by_us(v):
    A = KpApiVersionsResponse.ApiVersion
    msg = KpApiVersionsResponse[v](
        error_code=0, throttle_time_ms=0, api_keys=[A(api_key=18, min_version=0, max_version=4, version=v)]
    )
    msg.with_header(correlation_id=12)
    corr, body = decode_response(API_VERSIONS, v, bytes(msg.encode(header=True, framed=True))[4:])
    assert corr == 12 and [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]


# --- flexible versions against bytes built by hand from the schemas ------------------------------


def test_api_versions_v3_request_hand_built():
    raw = header_v2(18, 3, 5, "rdkafka") + compact_string("librdkafka") + compact_string("2.16.1") + NO_TAGS
    h, req = decode_request(raw)
    assert (h.api_version, h.correlation_id, h.client_id) == (3, 5, "rdkafka")
    assert (req.client_software_name, req.client_software_version) == ("librdkafka", "2.16.1")


@pytest.mark.parametrize("v", [3, 4])
def test_api_versions_v3_v4_response_hand_built(v):
    c = codec(API_VERSIONS, v)
    av = nested_type(c.response_type, "ApiVersion")
    ranges = [(3, 0, 12), (10, 0, 6), (18, 0, 4)]
    body = build(
        c.response_type,
        dict(
            error_code=0,
            throttle_time=0,
            api_keys=tuple(build(av, dict(api_key=k, min_version=lo, max_version=hi)) for k, lo, hi in ranges),
        ),
    )
    expected_payload = (
        i32(77)  # response header v0: no tagged fields even though the body is flexible
        + i16(0)
        + compact_array([i16(k) + i16(lo) + i16(hi) + NO_TAGS for k, lo, hi in ranges])
        + i32(0)
        + NO_TAGS  # no SupportedFeatures / FinalizedFeatures*: kcat cannot read them
    )
    assert encode_response(c, 77, body) == frame(expected_payload)


def test_metadata_v12_request_hand_built():
    tid = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    topics = compact_array(
        [tid.bytes + compact_string("orders") + NO_TAGS, bytes(16) + compact_string("audit") + NO_TAGS]
    )
    raw = header_v2(3, 12, 1, "c") + topics + boolean(True) + boolean(False) + NO_TAGS
    _, req = decode_request(raw)
    assert [(t.topic_id, t.name) for t in req.topics] == [(tid, "orders"), (None, "audit")]
    assert req.allow_auto_topic_creation is True and req.include_topic_authorized_operations is False
    _, req = decode_request(header_v2(3, 12, 1, "c") + compact_array(None) + boolean(True) + boolean(False) + NO_TAGS)
    assert req.topics is None


def test_metadata_v9_is_the_first_flexible_version():
    assert not codec(METADATA, 8).flexible_request and codec(METADATA, 9).flexible_request
    raw = (
        header_v2(3, 9, 1, "c")
        + compact_array([compact_string("t") + NO_TAGS])
        + boolean(True)
        + boolean(False)
        + boolean(False)
        + NO_TAGS
    )
    _, req = decode_request(raw)
    assert [t.name for t in req.topics] == ["t"]


def test_find_coordinator_v4_request_and_response_hand_built():
    raw = header_v2(10, 4, 3, "c") + i8(0) + compact_array([compact_string("g1"), compact_string("g2")]) + NO_TAGS
    _, req = decode_request(raw)
    assert (req.key_type, list(req.coordinator_keys)) == (0, ["g1", "g2"])

    c = codec(FIND_COORDINATOR, 4)
    coord = nested_type(c.response_type, "Coordinator")
    body = build(
        c.response_type,
        dict(
            throttle_time=0,
            coordinators=(
                build(coord, dict(key="g1", node_id=1, host="h", port=9092, error_code=0, error_message=None)),
            ),
        ),
    )
    expected = (
        i32(3)
        + NO_TAGS  # response header v1
        + i32(0)
        + compact_array(
            [compact_string("g1") + i32(1) + compact_string("h") + i32(9092) + i16(0) + compact_string(None) + NO_TAGS]
        )
        + NO_TAGS
    )
    assert encode_response(c, 3, body) == frame(expected)


def test_find_coordinator_v3_response_hand_built():
    c = codec(FIND_COORDINATOR, 3)
    body = build(c.response_type, dict(throttle_time=0, error_code=0, error_message=None, node_id=1, host="h", port=9))
    expected = (
        i32(1) + NO_TAGS + i32(0) + i16(0) + compact_string(None) + i32(1) + compact_string("h") + i32(9) + NO_TAGS
    )
    assert encode_response(c, 1, body) == frame(expected)


# --- truncated and malformed bodies ---------------------------------------------------------------


def sample_request(key: int, v: int) -> bytes:
    if key == API_VERSIONS:
        kw = {"client_software_name": "kafka-python", "client_software_version": "3.0"} if v >= 3 else {}
        return kp_frame(KpApiVersionsRequest[v](**kw), corr=1)
    if key == METADATA:
        return kp_frame(kp_metadata_request(v, ["topic-a"]), corr=1)
    kw = ({"key": "g"} | ({"key_type": 0} if v else {})) if v < 4 else {"key_type": 0, "coordinator_keys": ["g"]}
    return kp_frame(KpFindCoordinatorRequest[v](**kw), corr=1)


@pytest.mark.parametrize("key,v", ALL_SERVED)
def test_every_truncation_raises_malformed(key, v):
    raw = sample_request(key, v)
    decode_request(raw)  # the whole request is fine
    h, body_at = read_request_header(raw, flexible=codec(key, v).flexible_request)
    for cut in range(len(raw)):
        if cut >= body_at and body_at == len(raw):
            continue  # an empty body (ApiVersions v0-v2) cannot be cut
        with pytest.raises(MalformedRequest):
            decode_request(raw[:cut])


@pytest.mark.parametrize(
    "raw",
    [
        # FindCoordinator v4 coordinator_keys: COMPACT_ARRAY count 2**32 - 2 in 0 bytes
        header_v2(10, 4, 1, "f") + i8(0) + uvarint(2**32 - 1),
        # Metadata v9 topics: a 5-byte varint count
        header_v2(3, 9, 1, "f") + bytes.fromhex("98e1a9df6835c9e6da"),
        # ApiVersions v3 is fine, but a nested huge count inside Metadata v12 topics
        header_v2(3, 12, 1, "f") + uvarint(10**9) + bytes(16),
    ],
    ids=["find-coordinator-v4", "metadata-v9", "metadata-v12"],
)
def test_huge_compact_array_count_is_malformed_not_a_crash(raw):
    # kio preallocates the declared count; without our bounds check this aborts the process.
    with pytest.raises(MalformedRequest):
        decode_request(raw)


@pytest.mark.parametrize("key,v", [(k, v) for k, v in ALL_SERVED if codec(k, v).flexible_request])
def test_bounds_check_walks_exactly_the_body(key, v):
    raw = sample_request(key, v)
    c = codec(key, v)
    _, pos = read_request_header(raw, flexible=True)
    edits: list = []
    assert c.check(raw, pos, len(raw), edits) == len(raw) and edits == []


def test_unknown_tagged_fields_in_body_are_skipped_as_kafka_does():
    body = compact_string("a") + compact_string("1") + uvarint(1) + uvarint(7) + uvarint(2) + b"xy"
    _, request = decode_request(header_v2(18, 3, 1, "c") + body)
    assert (request.client_software_name, request.client_software_version) == ("a", "1")
    # Unknown tags between known ones, in a nested entity (FindCoordinator v4 has none nested,
    # so use the top level with two unknown tags around nothing known).
    body = (
        compact_string("a")
        + compact_string("1")
        + uvarint(2)
        + uvarint(7)
        + uvarint(1)
        + b"x"
        + uvarint(9)
        + uvarint(0)
    )
    _, request = decode_request(header_v2(18, 3, 1, "c") + body)
    assert request.client_software_name == "a"
    with pytest.raises(MalformedRequest):  # a tag whose size runs past the end
        decode_request(
            header_v2(18, 3, 1, "c")
            + compact_string("a")
            + compact_string("1")
            + uvarint(1)
            + uvarint(7)
            + uvarint(9)
            + b"x"
        )


def test_bad_values_in_body_raise_malformed():
    # invalid UTF-8 in a string
    with pytest.raises(MalformedRequest):
        decode_request(header_v1(10, 0, 1) + i16(2) + b"\xff\xfe")
    # an array claiming more elements than there are bytes
    with pytest.raises(MalformedRequest):
        decode_request(header_v1(3, 1, 1) + i32(1_000_000) + string("t"))
    # a null string where the schema does not allow null (FindCoordinator v0 key)
    with pytest.raises(MalformedRequest):
        decode_request(header_v1(10, 0, 1) + i16(-1))


def test_unknown_api_or_version_has_no_codec():
    with pytest.raises(UnknownApi):
        codec(API_VERSIONS, 99)
    with pytest.raises(UnknownApi):
        codec(12345, 0)
    with pytest.raises(UnknownApi):
        decode_request(header_v1(12345, 0, 1))


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(SERVED)), data=st.data())
def test_random_bodies_only_raise_malformed(key, data):
    v = data.draw(st.sampled_from(list(SERVED[key])))
    flexible = codec(key, v).flexible_request
    head = header_v2(key, v, 1, "f") if flexible else header_v1(key, v, 1, "f")
    body = data.draw(st.binary(max_size=64))
    try:
        decode_request(head + body)
    except MalformedRequest:
        pass


# --- the coordinator partition of a group: abs(Java String.hashCode) % 50 ----------------------------

# Computed with OpenJDK 17: String.hashCode (over UTF-16 code units) and Kafka's Utils.abs,
# which maps Integer.MIN_VALUE to 0 (Math.abs would keep it negative).
JAVA_HASHES = [
    ("", 0, 0),
    ("a", 97, 47),
    ("polygenelubricants", -2147483648, 0),  # hashCode == Integer.MIN_VALUE
    ("GydZG_", -2147483648, 0),
    ("group-1", 293427299, 49),
    ("my-group", -1906497762, 12),
    ("console-consumer-12345", 158455506, 6),
    ("Aa", 2112, 12),
    ("BB", 2112, 12),
    ("h\u00e9llo", 103094734, 34),
    ("\u65e5\u672c", 835047, 47),
    ("\U0001f600", 1772899, 49),  # one code point, two UTF-16 units
    ("test-group", 627841412, 12),
]


def java_string_hash(s: str) -> int:
    """Reference: s[0]*31^(n-1) + ... over UTF-16 code units, in 32-bit two's complement."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize("group,java_hash,partition", JAVA_HASHES)
def test_reference_java_hash_matches_jdk(group, java_hash, partition):
    assert java_string_hash(group) == java_hash


@pytest.mark.parametrize("group,java_hash,partition", JAVA_HASHES)
def test_partition_for(group, java_hash, partition):
    log_module = pytest.importorskip("coordinator.log", reason="coordinator.log (partition_for) has not landed yet")
    partition_for = getattr(log_module, "partition_for", None)
    if partition_for is None:
        pytest.skip("coordinator.log has no partition_for yet")
    try:
        got = partition_for(group, 50)
    except TypeError:
        got = partition_for(group)
    assert got == partition


def test_array_free_bodies_skip_the_walk_but_stay_safe():
    """Bodies without arrays go to kio first (kio reads an oversized string length as a
    BufferUnderflow, not a crash); the walk runs only when kio refuses, e.g. unknown tags."""
    assert not codec(12, 4).check_first and not codec(18, 3).check_first  # Heartbeat, ApiVersions
    assert codec(11, 9).check_first and codec(10, 4).check_first  # JoinGroup, FindCoordinator v4: arrays
    for body in (uvarint(2**32 - 1) + b"abc", compact_string("g") + struct.pack(">i", 1) + uvarint(2**31) + b"m"):
        with pytest.raises(MalformedRequest):
            decode_request(header_v2(12, 4, 1) + body)
    tagged = uvarint(1) + uvarint(99) + uvarint(2) + b"zz"  # one unknown tagged field
    _, hb = decode_request(
        header_v2(12, 4, 1)
        + compact_string("g")
        + struct.pack(">i", 3)
        + compact_string("m")
        + compact_string(None)
        + tagged
    )
    assert (hb.group_id, hb.generation_id, hb.member_id) == ("g", 3, "m")


def _with_bytes(request):
    """A Produce request with its record batches as bytes (the hand reader gives views)."""
    import dataclasses

    if request.topic_data is None:
        return request
    return dataclasses.replace(
        request,
        topic_data=tuple(
            t
            if t.partition_data is None
            else dataclasses.replace(
                t,
                partition_data=tuple(
                    dataclasses.replace(p, records=None if p.records is None else bytes(p.records))
                    for p in t.partition_data
                ),
            )
            for t in request.topic_data
        ),
    )


def test_produce_hand_reader_equals_kio():
    """protocol/produce.py reads every Produce version it serves (v3-v13) as kio does, on
    requests hypothesis builds from the schema, and refuses what kio refuses."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.support.fuzz import edit_frame, entity_strategy
    from protocol.messages import _library_codec, decode_body, encode_request, read_request_header

    def case(version):
        return st.tuples(
            st.just(version),
            entity_strategy(codec(0, version).request_type),
            st.lists(
                st.tuples(
                    st.floats(0, 1), st.sampled_from(["set", "insert", "cut"]), st.binary(min_size=1, max_size=4)
                ),
                max_size=2,
            ),
        )

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.sampled_from(range(3, 14)).flatmap(case))
    def check(example):
        version, request, edits = example
        try:
            frame = encode_request(0, version, 1, "c", request)
        except Exception:
            return  # a value this version cannot carry
        frame = edit_frame(frame, edits)[4:] if edits else frame[4:]
        try:
            _, pos = read_request_header(frame, flexible=codec(0, version).flexible_request)
        except Exception:
            return
        outcomes = []
        for c in (codec(0, version), _library_codec(0, version)):
            try:
                outcomes.append(_with_bytes(decode_body(c, frame, pos)))
            except Exception as e:
                outcomes.append(type(e).__name__)
        assert outcomes[0] == outcomes[1]

    check()
