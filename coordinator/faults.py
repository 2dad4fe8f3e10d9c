"""Faults injected into request handling on demand, so that tests can drive a client's error
paths: an error answer, added latency, a dropped connection (before the request is handled,
or after, with the reply lost), a request stalled until released.

What librdkafka's mock cluster (`rd_kafka_mock_push_request_errors`, `..._error_rtts`) and
kfake (`ControlKey`, `KeepControl`, `DropControl`, `SleepControl`) give their users, as
rules matched by API key and optionally client id, group, topic and broker. Off unless a
rule exists: the request path then checks one attribute (`RequestChannel.intercept`, None),
which the server chooses again whenever the rules come or go (`changed`).

    faults.add("OffsetCommit", "NOT_COORDINATOR", times=2, group="orders")
    faults.add("Produce", drop="after")              # written, then the reply is lost
    faults.add("Fetch", delay_ms=500, times=None)    # every Fetch 500 ms late, until cleared
    faults.add("Heartbeat", stall=True)              # held until faults.clear()
"""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Callable, TypedDict, TypeVar, Unpack, cast

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from protocol.error_response import error_response

from . import server_log
from .apis import LATER, UNANSWERED, CloseConnection, RequestContext, inner_context, is_coroutine

log = server_log.get(__name__)

# API names as Kafka writes them (OffsetCommit), and their keys
API_KEYS: dict[str, int] = {"".join(w.capitalize() for w in n.split("_")): k for k, n in api_key_map.items()}
API_NAMES: dict[int, str] = {k: n for n, k in API_KEYS.items()}
_API_KEYS_FOLDED = {n.lower(): k for n, k in API_KEYS.items()}  # offset_commit, offsetcommit, OFFSET_COMMIT
ERRORS: dict[str, ErrorCode] = {e.name.upper(): e for e in ErrorCode}

PRODUCE, FETCH, FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 10, 8, 9
DESCRIBE_GROUPS, DELETE_GROUPS = 15, 42
GROUP_DESCRIBES = (69, 77, 89)  # ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe
DROPS = ("before", "after")


class FaultOptions(TypedDict, total=False):
    """A fault rule's fields besides its api and error (their defaults: _rule's)."""

    times: int | None
    probability: float | None
    delay_ms: int
    drop: str | None
    stall: bool | int
    client_id: str | None
    group: str | None
    topic: str | None
    broker: int | None
    seed: int | None


FIELDS = ("api", "error", *FaultOptions.__annotations__)


T = TypeVar("T")


def parse_specs(specs: Any, noun: str, parse: Callable[[Any], T]) -> list[T]:
    """JSON objects of the HTTP control (one, or a non-empty list), each parsed: all of them,
    or, if any is bad, ValueError naming the first bad one (so nothing is half applied)."""
    if isinstance(specs, dict):
        specs = [specs]
    if not isinstance(specs, list) or not specs:
        raise ValueError(f"a {noun} is a JSON object (or a non-empty list of them)")
    parsed = []
    for i, spec in enumerate(specs):
        try:
            parsed.append(parse(spec))
        except ValueError as e:
            raise ValueError(f"{noun} {i + 1} of {len(specs)}: {e}" if len(specs) > 1 else str(e)) from None
    return parsed


def check_spec(spec: Any, noun: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """`spec` if it is a JSON object of known `fields` naming its "api"; else ValueError."""
    if not isinstance(spec, dict):
        raise ValueError(f"a {noun} is a JSON object, not {type(spec).__name__}")
    unknown = sorted(set(spec) - set(fields))
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}; fields: {', '.join(fields)}")
    if "api" not in spec:
        raise ValueError("field 'api' is required")
    return spec


@dataclass
class Rule:
    """One fault: what it matches, what it does, how many more times."""

    id: int
    api_key: int
    error: ErrorCode | None
    times: int | None  # firings left; None: until cleared
    probability: float | None
    delay_ms: int
    drop: str | None
    stall: bool | int  # True: until cleared; an int: at most that many ms
    client_id: str | None
    group: str | None
    topic: str | None
    broker: int | None
    seed: int | None = None
    rng: random.Random | None = None  # its own generator when it has a seed, else the Faults' one
    fired: int = 0
    released: asyncio.Event | None = field(default=None, repr=False)  # set when cleared: stalls go on

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "api": API_NAMES.get(self.api_key, str(self.api_key)),
            "api_key": self.api_key,
            "error": None if self.error is None else self.error.name.upper(),
            "error_code": None if self.error is None else int(self.error),
            "times": self.times,
            "probability": self.probability,
            "delay_ms": self.delay_ms,
            "drop": self.drop,
            "stall": self.stall,
            "client_id": self.client_id,
            "group": self.group,
            "topic": self.topic,
            "broker": self.broker,
            "seed": self.seed,
            "fired": self.fired,
        }


