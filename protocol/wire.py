"""The primitives of Kafka's request and response bodies that the generic codec
(protocol/messages.py) and the hand-written ones (protocol/offset_commit.py) share: unsigned
varints, tagged-field sections, the error a malformed body raises, and an already-encoded body.
"""

from __future__ import annotations

__all__ = ["MalformedRequest", "Parts", "Raw", "read_uvarint", "encode_uvarint", "skip_tagged_fields"]


class MalformedRequest(Exception):
    """The bytes do not decode as the request they claim to be."""


class Raw(bytes):
    """A response body that is already encoded (cached answers, hand-written codecs)."""


class Parts(list[bytes]):
    """What a response writer writes into: its pieces, joined once (writers only call write).
    (Here, not in messages.py, which mypyc compiles: a compiled class cannot subclass list.)"""

    __slots__ = ()
    write = list.append


def read_uvarint(buf: bytes | bytearray, pos: int, end: int | None = None) -> tuple[int, int]:
    """(value, next position) of an unsigned varint that must end before `end`."""
    end = len(buf) if end is None else end
    value = shift = 0
    while True:
        if pos >= end:
            raise MalformedRequest("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint too long")


def skip_tagged_fields(buf: bytes | bytearray, pos: int) -> int:
    """Past a tagged-field section whose fields are all to be ignored."""
    if buf[pos : pos + 1] == b"\0":  # none: what clients send
        return pos + 1
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    if pos > len(buf):
        raise MalformedRequest("truncated tagged fields")
    return pos


def encode_uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
