"""The primitives of Kafka's internal-topic record schemas (`__consumer_offsets`,
`__share_group_state`, `__transaction_state`): a key or value starts with its int16 version,
then fields as the generated Kafka `*Key` / `*Value` classes write them, non-flexible (int16
string lengths, int32 array lengths) or flexible (compact lengths, tagged fields). The record
codecs (group_records, consumer_records, share_records, transaction_records) build on these.
"""

from __future__ import annotations

import struct
from typing import Literal, overload, cast

__all__ = ["RecordDecodeError", "RecordWriter", "RecordReader"]

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class RecordDecodeError(ValueError):
    """Bytes that are not a valid key or value of an internal topic's record."""


class RecordWriter:
    __slots__ = ("out", "flexible")

    def __init__(self, version: int, flexible: bool) -> None:
        self.out = bytearray(_H.pack(version))
        self.flexible = flexible

    def uvarint(self, n: int) -> None:
        while n > 0x7F:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def int16(self, n: int) -> None:
        self.out += _H.pack(n)

    def int32(self, n: int) -> None:
        self.out += _I.pack(n)

    def int64(self, n: int) -> None:
        self.out += _Q.pack(n)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.out.append(0)
            else:
                self.int16(-1)
            return
        b = s.encode()
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            if len(b) > 0x7FFF:
                raise ValueError(f"string of {len(b)} bytes is too long for an int16 length")
            self.int16(len(b))
        self.out += b

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.int32(len(b))
        self.out += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def tags(self) -> None:
        if self.flexible:
            self.out.append(0)  # no tagged fields


class RecordReader:
    __slots__ = ("buf", "pos", "flexible", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf if type(buf) is bytes else bytes(buf)
        self.pos = 0
        self.flexible = False
        self.what = what

    def fail(self, why: str) -> RecordDecodeError:
        return RecordDecodeError(f"{self.what}: {why} at byte {self.pos} of {len(self.buf)}")

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise self.fail(f"truncated: need {n} bytes")
        b = self.buf[self.pos : end]
        self.pos = end
        return b

    def _fixed(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise self.fail(f"truncated: need {s.size} bytes")
        (n,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return cast(int, n)

    def int16(self) -> int:
        return self._fixed(_H)

    def int32(self) -> int:
        return self._fixed(_I)

    def int64(self) -> int:
        return self._fixed(_Q)

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            if self.pos >= len(self.buf):
                raise self.fail("truncated varint")
            b = self.buf[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 28:
                raise self.fail("varint longer than 5 bytes")

    @overload
    def string(self, nullable: Literal[False] = False) -> str: ...
    @overload
    def string(self, nullable: Literal[True]) -> str | None: ...
    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.fail(f"bad string length {n}")
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as e:
            raise self.fail(f"invalid UTF-8 ({e.reason})") from None

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise self.fail(f"bad bytes length {n}")
        return bytes(self.take(n))

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0 or n > len(self.buf) - self.pos:  # each element takes >= 1 byte
            raise self.fail(f"bad array length {n}")
        return n

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag number: none are defined for these schemas
                self.take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise self.fail(f"{len(self.buf) - self.pos} trailing bytes")


def write_int32s(w: RecordWriter, ns: tuple[int, ...]) -> None:
    """A compact []int32 (Partitions, AssignmentEpochs): its length, then every element
    packed at once (an assignment holds thousands)."""
    w.array_len(len(ns))
    w.out += struct.pack(f">{len(ns)}i", *ns)


def read_int32s(r: RecordReader, n: int) -> tuple[int, ...]:
    """`n` int32s (n from the array length before them; a null array reads as none)."""
    if n <= 0:
        return ()
    return struct.unpack(f">{n}i", r.take(4 * n))


def write_epochs_tag(w: RecordWriter, epochs: tuple[int, ...] | None) -> None:
    """The tagged fields of an assignment's entry (a topic's partitions, a subtopology's
    tasks): AssignmentEpochs (tag 0, KIP-1251, a nullable []int32 aligned with the entry's
    partitions) when known; none when not, as Kafka before 4.3 writes it."""
    if epochs is None:
        w.tags()
        return
    inner = RecordWriter(0, True)
    inner.out = bytearray()
    write_int32s(inner, epochs)
    w.uvarint(1)  # one tagged field
    w.uvarint(0)  # its tag
    w.uvarint(len(inner.out))
    w.out += inner.out


def read_epochs_tag(r: RecordReader, partitions: int) -> tuple[int, ...] | None:
    """The entry's AssignmentEpochs (one per partition), or None if it has none; other
    tagged fields are skipped."""
    epochs = None
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        data = r.take(r.uvarint())
        if tag != 0:
            continue
        t = RecordReader(data, "AssignmentEpochs")
        t.flexible = True
        n = t.uvarint() - 1
        if n >= 0:
            if n != partitions:
                raise r.fail(f"{n} assignment epochs for {partitions} partitions")
            epochs = read_int32s(t, n)
        t.end()
    return epochs
