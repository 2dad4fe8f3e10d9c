"""The API registry: which api keys and versions we serve, and by which handler.

A handler is `handler(ctx, request) -> response`, an `async def` returning the response,
a plain function returning an asyncio.Future of it, or one returning LATER that calls
ctx.answer(response) when it has it. None answers requests that get no response, e.g.
Produce with acks=0.
Components (group coordinator, broker data plane, ...) register their handlers here;
ApiVersions advertises exactly what is registered.
"""

from __future__ import annotations

import collections.abc
import datetime
import ipaddress
import sys
from dataclasses import MISSING, dataclass, fields, replace
from functools import cache, lru_cache
from types import CoroutineType, MemberDescriptorType
from typing import Any, Callable, Final, Iterable, cast

from kio.schema.errors import ErrorCode

from protocol.messages import Codec, RequestHeader, codec, has_codec
from protocol.wire import Raw as Raw  # re-exported: handlers import it from here

from .futures import CaughtAnswer


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    min_version: int
    max_version: int
    handler: Callable[..., Any]
    cancel_on_close: bool = False  # a request that only waits (long poll): dropped with its connection


class Registry:
    def __init__(self) -> None:
        # What is advertised in ApiVersions and accepted: what each API serves, unless a test
        # narrowed its range (narrow(), coordinator/api_version_limits.py)
        self.apis: dict[int, Api] = {}
        self.served: dict[int, Api] = {}  # the full ranges, as registered
        # (api key, version) -> (api, codec), once seen: one lookup per request
        self.routes: dict[tuple[int, int], tuple[Api, Codec]] = {}
        # bodies built from the advertised ranges (ApiVersions answers, by version), until they change
        self.answers: dict[int, Any] = {}
        # api key -> the lowest version ApiVersions lists where it is below the lowest served
        # (coordinator/releases.py: Kafka 4's Produce)
        self.advertised_min: dict[int, int] = {}

    def add(self, key: int, versions: range, handler: Callable[..., Any], *, cancel_on_close: bool = False) -> None:
        missing = [v for v in versions if not has_codec(key, v)]
        if missing:  # fail at startup, not at the first request
            raise ValueError(f"no codec for api key {key} versions {missing}")
        self.apis[key] = self.served[key] = Api(key, versions.start, versions.stop - 1, handler, cancel_on_close)
        self._changed()

    def narrow(self, key: int, min_version: int, max_version: int) -> None:
        """Advertise and accept only min_version..max_version of a served API (within its
        served range: the caller checks); its full range again if that is the range given."""
        self.apis[key] = replace(self.served[key], min_version=min_version, max_version=max_version)
        self._changed()

    def withdraw(self, key: int) -> None:
        """No longer serve an API (a release without it: coordinator/releases.py)."""
        self.apis.pop(key, None)
        self.served.pop(key, None)
        self.advertised_min.pop(key, None)
        self._changed()

    def advertised_min_version(self, api: Api) -> int:
        """The lowest version ApiVersions lists for a served API (a narrowed one: its own)."""
        if api != self.served[api.key]:
            return api.min_version
        return self.advertised_min.get(api.key, api.min_version)

    def _changed(self) -> None:
        self.routes.clear()
        self.answers.clear()

    def find(self, key: int, version: int) -> Api | None:
        api = self.apis.get(key)
        if api is None or not api.min_version <= version <= api.max_version:
            return None
        return api

    def route(self, key: int, version: int) -> tuple[Api, Codec] | None:
        """The api serving this version and its codec; None if not served."""
        api = self.find(key, version)
        if api is None:
            return None
        route = self.routes[key, version] = (api, codec(key, version))
        return route


class CloseConnection(Exception):
    """Raised by a handler for a request that Kafka answers by closing the connection
    (unsupported api, garbage, a failed SASL exchange)."""


class BuiltWhenSent:
    """A response body built only when its connection writes it: a Fetch's records are
    read then, not held while earlier answers wait or the client does not read."""

    __slots__ = ("build",)

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build


# A handler's result meaning "ctx.answer(body) will be called": the cheapest way to answer
# later (no Future, no coroutine), for the hottest paths.
LATER = object()
UNANSWERED = object()