Handle = Callable[[RequestContext, Any, Callable[..., Any]], Any]


def _unchecked(ctx: RequestContext, request: Any, handler: Callable[..., Any]) -> Any:
    return handler(ctx, request)


def _no_topic_ids(topic_id: Any) -> str | None:
    return None


def _unwatched() -> None:
    pass


class Faults:
    """The active fault rules of one server, shared by its brokers.

    Used on the server's event loop, as the HTTP control and coordinator.testing do: rules
    are read by dispatch, and a stall's release wakes requests waiting on that loop. Given
    what it needs of the server when built: `handle(ctx, request, handler)` handles a
    request as dispatch would (the ACL gate first), `topic_name(id)` names a topic id
    (None: unknown), and `changed()` is told when rules come or go."""

    def __init__(
        self,
        seed: int | None = None,
        *,
        handle: Handle = _unchecked,
        topic_name: Callable[[Any], str | None] = _no_topic_ids,
        changed: Callable[[], None] = _unwatched,
    ) -> None:
        self.rules: list[Rule] = []
        self.rng = random.Random(seed)
        self._ids = itertools.count(1)
        self.handle = handle
        self.topic_name = topic_name
        self._changed = changed

    # the rules ----------------------------------------------------------------------------

    def add(self, api: str | int, error: str | int | None = None, **options: Unpack[FaultOptions]) -> dict[str, Any]:
        """Add a rule; return it as a JSON-able dict with its id. A bad spec raises ValueError
        (one message) and adds nothing."""
        return self._install([_rule(api, error, **options)])[0]

    def add_specs(self, specs: Any) -> list[dict[str, Any]]:
        """Rules from JSON objects (the HTTP control), with the fields of add(): all of them,
        or, if any is bad, none (ValueError naming the first bad one)."""
        return self._install(parse_specs(specs, "fault", _rule_of_spec))

    def _install(self, rules: list[Rule]) -> list[dict[str, Any]]:
        for rule in rules:
            rule.id = next(self._ids)
            if rule.stall is not False:
                rule.released = asyncio.Event()
            self.rules.append(rule)
            log.info("fault %d added: %s", rule.id, rule.to_dict())
        self._changed()
        return [rule.to_dict() for rule in rules]

    def list(self) -> list[dict[str, Any]]:
        """The rules, oldest first, each with how often it has fired."""
        return [r.to_dict() for r in self.rules]

    def clear(self, rule_id: int | None = None) -> int:
        """Remove one rule, or all; stalled requests are released. How many were removed."""
        if rule_id is not None and (type(rule_id) is not int):
            raise ValueError(f"fault id must be an integer, not {rule_id!r}")
        gone = [r for r in self.rules if rule_id is None or r.id == rule_id]
        for rule in gone:
            self._remove(rule)
        return len(gone)

    def _remove(self, rule: Rule, release: bool = True) -> None:
        if rule in self.rules:
            self.rules.remove(rule)
            self._changed()
        if release and rule.released is not None:
            rule.released.set()

    def _spent(self, rule: Rule) -> None:
        """A rule has fired its last time. A stall stays listed, holding the requests it
        stalled, until cleared (or, with a timeout, until its last one goes on)."""
        if rule.released is None:
            self._remove(rule)

    # the request path ----------------------------------------------------------------------

    def intercept(self, ctx: RequestContext, request: Any, handler: Callable[..., Any]) -> Any:
        """None: no rule fires, the request is handled as usual. Else the result dispatch
        returns instead: an error body, or a coroutine giving the body later. Raises
        CloseConnection for a drop before the request is handled."""
        rule = self._firing(ctx, request)
        if rule is None:
            return None
        rule.fired += 1
        if rule.times is not None:
            rule.times -= 1
            if rule.times == 0:
                self._spent(rule)
        if rule.drop == "before" and not rule.delay_ms and rule.stall is False:
            raise CloseConnection(f"fault {rule.id}: connection dropped before {API_NAMES.get(rule.api_key)}")
        if rule.error is not None and not rule.delay_ms and rule.stall is False:
            return _failed(ctx, request, rule.id, rule.error)
        return _later(self, ctx, request, handler, rule)

    def _firing(self, ctx: RequestContext, request: Any) -> Rule | None:
        """The first rule that matches the request and, if it has a probability, draws it."""
        header = ctx.header
        for rule in self.rules:
            if rule.api_key != header.api_key or rule.times == 0:  # (0: a spent stall, still holding)
                continue
            if rule.client_id is not None and rule.client_id != header.client_id:
                continue
            if rule.broker is not None and rule.broker != broker_of(ctx):
                continue
            if rule.group is not None and rule.group not in groups_of(header.api_key, request):
                continue
            if rule.topic is not None and rule.topic not in topics_of(request, self.topic_name):
                continue
            if rule.probability is not None and (rule.rng or self.rng).random() >= rule.probability:
                continue
            return rule
        return None


