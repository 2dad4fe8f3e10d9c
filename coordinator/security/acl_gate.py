"""Where ACLs are checked (Kafka's KafkaApis authorize calls), in front of the handlers.

With `--authorizer` every request passes here before its handler: a request the principal
may not make at all is answered with Kafka's error for it (GROUP_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED); for requests naming
several topics or groups, the denied ones are taken out of the request, the handler
serves the rest, and the denied ones come back with their error
(TOPIC_AUTHORIZATION_FAILED, ...) in the same response. Without `--authorizer` nothing
here runs. Topics listed without being named (Metadata, OffsetFetch and ListGroups for
"all") are filtered to what the principal may DESCRIBE, as Kafka does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any, Callable

from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader

from protocol.error_response import error_response
from protocol.wire import Raw
from protocol.offset_commit import resolve_topic_ids, write_response_to

from ..apis import LATER, UNANSWERED, BuiltWhenSent, RequestContext, inner_context, nested_type
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

CONFIG_TOPIC, CONFIG_BROKER, CONFIG_CLIENT_METRICS = 2, 4, 16  # DescribeConfigs / AlterConfigs resource types
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


async def _body_of(handler: Callable, ctx: RequestContext, req: Any) -> Any:
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


class AclGate:
    def __init__(self, authorizer: Authorizer, topics: Any) -> None:
        self.authorizer = authorizer
        self.topics = topics
        self.checks: dict[int, Callable] = {
            0: self.produce,
            1: self.fetch,
            2: self.list_offsets,
            3: self.metadata,
            8: self.offset_commit,
            9: self.offset_fetch,
            10: self.find_coordinator,
            11: self._group_read,
            12: self._group_read,
            13: self._group_read,
            14: self._group_read,
            15: self.describe_groups,
            16: self.list_groups,
            19: self.create_topics,
            20: self.delete_topics,
            22: self.init_producer_id,
            24: self.add_partitions,
            25: self.add_offsets,
            26: self._txn_write,
            27: self._cluster(CLUSTER_ACTION),  # WriteTxnMarkers: brokers' and the admin's abortTransaction
            28: self.txn_offset_commit,
            29: self._cluster(DESCRIBE),
            30: self._cluster(ALTER),
            31: self._cluster(ALTER),
            42: self.delete_groups,
            43: self._cluster(ALTER),
            45: self._cluster(ALTER),
            46: self._cluster(DESCRIBE),
            48: self._cluster(DESCRIBE_CONFIGS),
            49: self._cluster(ALTER_CONFIGS),
            50: self._cluster(DESCRIBE),
            51: self._cluster(ALTER),
            57: self._cluster(ALTER),  # UpdateFeatures (ControllerApis.handleUpdateFeatures)
            75: self.describe_topic_partitions,
            35: self.describe_log_dirs,
            55: self._cluster(DESCRIBE),  # DescribeQuorum (ControllerApis.handleDescribeQuorum)
            74: self._cluster(DESCRIBE_CONFIGS),  # ListConfigResources
            68: self._group_read,
            21: self.delete_records,
            32: self._configs(DESCRIBE_CONFIGS),
            33: self._configs(ALTER_CONFIGS),
            37: self.create_partitions,
            44: self._configs(ALTER_CONFIGS),
            47: self.offset_delete,
            60: self._cluster(DESCRIBE),
            61: self.describe_producers,
            65: self.describe_transactions,
            66: self.list_transactions,
            69: self.group_describe,
            # KIP-932 share groups: READ on the group (DELETE for DeleteShareGroupOffsets), DESCRIBE to describe
            76: self.share_group_heartbeat,
            77: self.group_describe,
            78: self.share_fetch,
            79: self.share_fetch,
            90: self.describe_share_group_offsets,
            91: self.share_group_offsets(READ),
            92: self.share_group_offsets(DELETE),
            # KIP-1071 streams groups: READ on the group, DESCRIBE on the topology's topics; DESCRIBE to describe
            88: self.streams_group_heartbeat,
            89: self.group_describe,
        }

    def check(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """None: the handler runs as usual; else the result to answer with (an object or a coroutine)."""
        check = self.checks.get(ctx.header.api_key)
        return None if check is None else check(ctx, req, handler)

    def can(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
        return self.authorizer.allowed(principal_of(ctx.connection), ctx.client_host, operation, resource_type, name)

    # whole requests ---------------------------------------------------------------------

    def _group_read(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """JoinGroup, Heartbeat, LeaveGroup, SyncGroup, ConsumerGroupHeartbeat: READ on the group."""
        if self.can(ctx, READ, GROUP, req.group_id):
            return None
        return ctx.response(
            throttle_time=0,
            error_code=GROUP_DENIED,
            generation_id=-1,
            protocol_name=None,
            leader="",
            member_id=getattr(req, "member_id", "") or "",
            members=(),
            assignment=None if ctx.header.api_key == 68 else b"",
            member_epoch=-1,
            heartbeat_interval=0,
        )

    def _share_group(self, operation: int) -> Callable:
        """ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, Alter/DeleteShareGroupOffsets:
        the operation on the group, else GROUP_AUTHORIZATION_FAILED for the whole request."""

        def check(ctx: RequestContext, req: Any, handler: Callable) -> Any:
            if self.can(ctx, operation, GROUP, req.group_id or ""):
                return None
            return ctx.response(
                throttle_time=0,
                error_code=GROUP_DENIED,
                error_message=None,
                member_id=getattr(req, "member_id", None),
                member_epoch=-1,
                heartbeat_interval=0,
                acquisition_lock_timeout=0,
                responses=(),
                node_endpoints=(),
            )

        return check

    def share_fetch(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """ShareFetch / ShareAcknowledge: READ on the group (the whole request), then READ on each
        topic: a topic without it is left out of the request (nor added to the share session) and
        its partitions answered TOPIC_AUTHORIZATION_FAILED, as Kafka's KafkaApis does."""
        refused = self._share_group(READ)(ctx, req, handler)
        if refused is not None:
            return refused
        denied = tuple(
            t
            for t in req.topics
            if (name := self._name_by_id(t.topic_id)) is not None and not self.can(ctx, READ, TOPIC, name)
        )  # (an unknown id: UNKNOWN_TOPIC_ID, by the handler)
        if not denied:
            return None
        allowed = tuple(t for t in req.topics if t not in denied)
        fetch = ctx.header.api_key == 78

        def row(p: Any) -> Any:
            if fetch:
                return ctx.nested(
                    "PartitionData",
                    partition_index=p.partition_index,
                    error_code=TOPIC_DENIED,
                    acknowledge_error_code=TOPIC_DENIED if p.acknowledgement_batches else 0,
                    current_leader=ctx.nested("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1),
                    records=b"",
                    acquired_records=(),
                )
            return ctx.nested(
                "PartitionData",
                partition_index=p.partition_index,
                error_code=TOPIC_DENIED,
                current_leader=ctx.nested("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1),
            )

        async def merged() -> Any:
            body = await _body_of(handler, ctx, dataclasses.replace(req, topics=allowed))
            if body.error_code:
                return body
            topic = "ShareFetchableTopicResponse" if fetch else "ShareAcknowledgeTopicResponse"
            rows = list(body.responses) + [
                ctx.nested(topic, topic_id=t.topic_id, partitions=tuple(row(p) for p in t.partitions)) for t in denied
            ]
            return dataclasses.replace(body, responses=tuple(rows))

        return merged()

    def share_group_heartbeat(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """READ on the group, then DESCRIBE on every topic the member subscribes to (when it names
        them): one it may not see fails the whole heartbeat with TOPIC_AUTHORIZATION_FAILED and
        nothing else set, as KafkaApis.handleShareGroupHeartbeat answers."""
        refused = self._share_group(READ)(ctx, req, handler)
        if refused is not None:
            return refused
        names = set(req.subscribed_topic_names or ())
        if all(self.can(ctx, DESCRIBE, TOPIC, n) for n in names):
            return None
        return ctx.response(
            throttle_time=0,
            error_code=TOPIC_DENIED,
            error_message=None,
            member_id=None,
            member_epoch=0,
            heartbeat_interval=0,
            assignment=None,
        )

    def streams_group_heartbeat(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """READ on the group (GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every topic a joining
        member's topology reads or writes (TOPIC_AUTHORIZATION_FAILED), as
        KafkaApis.handleStreamsGroupHeartbeat; the answer is otherwise empty, as Kafka's error
        answers are."""
        if not self.can(ctx, READ, GROUP, req.group_id):
            error = GROUP_DENIED
        else:
            names: set[str] = set()
            for s in req.topology.subtopologies if req.topology is not None else ():
                names.update(s.source_topics)
                names.update(s.repartition_sink_topics)
                names.update(t.name for t in (*s.repartition_source_topics, *s.state_changelog_topics))
            if all(self.can(ctx, DESCRIBE, TOPIC, n) for n in names):
                return None
            error = TOPIC_DENIED
        return ctx.response(
            throttle_time=0,
            error_code=error,
            error_message=None,
            member_id="",
            member_epoch=0,
            heartbeat_interval=0,
            acceptable_recovery_lag=0 if ctx.version == 0 else -1,
            task_offset_interval=0,
            status=(),
            active_tasks=None,
            standby_tasks=None,
            warmup_tasks=None,
            endpoint_information_epoch=0,
            partitions_by_user_endpoint=None,
        )

    def describe_share_group_offsets(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group), then DESCRIBE on each
        topic, as KafkaApis.handleDescribeShareGroupOffsetsRequest: a topic named without it is not
        asked and comes back after the others with topic id zero and each partition
        TOPIC_AUTHORIZATION_FAILED (start offset -1); with all topics asked (topics null), the
        topics it may not see are left out of the answer."""
        denied_topics = {
            g.group_id: [t for t in g.topics if not self.can(ctx, DESCRIBE, TOPIC, t.topic_name)]
            for g in req.groups
            if g.topics
        }
        if not any(denied_topics.values()) and all(g.topics is not None for g in req.groups):

            def denied(g: Any) -> Any | None:
                if self.can(ctx, DESCRIBE, GROUP, g.group_id):
                    return None
                return ctx.nested(
                    "DescribeShareGroupOffsetsResponseGroup",
                    group_id=g.group_id,
                    topics=(),
                    error_code=GROUP_DENIED,
                    error_message=None,
                )

            return self._merge(
                ctx, req, handler, "groups", "groups", denied, lambda g: g.group_id, lambda d: d.group_id
            )

        def group_row(g: Any, served: Any) -> Any:
            if not self.can(ctx, DESCRIBE, GROUP, g.group_id):
                return ctx.nested(
                    "DescribeShareGroupOffsetsResponseGroup",
                    group_id=g.group_id,
                    topics=(),
                    error_code=GROUP_DENIED,
                    error_message=None,
                )
            if served.error_code:
                return served
            if g.topics is None:
                return dataclasses.replace(
                    served, topics=tuple(t for t in served.topics if self.can(ctx, DESCRIBE, TOPIC, t.topic_name))
                )
            refused = tuple(
                ctx.nested(
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
                            error_code=TOPIC_DENIED,
                            error_message="Topic authorization failed.",
                        )
                        for p in t.partitions
                    ),
                )
                for t in denied_topics.get(g.group_id, ())
            )
            return dataclasses.replace(served, topics=tuple(served.topics) + refused)

        async def merged() -> Any:
            # every group goes to the handler (its own errors first), only with the topics it may see
            asked = tuple(
                g
                if g.topics is None
                else dataclasses.replace(
                    g, topics=tuple(t for t in g.topics if t not in denied_topics.get(g.group_id, ()))
                )
                for g in req.groups
            )
            body = await _body_of(handler, ctx, dataclasses.replace(req, groups=asked))
            return dataclasses.replace(
                body, groups=tuple(group_row(g, served) for g, served in zip(req.groups, body.groups))
            )

        return merged()

    def share_group_offsets(self, operation: int) -> Callable:
        """AlterShareGroupOffsets (READ on the group) and DeleteShareGroupOffsets (DELETE on it), then
        READ on each topic, as KafkaApis.handleAlter/DeleteShareGroupOffsetsRequest: a topic without
        it is not altered or deleted and is answered TOPIC_AUTHORIZATION_FAILED (each partition of
        it for Alter, the topic for Delete), ahead of the topics served."""

        def check(ctx: RequestContext, req: Any, handler: Callable) -> Any:
            refused = self._share_group(operation)(ctx, req, handler)
            if refused is not None:
                return refused
            denied = [t for t in req.topics if not self.can(ctx, READ, TOPIC, t.topic_name)]
            if not denied:
                return None
            alter = ctx.header.api_key == 91
            message = "Topic authorization failed."

            def row(t: Any) -> Any:
                info = self.topics.get(t.topic_name)
                if alter:
                    return ctx.nested(
                        "AlterShareGroupOffsetsResponseTopic",
                        topic_name=t.topic_name,
                        topic_id=info.topic_id if info is not None else ZERO_UUID,
                        partitions=tuple(
                            ctx.nested(
                                "AlterShareGroupOffsetsResponsePartition",
                                partition_index=p.partition_index,
                                error_code=TOPIC_DENIED,
                                error_message=message,
                            )
                            for p in t.partitions
                        ),
                    )
                return ctx.nested(
                    "DeleteShareGroupOffsetsResponseTopic",
                    topic_name=t.topic_name,
                    topic_id=ZERO_UUID,
                    error_code=TOPIC_DENIED,
                    error_message=message,
                )

            async def merged() -> Any:
                allowed = tuple(t for t in req.topics if t not in denied)
                body = await _body_of(handler, ctx, dataclasses.replace(req, topics=allowed))
                if body.error_code:
                    return body
                return dataclasses.replace(body, responses=tuple(row(t) for t in denied) + tuple(body.responses))

            return merged()

        return check

    def _cluster(self, operation: int) -> Callable:
        """`operation` on the cluster, else the request's error response, with CLUSTER_AUTHORIZATION_FAILED."""

        def check(ctx: RequestContext, req: Any, handler: Callable) -> Any:
            if self.can(ctx, operation, CLUSTER, CLUSTER_NAME):
                return None
            key = ctx.header.api_key
            body = error_response(key, ctx.version, ctx.codec.response_type, req, CLUSTER_DENIED)
            departure = _CLUSTER_DENIED_DEPARTS.get(key)
            if departure is None:
                return body
            values = {k: v for k, v in departure(req).items() if hasattr(body, k)}
            return dataclasses.replace(body, **values)

        return check

    def describe_log_dirs(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """DESCRIBE on the cluster, else no log dir and (v3+) CLUSTER_AUTHORIZATION_FAILED, as
        KafkaApis.handleDescribeLogDirsRequest answers (not its getErrorResponse)."""
        if self.can(ctx, DESCRIBE, CLUSTER, CLUSTER_NAME):
            return None
        return ctx.response(throttle_time=0, error_code=CLUSTER_DENIED, results=())

    def describe_topic_partitions(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """DESCRIBE on each topic from the cursor's on, as DescribeTopicPartitionsRequestHandler:
        with all topics asked, those it may not see are left out before the page is cut; a named
        one it may not see is left out of the page and answered after it, TOPIC_AUTHORIZATION_FAILED."""
        cursor = req.cursor
        start = cursor.topic_name if cursor is not None else ""
        names = sorted(self.topics.topics) if not req.topics else sorted({t.name for t in req.topics})
        if req.topics and cursor is not None and cursor.topic_name not in names:
            return None  # (the handler refuses the request as a whole)
        names = [n for n in names if n >= start]
        allowed = [n for n in names if self.can(ctx, DESCRIBE, TOPIC, n)]
        if len(allowed) == len(names):
            return None
        denied = [] if not req.topics else [n for n in names if n not in allowed]
        if cursor is not None and cursor.topic_name not in allowed:
            cursor = None  # (the page starts at the next topic it may see)
        make = nested_type(ctx.codec.request_type, "TopicRequest")
        narrowed = dataclasses.replace(req, topics=tuple(make(name=n) for n in allowed), cursor=cursor)

        def row(name: str) -> Any:
            return ctx.nested(
                "DescribeTopicPartitionsResponseTopic",
                error_code=TOPIC_DENIED,
                name=name,
                topic_id=ZERO_UUID,
                is_internal=False,
                partitions=(),
                topic_authorized_operations=-(2**31),
            )

        async def merged() -> Any:
            if allowed:
                body = await _body_of(handler, ctx, narrowed)
            else:
                body = ctx.response(throttle_time=0, topics=(), next_cursor=None)
            return dataclasses.replace(body, topics=tuple(body.topics) + tuple(row(n) for n in denied))

        return merged()

    def _txn_write(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """EndTxn (and the start of the other transactional requests): WRITE on the id."""
        if self.can(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
            return None
        return ctx.response(throttle_time=0, error_code=TXN_DENIED, producer_id=-1, producer_epoch=-1)

    def init_producer_id(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        if req.transactional_id is None:
            return None
        return self._txn_write(ctx, req, handler)

    def add_offsets(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        denied = self._txn_write(ctx, req, handler)
        if denied is None and not self.can(ctx, READ, GROUP, req.group_id):
            denied = ctx.response(throttle_time=0, error_code=GROUP_DENIED)
        return denied

    def find_coordinator(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        key_type = getattr(req, "key_type", 0)
        resource, error = (TRANSACTIONAL_ID, TXN_DENIED) if key_type == 1 else (GROUP, GROUP_DENIED)
        if ctx.version < 4:
            if self.can(ctx, DESCRIBE, resource, req.key):
                return None
            return ctx.response(throttle_time=0, error_code=error, error_message=None, node_id=-1, host="", port=-1)
        denied = [k for k in req.coordinator_keys if not self.can(ctx, DESCRIBE, resource, k)]
        if not denied:
            return None
        allowed = dataclasses.replace(req, coordinator_keys=tuple(k for k in req.coordinator_keys if k not in denied))

        async def merged() -> Any:
            body = await _body_of(handler, ctx, allowed) if allowed.coordinator_keys else None
            found = {c.key: c for c in body.coordinators} if body is not None else {}
            return ctx.response(
                throttle_time=0,
                coordinators=tuple(
                    found.get(k)
                    or ctx.nested(
                        "Coordinator", key=k, node_id=-1, host="", port=-1, error_code=error, error_message=None
                    )
                    for k in req.coordinator_keys
                ),
            )

        return merged()

    # groups -----------------------------------------------------------------------------

    def describe_groups(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        def denied(g: str) -> Any | None:
            if self.can(ctx, DESCRIBE, GROUP, g):
                return None
            return ctx.nested(
                "DescribedGroup",
                error_code=GROUP_DENIED,
                error_message=None,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=-(2**31),
            )

        return self._merge(ctx, req, handler, "groups", "groups", denied, lambda g: g, lambda d: d.group_id)

    def list_groups(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        if self.can(ctx, DESCRIBE, CLUSTER, CLUSTER_NAME):
            return None

        return self._filtered(ctx, req, handler, "groups", lambda g: self.can(ctx, DESCRIBE, GROUP, g.group_id))

    def delete_groups(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        def denied(g: str) -> Any | None:
            if self.can(ctx, DELETE, GROUP, g):
                return None
            return ctx.nested("DeletableGroupResult", group_id=g, error_code=GROUP_DENIED)

        return self._merge(ctx, req, handler, "groups_names", "results", denied, lambda g: g, lambda r: r.group_id)

    def _name_by_id(self, topic_id: Any) -> str | None:
        info = self.topics.by_id.get(topic_id)
        return info.name if info is not None else None

    def _offsets_topic_name(self, topic: Any) -> str | None:
        """An offset request's or response's topic entry's name; by its id from v10 on (None: no such topic)."""
        name = getattr(topic, "name", None)
        if name is None and getattr(topic, "topic_id", None) is not None:
            name = self._name_by_id(topic.topic_id)
        return name

    def offset_commit(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        version = ctx.version
        if not self.can(ctx, READ, GROUP, req.group_id):
            return write_response_to(req, version, [GROUP_DENIED] * len(req.partitions))
        if version >= 10:  # topics by id: their names first (an unknown id is not authorized: it fails first)
            req = resolve_topic_ids(req, self._name_by_id)
        denied_topics = {name for name, _ in req.topics if type(name) is str and not self.can(ctx, READ, TOPIC, name)}
        if not denied_topics:
            return None if version < 10 else handler(ctx, req)
        keep = [p for p in req.partitions if p[0] not in denied_topics]
        allowed = req._replace(
            partitions=keep,
            topics=[t for t in req.topics if t[0] not in denied_topics],
            topic_ids=None
            if req.topic_ids is None
            else [i for i, t in zip(req.topic_ids, req.topics) if t[0] not in denied_topics],
        )

        async def merged() -> Any:
            errors = iter(())
            if keep:  # the handler answers the allowed partitions in their order
                body = await _body_of(handler, ctx, allowed)
                errors = iter([p.error_code for t in body.topics for p in t.partitions])
            return write_response_to(
                req, version, [TOPIC_DENIED if p[0] in denied_topics else next(errors) for p in req.partitions]
            )

        return merged()

    def offset_fetch(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        groups = [req.group_id] if ctx.version < 8 else [g.group_id for g in req.groups]
        if all(self.can(ctx, DESCRIBE, GROUP, g) for g in groups) and not self._named_topics_denied(ctx, req):
            return self._filter_fetched(ctx, req, handler)
        if ctx.version < 8:
            return ctx.response(throttle_time=0, topics=(), error_code=GROUP_DENIED)

        async def merged() -> Any:
            body = await _body_of(handler, ctx, req)
            out = []
            for g in body.groups:
                if not self.can(ctx, DESCRIBE, GROUP, g.group_id):
                    out.append(dataclasses.replace(g, topics=(), error_code=GROUP_DENIED))
                else:
                    out.append(dataclasses.replace(g, topics=tuple(self._deny_topic_rows(ctx, t) for t in g.topics)))
            return dataclasses.replace(body, groups=tuple(out))

        return merged()

    def _named_topics_denied(self, ctx: RequestContext, req: Any) -> bool:
        groups = [req] if ctx.version < 8 else list(req.groups)
        names = (self._offsets_topic_name(t) for g in groups for t in (g.topics or ()))
        return any(name is not None and not self.can(ctx, DESCRIBE, TOPIC, name) for name in names)

    def _deny_topic_rows(self, ctx: RequestContext, topic: Any) -> Any:
        name = self._offsets_topic_name(topic)
        if name is None or self.can(ctx, DESCRIBE, TOPIC, name):
            return topic
        return dataclasses.replace(
            topic,
            partitions=tuple(
                dataclasses.replace(p, committed_offset=-1, metadata="", error_code=TOPIC_DENIED)
                for p in topic.partitions
            ),
        )

    def _filter_fetched(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """Offsets of all topics: only those the principal may describe."""

        async def filtered() -> Any:
            body = await _body_of(handler, ctx, req)
            if ctx.version < 8:
                return dataclasses.replace(
                    body, topics=tuple(t for t in body.topics if self.can(ctx, DESCRIBE, TOPIC, t.name))
                )
            return dataclasses.replace(
                body,
                groups=tuple(
                    dataclasses.replace(
                        g,
                        topics=tuple(
                            t for t in g.topics if self.can(ctx, DESCRIBE, TOPIC, self._offsets_topic_name(t) or "")
                        ),
                    )
                    for g in body.groups
                ),
            )

        return filtered()

    # topics -----------------------------------------------------------------------------

    def _split(
        self, ctx: RequestContext, items: tuple, name_of: Callable, operation: int
    ) -> tuple[tuple, tuple] | None:
        """(allowed, denied) items by the operation on their topic; None if all are allowed."""
        denied = tuple(i for i in items if not self.can(ctx, operation, TOPIC, name_of(i)))
        if not denied:
            return None
        return tuple(i for i in items if i not in denied), denied

    def produce(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        txn = getattr(req, "transactional_id", None)
        if txn and not self.can(ctx, WRITE, TRANSACTIONAL_ID, txn):
            return ctx.response(
                throttle_time=0,
                responses=tuple(
                    ctx.nested(
                        "TopicProduceResponse",
                        **self._produce_topic(ctx, t),
                        partition_responses=tuple(
                            self._produce_error(ctx, p.index, TXN_DENIED) for p in t.partition_data
                        ),
                    )
                    for t in req.topic_data
                ),
            )
        # (v13 names topics by id; an unknown id is the handler's UNKNOWN_TOPIC_ID)
        split = self._split(
            ctx,
            req.topic_data,
            (lambda t: self._name_by_id(t.topic_id) or "") if ctx.version >= 13 else (lambda t: t.name),
            WRITE,
        )
        if split is not None and ctx.version >= 13:
            unknown = tuple(t for t in split[1] if self._name_by_id(t.topic_id) is None)
            split = (split[0] + unknown, tuple(t for t in split[1] if t not in unknown))
            if not split[1]:
                split = None
        if split is None:
            return None
        allowed, denied = split

        async def merged() -> Any:
            body = await _body_of(handler, ctx, dataclasses.replace(req, topic_data=allowed)) if allowed else None
            if req.acks == 0:
                return None
            rows = list(body.responses) if body is not None else []
            rows += [
                ctx.nested(
                    "TopicProduceResponse",
                    **self._produce_topic(ctx, t),
                    partition_responses=tuple(
                        self._produce_error(ctx, p.index, TOPIC_DENIED) for p in t.partition_data
                    ),
                )
                for t in denied
            ]
            return ctx.response(throttle_time=body.throttle_time if body is not None else 0, responses=tuple(rows))

        return merged()

    @staticmethod
    def _produce_topic(ctx: RequestContext, t: Any) -> dict[str, Any]:
        """A Produce answer's topic as the request named it: by id from v13."""
        return {"topic_id": t.topic_id} if ctx.version >= 13 else {"name": t.name}

    @staticmethod
    def _produce_error(ctx: RequestContext, partition: int, error: int) -> Any:
        return ctx.nested(
            "PartitionProduceResponse",
            index=partition,
            error_code=error,
            base_offset=-1,
            log_append_time=None,
            log_start_offset=-1,
            record_errors=(),
            error_message=None,
        )

    def _topic_name(self, ctx: RequestContext, t: Any) -> str:
        if ctx.version >= 13 and getattr(t, "topic_id", None) is not None:
            return self._name_by_id(t.topic_id) or ""
        return t.topic

    def _denied_after(
        self,
        ctx: RequestContext,
        req: Any,
        handler: Callable,
        field: str,
        out_field: str,
        name_of: Callable[[Any], str],
        operation: int,
        denied_row: Callable[[Any], Any],
    ) -> Any:
        """Kafka's shape for Fetch and ListOffsets: the topics of req.<field> the principal may
        not <operation> are left out of the handler's request, and come back after the ones it
        served in response.<out_field>, each as denied_row(topic)."""
        split = self._split(ctx, getattr(req, field), name_of, operation)
        if split is None:
            return None
        allowed, denied = split

        async def merged() -> Any:
            body = await _body_of(handler, ctx, dataclasses.replace(req, **{field: allowed}))
            rows = (*getattr(body, out_field), *(denied_row(t) for t in denied))
            return dataclasses.replace(body, **{out_field: rows})

        return merged()

    def fetch(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        def denied(t: Any) -> Any:
            return ctx.nested(
                "FetchableTopicResponse",
                topic=t.topic,
                topic_id=getattr(t, "topic_id", None),
                partitions=tuple(
                    ctx.nested(
                        "PartitionData",
                        partition_index=p.partition,
                        error_code=TOPIC_DENIED,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=b"",
                    )
                    for p in t.partitions
                ),
            )

        name = lambda t: self._topic_name(ctx, t)  # noqa: E731
        return self._denied_after(ctx, req, handler, "topics", "responses", name, READ, denied)

    def list_offsets(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        def denied(t: Any) -> Any:
            return ctx.nested(
                "ListOffsetsTopicResponse",
                name=t.name,
                partitions=tuple(
                    ctx.nested(
                        "ListOffsetsPartitionResponse",
                        partition_index=p.partition_index,
                        error_code=TOPIC_DENIED,
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                    )
                    for p in t.partitions
                ),
            )

        return self._denied_after(ctx, req, handler, "topics", "topics", lambda t: t.name, DESCRIBE, denied)

    def metadata(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        async def filtered() -> Any:
            body = await _body_of(handler, ctx, req)
            named = req.topics is not None and (ctx.version > 0 or req.topics)
            rows = []
            for t in body.topics:
                if self.can(ctx, DESCRIBE, TOPIC, t.name or ""):
                    rows.append(t)
                elif named:  # asked by name: said, not hidden
                    rows.append(dataclasses.replace(t, error_code=TOPIC_DENIED, partitions=()))
            return dataclasses.replace(body, topics=tuple(rows))

        return filtered()

    def create_topics(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        if self.can(ctx, CREATE, CLUSTER, CLUSTER_NAME):
            return None

        def denied(t: Any) -> Any | None:
            if self.can(ctx, CREATE, TOPIC, t.name):
                return None
            return ctx.nested(
                "CreatableTopicResult",
                name=t.name,
                topic_id=None,
                error_code=TOPIC_DENIED,
                error_message=None,
                topic_config_error_code=TOPIC_DENIED,
                num_partitions=-1,
                replication_factor=-1,
                configs=None,
            )

        name = lambda t: t.name  # noqa: E731
        return self._merge(ctx, req, handler, "topics", "topics", denied, name, name)

    def delete_topics(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        names = [t.name for t in req.topics] if ctx.version >= 6 else list(req.topic_names)
        denied = {n for n in names if not self.can(ctx, DELETE, TOPIC, n or "")}
        if not denied:
            return None

        async def merged() -> Any:
            if ctx.version >= 6:
                allowed = dataclasses.replace(req, topics=tuple(t for t in req.topics if t.name not in denied))
                left = allowed.topics
            else:
                allowed = dataclasses.replace(req, topic_names=tuple(n for n in names if n not in denied))
                left = allowed.topic_names
            body = await _body_of(handler, ctx, allowed) if left else None
            rows = list(body.responses) if body is not None else []
            rows += [
                ctx.nested("DeletableTopicResult", name=n, topic_id=None, error_code=TOPIC_DENIED, error_message=None)
                for n in sorted(denied)
            ]
            return ctx.response(throttle_time=body.throttle_time if body is not None else 0, responses=tuple(rows))

        return merged()

    def _merge(
        self,
        ctx: RequestContext,
        req: Any,
        handler: Callable,
        field: str,
        out_field: str,
        denied: Callable[[Any], Any | None],
        key_in: Callable,
        key_out: Callable,
    ) -> Any:
        """The common shape: items of req.<field>; each denied one (denied(item) gives its
        error row) is left out of the handler's request and answered by its row, in the
        request's order, in response.<out_field>."""
        items = getattr(req, field)
        rows = {key_in(i): row for i in items if (row := denied(i)) is not None}
        if not rows:
            return None

        async def merged() -> Any:
            allowed = tuple(i for i in items if key_in(i) not in rows)
            body = await _body_of(handler, ctx, dataclasses.replace(req, **{field: allowed})) if allowed else None
            served = {key_out(r): r for r in getattr(body, out_field)} if body is not None else {}
            answer = tuple(rows.get(key_in(i)) or served[key_in(i)] for i in items)
            if body is None:
                return ctx.response(throttle_time=0, error_code=E.none, **{out_field: answer})
            return dataclasses.replace(body, **{out_field: answer})

        return merged()

    @staticmethod
    async def _filtered(ctx: RequestContext, req: Any, handler: Callable, field: str, keep: Callable) -> Any:
        """The handler's answer with only the rows of response.<field> the principal may see."""
        body = await _body_of(handler, ctx, req)
        return dataclasses.replace(body, **{field: tuple(row for row in getattr(body, field) if keep(row))})

    def _configs(self, operation: int) -> Callable:
        def check(ctx: RequestContext, req: Any, handler: Callable) -> Any:
            result = "DescribeConfigsResult" if ctx.header.api_key == 32 else "AlterConfigsResourceResponse"
            out_field = "results" if ctx.header.api_key == 32 else "responses"

            def denied(r: Any) -> Any | None:
                if r.resource_type == CONFIG_TOPIC and not self.can(ctx, operation, TOPIC, r.resource_name):
                    error = TOPIC_DENIED
                elif r.resource_type in (CONFIG_BROKER, CONFIG_CLIENT_METRICS) and not self.can(
                    ctx, operation, CLUSTER, CLUSTER_NAME
                ):  # (a client-metrics subscription is the cluster's, as ConfigAdminManager checks it)
                    error = CLUSTER_DENIED
                else:
                    return None
                return ctx.nested(
                    result,
                    error_code=error,
                    error_message=None,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    configs=(),
                )

            key = lambda r: (r.resource_type, r.resource_name)  # noqa: E731
            return self._merge(ctx, req, handler, "resources", out_field, denied, key, key)

        return check

    def delete_records(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        def denied(t: Any) -> Any | None:
            if self.can(ctx, DELETE, TOPIC, t.name):
                return None
            return ctx.nested(
                "DeleteRecordsTopicResult",
                name=t.name,
                partitions=tuple(
                    ctx.nested(
                        "DeleteRecordsPartitionResult",
                        partition_index=p.partition_index,
                        low_watermark=-1,
                        error_code=TOPIC_DENIED,
                    )
                    for p in t.partitions
                ),
            )

        name = lambda t: t.name  # noqa: E731
        return self._merge(ctx, req, handler, "topics", "topics", denied, name, name)

    def create_partitions(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        def denied(t: Any) -> Any | None:
            if self.can(ctx, ALTER, TOPIC, t.name):
                return None
            return ctx.nested("CreatePartitionsTopicResult", name=t.name, error_code=TOPIC_DENIED, error_message=None)

        name = lambda t: t.name  # noqa: E731
        return self._merge(ctx, req, handler, "topics", "results", denied, name, name)

    def offset_delete(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        if not self.can(ctx, DELETE, GROUP, req.group_id):
            return ctx.response(throttle_time=0, error_code=GROUP_DENIED, topics=())

        def denied(t: Any) -> Any | None:
            if self.can(ctx, READ, TOPIC, t.name):
                return None
            return ctx.nested(
                "OffsetDeleteResponseTopic",
                name=t.name,
                partitions=tuple(
                    ctx.nested(
                        "OffsetDeleteResponsePartition", partition_index=p.partition_index, error_code=TOPIC_DENIED
                    )
                    for p in t.partitions
                ),
            )

        name = lambda t: t.name  # noqa: E731
        return self._merge(ctx, req, handler, "topics", "topics", denied, name, name)

    def group_describe(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """ConsumerGroupDescribe and ShareGroupDescribe: DESCRIBE on each group, the others
        answered GROUP_AUTHORIZATION_FAILED in the same response."""

        def denied(g: str) -> Any | None:
            if self.can(ctx, DESCRIBE, GROUP, g):
                return None
            return ctx.nested(
                "DescribedGroup",
                error_code=GROUP_DENIED,
                error_message=None,
                group_id=g,
                group_state="",
                group_epoch=-1,
                assignment_epoch=-1,
                assignor_name="",
                members=(),
                authorized_operations=-(2**31),
            )

        return self._merge(ctx, req, handler, "group_ids", "groups", denied, lambda g: g, lambda d: d.group_id)

    # transactions -----------------------------------------------------------------------

    def describe_transactions(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        from ..transactions.coordinator import millis_datetime

        def denied(txn_id: str) -> Any | None:
            if self.can(ctx, DESCRIBE, TRANSACTIONAL_ID, txn_id):
                return None
            return ctx.nested(
                "TransactionState",
                error_code=TXN_DENIED,
                transactional_id=txn_id,
                transaction_state="",
                transaction_timeout=0,
                transaction_start_time=millis_datetime(-1),
                producer_id=-1,
                producer_epoch=-1,
                topics=(),
            )

        return self._merge(
            ctx,
            req,
            handler,
            "transactional_ids",
            "transaction_states",
            denied,
            lambda t: t,
            lambda s: s.transactional_id,
        )

    def list_transactions(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        return self._filtered(
            ctx,
            req,
            handler,
            "transaction_states",
            lambda t: self.can(ctx, DESCRIBE, TRANSACTIONAL_ID, t.transactional_id),
        )

    def describe_producers(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        """READ on each topic, else TOPIC_AUTHORIZATION_FAILED in each of its partitions."""
        denied = {t.name for t in req.topics if not self.can(ctx, READ, TOPIC, t.name)}
        if not denied:
            return None

        def refused(t: Any) -> Any:
            return ctx.nested(
                "TopicResponse",
                name=t.name,
                partitions=tuple(
                    ctx.nested(
                        "PartitionResponse",
                        partition_index=p,
                        error_code=TOPIC_DENIED,
                        error_message=None,
                        active_producers=(),
                    )
                    for p in t.partition_indexes
                ),
            )

        async def merged() -> Any:
            allowed = tuple(t for t in req.topics if t.name not in denied)
            body = await _body_of(handler, ctx, dataclasses.replace(req, topics=allowed)) if allowed else None
            served = iter(body.topics if body is not None else ())
            return ctx.response(
                throttle_time=0, topics=tuple(refused(t) if t.name in denied else next(served) for t in req.topics)
            )

        return merged()

    def add_partitions(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        if ctx.version >= 4:
            return None  # (brokers verifying for their producers: CLUSTER_ACTION in Kafka)
        txn_id = req.v3_and_below_transactional_id
        topics = req.v3_and_below_topics
        if not self.can(ctx, WRITE, TRANSACTIONAL_ID, txn_id):
            error_of = {t.name: TXN_DENIED for t in topics}
        else:
            denied = {t.name for t in topics if not self.can(ctx, WRITE, TOPIC, t.name)}
            if not denied:
                return None
            # as Kafka: the denied topics get the error, the others OPERATION_NOT_ATTEMPTED
            error_of = {t.name: TOPIC_DENIED if t.name in denied else E.operation_not_attempted for t in topics}
        return ctx.response(
            throttle_time=0,
            results_by_topic_v3_and_below=tuple(
                ctx.nested(
                    "AddPartitionsToTxnTopicResult",
                    name=t.name,
                    results_by_partition=tuple(
                        ctx.nested(
                            "AddPartitionsToTxnPartitionResult",
                            partition_index=p,
                            partition_error_code=error_of[t.name],
                        )
                        for p in t.partitions
                    ),
                )
                for t in topics
            ),
        )

    def txn_offset_commit(self, ctx: RequestContext, req: Any, handler: Callable) -> Any:
        if not self.can(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
            error_of: Callable[[Any], int] = lambda _: TXN_DENIED
        elif not self.can(ctx, READ, GROUP, req.group_id):
            error_of = lambda _: GROUP_DENIED
        else:
            # (v6 names topics by id: an id no topic has is not denied; the handler answers it
            # UNKNOWN_TOPIC_ID, as Kafka does before authorizing)
            denied = [
                t
                for t in req.topics
                if (name := self._offsets_topic_name(t)) is not None and not self.can(ctx, READ, TOPIC, name)
            ]
            if not denied:
                return None
            error_of = lambda t: TOPIC_DENIED if any(t is d for d in denied) else E.none
            allowed = dataclasses.replace(req, topics=tuple(t for t in req.topics if all(t is not d for d in denied)))

            async def merged() -> Any:
                body = await _body_of(handler, ctx, allowed) if allowed.topics else None
                rows = list(body.topics) if body is not None else []
                rows += [self._txn_commit_rows(ctx, t, TOPIC_DENIED) for t in denied]
                return ctx.response(throttle_time=0, topics=tuple(rows))

            return merged()
        return ctx.response(
            throttle_time=0, topics=tuple(self._txn_commit_rows(ctx, t, error_of(t)) for t in req.topics)
        )

    @staticmethod
    def _txn_commit_rows(ctx: RequestContext, t: Any, error: int) -> Any:
        key = {"topic_id": t.topic_id} if ctx.version >= 6 else {"name": t.name}
        return ctx.nested(
            "TxnOffsetCommitResponseTopic",
            **key,
            partitions=tuple(
                ctx.nested("TxnOffsetCommitResponsePartition", partition_index=p.partition_index, error_code=error)
                for p in t.partitions
            ),
        )
