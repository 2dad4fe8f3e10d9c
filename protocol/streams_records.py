"""Codecs for the KIP-1071 streams-group records of `__consumer_offsets` (Kafka 4.4's bytes).

Key types (the key's leading int16), as Kafka 4.4's group-coordinator schemas define them:
17 StreamsGroupMetadata (the group epoch, metadata hash, validated topology epoch and the
assignment configs last used), 19 StreamsGroupMemberMetadata (a member's process, endpoint,
tags and topology epoch), 20 StreamsGroupTargetAssignmentMetadata (the assignment epoch),
21 StreamsGroupTargetAssignmentMember (a member's target tasks), 22
StreamsGroupCurrentMemberAssignment (a member's epochs, state, tasks and tasks pending
revocation), 23 StreamsGroupTopology (the topology the group runs). Type 18
(StreamsGroupPartitionMetadata, dropped before Kafka 4.1 shipped streams groups) is kept raw.

Keys are non-flexible (int16-length strings); values are version 0, flexible (compact
strings and arrays, tagged fields; unknown tags skipped so a newer Kafka's records load).
"""

from __future__ import annotations

from dataclasses import dataclass

from .consumer_records import (
    GroupKey,
    MemberKey,
    TargetAssignmentMetadata,
    key_codec,
    read_target_metadata,
    write_target_metadata,
)
from .record_codec import RecordDecodeError, RecordReader, RecordWriter, read_epochs_tag, write_epochs_tag

# (subtopology id, partitions) per subtopology with tasks, sorted by subtopology id
Tasks = tuple[tuple[str, tuple[int, ...]], ...]
# aligned with a Tasks: the epoch at which each active task was assigned (tag 0), or None
TaskEpochs = tuple[tuple[int, ...] | None, ...]
KeyValues = tuple[tuple[str, str], ...]


class StreamsGroupMetadataKey(GroupKey):
    __slots__ = ()


class StreamsGroupMemberMetadataKey(MemberKey):
    __slots__ = ()


class StreamsGroupTargetAssignmentMetadataKey(GroupKey):
    __slots__ = ()


class StreamsGroupTargetAssignmentMemberKey(MemberKey):
    __slots__ = ()


class StreamsGroupCurrentMemberAssignmentKey(MemberKey):
    __slots__ = ()


class StreamsGroupTopologyKey(GroupKey):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0
    validated_topology_epoch: int = -1  # tag 0
    last_assignment_configs: KeyValues | None = None  # tag 1
    stored_description_topology_epoch: int = -1  # tag 2 (KIP-1331)
    failed_description_topology_epoch: int = -1  # tag 3 (KIP-1331)


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: KeyValues = ()


class StreamsGroupTargetAssignmentMetadataValue(TargetAssignmentMetadata):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberValue:
    active_tasks: Tasks = ()
    standby_tasks: Tasks = ()
    warmup_tasks: Tasks = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's streams MemberState byte: 0 stable, 1 unrevoked tasks, 2 unreleased tasks, 127 unknown
    active_tasks: Tasks = ()
    standby_tasks: Tasks = ()
    warmup_tasks: Tasks = ()
    active_tasks_pending_revocation: Tasks = ()
    standby_tasks_pending_revocation: Tasks = ()
    warmup_tasks_pending_revocation: Tasks = ()
    active_task_epochs: TaskEpochs = ()  # AssignmentEpochs of active_tasks (KIP-1251)
    active_pending_epochs: TaskEpochs = ()  # ... of active_tasks_pending_revocation


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int = 0
    replication_factor: int = 0
    topic_configs: KeyValues = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    source_topics: tuple[int, ...] = ()  # indexes into the subtopology's source_topics
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()  # indexes into its repartition_source_topics


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyValue:
    epoch: int
    subtopologies: tuple[Subtopology, ...] = ()


