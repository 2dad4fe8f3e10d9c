"""Hot paths report completion through callbacks, `done(error, result)`; code that awaits
turns one into a future with settle()."""

from __future__ import annotations

import asyncio
from functools import partial
from collections.abc import Iterable
from typing import Any, Callable, Generic, TypeVar

Done = Callable[[BaseException | None, Any], None]  # done(error, result): error None on success
K = TypeVar("K")


def settle(fut: asyncio.Future[Any], error: BaseException | None, result: Any = None) -> None:
    """Complete `fut` as a Done callback would report it (a second report is ignored)."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def future_and_callback() -> tuple[asyncio.Future[Any], Done]:
    """A future, and the Done callback that completes it."""
    fut = asyncio.get_running_loop().create_future()
    return fut, partial(settle, fut)


class LongPolls(Generic[K]):
    """Requests parked until something happens to one of their keys, or their timeout
    (Kafka's DelayedOperationPurgatory watch keys): Fetch waits on partition logs, ShareFetch
    on share-partitions; an append or a release wakes the key's waiters."""

    def __init__(self) -> None:
        self.by_key: dict[K, set[asyncio.Future[Any]]] = {}

    async def wait(self, keys: Iterable[K], timeout: float) -> None:
        """Until wake() of one of the keys, wake_all(), or `timeout` seconds."""
        fut = asyncio.get_running_loop().create_future()
        watched = list(keys)
        for key in watched:
            self.by_key.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for key in watched:
                waiting = self.by_key.get(key)
                if waiting is not None:
                    waiting.discard(fut)
                    if not waiting:
                        del self.by_key[key]

    def wake(self, key: K) -> None:
        for fut in self.by_key.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    def wake_all(self) -> None:
        """The server is stopping: every waiter answers now with what it has."""
        for key in list(self.by_key):
            self.wake(key)


class CaughtAnswer:
    """Stands in for the connection of a handler run inside another (the ACL gate's partial
    answers, a fault's held request): catches ctx.answer(); everything else the handler reads
    of its connection (listener, SASL session, transport, throttle) is the real one's.
    (Here, not in coordinator/apis.py: the compiled build makes a class there a C type, on which
    a handler could not set an attribute of its own, as Produce sets quota_turn.)"""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.done = asyncio.get_running_loop().create_future()

    def flush_answers(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)
