"""OffsetCommit (api key 8) request and response, every version (0-10), by hand.

Every committing consumer sends one of these every few seconds, and each answer waits for
an fsync, so the whole cost of a commit is on the server's critical path. kio's decoder
needs a bounds-check walk before it (see messages.py) and builds an object per field;
this direct reader does neither (bench/bench_commit_path.py compares them); the response
is a handful of ints.
Layouts follow Kafka's OffsetCommitRequest.json / OffsetCommitResponse.json; tests check
them against kio and, for the retired v0/v1, aiokafka's encoders. v10 (Kafka 4.1, KIP-848
era) names topics by id instead of name: the reader leaves the ids in place of names and
resolve_topic_ids() puts names there once the broker's topics are known.

The reader never allocates from a declared length: it builds lists element by element and
fails on the first byte that is not there, so a forged count cannot cost memory.
"""

from __future__ import annotations

import operator
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, cast, overload

from .wire import MalformedRequest, Raw, encode_uvarint, read_uvarint, skip_tagged_fields

API_KEY = 8
VERSIONS = range(0, 11)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32_I64 = struct.Struct(">iq")
_I32_I64_I32 = struct.Struct(">iqi")
_PARTITION_ERROR = struct.Struct(">ih")
# A v8+ request partition with empty metadata (length byte 1) and no tagged fields (0):
# partition index, committed offset, leader epoch, then the two bytes _read_compact checks.
_PLAIN_PARTITION = struct.Struct(">iqi2x")
_ONES = [b"\1" * n for n in range(127)]
_ZEROS = [bytes(n) for n in range(127)]

# Named tuples built per request skip their generated __new__ (half the cost of building
# one: a Python-level call) and are made as tuples of their class.
_new = tuple.__new__
_PARTITION_OF = operator.itemgetter(1)  # PartitionCommit.partition


class PartitionCommit(NamedTuple):  # a tuple: one is built per committed partition
    topic: str | uuid.UUID  # v10: the topic id until resolved, and still when no topic has it
    partition: int
    offset: int
    leader_epoch: int  # -1: unknown (always, before v6)
    metadata: str | None


class OffsetCommitRequest(NamedTuple):
    group_id: str
    generation: int  # generation id (classic groups) or member epoch; -1 before v1
    member_id: str
    instance_id: str | None
    retention_ms: int  # v2-v4; -1: the broker's offsets.retention.minutes
    partitions: list[PartitionCommit]  # in request order
    topics: list[tuple[str | uuid.UUID, int]]  # (name, or v10's id, how many of the partitions are its)
    topic_ids: list[uuid.UUID] | None  # v10, once resolved: each topic's id as sent, for the response


def resolve_topic_ids(request: OffsetCommitRequest, name_of: Callable[[uuid.UUID], str | None]) -> OffsetCommitRequest:
    """A v10 request with topic names where `name_of(topic id)` knows them; an unknown id
    stays in place of its name (its partitions are answered UNKNOWN_TOPIC_ID)."""
    # Unresolved, a v10 request's topic "names" are the ids _read() put there.
    ids = cast("list[uuid.UUID]", [t for t, _ in request.topics])
    names: dict[str | uuid.UUID, str | uuid.UUID] = {t: name_of(t) or t for t in ids}  # an unknown id stays
    return request._replace(
        partitions=[p._replace(topic=names[p.topic]) for p in request.partitions],
        topics=[(names[t], n) for t, n in request.topics],
        topic_ids=ids,
    )


def _length(buf: bytes, pos: int, flexible: bool, fixed: struct.Struct) -> tuple[int, int]:
    """A string's or array's length: compact (unsigned varint, minus one) or `fixed`."""
    if flexible:
        n = buf[pos]
        if n < 0x80:
            return n - 1, pos + 1
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    return fixed.unpack_from(buf, pos)[0], pos + fixed.size


