"""Client quotas as Kafka keeps and enforces them.

DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546, validate as Kafka's
ClientQuotaControlManager does: entities of type user, client-id (together or alone) or ip
(alone), a null name being the default entity; keys producer_byte_rate and
consumer_byte_rate (whole numbers), request_percentage and controller_mutation_rate for users
and clients, connection_creation_rate for ips; values above 0. They are kept in the data dir.

The produce and fetch byte rates are enforced as Kafka's ClientQuotaManager does: per
(user, client-id), the most specific quota entity that sets the key applies (Kafka's
eight-level order), each matching entity's bytes are measured by a Rate over
quota.window.num samples of quota.window.size.seconds, and a request that takes the rate
over the quota gets throttle_time_ms = (rate - quota) / quota * window, after which its
connection is muted for that long.

controller_mutation_rate is enforced as Kafka's ControllerMutationQuotaManager does: the
partitions a CreateTopics, DeleteTopics or CreatePartitions creates or deletes are taken from a
token bucket of quota x window num x window size tokens refilled at the quota per second. A
request may take the bucket below zero; while it is below, the strict variant (CreateTopics
v6+, DeleteTopics v5+, CreatePartitions v3+) refuses each further topic with
THROTTLING_QUOTA_EXCEEDED, the permissive one (older versions) lets it through. Either way the
answer carries the time until the bucket is back at zero and the connection is muted for it.
request_percentage is enforced as Kafka's ClientRequestQuotaManager does, with the event loop
as the one "thread" it is a percentage of: the time each request's handler runs on the loop
counts against it (exempt: ApiVersions and the SASL requests, which come before a principal is
known), and the throttle is capped at one window.

connection_creation_rate is enforced as Kafka's ConnectionQuotas does for ip entities: each new
connection from an address counts against the quota of its ip entity (else the default ip
entity) by the same windowed rate; one that takes the rate over it is not counted, not read,
and closed after the throttle time (Kafka's Acceptor delays the close of a throttled socket).
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import datetime
import ipaddress
import logging
import struct
import time
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol.wire import Raw

from ..apis import Registry, RequestContext
from ..durable import JsonFile
from ..security.acl_gate import principal_of

log = logging.getLogger(__name__)

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
CONTROLLER_MUTATION_RATE, REQUEST_PERCENTAGE = "controller_mutation_rate", "request_percentage"
CONNECTION_CREATION_RATE = "connection_creation_rate"
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
QUOTAS_FILE = "client-quotas.json"
_INT32 = struct.Struct(">i")

# QuotaConfig.userAndClientQuotaConfigs / ipConfigs: key -> type
LONG, DOUBLE, INT = "LONG", "DOUBLE", "INT"
USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: LONG,
    CONSUMER_BYTE_RATE: LONG,
    "request_percentage": DOUBLE,
    "controller_mutation_rate": DOUBLE,
}
IP_KEYS = {"connection_creation_rate": INT}

Entity = tuple[tuple[str, "str | None"], ...]  # sorted (type, name) pairs; name None: the default


class QuotaError(Exception):
    def __init__(self, code: E, message: str) -> None:
        super().__init__(message)
        self.code = code


def entity_string(entity: Entity) -> str:
    """Kafka's ClientQuotaEntity.toString."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


