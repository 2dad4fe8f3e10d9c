"""Share-group progress (KIP-932) from `__share_group_state`: per share-partition, where its
start offset is, how many records past it are done (Acknowledged, Archived) or still to be
delivered, and the lag to the topic's log end, beside consumer-group lag.

The state log is small (a snapshot every N updates, pruned below the oldest snapshot still
needed), so it is replayed here on the driver as the server replays it (each share-partition's
last snapshot, then the updates of its snapshot epoch) and handed to Spark as Arrow; topic ids
are named from the server's topic catalog (`topics.json`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.record_batch import iter_batch_records, iter_batches
from protocol.share_records import ACKNOWLEDGED, ARCHIVED, ShareSnapshotValue, decode_state_key, decode_state_value

from .segments import segment_files, topic_names

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

STATE_TOPIC = "__share_group_state"
COLUMNS = (
    "group",
    "topic",
    "partition",
    "state_epoch",
    "start_offset",
    "acknowledged",
    "archived",
    "in_flight",
    "max_delivery_count",
    "last_update_ms",
)


def replay(data_dir: str | Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(group, topic id, partition) -> its state now, as the server's share coordinator replays it."""
    states: dict[tuple[str, str, int], dict[str, Any]] = {}
    for seg in segment_files(data_dir, {STATE_TOPIC}):
        data = Path(seg.path).read_bytes()
        batches = list(iter_batches(data[: _whole(data)]))  # (a torn tail: the whole batches before it)
        for pos, h in batches:
            if h.is_control:
                continue
            for r in iter_batch_records(data[pos : pos + h.size], h):
                if r.key is None:
                    continue
                k = decode_state_key(r.key)
                key = (k.group, str(k.topic_id), k.partition)
                if r.value is None:
                    states.pop(key, None)
                    continue
                v = decode_state_value(k, r.value)
                if isinstance(v, ShareSnapshotValue):  # (k.snapshot)
                    states[key] = {
                        "epoch": v.snapshot_epoch,
                        "state_epoch": v.state_epoch,
                        "start": v.start_offset,
                        "records": {},
                        "ts": r.timestamp,
                    }
                    _apply(states[key], -1, v.state_batches)
                elif key in states and states[key]["epoch"] == v.snapshot_epoch:
                    _apply(states[key], v.start_offset, v.state_batches)
                    states[key]["ts"] = r.timestamp
    return states


def _whole(data: bytes) -> int:
    """The bytes of the whole batches at the start of data."""
    from protocol.record_batch import parse_header

    pos = 0
    while pos < len(data):
        try:
            h = parse_header(data, pos)
        except ValueError:
            break
        pos += h.size
    return pos


def _apply(state: dict[str, Any], start: int, batches: Any) -> None:
    if start >= 0:
        state["start"] = start
        state["records"] = {o: s for o, s in state["records"].items() if o >= start}
    for b in batches:
        for offset in range(max(b.first_offset, state["start"]), b.last_offset + 1):
            state["records"][offset] = (b.delivery_state, b.delivery_count)


def share_state_table(data_dir: str | Path) -> pa.Table:
    """The share-partitions' state now, as an Arrow table (COLUMNS)."""
    import pyarrow as pa

    names = topic_names(data_dir)
    rows = []
    for (group, topic_id, partition), s in sorted(replay(data_dir).items()):
        states = [st for st, _ in s["records"].values()]
        rows.append(
            (
                group,
                names.get(topic_id, topic_id),
                partition,
                s["state_epoch"],
                s["start"],
                sum(1 for st in states if st == ACKNOWLEDGED),
                sum(1 for st in states if st == ARCHIVED),
                sum(1 for st in states if st not in (ACKNOWLEDGED, ARCHIVED)),
                max((c for _, c in s["records"].values()), default=0),
                s["ts"],
            )
        )
    types = [
        pa.string(),
        pa.string(),
        pa.int32(),
        pa.int32(),
        pa.int64(),
        pa.int64(),
        pa.int64(),
        pa.int64(),
        pa.int32(),
        pa.int64(),
    ]
    columns = list(zip(*rows)) or [()] * len(COLUMNS)
    return pa.Table.from_arrays([pa.array(c, t) for c, t in zip(columns, types)], names=list(COLUMNS))


def share_progress(spark: "SparkSession", data_dir: str, ends: "DataFrame") -> "DataFrame":
    """Per share-partition: its state (share_state_table), the topic's log end offset and the
    share-group lag: records from the start offset to the log end not yet Acknowledged or
    Archived (DescribeShareGroupOffsets v1's lag, as of the data dir)."""
    from pyspark.sql import functions as F

    state = spark.createDataFrame(share_state_table(data_dir))
    joined = state.join(ends.select("topic", "partition", "log_end_offset"), ["topic", "partition"], "left")
    lag = F.greatest(
        F.lit(0), F.col("log_end_offset") - F.col("start_offset") - F.col("acknowledged") - F.col("archived")
    )
    return (
        joined.withColumn("lag", F.when(F.col("log_end_offset").isNull(), None).otherwise(lag))
        .withColumn("last_update", F.timestamp_millis("last_update_ms"))
        .drop("last_update_ms")
        .select(
            "group",
            "topic",
            "partition",
            "start_offset",
            "log_end_offset",
            "lag",
            "acknowledged",
            "archived",
            "in_flight",
            "max_delivery_count",
            "state_epoch",
            "last_update",
        )
    )