@overload
def _string(buf: bytes, pos: int, flexible: bool, nullable: Literal[False] = False) -> tuple[str, int]: ...
@overload
def _string(buf: bytes, pos: int, flexible: bool, nullable: Literal[True]) -> tuple[str | None, int]: ...
def _string(buf: bytes, pos: int, flexible: bool, nullable: bool = False) -> tuple[str | None, int]:
    if flexible and buf[pos] < 0x80:  # a compact string shorter than 127 bytes, inline
        n = buf[pos] - 1
        pos += 1
    else:
        n, pos = _length(buf, pos, flexible, _I16)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise MalformedRequest("OffsetCommit request: null or negative-length string")
    end = pos + n
    if end > len(buf):
        raise MalformedRequest("OffsetCommit request: truncated string")
    return buf[pos:end].decode(), end


def _count(buf: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible and buf[pos] < 0x80:  # a compact array shorter than 127, inline
        n, pos = buf[pos] - 1, pos + 1
    else:
        n, pos = _length(buf, pos, flexible, _I32)
    if n < 0:
        raise MalformedRequest("OffsetCommit request: null array")
    return n, pos


def read_offset_commit(buf: bytes, pos: int, version: int) -> OffsetCommitRequest:
    """The request body of `version` starting at `pos` (after the request header)."""
    return (8 <= version <= 9 and _read_compact(buf, pos)) or _read_checked(buf, pos, version)


def _read_checked(buf: bytes, pos: int, version: int) -> OffsetCommitRequest:
    """_read(), its failures said as MalformedRequest."""
    try:
        return _read(buf, pos, version)
    except (IndexError, struct.error) as e:
        raise MalformedRequest("OffsetCommit request: truncated body") from e
    except UnicodeDecodeError as bad:  # (its own name: a compiled function gives a name one type)
        raise MalformedRequest("OffsetCommit request: string is not UTF-8") from bad


def _read(buf: bytes, pos: int, version: int) -> OffsetCommitRequest:
    # Straight-line code with tuple returns: a cursor object's method calls cost twice as much.
    flexible = version >= 8
    group_id, pos = _string(buf, pos, flexible)
    generation, member_id, retention_ms = -1, "", -1
    instance_id: str | None = None
    if version >= 1:
        generation = _I32.unpack_from(buf, pos)[0]
        member_id, pos = _string(buf, pos + 4, flexible)
    if version >= 7:
        instance_id, pos = _string(buf, pos, flexible, nullable=True)
    if 2 <= version <= 4:
        retention_ms = _I64.unpack_from(buf, pos)[0]
        pos += 8
    with_epoch = version >= 6
    by_id = version >= 10
    topics: list[tuple[str | uuid.UUID, int]] = []
    name: str | uuid.UUID
    partitions: list[PartitionCommit] = []
    metadata: str | None
    n_topics, pos = _count(buf, pos, flexible)
    for _ in range(n_topics):
        if by_id:
            if pos + 16 > len(buf):
                raise MalformedRequest("OffsetCommit request: truncated topic id")
            # the id stands where the name goes until resolve_topic_ids() (PartitionCommit.topic)
            name, pos = uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16
        else:
            name, pos = _string(buf, pos, flexible)
        n_partitions, pos = _count(buf, pos, flexible)
        before = len(partitions)
        for _ in range(n_partitions):
            if with_epoch:
                partition, offset, epoch = _I32_I64_I32.unpack_from(buf, pos)
                pos += 16
            else:
                partition, offset = _I32_I64.unpack_from(buf, pos)
                epoch = -1
                pos += 12 if version != 1 else 20  # v1: a commit timestamp Kafka ignores too
            if flexible and buf[pos] == 1:  # empty metadata: the usual commit
                metadata, pos = "", pos + 1
            else:
                metadata, pos = _string(buf, pos, flexible, nullable=True)
            if flexible:
                pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)  # (0: none, the usual)
            partitions.append(_new(PartitionCommit, (name, partition, offset, epoch, metadata)))
        topics.append((name, len(partitions) - before))
        if flexible:
            pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    if pos > len(buf):
        raise MalformedRequest("OffsetCommit request: truncated body")
    return _new(
        OffsetCommitRequest, (group_id, generation, member_id, instance_id, retention_ms, partitions, topics, None)
    )


