"""Lag over time (lag_history) and Burrow's verdicts (lag_status) on a data dir written
with the project's own log writers: one record per batch, one per second, and commits at
chosen instants, so every expected figure is worked out by hand below."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pyspark")

from coordinator.log.offsets import OffsetsLog  # noqa: E402
from coordinator.log.partition import PartitionLog  # noqa: E402
from pipeline import analytics, read_offsets  # noqa: E402
from pipeline.run import run  # noqa: E402
from protocol.group_records import OffsetCommitKey, OffsetCommitValue  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark: a JVM and Python workers per session
T0 = 1_700_000_000_000
S = 1000
# group -> (partition of topic "events", [(commit time after T0 in s, committed offset)])
COMMITS = {
    "caught-up": (0, [(10, 10)]),
    "stalled": (1, [(5, 3), (10, 3), (15, 3), (20, 3)]),
    "slow": (2, [(5, 2), (10, 4), (15, 6), (20, 8)]),
    "stopped": (3, [(1, 1), (2, 2)]),
    "recovering": (4, [(5, 1), (10, 8), (15, 14), (20, 17)]),
    "rewound": (5, [(5, 4), (10, 2), (20, 3)]),
}
RECORDS = {0: 10, 1: 20, 2: 20, 3: 20, 4: 20, 5: 20}  # records per partition, the i-th at T0 + i s


async def write(data) -> None:
    for p, n in RECORDS.items():
        plog = PartitionLog.open_sync(data / f"events-{p}")
        for i in range(n):
            plog.append_records([(None, b"%d" % i)], T0 + i * S)
        await plog.close()
    log = await OffsetsLog.open(data, partitions=3, background=False)
    for group, (p, commits) in COMMITS.items():
        for at, offset in commits:
            await log.append(
                group,
                [(OffsetCommitKey(group, "events", p), OffsetCommitValue(offset=offset, commit_timestamp=T0 + at * S))],
                timestamp_ms=T0 + at * S,
            )
    await log.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("lag") / "data"
    asyncio.run(write(path))
    return path


def test_lag_history_in_messages_and_seconds(spark, data):
    history = analytics.lag_history(
        analytics.commits(read_offsets(spark, str(data))), analytics.log_batches(spark, str(data))
    )
    rows = {
        (r.group, r.commit_timestamp - T0): (r.committed_offset, r.log_end_offset, r.lag, r.lag_seconds)
        for r in history.collect()
    }
    # stalled: at T0+20 s records 0..19 exist (end 20); offset 3 was produced at T0+3 s.
    assert rows[("stalled", 20 * S)] == (3, 20, 17, 17.0)
    # At T0+5 s records 0..5 exist: end 6.
    assert rows[("stalled", 5 * S)] == (3, 6, 3, 2.0)
    assert rows[("slow", 10 * S)] == (4, 11, 7, 6.0)
    assert rows[("caught-up", 10 * S)] == (10, 10, 0, 0.0)
    assert rows[("recovering", 20 * S)] == (17, 20, 3, 3.0)


def test_burrow_verdicts(spark, data, tmp_path):
    out = tmp_path / "out"
    run(spark, str(data), str(out), log=lambda *a: None)
    partitions = {r.group: (r.status, r.rule) for r in spark.read.parquet(str(out / "lag_status")).collect()}
    assert partitions == {
        "caught-up": ("OK", "no lag now"),
        "stalled": ("STALL", "commits do not move the offset"),
        "slow": ("WARN", "the lag never decreased"),
        # as of T0+20 s (the latest commit and record), no commit since T0+2 s: longer than 1 s
        "stopped": ("STOP", "no commit for longer than the window spans"),
        "recovering": ("OK", "the lag decreased"),
        "rewound": ("REWIND", "a committed offset went back"),
    }
    groups = {r.group: r.status for r in spark.read.parquet(str(out / "lag_status_groups")).collect()}
    assert groups == {
        "caught-up": "OK",
        "stalled": "ERR",
        "slow": "WARN",
        "stopped": "ERR",
        "recovering": "OK",
        "rewound": "ERR",
    }
    history = spark.read.parquet(str(out / "lag_history")).where("group = 'slow'").orderBy("commit_time").collect()
    assert [r.lag for r in history] == [4, 7, 10, 12]


def test_lag_and_verdicts_from_real_clients(spark, server, tmp_path):
    """A producer writes one message per batch (confluent-kafka, flushed each time); group
    `stuck` commits offset 2 again and again (kafka-python) while the log grows, group
    `current` commits the end: lag_history equals what the clients saw at each commit
    (messages and seconds), lag_status says STALL and OK."""
    import time

    from confluent_kafka import Producer
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    from tests.support.process import create_topics

    create_topics(server.port, "clicks", partitions=1)
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    times = []  # each message's timestamp, as the broker stores it (the producer's create time)

    def produce_one(producer) -> None:
        at = int(time.time() * 1000)
        producer.produce("clicks", b"x", partition=0, timestamp=at)
        assert producer.flush(10) == 0
        times.append(at)

    tp = TopicPartition("clicks", 0)
    stuck = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="stuck", enable_auto_commit=False)
    current = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="current", enable_auto_commit=False)
    seen = []  # (group, end when committed, committed offset)
    for _round in range(4):
        for _ in range(3):
            produce_one(producer)
            time.sleep(0.01)
        stuck.commit({tp: OffsetAndMetadata(2, "", -1)})
        current.commit({tp: OffsetAndMetadata(len(times), "", -1)})
        seen += [("stuck", len(times), 2), ("current", len(times), len(times))]
        time.sleep(0.05)
    stuck.close()
    current.close()
    del producer  # destroyed now: it would log its failed reconnects once the server stops
    server.stop()

    out = tmp_path / "out"
    run(spark, str(server.data_dir), str(out), log=lambda *a: None)
    history = spark.read.parquet(str(out / "lag_history")).orderBy("group", "commit_time").collect()
    got = [(r.group, r.log_end_offset, r.committed_offset) for r in history]
    assert got == sorted(seen, key=lambda s: (s[0], s[1]))
    for r in history:
        assert r.lag == r.log_end_offset - r.committed_offset
        expected_seconds = 0.0 if r.lag == 0 else (r.commit_timestamp - times[r.committed_offset]) / 1000
        assert r.lag_seconds == pytest.approx(expected_seconds)
    verdicts = {r.group: (r.status, r.rule) for r in spark.read.parquet(str(out / "lag_status")).collect()}
    assert verdicts == {"stuck": ("STALL", "commits do not move the offset"), "current": ("OK", "no lag now")}
