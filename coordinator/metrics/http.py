"""The metrics port: GET /metrics (Prometheus text), /health (alive) and /ready (data dir
loaded and the Kafka port listening), on the server's own event loop, so a scrape reads the
coordinator's state between requests, never while one changes it.

HTTP/1.1 just enough for Prometheus, curl, load balancers and Docker's HEALTHCHECK: one
request per connection, headers bounded, anything else answered 400/404/405.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, cast

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from ..control import TestControl, request_path

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 8192
READ_TIMEOUT_S = 10


class MetricsHttp:
    def __init__(
        self, registry: CollectorRegistry, ready: Callable[[], bool], control: TestControl | None = None
    ) -> None:
        self.registry = registry
        self.ready = ready
        self._server: asyncio.base_events.Server | None = None
        self.control = control  # coordinator/control.py, with --enable-test-control

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEADER_BYTES)
        return cast(int, self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            control = self.control
            if control is not None and control.handles(request_path(head)):  # --enable-test-control
                status, ctype, body = await control.answer_http(head, reader)
            else:
                status, ctype, body = self._answer(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
            status, ctype, body = "400 Bad Request", "text/plain", b"bad request\n"
        try:
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[str, str, bytes]:
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3:
            return "400 Bad Request", "text/plain", b"bad request\n"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        if target == b"/metrics":
            try:
                return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
            except Exception:  # a bug in a collector must not take the port down
                log.exception("collecting metrics failed")
                return "500 Internal Server Error", "text/plain", b"collecting metrics failed\n"
        if target == b"/health":
            return "200 OK", "text/plain", b"ok\n"
        if target == b"/ready":
            if self.ready():
                return "200 OK", "text/plain", b"ready\n"
            return "503 Service Unavailable", "text/plain", b"loading\n"
        return "404 Not Found", "text/plain", b"not found\n"
