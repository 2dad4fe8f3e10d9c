"""Where ACLs are checked (Kafka's KafkaApis authorize calls), in front of the handlers.

With `--authorizer` every request passes here before its handler: a request the principal
may not make at all is answered with Kafka's error for it (GROUP_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED); for requests naming
several topics or groups, the denied ones are taken out of the request, the handler
serves the rest, and the denied ones come back with their error
(TOPIC_AUTHORIZATION_FAILED, ...) in the same response. Without `--authorizer` nothing
here runs. Topics listed without being named (Metadata, OffsetFetch and ListGroups for
"all") are filtered to what the principal may DESCRIBE, as Kafka does.

Each API's rule is one entry of RULES (at the end), run by AclGate.check: the checks on the
request as a whole (Whole), then on each entry it names (Each: where denied entries go in
the answer) and on the rows of the answer (Visible, nested for OffsetFetch's groups of
topics). An entry may itself be a request with entries (Each.inner: DescribeShareGroupOffsets'
groups of topics); where a request's entries are not one field of a kio entity, a Shape says
where they are (OffsetCommit's hand-written codec, DescribeTopicPartitions' page of topics).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader

from protocol.error_response import error_response
from protocol.wire import Raw
from protocol.offset_commit import resolve_topic_ids, write_response_to

from ..groups.streams.streams_api import heartbeat_error as streams_heartbeat_error
from ..transactions.coordinator import no_transaction_state
from ..broker.log_dirs import alter_log_dirs_answer
from ..share.offsets_api import deleted_offsets_row
from ..apis import LATER, UNANSWERED, BuiltWhenSent, RequestContext, errors_by_topic, inner_context, nested_type
from .acls import (
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    Authorizer,
)

# DescribeConfigs / AlterConfigs resource types
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS = 2, 4, 8, 16
ZERO_UUID = uuid.UUID(int=0)

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = (
    E.topic_authorization_failed,
    E.group_authorization_failed,
    E.cluster_authorization_failed,
    E.transactional_id_authorization_failed,
)

# A request refused on the cluster is answered with its error response (Kafka's
# getErrorResponse with Errors.CLUSTER_AUTHORIZATION_FAILED's bare exception, whose default
# message ApiError.fromThrowable leaves out of the error messages)...
# ... and, for these, differs from the generic one as follows (fields of the answer's version).
_CLUSTER_DENIED_DEPARTS: dict[int, Callable[[Any], dict[str, Any]]] = {
    45: lambda req: {"allow_replication_factor_change": getattr(req, "allow_replication_factor_change", True)},
    46: lambda req: {"topics": ()},  # ListPartitionReassignments: no topic named back
    60: lambda req: {"endpoint_type": getattr(req, "endpoint_type", 1)},  # DescribeCluster
}


# X.500 attribute names as Java's X500Principal.getName() (RFC 2253) writes them
_RDN_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def principal_of(conn: Any) -> str:
    """Kafka's default principal: the SASL user; else, on TLS with a client certificate, its
    subject's distinguished name as RFC 2253 writes it (`User:CN=app,O=acme`); else ANONYMOUS."""
    sasl = getattr(conn, "sasl", None)
    if sasl is not None and sasl.user:
        return f"User:{sasl.user}"
    transport = getattr(conn, "transport", None)
    cert = transport.get_extra_info("peercert") if transport is not None else None
    if cert and cert.get("subject"):
        return "User:" + ",".join(
            "+".join(f"{_RDN_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in reversed(cert["subject"])
        )
    return "User:ANONYMOUS"


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out


async def _body_of(handler: Callable[..., Any], ctx: RequestContext, req: Any) -> Any:
    """Run the handler on `req` and return its response as an object (whatever way it answers)."""
    inner = inner_context(ctx)
    result = handler(inner, req)
    if result is LATER:
        if inner.body is UNANSWERED:
            await inner.connection.done
        result = inner.body
    elif asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
        result = await result
    if type(result) is BuiltWhenSent:
        result = result.build()
    if type(result) is Raw:
        result, _ = entity_reader(ctx.codec.response_type)(bytes(result), 0)
    return result


# The mechanism ---------------------------------------------------------------------------
#
# Each API's authorization is a Rule in RULES (Kafka's KafkaApis / AuthHelper calls, as
# data): the resources the request names as a whole, and those its entries name one by one.
# A resource is (resource type, name); the error a denial gets is the resource type's
# (DENIED). What extracts resources, and what a denied answer or entry looks like, are the
# small functions below the mechanism.

Resource = tuple[int, str]
Handler = Callable[..., Any]
# (gate, ctx, request or entry, error) -> an answer or a response entry
Builder = Callable[["AclGate", RequestContext, Any, E], Any]

DENIED = {TOPIC: TOPIC_DENIED, GROUP: GROUP_DENIED, CLUSTER: CLUSTER_DENIED, TRANSACTIONAL_ID: TXN_DENIED}

IN_ORDER, IN_PLACE, AFTER, BEFORE = "in order", "in place", "after", "before"


def _fields_empty(ctx: RequestContext, each: Each) -> Any:
    return ctx.response(throttle_time=0, error_code=E.none, **{each.out: ()})


@dataclass(frozen=True)
class Shape:
    """How Each reads a request's entries and an answer's rows, and builds them again. The
    default: kio entities, the entries in the request's field `items`, the rows in the answer's
    field `out`. `view`: the request as its entries are checked (OffsetCommit v10: its topic
    ids resolved to names); `narrowed`: that request with only the allowed entries; `empty`:
    the answer when no entry is left to ask the handler about."""

    view: Callable[[AclGate, RequestContext, Any], Any] = lambda gate, ctx, req: req
    entries: Callable[[AclGate, Any, Each], Iterable[Any]] = lambda gate, req, each: getattr(req, each.items) or ()
    narrowed: Callable[[RequestContext, Any, tuple[Any, ...], Each], Any] = lambda ctx, req, allowed, each: (
        dataclasses.replace(req, **{each.items: allowed})
    )
    rows: Callable[[Any, Any, Each], Iterable[Any]] = lambda asked, body, each: getattr(body, each.out)
    answer: Callable[[RequestContext, Any, Any, tuple[Any, ...], Each], Any] = lambda ctx, req, body, rows, each: (
        dataclasses.replace(body, **{each.out: rows})
    )
    empty: Callable[[RequestContext, Each], Any] = _fields_empty


FIELDS = Shape()


@dataclass(frozen=True)
class Whole:
    """The request as a whole needs `operation` on every resource `resources` finds in it (none:
    nothing to check); one denied, the request is answered refusal(gate, ctx, req, its error)."""

    operation: int
    resources: Callable[[AclGate, RequestContext, Any], Iterable[Resource]]
    refusal: Builder


@dataclass(frozen=True)
class Each:
    """The entries of req.<items> each need `operation` on the resource `resource` finds in the
    entry (None: the handler answers it, e.g. an unknown topic id): a denied one is left out of
    the handler's request and answered row(gate, ctx, entry, error) in response.<out> (None, or
    not `answered` for this request: left out of the answer too, as a topic of "all topics"),
    where `place` says: IN_ORDER (the request's order; `key` / `served_key` pair an entry with
    the handler's row), IN_PLACE (the handler answers the entries it got in their order),
    AFTER or BEFORE the rows the handler served. `shape`: where entries and rows are.

    `inner`: each allowed entry is itself a request checked by that rule (its own entries, its
    visible rows), whose answer is the handler's row for it (IN_ORDER, IN_PLACE); so a group's topics
    (DescribeShareGroupOffsets). There the entry always goes to the handler, and `error_wins`
    means the row's own error."""

    items: str
    out: str
    operation: int
    resource: Callable[[AclGate, RequestContext, Any, Any], Resource | None]  # (gate, ctx, req, entry)
    row: Builder
    place: str = IN_ORDER
    key: Callable[[Any], Any] = lambda entry: entry
    served_key: Callable[[Any], Any] = lambda row: row
    ask_empty: bool = False  # the handler is asked even with no entry left (its own checks run)
    error_wins: bool = False  # a top-level error in the handler's answer is the whole answer
    quiet: Callable[[Any], bool] = lambda req: False  # no answer is sent (Produce with acks=0)
    answered: Callable[[Any], bool] = lambda req: True
    shape: Shape = FIELDS
    inner: Rule | None = None


@dataclass(frozen=True)
class Visible:
    """The handler's response.<out> keeps the rows whose resource (`resource` of the row; None:
    not checked) the principal may DESCRIBE; another becomes hidden(ctx, req, row), or goes
    where that is None. `inner`: a kept row's own list is checked the same way, against the
    request's entry that row answers (asked(req, row)), as OffsetFetch's groups' topics."""

    out: str
    resource: Callable[[AclGate, RequestContext, Any], Resource | None]
    hidden: Callable[[RequestContext, Any, Any], Any] = lambda ctx, req, row: None
    inner: Visible | None = None
    asked: Callable[[Any, Any], Any] = lambda req, row: req


@dataclass(frozen=True)
class Rule:
    """An API's authorization: `unless` allowed (a whole-cluster right that covers every entry),
    the `whole` checks in order, then the entries (`each`) and the visible rows (`visible`)."""

    whole: tuple[Whole, ...] = ()
    each: Each | None = None
    visible: Visible | None = None
    unless: Whole | None = None


# What the checks of a request's entries make of it: the request the handler gets (None: the
# handler is not asked) and what turns the handler's answer (None if not asked) into the answer.
Plan = tuple[Any, Callable[[Any], Any]]


class AclGate:
    def __init__(self, authorizer: Authorizer, topics: Any) -> None:
        self.authorizer = authorizer
        self.topics = topics

    def check(self, ctx: RequestContext, req: Any, handler: Handler) -> Any:
        """None: the handler runs as usual; else the result to answer with (an object or a coroutine)."""
        rule = rule_for(ctx.header.api_key, ctx.version)
        if rule is None:
            return None
        if rule.unless is not None and self._denial(ctx, req, rule.unless) is None:
            return None
        for whole in rule.whole:
            error = self._denial(ctx, req, whole)
            if error is not None:
                return whole.refusal(self, ctx, req, error)
        plan = self._plan(ctx, req, rule)
        if plan is None:
            return None
        return _answered(ctx, handler, *plan)

    def can(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
        return self.authorizer.allowed(principal_of(ctx.connection), ctx.client_host, operation, resource_type, name)

    def allows(self, ctx: RequestContext, operation: int, resource: Resource | None) -> bool:
        return resource is None or self.can(ctx, operation, *resource)

    def _denial(self, ctx: RequestContext, req: Any, whole: Whole) -> E | None:
        for kind, name in whole.resources(self, ctx, req):
            if not self.can(ctx, whole.operation, kind, name):
                return DENIED[kind]
        return None

    def _plan(self, ctx: RequestContext, req: Any, rule: Rule, nested: bool = False) -> Plan | None:
        """None: the request goes to the handler as it is and its answer is the answer."""
        plan = self._plan_each(ctx, req, rule.each, nested) if rule.each is not None else None
        visible = rule.visible
        if visible is None:
            return plan
        # (the rows served are filtered, then the denied entries' rows added)
        asked, merge = plan or (req, _as_is)
        return asked, lambda body: merge(body if body is None else self._shown(ctx, req, body, visible))

    def _plan_each(self, ctx: RequestContext, req: Any, each: Each, nested: bool) -> Plan | None:
        shape = each.shape
        view = shape.view(self, ctx, req)
        items = tuple(shape.entries(self, view, each))
        verdicts: dict[Resource, bool] = {}  # (a resource named many times is asked once)
        refused: list[Any] = []  # per entry: None (allowed), its denied row, or _LEFT_OUT
        inner: list[Plan | None] = []  # per entry: an allowed one's own plan (Each.inner)
        for item in items:
            resource = each.resource(self, ctx, view, item)
            allowed = True
            if resource is not None:
                known = verdicts.get(resource)
                allowed = verdicts[resource] = self.can(ctx, each.operation, *resource) if known is None else known
            if allowed:
                refused.append(None)
                inner.append(self._plan(ctx, item, each.inner, True) if each.inner is not None else None)
            else:
                row = each.row(self, ctx, item, DENIED[resource[0]]) if resource and each.answered(view) else None
                refused.append(_LEFT_OUT if row is None else row)
                inner.append(None)
        if all(row is None for row in refused) and not any(inner):
            return None
        asked = tuple(
            item if plan is None else plan[0] for item, row, plan in zip(items, refused, inner) if row is None
        )
        denied = tuple(row for row in refused if row is not None and row is not _LEFT_OUT)

        def merge(body: Any) -> Any:
            if body is None:
                body = shape.empty(ctx, each)
            elif each.error_wins and body.error_code:
                return body
            if each.quiet(view):
                return None
            served = tuple(shape.rows(request, body, each))
            if each.place == AFTER:
                answer = served + denied
            elif each.place == BEFORE:
                answer = denied + served
            else:
                in_turn = iter(served)
                by_key = {each.served_key(row): row for row in served} if each.place == IN_ORDER else {}
                rows = []
                for item, row, plan in zip(items, refused, inner):
                    if row is None:
                        row = next(in_turn) if each.place == IN_PLACE else by_key[each.key(item)]
                        row = row if plan is None else plan[1](row)
                    if row is not _LEFT_OUT:
                        rows.append(row)
                answer = tuple(rows)
            return shape.answer(ctx, view, body, answer, each)

        if not (asked or each.ask_empty or nested):
            request = None
            return None, merge
        request = shape.narrowed(ctx, view, asked, each)
        return request, merge

    def _shown(self, ctx: RequestContext, req: Any, body: Any, visible: Visible) -> Any:
        rows = []
        for row in getattr(body, visible.out):
            if self.allows(ctx, DESCRIBE, visible.resource(self, ctx, row)):
                if visible.inner is not None:
                    row = self._shown(ctx, visible.asked(req, row), row, visible.inner)
                rows.append(row)
            elif (shown := visible.hidden(ctx, req, row)) is not None:
                rows.append(shown)
        return dataclasses.replace(body, **{visible.out: tuple(rows)})

    def name_by_id(self, topic_id: Any) -> str | None:
        info = self.topics.by_id.get(topic_id)
        return info.name if info is not None else None

    def offsets_topic_name(self, topic: Any) -> str | None:
        """An offset request's or response's topic entry's name; by its id from v10 on (None: no such topic)."""
        name = getattr(topic, "name", None)
        if name is None and getattr(topic, "topic_id", None) is not None:
            name = self.name_by_id(topic.topic_id)
        return name


_LEFT_OUT = object()  # a denied entry with no place in the answer


def _as_is(body: Any) -> Any:
    return body


async def _answered(ctx: RequestContext, handler: Handler, asked: Any, merge: Callable[[Any], Any]) -> Any:
    """The answer of a request some of whose entries were denied: the handler's to what is
    left of it (`asked`; None: the handler is not asked), merged with the denied ones."""
    return merge(None if asked is None else await _body_of(handler, ctx, asked))


# Resources: what a request or an entry names ----------------------------------------------


def _named(
    kind: int, field: str, empty_names: bool = True
) -> Callable[[AclGate, RequestContext, Any], Iterable[Resource]]:
    """The resource of `kind` the request's `field` names (none when null or absent from the
    version, or empty unless `empty_names`)."""

    def resources(gate: AclGate, ctx: RequestContext, req: Any) -> Iterable[Resource]:
        name = getattr(req, field, None)
        return () if name is None or (not name and not empty_names) else ((kind, name),)

    return resources


def _entry(kind: int, field: str | None = "name") -> Callable[[AclGate, RequestContext, Any, Any], Resource | None]:
    """The resource of `kind` an entry's `field` names (the entry itself for None: a bare name)."""
    if field is None:
        return lambda gate, ctx, req, entry: (kind, entry or "")
    return lambda gate, ctx, req, entry: (kind, getattr(entry, field) or "")


def _the_cluster(gate: AclGate, ctx: RequestContext, req: Any) -> Iterable[Resource]:
    return ((CLUSTER, CLUSTER_NAME),)


def _group_of(req: Any) -> str:
    return req.group_id or ""


def _group(gate: AclGate, ctx: RequestContext, req: Any) -> Iterable[Resource]:
    return ((GROUP, _group_of(req)),)


def _coordinator_kind(req: Any) -> int:
    """FindCoordinator's key: a transactional id (key type 1) or a group."""
    return TRANSACTIONAL_ID if getattr(req, "key_type", 0) == 1 else GROUP


def _topic_by_id(gate: AclGate, ctx: RequestContext, req: Any, t: Any) -> Resource | None:
    """A topic named by id (ShareFetch, Produce v13): an unknown id is the handler's UNKNOWN_TOPIC_ID."""
    name = gate.name_by_id(t.topic_id)
    return None if name is None else (TOPIC, name)


def _produce_topic(gate: AclGate, ctx: RequestContext, req: Any, t: Any) -> Resource | None:
    return _topic_by_id(gate, ctx, req, t) if ctx.version >= 13 else (TOPIC, t.name)


def _offsets_topic(gate: AclGate, ctx: RequestContext, req: Any, t: Any) -> Resource | None:
    """A topic by name, or by id (TxnOffsetCommit v6): an id no topic has is not denied, the
    handler answers it UNKNOWN_TOPIC_ID, as Kafka does before authorizing."""
    name = gate.offsets_topic_name(t)
    return None if name is None else (TOPIC, name)


def _fetch_topic(gate: AclGate, ctx: RequestContext, req: Any, t: Any) -> Resource:
    """(v13 names topics by id: an unknown one is checked as the empty name, as Fetch did)"""
    if ctx.version >= 13 and getattr(t, "topic_id", None) is not None:
        return TOPIC, gate.name_by_id(t.topic_id) or ""
    return TOPIC, t.topic


def _config_resource(gate: AclGate, ctx: RequestContext, req: Any, r: Any) -> Resource | None:
    if r.resource_type == CONFIG_TOPIC:
        return TOPIC, r.resource_name
    if r.resource_type in (CONFIG_BROKER, CONFIG_BROKER_LOGGER, CONFIG_CLIENT_METRICS):
        return (
            CLUSTER,
            CLUSTER_NAME,
        )  # (a client-metrics subscription is the cluster's, as ConfigAdminManager checks it)
    return None


def _heartbeat_topics(gate: AclGate, ctx: RequestContext, req: Any) -> Iterable[Resource]:
    """ShareGroupHeartbeat: the topics the member subscribes to, when it names them."""
    return ((TOPIC, n) for n in set(req.subscribed_topic_names or ()))


def _topology_topics(gate: AclGate, ctx: RequestContext, req: Any) -> Iterable[Resource]:
    """StreamsGroupHeartbeat: every topic a joining member's topology reads or writes."""
    names: set[str] = set()
    for s in req.topology.subtopologies if req.topology is not None else ():
        names.update(s.source_topics)
        names.update(s.repartition_sink_topics)
        names.update(t.name for t in (*s.repartition_source_topics, *s.state_changelog_topics))
    return ((TOPIC, n) for n in names)


def _add_partitions_topics(gate: AclGate, ctx: RequestContext, req: Any) -> Iterable[Resource]:
    return ((TOPIC, t.name) for t in req.v3_and_below_topics)


def _described(kind: int, field: str) -> Callable[[AclGate, RequestContext, Any], Resource]:
    """A response row's resource, for Visible."""
    return lambda gate, ctx, row: (kind, getattr(row, field) or "")


# Refusals: the answer to a request denied as a whole --------------------------------------


def _error_response(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    """Kafka's getErrorResponse (with CLUSTER_AUTHORIZATION_FAILED's bare exception, whose default
    message ApiError.fromThrowable leaves out of the error messages) and, for the APIs in
    _CLUSTER_DENIED_DEPARTS, what differs from it."""
    key = ctx.header.api_key
    body = error_response(key, ctx.version, ctx.codec.response_type, req, error)
    departure = _CLUSTER_DENIED_DEPARTS.get(key)
    if departure is None:
        return body
    values = {k: v for k, v in departure(req).items() if hasattr(body, k)}
    return dataclasses.replace(body, **values)


def _group_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    """JoinGroup, Heartbeat, LeaveGroup, SyncGroup, ConsumerGroupHeartbeat."""
    return ctx.response(
        throttle_time=0,
        error_code=error,
        generation_id=-1,
        protocol_name=None,
        leader="",
        member_id=getattr(req, "member_id", "") or "",
        members=(),
        assignment=None if ctx.header.api_key == 68 else b"",
        member_epoch=-1,
        heartbeat_interval=0,
    )


def _share_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    """ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, Alter/DeleteShareGroupOffsets."""
    return ctx.response(
        throttle_time=0,
        error_code=error,
        error_message=None,
        member_id=getattr(req, "member_id", None),
        member_epoch=-1,
        heartbeat_interval=0,
        acquisition_lock_timeout=0,
        responses=(),
        node_endpoints=(),
    )


def _share_heartbeat_topics_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    """As KafkaApis.handleShareGroupHeartbeat: the error and nothing else set."""
    return ctx.response(
        throttle_time=0,
        error_code=error,
        error_message=None,
        member_id=None,
        member_epoch=0,
        heartbeat_interval=0,
        assignment=None,
    )


def _streams_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    return streams_heartbeat_error(ctx, error)


def _txn_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    """EndTxn, InitProducerId, AddOffsetsToTxn."""
    return ctx.response(throttle_time=0, error_code=error, producer_id=-1, producer_epoch=-1)


def _log_dirs_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    """AlterReplicaLogDirs without ALTER on the cluster: every partition asked refused (each once,
    in the order asked)."""
    by_topic: dict[str, dict[int, E]] = {}
    for d in req.dirs:
        for t in d.topics:
            by_topic.setdefault(t.name, {}).update(dict.fromkeys(t.partitions, error))
    return alter_log_dirs_answer(ctx, by_topic)


def _no_log_dirs(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    """As KafkaApis.handleDescribeLogDirsRequest answers (not its getErrorResponse)."""
    return ctx.response(throttle_time=0, error_code=error, results=())


def _no_coordinator(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    return ctx.response(throttle_time=0, error_code=error, error_message=None, node_id=-1, host="", port=-1)


def _offset_commit_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    return write_response_to(req, ctx.version, [error] * len(req.partitions))


def _no_offsets_deleted(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    return ctx.response(throttle_time=0, error_code=error, topics=())


def _produce_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    return ctx.response(throttle_time=0, responses=tuple(_produce_row(gate, ctx, t, error) for t in req.topic_data))


def _txn_commit_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    return ctx.response(throttle_time=0, topics=tuple(_txn_commit_row(gate, ctx, t, error) for t in req.topics))


def _add_partitions_refused(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    """AddPartitionsToTxn v0-3: as Kafka, with a denied topic the others are OPERATION_NOT_ATTEMPTED."""
    topics = req.v3_and_below_topics

    def error_of(name: str) -> E:
        if error != TOPIC_DENIED or not gate.can(ctx, WRITE, TOPIC, name):
            return error
        return E.operation_not_attempted

    results = errors_by_topic(
        ctx,
        "AddPartitionsToTxnTopicResult",
        "AddPartitionsToTxnPartitionResult",
        ((t.name, [(p, error_of(t.name)) for p in t.partitions]) for t in topics),
        partitions="results_by_partition",
        error="partition_error_code",
    )
    return ctx.response(throttle_time=0, results_by_topic_v3_and_below=results)


# Rows: a denied entry's place in the answer -----------------------------------------------


def _each_partition(
    topic: str,
    partition: str,
    *,
    named: Callable[[RequestContext, Any], dict[str, Any]] = lambda ctx, t: {"name": t.name},
    partitions: str = "partitions",
    index: Callable[[Any], int] = lambda p: p.partition_index,
    out: tuple[str, str] = ("partitions", "partition_index"),
    **failed: Any,
) -> Builder:
    """A denied topic entry answered with each of its partitions failed: a `topic` entity named as
    the request named it (`named`), its `out[0]` list holding a `partition` entity per partition
    of the entry's `partitions` list (index(p) as out[1]), with the error and the `failed` values."""
    rows, index_field = out

    def row(gate: AclGate, ctx: RequestContext, t: Any, error: E) -> Any:
        return ctx.nested(
            topic,
            **named(ctx, t),
            **{
                rows: tuple(
                    ctx.nested(partition, **{index_field: index(p)}, error_code=error, **failed)
                    for p in getattr(t, partitions)
                )
            },
        )

    return row


_produce_row = _each_partition(  # by id from v13
    "TopicProduceResponse",
    "PartitionProduceResponse",
    named=lambda ctx, t: {"topic_id": t.topic_id} if ctx.version >= 13 else {"name": t.name},
    partitions="partition_data",
    index=lambda p: p.index,
    out=("partition_responses", "index"),
    base_offset=-1,
    log_append_time=None,
    log_start_offset=-1,
    record_errors=(),
    error_message=None,
)
_fetch_row = _each_partition(
    "FetchableTopicResponse",
    "PartitionData",
    named=lambda ctx, t: {"topic_id": t.topic_id} if ctx.version >= 13 else {"topic": t.topic},  # by id from v13
    index=lambda p: p.partition,
    high_watermark=-1,
    last_stable_offset=-1,
    log_start_offset=-1,
    aborted_transactions=None,
    preferred_read_replica=-1,
    records=b"",
)
_list_offsets_row = _each_partition(
    "ListOffsetsTopicResponse", "ListOffsetsPartitionResponse", timestamp=-1, offset=-1, leader_epoch=-1
)
_delete_records_row = _each_partition("DeleteRecordsTopicResult", "DeleteRecordsPartitionResult", low_watermark=-1)
_offset_delete_row = _each_partition("OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition")
_producers_row = _each_partition(
    "TopicResponse",
    "PartitionResponse",
    partitions="partition_indexes",
    index=lambda p: p,
    error_message=None,
    active_producers=(),
)
_txn_commit_row = _each_partition(  # by id from v6
    "TxnOffsetCommitResponseTopic",
    "TxnOffsetCommitResponsePartition",
    named=lambda ctx, t: {"topic_id": t.topic_id} if ctx.version >= 6 else {"name": t.name},
)


def _coordinator_row(gate: AclGate, ctx: RequestContext, key: str, error: E) -> Any:
    return ctx.nested("Coordinator", key=key, node_id=-1, host="", port=-1, error_code=error, error_message=None)


def _described_group_row(gate: AclGate, ctx: RequestContext, group_id: str, error: E) -> Any:
    """DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe (each
    version has the fields it has)."""
    return ctx.nested(
        "DescribedGroup",
        error_code=error,
        error_message=None,
        group_id=group_id,
        group_state="",
        protocol_type="",
        protocol_data="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=(),
        authorized_operations=-(2**31),
    )


def _deleted_group_row(gate: AclGate, ctx: RequestContext, group_id: str, error: E) -> Any:
    return ctx.nested("DeletableGroupResult", group_id=group_id, error_code=error)


def _created_topic_row(gate: AclGate, ctx: RequestContext, t: Any, error: E) -> Any:
    return ctx.nested(
        "CreatableTopicResult",
        name=t.name,
        topic_id=None,
        error_code=error,
        error_message=None,
        topic_config_error_code=error,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


def _deleted_topic_row(gate: AclGate, ctx: RequestContext, t: Any, error: E) -> Any:
    name = t if isinstance(t, str) else t.name  # (v0-5 name topics as bare strings)
    return ctx.nested("DeletableTopicResult", name=name, topic_id=None, error_code=error, error_message=None)


def _config_row(gate: AclGate, ctx: RequestContext, r: Any, error: E) -> Any:
    return ctx.nested(
        "DescribeConfigsResult" if ctx.header.api_key == 32 else "AlterConfigsResourceResponse",
        error_code=error,
        error_message=None,
        resource_type=r.resource_type,
        resource_name=r.resource_name,
        configs=(),
    )


def _create_partitions_row(gate: AclGate, ctx: RequestContext, t: Any, error: E) -> Any:
    return ctx.nested("CreatePartitionsTopicResult", name=t.name, error_code=error, error_message=None)


def _transaction_row(gate: AclGate, ctx: RequestContext, txn_id: str, error: E) -> Any:
    return no_transaction_state(ctx, txn_id, error)


def _share_row(gate: AclGate, ctx: RequestContext, t: Any, error: E) -> Any:
    """ShareFetch's topic, or ShareAcknowledge's (whose partitions have no records nor
    acknowledgement error: those fields are not in its version)."""
    return ctx.nested(
        "ShareFetchableTopicResponse" if ctx.header.api_key == 78 else "ShareAcknowledgeTopicResponse",
        topic_id=t.topic_id,
        partitions=tuple(
            ctx.nested(
                "PartitionData",
                partition_index=p.partition_index,
                error_code=error,
                acknowledge_error_code=error if p.acknowledgement_batches else 0,
                current_leader=ctx.nested("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1),
                records=b"",
                acquired_records=(),
            )
            for p in t.partitions
        ),
    )


_TOPIC_DENIED_MESSAGE = "Topic authorization failed."


def _alter_share_offsets_row(gate: AclGate, ctx: RequestContext, t: Any, error: E) -> Any:
    info = gate.topics.get(t.topic_name)
    return ctx.nested(
        "AlterShareGroupOffsetsResponseTopic",
        topic_name=t.topic_name,
        topic_id=info.topic_id if info is not None else ZERO_UUID,
        partitions=tuple(
            ctx.nested(
                "AlterShareGroupOffsetsResponsePartition",
                partition_index=p.partition_index,
                error_code=error,
                error_message=_TOPIC_DENIED_MESSAGE,
            )
            for p in t.partitions
        ),
    )


def _delete_share_offsets_row(gate: AclGate, ctx: RequestContext, t: Any, error: E) -> Any:
    return deleted_offsets_row(ctx, t, ZERO_UUID, error, _TOPIC_DENIED_MESSAGE)


def _no_offsets(gate: AclGate, ctx: RequestContext, req: Any, error: E) -> Any:
    return ctx.response(throttle_time=0, topics=(), error_code=error)


def _offsets_group_hidden(ctx: RequestContext, req: Any, g: Any) -> Any:
    return dataclasses.replace(g, topics=(), error_code=GROUP_DENIED)


def _offsets_topic_hidden(ctx: RequestContext, asked: Any, t: Any) -> Any:
    """A topic the OffsetFetch (or its group, `asked`) named: each partition TOPIC_AUTHORIZATION_FAILED."""
    if asked is None or asked.topics is None:
        return None
    return dataclasses.replace(
        t,
        partitions=tuple(
            dataclasses.replace(p, committed_offset=-1, metadata="", error_code=TOPIC_DENIED) for p in t.partitions
        ),
    )


def _metadata_hidden(ctx: RequestContext, req: Any, t: Any) -> Any:
    """A topic asked by name is answered with the error, not hidden; one of all topics is hidden."""
    if req.topics is not None and (ctx.version > 0 or req.topics):
        return dataclasses.replace(t, error_code=TOPIC_DENIED, partitions=())
    return None


# Shapes: requests and answers whose entries are not one field of a kio entity ------------


def _commit_view(gate: AclGate, ctx: RequestContext, req: Any) -> Any:
    """OffsetCommit v10 names topics by id: checked by the names they resolve to (an unknown
    id is not authorized: the handler answers it UNKNOWN_TOPIC_ID)."""
    return resolve_topic_ids(req, gate.name_by_id) if ctx.version >= 10 else req


def _commit_narrowed(ctx: RequestContext, req: Any, allowed: tuple[Any, ...], each: Each) -> Any:
    """The allowed partitions, and the topics (and v10's ids) of the request less the denied ones."""
    kept = {p[0] for p in allowed}
    denied = {p[0] for p in req.partitions} - kept
    return req._replace(
        partitions=list(allowed),
        topics=[t for t in req.topics if t[0] not in denied],
        topic_ids=None
        if req.topic_ids is None
        else [i for i, t in zip(req.topic_ids, req.topics) if t[0] not in denied],
    )


# OffsetCommit's request and answer are the hand-written codec's (protocol.offset_commit): the
# entries are its partitions as (topic, ...) tuples, the rows one error per partition, from
# which the answer is written.
_COMMIT = Shape(
    view=_commit_view,
    entries=lambda gate, req, each: req.partitions,
    narrowed=_commit_narrowed,
    rows=lambda asked, body, each: () if body is None else _commit_errors(asked, body),
    answer=lambda ctx, req, body, rows, each: write_response_to(req, ctx.version, list(rows), True),
    empty=lambda ctx, each: None,
)


def _commit_errors(asked: Any, body: Any) -> list[int]:
    """The handler's error for each partition it was asked, in the request's order (its answer
    puts the partitions refused before the group coordinator first, as Kafka's)."""
    by_id = asked.topic_ids is not None  # (v10 answers name topics by id)
    answered: dict[tuple[Any, int], list[int]] = {}
    for t in body.topics:
        for p in t.partitions:
            answered.setdefault((t.topic_id if by_id else t.name, p.partition_index), []).append(p.error_code)
    keys = asked.topic_ids if by_id else [name for name, _ in asked.topics]
    errors = []
    at = 0
    for key, (_, n) in zip(keys, asked.topics):
        for p in asked.partitions[at : at + n]:
            errors.append(answered[(key, p.partition)].pop(0))
        at += n
    return errors


def _commit_topic(gate: AclGate, ctx: RequestContext, req: Any, p: Any) -> Resource | None:
    return (TOPIC, p[0]) if type(p[0]) is str else None  # (an unresolved id: the handler's)


def _page_names(gate: AclGate, req: Any, each: Each) -> Iterable[str]:
    """DescribeTopicPartitions: the topics of the page from the cursor's on (those named, or all);
    none when the cursor names a topic not asked (the handler refuses the request)."""
    cursor = req.cursor
    names = sorted({t.name for t in req.topics}) if req.topics else sorted(gate.topics.topics)
    if req.topics and cursor is not None and cursor.topic_name not in names:
        return ()
    start = cursor.topic_name if cursor is not None else ""
    return [n for n in names if n >= start]


def _page_narrowed(ctx: RequestContext, req: Any, allowed: tuple[Any, ...], each: Each) -> Any:
    """The allowed topics by name; the cursor on a denied topic: the page starts at the next."""
    make = nested_type(ctx.codec.request_type, "TopicRequest")
    cursor = req.cursor if req.cursor is not None and req.cursor.topic_name in allowed else None
    return dataclasses.replace(req, topics=tuple(make(name=n) for n in allowed), cursor=cursor)


# With all topics asked, the denied ones are left out before the page is cut (a named one
# denied is answered after the page), as DescribeTopicPartitionsRequestHandler does.
_PAGE = Shape(
    entries=_page_names,
    narrowed=_page_narrowed,
    empty=lambda ctx, each: ctx.response(throttle_time=0, topics=(), next_cursor=None),
)


def _page_row(gate: AclGate, ctx: RequestContext, name: str, error: E) -> Any:
    return ctx.nested(
        "DescribeTopicPartitionsResponseTopic",
        error_code=error,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=-(2**31),
    )


def _share_offsets_group_row(gate: AclGate, ctx: RequestContext, g: Any, error: E) -> Any:
    return ctx.nested(
        "DescribeShareGroupOffsetsResponseGroup", group_id=g.group_id, topics=(), error_code=error, error_message=None
    )


def _share_offsets_topic_row(gate: AclGate, ctx: RequestContext, t: Any, error: E) -> Any:
    return ctx.nested(
        "DescribeShareGroupOffsetsResponseTopic",
        topic_name=t.topic_name,
        topic_id=ZERO_UUID,
        partitions=tuple(
            ctx.nested(
                "DescribeShareGroupOffsetsResponsePartition",
                partition_index=p,
                start_offset=-1,
                leader_epoch=0,
                lag=-1,
                error_code=error,
                error_message=_TOPIC_DENIED_MESSAGE,
            )
            for p in t.partitions
        ),
    )


# The table: each API's rule, as KafkaApis authorizes it -----------------------------------


def _cluster(operation: int, refusal: Builder = _error_response) -> Rule:
    """`operation` on the cluster, else the request's error response with CLUSTER_AUTHORIZATION_FAILED."""
    return Rule(whole=(Whole(operation, _the_cluster, refusal),))


_GROUP_READ = Rule(whole=(Whole(READ, _group, _group_refused),))


def _share_group(operation: int, each: Each | None = None) -> Rule:
    """KIP-932 share groups: `operation` on the group, then the topics (`each`)."""
    return Rule(whole=(Whole(operation, _group, _share_refused),), each=each)


def _share_offsets(row: Builder) -> Each:
    """Alter/DeleteShareGroupOffsets: READ on each topic; the denied ones ahead of those served."""
    return Each("topics", "responses", READ, _entry(TOPIC, "topic_name"), row, BEFORE, ask_empty=True, error_wins=True)


def _in_order(
    items: str, out: str, operation: int, kind: int, row: Builder, served_key: str, place: str = IN_ORDER
) -> Each:
    """Entries that are names (group ids, transactional ids, coordinator keys), answered in order
    (or `place`)."""
    return Each(
        items,
        out,
        operation,
        _entry(kind, None),
        row,
        place,
        served_key=lambda served: getattr(served, served_key),
    )


def _by_name(items: str, out: str, operation: int, row: Builder, place: str = IN_ORDER, **more: Any) -> Each:
    """Topic entries with a name."""
    name = lambda t: t.name  # noqa: E731
    return Each(items, out, operation, _entry(TOPIC), row, place, key=name, served_key=name, **more)


# {Consumer,Share,Streams}GroupDescribe: the denied groups before the coordinator's answers (in its
# partitions' order), as KafkaApis adds them
_DESCRIBED_GROUPS = _in_order("group_ids", "groups", DESCRIBE, GROUP, _described_group_row, "group_id", BEFORE)
_CONFIG_KEY = lambda r: (r.resource_type, r.resource_name)  # noqa: E731


def _configs(operation: int, out: str) -> Rule:
    """DescribeConfigs, AlterConfigs, IncrementalAlterConfigs: the operation on each resource's topic or the cluster."""
    return Rule(
        each=Each("resources", out, operation, _config_resource, _config_row, key=_CONFIG_KEY, served_key=_CONFIG_KEY)
    )


# ShareFetch, ShareAcknowledge: READ on the group, then on each topic (not added to the share session)
_SHARE_TOPICS_READ = _share_group(
    READ, Each("topics", "responses", READ, _topic_by_id, _share_row, AFTER, ask_empty=True, error_wins=True)
)
# OffsetFetch's topics: a named one denied is answered with its partitions failed, one of
# all topics (the group's topics null) hidden; an id no topic has is the handler's answer
_OFFSET_TOPICS = Visible("topics", lambda gate, ctx, t: _offsets_topic(gate, ctx, None, t), _offsets_topic_hidden)

_TXN_WRITE = Whole(WRITE, _named(TRANSACTIONAL_ID, "transactional_id"), _txn_refused)

# api key -> its rule, or ((from version, rule), ...) where versions differ.
RULES: dict[int, Rule | tuple[tuple[int, Rule | None], ...]] = {
    0: Rule(  # Produce: WRITE on the transactional id, then on each topic (v13: by id)
        whole=(Whole(WRITE, _named(TRANSACTIONAL_ID, "transactional_id", empty_names=False), _produce_refused),),
        each=Each(
            "topic_data", "responses", WRITE, _produce_topic, _produce_row, AFTER, quiet=lambda req: req.acks == 0
        ),
    ),
    1: Rule(each=Each("topics", "responses", READ, _fetch_topic, _fetch_row, AFTER, ask_empty=True)),
    2: Rule(each=_by_name("topics", "topics", DESCRIBE, _list_offsets_row, AFTER, ask_empty=True)),
    3: Rule(visible=Visible("topics", _described(TOPIC, "name"), _metadata_hidden)),
    8: Rule(  # OffsetCommit: READ on the group, then on each topic (by id from v10)
        whole=(Whole(READ, _group, _offset_commit_refused),),
        each=Each("partitions", "", READ, _commit_topic, lambda gate, ctx, p, error: error, IN_PLACE, shape=_COMMIT),
    ),
    9: (  # OffsetFetch: DESCRIBE on the group(s), then on each topic (by id from v10)
        (0, Rule(whole=(Whole(DESCRIBE, _group, _no_offsets),), visible=_OFFSET_TOPICS)),
        (
            8,
            Rule(
                visible=Visible(
                    "groups",
                    _described(GROUP, "group_id"),
                    _offsets_group_hidden,
                    inner=_OFFSET_TOPICS,
                    asked=lambda req, g: next((a for a in req.groups if a.group_id == g.group_id), None),
                )
            ),
        ),
    ),
    10: (  # FindCoordinator: DESCRIBE on the group or transactional id; v4+ names several keys
        (0, Rule(whole=(Whole(DESCRIBE, lambda g, c, req: ((_coordinator_kind(req), req.key),), _no_coordinator),))),
        (
            4,
            Rule(
                each=Each(
                    "coordinator_keys",
                    "coordinators",
                    DESCRIBE,
                    lambda gate, ctx, req, key: (_coordinator_kind(req), key),
                    _coordinator_row,
                    served_key=lambda c: c.key,
                )
            ),
        ),
    ),
    11: _GROUP_READ,  # JoinGroup
    12: _GROUP_READ,  # Heartbeat
    13: _GROUP_READ,  # LeaveGroup
    14: _GROUP_READ,  # SyncGroup
    # DescribeGroups, DeleteGroups: the denied groups before (after) the coordinator's answers,
    # which come in its partitions' order (GroupApis._in_coordinator_order), as KafkaApis adds them
    15: Rule(each=_in_order("groups", "groups", DESCRIBE, GROUP, _described_group_row, "group_id", BEFORE)),
    16: Rule(  # ListGroups: all of them with DESCRIBE on the cluster, else those it may describe
        unless=Whole(DESCRIBE, _the_cluster, _error_response),
        visible=Visible("groups", _described(GROUP, "group_id")),
    ),
    19: Rule(  # CreateTopics: CREATE on the cluster, else on each topic
        unless=Whole(CREATE, _the_cluster, _error_response),
        each=_by_name("topics", "topics", CREATE, _created_topic_row),
    ),
    20: (  # DeleteTopics: DELETE on each topic (v0-5 name them as bare strings)
        (0, Rule(each=Each("topic_names", "responses", DELETE, _entry(TOPIC, None), _deleted_topic_row, AFTER))),
        (6, Rule(each=Each("topics", "responses", DELETE, _entry(TOPIC), _deleted_topic_row, AFTER))),
    ),
    21: Rule(each=_by_name("topics", "topics", DELETE, _delete_records_row)),
    22: Rule(whole=(_TXN_WRITE,)),  # InitProducerId (a transactional one)
    24: (  # AddPartitionsToTxn: v4+ is brokers verifying for their producers (CLUSTER_ACTION in Kafka)
        (
            0,
            Rule(
                whole=(
                    Whole(WRITE, _named(TRANSACTIONAL_ID, "v3_and_below_transactional_id"), _add_partitions_refused),
                    Whole(WRITE, _add_partitions_topics, _add_partitions_refused),
                )
            ),
        ),
        (4, None),
    ),
    25: Rule(whole=(_TXN_WRITE, Whole(READ, _group, _txn_refused))),  # AddOffsetsToTxn
    26: Rule(whole=(_TXN_WRITE,)),  # EndTxn
    27: _cluster(CLUSTER_ACTION),  # WriteTxnMarkers: brokers' and the admin's abortTransaction
    28: Rule(  # TxnOffsetCommit: WRITE on the id, READ on the group, then on each topic
        whole=(
            Whole(WRITE, _named(TRANSACTIONAL_ID, "transactional_id"), _txn_commit_refused),
            Whole(READ, _group, _txn_commit_refused),
        ),
        each=Each("topics", "topics", READ, _offsets_topic, _txn_commit_row, AFTER),
    ),
    29: _cluster(DESCRIBE),  # DescribeAcls
    30: _cluster(ALTER),  # CreateAcls
    31: _cluster(ALTER),  # DeleteAcls
    32: _configs(DESCRIBE_CONFIGS, "results"),
    33: _configs(ALTER_CONFIGS, "responses"),
    34: _cluster(ALTER, _log_dirs_refused),  # AlterReplicaLogDirs
    35: _cluster(DESCRIBE, _no_log_dirs),  # DescribeLogDirs
    37: Rule(each=_by_name("topics", "results", ALTER, _create_partitions_row)),
    42: Rule(each=_in_order("groups_names", "results", DELETE, GROUP, _deleted_group_row, "group_id", AFTER)),
    43: _cluster(ALTER),  # ElectLeaders
    44: _configs(ALTER_CONFIGS, "responses"),
    45: _cluster(ALTER),  # AlterPartitionReassignments
    46: _cluster(DESCRIBE),  # ListPartitionReassignments
    47: Rule(  # OffsetDelete: DELETE on the group, READ on each topic
        whole=(Whole(DELETE, _group, _no_offsets_deleted),),
        each=_by_name("topics", "topics", READ, _offset_delete_row),
    ),
    48: _cluster(DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: _cluster(ALTER_CONFIGS),  # AlterClientQuotas
    50: _cluster(DESCRIBE),  # DescribeUserScramCredentials
    51: _cluster(ALTER),  # AlterUserScramCredentials
    55: _cluster(DESCRIBE),  # DescribeQuorum (ControllerApis.handleDescribeQuorum)
    57: _cluster(ALTER),  # UpdateFeatures (ControllerApis.handleUpdateFeatures)
    60: _cluster(DESCRIBE),  # DescribeCluster
    61: Rule(each=_by_name("topics", "topics", READ, _producers_row)),  # DescribeProducers
    65: Rule(  # DescribeTransactions
        each=_in_order(
            "transactional_ids", "transaction_states", DESCRIBE, TRANSACTIONAL_ID, _transaction_row, "transactional_id"
        )
    ),
    66: Rule(visible=Visible("transaction_states", _described(TRANSACTIONAL_ID, "transactional_id"))),
    68: _GROUP_READ,  # ConsumerGroupHeartbeat
    69: Rule(each=_DESCRIBED_GROUPS),  # ConsumerGroupDescribe
    74: _cluster(DESCRIBE_CONFIGS),  # ListConfigResources
    75: Rule(  # DescribeTopicPartitions: DESCRIBE on each topic of the page
        each=Each(
            "topics",
            "topics",
            DESCRIBE,
            lambda gate, ctx, req, name: (TOPIC, name),
            _page_row,
            AFTER,
            answered=lambda req: bool(req.topics),
            shape=_PAGE,
        )
    ),
    # KIP-932 share groups: READ on the group (DELETE for DeleteShareGroupOffsets), DESCRIBE to describe
    76: Rule(  # ShareGroupHeartbeat: then DESCRIBE on every topic it subscribes to
        whole=(Whole(READ, _group, _share_refused), Whole(DESCRIBE, _heartbeat_topics, _share_heartbeat_topics_refused))
    ),
    77: Rule(each=_DESCRIBED_GROUPS),  # ShareGroupDescribe
    78: _SHARE_TOPICS_READ,  # ShareFetch
    79: _SHARE_TOPICS_READ,  # ShareAcknowledge
    90: Rule(  # DescribeShareGroupOffsets: DESCRIBE on each group, then on each of its topics
        each=Each(
            "groups",
            "groups",
            DESCRIBE,
            _entry(GROUP, "group_id"),
            _share_offsets_group_row,
            IN_PLACE,  # (one answer per group asked, in order, a group named twice too)
            # a topic named and denied comes after the group's others (topic id zero), one of all
            # (topics null) is left out; the group's own error is its whole answer
            inner=Rule(
                each=Each(
                    "topics",
                    "topics",
                    DESCRIBE,
                    _entry(TOPIC, "topic_name"),
                    _share_offsets_topic_row,
                    AFTER,
                    error_wins=True,
                ),
                visible=Visible("topics", _described(TOPIC, "topic_name")),
            ),
        )
    ),
    91: _share_group(READ, _share_offsets(_alter_share_offsets_row)),
    92: _share_group(DELETE, _share_offsets(_delete_share_offsets_row)),
    # KIP-1071 streams groups: READ on the group, DESCRIBE on the topology's topics; DESCRIBE to describe
    88: Rule(whole=(Whole(READ, _group, _streams_refused), Whole(DESCRIBE, _topology_topics, _streams_refused))),
    89: Rule(each=_DESCRIBED_GROUPS),
}


def rule_for(api_key: int, version: int) -> Rule | None:
    rule = RULES.get(api_key)
    if rule is None or isinstance(rule, Rule):
        return rule
    found = None
    for since, versions_rule in rule:
        if version >= since:
            found = versions_rule
    return found
