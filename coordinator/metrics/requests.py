"""Requests by API key and version, their top-level error codes and their latency: what
Kafka's RequestMetrics (RequestsPerSec, ErrorsPerSec, TotalTimeMs) give, as counters.

Installed only with --metrics-port: `timed(dispatch, encode)` wraps the server's dispatch and
response encoding, which the server then uses, so a server without metrics runs the plain ones.
"""

from __future__ import annotations

import time
from typing import Any, Callable

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


Dispatch = Callable[[Any, bytes], Any]
Encode = Callable[[RequestContext, Any], Any]


def timed(plain_dispatch: Dispatch, plain_encode: Encode, metrics: RequestMetrics) -> tuple[Dispatch, Encode]:
    """`dispatch` and `encode` timing every request from its dispatch to its answer's
    encoding (into `metrics`)."""
    perf_counter = time.perf_counter
    current = [0.0]  # when the request being dispatched was read

    def dispatch(conn: Any, frame: bytes) -> Any:
        started = current[0] = perf_counter()
        result = plain_dispatch(conn, frame)
        if type(result) is RequestContext:
            result.started = started  # answered later: encode() measures it then
        return result

    def encode(ctx: RequestContext, body: Any) -> Any:
        metrics.record(ctx, body, perf_counter() - (ctx.started or current[0]))
        return plain_encode(ctx, body)

    return dispatch, encode
