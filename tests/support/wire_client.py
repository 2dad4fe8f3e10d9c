"""A minimal pipelining Kafka client over asyncio, for benchmarks and raw-protocol tests.

Requests are kio objects encoded by protocol.messages; responses are matched to
requests by correlation id, so any number can be in flight on one connection.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import os
import struct
import time
from pathlib import Path
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from protocol.messages import NEWER, decode_response, encode_request


def request_class(api_key: int, version: int, name: str | None = None) -> Any:
    """The kio request class (or a nested class by name) of one api version."""
    newer = NEWER.get((api_key, version))  # (a version kio lacks: our own module)
    module = importlib.import_module(newer) if newer else load_payload_module(api_key, version, EntityType.request)
    if name is not None:
        return getattr(module, name)
    return next(
        v
        for k, v in vars(module).items()
        if k.endswith("Request") and getattr(v, "__type__", None) is EntityType.request
    )


class WireClient:
    def __init__(self, client_id: str = "wire-client") -> None:
        self.client_id = client_id
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[int, int, asyncio.Future]] = {}
        self._reader_task: asyncio.Task | None = None

    async def connect(self, host: str, port: int) -> "WireClient":
        self.reader, self.writer = await asyncio.open_connection(host, port)
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())
        return self

    def send(self, api_key: int, version: int, body: Any) -> asyncio.Future:
        correlation_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = (api_key, version, fut)
        self.writer.write(encode_request(api_key, version, correlation_id, self.client_id, body))
        return fut

    def send_many(self, requests: list[tuple[int, int, Any]]) -> list[asyncio.Future]:
        """Send (api key, version, body) requests in one write: the server reads them together."""
        loop = asyncio.get_running_loop()
        futures, frames = [], []
        for api_key, version, body in requests:
            correlation_id = next(self._ids)
            fut = loop.create_future()
            self._waiting[correlation_id] = (api_key, version, fut)
            frames.append(encode_request(api_key, version, correlation_id, self.client_id, body))
            futures.append(fut)
        self.writer.write(b"".join(frames))
        return futures

    async def request(self, api_key: int, version: int, body: Any) -> Any:
        return await self.send(api_key, version, body)

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v3: api key -> (min, max) version the broker advertises."""
        body = request_class(18, 3)(client_software_name="t", client_software_version="1")
        return {k.api_key: (k.min_version, k.max_version) for k in (await self.request(18, 3, body)).api_keys}

    async def expect_errors(self, api_key: int, version: int, cases: list[tuple[Any, int, str | None]]) -> None:
        """Each (request body, error code, error message or None for any) is answered so."""
        for body, error, message in cases:
            resp = await self.request(api_key, version, body)
            assert resp.error_code == error, (body, resp)
            if message is not None:
                assert resp.error_message == message, (body, resp)

    async def create_topics(self, *names: str, partitions: int = 4) -> None:
        """Create topics (existing ones are fine): Kafka refuses commits to unknown topics."""
        import datetime

        topic = request_class(19, 4, "CreatableTopic")
        r = await self.request(
            19,
            4,
            request_class(19, 4)(
                topics=tuple(
                    topic(name=n, num_partitions=partitions, replication_factor=-1, assignments=(), configs=())
                    for n in names
                ),
                timeout=datetime.timedelta(seconds=5),
                validate_only=False,
            ),
        )
        errors = {t.name: t.error_code for t in r.topics if t.error_code not in (0, 36)}  # 36: already exists
        if errors:
            raise RuntimeError(f"CreateTopics failed: {errors}")

    async def _read_loop(self) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await self.reader.readexactly(4))
                frame = await self.reader.readexactly(size)
                (correlation_id,) = struct.unpack_from(">i", frame)
                api_key, version, fut = self._waiting.pop(correlation_id)
                _, body = decode_response(api_key, version, frame)
                if not fut.done():
                    fut.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            for _, _, fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection closed: {e!r}"))
            self._waiting.clear()

    async def close(self) -> None:
        self.writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()


_CORRELATION = struct.Struct(">i")


class FramePump(asyncio.Protocol):
    """Keeps `in_flight` requests outstanding on one connection until `deadline`, sending
    pre-encoded frames in turn: so that a benchmark measures the server, not its client.

    Only the correlation id of each frame is patched (and what `prepare(frame, n)` patches
    for the n-th request); of each response only the correlation id and the int16 error
    code `error_from_end` bytes before its end are read. Responses must come back in order
    and without error; `done` gets the number answered."""

    def __init__(
        self,
        frames: list[bytearray],
        error_from_end: int,
        deadline: float,
        done: asyncio.Future,
        in_flight: int = 1,
        prepare: Any = None,
    ) -> None:
        self.frames, self.error_at, self.deadline, self.done = frames, error_from_end, deadline, done
        self.in_flight, self.prepare = in_flight, prepare
        self.inbuf = bytearray()
        self.sent = self.count = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._send(self.in_flight)

    def _send(self, n: int) -> None:
        if time.perf_counter() >= self.deadline:
            if not self.done.done() and self.count == self.sent:
                self.done.set_result(self.count)
            return
        out = []
        for _ in range(n):
            self.sent += 1
            frame = self.frames[self.sent % len(self.frames)]
            _CORRELATION.pack_into(frame, 8, self.sent)  # after size, api key, api version
            if self.prepare is not None:
                self.prepare(frame, self.sent)
            out.append(bytes(frame))
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        buf = self.inbuf
        buf += data
        answered = 0
        while len(buf) >= 4:
            end = 4 + int.from_bytes(buf[:4], "big")
            if len(buf) < end:
                break
            correlation = int.from_bytes(buf[4:8], "big")
            error = int.from_bytes(buf[end - self.error_at : end - self.error_at + 2], "big", signed=True)
            del buf[:end]
            self.count += 1
            answered += 1
            assert correlation == self.count and error == 0, (self.count, correlation, error)
        if answered:
            self._send(answered)

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost: {exc!r}"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