async def _valid_ip(name: str | None) -> bool:
    """InetAddress.getByName: an address, or a host name that resolves (in a worker thread:
    a resolver that takes seconds must not hold every other connection)."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        await asyncio.get_running_loop().getaddrinfo(name, None)
        return True
    except (OSError, ValueError):  # (ValueError: a NUL, a label IDNA refuses)
        return False


class QuotaStore:
    """The quota entities and their values, kept in the data dir (a durable JSON document)."""

    def __init__(self, data_dir: Path | None) -> None:
        self.file = None if data_dir is None else JsonFile(data_dir / QUOTAS_FILE)
        self.quotas: dict[Entity, dict[str, float]] = {} if self.file is None else self.file.load({}, parse=_stored)
        # The quota keys some entity sets (most brokers: none): the enforcers of the others skip all.
        self.keys = _keys(self.quotas)

    def get(self, entity: Entity, key: str) -> float | None:
        values = self.quotas.get(entity)
        return None if values is None else values.get(key)

    async def apply(self, changes: dict[Entity, dict[str, float | None]]) -> None:
        """Set (or, with None, remove) the values; in force once durable."""

        def commit() -> tuple[Any, Any]:
            quotas = {entity: dict(values) for entity, values in self.quotas.items()}
            for entity, ops in changes.items():
                values = quotas.setdefault(entity, {})
                for key, value in ops.items():
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = value
                if not values:
                    del quotas[entity]

            def install() -> None:
                self.quotas = quotas
                self.keys = _keys(quotas)

            rows = [
                {"entity": dict(entity), "quotas": values}
                for entity, values in sorted(quotas.items(), key=lambda kv: _sort_key(kv[0]))
            ]
            return rows, install

        if self.file is None:
            commit()[1]()
        else:
            await self.file.update(commit)


def _keys(quotas: dict[Entity, dict[str, float]]) -> frozenset[str]:
    return frozenset(key for values in quotas.values() for key in values)


def _stored(rows: list[Any]) -> dict[Entity, dict[str, float]]:
    """The quotas of the stored document (ValueError if it is not of the shape apply writes)."""
    quotas: dict[Entity, dict[str, float]] = {}
    for row in rows:
        entity = tuple(sorted(row["entity"].items()))
        values = row["quotas"]
        if not all(t in (USER, CLIENT_ID, IP) and (n is None or type(n) is str) for t, n in entity) or not all(
            type(k) is str and type(v) in (int, float) for k, v in values.items()
        ):
            raise ValueError(f"not a client quota entry: {row!r}")
        quotas[entity] = {k: float(v) for k, v in values.items()}
    return quotas


def _sort_key(entity: Entity) -> list[tuple[str, str]]:
    return [(t, "" if n is None else n) for t, n in entity]


class ClientQuotaApis:
    """DescribeClientQuotas and AlterClientQuotas (Kafka's ClientQuotaControlManager)."""

    def __init__(self, store: QuotaStore) -> None:
        self.store = store

    def register(self, registry: Registry) -> None:
        registry.add(DESCRIBE_CLIENT_QUOTAS, range(0, 2), self.describe_client_quotas)
        registry.add(ALTER_CLIENT_QUOTAS, range(0, 2), self.alter_client_quotas)

    # DescribeClientQuotas ---------------------------------------------------------------

    def describe_client_quotas(self, ctx: RequestContext, req: Any) -> Any:
        try:
            exact, any_of = self._filter(req.components)
        except QuotaError as e:
            return ctx.response(throttle_time=0, error_code=e.code, error_message=str(e), entries=None)
        entries = []
        for entity, values in sorted(self.store.quotas.items(), key=lambda kv: _sort_key(kv[0])):
            names = dict(entity)
            if req.strict and len(names) != len(exact) + len(any_of):
                continue
            if any(t not in names or names[t] != n for t, n in exact.items()) or any(t not in names for t in any_of):
                continue
            entries.append(
                ctx.nested(
                    "EntryData",
                    entity=tuple(ctx.nested("EntityData", entity_type=t, entity_name=n) for t, n in entity),
                    values=tuple(ctx.nested("ValueData", key=k, value=v) for k, v in sorted(values.items())),
                )
            )
        return ctx.response(throttle_time=0, error_code=E.none, error_message="", entries=tuple(entries))  # (Kafka's)

    @staticmethod
    def _filter(components: Any) -> tuple[dict[str, str | None], set[str]]:
        """Kafka's describeClientQuotas filter checks: exact names (None: the default entity)
        and types that must merely be there."""
        exact: dict[str, str | None] = {}
        any_of: set[str] = set()
        for c in components:
            t = c.entity_type
            if not t:
                raise QuotaError(E.invalid_request, "Invalid empty entity type.")
            if t in exact or t in any_of:
                raise QuotaError(E.invalid_request, f"Entity type {t} cannot appear more than once in the filter.")
            if t not in (USER, CLIENT_ID, IP):
                raise QuotaError(E.unsupported_version, f"Unsupported entity type {t}")
            if c.match_type == MATCH_EXACT:
                exact[t] = c.match
            elif c.match_type == MATCH_DEFAULT:
                exact[t] = None
            elif c.match_type == MATCH_ANY:
                any_of.add(t)
            else:  # (DescribeClientQuotasRequest.filter's IllegalArgumentException)
                raise QuotaError(E.unknown_server_error, f"Unexpected match type: {c.match_type}")
        types = set(exact) | any_of
        if IP in types and types & {USER, CLIENT_ID}:
            raise QuotaError(
                E.invalid_request,
                "Invalid entity filter component combination. IP filter component "
                "should not be used with user or clientId filter component.",
            )
        return exact, any_of

    # AlterClientQuotas ------------------------------------------------------------------

    async def alter_client_quotas(self, ctx: RequestContext, req: Any) -> Any:
        """Each entry is checked alone (its error is its own); the valid ones are applied
        together unless validate_only, and answered once durable (KAFKA_STORAGE_ERROR if
        the disk refused)."""
        results: dict[Entity, tuple[E, str | None]] = {}
        order: list[tuple[Any, Entity]] = []
        changes: dict[Entity, dict[str, float | None]] = {}
        for entry in req.entries:
            # AlterClientQuotasRequest.entries: a map by type (a type given twice: the last name)
            entity = tuple(sorted({e.entity_type: e.entity_name for e in entry.entity}.items()))
            order.append((entry, entity))
            if entity in results:
                results[entity] = (E.invalid_request, f"Ignoring duplicate entity {entity_string(entity)}")
                changes.pop(entity, None)
                continue
            try:
                changes[entity] = await self._check_entry(entity, entry)
                results[entity] = (E.none, None)
            except QuotaError as e:
                results[entity] = (e.code, str(e))
        if changes and not req.validate_only:
            try:
                await self.store.apply(changes)
            except OSError as e:
                log.warning("client quotas: cannot write %s: %s", QUOTAS_FILE, e)
                for entity in changes:
                    results[entity] = (E.kafka_storage_error, f"cannot write the client quotas: {e.strerror or e}")
        return ctx.response(
            throttle_time=0,
            entries=tuple(
                ctx.nested(
                    "EntryData",
                    error_code=results[entity][0],
                    error_message=results[entity][1],
                    entity=tuple(
                        ctx.nested("EntityData", entity_type=e.entity_type, entity_name=e.entity_name)
                        for e in entry.entity
                    ),
                )
                for entry, entity in order
            ),
        )

    @staticmethod
    async def _check_entry(entity: Entity, entry: Any) -> dict[str, float | None]:
        """ClientQuotaControlManager.alterClientQuotaEntity's checks, in its order."""
        ops: dict[str, float | None] = {}
        for op in entry.ops:
            if op.key in ops:  # (Kafka then reports the entity as a duplicate)
                raise QuotaError(E.invalid_request, f"Ignoring duplicate entity {entity_string(entity)}")
            ops[op.key] = None if op.remove else op.value
        if not entity:
            raise QuotaError(E.invalid_request, "Invalid empty client quota entity")
        for t, name in entity:
            if t not in (USER, CLIENT_ID, IP):
                raise QuotaError(E.invalid_request, f"Unhandled client quota entity type: {t}")
            if name is not None and name == "":
                raise QuotaError(E.invalid_request, f"Empty {t} not supported")
        names = dict(entity)
        if IP in names:
            if USER in names or CLIENT_ID in names:
                raise QuotaError(
                    E.invalid_request,
                    "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
                )  # (sic: Kafka's message)
            if not await _valid_ip(names[IP]):
                raise QuotaError(E.invalid_request, f"{names[IP]} is not a valid IP or resolvable host.")
            keys = IP_KEYS
        else:
            keys = USER_CLIENT_KEYS
        for key, value in ops.items():
            if value is None:
                continue
            kind = keys.get(key)
            if kind is None:
                raise QuotaError(E.invalid_request, f"Invalid configuration key {key}")
            # (NaN too, where Kafka's `value <= 0.0` lets it through: no rate can be held to it)
            if not value > 0.0:
                raise QuotaError(E.invalid_request, f"Quota {key} must be greater than 0")
            if kind == INT and value > 2**31 - 1:
                raise QuotaError(E.invalid_request, f"Proposed value for {key} is too large for an INT.")
            if kind == LONG and value > 2**63 - 1:
                raise QuotaError(E.invalid_request, f"Proposed value for {key} is too large for a LONG.")
            if kind != DOUBLE and abs(value % 1.0) > 1e-6:
                raise QuotaError(E.invalid_request, f"{key} cannot be a fractional value.")
        return ops


class Rate:
    """Kafka's Rate over a windowed sum (SampledStat): `samples` windows of `window_ms`
    each; a window older than all of them together no longer counts. The rate divides the
    bytes counted by the time they cover, at least samples - 1 whole windows."""

    __slots__ = ("samples", "window_ms", "starts", "values", "current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples, self.window_ms = samples, window_ms
        self.starts: list[int] = []
        self.values: list[float] = []
        self.current = 0

    def record(self, value: float, now: int) -> None:
        if not self.starts:
            self.starts.append(now)
            self.values.append(0.0)
        elif now - self.starts[self.current] >= self.window_ms:  # this window is complete: the next
            self.current = (self.current + 1) % self.samples
            if self.current >= len(self.starts):
                self.starts.append(now)
                self.values.append(0.0)
            else:
                self.starts[self.current], self.values[self.current] = now, 0.0
        self.values[self.current] += value

    def _purge(self, now: int) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self.starts):
            if now - start >= expire:
                self.starts[i], self.values[i] = now, 0.0

    def window_size(self, now: int) -> int:
        """Kafka's Rate.windowSize: the time the counted samples cover (ms)."""
        self._purge(now)
        elapsed = now - (min(self.starts) if self.starts else now)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now: int) -> float:
        """Bytes per second."""
        size = self.window_size(now)  # (purges first)
        return sum(self.values) / (size / 1000)


