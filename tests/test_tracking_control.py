"""Request tracking from other languages: /requests on the HTTP test control and `kcoord
requests ...`, and coordinator.testing's Cluster driving a subprocess through them. Bad
input is a 400 (or exit status 1) with one message, and changes nothing."""

from __future__ import annotations

import pytest

from coordinator.testing import Cluster, ClusterError
from tests.support.control_http import http, kcoord
from tests.support.process import free_port

pytestmark = pytest.mark.slow  # a kcoord subprocess per command


@pytest.fixture
def controlled(server_factory):
    port = free_port()
    server = server_factory("--metrics-port", str(port), "--enable-test-control")
    server.control = f"127.0.0.1:{port}"
    return server


def list_topics(bootstrap: str, client_id: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id)
    try:
        admin.list_topics()
    finally:
        admin.close()


def test_http_start_list_filter_stop_clear(controlled):
    c = controlled.control
    assert http(c, "GET", "/requests/tracking") == (
        200,
        {"tracking": False, "limit": 10000, "recorded": 0, "dropped": 0},
    )
    assert http(c, "POST", "/requests/tracking", '{"limit": 50}')[1]["tracking"] is True
    list_topics(controlled.bootstrap, "http-app")
    status, answer = http(c, "GET", "/requests?api=Metadata&client_id=http-app&broker=1")
    assert status == 200 and answer["tracking"] is True and answer["requests"]
    assert all(r["api_key"] == 3 and r["client_id"] == "http-app" for r in answer["requests"])
    assert http(c, "GET", "/requests?client_id=nobody")[1]["requests"] == []
    stopped = http(c, "DELETE", "/requests/tracking")[1]
    assert stopped["tracking"] is False and stopped["recorded"] > 0
    assert http(c, "DELETE", "/requests") == (200, {"cleared": stopped["recorded"]})
    assert http(c, "GET", "/requests")[1]["requests"] == []


@pytest.mark.parametrize(
    "method, path, body, status, message",
    [
        ("POST", "/requests/tracking", '{"limit": 0}', 400, "limit must be an integer in 1..1000000"),
        ("POST", "/requests/tracking", '{"limit": "9"}', 400, "limit must be an integer"),
        ("POST", "/requests/tracking", '{"size": 9}', 400, "unknown field 'size'"),
        ("POST", "/requests/tracking", "[1]", 400, "the body must be a JSON object"),
        ("POST", "/requests/tracking", "{", 400, "the body is not JSON"),
        ("GET", "/requests?colour=red", None, 400, "unknown filter 'colour'"),
        ("GET", "/requests?broker=x", None, 400, "broker must be a node id"),
        ("GET", "/requests?api=Nope", None, 400, "unknown Kafka API 'Nope'"),
        ("GET", "/requests?api=3&api=8", None, 400, "filter 'api' given 2 times"),
        ("GET", "/requests?api", None, 400, "bad query"),
        ("PUT", "/requests", None, 405, "allowed: GET, DELETE"),
        ("PUT", "/requests/tracking", None, 405, "allowed: GET, POST, DELETE"),
        ("GET", "/requests/elsewhere", None, 404, "no route"),
    ],
)
def test_http_bad_tracking_request_changes_nothing(controlled, method, path, body, status, message):
    c = controlled.control
    before = http(c, "GET", "/requests/tracking")
    answer = http(c, method, path, body)
    assert answer[0] == status and message in answer[1]["error"]
    assert http(c, "GET", "/requests/tracking") == before


def test_kcoord_requests(controlled):
    c = controlled.control
    started = kcoord("requests", "start", "--limit", "100", control=c)
    assert started.returncode == 0 and "tracking on" in started.stdout and "limit 100" in started.stdout
    list_topics(controlled.bootstrap, "cli-app")
    listed = kcoord("requests", "list", "--api", "Metadata", "--client-id", "cli-app", control=c)
    assert listed.returncode == 0 and "Metadata" in listed.stdout and "cli-app" in listed.stdout
    assert "ApiVersions" not in listed.stdout
    as_json = kcoord("--output", "json", "requests", "list", "--broker", "1", control=c)
    assert as_json.returncode == 0 and '"requests"' in as_json.stdout
    stopped = kcoord("requests", "stop", control=c)
    assert stopped.returncode == 0 and "tracking off" in stopped.stdout
    assert "tracking off" in kcoord("requests", "status", control=c).stdout
    assert kcoord("requests", "clear", control=c).stdout.startswith("cleared ")


def test_kcoord_bad_tracking_input_is_one_line_and_changes_nothing(controlled):
    c = controlled.control
    before = http(c, "GET", "/requests/tracking")
    for args in (("requests", "start", "--limit", "0"), ("requests", "list", "--api", "Nope")):
        done = kcoord(*args, control=c)
        assert done.returncode == 1 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    usage = kcoord("requests", "list", "--broker", "x", control=c)
    assert usage.returncode == 2
    assert http(c, "GET", "/requests/tracking") == before


def test_subprocess_cluster_tracks_through_the_http_control(tmp_path):
    with Cluster(brokers=2, subprocess=True, data_dir=tmp_path / "c") as cluster:
        cluster.start_tracking(limit=500)
        list_topics(cluster.bootstrap, "sub app")  # (a client id that needs quoting)
        found = cluster.requests(api="Metadata", client_id="sub app")
        assert found and {r["broker"] for r in found} <= {1, 2}
        assert all(r["client_id"] == "sub app" for r in found)
        assert cluster.stop_tracking()["tracking"] is False
        assert cluster.clear_requests() > 0 and cluster.tracking()["recorded"] == 0
        with pytest.raises(ClusterError, match="limit must be"):
            cluster.start_tracking(limit=-1)
        assert cluster.tracking()["tracking"] is False