# Whether a handler's result is a coroutine, by its type: Python's coroutine, or the compiled
# build's (mypyc gives each async function a class of its own), learned once per type.
_COROUTINE_TYPES: dict[type, bool] = {CoroutineType: True}


def is_coroutine(result: object) -> bool:
    known = _COROUTINE_TYPES.get(type(result))
    if known is None:
        known = _COROUTINE_TYPES[type(result)] = isinstance(result, collections.abc.Coroutine)
    return known


# Connections given answers between answers_begin() and answers_end(): each is flushed once
# at the end, so many answers completed together (a durable write releasing the answers
# queued behind it) leave in one socket write per connection.
_together: list[set[Any]] = []


def answers_begin() -> None:
    _together.append(set())


def answers_end() -> None:
    for connection in _together.pop():
        connection.flush_answers()


@lru_cache(maxsize=4096)
def inet_address_string(host: str) -> str:
    """java.net.InetAddress.toString() of a connection's peer, whose name is never looked up:
    "/" and the address; IPv6 as Inet6Address.getHostAddress writes it (eight groups, no "::"),
    and an IPv4-mapped IPv6 address as the IPv4 address (Java makes it an Inet4Address)."""
    address, _, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "/" + host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"/{ip.ipv4_mapped}"
        groups = ":".join(f"{int(g, 16):x}" for g in ip.exploded.split(":"))
        return f"/{groups}%{scope}" if scope else f"/{groups}"
    return f"/{ip}"


# (init=False: the __init__ below, which the compiled build compiles; the one dataclass would
# generate stays Python there, and one is run per request)
@dataclass(slots=True, init=False)
class RequestContext:
    header: RequestHeader
    codec: Codec
    client_host: str
    connection: Any  # coordinator.connection.Connection
    waiting: Any = None  # for a response given later: LATER, or a Future / Task of its body
    body: Any = UNANSWERED  # set by answer()
    started: float = 0.0  # when it was read (perf_counter), if requests are measured
    size: int = 0  # bytes of the request frame (what a produce quota counts)
    loop_time: float = -1.0  # seconds its handler ran on the loop, if a request quota measures it (else -1)

    def __init__(
        self,
        header: RequestHeader,
        codec: Codec,
        client_host: str,
        connection: Any,
        waiting: Any = None,
        body: Any = UNANSWERED,
        started: float = 0.0,
        size: int = 0,
        loop_time: float = -1.0,
    ) -> None:
        self.header = header
        self.codec = codec
        self.client_host = client_host
        self.connection = connection
        self.waiting = waiting
        self.body = body
        self.started = started
        self.size = size
        self.loop_time = loop_time

    def answer(self, body: Any) -> None:
        """Give the response of a handler that returned LATER."""
        self.body = body
        connection = self.connection
        if connection is not None:
            if _together:
                _together[-1].add(connection)  # flushed once, by answers_end()
            else:
                connection.flush_answers()

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_address(self) -> str:
        """The client's address as Kafka's RequestContext.clientAddress.toString() gives it: the
        host a group member is kept and described with (JoinGroup, ConsumerGroupHeartbeat,
        ShareGroupHeartbeat), e.g. "/127.0.0.1"."""
        return inet_address_string(self.client_host)

    def response(self, **values: Any) -> Any:
        """Build this request's response class from the values that exist in its version
        (build(), inline: every answer built comes here)."""
        cls = self.codec.response_type
        return (_MAKERS.get(cls) or _maker(cls))(values)

    def nested(self, _entity: str, /, **values: Any) -> Any:
        """Build a nested entity (e.g. JoinGroupResponseMember) of the response's version.
        (`_entity`: a compiled build takes a field named like it, entity=, for it.)"""
        key = (self.codec.response_type, _entity)
        make = _NESTED_MAKERS.get(key)
        if make is None:
            cls = nested_type(*key)
            make = _NESTED_MAKERS[key] = _MAKERS.get(cls) or _maker(cls)
        return make(values)


def coordinates_every_group(ctx: RequestContext, partition: int) -> int:
    """The owner check of a single broker, which coordinates every group: NONE (here, compiled:
    the group APIs ask it on every request)."""
    return 0  # (ErrorCode.none)


