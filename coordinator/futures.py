"""Hot paths report completion through callbacks, `done(error, result)`; code that awaits
turns one into a future with settle()."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Callable

Done = Callable[[BaseException | None, Any], None]  # done(error, result): error None on success


def settle(fut: asyncio.Future, error: BaseException | None, result: Any = None) -> None:
    """Complete `fut` as a Done callback would report it (a second report is ignored)."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def future_and_callback() -> tuple[asyncio.Future, Done]:
    """A future, and the Done callback that completes it."""
    fut = asyncio.get_running_loop().create_future()
    return fut, partial(settle, fut)
