"""A small blocking Kafka client for the admin CLI: any Kafka-compatible broker, ours or
Apache Kafka's. Versions are negotiated with ApiVersions (the highest both sides speak, up
to the one the CLI was written against); request fields a version lacks are dropped, as
the server does for responses. Group requests go to the group's coordinator, partition
requests to the partition's leader.
"""

from __future__ import annotations

import itertools
import socket
import struct
from dataclasses import dataclass, fields
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from protocol.messages import decode_response, encode_request

API_VERSIONS = 18
# api key -> (lowest, highest) version the CLI's requests are written for
SPOKEN = {
    0: (3, 9),  # Produce
    1: (4, 12),  # Fetch
    2: (1, 7),  # ListOffsets
    3: (1, 12),  # Metadata
    8: (2, 8),  # OffsetCommit
    9: (1, 7),  # OffsetFetch (single group)
    10: (1, 3),  # FindCoordinator (one key)
    15: (0, 5),  # DescribeGroups
    16: (0, 4),  # ListGroups (v4: states filter)
    19: (1, 7),  # CreateTopics
    20: (1, 5),  # DeleteTopics (by name)
    32: (1, 4),  # DescribeConfigs (log.dirs, to say where an offline partition's files are)
    42: (0, 2),  # DeleteGroups
    47: (0, 0),  # OffsetDelete
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions
    77: (1, 1),  # ShareGroupDescribe
    89: (0, 0),  # StreamsGroupDescribe (kio has version 0)
    90: (0, 1),  # DescribeShareGroupOffsets (v1: lag)
    91: (0, 0),  # AlterShareGroupOffsets
}


class BrokerError(Exception):
    """The broker cannot be reached or answered in a way the CLI cannot use (one line)."""


def _module(api_key: int, version: int) -> Any:
    return load_payload_module(api_key, version, EntityType.request)


def build(api_key: int, version: int, entity: str | None = None, /, **values: Any) -> Any:
    """The request (or its nested entity) of this version, from the values it has."""
    module = _module(api_key, version)
    if entity is None:
        cls = next(
            v
            for k, v in vars(module).items()
            if k.endswith("Request") and getattr(v, "__type__", None) is EntityType.request
        )
    else:
        cls = getattr(module, entity)
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


@dataclass
class Broker:
    node_id: int
    host: str
    port: int


class Connection:
    def __init__(self, host: str, port: int, client_id: str, timeout: float) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout)
        except OSError as e:
            raise BrokerError(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.ids = itertools.count(1)
        self.versions: dict[int, int] = {}
        r = self._send(API_VERSIONS, 0, build(API_VERSIONS, 0))
        if r.error_code:
            raise BrokerError(f"{self.address}: ApiVersions failed with error {int(r.error_code)}")
        ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        for key, (low, high) in SPOKEN.items():
            if key in ranges and ranges[key][0] <= high and ranges[key][1] >= low:
                self.versions[key] = min(high, ranges[key][1])

    def version(self, api_key: int) -> int:
        v = self.versions.get(api_key)
        if v is None:
            raise BrokerError(f"{self.address} does not support api key {api_key} in a version this tool speaks")
        return v

    def request(self, api_key: int, /, **values: Any) -> Any:
        """Send one request built from values (in the negotiated version); its response."""
        version = self.version(api_key)
        return self._send(api_key, version, build(api_key, version, **values))

    def nested(self, api_key: int, entity: str, /, **values: Any) -> Any:
        """A nested entity of this api's request, in the negotiated version."""
        return build(api_key, self.version(api_key), entity, **values)

    def _send(self, api_key: int, version: int, body: Any) -> Any:
        correlation = next(self.ids)
        try:
            self.sock.sendall(encode_request(api_key, version, correlation, self.client_id, body))
            (size,) = struct.unpack(">i", self._read(4))
            frame = self._read(size)
        except OSError as e:
            raise BrokerError(f"{self.address}: {e.strerror or e}") from None
        _, response = decode_response(api_key, version, frame)
        return response

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise BrokerError(f"{self.address} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


class Cluster:
    """Connections to the brokers of one cluster, found from a bootstrap address."""

    def __init__(self, bootstrap: str, client_id: str = "kcoord", timeout: float = 10.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        if not host or not port.isdigit():
            raise BrokerError(f"bootstrap server {bootstrap!r}: expected HOST:PORT")
        self.client_id, self.timeout = client_id, timeout
        self.bootstrap = Connection(host.strip("[]"), int(port), client_id, timeout)
        self.connections: dict[int, Connection] = {}
        self.brokers: dict[int, Broker] = {}
        self.refresh()

    def refresh(self, topics: list[str] | None = None) -> Any:
        b = self.bootstrap
        r = b.request(
            3,
            topics=None
            if topics is None
            else tuple(b.nested(3, "MetadataRequestTopic", name=t, topic_id=None) for t in topics),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        self.brokers = {b.node_id: Broker(b.node_id, b.host, b.port) for b in r.brokers}
        return r

    def node(self, node_id: int) -> Connection:
        conn = self.connections.get(node_id)
        if conn is None:
            broker = self.brokers.get(node_id)
            if broker is None:
                raise BrokerError(f"broker {node_id} is not in the cluster's metadata")
            conn = self.connections[node_id] = Connection(broker.host, broker.port, self.client_id, self.timeout)
        return conn

    def any_node(self) -> Connection:
        return self.bootstrap

    def coordinator(self, group: str) -> Connection:
        r = self.bootstrap.request(10, key=group, key_type=0, coordinator_keys=(group,))
        coordinators = getattr(r, "coordinators", None)
        if coordinators:  # v4+
            c = coordinators[0]
            error, node_id, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            error, node_id, host, port = r.error_code, r.node_id, r.host, r.port
        if error:
            raise BrokerError(f"no coordinator for group {group!r} (error {int(error)})")
        self.brokers.setdefault(node_id, Broker(node_id, host, port))
        return self.node(node_id)

    def close(self) -> None:
        self.bootstrap.close()
        for conn in self.connections.values():
            conn.close()
