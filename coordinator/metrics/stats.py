"""Counters the coordinator's rare events feed (rebalances, expiries), and the timers of the
log's appends and syncs. The Prometheus side reads them at scrape time (collector.py).

Hot paths pay nothing for metrics that are off: requests are timed only by the measured
dispatch installed with --metrics-port, and the log calls its timers only when set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Seconds: the upper bounds of histogram buckets (Prometheus `le`), from 100 us to 10 s.
LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
REBALANCE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass(slots=True)
class Histogram:
    """Bucket counts as Prometheus wants them (cumulative at scrape), kept as plain ints."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)

    def observe(self, value: float) -> None:
        i = 0
        bounds = self.bounds
        while i < len(bounds) and value > bounds[i]:
            i += 1
        self.counts[i] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts):
            running += count
            out.append((bound, running))
        return out


@dataclass(slots=True)
class Stats:
    rebalances: int = 0
    rebalance_seconds: Histogram = field(default_factory=lambda: Histogram(REBALANCE_BUCKETS))
    expired_members: int = 0
    recovery_seconds: float = 0.0
    log_append_seconds: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    log_sync_seconds: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))


STATS = Stats()  # one per process, like the log's syncer