_KEY_TYPES: dict[int, type[GroupKey | MemberKey]] = {
    17: StreamsGroupMetadataKey,
    19: StreamsGroupMemberMetadataKey,
    20: StreamsGroupTargetAssignmentMetadataKey,
    21: StreamsGroupTargetAssignmentMemberKey,
    22: StreamsGroupCurrentMemberAssignmentKey,
    23: StreamsGroupTopologyKey,
}
KEY_TYPES = tuple(_KEY_TYPES.values())
METADATA_KEY = StreamsGroupMetadataKey  # the group's epoch: a group ends with its tombstone


def is_streams_key_version(version: int) -> bool:
    return version in _KEY_TYPES


encode_key, decode_key = key_codec(_KEY_TYPES)


# ---------------------------------------------------------------- pieces


def _key_values(w: RecordWriter, kvs: KeyValues) -> None:
    w.array_len(len(kvs))
    for k, v in kvs:
        w.string(k)
        w.string(v)
        w.tags()


def _read_key_values(r: RecordReader) -> KeyValues:
    out = []
    for _ in range(r.array_len()):
        k, v = r.string() or "", r.string() or ""
        r.skip_tags()
        out.append((k, v))
    return tuple(out)


def _strings(w: RecordWriter, names: tuple[str, ...]) -> None:
    w.array_len(len(names))
    for n in names:
        w.string(n)


def _read_strings(r: RecordReader) -> tuple[str, ...]:
    return tuple(r.string() or "" for _ in range(r.array_len()))


def _int32s(w: RecordWriter, ns: tuple[int, ...]) -> None:
    w.array_len(len(ns))
    for n in ns:
        w.int32(n)


def _read_int32s(r: RecordReader) -> tuple[int, ...]:
    return tuple(r.int32() for _ in range(r.array_len()))


def _int16s(w: RecordWriter, ns: tuple[int, ...]) -> None:
    w.array_len(len(ns))
    for n in ns:
        w.int16(n)


def _read_int16s(r: RecordReader) -> tuple[int, ...]:
    return tuple(r.int16() for _ in range(r.array_len()))


def _tasks(w: RecordWriter, tasks: Tasks, epochs: TaskEpochs = ()) -> None:
    """[]TaskIds: subtopology id, partitions, and their AssignmentEpochs when known (current
    assignments' active tasks only)."""
    w.array_len(len(tasks))
    for i, (subtopology, partitions) in enumerate(tasks):
        w.string(subtopology)
        _int32s(w, partitions)
        write_epochs_tag(w, epochs[i] if i < len(epochs) else None)


def _read_tasks(r: RecordReader) -> tuple[Tasks, TaskEpochs]:
    out = []
    epochs: list[tuple[int, ...] | None] = []
    for _ in range(r.array_len()):
        subtopology = r.string() or ""
        partitions = _read_int32s(r)
        out.append((subtopology, partitions))
        epochs.append(read_epochs_tag(r, len(partitions)))
    return tuple(out), (tuple(epochs) if any(e is not None for e in epochs) else ())


def _topic_info(w: RecordWriter, t: TopicInfo) -> None:
    w.string(t.name)
    w.int32(t.partitions)
    w.int16(t.replication_factor)
    _key_values(w, t.topic_configs)
    w.tags()


def _read_topic_info(r: RecordReader) -> TopicInfo:
    name, partitions, rf = r.string() or "", r.int32(), r.int16()
    configs = _read_key_values(r)
    r.skip_tags()
    return TopicInfo(name, partitions, rf, configs)


def _int32_tag(w: RecordWriter, tag: int, n: int) -> None:
    w.uvarint(tag)
    w.uvarint(4)
    w.int32(n)


# ---------------------------------------------------------------- values