class ByteRateQuota:
    """Kafka's ClientQuotaManager for one byte-rate quota (producer_byte_rate for Produce,
    consumer_byte_rate for Fetch), with its DefaultQuotaCallback's entity order."""

    def __init__(self, store: QuotaStore, key: str, samples: int = 11, window_seconds: int = 1) -> None:
        self.store, self.key = store, key
        self.samples, self.window_ms = samples, window_seconds * 1000
        self.rates: dict[tuple[str, str], Rate] = {}

    def enabled(self) -> bool:
        """Whether any entity sets this quota (most brokers: none, and requests skip it all)."""
        return self.key in self.store.keys

    def quota(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """The rate's key (user and client-id tags as Kafka's quotaMetricTags give them) and
        the quota of the most specific entity that sets this key; None: no quota."""
        if not self.enabled():
            return None
        get = self.store.get
        for entity, tags in (
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, None), (USER, user)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
            (((CLIENT_ID, None), (USER, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)),
        ):
            bound = get(entity, self.key)
            if bound is not None:
                return tags, bound
        return None

    def record(self, user: str, client_id: str, value: float, now: int) -> int:
        """Record the bytes; the throttle time (ms) if that took the rate over the quota
        (Kafka's QuotaUtils.throttleTime: the excess as a share of the quota, times the window)."""
        found = self.quota(user, client_id)
        if found is None:
            return 0
        tags, bound = found
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = Rate(self.samples, self.window_ms)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        return round((observed - bound) / bound * rate.window_size(now))

    def unrecord(self, user: str, client_id: str, value: float, now: int) -> None:
        """Take back bytes recorded for an answer that is not sent (a throttled Fetch)."""
        found = self.quota(user, client_id)
        if found is not None and found[0] in self.rates:
            self.rates[found[0]].record(-value, now)

    def max_value_in_window(self, user: str, client_id: str) -> int | None:
        """Kafka's getMaxValueInQuotaWindow: the most one answer may carry (quota x window)."""
        found = self.quota(user, client_id)
        return None if found is None else int(found[1] * self.window_ms / 1000)


class TokenBucket:
    """Kafka's TokenBucket stat: `burst` tokens at most, refilled at `rate` per second; a
    record takes tokens and may leave the bucket in debt (below zero)."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self, burst: float, now: int) -> None:
        self.tokens, self.last_ms = burst, now

    def refill(self, rate: float, burst: float, now: int) -> float:
        self.tokens = min(burst, self.tokens + rate * max(now - self.last_ms, 0) / 1000)
        self.last_ms = max(now, self.last_ms)
        return self.tokens


class ControllerMutationQuota(ByteRateQuota):
    """Kafka's ControllerMutationQuotaManager: controller_mutation_rate (partitions created or
    deleted per second) per (user, client-id), over a token bucket."""

    def __init__(self, store: QuotaStore, samples: int = 11, window_seconds: int = 1) -> None:
        super().__init__(store, CONTROLLER_MUTATION_RATE, samples, window_seconds)
        self.buckets: dict[tuple[str, str], TokenBucket] = {}

    def _bucket(self, user: str, client_id: str, now: int) -> tuple[TokenBucket, float] | None:
        found = self.quota(user, client_id)
        if found is None:
            return None
        tags, bound = found
        burst = bound * self.samples * self.window_ms / 1000
        bucket = self.buckets.get(tags)
        if bucket is None:
            bucket = self.buckets[tags] = TokenBucket(burst, now)
        bucket.refill(bound, burst, now)
        return bucket, bound

    def throttle_time(self, user: str, client_id: str, now: int) -> int:
        """The time (ms) until the bucket is out of debt (ControllerMutationQuotaManager.throttleTimeMs)."""
        found = self._bucket(user, client_id, now)
        if found is None or found[0].tokens >= 0:
            return 0
        return round(-found[0].tokens / found[1] * 1000)

    def take(self, user: str, client_id: str, permits: int, strict: bool, now: int) -> bool:
        """Record `permits` partition mutations; False (nothing recorded) if strict and the
        bucket is already in debt (StrictControllerMutationQuota.record's checkQuotas first)."""
        found = self._bucket(user, client_id, now)
        if found is None:
            return True
        bucket = found[0]
        if strict and bucket.tokens < 0:
            return False
        bucket.tokens -= permits
        return True


class RequestQuota(ByteRateQuota):
    """Kafka's ClientRequestQuotaManager: request_percentage, the share of one thread's time
    (here: the event loop's) the requests of a (user, client-id) may take."""

    def __init__(self, store: QuotaStore, samples: int = 11, window_seconds: int = 1) -> None:
        super().__init__(store, REQUEST_PERCENTAGE, samples, window_seconds)

    def record_time(self, user: str, client_id: str, seconds: float, now: int) -> int:
        """Record a request's handler time (as percent-seconds, so the rate is a percentage);
        the throttle time, at most one window (ClientRequestQuotaManager.maxThrottleTimeMs)."""
        return min(self.record(user, client_id, seconds * 100, now), self.window_ms)

    def throttle_answer(self, ctx: RequestContext, body: Any) -> Any:
        """Count the request's loop time; over the quota, mute its connection and give the
        answer the larger of its own throttle time and this one (KafkaApis'
        sendResponseMaybeThrottle: the request quota's throttle and the other quotas' together)."""
        throttle = self.record_time(
            quota_user(ctx.connection), ctx.header.client_id or "", ctx.loop_time, int(time.time() * 1000)
        )
        if throttle <= 0:
            return body
        mute = getattr(ctx.connection, "throttle", None)
        if mute is not None:
            mute(throttle)
        if isinstance(body, Raw):  # an answer encoded ahead (Metadata, Heartbeat): throttle_time_ms leads it
            fields = dataclasses.fields(ctx.codec.response_type)
            if (
                fields
                and fields[0].name == "throttle_time"
                and len(body) >= 4
                and _INT32.unpack_from(body)[0] < throttle
            ):
                return Raw(_INT32.pack(throttle) + body[4:])
            return body
        current = getattr(body, "throttle_time", None)  # (None: a version without the field)
        if isinstance(current, datetime.timedelta):
            current = current // datetime.timedelta(milliseconds=1)
        if type(current) is int and current < throttle:  # (a handler's int milliseconds, or kio's timedelta)
            return dataclasses.replace(body, throttle_time=throttle)
        return body


class TimedCoroutine(collections.abc.Coroutine[Any, Any, Any]):
    """A request handler's coroutine whose every step on the loop is added to its request's
    loop_time: what Kafka's request thread time is for a handler that awaits."""

    __slots__ = ("coro", "ctx")

    def __init__(self, coro: Any, ctx: RequestContext) -> None:
        self.coro, self.ctx = coro, ctx

    def send(self, value: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.coro.send(value)
        finally:
            self.ctx.loop_time += time.perf_counter() - started

    def throw(self, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.coro.throw(*args)
        finally:
            self.ctx.loop_time += time.perf_counter() - started

    def close(self) -> None:
        self.coro.close()

    def __await__(self) -> Any:
        return self.coro.__await__()


class ConnectionRateQuota:
    """Kafka's ConnectionQuotas per-ip connection_creation_rate (recordIpConnectionMaxRate)."""

    def __init__(self, store: QuotaStore, samples: int = 11, window_seconds: int = 1) -> None:
        self.store, self.samples, self.window_ms = store, samples, window_seconds * 1000
        self.rates: dict[str | None, Rate] = {}

    def throttle_time(self, host: str, now: int) -> int:
        """Count a new connection from `host`; the time (ms) to hold it before closing it if
        that took the rate over the quota (the connection is then not counted), else 0."""
        if CONNECTION_CREATION_RATE not in self.store.keys:
            return 0
        # (an ip entity names an address here, where Kafka resolves a host name to one)
        bound = self.store.get(((IP, host),), CONNECTION_CREATION_RATE)
        if bound is None:
            bound = self.store.get(((IP, None),), CONNECTION_CREATION_RATE)
        if bound is None:
            return 0
        rate = self.rates.get(host)
        if rate is None:
            rate = self.rates[host] = Rate(self.samples, self.window_ms)
        rate.record(1.0, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        rate.record(-1.0, now)  # as Kafka: a connection not accepted is not counted
        return max(round((observed - bound) / bound * rate.window_size(now)), 1)


def quota_user(connection: Any) -> str:
    """The principal's name Kafka's quotas are keyed by (ANONYMOUS without authentication)."""
    return principal_of(connection).split(":", 1)[1]
