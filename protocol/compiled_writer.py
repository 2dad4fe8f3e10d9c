"""Response bodies written by code generated once per kio entity class: the bytes kio's own
`entity_writer` writes, built as one list of parts joined at the end.

kio's writer calls one function per field and per array element, each writing to a BytesIO
and checking the value's phantom type. Every answer the server sends goes through it; the
generated function instead packs each run of fixed-width fields with one precompiled
struct, reads each attribute once and writes an entity without tagged field values as its
single zero count byte. A millisecond field (kio types it as a timedelta) also takes the int
milliseconds handlers give. Tagged fields that hold a value are written by kio's own field
writers (Kafka's `_writeTaggedFields` order: by tag), so the rare case stays kio's code.

The equivalence with kio's writer over every response schema is property-tested
(tests/test_compiled_writer.py).
"""

from __future__ import annotations

import io
import struct
from dataclasses import MISSING, Field, fields
from typing import Any, Callable

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_tagged_field

Parts = Callable[[bytes], None]  # list.append of the parts

# kafka type -> (struct code, expression of the value `v` it packs)
_FIXED = {
    "int8": ("b", "{v}"),
    "int16": ("h", "{v}"),
    "int32": ("i", "{v}"),
    "int64": ("q", "{v}"),
    "uint8": ("B", "{v}"),
    "uint16": ("H", "{v}"),
    "uint32": ("I", "{v}"),
    "uint64": ("Q", "{v}"),
    "float64": ("d", "{v}"),
    "bool": ("?", "{v}"),
    "error_code": ("h", "{v}"),  # (kio's ErrorCode is an IntEnum: packed as the int it is)
    # (a timedelta as kio decodes it, or the int milliseconds handlers give: no timedelta built per answer)
    "timedelta_i32": ("i", "({v} if {v}.__class__ is int else round({v}.total_seconds() * 1000))"),
    "timedelta_i64": ("q", "({v} if {v}.__class__ is int else round({v}.total_seconds() * 1000))"),
    "datetime_i64": ("q", "round({v}.timestamp() * 1000)"),
}
_UVARINT_1 = [bytes((n,)) for n in range(128)]


def uvarint(n: int) -> bytes:
    if n < 128:
        return _UVARINT_1[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_I16, _I32, _I8 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">b")
_NULL16, _NULL32, _NULL8, _NOT_NULL8 = _I16.pack(-1), _I32.pack(-1), _I8.pack(-1), _I8.pack(1)
_UUID_ZERO = bytes(16)


def _legacy_string(a: Parts, v: str) -> None:
    b = v.encode()
    a(_I16.pack(len(b)))
    a(b)


def _legacy_nullable_string(a: Parts, v: str | None) -> None:
    if v is None:
        a(_NULL16)
    else:
        b = v.encode()
        a(_I16.pack(len(b)))
        a(b)


def _legacy_bytes(a: Parts, v: bytes) -> None:
    if v is None:
        raise TypeError("Unexpectedly received None value")
    a(_I32.pack(len(v)))
    a(v)


def _legacy_nullable_bytes(a: Parts, v: bytes | None) -> None:
    if v is None:
        a(_NULL32)
    else:
        a(_I32.pack(len(v)))
        a(v)


def _compact_string(a: Parts, v: str | bytes) -> None:
    if v is None:
        raise TypeError("Unexpectedly received None value")
    b = v.encode() if isinstance(v, str) else v
    a(uvarint(len(b) + 1))
    a(b)


def _compact_nullable_string(a: Parts, v: str | bytes | None) -> None:
    if v is None:
        a(b"\x00")
    else:
        b = v.encode() if isinstance(v, str) else v
        a(uvarint(len(b) + 1))
        a(b)


def _uuid(a: Parts, v: Any) -> None:
    a(_UUID_ZERO if v is None else v.bytes)


def _nullable_datetime(a: Parts, v: Any) -> None:
    a(struct.pack(">q", -1 if v is None else round(v.timestamp() * 1000)))