def encode_value(value: object) -> bytes:
    w = RecordWriter(0, True)
    t = type(value)
    if t is StreamsGroupMetadataValue:
        m: StreamsGroupMetadataValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        w.int32(m.epoch)
        w.int64(m.metadata_hash)
        # tagged fields at their defaults are not written
        tags = []
        if m.validated_topology_epoch != -1:
            tags.append(0)
        if m.last_assignment_configs is not None:
            tags.append(1)
        if m.stored_description_topology_epoch != -1:
            tags.append(2)
        if m.failed_description_topology_epoch != -1:
            tags.append(3)
        w.uvarint(len(tags))
        for tag in tags:
            if tag == 0:
                _int32_tag(w, 0, m.validated_topology_epoch)
            elif tag == 1:
                inner = RecordWriter(0, True)
                inner.out = bytearray()
                _key_values(inner, m.last_assignment_configs or ())
                w.uvarint(1)
                w.uvarint(len(inner.out))
                w.out += inner.out
            elif tag == 2:
                _int32_tag(w, 2, m.stored_description_topology_epoch)
            else:
                _int32_tag(w, 3, m.failed_description_topology_epoch)
        return bytes(w.out)
    if t is StreamsGroupMemberMetadataValue:
        v: StreamsGroupMemberMetadataValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        w.string(v.instance_id)
        w.string(v.rack_id)
        w.string(v.client_id)
        w.string(v.client_host)
        w.int32(v.rebalance_timeout_ms)
        w.int32(v.topology_epoch)
        w.string(v.process_id)
        if v.user_endpoint is None:
            w.out.append(0xFF)  # a null struct: int8 -1
        else:
            w.out.append(1)
            w.string(v.user_endpoint.host)
            w.out += (v.user_endpoint.port & 0xFFFF).to_bytes(2, "big")
            w.tags()
        _key_values(w, v.client_tags)
    elif t is StreamsGroupTargetAssignmentMetadataValue:
        return write_target_metadata(w, value)  # type: ignore[arg-type]  # the `t is` check above narrows the type
    elif t is StreamsGroupTargetAssignmentMemberValue:
        a: StreamsGroupTargetAssignmentMemberValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        _tasks(w, a.active_tasks)
        _tasks(w, a.standby_tasks)
        _tasks(w, a.warmup_tasks)
    elif t is StreamsGroupCurrentMemberAssignmentValue:
        c: StreamsGroupCurrentMemberAssignmentValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        w.int32(c.member_epoch)
        w.int32(c.previous_member_epoch)
        w.out.append(c.state & 0xFF)
        _tasks(w, c.active_tasks, c.active_task_epochs)
        _tasks(w, c.standby_tasks)
        _tasks(w, c.warmup_tasks)
        _tasks(w, c.active_tasks_pending_revocation, c.active_pending_epochs)
        _tasks(w, c.standby_tasks_pending_revocation)
        _tasks(w, c.warmup_tasks_pending_revocation)
    elif t is StreamsGroupTopologyValue:
        top: StreamsGroupTopologyValue = value  # type: ignore[assignment]  # the `t is` check above narrows the type; mypy cannot see it
        w.int32(top.epoch)
        w.array_len(len(top.subtopologies))
        for s in top.subtopologies:
            w.string(s.subtopology_id)
            _strings(w, s.source_topics)
            _strings(w, s.source_topic_regex)
            w.array_len(len(s.state_changelog_topics))
            for ti in s.state_changelog_topics:
                _topic_info(w, ti)
            _strings(w, s.repartition_sink_topics)
            w.array_len(len(s.repartition_source_topics))
            for ti in s.repartition_source_topics:
                _topic_info(w, ti)
            w.array_len(len(s.copartition_groups))
            for g in s.copartition_groups:
                _int16s(w, g.source_topics)
                _int16s(w, g.source_topic_regex)
                _int16s(w, g.repartition_source_topics)
                w.tags()
            w.tags()
    else:
        raise TypeError(f"not a streams-group record value: {value!r}")
    w.tags()
    return bytes(w.out)


