"""The server over raw sockets: ApiVersions, pipelining, bad input, shutdown, FindCoordinator, config.

Each test talks to a real `python -m coordinator` process (conftest's fixtures). Requests are
built with our client-direction codec (`encode_request`) except where the point is bytes that
no encoder would produce.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
from dataclasses import fields

import pytest

from coordinator.config import Config
from protocol.framing import frame
from protocol.messages import decode_response
from tests.support.process import ROOT, wait_for
from tests.support.raw_wire import (
    API_VERSIONS,
    FIND_COORDINATOR,
    METADATA,
    Wire,
    api_ranges,
)

OUR_RANGES = {API_VERSIONS: (0, 5), METADATA: (0, 13), FIND_COORDINATOR: (0, 6)}
UNSUPPORTED_VERSION, INVALID_REQUEST = 35, 42
NO_AUTH_OPS = {"include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


@pytest.fixture
def wire(server):
    conns: list[Wire] = []

    def connect(port: int | None = None) -> Wire:
        w = Wire(port or server.port)
        conns.append(w)
        return w

    yield connect
    for w in conns:
        w.close()


def av_fields(version: int) -> dict:
    return {"client_software_name": "wire-test", "client_software_version": "1.0"} if version >= 3 else {}


# --- ApiVersions ------------------------------------------------------------------------------


def test_api_versions_each_version(wire):
    w = wire()
    for version in range(0, 5):
        w.send(w.request_bytes(API_VERSIONS, version, 1000 + version, **av_fields(version)))
        data = w.read_frame()
        # Response header v0 for every version: the correlation id is followed directly by the
        # body's error code (a v1 header would put a tagged-field count byte in between).
        assert struct.unpack_from(">ih", data) == (1000 + version, 0), f"v{version}"
        _, body = decode_response(API_VERSIONS, version, data)
        ranges = api_ranges(body)
        for key, rng in OUR_RANGES.items():
            assert ranges[key] == rng, f"v{version} api key {key}"
        assert list(ranges) == sorted(ranges), "api keys should be listed in order"


def test_api_versions_unsupported_version_answers_v0_with_our_range(wire):
    # A newer client sends its newest ApiVersions; Kafka answers with a v0 body carrying
    # UNSUPPORTED_VERSION and only the ApiVersions range (ApiVersionsRequest.getErrorResponse).
    w = wire()
    for flexible_header in (False, True):  # newer clients send request header v2
        head = struct.pack(">hhih", API_VERSIONS, 99, 4242, 4) + b"next"
        w.send(frame(head + (b"\x00" if flexible_header else b"") + b"\x05abcd\x041.0\x00"))
        data = w.read_frame()
        corr, body = decode_response(API_VERSIONS, 0, data)
        assert corr == 4242
        assert body.error_code == UNSUPPORTED_VERSION
        assert api_ranges(body) == {API_VERSIONS: (0, 5)}
        # the connection stays usable: the client retries with a version we know
        assert api_ranges(w.call(API_VERSIONS, 4, corr=5, **av_fields(4)))[API_VERSIONS] == (0, 5)


def test_api_versions_v3_invalid_software_name(wire):
    w = wire()
    for name, version in [("", "1.0"), ("bad name!", "1.0"), ("-lead", "1.0"), ("ok", "1.0 beta")]:
        body = w.call(API_VERSIONS, 3, corr=3, client_software_name=name, client_software_version=version)
        assert body.error_code == INVALID_REQUEST, (name, version)
        assert body.api_keys == ()
    # KIP-511's pattern accepts dots and dashes inside
    ok = w.call(
        API_VERSIONS, 3, corr=4, client_software_name="confluent-kafka-python", client_software_version="2.16.1-rc.1"
    )
    assert ok.error_code == 0


# --- pipelining -------------------------------------------------------------------------------


def test_pipelined_requests_answered_in_order(wire):
    w = wire()
    sent = []
    batch = b""
    for i in range(100):
        corr = 10_000 + i * 7
        if i % 3 == 0:
            key, v, vals = API_VERSIONS, i % 5, av_fields(i % 5)
        elif i % 3 == 1:
            key, v, vals = METADATA, i % 13, {"topics": None if i % 13 else (), **NO_AUTH_OPS}
        else:
            v = i % 7
            key, vals = (
                FIND_COORDINATOR,
                ({"key": f"g{i}", "key_type": 0} if v < 4 else {"key_type": 0, "coordinator_keys": (f"g{i}",)}),
            )
        batch += w.request_bytes(key, v, corr, **vals)
        sent.append((key, v, corr))
    w.send(batch)  # all 100 in one write
    for key, v, corr in sent:
        got, _ = decode_response(key, v, w.read_frame())
        assert got == corr


# --- requests Kafka answers by closing the connection -------------------------------------------


def assert_still_serving(server, wire) -> None:
    assert api_ranges(wire().call(API_VERSIONS, 0, corr=77))[API_VERSIONS] == (0, 5)


def count_in_log(server, text: str) -> int:
    return server.log_text().count(text)


def test_unsupported_api_closes_connection(server, wire):
    for raw, log_text in [
        (struct.pack(">hhih", 9999, 0, 1, -1), "unsupported api key 9999"),
        (struct.pack(">hhih", METADATA, 99, 1, -1), "unsupported api key 3 version 99"),
        (struct.pack(">hhih", FIND_COORDINATOR, -1, 1, -1), "unsupported api key 10 version -1"),
    ]:
        w = wire()
        w.send(frame(raw))
        w.assert_closed()
        wait_for(lambda text=log_text: text in server.log_text(), what=f"log line {log_text!r}")
        assert_still_serving(server, wire)


# Each case: bytes to send, whether to half-close after sending, the log text it must produce.
BAD_INPUT = {
    "truncated-frame-then-eof": (struct.pack(">i", 100) + b"\x00\x12\x00\x00" + b"x" * 6, True, "mid-frame"),
    "over-max-frame-bytes": (struct.pack(">i", 4097), False, "exceeds the limit of 4096"),
    "negative-length": (struct.pack(">i", -5) + b"abcd", False, "negative frame size"),
    "garbage-http": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", False, "exceeds the limit"),
    "garbage-small-frame": (frame(b"\x7f\x01\xff"), False, "shorter than a header"),
    "header-9-bytes": (frame(struct.pack(">hhi", 18, 0, 1) + b"\x00"), False, "shorter than a header"),
    "client-id-past-end": (frame(struct.pack(">hhih", 18, 0, 1, 50) + b"abc"), False, "truncated client id"),
    "body-does-not-decode": (
        frame(struct.pack(">hhih", METADATA, 1, 1, -1) + struct.pack(">i", 3) + b"\x00"),
        False,
        "MetadataRequest v1",
    ),
    "huge-compact-array": (
        frame(struct.pack(">hhih", FIND_COORDINATOR, 4, 1, -1) + b"\x00\x00\xff\xff\xff\xff\x0f"),
        False,
        "elements in 0 bytes",
    ),
    "truncated-tagged-field": (
        frame(struct.pack(">hhih", API_VERSIONS, 3, 1, -1) + b"\x00\x02a\x021\x01\x07\x05z"),
        False,
        "truncated tagged field",
    ),
    # OffsetCommit has its own reader (protocol/offset_commit.py): v8 group "g", generation 1,
    # member "m", no instance, then a forged topic count / a partition cut short.
    "offset-commit-forged-count": (
        frame(struct.pack(">hhih", 8, 8, 1, -1) + b"\x00\x02g\x00\x00\x00\x01\x02m\x00" + b"\xff\xff\xff\xff\x0f"),
        False,
        "OffsetCommit request",
    ),
    "offset-commit-truncated-partition": (
        frame(
            struct.pack(">hhih", 8, 2, 1, -1)
            + b"\x00\x01g\x00\x00\x00\x01"
            + b"\x00\x01m"
            + struct.pack(">qi", -1, 1)
            + b"\x00\x01t"
            + struct.pack(">i", 1)
            + b"\x00\x00"
        ),
        False,
        "OffsetCommit request",
    ),
}


@pytest.mark.process  # killed (SIGKILL) or read by pid: needs a real process
def test_bad_input_gets_a_clean_close(server_factory):
    server = server_factory("--socket-request-max-bytes", "4096")
    for case, (data, half_close, log_text) in BAD_INPUT.items():
        w = Wire(server.port)
        try:
            w.send(data)
            if half_close:
                w.sock.shutdown(socket.SHUT_WR)
            w.assert_closed()
        finally:
            w.close()
        wait_for(lambda text=log_text: text in server.log_text(), what=f"{case}: log line {log_text!r}")
        assert server.proc.poll() is None, f"{case}: the server died"
        w2 = Wire(server.port)
        try:
            assert api_ranges(w2.call(API_VERSIONS, 0, corr=1))[API_VERSIONS] == (0, 5), case
        finally:
            w2.close()

    # the limit itself is allowed
    w = Wire(server.port)
    try:
        req = w.request_bytes(API_VERSIONS, 0, 9, client_id="x" * (4096 - 10))
        assert len(req) == 4 + 4096
        w.send(req)
        assert decode_response(API_VERSIONS, 0, w.read_frame())[0] == 9
    finally:
        w.close()


# --- shutdown -----------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_graceful_shutdown(server, wire, sig):
    w = wire()
    w.call(API_VERSIONS, 0)  # an open, idle client connection must not hold the shutdown
    assert server.stop(sig) == 0
    w.assert_closed()
    assert "stopped" in server.log_text()


# --- FindCoordinator ------------------------------------------------------------------------------


def test_find_coordinator_every_version(server, wire):
    w = wire()
    for version in range(0, 4):
        body = w.call(FIND_COORDINATOR, version, corr=version, key="my-group", key_type=0)
        assert (body.error_code, body.node_id, body.host, body.port) == (0, 1, "127.0.0.1", server.port), version
        assert version == 0 or body.error_message == "NONE", version  # Kafka's Errors.NONE.message()
        # an empty group id is a key like any other, as at Kafka (it hashes to a partition)
        body = w.call(FIND_COORDINATOR, version, key="", key_type=0)
        assert (body.error_code, body.node_id) == (0, 1), version
    for version in range(4, 7):  # batched keys (KIP-699)
        body = w.call(FIND_COORDINATOR, version, key_type=0, coordinator_keys=("g1", "g2", ""))
        got = {c.key: c for c in body.coordinators}
        assert list(got) == ["g1", "g2", ""]
        for key in ("g1", "g2"):
            c = got[key]
            assert (c.error_code, c.node_id, c.host, c.port) == (0, 1, "127.0.0.1", server.port), (version, key)
        assert (got[""].error_code, got[""].node_id, got[""].error_message) == (0, 1, "")


def test_find_coordinator_transaction_key_type_names_this_broker(server, wire):
    w = wire()
    for version in range(1, 7):
        vals = {"key": "txn-1"} if version < 4 else {"coordinator_keys": ("txn-1",)}
        body = w.call(FIND_COORDINATOR, version, key_type=1, **vals)
        entry = body if version < 4 else body.coordinators[0]
        assert (entry.error_code, entry.node_id, entry.port) == (0, 1, server.port), version
        vals = {"key": ""} if version < 4 else {"coordinator_keys": ("",)}
        body = w.call(FIND_COORDINATOR, version, key_type=1, **vals)
        entry = body if version < 4 else body.coordinators[0]
        assert (entry.error_code, entry.node_id) == (0, 1), version  # as at Kafka: "" hashes to a partition


# --- Metadata -------------------------------------------------------------------------------------


def test_metadata_every_version(server, wire):
    w = wire()
    w.call(10, 4, key_type=0, coordinator_keys=["g"])  # (__consumer_offsets exists from a group's first use)
    for version in range(0, 13):
        body = w.call(METADATA, version, topics=() if version == 0 else None, **NO_AUTH_OPS)
        assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(1, "127.0.0.1", server.port)], version
        offsets = [t for t in body.topics if t.name == "__consumer_offsets"]
        assert len(offsets) == 1 and len(offsets[0].partitions) == 50, version


# --- configuration --------------------------------------------------------------------------------


def test_help_documents_every_flag_and_env_var():
    out = subprocess.run(
        [sys.executable, "-m", "coordinator", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
        check=True,
    ).stdout
    text = " ".join(out.split())
    for f in fields(Config):
        flag = "--" + f.name.replace("_", "-")
        assert flag in text, flag
        assert f"KCOORD_{f.name.upper()}" in text, f.name
        assert f.metadata["help"].split("(")[0].strip() in text, f"help text of {flag}"


def test_advertised_host_and_port_flags(server_factory):
    server = server_factory("--advertised-host", "kafka.example.com", "--advertised-port", "19092", "--node-id", "7")
    w = Wire(server.port)
    try:
        meta = w.call(METADATA, 12, topics=None, **NO_AUTH_OPS)
        assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(7, "kafka.example.com", 19092)]
        assert meta.controller_id == 7
        fc = w.call(FIND_COORDINATOR, 6, corr=2, key_type=0, coordinator_keys=("g",))
        assert [(c.node_id, c.host, c.port) for c in fc.coordinators] == [(7, "kafka.example.com", 19092)]
        old = w.call(FIND_COORDINATOR, 0, corr=3, key="g")
        assert (old.node_id, old.host, old.port) == (7, "kafka.example.com", 19092)
    finally:
        w.close()


def test_env_vars_configure_the_server(server_factory, monkeypatch):
    monkeypatch.setenv("KCOORD_ADVERTISED_HOST", "env.example")
    monkeypatch.setenv("KCOORD_ADVERTISED_PORT", "29092")
    monkeypatch.setenv("KCOORD_CLUSTER_ID", "env-cluster")
    monkeypatch.setenv("KCOORD_OFFSETS_PARTITIONS", "3")
    server = server_factory()
    w = Wire(server.port)
    try:
        w.call(10, 4, key_type=0, coordinator_keys=["g"])  # (creates __consumer_offsets)
        meta = w.call(METADATA, 9, topics=None, **NO_AUTH_OPS)
        assert [(b.host, b.port) for b in meta.brokers] == [("env.example", 29092)]
        assert meta.cluster_id == "env-cluster"
        offsets = [t for t in meta.topics if t.name == "__consumer_offsets"]
        assert len(offsets[0].partitions) == 3 and offsets[0].is_internal
    finally:
        w.close()


def test_flags_override_env_vars(server_factory, monkeypatch):
    monkeypatch.setenv("KCOORD_ADVERTISED_HOST", "env.example")
    server = server_factory("--advertised-host", "flag.example")
    w = Wire(server.port)
    try:
        meta = w.call(METADATA, 1, topics=None)
        assert meta.brokers[0].host == "flag.example"
    finally:
        w.close()