def _variable(kafka_type: str, flexible: bool, optional: bool) -> Callable[[Parts, Any], None]:
    if kafka_type == "string":
        if flexible:
            return _compact_nullable_string if optional else _compact_string
        return _legacy_nullable_string if optional else _legacy_string
    if kafka_type in ("bytes", "records"):
        if flexible:
            return _compact_nullable_string if optional else _compact_string
        return _legacy_nullable_bytes if optional else _legacy_bytes
    if kafka_type == "uuid":
        return _uuid
    if kafka_type == "datetime_i64" and optional:
        return _nullable_datetime
    raise NotImplementedError(f"no writer for {kafka_type!r} field {flexible=} {optional=}")


def _inline_variable(kafka_type: str, flexible: bool, optional: bool) -> list[str] | None:
    """The lines writing a string or bytes field held in `v` as _variable's writer does (the
    same bytes and the same refusals), for generated code; None for other types."""
    if kafka_type not in ("string", "bytes", "records"):
        return None
    if flexible:
        body = [
            "b = v.encode() if isinstance(v, str) else v",
            "n = len(b) + 1",
            "a(_UV[n] if n < 128 else _uvarint(n))",
            "a(b)",
        ]
        null = "a(b'\\x00')"
    elif kafka_type == "string":
        body, null = ["b = v.encode()", "a(_P16(len(b)))", "a(b)"], "a(_NULL16)"
    else:
        body, null = ["a(_P32(len(v)))", "a(v)"], "a(_NULL32)"
    if optional:
        return ["if v is None:", f"    {null}", "else:", *(f"    {line}" for line in body)]
    if kafka_type == "string" and not flexible:
        return body  # (None: AttributeError on .encode, as _legacy_string)
    return ["if v is None:", "    raise TypeError('Unexpectedly received None value')", *body]


def _primitive_item(kafka_type: str, flexible: bool) -> Callable[[Parts, Any], None]:
    """A writer of one element of a primitive array."""
    fixed = _FIXED.get(kafka_type)
    if fixed is None:
        return _variable(kafka_type, flexible, False)
    code, expr = fixed
    pack = struct.Struct(">" + code).pack
    if expr == "{v}":
        return lambda a, v: a(pack(v))
    convert = eval("lambda v: " + expr.format(v="v"))  # (one of the _FIXED expressions)
    return lambda a, v: a(pack(convert(v)))


def _array(flexible: bool, value: str, items: list[str]) -> list[str]:
    """The lines writing array `value`: its length (null: -1 / 0), then, if it has elements,
    `items` (which write them from `v`), in place rather than by a call per array."""
    if flexible:
        head = [
            "if v is None:",
            "    a(b'\\x00')",
            "else:",
            "    n = len(v) + 1",
            "    a(_UV[n] if n < 128 else _uvarint(n))",
        ]
    else:
        head = ["if v is None:", "    a(_NULL32)", "else:", "    a(_P32(len(v)))"]
    return [f"v = {value}", *head, "    if v:", *(f"        {line}" for line in items)]


_cache: dict[type, Callable[[Any, Parts], None]] = {}


def _encoder(entity_type: type) -> Callable[[Any, Parts], None]:
    """enc(entity, append): appends the entity's encoding to the parts."""
    enc = _cache.get(entity_type)
    if enc is None:
        enc = _cache[entity_type] = _compile(entity_type)
    return enc


