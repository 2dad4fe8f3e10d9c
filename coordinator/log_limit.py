"""Log lines a client can cause, rate-limited so that no client can flood the log."""

from __future__ import annotations

import logging
import time


class RateLimitedLog:
    """At most `burst` lines per `period` seconds; the lines left out are counted and
    the count is told with the next line that gets through."""

    def __init__(
        self, logger: logging.Logger, level: int = logging.WARNING, burst: int = 10, period: float = 10.0
    ) -> None:
        self.logger = logger
        self.level = level
        self.burst = burst
        self.period = period
        self._window_start = 0.0
        self._in_window = 0
        self._suppressed = 0

    def __call__(self, msg: str, *args: object, exc_info: BaseException | bool | None = None) -> None:
        now = time.monotonic()
        if now - self._window_start >= self.period:
            self._window_start = now
            self._in_window = 0
        if self._in_window >= self.burst:
            self._suppressed += 1
            return
        self._in_window += 1
        if self._suppressed:
            msg += " (%d similar lines left out)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self.logger.log(self.level, msg, *args, exc_info=exc_info)
