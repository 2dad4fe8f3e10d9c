"""Request/response codec: bytes of a frame <-> (header, kio request/response object).

Bodies are encoded and decoded by kio, whose classes are generated from Kafka's JSON
schemas and cover every version including flexible ones (compact types, tagged
fields). The request header is parsed here by hand because it decides which body
class to use and is on the hot path. Sans-IO: no sockets.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import struct
import types
import typing
from dataclasses import dataclass
from collections.abc import Callable
from functools import cache, partial
from typing import Any, Final, NamedTuple, TypeGuard, TypeVar, cast

from kio.index import load_payload_module
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.protocol import Payload

from . import offset_commit, produce
from .compiled_writer import compiled_writer
from .framing import Frame, frame
from .ahead import AHEAD
from .legacy import LEGACY
from .wire import MalformedRequest, Parts, Raw, encode_uvarint, read_uvarint, skip_tagged_fields

_HEADER = struct.Struct(">hhi")
# (Final, and the struct's calls taken once: compiled, a plain module global is a dict lookup per
# use and a method an attribute lookup per call, on every request)
_read_header_v1: Final = struct.Struct(">hhih").unpack_from  # api key, version, correlation id, client id length
_client_ids: Final[dict[bytes, str]] = {}  # the same few client ids arrive with every request
_new_tuple: Final = tuple.__new__
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_pack_size_id: Final = struct.Struct(">ii").pack  # a response's size and correlation id
_pack_size_id_no_tags: Final = struct.Struct(">iib").pack

API_VERSIONS_KEY = 18


class UnknownApi(Exception):
    """No codec exists for this api key / version."""


class RequestHeader(NamedTuple):  # a tuple: one is built per request
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Codec:
    """Everything needed to read one request version and write its response."""

    request_type: type[Payload]
    response_type: type[Payload]
    read: Any
    write: Any
    flexible_request: bool  # request header v2 (tagged fields) instead of v1
    flexible_response: bool  # response header v1 (tagged fields) instead of v0
    check: Any = None  # flexible requests: array-length bounds check run before kio (see below)
    check_first: bool = True  # False: the schema has no array, run the check only if kio fails
    nulls: Any = None  # the null-array check of request_type (see _null_checker); None: nothing to check
    encode: Any = None  # body -> bytes, as `write` writes it
    # enc(body, append): the generated encoder `write` runs (protocol.compiled_writer), called by
    # encode_response without the writer's own call; None where `write` is another writer
    enc: Any = None


# Versions Kafka 4.4 serves that kio 0.6.5 lacks: (api key, version) -> the protocol module
# holding kio-style entities written from Kafka's schemas (its Request and Response classes).
NEWER = {
    (88, 1): "protocol.streams_heartbeat_v1",
    (89, 1): "protocol.streams_describe_v1",
    (28, 6): "protocol.txn_offset_commit_v6",
    (93, 0): "protocol.streams_topology_description_update_v0",
}


def has_codec(api_key: int, api_version: int) -> bool:
    """Whether a codec exists, without importing it (startup stays fast)."""
    if (api_key, api_version) in LEGACY or (api_key, api_version) in NEWER or (api_key, api_version) in AHEAD:
        return True
    name = api_key_map.get(api_key)
    return name is not None and api_version in schema_name_map.get(name, {})


@cache
def codec(api_key: int, api_version: int) -> Codec:
    c = _library_codec(api_key, api_version)
    if api_key == 8:  # OffsetCommit: the hot path of every consumer, read by hand
        c = dataclasses.replace(c, read=offset_commit.reader(api_version), check=None)
    elif api_key == 0 and api_version >= 3:  # Produce: record batches as views of the frame, not copies
        c = dataclasses.replace(c, read=produce.reader(c.request_type, c.flexible_request), check=None)
    return c


def _library_codec(api_key: int, api_version: int) -> Codec:
    legacy = LEGACY.get((api_key, api_version)) or AHEAD.get((api_key, api_version))
    if legacy is not None:
        stand_in, reader, writer = legacy
        c = _library_codec(api_key, stand_in)
        # The stand-in's pre-decode size check knows only its own layout.
        return dataclasses.replace(
            c,
            read=reader or c.read,
            write=writer or c.write,
            encode=partial(_encode_with, writer) if writer else c.encode,
            enc=None if writer else c.enc,
            check=None if reader else c.check,
        )
    try:
        newer = NEWER.get((api_key, api_version))
        if newer is not None:
            module = importlib.import_module(newer)
            req, resp = _entity(module, "Request"), _entity(module, "Response")
        else:
            req = _entity(load_payload_module(api_key, api_version, EntityType.request), "Request")
            resp = _entity(load_payload_module(api_key, api_version, EntityType.response), "Response")
    except Exception as e:  # kio raises its own index errors and ImportErrors
        raise UnknownApi(f"no codec for api key {api_key} version {api_version}") from e
    flexible = bool(req.__flexible__)
    write = compiled_writer(resp)  # kio's bytes, without its per-field calls
    return Codec(
        request_type=req,
        response_type=resp,
        read=entity_reader(req),
        write=write,
        encode=write.encode,
        enc=write.enc,
        nulls=_null_checker(req),
        flexible_request=flexible,
        # ApiVersions responses always use header v0 so that a client that does not
        # yet know our versions can still read the correlation id (KIP-511).
        flexible_response=flexible and api_key != API_VERSIONS_KEY,
        check=_entity_skipper(req) if flexible else None,
        check_first=_has_array(req),
    )


def _is_payload(value: object) -> TypeGuard[type[Payload]]:
    return isinstance(value, type) and getattr(value, "__type__", None) in (EntityType.request, EntityType.response)


def _entity(module: Any, suffix: str) -> type[Payload]:
    for name, value in vars(module).items():
        if name.endswith(suffix) and _is_payload(value):
            return value
    raise UnknownApi(f"{module.__name__} has no top-level {suffix}")


def read_request_header(buf: Frame, *, flexible: bool | None = None) -> tuple[RequestHeader, int]:
    """Parse header v1 (and v2's tagged fields when `flexible`); return the body offset.

    With flexible=None only api key, version, correlation id and client id are read:
    enough to answer or reject a request whose version we do not know.
    """
    if len(buf) < 10:
        raise MalformedRequest(f"request of {len(buf)} bytes is shorter than a header")
    api_key, api_version, correlation_id, n = _read_header_v1(buf, 0)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > len(buf):
            raise MalformedRequest("truncated client id")
        raw = buf[pos : pos + n]
        if type(raw) is not bytes:  # (a large Produce frame is a bytearray: see protocol.framing)
            raw = bytes(raw)
        client_id = _client_ids.get(raw)
        if client_id is None:
            try:
                client_id = raw.decode()
            except UnicodeDecodeError as e:
                raise MalformedRequest("client id is not UTF-8") from e
            if len(_client_ids) >= 10_000:
                _client_ids.clear()
            _client_ids[raw] = client_id
        pos += n
    elif n != -1:
        raise MalformedRequest(f"negative client id length {n}")
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    return _new_tuple(
        RequestHeader, (api_key, api_version, correlation_id, client_id)
    ), pos  # (no Python-level __new__)


def decode_request(buf: bytes) -> tuple[RequestHeader, Any]:
    """Decode a whole request frame (without its size prefix).

    Raises UnknownApi for api keys/versions without a codec, MalformedRequest for
    bytes that do not decode.
    """
    if len(buf) < 4:
        raise MalformedRequest("request shorter than its api key and version")
    api_key, api_version = struct.unpack_from(">hh", buf, 0)
    c = codec(api_key, api_version)
    header, pos = read_request_header(buf, flexible=c.flexible_request)
    return header, decode_body(c, buf, pos)


def decode_body(c: Codec, buf: Frame, pos: int) -> Any:
    if c.check is not None and c.check_first:
        buf = _checked(c, buf, pos)
    try:
        body, size = c.read(buf, pos)
    except Exception as e:  # kio: BufferUnderflow, KeyError on unknown tags, ValueError...
        if c.check is None or c.check_first:
            raise MalformedRequest(f"{c.request_type.__name__} v{c.request_type.__version__}: {e!r}") from e
        # No array to fear: kio read it first. It refuses unknown tagged fields, which
        # Kafka skips: cut them out (the check raises if the body is really bad) and retry.
        return decode_body(dataclasses.replace(c, check_first=True), buf, pos)
    # (hand-written readers may build their own types)
    check_nulls = c.nulls if type(body) is c.request_type else _null_checker(type(body))
    if check_nulls is not None:
        check_nulls(body)
    return body


_R = TypeVar("_R")


def _per_class(fn: Callable[[type], _R]) -> Callable[[type], _R]:
    """functools.cache for a function of a class (mypy does not take a class for Hashable)."""
    memo: dict[type, _R] = {}

    def cached(cls: type) -> _R:
        try:
            return memo[cls]
        except KeyError:
            result = memo[cls] = fn(cls)
            return result

    return cached


def _is_entity(tp: object) -> TypeGuard[type]:
    """A kio entity class (a dataclass), as a field's type names it."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


@_per_class
def _null_checker(cls: type) -> Any:
    """A check that no array the schema declares non-nullable decoded as null (count -1).

    kio refuses a null string where the schema forbids it, but reads a null array as None
    whatever the schema says; handlers then fail iterating it. None if `cls` has no such
    array at any depth (most hot-path requests), so those pay nothing.
    """
    if not _is_entity(cls):
        return None
    checks: list[Any] = []
    for f in dataclasses.fields(cls):
        nullable = _strip_optional(f.type) is not f.type
        tp = _strip_optional(f.type)
        if typing.get_origin(tp) is tuple:
            inner = _strip_optional(typing.get_args(tp)[0])
            nested = _null_checker(inner) if _is_entity(inner) else None
            checks.append((f.name, not nullable, nested, True))
        elif _is_entity(tp):
            nested = _null_checker(tp)
            if nested is not None:
                checks.append((f.name, False, nested, False))
    checks = [c for c in checks if c[1] or c[2] is not None]
    if not checks:
        return None
    # Generated straight-line code (one per class, run on every request of it): a field's
    # value read once, no loop over the checks.
    env: dict[str, Any] = {"MalformedRequest": MalformedRequest}
    lines = ["def check(e):"]
    for i, (field, required, nested, is_array) in enumerate(checks):
        lines.append(f"    v = e.{field}")
        if required:
            message = f"{cls.__name__}.{field}: null where the schema forbids it"
            lines += ["    if v is None:", f"        raise MalformedRequest({message!r})"]
        if nested is not None:
            env[f"_n{i}"] = nested
            lines.append("    if v is not None:")
            lines += ["        for x in v:", f"            _n{i}(x)"] if is_array else [f"        _n{i}(v)"]
    exec("\n".join(lines), env)  # noqa: S102  # (source built above from the schema's fields)
    check: Any = env["check"]
    return check


def _checked(c: Codec, buf: Frame, pos: int) -> Frame:
    """The body after the bounds check, without the tagged fields nobody knows."""
    edits: list[tuple[int, int, bytes]] = []
    c.check(buf, pos, len(buf), edits)
    return _without_unknown_tags(buf, edits) if edits else buf


def _encode_with(write: Any, body: Any) -> bytes:
    out = Parts()
    write(out, body)
    return b"".join(out)


def encode_response(c: Codec, correlation_id: int, body: Any) -> bytes:
    """The whole response frame: size, response header, body (Raw: already encoded)."""
    if type(body) is Raw:
        raw: bytes = body
    elif c.enc is not None:
        parts: list[bytes] = []
        c.enc(body, parts.append)
        raw = b"".join(parts)
    else:
        raw = c.encode(body)
    if c.flexible_response:  # response header v1: no tagged fields
        return _pack_size_id_no_tags(len(raw) + 5, correlation_id, 0) + raw
    return _pack_size_id(len(raw) + 4, correlation_id) + raw


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """Client direction, for tests and benchmarks: a whole request frame."""
    c = codec(api_key, api_version)
    out = io.BytesIO()
    out.write(_HEADER.pack(api_key, api_version, correlation_id))
    if client_id is None:
        out.write(_INT16.pack(-1))
    else:
        raw = client_id.encode()
        out.write(_INT16.pack(len(raw)) + raw)
    if c.flexible_request:
        out.write(b"\x00")
    entity_writer(c.request_type)(out, body)
    return frame(out.getvalue())


def decode_response(api_key: int, api_version: int, buf: bytes) -> tuple[int, Any]:
    """Client direction, for tests: (correlation id, body) of a response frame without size."""
    c = codec(api_key, api_version)
    (correlation_id,) = _INT32.unpack_from(buf, 0)
    pos = 4
    if c.flexible_response:
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            pos += size
    body, _ = entity_reader(c.response_type)(buf, pos)
    return correlation_id, body


def encode_body(c: Codec, body: Any) -> bytes:
    return cast(bytes, c.encode(body))


# Bounds check of flexible request bodies -------------------------------------------------
#
# kio's native reader allocates room for a COMPACT_ARRAY's declared element count before
# reading the elements; a count of ~2**32 in an 18-byte request makes the allocation fail,
# and Rust aborts the whole process (no exception to catch). Every element takes at least
# one byte, so a count larger than the bytes left can never be valid: this walk rejects it
# as MalformedRequest before kio sees the body. Legacy (int32-counted) arrays are not
# affected. Only lengths are followed; values are not built.

_FIXED_SIZES: dict[str | None, int] = {  # by a field's kafka_type (None: not a primitive)
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "float64": 8,
    "uuid": 16,
}


@_per_class
def _has_array(cls: type) -> bool:
    """Whether an entity has an array field, at any depth: only arrays need the check first
    (kio reads a string or bytes whose declared length exceeds the body as BufferUnderflow)."""
    for f in dataclasses.fields(cls):
        tp = _strip_optional(f.type)
        if typing.get_origin(tp) is tuple or (_is_entity(tp) and _has_array(tp)):
            return True
    return False


def _strip_optional(tp: Any) -> Any:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _primitive_skipper(kind: str | None) -> Any:
    size = _FIXED_SIZES.get(kind)
    if size is not None:

        def skip_fixed(buf: bytes, pos: int, end: int, edits: list[Any]) -> int:
            pos += size
            if pos > end:
                raise MalformedRequest("truncated body")
            return pos

        return skip_fixed

    def skip_compact_bytes(buf: bytes, pos: int, end: int, edits: list[Any]) -> int:  # string, bytes, records
        n, pos = read_uvarint(buf, pos, end)
        pos += max(n - 1, 0)
        if pos > end:
            raise MalformedRequest("truncated body")
        return pos

    return skip_compact_bytes


def _field_skipper(field: dataclasses.Field[Any]) -> Any:
    tp = _strip_optional(field.type)
    if typing.get_origin(tp) is tuple:
        inner = _strip_optional(typing.get_args(tp)[0])
        size = None if _is_entity(inner) else _FIXED_SIZES.get(field.metadata.get("kafka_type"))
        if size is not None:  # (partition indexes and the like: skipped in one step, not per element)

            def skip_fixed_array(buf: bytes, pos: int, end: int, edits: list[Any]) -> int:
                n, pos = read_uvarint(buf, pos, end)
                n -= 1  # 0 encodes null
                if n > end - pos:
                    raise MalformedRequest(f"array of {n} elements in {end - pos} bytes")
                if n > 0:
                    pos += n * size
                    if pos > end:
                        raise MalformedRequest("truncated body")
                return pos

            return skip_fixed_array
        element = _entity_skipper(inner) if _is_entity(inner) else _primitive_skipper(field.metadata.get("kafka_type"))

        def skip_array(buf: bytes, pos: int, end: int, edits: list[Any]) -> int:
            n, pos = read_uvarint(buf, pos, end)
            n -= 1  # 0 encodes null
            if n > end - pos:
                raise MalformedRequest(f"array of {n} elements in {end - pos} bytes")
            for _ in range(n):
                pos = element(buf, pos, end, edits)
            return pos

        return skip_array
    if _is_entity(tp):
        entity = _entity_skipper(tp)
        if tp is field.type:
            return entity

        def skip_nullable_entity(buf: bytes, pos: int, end: int, edits: list[Any]) -> int:
            # KIP-893: a nullable struct starts with an int8, -1 for null (e.g. the topology
            # and the user endpoint of StreamsGroupHeartbeat)
            if pos >= end:
                raise MalformedRequest("truncated body")
            marker = buf[pos]
            if marker == 0xFF:
                return pos + 1
            if marker != 1:
                raise MalformedRequest(f"nullable struct marker {marker}")
            return cast(int, entity(buf, pos + 1, end, edits))

        return skip_nullable_entity
    return _primitive_skipper(field.metadata.get("kafka_type"))


@_per_class
def _entity_skipper(cls: type) -> Any:
    positional = []
    tagged = {}
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            tagged[f.metadata["tag"]] = _field_skipper(f)
        else:
            positional.append(_field_skipper(f))

    def skip_entity(buf: bytes, pos: int, end: int, edits: list[Any]) -> int:
        for skip in positional:
            pos = skip(buf, pos, end, edits)
        count_at = pos
        count, pos = read_uvarint(buf, pos, end)
        unknown = []
        for _ in range(count):
            tag_at = pos
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise MalformedRequest("truncated tagged field")
            skip = tagged.get(tag)
            if skip is not None:
                skip(buf, pos, stop, edits)
            else:
                unknown.append((tag_at, stop, b""))
            pos = stop
        if unknown:
            # Kafka skips tagged fields it does not know (newer clients add them without
            # a version bump); kio cannot, so they are cut out before it decodes.
            edits.append((count_at, count_at + _uvarint_size(buf, count_at), encode_uvarint(count - len(unknown))))
            edits.extend(unknown)
        return pos

    return skip_entity


def _uvarint_size(buf: bytes, pos: int) -> int:
    return read_uvarint(buf, pos)[1] - pos


def _without_unknown_tags(buf: Frame, edits: list[tuple[int, int, bytes]]) -> bytes:
    """Apply (start, end, replacement) edits, which the walk produced in position order."""
    out = bytearray()
    at = 0
    for start, end, replacement in sorted(edits):
        out += buf[at:start]
        out += replacement
        at = end
    out += buf[at:]
    return bytes(out)
