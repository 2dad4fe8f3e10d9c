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
from time import time_ns  # (a global: compiled, time.time_ns is a module's attribute looked up per call)
from typing import Any, Callable, Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Milliseconds on a monotonic clock."""

    def wall(self) -> int:
        """Milliseconds since the epoch (timestamps written to records)."""

    def call_at(self, when_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle: ...


class LoopClock:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.get_running_loop()

    def now(self) -> float:
        return self.loop.time() * 1000.0

    def wall(self) -> int:
        return time.time_ns() // 1_000_000

    def call_at(self, when_ms: float, fn: Callable[..., Any], *args: Any) -> TimerHandle:
        return self.loop.call_at(when_ms / 1000.0, fn, *args)


class ShardClock:
    """The runtime's clock for one shard (Kafka's CoordinatorTimer), the one its managers
    use: a timer is an operation too, and what it returns goes to `fired` (the shard writes
    it); its timers do nothing once the shard is unloaded (`fenced`: Kafka cancels an
    unloaded shard's timers).

    A class of its own, compiled, that the managers call directly: a join-sync-leave cycle
    reads the time some fifteen times, and over the event loop's clock each read is a call
    of the loop's time() (or time_ns()) rather than of a Python method through a protocol."""

    def __init__(self, clock: Clock, fired: Callable[[object], object]) -> None:
        self.clock = clock
        self.fired = fired
        self.fenced = False
        # The event loop's clock read straight from its loop (LoopClock's now and wall, inline).
        self._loop = clock.loop if type(clock) is LoopClock else None

    def now(self) -> float:
        """Milliseconds on a monotonic clock."""
        loop = self._loop
        return loop.time() * 1000.0 if loop is not None else self.clock.now()

    def wall(self) -> int:
        """Milliseconds since the epoch (timestamps written to records)."""
        return time_ns() // 1_000_000 if self._loop is not None else self.clock.wall()

    def call_at(self, when_ms: float, fn: Callable[..., object], *args: object) -> TimerHandle:
        return self.clock.call_at(when_ms, self._fire, fn, args)

    def _fire(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        if not self.fenced:
            self.fired(fn(*args))

    def fire_by(
        self, timer: TimerHandle | None, at: float, when: float, fn: Callable[..., object], *args: object
    ) -> tuple[TimerHandle, float]:
        """(timer, its time) for a lazy timer that must fire by `when`: `timer`, armed for `at`,
        if it fires no later, else a new one (the old one cancelled). A timer that fires early
        finds its deadline moved on and arms itself again, so one timer serves many deadlines."""
        if timer is not None:
            if at <= when:
                return timer, at
            timer.cancel()
        return self.clock.call_at(when, self._fire, fn, args), when


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
