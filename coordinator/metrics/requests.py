"""Requests by API key and version, their top-level error codes and their latency: what
Kafka's RequestMetrics (RequestsPerSec, ErrorsPerSec, TotalTimeMs) give, as counters.

Installed only with --metrics-port: the request channel (coordinator/connection.py) then times
each request from its dispatch to its answer's encoding into them; without, it times nothing.
"""

from __future__ import annotations

from typing import Any

from ..apis import RequestContext
from .stats import LATENCY_BUCKETS, Histogram


class RequestMetrics:
    def __init__(self) -> None:
        self.counts: dict[tuple[int, int], int] = {}  # (api key, version) -> requests
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> responses
        self.latency: dict[int, Histogram] = {}  # api key -> seconds from read to answer
        self.names: dict[int, str] = {}  # api key -> name (OffsetCommit, ...)

    def record(self, ctx: RequestContext, body: Any, seconds: float) -> None:
        header = ctx.header
        key = header.api_key
        kv = (key, header.api_version)
        self.counts[kv] = self.counts.get(kv, 0) + 1
        hist = self.latency.get(key)
        if hist is None:
            hist = self.latency[key] = Histogram(LATENCY_BUCKETS)
            self.names[key] = ctx.codec.response_type.__name__.removesuffix("Response")
        hist.observe(seconds)
        code = getattr(body, "error_code", None)  # top-level only (hand-encoded answers have none)
        if code:
            ke = (key, int(code))
            self.errors[ke] = self.errors.get(ke, 0) + 1

    def name(self, key: int) -> str:
        return self.names.get(key, str(key))