def _rule(
    api: Any,
    error: Any = None,
    *,
    times: Any = 1,
    probability: Any = None,
    delay_ms: Any = 0,
    drop: Any = None,
    stall: Any = False,
    client_id: Any = None,
    group: Any = None,
    topic: Any = None,
    broker: Any = None,
    seed: Any = None,
) -> Rule:
    """A rule from its spec (the fields of FIELDS; add()'s defaults), checked field by field
    (its id is given when it is added)."""
    rule = Rule(
        0,
        api_key_of(api),
        _error(error),
        _times(times),
        _probability(probability),
        _non_negative_int("delay_ms", delay_ms),
        _drop(drop),
        _stall(stall),
        _optional_str("client_id", client_id),
        _optional_str("group", group),
        _optional_str("topic", topic),
        _broker(broker),
        seed,
        None if seed is None else random.Random(_int("seed", seed)),
    )
    if rule.error is None and rule.drop is None and not rule.delay_ms and rule.stall is False:
        raise ValueError("a fault needs an action: error, delay_ms, drop or stall")
    if rule.error is not None and rule.drop is not None:
        raise ValueError("error and drop exclude each other: a dropped connection carries no answer")
    return rule


def _rule_of_spec(spec: Any) -> Rule:
    return _rule(**check_spec(spec, "fault", FIELDS))


def _failed(ctx: RequestContext, request: Any, rule_id: int, error: ErrorCode) -> Any:
    key = ctx.header.api_key
    if key == PRODUCE and getattr(request, "acks", None) == 0:
        # acks=0: the producer reads no answer, so Kafka reports an error by closing
        raise CloseConnection(f"fault {rule_id}: {error.name.upper()} on a Produce with acks=0")
    return error_response(key, ctx.version, ctx.codec.response_type, request, error)


async def _later(faults: Faults, ctx: RequestContext, request: Any, handler: Callable[..., Any], rule: Rule) -> Any:
    """Stall or delay, then fail, drop, or handle the request (its reply lost if asked)."""
    if rule.stall is not False:
        timeout = None if rule.stall is True else rule.stall / 1000
        try:
            await asyncio.wait_for(rule.released.wait(), timeout)  # type: ignore[union-attr]  # a stalling rule always has its release event
        except asyncio.TimeoutError:
            if rule.times == 0:
                faults._remove(rule, release=False)  # (others it holds keep their own timeouts)
    if rule.delay_ms:
        await asyncio.sleep(rule.delay_ms / 1000)
    if rule.drop == "before":
        raise CloseConnection(f"fault {rule.id}: connection dropped before {API_NAMES.get(rule.api_key)}")
    if rule.error is not None:
        return _failed(ctx, request, rule.id, rule.error)
    body = await _handled(faults.handle, ctx, request, handler)
    if rule.drop == "after":
        # handled in full (written, committed), and the connection closes where its answer
        # would have gone: the client cannot tell whether it happened, and retries
        raise CloseConnection(f"fault {rule.id}: reply to {API_NAMES.get(rule.api_key)} lost")
    return body


async def _handled(handle: Handle, ctx: RequestContext, request: Any, handler: Callable[..., Any]) -> Any:
    """The request handled as dispatch would (the ACL gate first), its body whichever way
    the handler gives it."""
    inner = inner_context(ctx)
    result = handle(inner, request, handler)
    if result is LATER:
        if inner.body is UNANSWERED:
            await inner.connection.done
        return inner.body
    if is_coroutine(result) or isinstance(result, asyncio.Future):
        return await result
    return result


# what a request names ---------------------------------------------------------------------


def broker_of(ctx: RequestContext) -> int:
    """The node id of the broker that received the request."""
    return int(ctx.connection.listener.node_id)