def _compile(entity_type: type) -> Callable[[Any, Parts], None]:
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]  # every kio entity class has it
    env: dict[str, Any] = {
        "_NULL8": _NULL8,
        "_NOT_NULL8": _NOT_NULL8,
        "_pack": struct.pack,
        "_NULL16": _NULL16,
        "_NULL32": _NULL32,
        "_P16": _I16.pack,
        "_P32": _I32.pack,
        "_UV": _UVARINT_1,
        "_uvarint": uvarint,
    }
    lines: list[str] = []
    run_codes: list[str] = []
    run_values: list[str] = []
    tagged: list[tuple[Any, Field[Any], Any, Any]] = []  # (kio's uvarint tag, field, writer, default)

    def flush_run() -> None:
        if run_codes:
            name = f"_S{len(env)}"
            env[name] = struct.Struct(">" + "".join(run_codes)).pack
            lines.append(f"a({name}({', '.join(run_values)}))")
            run_codes.clear()
            run_values.clear()

    for i, field in enumerate(fields(entity_type)):
        tag = get_field_tag(field)
        if tag is not None:
            writer = get_field_writer(field, flexible=flexible, is_request_header=False, is_tag=True)
            tagged.append((tag, field, writer, get_tagged_field_default(field)))
            continue
        value = f"e.{field.name}"
        kind = classify_field(field)
        optional = is_optional(field)
        if isinstance(kind, PrimitiveField):
            kafka_type = get_schema_field_type(field)
            fixed = _FIXED.get(kafka_type)
            if fixed is not None and not optional:
                run_codes.append(fixed[0])
                run_values.append(fixed[1].format(v=value))
                continue
            flush_run()
            inline = _inline_variable(kafka_type, flexible, optional)
            if inline is not None:  # (strings and bytes: written in place, not by a call each)
                lines += [f"v = {value}", *inline]
                continue
            env[f"_w{i}"] = _variable(kafka_type, flexible, optional)
            lines.append(f"_w{i}(a, {value})")
            continue
        flush_run()
        if isinstance(kind, EntityField):
            env[f"_e{i}"] = _encoder(kind.type_)
            if optional:  # KIP-893 nullable struct: an int8 marker first
                lines += [
                    f"v = {value}",
                    "if v is None:",
                    "    a(_NULL8)",
                    "else:",
                    "    a(_NOT_NULL8)",
                    f"    _e{i}(v, a)",
                ]
            else:
                lines.append(f"_e{i}({value}, a)")
        elif isinstance(kind, EntityTupleField):
            env[f"_e{i}"] = _encoder(kind.type_)
            lines += _array(flexible, value, ["for x in v:", f"    _e{i}(x, a)"])
        else:
            assert isinstance(kind, PrimitiveTupleField)
            item_type = get_schema_field_type(field)
            fixed = _FIXED.get(item_type)
            if fixed is not None and fixed[1] == "{v}":  # (partition lists and the like: one pack)
                env[f"_c{i}"] = ">%d" + fixed[0]
                lines += _array(flexible, value, [f"a(_pack(_c{i} % len(v), *v))"])
            else:
                env[f"_w{i}"] = _primitive_item(item_type, flexible)
                lines += _array(flexible, value, ["for x in v:", f"    _w{i}(a, x)"])
    flush_run()
    if tagged and not flexible:
        raise ValueError("Found tagged fields on a non-flexible model")
    if flexible:
        if tagged:
            env["_tags"] = _tag_writer(sorted(tagged, key=lambda t: t[0]))
            lines.append("_tags(e, a)")
        else:
            lines.append("a(b'\\x00')")  # no tagged fields
    body = "\n    ".join(lines or ["pass"])
    exec(f"def enc(e, a):\n    {body}\n", env)  # noqa: S102  # (source built above from the schema's fields)
    enc: Callable[[Any, Parts], None] = env["enc"]
    return enc


def _tag_writer(tagged: list[tuple[Any, Field[Any], Any, Any]]) -> Callable[[Any, Parts], None]:
    """Tagged fields as kio writes them: those at their default left out."""

    def write_tags(e: Any, a: Parts) -> None:
        present = []
        for tag, field, writer, implicit in tagged:
            v = getattr(e, field.name)
            if v == field.default or (field.default is MISSING and v == implicit):
                continue
            present.append((tag, writer, v))
        a(uvarint(len(present)))
        if present:
            out = io.BytesIO()
            for tag, writer, v in present:
                write_tagged_field(out, tag, writer, v)
            a(out.getvalue())

    return write_tags


class CompiledWriter:
    """A drop-in for kio's `entity_writer(entity_type)`: write(out, entity); and encode(entity),
    the bytes themselves (a response is framed from them without an intermediate stream)."""

    __slots__ = ("enc",)

    def __init__(self, entity_type: type) -> None:
        self.enc = _encoder(entity_type)  # enc(entity, append): what the response path calls

    def __call__(self, out: Any, entity: Any) -> None:
        out.write(self.encode(entity))

    def encode(self, entity: Any) -> bytes:
        parts: list[bytes] = []
        self.enc(entity, parts.append)
        return b"".join(parts)


def compiled_writer(entity_type: type) -> CompiledWriter:
    return CompiledWriter(entity_type)


def encode(entity_type: type, entity: Any) -> bytes:
    parts: list[bytes] = []
    _encoder(entity_type)(entity, parts.append)
    return b"".join(parts)
