"""Request tracking for tests: a bounded log of the requests the brokers received, so that a
test can assert what its client sent (the retry went to the new coordinator, the producer
used Produce v9 or later).

What librdkafka's mock cluster gives its users with `rd_kafka_mock_start_request_tracking`,
`rd_kafka_mock_get_requests` and `rd_kafka_mock_clear_requests`. Off unless started: while
it tracks, the log is the server's `intercept` (coordinator/faults.py's request-path hook; the
server chooses it again when tracking starts or stops, `changed`), records each request and
hands it on to the fault rules.

    tracking.start(limit=1000)
    ...
    tracking.requests(api="OffsetCommit", client_id="billing")   # oldest first
    tracking.stop()                                               # the log stays readable
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, TypedDict, Unpack

from protocol.messages import RequestHeader, read_request_header

from .apis import RequestContext
from .faults import API_NAMES, Faults, api_key_of, broker_of, groups_of, topics_of

DEFAULT_LIMIT = 10_000
MAX_LIMIT = 1_000_000


class RequestFilters(TypedDict, total=False):
    """The filters of requests() besides its api (each None or left out: any request)."""

    client_id: str | None
    broker: int | None
    group: str | None
    topic: str | None
    transactional_id: str | None


# filter -> (the entry's field it tests, whether that field is a list the value must be in)
_TESTS = {
    "client_id": ("client_id", False),
    "broker": ("broker", False),
    "group": ("groups", True),
    "topic": ("topics", True),
    "transactional_id": ("transactional_ids", True),
}
FILTERS = ("api", *_TESTS)
FIND_COORDINATOR, ADD_PARTITIONS_TO_TXN = 10, 24


class RequestLog:
    """The requests every broker of one server received while tracking, oldest first; at
    most `limit` of them: past it the oldest are dropped, and counted."""

    def __init__(self, faults: Faults, changed: Callable[[], None]) -> None:
        self.faults = faults  # what each request meets next (and how a topic id is named)
        self._changed = changed
        self.active = False
        self.entries: deque[dict[str, Any]] = deque(maxlen=DEFAULT_LIMIT)
        self.dropped = 0

    # control ------------------------------------------------------------------------------

    def start(self, limit: int | None = None) -> dict[str, Any]:
        """Track from now on (again, if stopped: the entries held are kept). `limit`: the
        entries held; a smaller one drops the oldest held now."""
        if limit is not None:
            if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
                raise ValueError(f"limit must be an integer in 1..{MAX_LIMIT}, not {limit!r}")
            kept = list(self.entries)[-limit:]
            self.dropped += len(self.entries) - len(kept)
            self.entries = deque(kept, maxlen=limit)
        self.active = True
        self._changed()
        return self.status()

    def stop(self) -> dict[str, Any]:
        """Track no more; what was tracked stays readable until cleared."""
        self.active = False
        self._changed()
        return self.status()

    def clear(self) -> int:
        """Forget the entries (and the count of dropped ones); how many there were."""
        n = len(self.entries)
        self.entries.clear()
        self.dropped = 0
        return n

    def status(self) -> dict[str, Any]:
        return {
            "tracking": self.active,
            "limit": self.entries.maxlen,
            "recorded": len(self.entries),
            "dropped": self.dropped,
        }

    def requests(self, api: str | int | None = None, **filters: Unpack[RequestFilters]) -> list[dict[str, Any]]:
        """The tracked requests that match every filter given, oldest first. A bad filter
        raises ValueError."""
        checks: list[Callable[[dict[str, Any]], bool]] = []
        if api is not None:
            key = api_key_of(api)
            checks.append(lambda e: e["api_key"] == key)
        for name, value in filters.items():
            if value is None:
                continue
            if name not in _TESTS:
                raise ValueError(f"unknown filter {name!r}; filters: {', '.join(FILTERS)}")
            if name == "broker" and type(value) is not int:
                raise ValueError(f"broker must be a node id (an integer), not {value!r}")
            if name != "broker" and not isinstance(value, str):
                raise ValueError(f"{name} must be a string, not {value!r}")
            field, listed = _TESTS[name]
            checks.append(_member_test(field, value) if listed else _equal_test(field, value))
        return [dict(e) for e in self.entries if all(check(e) for check in checks)]

    # the request path ----------------------------------------------------------------------

    def intercept(self, ctx: RequestContext, request: Any, handler: Callable[..., Any]) -> Any:
        """Record the request, then let the fault rules see it (None: handled as usual)."""
        self._record(broker_of(ctx), ctx.header, request, supported=True)
        faults = self.faults
        return faults.intercept(ctx, request, handler) if faults.rules else None

    def record_unsupported(self, connection: Any, frame: bytes) -> None:
        """A request of an API or version the brokers do not serve (answered by closing the
        connection, or for ApiVersions with UNSUPPORTED_VERSION): its header is all there is."""
        header, _ = read_request_header(frame)
        self._record(connection.listener.node_id, header, None, supported=False)

    def _record(self, broker: int, header: RequestHeader, request: Any, supported: bool) -> None:
        entries = self.entries
        if len(entries) == entries.maxlen:
            self.dropped += 1
        key = header.api_key
        entries.append(
            {
                "broker": broker,
                "api_key": key,
                "api": API_NAMES.get(key, str(key)),
                "api_version": header.api_version,
                "client_id": header.client_id,
                "correlation_id": header.correlation_id,
                "time_ms": time.time() * 1000,
                "supported": supported,
                "groups": [] if request is None else list(groups_of(key, request)),
                "transactional_ids": [] if request is None else transactional_ids_of(key, request),
                "topics": [] if request is None else sorted(topics_of(request, self.faults.topic_name)),
            }
        )


def transactional_ids_of(api_key: int, request: Any) -> list[str]:
    """The transactional ids a request names (Produce, InitProducerId, AddPartitionsToTxn,
    AddOffsetsToTxn, EndTxn, TxnOffsetCommit by `transactional_id`; AddPartitionsToTxn v4+
    by its batch; FindCoordinator for a transaction's coordinator by its keys)."""
    txn_id = getattr(request, "transactional_id", None)
    if type(txn_id) is str:
        return [txn_id]
    if api_key == ADD_PARTITIONS_TO_TXN:
        return [t.transactional_id for t in getattr(request, "transactions", None) or ()]
    if api_key == FIND_COORDINATOR and getattr(request, "key_type", 0) == 1:  # 1: a transaction's coordinator
        keys = getattr(request, "coordinator_keys", None)
        return list(keys) if keys else [request.key]
    return []


def _member_test(field: str, value: object) -> Callable[[dict[str, Any]], bool]:
    return lambda e: value in e[field]


def _equal_test(field: str, value: object) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e[field] == value


def filters_of_query(query: dict[str, list[str]]) -> dict[str, Any]:
    """The filters of GET /requests?api=...&broker=... (each at most once)."""
    out: dict[str, Any] = {}
    for name, values in query.items():
        if name not in FILTERS:
            raise ValueError(f"unknown filter {name!r}; filters: {', '.join(FILTERS)}")
        if len(values) != 1:
            raise ValueError(f"filter {name!r} given {len(values)} times")
        value: Any = values[0]
        if name == "broker":
            if not value.lstrip("-").isdigit():
                raise ValueError(f"broker must be a node id (an integer), not {value!r}")
            value = int(value)
        out[name] = value
    return out
