"""--kafka-version: with 4.4 (the default) the request versions Kafka 4 removed (KIP-896) are
answered as Kafka 4.4 answers them (not listed, and the connection closed; Produce listed from
v0 but v0-2 closed all the same); with 3.9 they are served, for old clients."""

from __future__ import annotations

import json
import socket
import struct

import pytest
from aiokafka.protocol.commit import OffsetCommitRequest_v1, OffsetCommitResponse_v1
from aiokafka.protocol.fetch import FetchRequest_v3, FetchResponse_v3
from aiokafka.protocol.offset import OffsetRequest_v0, OffsetResponse_v0
from aiokafka.protocol.produce import ProduceRequest_v2, ProduceResponse_v2

from coordinator.config import parse_args
from tests.support.control_http import http
from tests.support.data_plane import batch, create, produce
from tests.support.legacy import roundtrip
from tests.support.process import ROOT, free_port
from tests.support.raw_wire import Wire
from tests.support.wire_client import WireClient, request_class

# Kafka 4.4.0's lowest versions where they are not 0, as its ApiVersions lists them (measured)
KAFKA_44_MIN = {1: 4, 2: 1, 8: 2, 9: 1, 19: 2, 20: 1, 23: 2, 29: 1, 30: 1, 31: 1, 32: 1}


async def _ranges(port: int) -> dict[int, tuple[int, int]]:
    conn = await WireClient().connect("127.0.0.1", port)
    body = request_class(18, 3)(client_software_name="t", client_software_version="1")
    r = await conn.request(18, 3, body)
    await conn.close()
    return {int(k.api_key): (k.min_version, k.max_version) for k in r.api_keys}


def _closed(port: int, request) -> bool:
    """Whether the server closes the connection of this request rather than answering it."""
    body = request.encode()
    header = struct.pack(">hhih", request.API_KEY, request.API_VERSION, 9, 3) + b"old"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        return s.recv(4) == b""


OLD_REQUESTS = [
    (lambda: ProduceRequest_v2(1, 5000, [("t", [(0, batch())])]), ProduceResponse_v2),
    (lambda: FetchRequest_v3(-1, 100, 1, 1 << 20, [("t", [(0, 0, 1 << 20)])]), FetchResponse_v3),
    (lambda: OffsetRequest_v0(-1, [("t", [(0, -1, 1)])]), OffsetResponse_v0),
    (lambda: OffsetCommitRequest_v1("g", -1, "", [("t", [(0, 1, -1, "")])]), OffsetCommitResponse_v1),
]


async def test_kafka_44_answers_the_removed_versions_as_kafka_44(server):
    ranges = await _ranges(server.port)
    for key, least in KAFKA_44_MIN.items():
        assert ranges[key][0] == least, key
    assert ranges[0][0] == 0  # Produce: still listed from v0 (KAFKA-18659) ...
    conn = await WireClient().connect("127.0.0.1", server.port)
    assert await create(conn, "t", partitions=1) == 0
    assert (await produce(conn, "t", batch(), v=3))[0] == 0  # (v3 is served)
    await conn.close()
    for make, _ in OLD_REQUESTS:  # ... but v0-2, like every removed version, closes the connection
        assert _closed(server.port, make())
    assert "Traceback" not in server.log_text()


async def test_kafka_39_serves_the_old_versions(server_factory):
    server = server_factory("--kafka-version", "3.9")
    ranges = await _ranges(server.port)
    assert all(ranges[key][0] == 0 for key in KAFKA_44_MIN)
    # 3.9's highest versions (measured on 3.9.1), and no share groups (4.0's)
    assert (ranges[0], ranges[1], ranges[2], ranges[8], ranges[15]) == ((0, 11), (0, 17), (0, 9), (0, 9), (0, 5))
    assert ranges[68] == (0, 0) and 76 not in ranges and 78 not in ranges
    conn = await WireClient().connect("127.0.0.1", server.port)
    assert await create(conn, "t", partitions=1) == 0
    await conn.close()
    for make, response in OLD_REQUESTS:
        roundtrip(server.port, make(), response)


# What `--kafka-version 3.9` lists differently from a real Kafka 3.9 node, each with why.
KAFKA_39_DIFFERENCES = {
    27: "WriteTxnMarkers v0: an inter-broker request (a transaction coordinator's markers), kept at v1 as in 4.4",
    64: "UnregisterBroker: no separate brokers or controllers here (as in docs/kafka-differences.md)",
    80: "AddRaftVoter: as UnregisterBroker",
    81: "RemoveRaftVoter: as UnregisterBroker",
}


def test_kafka_39_lists_what_a_real_kafka_39_node_lists(server_factory):
    """Held to the record of a real Kafka 3.9 node's ApiVersions v4 (tests/oracle/
    record_kafka_39.py wrote it): every API's range, and the supported and finalized features."""
    record = json.loads((ROOT / "tests" / "oracle" / "kafka-3.9-api-versions.json").read_text())
    server = server_factory("--kafka-version", "3.9")
    w = Wire(server.port)
    body = w.call(18, 4, client_software_name="t", client_software_version="1")
    w.close()
    ours = {str(k.api_key): [k.min_version, k.max_version] for k in body.api_keys}
    differing = {
        int(k) for k in set(ours) | set(record["api_versions"]) if ours.get(k) != record["api_versions"].get(k)
    }
    assert differing == set(KAFKA_39_DIFFERENCES), {
        k: (record["api_versions"].get(str(k)), ours.get(str(k))) for k in differing
    }
    assert {f.name: [f.min_version, f.max_version] for f in body.supported_features} == record["supported_features"]
    assert {f.name: f.max_version_level for f in body.finalized_features} == record["finalized_features"]


async def test_a_narrowed_produce_lists_its_own_minimum(server_factory):
    port = free_port()
    server = server_factory("--metrics-port", str(port), "--enable-test-control")
    control = f"127.0.0.1:{port}"
    status, entry = http(control, "POST", "/api-versions", '{"api": "Produce", "min_version": 5}')
    assert status == 200 and (entry["min_version"], entry["served_min_version"]) == (5, 3)
    assert (await _ranges(server.port))[0][0] == 5
    assert http(control, "DELETE", "/api-versions") == (200, {"reset": 1})
    assert (await _ranges(server.port))[0][0] == 0


def test_an_unknown_release_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(["--kafka-version", "5.0"])
    assert e.value.code == 2
    assert "--kafka-version" in capsys.readouterr().err
