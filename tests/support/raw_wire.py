"""A blocking raw-socket connection for malformed-frame tests, and the API ranges the server advertises."""

from __future__ import annotations

import socket
import struct

from coordinator.apis import build
from protocol.messages import codec, decode_response, encode_request

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10


class Wire:
    """A raw Kafka client connection: whole frames out, whole frames in."""

    def __init__(self, port: int) -> None:
        # The timeout only keeps a broken server from hanging the suite; nothing asserts on time.
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, n: int) -> bool:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def read_frame(self) -> bytes | None:
        """One response frame without its size prefix, or None at EOF."""
        if not self._fill(4):
            return None
        (size,) = struct.unpack_from(">i", self.buf)
        if not self._fill(4 + size):
            raise AssertionError("connection closed in the middle of a response")
        data, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
        return data

    def request_bytes(
        self, api_key: int, version: int, corr: int, /, client_id: str | None = "wire-test", **values
    ) -> bytes:
        return encode_request(api_key, version, corr, client_id, build(codec(api_key, version).request_type, values))

    def call(self, api_key: int, version: int, /, corr: int = 1, **values):
        self.send(self.request_bytes(api_key, version, corr, **values))
        data = self.read_frame()
        assert data is not None, "server closed the connection instead of answering"
        got_corr, body = decode_response(api_key, version, data)
        assert got_corr == corr
        return body

    def assert_closed(self) -> None:
        """The server closed cleanly: we read EOF (no reset, no stray response)."""
        assert self.read_frame() is None


def api_ranges(body) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
