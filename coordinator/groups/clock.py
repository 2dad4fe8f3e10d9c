"""Time for the coordinator: the event loop's clock in production, a manual one in tests.

Timers are lazy (like Kafka's purgatory): a heartbeat only moves a member's deadline;
the timer that fires at the old deadline sees the new one and re-arms itself. So a
heartbeat costs O(1) and creates no task or timer.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Any, Callable, Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Milliseconds on a monotonic clock."""

    def wall(self) -> int:
        """Milliseconds since the epoch (timestamps written to records)."""

    def call_at(self, when_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle: ...


def fire_by(
    clock: Clock, timer: TimerHandle | None, at: float, when: float, fn: Callable[..., Any], *args: Any
) -> tuple[TimerHandle, float]:
    """(timer, its time) for a lazy timer that must fire by `when`: `timer`, armed for `at`,
    if it fires no later, else a new one (the old one cancelled). A timer that fires early
    finds its deadline moved on and arms itself again, so one timer serves many deadlines."""
    if timer is not None:
        if at <= when:
            return timer, at
        timer.cancel()
    return clock.call_at(when, fn, *args), when


class LoopClock:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.get_running_loop()

    def now(self) -> float:
        return self.loop.time() * 1000.0

    def wall(self) -> int:
        return time.time_ns() // 1_000_000

    def call_at(self, when_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        return self.loop.call_at(when_ms / 1000.0, fn, *args)


class _ManualTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """Deterministic clock for state-machine tests: time moves only by advance()."""

    def __init__(self, start_ms: float = 1_000_000.0, wall_offset_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._wall_offset = wall_offset_ms
        self._heap: list[tuple[float, int, _ManualTimer, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def wall(self) -> int:
        return int(self._wall_offset + self._now)

    def call_at(self, when_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        t = _ManualTimer()
        heapq.heappush(self._heap, (when_ms, next(self._seq), t, fn, args))
        return t

    def advance(self, ms: float) -> None:
        """Move time forward, firing due timers in order (timers may schedule timers)."""
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            when, _, t, fn, args = heapq.heappop(self._heap)
            self._now = max(self._now, when)
            if not t.cancelled:
                fn(*args)
        self._now = target
