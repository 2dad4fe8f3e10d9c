"""Cluster-level APIs: FindCoordinator and Metadata, answered from the topology
(coordinator/topology.py): the live brokers, each partition's leader, epoch, replicas and
ISR, and each group's or transactional id's coordinator, the leader of its partition of
`__consumer_offsets` or `__transaction_state`. Every broker gives the same answers, with
the addresses of the listener protocol the client came in by.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from protocol.error_messages import default_message
from protocol.messages import encode_body

from protocol.wire import Raw

from .apis import RequestContext, errors_by_topic
from .broker.topics import TopicError, validate_name
from .log.offsets import TOPIC as OFFSETS_TOPIC
from .log.partition import PartitionLog

if TYPE_CHECKING:
    from .apis import Registry
    from .config import Config
    from .topology import Topology

FIND_COORDINATOR, METADATA, DESCRIBE_TOPIC_PARTITIONS, DESCRIBE_QUORUM = 10, 3, 75, 55
METADATA_TOPIC = "__cluster_metadata"  # the KRaft log DescribeQuorum describes
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
# Kafka's Topic.isInternal: what every describe marks internal, whether this server has it or not
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class Cluster:
    def __init__(self, config: Config, topics: Any, groups: Any, topology: Topology) -> None:
        self.config = config
        self.topics = topics  # coordinator.broker.topics.Topics
        self.groups = groups  # coordinator.groups.runtime.CoordinatorRuntime
        self.topology = topology
        self._cache: dict[tuple[Any, ...], bytes] = {}
        self._cache_stamp: tuple[Any, ...] = ()

    def register(self, registry: Registry) -> None:
        registry.add(FIND_COORDINATOR, range(0, 7), self.find_coordinator)
        registry.add(METADATA, range(0, 14), self.metadata)
        registry.add(DESCRIBE_TOPIC_PARTITIONS, range(0, 1), self.describe_topic_partitions)
        registry.add(DESCRIBE_QUORUM, range(0, 3), self.describe_quorum)

    def brokers(self, ctx: RequestContext) -> list[tuple[int, str, int]]:
        """(node id, host, port) of the live brokers, as clients of this listener reach them."""
        protocol = ctx.connection.listener.protocol
        return [(n, *self.topology.endpoint(n, protocol)) for n in self.topology.live()]

    # FindCoordinator ------------------------------------------------------------------

    def _coordinator(self, ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, int, str, int]:
        """(error, node, host, port) for one coordinator key. As Kafka's getCoordinator, an empty
        key is a key like any other (it hashes to a partition of the internal topic)."""
        protocol = ctx.connection.listener.protocol
        if key_type == KEY_TYPE_GROUP:
            runtime = self.groups
            if runtime is not None and runtime.shard_for(key).offline is not None:
                # Its __consumer_offsets partition is offline (corrupt): no coordinator for now.
                return ErrorCode.coordinator_not_available, -1, "", -1
            self.topics.create_internal(OFFSETS_TOPIC)  # (Kafka creates it at its first use)
            node = self.topology.coordinator_of(key)
            return ErrorCode.none, node, *self.topology.endpoint(node, protocol)
        if key_type == KEY_TYPE_TRANSACTION:
            self.topics.create_internal(TRANSACTION_TOPIC)
            node = self.topology.transaction_coordinator_of(key)
            return ErrorCode.none, node, *self.topology.endpoint(node, protocol)
        # The share-state coordinator's key type (2), which only brokers ask for, and unknown ones.
        return ErrorCode.invalid_request, -1, "", -1

    def find_coordinator(self, ctx: RequestContext, req: Any) -> Any:
        if ctx.version < 4:
            # Kafka's answer carries Errors.message(): "NONE" when found, else the error's default text.
            key_type = getattr(req, "key_type", KEY_TYPE_GROUP)
            err, node, host, port = self._coordinator(ctx, req.key, key_type)
            msg = default_message(err.value) if err != ErrorCode.none else "NONE"
            return ctx.response(throttle_time=0, error_code=err, error_message=msg, node_id=node, host=host, port=port)
        key_type = req.key_type
        coordinators = []
        for key in req.coordinator_keys:  # (v4+: Kafka leaves each message at its default, "")
            err, node, host, port = self._coordinator(ctx, key, key_type)
            coordinators.append(
                ctx.nested("Coordinator", key=key, node_id=node, host=host, port=port, error_code=err, error_message="")
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
    async def _after(tasks: list[Any], body: Any) -> Any:
        await asyncio.wait(tasks)
        return body

    # DescribeQuorum ---------------------------------------------------------------------

    def describe_quorum(self, ctx: RequestContext, req: Any) -> Any:
        """The KRaft quorum as a combined broker-and-controller node describes it
        (KafkaRaftClient.handleDescribeQuorumRequest): one voter, the controller, leader at
        epoch 1 of `__cluster_metadata`, caught up now; the other brokers of `--brokers N` as
        observers. The high watermark counts the catalog's changes (this server keeps no
        metadata log). Anything but exactly `__cluster_metadata` partition 0:
        UNKNOWN_TOPIC_OR_PARTITION for each partition named."""
        asked = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
        if len(req.topics) != 1 or asked != [(METADATA_TOPIC, 0)]:
            unknown = ErrorCode.unknown_topic_or_partition
            topics = errors_by_topic(
                ctx,
                "TopicData",
                "PartitionData",
                ((t.topic_name, [(p.partition_index, unknown) for p in t.partitions]) for t in req.topics),
                name="topic_name",
                error_message="This server does not host this topic-partition.",
                leader_id=0,
                leader_epoch=0,
                high_watermark=0,
                current_voters=(),
                observers=(),
            )
            return ctx.response(error_code=ErrorCode.none, error_message="", topics=topics, nodes=())
        leader = self.topology.controller()
        offset = self.topics.changes
        now = int(time.time() * 1000)

        def replica(node: int) -> Any:
            return ctx.nested(
                "ReplicaState",
                replica_id=node,
                replica_directory_id=NO_TOPIC_ID,  # (none known: a static quorum, kraft.version 0)
                log_end_offset=offset,
                last_fetch_timestamp=now,
                last_caught_up_timestamp=now,
            )

        partition = ctx.nested(
            "PartitionData",
            partition_index=0,
            error_code=ErrorCode.none,
            error_message="",
            leader_id=leader,
            leader_epoch=1,
            high_watermark=offset,
            current_voters=(replica(leader),),
            observers=tuple(replica(n) for n in self.topology.live() if n != leader),
        )
        nodes: tuple[Any, ...] = ()
        if ctx.version >= 2:
            host, port = self.topology.endpoint(leader, ctx.connection.listener.protocol)
            # (no controller listener of its own: the voter is reached where its broker is)
            listener = ctx.nested("Listener", name="CONTROLLER", host=host, port=port)
            nodes = (ctx.nested("Node", node_id=leader, listeners=(listener,)),)
        return ctx.response(
            error_code=ErrorCode.none,
            error_message="",
            topics=(ctx.nested("TopicData", topic_name=METADATA_TOPIC, partitions=(partition,)),),
            nodes=nodes,
        )

    # DescribeTopicPartitions ------------------------------------------------------------

    def describe_topic_partitions(self, ctx: RequestContext, req: Any) -> Any:
        """KIP-966's paginated describe, as Kafka's DescribeTopicPartitionsRequestHandler and
        KRaftMetadataCache.describeTopicResponse: the topics named (none: every topic) from the
        cursor's on, in name order, at most `response_partition_limit` partitions in all (capped
        by max.request.partition.size.limit), and a next cursor where it stopped. A named topic
        that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal
        name); with all topics asked, only existing ones are listed. ELR lists are empty: the
        data is stored once, so no replica is ever an eligible leader outside the ISR."""
        cursor = req.cursor
        start_name = cursor.topic_name if cursor is not None else ""
        fetch_all = not req.topics
        topics = self.topics.topics
        if fetch_all:
            names = sorted(n for n in topics if n >= start_name)
        else:
            names = sorted({t.name for t in req.topics if t.name >= start_name})
            if cursor is not None and cursor.topic_name not in names:
                return self._describe_topic_partitions_failed(ctx, req)  # (Kafka's InvalidRequestException)
        if cursor is not None and cursor.partition_index < 0:
            return self._describe_topic_partitions_failed(ctx, req)
        limit = self.topics.broker_configs.value("max.request.partition.size.limit")
        remaining = max(min(limit, req.response_partition_limit), 1)
        answer = []
        next_cursor = None
        for name in names:
            if remaining <= 0:  # (the limit was reached exactly at the previous topic's end)
                next_cursor = ctx.nested("Cursor", topic_name=name, partition_index=0)
                break
            info = topics.get(name)
            if info is None:
                if fetch_all:
                    continue
                try:
                    validate_name(name)
                    error = ErrorCode.unknown_topic_or_partition
                except TopicError:
                    error = ErrorCode.invalid_topic_exception
                answer.append(
                    ctx.nested(
                        "DescribeTopicPartitionsResponseTopic",
                        error_code=error,
                        name=name,
                        topic_id=NO_TOPIC_ID,
                        is_internal=name in KAFKA_INTERNAL_TOPICS,
                        partitions=(),
                        topic_authorized_operations=TOPIC_OPERATIONS,  # (Kafka sets it on every row it describes)
                    )
                )
                continue
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            end = min(info.partitions, first + remaining)
            partitions = []
            for p in range(first, end):
                partitions.append(
                    ctx.nested(
                        "DescribeTopicPartitionsResponsePartition",
                        error_code=ErrorCode.none,
                        partition_index=p,
                        eligible_leader_replicas=(),
                        last_known_elr=(),
                        **self._replicas(name, info, p),
                    )
                )
            answer.append(
                ctx.nested(
                    "DescribeTopicPartitionsResponseTopic",
                    error_code=ErrorCode.none,
                    name=name,
                    topic_id=info.topic_id,
                    is_internal=name in KAFKA_INTERNAL_TOPICS,
                    partitions=tuple(partitions),
                    topic_authorized_operations=TOPIC_OPERATIONS,
                )
            )
            if end < info.partitions:
                next_cursor = ctx.nested("Cursor", topic_name=name, partition_index=end)
                break
            remaining -= len(partitions)
        return ctx.response(throttle_time=0, topics=tuple(answer), next_cursor=next_cursor)

    @staticmethod
    def _describe_topic_partitions_failed(ctx: RequestContext, req: Any) -> Any:
        """INVALID_REQUEST for each topic named, as DescribeTopicPartitionsRequest.getErrorResponse."""
        return ctx.response(
            throttle_time=0,
            topics=tuple(
                ctx.nested(
                    "DescribeTopicPartitionsResponseTopic",
                    error_code=ErrorCode.invalid_request,
                    name=t.name,
                    topic_id=NO_TOPIC_ID,
                    is_internal=False,
                    partitions=(),
                    topic_authorized_operations=NOT_ASKED,
                )
                for t in req.topics
            ),
            next_cursor=None,
        )

    def _replicas(self, name: str, info: Any, p: int) -> dict[str, Any]:
        """A partition's leader, epoch and replicas as Metadata and DescribeTopicPartitions describe it."""
        st = self.topology.state(name, p)
        return {
            "leader_id": st.leader,
            "leader_epoch": st.epoch,
            "replica_nodes": tuple(st.replicas),
            "isr_nodes": tuple(st.isr),
            # A log found corrupt is Kafka's replica on an offline log dir: listed here,
            # and its reads and writes answered KAFKA_STORAGE_ERROR.
            "offline_replicas": tuple(st.replicas)
            if info.logs and info.logs[p].offline
            else tuple(n for n in st.replicas if n not in st.isr),
        }

    def _requested_topics(self, topics: Any) -> tuple[list[str], tuple[Any, ...]]:
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
        requested: list[Any] | None,
        auto_create: bool,
        topic_ops: bool = False,
        cluster_ops: bool = False,
        unknown_ids: tuple[Any, ...] = (),
    ) -> Any:
        """With no authorizer every operation a resource supports is allowed: the full sets
        when asked (KIP-430), INT32_MIN ("not asked") otherwise."""
        brokers = tuple(
            ctx.nested("MetadataResponseBroker", node_id=n, host=host, port=port, rack=None)
            for n, host, port in self.brokers(ctx)
        )
        topics = self.topics
        answer = []
        for name, info in topics.describe(requested, auto_create=auto_create):
            partitions = []
            for p in range(info.partitions if info else 0):
                partitions.append(
                    ctx.nested(
                        "MetadataResponsePartition",
                        error_code=ErrorCode.none,
                        partition_index=p,
                        **self._replicas(name, info, p),
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
    return cast("tuple[str, int]", ctx.connection.listener.advertised)
