"""Narrowed API version ranges (coordinator/api_version_limits.py), as librdkafka's
rd_kafka_mock_set_apiversion: the brokers advertise and accept only the narrowed versions,
real clients fall back to them (checked with request tracking), a request outside them is
answered as one of a version never served, and bad input changes nothing."""

from __future__ import annotations

import socket
import struct

import pytest

from coordinator.testing import Cluster, ClusterError
from tests.support.control_http import http, kcoord
from tests.support.process import free_port

TOPIC = "ledger"


def raw_request(bootstrap: str, frame: bytes) -> bytes:
    """One request frame's answer (b"" if the broker closed the connection instead)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = sock.recv(4)
        if not size:
            return b""
        (n,) = struct.unpack(">i", size)
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk
            out += chunk
        return out


def header(api_key: int, version: int, correlation_id: int = 7, flexible: bool = False) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, 3) + b"raw" + (b"\x00" if flexible else b"")


def advertised(bootstrap: str, version: int = 0) -> tuple[int, dict[int, tuple[int, int]]]:
    """ApiVersions answered in the v0 layout (v0 asked, or any version refused): its error
    code and ranges."""
    body = b"" if version == 0 else b"\x04raw\x021\x00"  # v3+: client software name and version
    answer = raw_request(bootstrap, header(18, version, flexible=version >= 3) + body)
    correlation_id, error, count = struct.unpack_from(">ihi", answer)
    assert correlation_id == 7
    ranges = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", answer, 10 + 6 * i)
        ranges[key] = (low, high)
    return error, ranges


def round_trip_confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "ck"})
    for i in range(5):
        producer.produce(TOPIC, str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "ck",
            "group.id": "ck-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got = []
        while len(got) < 5:
            m = consumer.poll(10)
            assert m is not None, got
            assert m.error() is None
            got.append(m.value())
        consumer.commit(message=m, asynchronous=False)
        assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset == 5
    finally:
        consumer.close()
    assert got == [str(i).encode() for i in range(5)]


def round_trip_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="kp")
    for i in range(5):
        producer.send(TOPIC, str(i).encode()).get(30)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="kp",
        group_id="kp-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        partition = TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        got = []
        while len(got) < 10:  # (the 5 of confluent-kafka's round before, and its own)
            for records in consumer.poll(10_000).values():
                got += [r.value for r in records]
        consumer.commit()
        assert consumer.committed(partition) == 10
    finally:
        consumer.close()


NARROWED = {"Produce": (3, 7), "Fetch": (4, 10), "OffsetCommit": (2, 6), "OffsetFetch": (1, 5), "ApiVersions": (0, 2)}


def test_clients_fall_back_to_the_narrowed_versions(tmp_path):
    with Cluster(brokers=1, data_dir=tmp_path / "c") as cluster:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # (kept until the results are in)
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            f.result(30)
        for api, (low, high) in NARROWED.items():
            entry = cluster.set_api_version(api, low, high)
            assert (entry["min_version"], entry["max_version"], entry["narrowed"]) == (low, high, True)
        assert {e["api"] for e in cluster.api_versions(narrowed=True)} == set(NARROWED)
        error, ranges = advertised(cluster.bootstrap)
        assert error == 0 and ranges[0] == (3, 7) and ranges[1] == (4, 10) and ranges[8] == (2, 6)
        cluster.start_tracking()
        round_trip_confluent(cluster.bootstrap)
        round_trip_kafka_python(cluster.bootstrap)
        for client in ("ck", "kp"):
            tracked = cluster.requests(client_id=client)
            assert all(r["supported"] for r in tracked if r["api"] != "ApiVersions")
            used = {r["api"] for r in tracked}
            assert {"Produce", "Fetch", "OffsetCommit", "OffsetFetch"} <= used, used
            for r in tracked:
                if r["api"] in NARROWED and r["supported"]:
                    low, high = NARROWED[r["api"]]
                    assert low <= r["api_version"] <= high, r
        assert cluster.reset_api_versions() == len(NARROWED)
        assert cluster.api_versions(narrowed=True) == []
        answer = raw_request(cluster.bootstrap, header(18, 3, flexible=True) + b"\x04raw\x021\x00")
        assert struct.unpack_from(">ih", answer) == (7, 0)  # v3 served again (answered in its own layout)


def test_a_version_outside_the_narrowed_range_is_answered_as_never_served(tmp_path):
    with Cluster(brokers=1, data_dir=tmp_path / "c") as cluster:
        cluster.set_api_version("OffsetCommit", max_version=6)
        cluster.set_api_version("ApiVersions", max_version=2)
        cluster.start_tracking()
        # an OffsetCommit v8 (flexible header) and v7: the connection closes, as for v99
        for version, flexible in ((8, True), (7, False), (99, True)):
            assert raw_request(cluster.bootstrap, header(8, version, flexible=flexible) + b"\x00" * 8) == b""
        # ApiVersions v3: UNSUPPORTED_VERSION in the v0 layout, naming the narrowed range
        assert advertised(cluster.bootstrap, version=3) == (35, {18: (0, 2)})
        assert advertised(cluster.bootstrap, version=2 - 2)[1][8] == (2, 6)  # (Kafka 4 serves v2 up)
        tracked = cluster.requests(client_id="raw")
        assert [(r["api"], r["api_version"], r["supported"]) for r in tracked] == [
            ("OffsetCommit", 8, False),
            ("OffsetCommit", 7, False),
            ("OffsetCommit", 99, False),
            ("ApiVersions", 3, False),
            ("ApiVersions", 0, True),
        ]
        assert cluster.reset_api_versions("OffsetCommit") == 1
        assert cluster.reset_api_versions("OffsetCommit") == 0
        assert advertised(cluster.bootstrap)[1][8] == (2, 10)


@pytest.mark.parametrize(
    "args, message",
    [
        (("OffsetCommit", 5, 3), "OffsetCommit: versions 5..3 is an empty range"),
        (("OffsetCommit", 0, 99), "versions 0..99 are not within 2..10, the versions this server serves"),
        (("OffsetCommit", -1, None), "versions -1..10 are not within"),
        (("Nope", 0, 1), "unknown Kafka API 'Nope'"),
        ((64, 0, 0), r"this server does not serve UnregisterBroker \(key 64\)"),
        (("Fetch", "3", None), "min_version must be an integer"),
        (("Fetch", None, 2.5), "max_version must be an integer"),
    ],
)
def test_bad_range_is_refused_and_changes_nothing(tmp_path, args, message):
    with Cluster(brokers=1, data_dir=tmp_path / "c") as cluster:
        cluster.set_api_version("Produce", max_version=8)
        before = cluster.api_versions()
        with pytest.raises(ClusterError, match=message):
            cluster.set_api_version(*args)
        assert cluster.api_versions() == before
        with pytest.raises(ClusterError, match="unknown Kafka API"):
            cluster.reset_api_versions("Nope")
        assert cluster.api_versions() == before


@pytest.fixture
def controlled(server_factory):
    port = free_port()
    server = server_factory("--metrics-port", str(port), "--enable-test-control")
    server.control = f"127.0.0.1:{port}"
    return server


@pytest.mark.slow  # kcoord subprocesses
def test_http_and_kcoord(controlled):
    c = controlled.control
    status, entry = http(c, "POST", "/api-versions", '{"api": "Fetch", "min_version": 4, "max_version": 11}')
    assert status == 200 and entry["api_key"] == 1 and (entry["min_version"], entry["max_version"]) == (4, 11)
    status, both = http(c, "POST", "/api-versions", '[{"api": 8, "max_version": 7}, {"api": "Produce"}]')
    assert status == 200 and [(e["api"], e["max_version"], e["narrowed"]) for e in both] == [
        ("OffsetCommit", 7, True),
        ("Produce", 13, False),  # its full range: not narrowed
    ]
    assert advertised(controlled.bootstrap)[1][1] == (4, 11)
    assert [e["api"] for e in http(c, "GET", "/api-versions")[1] if e["narrowed"]] == ["Fetch", "OffsetCommit"]
    assert http(c, "DELETE", "/api-versions/Fetch") == (200, {"reset": 1})
    assert http(c, "DELETE", "/api-versions") == (200, {"reset": 1})

    done = kcoord("api-versions", "set", "OffsetFetch", "--max", "5", control=c)
    assert done.returncode == 0 and "OffsetFetch" in done.stdout
    listed = kcoord("api-versions", "list", "--narrowed", control=c)
    assert listed.returncode == 0 and [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["OffsetFetch"]
    assert kcoord("api-versions", "reset", "OffsetFetch", control=c).stdout.strip() == "reset 1 api(s)"
    assert "OffsetFetch" not in kcoord("api-versions", "list", "--narrowed", control=c).stdout


@pytest.mark.parametrize(
    "method, path, body, status, message",
    [
        ("POST", "/api-versions", '{"api": "Fetch", "min_version": 9, "max_version": 2}', 400, "empty range"),
        ("POST", "/api-versions", '{"api": "Fetch", "max_version": 99}', 400, "not within 4..18"),
        ("POST", "/api-versions", '[{"api": "Fetch", "max_version": 5}, {"api": "Nope"}]', 400, "range 2 of 2:"),
        ("POST", "/api-versions", '{"api": "Fetch", "max": 5}', 400, "unknown field 'max'"),
        ("POST", "/api-versions", '{"max_version": 5}', 400, "field 'api' is required"),
        ("POST", "/api-versions", "[]", 400, "a non-empty list"),
        ("POST", "/api-versions", "7", 400, "a JSON object"),
        ("POST", "/api-versions", "", 400, "needs a JSON body"),
        ("DELETE", "/api-versions/Nope", None, 400, "unknown Kafka API 'Nope'"),
        ("DELETE", "/api-versions/64", None, 400, "does not serve"),
        ("PUT", "/api-versions", None, 405, "allowed: GET, POST, DELETE"),
        ("GET", "/api-versions/Fetch", None, 405, "allowed: DELETE"),
    ],
)
def test_http_bad_range_changes_nothing(controlled, method, path, body, status, message):
    c = controlled.control
    http(c, "POST", "/api-versions", '{"api": "Metadata", "max_version": 9}')
    before = http(c, "GET", "/api-versions")
    answer = http(c, method, path, body)
    assert answer[0] == status and message in answer[1]["error"]
    assert http(c, "GET", "/api-versions") == before


@pytest.mark.slow  # kcoord subprocesses
def test_kcoord_bad_range_is_one_line_and_changes_nothing(controlled):
    c = controlled.control
    before = http(c, "GET", "/api-versions")
    for args in (("set", "Fetch", "--min", "9", "--max", "2"), ("set", "Nope"), ("reset", "Nope")):
        done = kcoord("api-versions", *args, control=c)
        assert done.returncode == 1 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done
    assert kcoord("api-versions", "set", "Fetch", "--max", "x", control=c).returncode == 2
    assert http(c, "GET", "/api-versions") == before


@pytest.mark.slow  # a server process
def test_subprocess_cluster_narrows_through_the_http_control(tmp_path):
    with Cluster(brokers=1, subprocess=True, data_dir=tmp_path / "c") as cluster:
        assert cluster.set_api_version("Metadata", 1, 9)["max_version"] == 9
        assert advertised(cluster.bootstrap)[1][3] == (1, 9)
        assert [e["api"] for e in cluster.api_versions(narrowed=True)] == ["Metadata"]
        with pytest.raises(ClusterError, match="empty range"):
            cluster.set_api_version("Metadata", 9, 1)
        assert cluster.reset_api_versions("Metadata") == 1 and cluster.api_versions(narrowed=True) == []
