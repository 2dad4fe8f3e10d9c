"""The PySpark pipeline against logs written by the project's writer and by the live server."""

from __future__ import annotations

import signal
import time

from coordinator.log.offsets import OffsetsLog, partition_for
from coordinator.log.partition import PartitionLog
from protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from protocol.record_batch import CRC_OFFSET
from pipeline import analytics, committed_offsets, decode, read_logs
from pipeline.run import run

NOW = 1_700_000_000_000


def member(mid: str) -> MemberMetadata:
    return MemberMetadata(member_id=mid, client_id="c", client_host="/127.0.0.1", session_timeout=10_000,
                          subscription=b"", assignment=b"xyz", rebalance_timeout=30_000)


async def write_fixture(data_dir) -> dict:
    """A log with commits, overwrites, tombstones and generations; returns the expected offsets."""
    log = await OffsetsLog.open(data_dir, background=False)
    expected = {}
    for g in range(5):
        group = f"group-{g}"
        for gen, members in enumerate([["a"], ["a", "b"], ["b"]], start=1):
            await log.append(group, [(GroupMetadataKey(group), GroupMetadataValue(
                protocol_type="consumer", generation=gen, protocol="range", leader=members[0],
                members=tuple(member(m) for m in members), current_state_timestamp=NOW + gen * 1000))])
        for round_ in range(3):
            records = []
            for p in range(4):
                value = OffsetCommitValue(offset=round_ * 10 + p, metadata="m", commit_timestamp=NOW + round_ * 60_000,
                                          leader_epoch=-1)
                records.append((OffsetCommitKey(group, "orders", p), value))
                expected[(group, "orders", p)] = value.offset
            await log.append(group, records)
        await log.append(group, [(OffsetCommitKey(group, "orders", 3), None)])  # deleted offset
        del expected[(group, "orders", 3)]
    await log.close()
    topic = PartitionLog.open_sync(data_dir / "orders-0")
    topic.append_records([(b"k", b"v")] * 50, NOW)
    await topic.close()
    return expected


def reference_committed(data_dir) -> dict:
    """Pure-Python reference: replay the log, last value per key, tombstones delete."""
    import asyncio

    async def load():
        log = await OffsetsLog.open(data_dir, background=False)
        state = {}
        for r in log.replay_all():
            if type(r.key) is OffsetCommitKey:
                if r.value is None:
                    state.pop((r.key.group, r.key.topic, r.key.partition), None)
                else:
                    state[(r.key.group, r.key.topic, r.key.partition)] = r.value.offset
        await log.close()
        return state

    return asyncio.run(load())


def test_outputs_on_a_written_log(spark, tmp_path):
    import asyncio

    data = tmp_path / "data"
    expected = asyncio.run(write_fixture(data))
    rows = committed_offsets(spark, str(data)).collect()
    got = {(r.group, r.topic, r.partition): r.offset for r in rows}
    assert got == expected == reference_committed(data)

    summary = run(spark, str(data), str(tmp_path / "out"), log=lambda *a: None)
    assert summary["bad batches"] == 0
    lag = spark.read.parquet(str(tmp_path / "out" / "consumer_lag")).collect()
    # orders-0 holds 50 records, the other partitions have no log: their end offset is 0.
    assert {r.partition: (r.offset, r.log_end_offset, r.lag) for r in lag if r.group == "group-0"} == \
        {0: (20, 50, 30), 1: (21, 0, 0), 2: (22, 0, 0)}
    timeline = spark.read.parquet(str(tmp_path / "out" / "rebalance_timeline")).where("group = 'group-1'") \
        .orderBy("generation").collect()
    assert [(r.generation, r.member_count, list(r.joined), list(r.left)) for r in timeline] == \
        [(1, 1, ["a"], []), (2, 2, ["b"], []), (3, 1, [], ["a"])]
    rate = spark.read.parquet(str(tmp_path / "out" / "commit_rate")).where("group = 'group-2'").collect()
    assert sorted(r.commits for r in rate) == [4, 4, 4]
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "group-4" in html


def test_corrupt_segment_is_reported_and_the_rest_is_read(spark, tmp_path):
    import asyncio

    data = tmp_path / "data"
    expected = asyncio.run(write_fixture(data))
    segment = next((data / "orders-0").glob("*.log"))
    raw = bytearray(segment.read_bytes())
    raw[CRC_OFFSET] ^= 0xFF  # the only batch of orders-0: its CRC no longer matches
    segment.write_bytes(bytes(raw))
    summary = run(spark, str(data), str(tmp_path / "out"), log=lambda *a: None)
    assert summary["bad batches"] == 1 and "orders-0" in summary["bad batch files"]
    got = {(r.group, r.topic, r.partition): r.offset for r in committed_offsets(spark, str(data)).collect()}
    assert got == expected


def test_committed_offsets_equal_offset_fetch_of_the_live_server(spark, server):
    """Drive the real server with real clients, then compare the pipeline with OffsetFetch."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, TopicPartition

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic("clicks", 3, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(300):
        p.produce("clicks", key=str(i).encode(), value=b"x")
    p.flush(30)
    for group in ("readers-a", "readers-b"):
        c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["clicks"])
        got = 0
        deadline = time.monotonic() + 30
        while got < (300 if group == "readers-a" else 100) and time.monotonic() < deadline:
            msgs = [m for m in c.consume(50, 0.2) if not m.error()]
            got += len(msgs)
            if msgs:
                c.commit(asynchronous=False)
        c.close()
    fetched = {}
    for group in ("readers-a", "readers-b"):
        kc = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False)
        for p_ in range(3):
            committed = kc.committed(TopicPartition("clicks", p_))
            if committed is not None:
                fetched[(group, "clicks", p_)] = committed
        kc.close()
    server.stop(signal.SIGTERM)
    rows = committed_offsets(spark, str(server.data_dir)).collect()
    assert {(r.group, r.topic, r.partition): r.offset for r in rows} == fetched
    assert sum(v for (g, _, _), v in fetched.items() if g == "readers-a") == 300
    # Every group's records sit in the group's partition of __consumer_offsets, as on Kafka.
    commits = decode.commits(read_logs(spark, str(server.data_dir))).collect()
    assert {r.log_partition for r in commits if r.group == "readers-a"} == {partition_for("readers-a")}
    timeline, _ = analytics.rebalance_timeline(decode.groups(read_logs(spark, str(server.data_dir))))
    assert timeline.where("group = 'readers-a'").count() >= 1
