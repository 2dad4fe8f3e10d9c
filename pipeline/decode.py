"""`__consumer_offsets` records into typed columns (Arrow record batches), no Spark needed.

Keys and values are decoded by protocol.group_records, the coordinator's own codec. One
output schema covers the three kinds of row: `commit` (an OffsetCommit record), `group`
(a GroupMetadata record: one generation's membership) and `error` (a bad batch or an
undecodable record, with its file). Columns of another kind are null. A null value is a
tombstone: a deleted offset, or a deleted group.

Members' partitions: a classic group's are its members' `consumer` protocol assignments
(ConsumerProtocolAssignment in the GroupMetadata value). KIP-848 consumer groups have no
GroupMetadata record: their membership is in member records (ConsumerGroupMemberMetadata),
their "generation" is the group epoch (ConsumerGroupMetadata), and a member's partitions are
its target assignment for that epoch (ConsumerGroupTargetAssignmentMember, topic ids named by
ConsumerGroupPartitionMetadata where the log has it, else by the data dir's topic catalog: Kafka
4.1+ writes a metadata hash instead), which the member reaches once reconciled. Each epoch record
gives one `group` row of group_type `consumer`, with the members the group has once the batch
that carries it is applied (a heartbeat's records are one batch, and a joining member's
record may come after the epoch's in it); no leader, no state timestamp.

Offsets committed inside a transaction (TxnOffsetCommit: a transactional batch) count only
once the producer's commit marker follows in the same partition, as the coordinator applies
them; aborted ones, and ones whose marker is not (yet) in the files read, are left out.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, cast

import pyarrow as pa

from protocol.consumer_protocol import ConsumerProtocolError, read_assignment
from protocol.consumer_records import (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
)
from protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    decode_key,
    decode_value,
)

from protocol.record_batch import COMMIT_MARKER, marker_type

from .segments import BadBatch, SegmentFile, read_segment, topic_names

PARTITION = pa.struct([("topic", pa.string()), ("partition", pa.int32())])
MEMBER = pa.struct(
    [
        ("member_id", pa.string()),
        ("group_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_host", pa.string()),
        ("session_timeout", pa.int32()),
        ("rebalance_timeout", pa.int32()),
        ("assignment_bytes", pa.int32()),
        ("subscription_bytes", pa.int32()),
        ("partitions", pa.list_(PARTITION)),
    ]
)
KEY_FIELDS = [("group", pa.string())]
COMMIT_FIELDS = [
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("leader_epoch", pa.int32()),
    ("metadata", pa.string()),
    ("commit_timestamp", pa.int64()),
    ("expire_timestamp", pa.int64()),
]
GROUP_FIELDS = [
    ("group_type", pa.string()),
    ("generation", pa.int32()),
    ("protocol_type", pa.string()),
    ("protocol", pa.string()),
    ("leader", pa.string()),
    ("state_timestamp", pa.int64()),
    ("member_count", pa.int32()),
    ("members", pa.list_(MEMBER)),
]
COMMON_FIELDS = [
    ("tombstone", pa.bool_()),
    ("log_partition", pa.int32()),
    ("log_offset", pa.int64()),
    ("batch_offset", pa.int64()),
    ("record_timestamp", pa.int64()),
    ("file", pa.string()),
    ("byte_start", pa.int64()),
    ("byte_end", pa.int64()),
    ("error", pa.string()),
]
SCHEMA = pa.schema([("kind", pa.string()), *KEY_FIELDS, *COMMIT_FIELDS, *GROUP_FIELDS, *COMMON_FIELDS])
# Columns of each kind, in the order the row tuples below hold them.
COMMIT_COLUMNS = [
    "group",
    *(n for n, _ in COMMIT_FIELDS),
    "tombstone",
    "log_partition",
    "log_offset",
    "batch_offset",
    "record_timestamp",
]
GROUP_COLUMNS = [
    "group",
    *(n for n, _ in GROUP_FIELDS),
    "tombstone",
    "log_partition",
    "log_offset",
    "batch_offset",
    "record_timestamp",
]
ERROR_COLUMNS = ["log_partition", "log_offset", "file", "byte_start", "byte_end", "error"]
BATCH_ROWS = 65_536
_NO_VALUE = (None,) * 5
_V3 = struct.Struct(">hqih")  # OffsetCommitValue v3: version, offset, leader epoch, metadata length
_INT64 = struct.Struct(">q")


def commit_value_fields(key: OffsetCommitKey, data: bytes) -> tuple[Any, ...]:
    """(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp) of an OffsetCommitValue.

    Fast path for v3 (what Kafka and this server write) straight into a tuple; every other
    version through protocol.group_records. tests/pipeline/test_decode.py holds them equal."""
    n = len(data)
    if n >= 24 and data[1] == 3 and data[0] == 0:
        _, offset, epoch, mlen = _V3.unpack_from(data)
        if 24 + mlen == n and mlen >= 0:
            try:
                return (
                    offset,
                    epoch,
                    data[16 : 16 + mlen].decode() if mlen else "",
                    _INT64.unpack_from(data, n - 8)[0],
                    -1,
                )
            except UnicodeDecodeError:
                pass  # the codec reports it
    v = cast(OffsetCommitValue, decode_value(key, data))
    return v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp


_NO_GROUP: tuple[Any, ...] = ("classic",) + (None,) * 5 + (0, [], True)
_NO_CONSUMER_GROUP: tuple[Any, ...] = ("consumer",) + (None,) * 5 + (0, [], True)


def _assigned(protocol_type: str | None, assignment: bytes) -> list[dict[str, Any]]:
    """The partitions a `consumer` protocol assignment holds ([] for other protocols, or
    bytes that are not one: the group's record is still counted)."""
    if protocol_type != "consumer" or not assignment:
        return []
    try:
        return [{"topic": t, "partition": p} for t, ps in read_assignment(assignment) for p in ps]
    except ConsumerProtocolError:
        return []


def _member(m: MemberMetadata, protocol_type: str | None) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "session_timeout": m.session_timeout,
        "rebalance_timeout": m.rebalance_timeout,
        "assignment_bytes": len(m.assignment),
        "subscription_bytes": len(m.subscription),
        "partitions": _assigned(protocol_type, m.assignment),
    }