def _read_compact(buf: bytes, pos: int) -> OffsetCommitRequest | None:
    """v8+ as clients send it: every string and array under 127 (one length byte), no
    tagged fields, metadata empty or short. None for anything else, truncated or invalid
    bodies included: _read() then reads it, or says what is wrong. The same layout as
    _read(), with the reads inline: a commit's decoding is on every commit's path."""
    try:
        n = buf[pos] - 1  # group id
        if not 0 <= n < 127:
            return None
        pos += 1
        group_id = buf[pos : pos + n].decode()
        generation = _I32.unpack_from(buf, pos + n)[0]
        pos += n + 4
        n = buf[pos] - 1  # member id
        if not 0 <= n < 127:
            return None
        pos += 1
        member_id = buf[pos : pos + n].decode()
        pos += n
        n = buf[pos] - 1  # group instance id, nullable
        if n == -1:
            instance_id = None
        elif 0 <= n < 127:
            instance_id = buf[pos + 1 : pos + 1 + n].decode()
        else:
            return None
        pos += 1 + n if n > 0 else 1
        topics = []
        partitions: list[PartitionCommit] = []
        # (compiled, a module's names are dict lookups: taken once, not per partition)
        new, commit, plain = _new, PartitionCommit, _PLAIN_PARTITION
        n_topics = buf[pos] - 1
        if not 0 <= n_topics < 127:
            return None
        pos += 1
        for _ in range(n_topics):
            n = buf[pos] - 1
            if not 0 <= n < 127:
                return None
            name = buf[pos + 1 : pos + 1 + n].decode()
            pos += 1 + n
            n_partitions = buf[pos] - 1
            if not 0 <= n_partitions < 127:
                return None
            pos += 1
            end = pos + 18 * n_partitions
            if buf[pos + 16 : end : 18] == _ONES[n_partitions] and buf[pos + 17 : end : 18] == _ZEROS[n_partitions]:
                # Every partition's metadata empty and none with tagged fields, as clients
                # commit: fixed 18-byte entries, read in one pass (a truncated run is a
                # shorter slice, so it fails the check above and is read below).
                partitions += [
                    new(commit, (name, partition, offset, epoch, ""))
                    for partition, offset, epoch in plain.iter_unpack(buf[pos:end])
                ]
                pos = end
                unread = 0
            else:
                unread = n_partitions
            for _ in range(unread):
                partition, offset, epoch = _I32_I64_I32.unpack_from(buf, pos)
                n = buf[pos + 16] - 1  # metadata, nullable
                pos += 17
                if n == -1:
                    metadata = None
                elif 0 <= n < 127:
                    metadata = buf[pos : pos + n].decode() if n else ""
                    pos += n
                else:
                    return None
                if buf[pos] != 0:  # tagged fields
                    return None
                pos += 1
                partitions.append(new(commit, (name, partition, offset, epoch, metadata)))
            if buf[pos] != 0:
                return None
            pos += 1
            topics.append((name, n_partitions))
        if buf[pos] != 0 or pos + 1 > len(buf):
            return None
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return _new(OffsetCommitRequest, (group_id, generation, member_id, instance_id, -1, partitions, topics, None))


def reader(version: int) -> Callable[[bytes, int], tuple[OffsetCommitRequest, None]]:
    """A codec-style reader, (buf, pos) -> (request, None), for protocol.messages."""

    def read(buf: bytes, pos: int) -> tuple[OffsetCommitRequest, None]:
        return _read_checked(buf, pos, version), None

    def read_flexible(buf: bytes, pos: int) -> tuple[OffsetCommitRequest, None]:
        return _read_compact(buf, pos) or _read_checked(buf, pos, version), None  # (read_offset_commit, inline)

    return read_flexible if 8 <= version <= 9 else read


_UVARINT = [bytes((n,)) for n in range(128)]  # compact lengths below 128: one byte
_PARTITION_ERROR_NO_TAGS = struct.Struct(">ihb")


