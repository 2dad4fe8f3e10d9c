"""Produce v3-v13 requests read by hand, so that the record batches, nearly all of a
large request's bytes, are memoryview slices of the frame instead of copies: a 100 MiB
Produce is held once, not twice (kio copies every bytes field). Same objects as kio's
reader (property-tested against it in tests/test_protocol_codec.py)."""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Callable
from typing import Any, cast

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_HEAD = struct.Struct(">hi")  # acks, timeout


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: Any, pos: int, flexible: bool) -> None:
        self.buf, self.pos, self.flexible = memoryview(buf), pos, flexible

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def length(self, wide: struct.Struct) -> int:
        """A string / bytes / array length (-1: null)."""
        if self.flexible:
            return self.uvarint() - 1
        n = wide.unpack_from(self.buf, self.pos)[0]
        self.pos += wide.size
        return cast(int, n)

    def blob(self, wide: struct.Struct) -> memoryview | None:
        n = self.length(wide)
        if n < 0:
            if n != -1:
                raise ValueError(f"negative length {n}")
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise ValueError(f"{n} bytes announced, {len(self.buf) - self.pos} left")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def string(self, nullable: bool = False) -> str | None:
        raw = self.blob(_I16)
        if raw is None:
            if not nullable:
                raise ValueError("null where the schema wants a string")
            return None
        return str(raw, "utf-8")

    def count(self) -> int:
        n = self.length(_I32)
        if n < -1:
            raise ValueError(f"negative array length {n}")
        if n > len(self.buf) - self.pos:  # (every element takes at least a byte)
            raise ValueError(f"array of {n} items in {len(self.buf) - self.pos} bytes")
        return n

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()
            if self.pos > len(self.buf):
                raise ValueError("truncated tagged fields")


def reader(request_type: type, flexible: bool) -> Callable[[Any, int], tuple[Any, int]]:
    """A codec reader (buf, pos) -> (request, end) for one Produce version's kio classes."""
    import sys

    module = sys.modules[request_type.__module__]
    topic_type, partition_type = module.TopicProduceData, module.PartitionProduceData
    by_id = "topic_id" in topic_type.__dataclass_fields__  # v13 (KIP-516): topics by id

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        r = _Reader(buf, pos, flexible)
        transactional_id = r.string(nullable=True)
        acks, timeout = _HEAD.unpack_from(r.buf, r.pos)
        r.pos += _HEAD.size
        topics: tuple[Any, ...] | None = None
        n_topics = r.count()
        if n_topics >= 0:
            topic_list = []
            for _ in range(n_topics):
                topic_id: Any = None
                name: str | None = None
                if by_id:
                    if r.pos + 16 > len(r.buf):
                        raise ValueError("truncated topic id")
                    raw = bytes(r.buf[r.pos : r.pos + 16])
                    r.pos += 16
                    topic_id = uuid.UUID(bytes=raw) if any(raw) else None  # (kio: the zero uuid is None)
                else:
                    name = r.string()
                partitions: tuple[Any, ...] | None = None
                n = r.count()
                if n >= 0:
                    partition_list = []
                    for _ in range(n):
                        index = _I32.unpack_from(r.buf, r.pos)[0]
                        r.pos += 4
                        partition_list.append(partition_type(index=index, records=r.blob(_I32)))
                        r.skip_tags()
                    partitions = tuple(partition_list)
                r.skip_tags()
                topic_list.append(
                    topic_type(topic_id=topic_id, partition_data=partitions)
                    if by_id
                    else topic_type(name=name, partition_data=partitions)
                )
            topics = tuple(topic_list)
        r.skip_tags()
        return request_type(
            transactional_id=transactional_id,
            acks=acks,
            timeout=datetime.timedelta(milliseconds=timeout),
            topic_data=topics,
        ), r.pos

    return read
