"""The PySpark pipeline on logs written by the project's own writer, checked against a
pure-Python reference (tests/pipeline/logs.py), a corrupt segment, and the live server."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

pytest.importorskip("pyspark")  # the `pipeline` extra: pyspark, pyarrow, pandas, jinja2, plotly

from coordinator.log.offsets import OffsetsLog, partition_for  # noqa: E402
from protocol.group_records import OffsetCommitKey  # noqa: E402
from protocol.record_batch import LOG_OVERHEAD, iter_batches  # noqa: E402
from pipeline import analytics, committed_offsets_map, read_logs, read_offsets  # noqa: E402
from pipeline.run import run  # noqa: E402

from .logs import CODECS, STORM_GENERATIONS, TOPIC_RECORDS, reference, write_data_dir  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark: a JVM and Python workers per session
QUIET = lambda *a: None  # noqa: E731


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    data = tmp_path_factory.mktemp("pipeline") / "data"
    return data, asyncio.run(write_data_dir(data))


@pytest.fixture(scope="module")
def job_out(spark, written, tmp_path_factory):
    """One run of the whole job over `written`, its outputs named by a file:// URI: what
    test_job_outputs_match_the_reference reads, and what test_outputs_to_a_file_uri checks was
    written there (a local path given as a URI is written as the path itself; the other runs
    here are given plain paths). A run is a Spark job per output: one serves both."""
    data, _ = written
    out = tmp_path_factory.mktemp("job") / "out"
    return out, run(spark, str(data), f"file://{out}", log=QUIET)


def test_committed_offsets_match_the_reference_and_the_coordinators_own_replay(spark, written):
    data, w = written
    got = committed_offsets_map(spark, str(data))
    assert got == reference(w)["committed"]

    async def replayed():  # what the coordinator itself loads from the same files
        log = await OffsetsLog.open(data, background=False)
        state = {}
        for r in log.replay_all():
            if type(r.key) is OffsetCommitKey:
                k = (r.key.group, r.key.topic, r.key.partition)
                state.pop(k, None) if r.value is None else state.__setitem__(k, r.value.offset)
        await log.close()
        return state

    assert got == asyncio.run(replayed())


def test_kafka_log_rows_every_codec_arrow_and_tuples_alike(spark, written):
    data, _ = written
    df = read_logs(spark, str(data), topics="orders")
    rows = df.orderBy("partition", "offset").collect()
    assert len(rows) == sum(TOPIC_RECORDS.values()) and all(r.error is None for r in rows)
    assert {r.attributes & 7 for r in rows} == set(CODECS.values())  # gzip/snappy/lz4/zstd decoded
    r = rows[12]
    assert (r.topic, r.partition, r.offset, r.key, r.value, r.headers[0].key, r.headers[0].value) == (
        "orders",
        0,
        12,
        b"k12",
        b"v12",
        "h",
        b"12",
    )
    tuples = read_logs(spark, str(data), topics="orders", arrow="false").orderBy("partition", "offset").collect()
    assert tuples == rows
    assert df.rdd.getNumPartitions() <= spark.sparkContext.defaultParallelism


def test_job_outputs_match_the_reference(spark, written, job_out):
    _, w = written
    ref = reference(w)
    out, summary = job_out
    assert summary["bad batches"] == 0 and summary["bad batch files"] == "-"
    read = lambda name: spark.read.parquet(str(out / name)).collect()  # noqa: E731

    assert {(r.group, r.topic, r.partition): r.offset for r in read("committed_offsets")} == ref["committed"]
    lag = read("consumer_lag")
    assert {(r.group, r.topic, r.partition): r.lag for r in lag if not r.deleted} == ref["lag"]
    assert {(r.topic, r.partition): r.log_end_offset for r in lag if r.log_end_offset is not None} == {
        k: n for k, n in TOPIC_RECORDS.items() if k in {(t, p) for _, t, p in ref["committed"]}
    }
    # Deleted offsets are rows of their own (OffsetDelete of orders-3; the deleted group's).
    assert {(r.group, r.topic, r.partition) for r in lag if r.deleted} == {
        ("gone", "orders", 0),
        *((f"group-{g}", "orders", 3) for g in range(5)),
    }
    totals = {
        r.group: (r.total_lag, r.partitions, r.partitions_without_log, r.deleted_partitions, r.state)
        for r in read("consumer_lag_totals")
    }
    assert totals["group-0"] == (50 - 20, 3, 0, 1, "Stable")  # orders-1 and -2 are committed beyond their end
    assert totals["gone"] == (0, 0, 0, 1, "Dead")  # a deleted group says so
    states = {r.group: (r.group_type, r.state, r.generation, r.member_count) for r in read("group_states")}
    assert states["group-0"] == ("classic", "Stable", 3, 1) and states["gone"][1] == "Dead"

    timeline = read("rebalance_timeline")
    assert {(r.group, r.generation): (r.member_count, sorted(r.joined), sorted(r.left)) for r in timeline} == ref[
        "timeline"
    ]
    storms = {r.group: (r.rebalances, r.storm) for r in read("rebalance_summary")}
    assert storms["stormy"] == (STORM_GENERATIONS, True) and storms["group-1"] == (3, False)
    g1 = sorted((r for r in timeline if r.group == "group-1"), key=lambda r: r.generation)
    assert [(r.leader, r.protocol, r.since_previous_ms) for r in g1] == [
        ("a", "range", None),
        ("a", "range", 1000),
        ("b", "range", 1000),
    ]

    rate = {(r.group, int(r.minute.timestamp() * 1000)): r.commits for r in read("commit_rate")}
    assert rate == ref["rate"]
    # Each group's commits of a minute were one append here: one batch each.
    assert {r.batches for r in read("commit_rate")} == {1}
    html = (out / "report.html").read_text()
    assert "stormy" in html and html.count("Plotly.newPlot") >= 1 and "<script" in html


def test_offsets_columns(spark, written):
    data, _ = written
    offsets = read_offsets(spark, str(data))
    stormy = analytics.commits(offsets).where("group = 'stormy'").collect()
    assert [(r.offset, r.expire_timestamp, r.log_partition) for r in stormy] == [
        (3, 1_700_000_040_000 + 86_400_000, partition_for("stormy"))
    ]
    g = analytics.groups(offsets).where("group = 'group-0' AND generation = 2").collect()[0]
    assert [
        (m.member_id, m.client_id, m.client_host, m.session_timeout, m.rebalance_timeout, m.assignment_bytes)
        for m in g.members
    ] == [("a", "client-a", "/127.0.0.1", 10_000, 30_000, 3), ("b", "client-b", "/127.0.0.1", 10_000, 30_000, 3)]
    assert analytics.groups(offsets).where("group = 'gone' AND tombstone").count() == 1


def test_corrupt_batch_is_reported_and_everything_else_is_read(spark, written, tmp_path):
    """One `__consumer_offsets` batch in the middle of a segment has a bad CRC: the job
    finishes, names the file, and every other record (before and after it) still counts."""
    import shutil

    src, w = written
    data = tmp_path / "data"
    shutil.copytree(src, data)
    group, lp, base, _ = next(
        b
        for b in w.batches
        if b[0] == "group-2"
        and b[3][0][1] is not None
        and type(b[3][0][0]) is OffsetCommitKey
        and b[3][0][1].offset >= 20
    )
    segment = next((data / f"__consumer_offsets-{lp}").glob("*.log"))
    raw = bytearray(segment.read_bytes())
    pos, h = next((pos, h) for pos, h in iter_batches(raw) if h.base_offset == base)
    assert pos + h.batch_length + LOG_OVERHEAD < len(raw)  # more batches follow it in this file
    raw[pos + h.batch_length + LOG_OVERHEAD - 1] ^= 0xFF  # last payload byte: the CRC no longer matches
    segment.write_bytes(bytes(raw))

    # and a corrupt batch in a topic log, found only when the job CRC-checks topic logs too
    orders = data / "orders-0" / "00000000000000000000.log"
    raw = bytearray(orders.read_bytes())
    raw[next(pos for pos, h in iter_batches(raw) if h.base_offset == 5) + 40] ^= 1  # a header byte under the CRC
    orders.write_bytes(bytes(raw))

    summary = run(spark, str(data), str(tmp_path / "out"), verify_topics=True, log=QUIET)
    assert summary["bad batches"] == 2 and summary["bad batch files"] == ", ".join(sorted([str(segment), str(orders)]))
    bad = spark.read.parquet(str(tmp_path / "out" / "bad_batches")).orderBy("topic").collect()
    assert [(r.topic, r.file, r.partition, r.offset) for r in bad] == [
        ("__consumer_offsets", str(segment), lp, base),
        ("orders", str(orders), 0, 5),
    ]
    assert all("CRC" in r.error for r in bad)
    expected = reference(w, skip={(lp, base)})
    assert committed_offsets_map(spark, str(data)) == expected["committed"] != reference(w)["committed"]
    lag = {
        (r.group, r.topic, r.partition): r.lag
        for r in spark.read.parquet(str(tmp_path / "out" / "consumer_lag")).collect()
        if not r.deleted
    }
    assert lag == expected["lag"]
    # the raw reader: an error row with the file, every other record of that file still there
    rows = read_logs(spark, str(data), topics="orders").where("partition = 0").collect()
    assert [r.offset for r in rows if r.error is None] == [o for o in range(50) if o != 5]
    assert [(r.offset, r.file) for r in rows if r.error] == [(5, str(orders))]


def test_a_broken_length_skips_one_range_the_server_names_and_repair_removes(spark, written, tmp_path):
    """A middle `__consumer_offsets` batch whose length field is garbage: the pipeline skips
    just that range (resynchronising on the next valid batch, later commits still count),
    reports its bytes and the groups it may have held, and flags their rows; the server names
    the same byte range when it takes the partition offline, and after the repair tool the
    coordinator loads exactly the offsets the pipeline computed."""
    import shutil
    import struct

    from coordinator.log.__main__ import main as log_tool

    src, w = written
    data = tmp_path / "data"
    shutil.copytree(src, data)
    group, lp, base, _ = next(
        b
        for b in w.batches
        if b[0] == "group-3"
        and type(b[3][0][0]) is OffsetCommitKey
        and b[3][0][1] is not None
        and b[3][0][1].offset == 10
    )
    segment = next((data / f"__consumer_offsets-{lp}").glob("*.log"))
    raw = bytearray(segment.read_bytes())
    pos, h = next((pos, h) for pos, h in iter_batches(raw) if h.base_offset == base)
    struct.pack_into(">i", raw, pos + 8, 0x7FFF0000)  # the batch length: garbage, the framing is lost
    segment.write_bytes(bytes(raw))

    out = tmp_path / "out"
    run(spark, str(data), str(out), log=QUIET)
    (bad,) = spark.read.parquet(str(out / "bad_batches")).collect()
    assert (bad.file, bad.byte_start, bad.byte_end) == (str(segment), pos, pos + h.batch_length + LOG_OVERHEAD)
    in_partition = sorted({b[0] for b in w.batches if b[1] == lp})
    assert bad.affected_groups == in_partition and "group-3" in in_partition
    expected = reference(w, skip={(lp, base)})  # only that batch is missing: later ones still count
    rows = spark.read.parquet(str(out / "committed_offsets")).collect()
    assert {(r.group, r.topic, r.partition): r.offset for r in rows} == expected["committed"]
    assert {r.group for r in rows if r.suspect} == set(in_partition) & {r.group for r in rows}

    async def loaded():  # what the coordinator loads at startup, and which partitions it refuses
        log = await OffsetsLog.open(data, background=False)
        state = {
            (k.group, k.topic, k.partition): v.offset
            for _, k, v in log.latest_records()
            if type(k) is OffsetCommitKey and v is not None
        }
        offline = log.offline()
        await log.close()
        return state, offline

    _, offline = asyncio.run(loaded())
    assert f"bytes {pos}-{bad.byte_end} are corrupt" in offline[lp]  # the server names the same range
    assert log_tool(["repair", str(data / f"__consumer_offsets-{lp}")]) == 0
    state, offline = asyncio.run(loaded())
    assert offline == {} and state == expected["committed"]  # repair removed just what the pipeline skipped


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
    described: dict[str, dict] = {}
    for group in ("readers-a", "readers-b", "readers-c"):
        kip848 = {"group.protocol": "consumer"} if group == "readers-c" else {}  # a KIP-848 consumer group
        c = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **kip848,
            }
        )
        c.subscribe(["clicks"])
        got = 0
        deadline = time.monotonic() + 30
        while got < (300 if group == "readers-a" else 100) and time.monotonic() < deadline:
            msgs = [m for m in c.consume(50, 0.2) if not m.error()]
            got += len(msgs)
            if msgs:
                c.commit(asynchronous=False)
        # Who owns what now, as the server describes it (for the ownership output below).
        d = admin.describe_consumer_groups([group])[group].result(10)
        described[group] = {
            (tp.topic, tp.partition): (m.member_id, m.client_id, m.host)
            for m in d.members
            for tp in m.assignment.topic_partitions
        }
        c.close()
    fetched = {}
    for owners in described.values():
        assert owners  # every partition had an owner while its consumer ran
    for group in ("readers-a", "readers-b", "readers-c"):
        kc = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False)
        for p_ in range(3):
            committed = kc.committed(TopicPartition("clicks", p_))
            if committed is not None:
                fetched[(group, "clicks", p_)] = committed
        kc.close()
    del admin, p  # destroyed now: they would log their failed reconnects once the server stops
    server.stop(signal.SIGTERM)
    assert committed_offsets_map(spark, str(server.data_dir)) == fetched
    assert sum(v for (g, _, _), v in fetched.items() if g == "readers-a") == 300
    offsets = read_offsets(spark, str(server.data_dir))
    # Every group's records sit in the group's partition of __consumer_offsets, as on Kafka.
    assert {r.log_partition for r in analytics.commits(offsets).where("group = 'readers-a'").collect()} == {
        partition_for("readers-a")
    }
    timeline = analytics.rebalance_timeline(analytics.groups(offsets))
    assert timeline.where("group = 'readers-a'").count() >= 1
    # Who owned what: the last generation (epoch) with members, as DescribeGroups said then.
    owners = analytics.ownership(analytics.groups(offsets)).collect()
    for group, expected in described.items():
        last = max(r.generation for r in owners if r.group == group)
        assert {
            (r.topic, r.partition): (r.member_id, r.client_id, r.client_host)
            for r in owners
            if r.group == group and r.generation == last
        } == expected, group
    # The KIP-848 group: one row per group epoch, the member joining, then leaving (close()).
    rows = timeline.where("group = 'readers-c'").orderBy("generation").collect()
    assert {r.group_type for r in rows} == {"consumer"} and len(rows) >= 2
    assert len(rows[0].joined) == 1 and rows[-1].member_count == 0 and rows[-1].left == rows[0].joined
    lag = analytics.consumer_lag(
        analytics.committed_offsets(analytics.commits(offsets)), analytics.log_end_offsets(spark, str(server.data_dir))
    )
    assert {r.partition: r.lag for r in lag.where("group = 'readers-a'").collect()} == {0: 0, 1: 0, 2: 0}


def test_bad_data_dirs_are_one_line_before_spark_starts(tmp_path, capsys):
    from pipeline.run import main

    assert main(["--data-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data dir") and "No such file" in err and err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    assert main(["--data-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 4
    assert "holds no segment files" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_outputs_to_a_file_uri(spark, job_out):
    out, _ = job_out  # (the job was given f"file://{out}")
    assert (out / "report.html").exists()
    assert spark.read.parquet(f"file://{out}/committed_offsets").count() > 0


def test_an_output_dir_that_cannot_be_made_is_one_line_before_spark_starts(written, tmp_path, capsys):
    from pipeline.run import main

    data, _ = written
    (tmp_path / "a-file").write_text("where the job wants a directory")
    for out in (tmp_path / "a-file", tmp_path / "a-file" / "out"):
        assert main(["--data-dir", str(data), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: output dir {out}: ") and err.count("\n") == 1, err


def test_an_output_that_cannot_be_written_ends_the_job_with_its_error(spark, written, tmp_path):
    """The outputs are written by several threads: one that fails ends the job with its error
    (which `main` prints as one line, exit status 2) and leaves no thread of the job running."""
    import threading

    data, _ = written
    out = tmp_path / "out"
    out.mkdir()
    (out / "lag_status").write_text("a file where the job wants a directory")
    with pytest.raises(OSError) as failed:
        run(spark, str(data), str(out), log=QUIET)
    assert "lag_status" in str(failed.value)
    assert not [t.name for t in threading.enumerate() if t.name.startswith(("output-writer", "output-planner"))]
