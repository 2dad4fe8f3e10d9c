"""The metrics port's life cycle: started before the data dir is loaded, given what it reads
of the coordinator once it is, closed with the server."""

from __future__ import annotations

import asyncio
from typing import Callable

from prometheus_client.registry import CollectorRegistry

from ..control import TestControl
from ..log import partition as partition_log
from ..log.partition import SYNCER
from .collector import Observed, ServerCollector
from .http import MetricsHttp
from .lag import LagMonitor
from .requests import RequestMetrics
from .stats import STATS


class Metrics:
    """`ready()`: whether the server serves (its /ready); `control`: the test control, served
    on the same port (coordinator/control.py), or None."""

    def __init__(self, ready: Callable[[], bool], control: TestControl | None = None) -> None:
        self.requests = RequestMetrics()
        self.registry = CollectorRegistry(auto_describe=False)
        self.http = MetricsHttp(self.registry, ready, control)
        self.lag: LagMonitor | None = None
        self._sampler: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> int:
        partition_log.APPEND_TIMER = STATS.log_append_seconds.observe
        SYNCER.round_timer = STATS.log_sync_seconds.observe
        return await self.http.start(host, port)

    def loaded(self, sample_interval_ms: int, observed: Observed) -> None:
        """The coordinator is up: collect from it, and note commits for Burrow's windows."""
        self.lag = LagMonitor(observed.groups, observed.topics)
        self.registry.register(ServerCollector(observed, self.requests, self.lag))
        self._sampler = asyncio.get_running_loop().create_task(self._sample_every(sample_interval_ms / 1000))

    async def _sample_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.lag.sample()  # type: ignore[union-attr]  # the sampler starts only after start() set self.lag

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        await self.http.close()
        partition_log.APPEND_TIMER = None
        SYNCER.round_timer = None
