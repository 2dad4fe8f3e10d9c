"""A logging TCP proxy between a client and the server: which API versions the client picked."""

from __future__ import annotations

import socket
import struct
import threading
from collections import defaultdict
from collections.abc import Callable

API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    32: "DescribeConfigs",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    47: "OffsetDelete",
    60: "DescribeCluster",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    71: "GetTelemetrySubscriptions",
    76: "ShareGroupHeartbeat",
    78: "ShareFetch",
    79: "ShareAcknowledge",
}


class LoggingProxy:
    """Forwards bytes both ways; parses the client->server direction into request headers."""

    def __init__(self, listen_port: int, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.requests: list[tuple[str | None, int, int]] = []  # (client id, api key, version)
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", listen_port))
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:  # the server is restarting: the client sees a closed connection
                client.close()
                continue
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, parse: bool) -> None:
        buf = b""
        try:
            while data := src.recv(65536):
                if parse:
                    # Recorded before it is passed on: once the client has its answer, a test
                    # that reads what the proxy saw must find the request there.
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                        size = struct.unpack_from(">i", buf)[0]
                        self._record(buf[4 : 4 + size])
                        buf = buf[4 + size :]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _record(self, req: bytes) -> None:
        key, version, _corr, n = struct.unpack_from(">hhih", req)
        client_id = req[10 : 10 + n].decode(errors="replace") if n >= 0 else None
        with self.lock:
            self.requests.append((client_id, key, version))

    def versions(self, client_ids: Callable[[str | None], bool] | None = None) -> dict[str, list[int]]:
        """{'Metadata': [12], ...} for the requests seen so far (of the clients whose id passes)."""
        out: dict[str, set[int]] = defaultdict(set)
        with self.lock:
            for cid, key, version in self.requests:
                if client_ids is None or client_ids(cid):
                    out[API_NAMES.get(key, str(key))].add(version)
        return {k: sorted(v) for k, v in sorted(out.items())}

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()

    def close(self) -> None:
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass


def advertised_api_keys(port: int) -> dict[int, tuple[int, int]]:
    """The server's ApiVersions answer: {api key: (min, max)}."""
    from coordinator.apis import build
    from protocol.messages import codec, decode_response, encode_request

    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(encode_request(18, 0, 1, "probe", build(codec(18, 0).request_type, {})))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = s.recv(65536)
            assert chunk
            data += chunk
    _, body = decode_response(18, 0, data[4:])
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}


def assert_within_our_ranges(seen: dict[str, list[int]], ranges: dict[int, tuple[int, int]]) -> None:
    """Every version a client picked is one the server advertises."""
    by_name = {API_NAMES.get(k, str(k)): r for k, r in ranges.items()}
    for name, versions in seen.items():
        if name == "ApiVersions":
            continue  # the first ApiVersions may be newer than ours: answered with a v0 downgrade
        lo, hi = by_name[name]
        assert all(lo <= v <= hi for v in versions), f"{name} {versions} outside our {lo}-{hi}"