def _consumer_member(member_id: str, m: ConsumerGroupMemberMetadataValue) -> dict[str, Any]:
    classic = m.classic_member_metadata
    return {
        "member_id": member_id,
        "group_instance_id": m.instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "session_timeout": classic and classic.session_timeout_ms,
        "rebalance_timeout": m.rebalance_timeout_ms,
        "assignment_bytes": None,
        "subscription_bytes": None,
        "partitions": [],
    }


def _arrow(kind: str, columns: dict[str, list[Any]]) -> pa.RecordBatch:
    """Columns of one kind of row as a batch of the full SCHEMA (the other kinds' columns null)."""
    n = len(next(iter(columns.values())))
    arrays = [
        pa.repeat(pa.scalar(kind), n)
        if f.name == "kind"
        else pa.array(columns[f.name], f.type)
        if f.name in columns
        else pa.nulls(n, f.type)
        for f in SCHEMA
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def _transpose(names: list[str], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    return dict(zip(names, map(list, zip(*rows))))


def decode_segments(files: Iterable[SegmentFile], batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Arrow batches (SCHEMA) for every record of these `__consumer_offsets` segments.

    Keys repeat a lot in `__consumer_offsets`: each distinct key is decoded once. Commits,
    nearly all of the rows, go straight into column lists; the rare group and error rows
    are kept as tuples."""
    keys: dict[bytes, object] = {}
    commits: dict[str, list[Any]] = {name: [] for name in COMMIT_COLUMNS}
    (
        c_group,
        c_topic,
        c_partition,
        c_offset,
        c_epoch,
        c_metadata,
        c_commit_ts,
        c_expire_ts,
        c_tombstone,
        c_log_partition,
        c_log_offset,
        c_batch,
        c_ts,
    ) = (commits[name].append for name in COMMIT_COLUMNS)
    groups: list[tuple[Any, ...]] = []
    errors: list[tuple[Any, ...]] = []
    # (log partition, producer id) -> transactional commit rows
    pending: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    consumer_members: dict[str, dict[str, dict[str, Any]]] = {}  # consumer group -> member id -> MEMBER of it
    consumer_topics: dict[str, dict[uuid.UUID, str]] = {}  # consumer group -> topic id -> name (its partition metadata)
    consumer_targets: dict[str, dict[str, tuple[Any, ...]]] = {}  # consumer group -> member id -> target partitions
    epochs: list[tuple[Any, ...]] = []  # a batch's consumer-group epoch records, made rows once the batch is applied
    catalogs: dict[Path, dict[str, str]] = {}  # data dir -> topic id -> name, read when first needed
    for seg in files:
        lp = seg.partition
        for item in read_segment(seg, markers=True):
            if isinstance(item, BadBatch):
                errors.append((lp, item.base_offset, seg.path, item.position, item.end, item.describe()))
                continue
            h, records = item
            if h.is_control:
                rows = pending.pop((lp, h.producer_id), None)
                if rows and records and marker_type(records[0].key) == COMMIT_MARKER:
                    for row in rows:
                        for name, value in zip(COMMIT_COLUMNS, row):
                            commits[name].append(value)
                continue
            txn_rows = pending.setdefault((lp, h.producer_id), []) if h.is_transactional else None
            for r in records:
                raw = r.key
                if raw is None:
                    continue
                try:
                    k = keys.get(raw)
                    if k is None:
                        k = keys[raw] = decode_key(raw)
                    if type(k) is OffsetCommitKey:
                        v = r.value
                        offset, epoch, metadata, commit_ts, expire_ts = (
                            _NO_VALUE if v is None else commit_value_fields(k, v)
                        )
                        if txn_rows is not None:
                            txn_rows.append(
                                (
                                    k.group,
                                    k.topic,
                                    k.partition,
                                    offset,
                                    epoch,
                                    metadata,
                                    commit_ts,
                                    expire_ts,
                                    v is None,
                                    lp,
                                    r.offset,
                                    h.base_offset,
                                    r.timestamp,
                                )
                            )
                            continue
                        c_group(k.group)
                        c_topic(k.topic)
                        c_partition(k.partition)
                        c_offset(offset)
                        c_epoch(epoch)
                        c_metadata(metadata)
                        c_commit_ts(commit_ts)
                        c_expire_ts(expire_ts)
                        c_tombstone(v is None)
                        c_log_partition(lp)
                        c_log_offset(r.offset)
                        c_batch(h.base_offset)
                        c_ts(r.timestamp)
                    elif type(k) is GroupMetadataKey:
                        g = cast("GroupMetadataValue | None", decode_value(k, r.value))
                        tail = (
                            _NO_GROUP
                            if g is None
                            else (
                                "classic",
                                g.generation,
                                g.protocol_type,
                                g.protocol,
                                g.leader,
                                g.current_state_timestamp,
                                len(g.members),
                                [_member(m, g.protocol_type) for m in g.members],
                                False,
                            )
                        )
                        groups.append((k.group, *tail, lp, r.offset, h.base_offset, r.timestamp))
                    elif type(k) is ConsumerGroupMemberMetadataKey:
                        members = consumer_members.setdefault(k.group, {})
                        if r.value is None:
                            members.pop(k.member_id, None)
                        else:
                            members[k.member_id] = _consumer_member(
                                k.member_id, cast(ConsumerGroupMemberMetadataValue, decode_value(k, r.value))
                            )
                    elif type(k) is ConsumerGroupTargetAssignmentMemberKey:
                        targets = consumer_targets.setdefault(k.group, {})
                        if r.value is None:
                            targets.pop(k.member_id, None)
                        else:
                            targets[k.member_id] = cast(
                                ConsumerGroupTargetAssignmentMemberValue, decode_value(k, r.value)
                            ).topic_partitions
                    elif type(k) is ConsumerGroupPartitionMetadataKey:
                        pm = cast("ConsumerGroupPartitionMetadataValue | None", decode_value(k, r.value))
                        consumer_topics[k.group] = {} if pm is None else {t.topic_id: t.topic_name for t in pm.topics}
                    elif type(k) is ConsumerGroupMetadataKey:
                        gm = cast("ConsumerGroupMetadataValue | None", decode_value(k, r.value))
                        if gm is None:
                            consumer_members.pop(k.group, None)
                            consumer_targets.pop(k.group, None)
                        epochs.append((k.group, gm and gm.epoch, lp, r.offset, h.base_offset, r.timestamp))
                    # else the other KIP-848 records (assignments) or an UnknownKey
                except RecordDecodeError as e:
                    errors.append((lp, r.offset, seg.path, None, None, f"record at offset {r.offset}: {e}"))
            for group, epoch, *where in epochs:
                if epoch is None:
                    groups.append((group, *_NO_CONSUMER_GROUP, *where))
                else:
                    names, targets = consumer_topics.get(group, {}), consumer_targets.get(group, {})
                    data_dir = Path(seg.path).parent.parent
                    catalog = catalogs.get(data_dir)
                    if catalog is None:
                        catalog = catalogs[data_dir] = topic_names(data_dir)
                    member_rows = [
                        {
                            **m,
                            "partitions": [
                                {"topic": names.get(t) or catalog.get(str(t), str(t)), "partition": p}
                                for t, ps in targets.get(m["member_id"], ())
                                for p in ps
                            ],
                        }
                        for m in consumer_members.get(group, {}).values()
                    ]
                    groups.append(
                        (
                            group,
                            "consumer",
                            epoch,
                            "consumer",
                            None,
                            None,
                            -1,
                            len(member_rows),
                            member_rows,
                            False,
                            *where,
                        )
                    )
            epochs.clear()
            if len(commits["group"]) >= batch_rows:
                yield _arrow("commit", commits)
                for column in commits.values():
                    column.clear()
        if len(groups) >= batch_rows:
            yield _arrow("group", _transpose(GROUP_COLUMNS, groups))
            groups = []
    if commits["group"]:
        yield _arrow("commit", commits)
    if groups:
        yield _arrow("group", _transpose(GROUP_COLUMNS, groups))
    if errors:
        yield _arrow("error", _transpose(ERROR_COLUMNS, errors))
