"""`kcoord` (python -m coordinator.admin) against a real server with real consumers: the
kafka-consumer-groups views, offset resets, export/import, topics, and one-line failures."""

from __future__ import annotations

import pytest

import csv
import datetime
import io
import json
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer

from tests.support import cli
from tests.support.process import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

T0 = 1_700_000_000_000  # record timestamps of the messages produced here (ms)


def kcoord(server, *args: str, output: str | None = "json") -> subprocess.CompletedProcess:
    """In this process (tests/support/cli.py); the tests of `python -m coordinator.admin`'s own
    argument handling and failures below run it as a subprocess."""
    return cli.kcoord("--bootstrap-server", server.bootstrap, *(("--output", output) if output else ()), *args)


def ok(server, *args: str, output: str | None = "json"):
    r = kcoord(server, *args, output=output)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if output == "json" and r.stdout.strip() else r.stdout


def one_line_failure(r: subprocess.CompletedProcess, code: int = 1) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r.stderr


def produce(server, topic: str, partition: int, first: int, n: int) -> None:
    p = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(first, first + n):
        p.produce(topic, value=b"m%d" % i, partition=partition, timestamp=T0 + i * 1000)
    assert p.flush(10) == 0


def consumer(server, group: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": group,
            "client.id": f"{group}-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(["orders"])
    return c


def consume(c: Consumer, n: int) -> list:
    got, deadline = [], time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        got += [m for m in c.consume(100, 0.5) if not m.error()]
    return got


def test_describe_reset_export_import(server, server_factory):
    ok(server, "topics", "create", "orders", "--partitions", "2", output=None)
    assert ok(server, "topics", "list") == [{"TOPIC": "orders", "PARTITIONS": 2}]
    produce(server, "orders", 0, 0, 10)
    produce(server, "orders", 1, 0, 6)
    c = consumer(server, "app")
    assert len(consume(c, 16)) == 16
    c.commit(asynchronous=False)
    produce(server, "orders", 0, 10, 5)  # lag 5 on partition 0

    rows = ok(server, "groups", "describe", "app")
    by_partition = {r["PARTITION"]: r for r in rows}
    assert {k: by_partition[0][k] for k in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")} == {
        "CURRENT-OFFSET": 10,
        "LOG-END-OFFSET": 15,
        "LAG": 5,
    }
    assert (by_partition[1]["LAG"], by_partition[1]["CONSUMER-ID"]) == (0, c.memberid())
    assert (by_partition[0]["HOST"], by_partition[0]["CLIENT-ID"]) == ("/127.0.0.1", "app-client")
    members = ok(server, "groups", "describe", "app", "--members")
    assert [(m["CONSUMER-ID"], m["#PARTITIONS"]) for m in members] == [(c.memberid(), 2)]
    (state,) = ok(server, "groups", "describe", "app", "--state")
    assert (state["STATE"], state["#MEMBERS"], state["ASSIGNMENT-STRATEGY"]) == ("Stable", 1, "range")
    table = ok(server, "groups", "describe", "app", output=None)
    assert "CURRENT-OFFSET" in table and "LOG-END-OFFSET" in table
    assert {"GROUP": "app", "STATE": "Stable", "PROTOCOL-TYPE": "consumer"} in ok(server, "groups", "list")
    assert ok(server, "groups", "list", "--state", "Empty") == []

    # Kafka resets only groups without active members
    err = one_line_failure(kcoord(server, "offsets", "reset", "app", "--topic", "orders", "--to-earliest", "--execute"))
    assert "Stable" in err and "no active members" in err
    err = one_line_failure(kcoord(server, "groups", "delete", "app"))
    assert "NON_EMPTY_GROUP" in err
    c.close()

    # dry runs of every kind of target
    def dry(*target: str) -> dict:
        return {
            (r["TOPIC"], r["PARTITION"]): r["NEW-OFFSET"]
            for r in ok(server, "offsets", "reset", "app", "--topic", "orders", *target)
        }

    assert dry("--to-earliest") == {("orders", 0): 0, ("orders", 1): 0}
    assert dry("--to-latest") == {("orders", 0): 15, ("orders", 1): 6}
    assert dry("--to-offset", "8") == {("orders", 0): 8, ("orders", 1): 6}  # within each partition's range
    assert dry("--shift-by", "-3") == {("orders", 0): 7, ("orders", 1): 3}
    assert dry("--by-duration", "PT1H") == {("orders", 0): 15, ("orders", 1): 6}  # every record is older
    assert ok(server, "groups", "describe", "app")[0]["CURRENT-OFFSET"] == 10  # nothing changed

    at = datetime.datetime.fromtimestamp((T0 + 3000) / 1000, datetime.timezone.utc).isoformat()
    ok(server, "offsets", "reset", "app", "--topic", "orders:0", "--to-datetime", at, "--execute")
    c = consumer(server, "app")
    first = consume(c, 1)[0]
    c.close()
    assert (first.partition(), first.offset(), first.timestamp()[1]) == (0, 3, T0 + 3000)

    exported = ok(server, "offsets", "export", "app", output=None)
    assert list(csv.reader(io.StringIO(exported))) == [["orders", "0", "3"], ["orders", "1", "6"]]
    fresh = server_factory()
    ok(fresh, "topics", "create", "orders", "--partitions", "2", output=None)
    produce(fresh, "orders", 0, 0, 15)
    produce(fresh, "orders", 1, 0, 6)
    path = fresh.data_dir.parent / "offsets.csv"
    path.write_text(exported)
    ok(fresh, "offsets", "import", "app", "--file", str(path), "--execute")
    assert ok(fresh, "offsets", "export", "app", output=None) == exported

    # deletes are dry runs unless --execute (or --yes), as offsets reset is
    assert ok(server, "offsets", "delete", "app", "--topic", "orders:1") == [
        {"GROUP": "app", "TOPIC": "orders", "PARTITION": 1, "RESULT": "offset 6 would be deleted"}
    ]
    assert ok(server, "groups", "delete", "app") == [{"GROUP": "app", "RESULT": "would be deleted"}]
    dry = kcoord(server, "topics", "delete", "orders", output=None)
    assert dry.returncode == 0 and "would delete orders (2 partitions)" in dry.stderr
    assert "dry run: nothing was deleted" in dry.stderr
    assert ok(server, "offsets", "export", "app", output=None) == "orders,0,3\norders,1,6\n"
    assert [t["TOPIC"] for t in ok(server, "topics", "list")] == ["orders"]

    ok(server, "offsets", "delete", "app", "--topic", "orders:1", "--execute")
    assert ok(server, "offsets", "export", "app", output=None) == "orders,0,3\n"
    assert ok(server, "groups", "delete", "app", "--yes") == [{"GROUP": "app", "RESULT": "deleted"}]
    ok(server, "topics", "delete", "orders", "--execute", output=None)
    assert ok(server, "topics", "list") == []


def test_options_after_the_subcommand(server):
    """--output and --bootstrap-server where a user types them: after the subcommand too."""
    ok(server, "topics", "create", "late", "--partitions", "1", output=None)
    cmd = [
        sys.executable,
        "-m",
        "coordinator.admin",
        "topics",
        "list",
        "--bootstrap-server",
        server.bootstrap,
        "--output",
        "json",
    ]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [t["TOPIC"] for t in json.loads(r.stdout)] == ["late"]
    r = kcoord(server, "topics", "list", "--output", "csv", output="json")  # the later one wins
    assert r.returncode == 0 and r.stdout.splitlines()[1].startswith("late,"), r.stdout
    bad = kcoord(server, "topics", "list", "--output", "yaml", output=None)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_create_if_not_exists(server):
    """kafka-topics' --if-not-exists: a second create of the same topic is no failure."""
    ok(server, "topics", "create", "twice", "--partitions", "2", output=None)
    err = one_line_failure(kcoord(server, "topics", "create", "twice", output=None))
    assert "TOPIC_ALREADY_EXISTS" in err
    again = kcoord(server, "topics", "create", "twice", "--partitions", "2", "--if-not-exists", output=None)
    assert again.returncode == 0 and "exists already" in again.stderr


def test_dry_run_delete_of_what_is_not_there(server):
    err = one_line_failure(kcoord(server, "groups", "delete", "nobody"))
    assert "GROUP_ID_NOT_FOUND" in err
    err = one_line_failure(kcoord(server, "topics", "delete", "missing", output=None))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_bad_input_is_one_line(server):
    assert "does not exist" in one_line_failure(kcoord(server, "groups", "describe", "nobody"))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in one_line_failure(
        kcoord(server, "offsets", "reset", "g", "--topic", "nope", "--to-latest")
    )
    assert "cannot connect" in one_line_failure(
        subprocess.run(
            [sys.executable, "-m", "coordinator.admin", "--bootstrap-server", "127.0.0.1:1", "groups", "list"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    )
    assert "HOST:PORT" in one_line_failure(
        subprocess.run(
            [sys.executable, "-m", "coordinator.admin", "--bootstrap-server", "nowhere", "groups", "list"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    )
    ok(server, "topics", "create", "t", "--partitions", "1", output=None)
    one_line_failure(kcoord(server, "offsets", "reset", "g", "--topic", "t", "--by-duration", "1 hour"), code=2)
    one_line_failure(kcoord(server, "offsets", "reset", "g", "--topic", "t", "--to-datetime", "yesterday"), code=2)
    one_line_failure(kcoord(server, "offsets", "reset", "g", "--topic", "t"), code=2)  # no target
    one_line_failure(kcoord(server, "offsets", "reset", "g", "--to-latest"), code=2)  # no topics
    assert "no partition 7" in one_line_failure(
        kcoord(server, "offsets", "reset", "g", "--topic", "t:7", "--to-latest")
    )
    assert "INVALID_CONFIG" in one_line_failure(kcoord(server, "topics", "create", "u", "--config", "nope=1"))
    assert "TOPIC_ALREADY_EXISTS" in one_line_failure(kcoord(server, "topics", "create", "t"))
    bad = server.data_dir.parent / "bad.csv"
    bad.write_text("t,zero,1\n")
    assert "line 1" in one_line_failure(kcoord(server, "offsets", "import", "g", "--file", str(bad)))


def test_produce_and_consume_like_kcat(server):
    from kafka.partitioner.default import murmur2  # kafka-python's copy of Kafka's hash

    ok(server, "topics", "create", "lines", "--partitions", "3", output=None)
    keys = [f"user-{i}" for i in range(12)]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator.admin",
            "--bootstrap-server",
            server.bootstrap,
            "produce",
            "lines",
            "--key-separator",
            "=",
        ],
        input="".join(f"{k}=v{k}\n" for k in keys),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and "produced 12 records" in r.stderr, r.stderr
    rows = ok(server, "consume", "lines", "--timeout", "1")
    assert sorted(row["KEY"] for row in rows) == sorted(keys)
    for row in rows:  # placed as Kafka's default (murmur2) partitioner places keys
        assert row["PARTITION"] == (murmur2(row["KEY"].encode()) & 0x7FFFFFFF) % 3
        assert row["VALUE"] == "v" + row["KEY"]
    assert ok(server, "consume", "lines", "--max-messages", "5", "--timeout", "1", output=None).count("\n") == 5
    assert ok(server, "consume", "lines", "--offset", "end", "--timeout", "0.3") == []
    assert "no partition 9" in one_line_failure(kcoord(server, "consume", "lines", "--partition", "9"))


def test_group_lag_status_from_the_metrics(server_factory):
    from tests.support.process import free_port

    port = free_port()
    s = server_factory("--metrics-port", str(port), "--metrics-lag-sample-ms", "100")
    ok(s, "topics", "create", "orders", "--partitions", "1", output=None)
    produce(s, "orders", 0, 0, 10)
    for i in range(3):  # committed again and again, never moving, lag 6: STALL
        if i:
            time.sleep(0.5)
        ok(s, "offsets", "reset", "stuck", "--topic", "orders", "--to-offset", "4", "--execute")
    url = f"http://127.0.0.1:{port}/metrics"
    r = kcoord(s, "groups", "status", "stuck", "--metrics-url", url)
    assert r.returncode == 0, r.stderr
    assert [(row["PARTITION"], row["LAG"], row["STATUS"]) for row in json.loads(r.stdout)] == [(0, 6, "STALL")]
    assert "group stuck: ERR" in r.stderr
    assert "no committed offsets" in one_line_failure(kcoord(s, "groups", "status", "other", "--metrics-url", url))
    assert "cannot read metrics" in one_line_failure(
        kcoord(s, "groups", "status", "stuck", "--metrics-url", "http://127.0.0.1:1/metrics")
    )
