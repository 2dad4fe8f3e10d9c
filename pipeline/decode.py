"""`__consumer_offsets` records into typed columns (Arrow record batches), no Spark needed.

Keys and values are decoded by protocol.group_records, the coordinator's own codec. One
output schema covers the three kinds of row: `commit` (an OffsetCommit record), `group`
(a GroupMetadata record: one generation's membership) and `error` (a bad batch or an
undecodable record, with its file). Columns of another kind are null. A null value is a
tombstone: a deleted offset, or a deleted group.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import pyarrow as pa

from protocol.group_records import (
    GroupMetadataKey, OffsetCommitKey, RecordDecodeError, decode_key, decode_value,
)

from .segments import BadBatch, SegmentFile, read_segment

MEMBER = pa.struct([("member_id", pa.string()), ("group_instance_id", pa.string()), ("client_id", pa.string()),
                    ("client_host", pa.string()), ("session_timeout", pa.int32()),
                    ("rebalance_timeout", pa.int32()), ("assignment_bytes", pa.int32()),
                    ("subscription_bytes", pa.int32())])
KEY_FIELDS = [("group", pa.string())]
COMMIT_FIELDS = [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                 ("leader_epoch", pa.int32()), ("metadata", pa.string()), ("commit_timestamp", pa.int64()),
                 ("expire_timestamp", pa.int64())]
GROUP_FIELDS = [("generation", pa.int32()), ("protocol_type", pa.string()), ("protocol", pa.string()),
                ("leader", pa.string()), ("state_timestamp", pa.int64()), ("member_count", pa.int32()),
                ("members", pa.list_(MEMBER))]
COMMON_FIELDS = [("tombstone", pa.bool_()), ("log_partition", pa.int32()), ("log_offset", pa.int64()),
                 ("record_timestamp", pa.int64()), ("file", pa.string()), ("error", pa.string())]
SCHEMA = pa.schema([("kind", pa.string()), *KEY_FIELDS, *COMMIT_FIELDS, *GROUP_FIELDS, *COMMON_FIELDS])
# Columns of each kind, in the order the row tuples below hold them.
COMMIT_COLUMNS = ["group", *(n for n, _ in COMMIT_FIELDS), "tombstone", "log_partition", "log_offset",
                  "record_timestamp"]
GROUP_COLUMNS = ["group", *(n for n, _ in GROUP_FIELDS), "tombstone", "log_partition", "log_offset",
                 "record_timestamp"]
ERROR_COLUMNS = ["log_partition", "log_offset", "file", "error"]
BATCH_ROWS = 65_536
_NO_COMMIT = (None,) * 5 + (True,)
_NO_GROUP = (None,) * 5 + (0, [], True)


def _member(m) -> dict:
    return {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "session_timeout": m.session_timeout,
            "rebalance_timeout": m.rebalance_timeout, "assignment_bytes": len(m.assignment),
            "subscription_bytes": len(m.subscription)}


def _arrow(kind: str, names: list[str], rows: list[tuple]) -> pa.RecordBatch:
    """Rows (tuples in `names` order) of one kind as a batch of the full SCHEMA."""
    columns = dict(zip(names, zip(*rows)))
    n = len(rows)
    arrays = [pa.array([kind] * n, pa.string()) if f.name == "kind"
              else pa.array(columns[f.name], f.type) if f.name in columns
              else pa.nulls(n, f.type) for f in SCHEMA]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def decode_segments(files: Iterable[SegmentFile], batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Arrow batches (SCHEMA) for every record of these `__consumer_offsets` segments.

    Keys repeat a lot in `__consumer_offsets`: each distinct key is decoded once."""
    keys: dict[bytes, tuple] = {}  # raw key -> (key, row prefix)
    commits: list[tuple] = []
    groups: list[tuple] = []
    errors: list[tuple] = []
    for seg in files:
        lp = seg.partition
        for item in read_segment(seg):
            if type(item) is BadBatch:
                errors.append((lp, item.base_offset, seg.path, item.describe()))
                continue
            for r in item[1]:
                raw = r.key
                if raw is None:
                    continue
                cached = keys.get(raw)
                try:
                    if cached is None:
                        k = decode_key(raw)
                        prefix = (k.group, k.topic, k.partition) if type(k) is OffsetCommitKey else (
                            (k.group,) if type(k) is GroupMetadataKey else ())
                        cached = keys[raw] = (k, prefix)
                    k, prefix = cached
                    if type(k) is OffsetCommitKey:
                        v = decode_value(k, r.value)
                        tail = _NO_COMMIT if v is None else (v.offset, v.leader_epoch, v.metadata,
                                                             v.commit_timestamp, v.expire_timestamp, False)
                        commits.append(prefix + tail + (lp, r.offset, r.timestamp))
                    elif type(k) is GroupMetadataKey:
                        v = decode_value(k, r.value)
                        tail = _NO_GROUP if v is None else (
                            v.generation, v.protocol_type, v.protocol, v.leader, v.current_state_timestamp,
                            len(v.members), [_member(m) for m in v.members], False)
                        groups.append(prefix + tail + (lp, r.offset, r.timestamp))
                    # else an UnknownKey: KIP-848 / share-group records, not interpreted here
                except RecordDecodeError as e:
                    errors.append((lp, r.offset, seg.path, f"record at offset {r.offset}: {e}"))
            if len(commits) >= batch_rows:
                yield _arrow("commit", COMMIT_COLUMNS, commits)
                commits = []
        if len(groups) >= batch_rows:
            yield _arrow("group", GROUP_COLUMNS, groups)
            groups = []
    for kind, names, rows in (("commit", COMMIT_COLUMNS, commits), ("group", GROUP_COLUMNS, groups),
                              ("error", ERROR_COLUMNS, errors)):
        if rows:
            yield _arrow(kind, names, rows)

