"""CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords."""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..apis import Registry, RequestContext, errors_by_topic
from .configs import describe_topic
from .quotas import ControllerMutationQuota, quota_user
from .topics import TopicError, Topics

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DELETE_RECORDS = 19, 20, 37, 21
HIGH_WATERMARK = -1  # DeleteRecords: "everything so far"


MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka's controller: MAX_PARTITIONS_PER_BATCH
# The first versions at which a client knows THROTTLING_QUOTA_EXCEEDED (KIP-599): from these on
# the mutation quota is strict, before them permissive (the request passes, the answer is throttled).
STRICT_SINCE = {CREATE_TOPICS: 6, DELETE_TOPICS: 5, CREATE_PARTITIONS: 3}


class TopicAdmin:
    def __init__(
        self,
        topics: Topics,
        leader_error: Any = None,
        topology: Any = None,
        mutation_quota: ControllerMutationQuota | None = None,
    ) -> None:
        self.topics = topics
        # leader_error(ctx, topic, partition): DeleteRecords goes to each partition's leader
        # (coordinator.broker.data.DataPlane.leader_error); None: this broker leads all.
        self.leader_error = leader_error
        # controller_mutation_rate enforcement (coordinator.broker.quotas); None: no quota
        self.mutation_quota = mutation_quota
        # the brokers and their placements (coordinator.topology.Topology): manual assignments
        self.topology = topology

    def register(self, registry: Registry) -> None:
        registry.add(CREATE_TOPICS, range(0, 8), self.create_topics)
        registry.add(DELETE_TOPICS, range(0, 7), self.delete_topics)
        registry.add(CREATE_PARTITIONS, range(0, 4), self.create_partitions)
        registry.add(DELETE_RECORDS, range(0, 3), self.delete_records)

    def _charge(self, ctx: RequestContext, permits: int) -> None:
        """Kafka's ControllerMutationQuota.record for one topic's partitions (the controller's
        applyPartitionChangeQuota): TopicError THROTTLING_QUOTA_EXCEEDED when strict and the
        quota is already exceeded."""
        quota = self.mutation_quota
        if quota is None or not quota.enabled() or permits <= 0:
            return
        strict = ctx.version >= STRICT_SINCE[ctx.header.api_key]
        if not quota.take(quota_user(ctx.connection), ctx.header.client_id or "", permits, strict, _now_ms()):
            raise TopicError(E.throttling_quota_exceeded, "The throttling quota has been exceeded.")

    def _throttle(self, ctx: RequestContext) -> int:
        """The answer's throttle_time_ms (ControllerMutationQuota.throttleTime), for which the
        connection is also muted."""
        quota = self.mutation_quota
        if quota is None or not quota.enabled():
            return 0
        throttle = quota.throttle_time(quota_user(ctx.connection), ctx.header.client_id or "", _now_ms())
        mute = getattr(ctx.connection, "throttle", None)
        if throttle and mute is not None:
            mute(throttle)
        return throttle

    async def delete_records(self, ctx: RequestContext, req: Any) -> Any:
        """Move each partition's log start offset up to the given one (Kafka's
        deleteRecords): whole segments below it go, Fetch and ListOffsets answer from it."""
        topics = []
        for t in req.topics:
            rows = []
            for p in t.partitions:
                error, low = await self._delete_records(ctx, t.name, p.partition_index, p.offset)
                rows.append((p.partition_index, error, {"low_watermark": low}))
            topics.append((t.name, rows))
        return ctx.response(
            throttle_time=0,
            topics=errors_by_topic(ctx, "DeleteRecordsTopicResult", "DeleteRecordsPartitionResult", topics),
        )

    async def _delete_records(self, ctx: RequestContext, topic: str, partition: int, offset: int) -> tuple[E, int]:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return E.unknown_topic_or_partition, -1
        if self.leader_error is not None and self.leader_error(ctx, topic, partition) != E.none:
            return E.not_leader_or_follower, -1
        if info.internal:  # its records are the coordinator's state
            return E.invalid_topic_exception, -1
        if "delete" not in info.values.get("cleanup.policy", ["delete"]):  # Kafka: only a deletable log
            return E.policy_violation, -1
        plog = info.logs[partition]
        if offset == HIGH_WATERMARK:
            offset = plog.high_watermark
        if not 0 <= offset <= plog.high_watermark:
            return E.offset_out_of_range, -1
        try:
            await plog.delete_records_before(offset)
        except OSError:
            return E.kafka_storage_error, -1
        return E.none, plog.log_start_offset

    def _too_many_partitions(self, counts: list[int]) -> bool:
        """Kafka's controller refuses a request that would create more than 10,000 partitions
        at once (POLICY_VIOLATION): creating each costs files, and here the event loop's time."""
        return (
            sum(max(n if n != -1 else self.topics.default_partitions, 0) for n in counts) > MAX_PARTITIONS_PER_REQUEST
        )

    async def create_topics(self, ctx: RequestContext, req: Any) -> Any:
        results = []
        seen: set[str] = set()
        too_many = self._too_many_partitions(
            [len(t.assignments) if t.assignments else t.num_partitions for t in req.topics]
        )
        for t in req.topics:
            error, message, info = E.none, None, None
            try:
                if too_many:
                    raise TopicError(E.policy_violation, "Excessively large number of partitions per request.")
                if t.name in seen:
                    raise TopicError(E.invalid_request, f"topic {t.name!r} is listed twice")
                seen.add(t.name)
                assignments = self._manual_assignment(t) if t.assignments else None
                if assignments is not None:
                    partitions, rf = len(assignments), len(assignments[0])
                else:
                    partitions, rf = t.num_partitions, t.replication_factor
                configs = {c.name: c.value for c in t.configs}
                info = await self.topics.create(t.name, partitions, rf, configs, validate_only=True)
                if not req.validate_only:  # (as Kafka, a validation does not count against the quota)
                    self._charge(ctx, info.partitions)
                    info = await self.topics.create(t.name, partitions, rf, configs)
                    if assignments is not None and self.topology is not None:
                        await self.topology.assign(t.name, 0, assignments)
            except TopicError as e:
                error, message, info = e.code, str(e), None
            results.append(
                ctx.nested(
                    "CreatableTopicResult",
                    name=t.name,
                    topic_id=info.topic_id if info else None,
                    error_code=error,
                    error_message=message,
                    topic_config_error_code=0,
                    num_partitions=info.partitions if info else -1,
                    replication_factor=info.replication_factor if info else -1,
                    configs=self._configs_of(ctx, info),
                )
            )
        return ctx.response(throttle_time=self._throttle(ctx), topics=tuple(results))

    def _configs_of(self, ctx: RequestContext, info: Any) -> tuple[Any, ...]:
        """v5+: the configs of the topic created (or that would be), as Kafka's controller lists
        them; none for a topic that failed."""
        if info is None or ctx.version < 5:
            return ()
        return tuple(
            ctx.nested(
                "CreatableTopicConfigs",
                name=e.name,
                value=None if e.sensitive else e.value,
                read_only=e.read_only,
                config_source=e.source,
                is_sensitive=e.sensitive,
            )
            for e in describe_topic(info.configs, self.topics.broker_configs)
        )

    def _manual_assignment(self, t: Any) -> list[list[int]]:
        """A CreateTopics topic's replica assignment, by partition, checked as Kafka's
        controller checks it (ReplicationControlManager.createTopic)."""
        if t.replication_factor != -1:
            raise TopicError(
                E.invalid_request,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            )
        if t.num_partitions != -1:
            raise TopicError(
                E.invalid_request, "A manual partition assignment was specified, but numPartitions was not set to -1."
            )
        by_partition: dict[int, list[int]] = {}
        rf = None
        for a in t.assignments:
            if a.partition_index in by_partition:
                raise TopicError(
                    E.invalid_replica_assignment,
                    f"Found multiple manual partition assignments for partition {a.partition_index}",
                )
            self._check_assignment(list(a.broker_ids), rf, a.partition_index)
            rf = len(a.broker_ids)
            by_partition[a.partition_index] = list(a.broker_ids)
        if sorted(by_partition) != list(range(len(by_partition))):
            raise TopicError(
                E.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence"
            )
        return [by_partition[p] for p in range(len(by_partition))]

    def _check_assignment(self, replicas: list[int], rf: int | None, partition: int) -> None:
        topology = self.topology
        if topology is None:  # (no topology: one broker, node 1, as the tests' bare TopicAdmin)
            return
        refused = topology.check_manual_assignment(replicas, rf)
        if refused is None and not topology.any_alive(replicas):
            refused = (
                f"All brokers specified in the manual partition assignment for partition {partition} are fenced"
                " or in controlled shutdown."
            )
        if refused is not None:
            raise TopicError(E.invalid_replica_assignment, refused)

    async def delete_topics(self, ctx: RequestContext, req: Any) -> Any:
        if ctx.version >= 6:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        else:
            wanted = [(name, None) for name in req.topic_names]
        results = []
        for name, topic_id in wanted:
            error, message = E.none, None
            if name is None and topic_id is not None:
                info = self.topics.by_id.get(topic_id)
                name = info.name if info else None
                if name is None:
                    error, message = E.unknown_topic_id, f"no topic with id {topic_id}"
            if error == E.none:
                try:
                    existing = self.topics.get(name) if name is not None else None
                    if existing is not None:
                        self._charge(ctx, existing.partitions)
                    info = await self.topics.delete(name)
                    topic_id = info.topic_id
                except TopicError as e:
                    error, message = e.code, str(e)
            results.append(
                ctx.nested(
                    "DeletableTopicResult", name=name, topic_id=topic_id, error_code=error, error_message=message
                )
            )
        return ctx.response(throttle_time=self._throttle(ctx), responses=tuple(results))

    async def create_partitions(self, ctx: RequestContext, req: Any) -> Any:
        results = []
        too_many = self._too_many_partitions(
            [t.count - (info.partitions if (info := self.topics.get(t.name)) else 0) for t in req.topics]
        )
        for t in req.topics:
            error, message = E.none, None
            try:
                if too_many:
                    raise TopicError(E.policy_violation, "Excessively large number of partitions per request.")
                await self.topics.add_partitions(t.name, t.count, validate_only=True)
                existing = self.topics.get(t.name)
                first = existing.partitions if existing else 0
                assignments = None
                if t.assignments is not None:  # (null: placed as the brokers' default)
                    if len(t.assignments) != t.count - first:
                        raise TopicError(
                            E.invalid_replica_assignment,
                            f"Attempted to add {t.count - first} additional partition(s), but only"
                            f" {len(t.assignments)} assignment(s) were specified.",
                        )
                    rf = self.topology.state(t.name, 0).replicas if self.topology is not None else [1]
                    assignments = [list(a.broker_ids) for a in t.assignments]
                    for i, replicas in enumerate(assignments):
                        self._check_assignment(replicas, len(rf), first + i)
                if not req.validate_only:
                    self._charge(ctx, t.count - first)
                    await self.topics.add_partitions(t.name, t.count)
                    if assignments is not None and self.topology is not None:
                        await self.topology.assign(t.name, first, assignments)
            except TopicError as e:  # (Kafka's controller names no unknown topic)
                error, message = e.code, None if e.code == E.unknown_topic_or_partition else str(e)
            results.append(
                ctx.nested("CreatePartitionsTopicResult", name=t.name, error_code=error, error_message=message)
            )
        return ctx.response(throttle_time=self._throttle(ctx), results=tuple(results))


def _now_ms() -> int:
    return int(time.time() * 1000)