def errors_by_topic(
    ctx: RequestContext,
    topic_entity: str,
    partition_entity: str,
    by_topic: Iterable[tuple[str, Iterable[tuple[Any, ...]]]],
    name: str = "name",
    partitions: str = "partitions",
    index: str = "partition_index",
    error: str = "error_code",
    **same: Any,
) -> tuple[Any, ...]:
    """The topics of an answer that gives each partition its error (OffsetDelete, DeleteRecords,
    AlterReplicaLogDirs, WriteTxnMarkers, ElectLeaders, ...; a request refused whole, as
    Kafka's getErrorResponse): a `topic_entity` per (topic, its partitions' rows), with a
    `partition_entity` per row (partition, error[, its other fields]), in the order given. The
    APIs name the fields differently: the topic's `name`, its `partitions`, a partition's
    `index` and `error`; `same`: fields every partition has alike (an error message, empty values)."""

    def partition(row: tuple[Any, ...]) -> Any:
        values = {index: row[0], error: row[1], **same}
        if len(row) > 2:
            values.update(row[2])
        return ctx.nested(partition_entity, **values)

    return tuple(
        ctx.nested(topic_entity, **{name: topic, partitions: tuple(partition(row) for row in rows)})
        for topic, rows in by_topic
    )


_new_object: Final = object.__new__
# Compiled (the optional mypyc build), RequestContext is a C type that object.__new__ cannot make,
# and its constructor is the quick way.
_COMPILED = not __file__.endswith(".py")


def new_context(header: RequestHeader, codec: Codec, client_host: str, connection: Any, size: int) -> RequestContext:
    """RequestContext(header, codec, client_host, connection, size=size), one per request:
    its slots set directly, without the dataclass __init__ (a Python call through the type's
    init slot, the dearer way to call Python code)."""
    if _COMPILED:
        return RequestContext(header, codec, client_host, connection, size=size)
    ctx = _new_object(RequestContext)
    ctx.header = header
    ctx.codec = codec
    ctx.client_host = client_host
    ctx.connection = connection
    ctx.waiting = None
    ctx.body = UNANSWERED
    ctx.started = 0.0
    ctx.size = size
    ctx.loop_time = -1.0
    return ctx


def inner_context(ctx: RequestContext) -> RequestContext:
    """ctx for running its handler inside another: the same request (its size still counts
    against a produce quota), its answer caught (CaughtAnswer.done is set once given)."""
    return replace(ctx, connection=CaughtAnswer(ctx.connection), waiting=None, body=UNANSWERED)


@cache
def nested_type(response_type: type, name: str) -> type:
    return cast("type[Any]", getattr(sys.modules[response_type.__module__], name))


ZERO = datetime.timedelta(0)


def _to_timedelta(v: Any) -> Any:
    return datetime.timedelta(milliseconds=v) if type(v) is int else v


_ERROR_CODES: Final[dict[int, ErrorCode]] = {
    int(e.value): e for e in ErrorCode
}  # (a dict lookup, not Enum's call, per answer)


_MAKERS: dict[type, Callable[[dict[str, Any]], Any]] = {}
_NESTED_MAKERS: dict[tuple[type, str], Callable[[dict[str, Any]], Any]] = {}  # (response class, entity name)


# How a field of a kio entity takes its value in make(values): its default, what its default
# factory makes, or none (required); and what a handler's plain int is turned into.
# (Final: compiled, constants in the code rather than a dict lookup each)
_DEFAULT: Final = 0
_FACTORY: Final = 1
_REQUIRED: Final = 2
_AS_IS: Final = 0
_AS_ERROR: Final = 1
_AS_TIMEDELTA: Final = 2


