"""`__consumer_offsets` records into typed columns, with protocol.group_records (mapInArrow)."""

from __future__ import annotations

from typing import Iterator

from pyspark.sql import DataFrame

COMMITS_SCHEMA = ("group string, topic string, partition int, offset long, leader_epoch int, metadata string, "
                  "commit_timestamp long, expire_timestamp long, tombstone boolean, "
                  "log_partition int, log_offset long, record_timestamp long")
GROUPS_SCHEMA = ("group string, generation int, protocol_type string, protocol string, leader string, "
                 "state_timestamp long, member_count int, "
                 "members array<struct<member_id:string, group_instance_id:string, client_id:string, "
                 "client_host:string, session_timeout:int, rebalance_timeout:int, assignment_bytes:int>>, "
                 "tombstone boolean, log_partition int, log_offset long, record_timestamp long")


def _arrow_schema(want: str):
    import pyarrow as pa

    common = [("tombstone", pa.bool_()), ("log_partition", pa.int32()), ("log_offset", pa.int64()),
              ("record_timestamp", pa.int64())]
    if want == "commits":
        return pa.schema([("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                          ("offset", pa.int64()), ("leader_epoch", pa.int32()), ("metadata", pa.string()),
                          ("commit_timestamp", pa.int64()), ("expire_timestamp", pa.int64()), *common])
    member = pa.struct([("member_id", pa.string()), ("group_instance_id", pa.string()), ("client_id", pa.string()),
                        ("client_host", pa.string()), ("session_timeout", pa.int32()),
                        ("rebalance_timeout", pa.int32()), ("assignment_bytes", pa.int32())])
    return pa.schema([("group", pa.string()), ("generation", pa.int32()), ("protocol_type", pa.string()),
                      ("protocol", pa.string()), ("leader", pa.string()), ("state_timestamp", pa.int64()),
                      ("member_count", pa.int32()), ("members", pa.list_(member)), *common])


def _decoded(batches: Iterator, want: str) -> Iterator:
    import pyarrow as pa

    from protocol.group_records import GroupMetadataKey, OffsetCommitKey, decode_key, decode_value

    schema = _arrow_schema(want)
    keys: dict[bytes, object] = {}  # keys repeat a lot in __consumer_offsets: decode each once
    for b in batches:
        cols = b.to_pydict()
        rows = []
        for key, value, part, off, ts in zip(cols["key"], cols["value"], cols["partition"], cols["offset"],
                                             cols["timestamp"]):
            if key is None:
                continue
            k = keys.get(key)
            if k is None:
                k = keys[key] = decode_key(key)
            if want == "commits" and type(k) is OffsetCommitKey:
                v = decode_value(k, value)
                rows.append(dict(group=k.group, topic=k.topic, partition=k.partition,
                                 offset=v.offset if v else None, leader_epoch=v.leader_epoch if v else None,
                                 metadata=v.metadata if v else None,
                                 commit_timestamp=v.commit_timestamp if v else None,
                                 expire_timestamp=v.expire_timestamp if v else None, tombstone=v is None,
                                 log_partition=part, log_offset=off, record_timestamp=ts))
            elif want == "groups" and type(k) is GroupMetadataKey:
                v = decode_value(k, value)
                members = [dict(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                                client_host=m.client_host, session_timeout=m.session_timeout,
                                rebalance_timeout=m.rebalance_timeout, assignment_bytes=len(m.assignment))
                           for m in (v.members if v else ())]
                rows.append(dict(group=k.group, generation=v.generation if v else None,
                                 protocol_type=v.protocol_type if v else None, protocol=v.protocol if v else None,
                                 leader=v.leader if v else None,
                                 state_timestamp=v.current_state_timestamp if v else None,
                                 member_count=len(members), members=members, tombstone=v is None,
                                 log_partition=part, log_offset=off, record_timestamp=ts))
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)


def commits(raw: DataFrame) -> DataFrame:
    """One row per OffsetCommit record (tombstone = deleted offset)."""
    offsets = raw.where("topic = '__consumer_offsets' AND error IS NULL")
    return offsets.mapInArrow(lambda it: _decoded(it, "commits"), COMMITS_SCHEMA)


def groups(raw: DataFrame) -> DataFrame:
    """One row per GroupMetadata record (a generation's membership; tombstone = deleted group)."""
    offsets = raw.where("topic = '__consumer_offsets' AND error IS NULL")
    return offsets.mapInArrow(lambda it: _decoded(it, "groups"), GROUPS_SCHEMA)