# A member commits the same partitions again and again, and gets the same answer.
_responses: dict[tuple[Any, ...], Raw] = {}


def write_response_to(
    request: OffsetCommitRequest, version: int, errors: list[int], refused_first: bool = False
) -> Raw:
    """The response body to `request`: one error code per partition, in request order (with
    `refused_first`, in Kafka's: answered_first)."""
    key = (
        version,
        refused_first,
        *request.topics,
        *map(_PARTITION_OF, request.partitions),
        *errors,
    )  # (no Python frame)
    if version >= 10:  # a topic deleted and created again has the same name and a new id
        key += tuple(request.topic_ids or ())
    body = _responses.get(key)
    if body is None:
        at = 0
        topics: list[tuple[str | uuid.UUID, list[tuple[int, int]]]] = []
        names: Sequence[str | uuid.UUID] = (
            request.topic_ids if version >= 10 and request.topic_ids is not None else [t for t, _ in request.topics]
        )
        for name, (_, n) in zip(names, request.topics):
            topics.append(
                (name, [(p.partition, e) for p, e in zip(request.partitions[at : at + n], errors[at : at + n])])
            )
            at += n
        if refused_first and any(e in ANSWERED_FIRST for e in errors):
            topics = answered_first(topics)
        body = Raw(write_offset_commit_response(version, topics))
        if len(_responses) >= 10_000:
            _responses.clear()
        _responses[key] = body
    return body


# What KafkaApis.handleOffsetCommitRequest answers itself before it asks the group coordinator:
# an unknown topic id, a topic not authorized (READ), an unknown topic or partition.
ANSWERED_FIRST = frozenset({100, 29, 3})


def answered_first(
    topics: list[tuple[str | uuid.UUID, list[tuple[int, int]]]],
) -> list[tuple[str | uuid.UUID, list[tuple[int, int]]]]:
    """Kafka's order of a commit's answer when KafkaApis refused some partitions itself
    (OffsetCommitResponse.Builder): those first, in request order, a topic's in one entry
    where its first one is; then the group coordinator's answers, added to their topic's
    entry if it has one, else after."""
    entries: dict[str | uuid.UUID, list[tuple[int, int]]] = {}
    for name, partitions in topics:
        refused = [p for p in partitions if p[1] in ANSWERED_FIRST]
        if refused:
            entries.setdefault(name, []).extend(refused)
    for name, partitions in topics:
        entries.setdefault(name, []).extend(p for p in partitions if p[1] not in ANSWERED_FIRST)
    return [(name, partitions) for name, partitions in entries.items() if partitions]


def write_offset_commit_response(
    version: int, topics: Sequence[tuple[str | uuid.UUID, list[tuple[int, int]]]]
) -> bytes:
    """The response body: (topic, [(partition, error code)]) in request order.
    v0-v2: topics; v3+: throttle time first; v8+: flexible; v10: topics by id (a UUID)."""
    out = bytearray(b"\0\0\0\0" if version >= 3 else b"")  # throttle_time_ms = 0
    if version >= 8:
        out += _compact_length(len(topics))
        for name, partitions in topics:
            if version >= 10:
                out += cast("uuid.UUID", name).bytes  # v10 names topics by id
            else:
                raw = cast("str", name).encode()
                out += _compact_length(len(raw))
                out += raw
            out += _compact_length(len(partitions))
            for partition, error in partitions:
                out += _PARTITION_ERROR_NO_TAGS.pack(partition, error, 0)
            out.append(0)  # no tagged fields
        out.append(0)
    else:
        out += _I32.pack(len(topics))
        for name, partitions in topics:
            raw = cast("str", name).encode()  # by name before v10
            out += _I16.pack(len(raw))
            out += raw
            out += _I32.pack(len(partitions))
            for partition, error in partitions:
                out += _PARTITION_ERROR.pack(partition, error)
    return bytes(out)


def _compact_length(n: int) -> bytes:
    return _UVARINT[n + 1] if n < 127 else encode_uvarint(n + 1)