def _maker(cls: type) -> Callable[[dict[str, Any]], Any]:
    """make(values) -> an instance of kio entity `cls`, made once per class: each slot set
    from `values` or the field's default, without the frozen dataclass __init__ (a call
    through the type's init slot, then object.__setattr__ per field). Values handlers give
    as plain ints that kio types are converted: error codes (ErrorCode) and tagged
    millisecond fields (timedeltas: kio's own writer writes tagged fields); untagged
    millisecond fields stay ints, which protocol.compiled_writer writes as they are.
    Compiled, a _Make runs the list of the fields; as Python, code generated from it does
    (straight-line code is the quicker one there, the loop the quicker one compiled)."""
    plan: list[tuple[str, Any, int, Any, int]] = []
    for f in fields(cls):
        slot = getattr(cls, f.name)
        if type(slot) is not MemberDescriptorType:
            raise TypeError(f"{cls.__name__}.{f.name} is not a slot")  # (kio entities are slotted dataclasses)
        if f.default is not MISSING:
            how, default = _DEFAULT, f.default
        elif f.default_factory is not MISSING:
            how, default = _FACTORY, f.default_factory
        else:
            how, default = _REQUIRED, None  # (KeyError: a handler left out a required field, a bug)
        kind = f.metadata.get("kafka_type")
        if kind == "error_code":
            convert = _AS_ERROR
        elif kind in ("timedelta_i32", "timedelta_i64") and "tag" in f.metadata:
            convert = _AS_TIMEDELTA
        else:
            convert = _AS_IS
        plan.append((f.name, slot.__set__, how, default, convert))
    make = _Make(cls, plan) if _COMPILED else _generated_make(cls, plan)
    _MAKERS[cls] = make
    return make


class _Make:
    """make(values) of the compiled build: the fields' list run by compiled code."""

    def __init__(self, cls: type, plan: list[tuple[str, Any, int, Any, int]]) -> None:
        self.cls = cls
        self.plan = plan

    def __call__(self, kw: dict[str, Any]) -> Any:
        e: Any = _new_object(self.cls)
        codes = _ERROR_CODES
        for name, set_slot, how, default, convert in self.plan:
            if how == _DEFAULT:
                v = kw.get(name, default)
            elif how == _FACTORY:
                v = kw[name] if name in kw else default()
            else:
                v = kw[name]
            if convert == _AS_ERROR:
                if type(v) is int:
                    v = codes[v]
            elif convert == _AS_TIMEDELTA:
                v = _to_timedelta(v)
            set_slot(e, v)
        return e


def _generated_make(cls: type, plan: list[tuple[str, Any, int, Any, int]]) -> Callable[[dict[str, Any]], Any]:
    """make(values) as Python: code generated from the fields' list."""
    env: dict[str, Any] = {"_new": _new_object, "_cls": cls, "_E": _ERROR_CODES, "_td": _to_timedelta}
    lines = ["def make(kw):", "    get = kw.get", "    e = _new(_cls)"]
    for i, (name, set_slot, how, default, convert) in enumerate(plan):
        env[f"_s{i}"] = set_slot
        if how == _DEFAULT:
            env[f"_d{i}"] = default
            value = f"get({name!r}, _d{i})"
        elif how == _FACTORY:
            env[f"_f{i}"] = default
            value = f"kw[{name!r}] if {name!r} in kw else _f{i}()"
        else:
            value = f"kw[{name!r}]"
        if convert == _AS_ERROR:
            lines += [f"    v = {value}", f"    _s{i}(e, _E[v] if v.__class__ is int else v)"]
        elif convert == _AS_TIMEDELTA:
            lines.append(f"    _s{i}(e, _td({value}))")
        else:
            lines.append(f"    _s{i}(e, {value})")
    lines.append("    return e")
    exec("\n".join(lines), env)  # noqa: S102  # (source built above from the class's fields)
    make: Callable[[dict[str, Any]], Any] = env["make"]
    return make


def build(cls: type, values: dict[str, Any]) -> Any:
    """Construct kio entity `cls` from `values`, ignoring values its version does not have.

    Handlers describe a response once for all versions; fields that a version lacks
    (e.g. throttle_time_ms before v1) are simply not sent, as in Kafka's own code.
    Fields the version has but the handler did not give take the schema default.
    """
    return (_MAKERS.get(cls) or _maker(cls))(values)


def ms(td: datetime.timedelta) -> int:
    """kio decodes int32 millisecond fields as timedeltas; the coordinator works in ms."""
    return td.days * 86_400_000 + td.seconds * 1000 + td.microseconds // 1000
