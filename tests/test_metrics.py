"""The metrics port: Prometheus text parsed with prometheus-client's own parser, lag made by
real clients, Burrow's verdicts driven by commits over the wire, /health and /ready."""

from __future__ import annotations

import asyncio
import datetime
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from tests.support.wire_client import WireClient, request_class
from coordinator.config import parse_args
from coordinator.server import Server
from tests.support.process import create_topics, free_port, wait_for
from tests.support.metrics_scrape import (
    get,
    scrape,
    value,
)

COMMIT, JOIN = 8, 11
MS = datetime.timedelta(milliseconds=1)


def labels_of(samples: dict, name: str, **labels: str) -> dict[str, str]:
    want = set(labels.items())
    (ls,) = [dict(ls) for (n, ls), _ in samples.items() if n == name and want <= ls]
    return ls


@pytest.fixture
def metrics_server(server_factory):
    port = free_port()
    s = server_factory("--metrics-port", str(port), "--metrics-lag-sample-ms", "100")
    s.metrics_port = port
    return s


def produce(bootstrap: str, topic: str, partition: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=b"m%d" % i, partition=partition)
    assert p.flush(10) == 0


def test_lag_of_a_stopped_consumer_grows_in_messages_and_seconds(metrics_server):
    s = metrics_server
    create_topics(s.port, "orders", partitions=2)
    produce(s.bootstrap, "orders", 0, 10)
    produce(s.bootstrap, "orders", 1, 4)
    c = Consumer(
        {
            "bootstrap.servers": s.bootstrap,
            "group.id": "billing",
            "client.id": "billing-app",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(["orders"])
    got = 0
    deadline = time.monotonic() + 30
    while got < 14 and time.monotonic() < deadline:
        got += len([m for m in c.consume(100, 0.5) if not m.error()])
    assert got == 14
    c.commit(asynchronous=False)
    member_id = c.memberid()
    produce(s.bootstrap, "orders", 0, 5)  # the consumer stops reading; the producer goes on

    samples = scrape(s.metrics_port)
    p0 = dict(group="billing", topic="orders", partition="0")
    assert value(samples, "kafka_consumergroup_group_offset", **p0) == 10
    assert value(samples, "kafka_consumergroup_group_lag", **p0) == 5
    assert value(samples, "kafka_consumergroup_group_lag", group="billing", partition="1") == 0
    assert value(samples, "kafka_consumergroup_group_lag_seconds", group="billing", partition="1") == 0
    assert value(samples, "kafka_consumergroup_group_sum_lag", group="billing") == 5
    assert value(samples, "kafka_partition_latest_offset", topic="orders", partition="0") == 15
    owner = labels_of(samples, "kafka_consumergroup_group_lag", **p0)
    assert (owner["consumer_id"], owner["member_host"], owner["client_id"]) == (member_id, "/127.0.0.1", "billing-app")
    assert value(samples, "kcoord_group_state", group="billing", state="Stable") == 1
    assert value(samples, "kcoord_group_members", group="billing") == 1
    first = value(samples, "kafka_consumergroup_group_lag_seconds", **p0)
    assert first > 0
    time.sleep(1.1)
    later = value(scrape(s.metrics_port), "kafka_consumergroup_group_lag_seconds", **p0)
    assert later >= first + 1
    c.close()

    samples = scrape(s.metrics_port)
    assert value(samples, "kcoord_group_state", group="billing", state="Empty") == 1
    assert labels_of(samples, "kafka_consumergroup_group_lag", **p0)["consumer_id"] == ""
    assert value(samples, "kcoord_rebalances_total") >= 1
    assert value(samples, "kcoord_requests_total", request="OffsetCommit", version="9") >= 1
    assert value(samples, "kcoord_offset_commits_total") >= 1
    assert value(samples, "kcoord_log_sync_seconds_count") >= 1
    assert value(samples, "kcoord_log_append_seconds_count") >= 1
    assert value(samples, "kcoord_request_duration_seconds_count", request="OffsetCommit") >= 1
    assert value(samples, "kcoord_recovery_seconds") > 0
    assert value(samples, "kcoord_connections") >= 0


async def commit(conn: WireClient, group: str, topic: str, offset: int) -> None:
    Req, T, P = (
        request_class(COMMIT, 8),
        request_class(COMMIT, 8, "OffsetCommitRequestTopic"),
        request_class(COMMIT, 8, "OffsetCommitRequestPartition"),
    )
    r = await conn.request(
        COMMIT,
        8,
        Req(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                T(
                    name=topic,
                    partitions=(
                        P(partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),
                    ),
                ),
            ),
        ),
    )
    assert r.topics[0].partitions[0].error_code == 0


def statuses(port: int, group: str) -> tuple[str, str]:
    samples = scrape(port)
    part = [
        dict(ls)["status"]
        for (n, ls), v in samples.items()
        if n == "kcoord_partition_lag_status" and v == 1 and dict(ls)["group"] == group
    ]
    whole = [
        dict(ls)["status"]
        for (n, ls), v in samples.items()
        if n == "kcoord_group_lag_status" and v == 1 and dict(ls)["group"] == group
    ]
    return part[0], whole[0]


async def test_burrow_verdicts(metrics_server):
    """Commits every 0.6 s (the sampler notes each), then the verdict Burrow's rules give."""
    s = metrics_server
    conn = await WireClient("committer").connect("127.0.0.1", s.port)
    await conn.create_topics("events", partitions=1)
    produce(s.bootstrap, "events", 0, 10)
    for _ in range(3):  # committing, never moving: STALL (the group: ERR)
        await commit(conn, "stuck", "events", 4)
        await asyncio.sleep(0.6)
    assert statuses(s.metrics_port, "stuck") == ("STALL", "ERR")
    await asyncio.sleep(1.5)  # silent for longer than the window spans: STOP
    assert statuses(s.metrics_port, "stuck") == ("STOP", "ERR")
    await commit(conn, "stuck", "events", 10)  # caught up: OK at once
    assert statuses(s.metrics_port, "stuck") == ("OK", "OK")

    for offset in (2, 4, 6, 8):  # moving, but the lag does not shrink (8 each time): WARN
        if offset > 2:
            produce(s.bootstrap, "events", 0, 2)
        await commit(conn, "slow", "events", offset)
        await asyncio.sleep(0.3)  # (the lag of a commit is noted when the sampler sees it)
    assert statuses(s.metrics_port, "slow") == ("WARN", "WARN")

    await commit(conn, "slow", "events", 3)  # back to an earlier offset: REWIND
    assert statuses(s.metrics_port, "slow") == ("REWIND", "ERR")
    await conn.close()


async def test_request_errors_by_code(metrics_server):
    s = metrics_server
    conn = await WireClient("joiner").connect("127.0.0.1", s.port)
    Req = request_class(JOIN, 5)
    Proto = request_class(JOIN, 5, "JoinGroupRequestProtocol")
    r = await conn.request(
        JOIN,
        5,
        Req(
            group_id="g",
            session_timeout=10_000 * MS,
            rebalance_timeout=10_000 * MS,
            member_id="nobody",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(Proto(name="range", metadata=b""),),
        ),
    )
    assert r.error_code == 25  # UNKNOWN_MEMBER_ID
    await conn.close()
    samples = scrape(s.metrics_port)
    assert value(samples, "kcoord_request_errors_total", request="JoinGroup", error_code="25") == 1
    assert value(samples, "kcoord_requests_total", request="JoinGroup", version="5") == 1


def test_health_ready_and_bad_requests(metrics_server):
    port = metrics_server.metrics_port
    assert get(port, "/health") == (200, "ok\n")
    assert get(port, "/ready") == (200, "ready\n")
    assert get(port, "/nothing")[0] == 404
    with socket.create_connection(("127.0.0.1", port), 5) as sock:
        sock.sendall(b"garbage\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", port), 5) as sock:
        sock.sendall(b"POST /metrics HTTP/1.1\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 405")
    with socket.create_connection(("127.0.0.1", port), 5) as sock:  # headers past the limit
        sock.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"y" * 20_000 + b"\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    assert get(port, "/health")[0] == 200
    assert "Traceback" not in metrics_server.log_text()


