"""A logging TCP proxy between a client and the server: which API versions the client picked."""

from __future__ import annotations

import socket
import struct
import threading
from collections import defaultdict

API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
             10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
             15: "DescribeGroups", 16: "ListGroups", 18: "ApiVersions", 19: "CreateTopics", 32: "DescribeConfigs",
             60: "DescribeCluster", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
             71: "GetTelemetrySubscriptions"}


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
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, parse: bool) -> None:
        buf = b""
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                if parse:
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                        size = struct.unpack_from(">i", buf)[0]
                        self._record(buf[4 : 4 + size])
                        buf = buf[4 + size :]
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

    def versions(self) -> dict[str, list[int]]:
        """{'Metadata': [12], ...} for the requests seen so far."""
        out: dict[str, set[int]] = defaultdict(set)
        with self.lock:
            for _cid, key, version in self.requests:
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
