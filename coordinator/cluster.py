"""Cluster-level APIs: FindCoordinator and Metadata, answered from the topology
(coordinator/topology.py): the live brokers, each partition's leader, epoch, replicas and
ISR, and each group's or transactional id's coordinator, the leader of its partition of
`__consumer_offsets` or `__transaction_state`. Every broker gives the same answers, with
the addresses of the listener protocol the client came in by.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from protocol.messages import encode_body

from protocol.wire import Raw

from .apis import RequestContext
from .log.offsets import TOPIC as OFFSETS_TOPIC
from .log.partition import PartitionLog

if TYPE_CHECKING:
    from .apis import Registry
    from .config import Config
    from .topology import Topology

FIND_COORDINATOR, METADATA = 10, 3
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE = 0, 1, 2
NO_TOPIC_ID = uuid.UUID(int=0)
TRANSACTION_TOPIC = "__transaction_state"


# AclOperation codes (Kafka's): the operations each resource type supports.
_READ, _WRITE, _CREATE, _DELETE, _ALTER, _DESCRIBE, _CLUSTER_ACTION = 3, 4, 5, 6, 7, 8, 9
_DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE = 10, 11, 12
TOPIC_OPERATIONS = sum(
    1 << op for op in (_READ, _WRITE, _CREATE, _DELETE, _ALTER, _DESCRIBE, _DESCRIBE_CONFIGS, _ALTER_CONFIGS)
)
CLUSTER_OPERATIONS = sum(
    1 << op
    for op in (_CREATE, _ALTER, _DESCRIBE, _CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE)
)
NOT_ASKED = -(2**31)


class Cluster:
    def __init__(self, config: Config, topics: Any, groups: Any, topology: Topology) -> None:
        self.config = config
        self.topics = topics  # coordinator.broker.topics.Topics
        self.groups = groups  # coordinator.groups.runtime.CoordinatorRuntime
        self.topology = topology
        self._cache: dict[tuple, bytes] = {}
        self._cache_stamp: tuple = ()

    def register(self, registry: Registry) -> None:
        registry.add(FIND_COORDINATOR, range(0, 7), self.find_coordinator)
        registry.add(METADATA, range(0, 14), self.metadata)

    def brokers(self, ctx: RequestContext) -> list[tuple[int, str, int]]:
        """(node id, host, port) of the live brokers, as clients of this listener reach them."""
        protocol = ctx.connection.listener.protocol
        return [(n, *self.topology.endpoint(n, protocol)) for n in self.topology.live()]

    # FindCoordinator ------------------------------------------------------------------

    def _coordinator(self, ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
        """(error, message, node, host, port) for one coordinator key."""
        protocol = ctx.connection.listener.protocol
        if key_type == KEY_TYPE_GROUP:
            if not key:
                return ErrorCode.invalid_request, "group id must not be empty", -1, "", -1
            runtime = self.groups
            if runtime is not None and runtime.shard_for(key).offline is not None:
                # Its __consumer_offsets partition is offline (corrupt): no coordinator for now.
                return ErrorCode.coordinator_not_available, "the group's partition is offline", -1, "", -1
            self.topics.create_internal(OFFSETS_TOPIC)  # (Kafka creates it at its first use)
            node = self.topology.coordinator_of(key)
            return ErrorCode.none, None, node, *self.topology.endpoint(node, protocol)
        if key_type == KEY_TYPE_TRANSACTION:
            if not key:
                return ErrorCode.invalid_request, "transactional id must not be empty", -1, "", -1
            self.topics.create_internal(TRANSACTION_TOPIC)
            node = self.topology.transaction_coordinator_of(key)
            return ErrorCode.none, None, node, *self.topology.endpoint(node, protocol)
        return ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}", -1, "", -1

    def find_coordinator(self, ctx: RequestContext, req: Any) -> Any:
        if ctx.version < 4:
            key_type = getattr(req, "key_type", KEY_TYPE_GROUP)
            err, msg, node, host, port = self._coordinator(ctx, req.key, key_type)
            return ctx.response(throttle_time=0, error_code=err, error_message=msg, node_id=node, host=host, port=port)
        key_type = req.key_type
        coordinators = []
        for key in req.coordinator_keys:
            err, msg, node, host, port = self._coordinator(ctx, key, key_type)
            coordinators.append(
                ctx.nested(
                    "Coordinator", key=key, node_id=node, host=host, port=port, error_code=err, error_message=msg
                )
            )
        return ctx.response(throttle_time=0, coordinators=tuple(coordinators))

    # Metadata -------------------------------------------------------------------------

    def metadata(self, ctx: RequestContext, req: Any) -> Any:
        """Answers are cached, encoded, per version and request until the catalog changes:
        encoding 50 partitions of __consumer_offsets with kio costs ~1 ms."""
        topics = self.topics
        requested, unknown_ids = None, ()
        if req.topics is not None:
            requested, unknown_ids = self._requested_topics(req.topics)
        if ctx.version == 0 and requested == []:
            requested = None  # v0: an empty list means "all topics"
        auto_create = getattr(req, "allow_auto_topic_creation", True)
        topic_ops = getattr(req, "include_topic_authorized_operations", False)
        cluster_ops = getattr(req, "include_cluster_authorized_operations", False)
        key = (
            ctx.version,
            None if requested is None else tuple(requested),
            unknown_ids,
            auto_create,
            topic_ops,
            cluster_ops,
            advertised(ctx),
        )
        stamp = (topics.changes, self.topology.version, PartitionLog.offline_events)
        if self._cache_stamp != stamp:
            self._cache.clear()
            self._cache_stamp = stamp
        body = self._cache.get(key)
        if body is None:
            body = Raw(
                encode_body(ctx.codec, self._metadata(ctx, requested, auto_create, topic_ops, cluster_ops, unknown_ids))
            )
            if self._cache_stamp == (topics.changes, self.topology.version, PartitionLog.offline_events):
                # (not when this request created topics)
                if len(self._cache) > 1000:
                    self._cache.clear()
                self._cache[key] = body
        if topics.auto_creating and requested:
            # A topic this answer calls unknown is being created: the answer waits until it
            # is, so the client's next request finds it (as Kafka's would, after its retry).
            creating = [topics.auto_creating[n] for n in requested if n in topics.auto_creating]
            if creating:
                return self._after(creating, body)
        return body

    @staticmethod
    async def _after(tasks: list, body: Any) -> Any:
        await asyncio.wait(tasks)
        return body

    def _requested_topics(self, topics: Any) -> tuple[list[str], tuple]:
        """(names, ids that name no topic). v10+ may name a topic by id only; an id we do not
        know is answered UNKNOWN_TOPIC_ID, and a topic with neither name nor id
        INVALID_TOPIC_EXCEPTION, as an invalid name is."""
        names, unknown_ids = [], []
        for t in topics:
            if t.name is not None:
                names.append(t.name)
                continue
            info = self.topics.by_id.get(getattr(t, "topic_id", None))
            if info is not None:
                names.append(info.name)
            else:
                unknown_ids.append(getattr(t, "topic_id", None))
        return names, tuple(unknown_ids)

    def _metadata(
        self,
        ctx: RequestContext,
        requested: list | None,
        auto_create: bool,
        topic_ops: bool = False,
        cluster_ops: bool = False,
        unknown_ids: tuple = (),
    ) -> Any:
        """With no authorizer every operation a resource supports is allowed: the full sets
        when asked (KIP-430), INT32_MIN ("not asked") otherwise."""
        brokers = tuple(
            ctx.nested("MetadataResponseBroker", node_id=n, host=host, port=port, rack=None)
            for n, host, port in self.brokers(ctx)
        )
        topics = self.topics
        state = self.topology.state
        answer = []
        for name, info in topics.describe(requested, auto_create=auto_create):
            partitions = []
            for p in range(info.partitions if info else 0):
                st = state(name, p)
                partitions.append(
                    ctx.nested(
                        "MetadataResponsePartition",
                        error_code=ErrorCode.none,
                        partition_index=p,
                        leader_id=st.leader,
                        leader_epoch=st.epoch,
                        replica_nodes=tuple(st.replicas),
                        isr_nodes=tuple(st.isr),
                        # A log found corrupt is Kafka's replica on an offline log dir: listed here,
                        # and its reads and writes answered KAFKA_STORAGE_ERROR.
                        offline_replicas=tuple(st.replicas)
                        if info.logs and info.logs[p].offline
                        else tuple(n for n in st.replicas if n not in st.isr),
                    )
                )
            answer.append(
                ctx.nested(
                    "MetadataResponseTopic",
                    error_code=info.error if info else ErrorCode.unknown_topic_or_partition,
                    name=name,
                    topic_id=info.topic_id if info else NO_TOPIC_ID,
                    is_internal=info.internal if info else False,
                    partitions=tuple(partitions),
                    topic_authorized_operations=TOPIC_OPERATIONS if topic_ops and info else NOT_ASKED,
                )
            )
        for topic_id in unknown_ids:
            answer.append(
                ctx.nested(
                    "MetadataResponseTopic",
                    error_code=ErrorCode.unknown_topic_id
                    if topic_id not in (None, NO_TOPIC_ID)
                    else ErrorCode.invalid_topic_exception,
                    name=None if ctx.version >= 12 else "",
                    topic_id=topic_id or NO_TOPIC_ID,
                    is_internal=False,
                    partitions=(),
                    topic_authorized_operations=NOT_ASKED,
                )
            )
        return ctx.response(
            throttle_time=0,
            brokers=brokers,
            cluster_id=self.config.cluster_id,
            controller_id=self.topology.controller(),
            topics=tuple(answer),
            cluster_authorized_operations=CLUSTER_OPERATIONS if cluster_ops else NOT_ASKED,
            error_code=0,  # v13 (KIP-1102): a broker sets REBOOTSTRAP_REQUIRED there; it never needs to here
        )


def advertised(ctx: RequestContext) -> tuple[str, int]:
    """The address a client is told: that of the listener it came in by."""
    return ctx.connection.listener.advertised