async def test_not_ready_until_loaded(tmp_path):
    """The metrics port answers before the data dir is loaded; /ready says not yet."""
    server = Server(parse_args(["--port", "0", "--metrics-port", "0", "--data-dir", str(tmp_path / "d")]))
    sock = server._bind("127.0.0.1", 0)
    await server._start_metrics(sock)
    try:
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, get, server.config.metrics_port, "/ready") == (503, "loading\n")
        assert await loop.run_in_executor(None, get, server.config.metrics_port, "/health") == (200, "ok\n")
    finally:
        sock.close()
        await server.metrics.close()


def test_metrics_port_in_use_is_one_line(tmp_path):
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "coordinator",
                "--port",
                "0",
                "--metrics-port",
                str(port),
                "--data-dir",
                str(tmp_path / "d"),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: cannot serve metrics on") and "\n" not in r.stderr.strip()
    assert not (tmp_path / "d").exists()  # refused before the data dir was touched


def test_grafana_dashboard_names_only_exported_metrics(metrics_server):
    """Every metric the checked-in dashboard queries is one the server exports."""
    import json
    import re

    from tests.support.process import ROOT

    s = metrics_server
    create_topics(s.port, "t", partitions=1)
    produce(s.bootstrap, "t", 0, 1)
    c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "dash", "auto.offset.reset": "earliest"})
    c.subscribe(["t"])
    wait_for(lambda: c.poll(0.2) is not None, what="a message")
    c.commit(asynchronous=False)
    c.close()
    status, text = get(s.metrics_port, "/metrics")
    exported = set()
    for family in text_string_to_metric_families(text):
        exported |= {family.name, *(sample.name for sample in family.samples)}
        if family.type == "counter":
            exported.add(family.name + "_total")
        if family.type == "histogram":
            exported |= {family.name + suffix for suffix in ("_bucket", "_count", "_sum")}
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "kcoord-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs.append(dashboard["templating"]["list"][1]["query"]["query"])
    names = {n for e in exprs for n in re.findall(r"\b(?:kafka|kcoord)_[a-z_]+", e)}
    assert names and not names - exported, names - exported
