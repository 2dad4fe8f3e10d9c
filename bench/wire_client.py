"""A minimal pipelining Kafka client over asyncio, for benchmarks and raw-protocol tests.

Requests are kio objects encoded by protocol.messages; responses are matched to
requests by correlation id, so any number can be in flight on one connection.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from protocol.messages import decode_response, encode_request


def request_class(api_key: int, version: int, name: str | None = None) -> Any:
    """The kio request class (or a nested class by name) of one api version."""
    module = load_payload_module(api_key, version, EntityType.request)
    if name is not None:
        return getattr(module, name)
    return next(v for k, v in vars(module).items()
                if k.endswith("Request") and getattr(v, "__type__", None) is EntityType.request)


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

    async def request(self, api_key: int, version: int, body: Any) -> Any:
        return await self.send(api_key, version, body)

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