def groups_of(api_key: int, request: Any) -> tuple[str, ...]:
    """The group ids a request names (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
    OffsetCommit, OffsetFetch, TxnOffsetCommit, AddOffsetsToTxn, the consumer, share and streams
    group heartbeats, OffsetDelete by `group_id`; the batched ones by their lists)."""
    group_id = getattr(request, "group_id", None)
    if type(group_id) is str:
        return (group_id,)
    if api_key == OFFSET_FETCH:  # v8+: several groups
        return tuple(g.group_id for g in getattr(request, "groups", None) or ())
    if api_key == DESCRIBE_GROUPS:
        return tuple(request.groups or ())
    if api_key == DELETE_GROUPS:
        return tuple(request.groups_names or ())
    if api_key in GROUP_DESCRIBES:  # consumer, share and streams groups: by their ids
        return tuple(request.group_ids or ())
    if api_key == FIND_COORDINATOR and getattr(request, "key_type", 0) == 0:  # 0: a group's coordinator
        keys = getattr(request, "coordinator_keys", None)
        return tuple(keys) if keys else (request.key,)
    return ()


def topics_of(request: Any, topic_name: Callable[[Any], str | None] = _no_topic_ids) -> set[str]:
    """The topic names a request names (by name or, from Fetch v13 and OffsetCommit v10,
    by topic id, which `topic_name` names)."""
    out: set[str] = set()
    for attr in ("topics", "topic_data", "topic_names", "v3_and_below_topics"):
        entries = getattr(request, attr, None)
        if entries:
            _add_topics(out, entries, topic_name)
    for nested in ("groups", "transactions"):  # OffsetFetch v8+, AddPartitionsToTxn v4+
        for entry in getattr(request, nested, None) or ():
            entries = getattr(entry, "topics", None)
            if entries:
                _add_topics(out, entries, topic_name)
    return out


def _add_topics(out: set[str], entries: Any, topic_name: Callable[[Any], str | None]) -> None:
    for entry in entries:
        if type(entry) is tuple:  # the hand-read OffsetCommit's (name or id, partition count)
            entry = entry[0]
        name = entry if isinstance(entry, str) else getattr(entry, "name", None) or getattr(entry, "topic", None)
        if name is None or not isinstance(name, str):
            name = topic_name(getattr(entry, "topic_id", entry))
        if name is not None:
            out.add(name)


# validation: one clear message per bad field ---------------------------------------------


def api_key_of(api: Any) -> int:
    if type(api) is int:
        if api not in API_NAMES:
            raise ValueError(f"api: no Kafka API has key {api}")
        return api
    if isinstance(api, str):
        key = _API_KEYS_FOLDED.get(api.replace("_", "").replace("-", "").lower())
        if key is None and api.isdigit():
            return api_key_of(int(api))
        if key is None:
            raise ValueError(f"api: unknown Kafka API {api!r} (a name like 'OffsetCommit', or its key)")
        return key
    raise ValueError(f"api must be a Kafka API name or key, not {api!r}")


def _error(error: Any) -> ErrorCode | None:
    if error is None:
        return None
    if type(error) is int or (isinstance(error, str) and error.lstrip("-").isdigit()):
        try:
            code = ErrorCode(int(error))
        except ValueError:
            raise ValueError(f"error: no Kafka error has code {error}") from None
    elif isinstance(error, str):
        named = ERRORS.get(error.upper().replace("-", "_"))
        if named is None:
            raise ValueError(f"error: unknown Kafka error {error!r} (a name like 'NOT_COORDINATOR', or its code)")
        code = named
    else:
        raise ValueError(f"error must be a Kafka error name or code, not {error!r}")
    if code == ErrorCode.none:
        raise ValueError("error: NONE (0) is no error; leave error out for a delay, drop or stall")
    return code


def _int(name: str, value: Any) -> int:
    if type(value) is not int:
        raise ValueError(f"{name} must be an integer, not {value!r}")
    return value


def _int_at_least(name: str, value: Any, low: int, also: str = "") -> int:
    n = _int(name, value)
    if n < low:
        raise ValueError(f"{name} must be >= {low}{also}, not {value}")
    return n


def _non_negative_int(name: str, value: Any) -> int:
    return _int_at_least(name, value, 0)


def _times(times: Any) -> int | None:
    return None if times is None else _int_at_least("times", times, 1, " (or null: until cleared)")


def _probability(p: Any) -> float | None:
    if p is None:
        return None
    if type(p) not in (int, float) or not 0 < p <= 1:
        raise ValueError(f"probability must be a number in (0, 1], not {p!r}")
    return float(p)


def _drop(drop: Any) -> str | None:
    if drop is None or drop is False:
        return None
    if drop not in DROPS:
        raise ValueError(f"drop must be 'before' or 'after', not {drop!r}")
    return cast(str, drop)


def _stall(stall: Any) -> bool | int:
    if stall is True or stall is False:
        return stall
    if type(stall) is not int or stall <= 0:
        raise ValueError(f"stall must be true (until cleared), false, or a timeout in ms > 0, not {stall!r}")
    return stall


def _optional_str(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    return value


def _broker(broker: Any) -> int | None:
    return None if broker is None else _int("broker", broker)
