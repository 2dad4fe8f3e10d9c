"""The test control from other languages: JSON over HTTP on the metrics port with
--enable-test-control, and `kcoord fault ...` over it. Bad input is a 400 (or exit status 1)
with one message, and changes nothing; without the flag there is no control at all.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tests.support.control_http import http, kcoord
from tests.support.process import ROOT, free_port

pytestmark = pytest.mark.slow  # a kcoord subprocess per command


@pytest.fixture
def controlled(server_factory):
    port = free_port()
    server = server_factory("--metrics-port", str(port), "--enable-test-control")
    server.control = f"127.0.0.1:{port}"
    return server


def test_http_fault_makes_a_commit_retry(controlled):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.structs import OffsetAndMetadata

    admin = KafkaAdminClient(bootstrap_servers=controlled.bootstrap)
    admin.create_topics([NewTopic("orders", 1, 1)])
    admin.close()
    status, rule = http(
        controlled.control,
        "POST",
        "/faults",
        '{"api": "OffsetCommit", "error": "COORDINATOR_LOAD_IN_PROGRESS", "times": 2, "group": "g"}',
    )
    assert status == 201 and rule["id"] == 1 and rule["error_code"] == 14 and rule["times"] == 2
    consumer = KafkaConsumer(
        bootstrap_servers=controlled.bootstrap, group_id="g", enable_auto_commit=False, retry_backoff_ms=10
    )
    try:
        consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(9, "", -1)})
        assert consumer.committed(TopicPartition("orders", 0)) == 9
    finally:
        consumer.close()
    assert http(controlled.control, "GET", "/faults") == (200, [])  # fired twice, then gone


def test_http_lists_and_clears(controlled):
    c = controlled.control
    status, added = http(
        c,
        "POST",
        "/faults",
        json.dumps([{"api": 12, "error": 27, "times": None}, {"api": "Fetch", "delay_ms": 10, "topic": "t"}]),
    )
    assert status == 201 and [r["id"] for r in added] == [1, 2]
    assert http(c, "GET", "/faults") == (200, added)
    assert http(c, "DELETE", "/faults/1") == (200, {"cleared": 1})
    assert http(c, "DELETE", "/faults/1") == (404, {"error": "no fault 1"})
    assert http(c, "DELETE", "/faults") == (200, {"cleared": 1})
    assert http(c, "GET", "/faults") == (200, [])


BAD_BODIES = [
    ("{not json", "the body is not JSON"),
    ("", "the request needs a JSON body"),
    ("42", "a fault is a JSON object"),
    ("[]", "a fault is a JSON object"),
    ('{"api": "OffsetCommit", "error": 16, "colour": "red"}', "unknown field 'colour'"),
    ('{"api": "OffsetCommit", "error": "NOT_AN_ERROR"}', "unknown Kafka error 'NOT_AN_ERROR'"),
    ('{"api": "OffsetCommit", "error": 16, "times": "twice"}', "times must be an integer"),
    ('{"api": "OffsetCommit", "error": 16, "probability": 0}', "probability must be a number in (0, 1]"),
    ('[{"api": "Heartbeat", "error": 27}, {"api": "Nope"}]', "fault 2 of 2: api: unknown Kafka API 'Nope'"),
]


@pytest.mark.parametrize(("body", "message"), BAD_BODIES)
def test_http_bad_fault_is_400_and_changes_nothing(controlled, body, message):
    c = controlled.control
    _, kept = http(c, "POST", "/faults", '{"api": "Heartbeat", "error": 27, "times": null}')
    status, answer = http(c, "POST", "/faults", body)
    assert status == 400 and message in answer["error"], answer
    assert http(c, "GET", "/faults") == (200, [kept])


def raw_http(control: str, request: bytes) -> bytes:
    host, port = control.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)  # (a body shorter than announced ends here)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_http_bad_requests(controlled):
    c = controlled.control
    assert http(c, "PUT", "/faults")[0] == 405
    assert http(c, "GET", "/faults/1")[0] == 405
    assert http(c, "GET", "/faults/abc")[0] == 404
    assert raw_http(c, b"POST /faults HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").startswith(
        b"HTTP/1.1 411"
    )
    assert raw_http(c, b"POST /faults HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n").startswith(b"HTTP/1.1 413")
    assert raw_http(c, b"POST /faults HTTP/1.1\r\nContent-Length: x\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert raw_http(c, b"POST /faults HTTP/1.1\r\nContent-Length: -1\r\n\r\n").startswith(b"HTTP/1.1 400")
    # a body shorter than announced: the connection ends, the answer is 400
    assert raw_http(c, b"POST /faults HTTP/1.1\r\nContent-Length: 50\r\n\r\n{}").startswith(b"HTTP/1.1 400")
    status, answer = http(c, "GET", "/cluster")
    assert status == 404 and "no cluster control" in answer["error"]  # a single broker
    assert http(c, "GET", "/faults") == (200, [])
    assert http(c, "GET", "/health")[0] == 200  # the metrics port's own routes are still there


def test_no_control_without_the_flag(server_factory):
    port = free_port()
    server_factory("--metrics-port", str(port))
    c = f"127.0.0.1:{port}"
    assert http(c, "POST", "/faults", '{"api": "Heartbeat", "error": 27}')[0] == 405
    assert http(c, "GET", "/faults")[0] == 404


def test_flag_without_metrics_port_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "d"),
            "--enable-test-control",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --enable-test-control serves on the metrics port: give --metrics-port too (0 = any free port)"
    ]


def test_kcoord_fault_add_list_clear(controlled):
    c = controlled.control
    done = kcoord(
        "fault", "add", "OffsetCommit", "NOT_COORDINATOR", "--times", "2", "--group", "g", "--output", "json", control=c
    )
    assert done.returncode == 0, done.stderr
    [rule] = json.loads(done.stdout)
    assert (rule["api"], rule["error"], rule["times"], rule["group"]) == ("OffsetCommit", "NOT_COORDINATOR", 2, "g")
    done = kcoord("fault", "add", "Produce", "--drop", "after", "--forever", control=c)
    assert done.returncode == 0 and "Produce" in done.stdout and "after" in done.stdout
    done = kcoord("fault", "list", "--output", "json", control=c)
    assert [r["api"] for r in json.loads(done.stdout)] == ["OffsetCommit", "Produce"]
    assert kcoord("fault", "clear", "1", control=c).stdout.strip() == "cleared 1 fault(s)"
    assert kcoord("fault", "clear", control=c).stdout.strip() == "cleared 1 fault(s)"
    assert http(c, "GET", "/faults") == (200, [])


def test_kcoord_bad_fault_is_one_line_and_changes_nothing(controlled):
    c = controlled.control
    _, kept = http(c, "POST", "/faults", '{"api": "Heartbeat", "error": 27, "times": null}')
    for args, message in [
        (["NoSuchApi", "16"], "error: api: unknown Kafka API 'NoSuchApi'"),
        (["OffsetCommit", "16", "--probability", "2"], "error: probability must be a number in (0, 1]"),
        (["OffsetCommit", "16", "--drop", "after"], "error: error and drop exclude each other"),
        (["OffsetCommit"], "error: a fault needs an action"),
    ]:
        done = kcoord("fault", "add", *args, control=c)
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith(message), done.stderr
    done = kcoord("fault", "add", "OffsetCommit", "16", "--times", "2", "--forever", control=c)
    assert done.returncode == 2  # a usage error
    done = kcoord("fault", "list", control="127.0.0.1:1")
    assert done.returncode == 1 and "cannot reach the test control" in done.stderr
    assert http(c, "GET", "/faults") == (200, [kept])


def test_ready_line_says_where_the_control_is(tmp_path):
    """With --metrics-port 0 the port is the OS's choice: the ready line names it (control=PORT)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator",
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--enable-test-control",
            "--data-dir",
            str(tmp_path / "d"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        words = proc.stdout.readline().split()
        assert words[0] == "ready" and words[2].startswith("control=")
        assert http(f"127.0.0.1:{words[2].removeprefix('control=')}", "GET", "/faults") == (200, [])
    finally:
        proc.terminate()
        proc.wait(15)


def test_kcoord_cluster_preferred_restart_and_transaction_coordinator_move(server_factory):
    port = free_port()
    server_factory("--brokers", "3", "--metrics-port", str(port), "--enable-test-control")
    c = f"127.0.0.1:{port}"
    assert kcoord("cluster", "stop", "3", control=c).returncode == 0
    done = kcoord("cluster", "start", "3", "--preferred", control=c)
    assert done.returncode == 0 and done.stdout.strip() == "broker 3 started", done.stderr
    done = kcoord("cluster", "move-transaction-coordinator", "txn-1", "--to", "2", control=c)
    assert done.returncode == 0 and done.stdout.strip() == "transactional id txn-1: coordinator 2", done.stderr
    assert http(c, "GET", "/cluster/transaction-coordinators/txn-1") == (
        200,
        {"transactional_id": "txn-1", "coordinator": 2},
    )
    done = kcoord("cluster", "start", "9", control=c)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1


BAD_CLUSTER_REQUESTS = [
    ("POST", "/cluster/coordinators/move", "{not json", 400, "the body is not JSON"),
    ("POST", "/cluster/coordinators/move", "", 400, "the request needs a JSON body"),
    ("POST", "/cluster/coordinators/move", "[]", 400, "the body must be a JSON object"),
    ("POST", "/cluster/coordinators/move", '{"to": 2}', 400, "field 'group_id' is required"),
    ("POST", "/cluster/coordinators/move", '{"group_id": 7}', 400, "group_id must be a non-empty string"),
    ("POST", "/cluster/coordinators/move", '{"group_id": "g", "to": "2"}', 400, "to must be a broker's node id"),
    ("POST", "/cluster/coordinators/move", '{"group_id": "g", "to": 99}', 400, "no broker 99"),
    ("POST", "/cluster/coordinators/move", '{"group_id": "g", "colour": 1}', 400, "unknown field 'colour'"),
    ("POST", "/cluster/transaction-coordinators/move", '{"transactional_id": ""}', 400, "non-empty string"),
    ("POST", "/cluster/leaders/move", '{"topic": "t", "partition": "0"}', 400, "partition must be an integer"),
    ("POST", "/cluster/leaders/move", '{"topic": "nope", "partition": 0}', 400, "no partition 'nope' 0"),
    ("POST", "/cluster/brokers/99/stop", "", 400, "no broker 99"),
    ("POST", "/cluster/brokers/1/stop", '{"preferred": true}', 400, "this action takes none"),
    ("POST", "/cluster/brokers/1/start", '{"preferred": 1}', 400, "preferred must be true or false"),
    ("GET", "/cluster/leaders/nope/0", None, 400, "no partition 'nope' 0"),
    ("DELETE", "/cluster", None, 405, "allowed: POST"),
    ("POST", "/cluster/nowhere", "{}", 404, "no route"),
    ("GET", "/cluster/nowhere/at/all", None, 404, "no route"),
]


@pytest.fixture
def three_brokers(server_factory):
    port = free_port()
    server_factory("--brokers", "3", "--metrics-port", str(port), "--enable-test-control")
    return f"127.0.0.1:{port}"


def test_http_bad_cluster_requests_are_refused_and_change_nothing(three_brokers):
    c = three_brokers
    _, before = http(c, "GET", "/cluster")
    for method, path, body, status, message in BAD_CLUSTER_REQUESTS:
        got, answer = http(c, method, path, body)
        assert got == status and message in answer["error"], (method, path, body, answer)
    assert http(c, "GET", "/cluster") == (200, before)


def test_http_any_json_to_the_cluster_routes_is_answered(three_brokers):
    """Whatever JSON a control client posts, the answer is 200 or a 4xx with one message."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=6)
    fields = st.sampled_from(["group_id", "transactional_id", "topic", "partition", "to", "preferred", "x"])
    bodies = st.dictionaries(fields, scalars, max_size=4).map(json.dumps) | st.text(max_size=12)
    paths = st.sampled_from(
        [
            "/cluster/coordinators/move",
            "/cluster/transaction-coordinators/move",
            "/cluster/leaders/move",
            "/cluster/brokers/2/start",
            "/cluster/brokers/7/stop",
        ]
    )

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(path=paths, body=bodies)
    def check(path, body):
        status, answer = http(three_brokers, "POST", path, body)
        assert status == 200 or (status in (400, 404) and answer["error"]), (path, body, status, answer)

    check()
    assert http(three_brokers, "GET", "/cluster")[0] == 200


def test_kcoord_bad_cluster_and_fault_arguments_are_one_line(three_brokers):
    c = three_brokers
    for args, message in [
        (["cluster", "stop", "99"], "error: no broker 99"),
        (["cluster", "move-leader", "nope", "0"], "error: no partition 'nope' 0"),
        (["cluster", "move-coordinator", "g", "--to", "99"], "error: no broker 99"),
        (["fault", "add", "OffsetCommit", "16", "--times", "0"], "error: times must be >= 1"),
        (["fault", "add", "OffsetCommit", "16", "--delay-ms", "-5"], "error: delay_ms must be >= 0"),
        (["fault", "add", "OffsetCommit", "16", "--stall-ms", "0"], "error: stall must be true"),
    ]:
        done = kcoord(*args, control=c)
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, (args, done.stderr)
        assert done.stderr.startswith(message), (args, done.stderr)
    done = kcoord("cluster", "move-leader", "t", "zero", control=c)
    assert done.returncode == 2  # a usage error (click's)
    assert http(c, "GET", "/faults") == (200, [])
