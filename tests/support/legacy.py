"""A request of any version round-tripped over a raw socket, for versions clients no longer send."""

from __future__ import annotations

import io
import socket
import struct


def roundtrip(port: int, request, response_type, correlation_id: int = 7):
    """Send an aiokafka-encoded request over a raw socket, decode the answer with aiokafka."""
    body = request.encode()
    header = struct.pack(">hhih", request.API_KEY, request.API_VERSION, correlation_id, 6) + b"legacy"
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = s.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", data)[0] == correlation_id
    response = io.BytesIO(data[4:])
    decoded = response_type.decode(response)
    assert response.read() == b""  # nothing left over: exactly the old layout
    return decoded