def decode_value(key: object, data: bytes) -> object:
    r = RecordReader(data, f"{type(key).__name__} value")
    if r.int16() < 0:
        raise r.fail("negative value version")
    r.flexible = True  # every version is flexible (KIP-915: newer ones add only tagged fields)
    t = type(key)
    value: object
    if t is StreamsGroupMetadataKey:
        epoch, digest = r.int32(), r.int64()
        validated, configs, stored, failed = -1, None, -1, -1
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            data = r.take(r.uvarint())
            inner = RecordReader(data, f"StreamsGroupMetadataValue tag {tag}")
            inner.flexible = True
            if tag == 0:
                validated = inner.int32()
            elif tag == 1:
                n = inner.uvarint() - 1
                if n >= 0:
                    items = []
                    for _ in range(n):
                        k, v = inner.string() or "", inner.string() or ""
                        inner.skip_tags()
                        items.append((k, v))
                    configs = tuple(items)
            elif tag == 2:
                stored = inner.int32()
            elif tag == 3:
                failed = inner.int32()
            else:
                continue
            inner.end()
        r.end()
        return StreamsGroupMetadataValue(epoch, digest, validated, configs, stored, failed)
    if t is StreamsGroupMemberMetadataKey:
        instance_id, rack_id, client_id, client_host = r.string(True), r.string(True), r.string(), r.string()
        rebalance_timeout, topology_epoch, process_id = r.int32(), r.int32(), r.string()
        endpoint = None
        present = r.take(1)[0]
        if present != 0xFF:
            host = r.string() or ""
            port = int.from_bytes(r.take(2), "big")
            r.skip_tags()
            endpoint = Endpoint(host, port)
        tags = _read_key_values(r)
        value = StreamsGroupMemberMetadataValue(
            instance_id,
            rack_id,
            client_id or "",
            client_host or "",
            rebalance_timeout,
            topology_epoch,
            process_id or "",
            endpoint,
            tags,
        )
    elif t is StreamsGroupTargetAssignmentMetadataKey:
        return read_target_metadata(StreamsGroupTargetAssignmentMetadataValue, r)
    elif t is StreamsGroupTargetAssignmentMemberKey:
        value = StreamsGroupTargetAssignmentMemberValue(_read_tasks(r)[0], _read_tasks(r)[0], _read_tasks(r)[0])
    elif t is StreamsGroupCurrentMemberAssignmentKey:
        epoch, previous = r.int32(), r.int32()
        state = r.take(1)[0]
        active, active_epochs = _read_tasks(r)
        standby, warmup = _read_tasks(r)[0], _read_tasks(r)[0]
        active_pending, pending_epochs = _read_tasks(r)
        standby_pending, warmup_pending = _read_tasks(r)[0], _read_tasks(r)[0]
        value = StreamsGroupCurrentMemberAssignmentValue(
            epoch,
            previous,
            state if state < 128 else state - 256,
            active,
            standby,
            warmup,
            active_pending,
            standby_pending,
            warmup_pending,
            active_epochs,
            pending_epochs,
        )
    elif t is StreamsGroupTopologyKey:
        epoch = r.int32()
        subtopologies = []
        for _ in range(r.array_len()):
            sid = r.string() or ""
            sources, regexes = _read_strings(r), _read_strings(r)
            changelogs = tuple(_read_topic_info(r) for _ in range(r.array_len()))
            sinks = _read_strings(r)
            repartition = tuple(_read_topic_info(r) for _ in range(r.array_len()))
            groups = []
            for _ in range(r.array_len()):
                g = CopartitionGroup(_read_int16s(r), _read_int16s(r), _read_int16s(r))
                r.skip_tags()
                groups.append(g)
            r.skip_tags()
            subtopologies.append(Subtopology(sid, sources, regexes, changelogs, sinks, repartition, tuple(groups)))
        value = StreamsGroupTopologyValue(epoch, tuple(subtopologies))
    else:
        raise RecordDecodeError(f"no value schema for {key!r}")
    r.skip_tags()
    r.end()
    return value
