"""Wire handlers of StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89), KIP-1071, versions
0 and 1 as Kafka 4.4 serves them (version 1 from protocol/streams_*_v1.py: kio 0.6.5 has only 0).

Each request goes to its group's shard; the logic lives in streams_manager.py, and this module
only maps fields. No topology description plugin is configured here (as on a Kafka broker
without group.streams.topology.description.plugin.class): a heartbeat never asks for a
description, and StreamsGroupDescribe v1 reports NOT_STORED when asked for one.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol import streams_records as R

from ...apis import Registry, RequestContext
from ..api import described_group, describe_modern_groups, member_identity
from ..routed_apis import ShardRoutedApis
from ..modern.modern_manager import ApiError
from .streams_group import StreamsGroup, StreamsMember, Tasks, TasksTuple
from .streams_manager import ASSIGNOR, StreamsHeartbeatRequest, StreamsHeartbeatResult, validate_request

STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89
NOT_REQUESTED, NOT_STORED = 0, 1  # TopologyDescriptionStatus (v1)


def _tasks(ids: Any) -> Tasks:
    out: dict[str, frozenset[int]] = {}
    for t in ids:
        out[t.subtopology_id] = out.get(t.subtopology_id, frozenset()) | frozenset(t.partitions)
    return {s: ps for s, ps in out.items() if ps}


def _offsets(offsets: Any) -> dict[tuple[str, int], int] | None:
    if offsets is None:
        return None
    return {(o.subtopology_id, o.partition): o.offset for o in offsets}


def _topic_info(t: Any) -> R.TopicInfo:
    return R.TopicInfo(t.name, t.partitions, t.replication_factor, tuple((kv.key, kv.value) for kv in t.topic_configs))


def topology_of(req: Any) -> R.StreamsGroupTopologyValue | None:
    """The request's topology as Kafka stores it (StreamsGroupTopologyValue)."""
    t = req.topology
    if t is None:
        return None
    return R.StreamsGroupTopologyValue(
        t.epoch,
        tuple(
            R.Subtopology(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.source_topic_regex),
                tuple(_topic_info(x) for x in s.state_changelog_topics),
                tuple(s.repartition_sink_topics),
                tuple(_topic_info(x) for x in s.repartition_source_topics),
                tuple(
                    R.CopartitionGroup(
                        tuple(g.source_topics), tuple(g.source_topic_regex), tuple(g.repartition_source_topics)
                    )
                    for g in s.copartition_groups
                ),
            )
            for s in t.subtopologies
        ),
    )


def request_of(ctx: RequestContext, req: Any) -> StreamsHeartbeatRequest:
    given = (req.active_tasks is not None, req.standby_tasks is not None, req.warmup_tasks is not None)
    owned = (
        TasksTuple(_tasks(req.active_tasks), _tasks(req.standby_tasks), _tasks(req.warmup_tasks))
        if all(given)
        else None
    )
    endpoint = req.user_endpoint
    return StreamsHeartbeatRequest(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.endpoint_information_epoch,
        req.instance_id,
        req.rack_id,
        int(req.rebalance_timeout.total_seconds() * 1000)
        if hasattr(req.rebalance_timeout, "total_seconds")
        else int(req.rebalance_timeout),
        topology_of(req),
        owned,
        req.process_id,
        None if endpoint is None else (endpoint.host, int(endpoint.port)),
        None if req.client_tags is None else {kv.key: kv.value for kv in req.client_tags},
        _offsets(req.task_offsets),
        _offsets(req.task_end_offsets),
        req.shutdown_application,
        ctx.header.client_id or "",
        ctx.client_address,
        given,
    )


class StreamsGroupApis(ShardRoutedApis):
    def register(self, registry: Registry) -> None:
        registry.add(STREAMS_GROUP_HEARTBEAT, range(0, 2), self.streams_group_heartbeat)
        registry.add(STREAMS_GROUP_DESCRIBE, range(0, 2), self.streams_group_describe)

    # StreamsGroupHeartbeat --------------------------------------------------------------

    def streams_group_heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        r = request_of(ctx, req)
        try:
            validate_request(r)
        except ApiError as e:
            return self._response(ctx, StreamsHeartbeatResult(e.code, str(e), r.member_id, r.member_epoch))
        shard, error = self._route(ctx, r.group_id)
        if shard is None:
            message = "The coordinator is not available." if error == E.not_coordinator else None
            return self._response(ctx, StreamsHeartbeatResult(error, message, r.member_id, r.member_epoch))
        return self.runtime.answer(
            ctx,
            shard,
            shard.streams.heartbeat(r),
            lambda result: self._response(ctx, result),
            shard.streams.heartbeat_failed(r.member_id),
        )

    @staticmethod
    def _task_ids(ctx: RequestContext, tasks: Tasks) -> tuple[Any, ...]:
        return tuple(
            ctx.nested("TaskIds", subtopology_id=s, partitions=tuple(sorted(ps))) for s, ps in sorted(tasks.items())
        )

    def _response(self, ctx: RequestContext, r: StreamsHeartbeatResult) -> Any:
        a = r.assignment
        status = (
            None
            if r.status is None
            else tuple(ctx.nested("Status", status_code=code, status_detail=detail) for code, detail in r.status)
        )
        endpoints = None
        if r.partitions_by_endpoint is not None:
            endpoints = tuple(
                ctx.nested(
                    "EndpointToPartitions",
                    user_endpoint=ctx.nested("Endpoint", host=host, port=port),
                    active_partitions=tuple(
                        ctx.nested("TopicPartition", topic=t, partitions=tuple(ps)) for t, ps in active
                    ),
                    standby_partitions=tuple(
                        ctx.nested("TopicPartition", topic=t, partitions=tuple(ps)) for t, ps in standby
                    ),
                )
                for (host, port), active, standby in r.partitions_by_endpoint
            )
        if r.error != E.none:
            return heartbeat_error(ctx, r.error, r.message)
        return ctx.response(
            throttle_time=0,
            error_code=E.none,
            error_message=None,
            member_id=r.member_id,
            member_epoch=r.member_epoch,
            heartbeat_interval=r.heartbeat_interval_ms,
            # v0's AcceptableRecoveryLagLegacy: Kafka 4.4 leaves it 0; v1's AcceptableRecoveryLag
            acceptable_recovery_lag=0 if ctx.version == 0 else r.acceptable_recovery_lag,
            task_offset_interval=r.task_offset_interval_ms,
            status=status,
            active_tasks=None if a is None else self._task_ids(ctx, a.active),
            standby_tasks=None if a is None else self._task_ids(ctx, a.standby),
            warmup_tasks=None if a is None else self._task_ids(ctx, a.warmup),
            topology_description_required=False,
            endpoint_information_epoch=r.endpoint_information_epoch,
            partitions_by_user_endpoint=endpoints,
        )

    # StreamsGroupDescribe ---------------------------------------------------------------

    def streams_group_describe(self, ctx: RequestContext, req: Any) -> Any:
        wants_description = getattr(req, "include_topology_description", False)

        def undescribed(ctx: RequestContext, group_id: str, error: int, message: str | None, ops: int) -> Any:
            # (an undescribed group names no assignor: the field stays null)
            return described_group(ctx, group_id, ops, assignor=None, error=error, message=message, topology=None)

        def entry(shard: Any, group: StreamsGroup, ops: int) -> Any:
            return described_group(
                ctx,
                group.group_id,
                ops,
                group,
                ASSIGNOR,
                tuple(self._member(ctx, group, m) for m in group.members.values()),
                topology=self._topology(ctx, group),
                topology_description=None,
                topology_description_status=NOT_STORED if wants_description else NOT_REQUESTED,
            )

        return describe_modern_groups(
            ctx,
            req.group_ids,
            req.include_authorized_operations,
            self._route,
            lambda shard: shard.streams,
            entry,
            lambda group_id: self.runtime.shard_for(group_id).partition,
            undescribed,
        )

    @staticmethod
    def _topology(ctx: RequestContext, group: StreamsGroup) -> Any:
        """The topology as configured: subtopologies with their partition counts set, or
        null subtopologies while the topics are not ready (StreamsGroup.asDescribedGroup)."""
        if group.topology is None:
            return None
        configured = group.configured
        subtopologies = None
        if configured is not None and configured.subtopologies is not None and group.topology is not None:
            infos = {
                t.name: t
                for s in group.topology.subtopologies
                for t in (*s.state_changelog_topics, *s.repartition_source_topics)
            }

            def topic_info(name: str, partitions: int) -> Any:
                info = infos.get(name)
                return ctx.nested(
                    "TopicInfo",
                    name=name,
                    partitions=partitions,
                    replication_factor=info.replication_factor if info is not None else 0,
                    topic_configs=tuple(
                        ctx.nested("KeyValue", key=k, value=v)
                        for k, v in sorted(info.topic_configs if info is not None else ())
                    ),
                )

            subtopologies = tuple(
                ctx.nested(
                    "Subtopology",
                    subtopology_id=sid,
                    source_topics=tuple(sorted(c.source_topics)),
                    repartition_sink_topics=tuple(sorted(c.repartition_sink_topics)),
                    state_changelog_topics=tuple(topic_info(n, p) for n, p in sorted(c.state_changelog_topics.items())),
                    repartition_source_topics=tuple(
                        topic_info(n, p) for n, p in sorted(c.repartition_source_topics.items())
                    ),
                )
                for sid, c in sorted(configured.subtopologies.items())
            )
        return ctx.nested("Topology", epoch=group.topology.epoch, subtopologies=subtopologies)

    def _member(self, ctx: RequestContext, group: StreamsGroup, m: StreamsMember) -> Any:
        def assignment(t: TasksTuple) -> Any:
            return ctx.nested(
                "Assignment",
                active_tasks=self._describe_tasks(ctx, t.active),
                standby_tasks=self._describe_tasks(ctx, t.standby),
                warmup_tasks=self._describe_tasks(ctx, t.warmup),
            )

        def offsets(values: dict[tuple[str, int], int]) -> tuple[Any, ...]:
            return tuple(
                ctx.nested("TaskOffset", subtopology_id=s, partition=p, offset=o)
                for (s, p), o in sorted(values.items())
            )

        return ctx.nested(
            "Member",
            **member_identity(m),
            instance_id=m.instance_id,
            topology_epoch=m.topology_epoch,
            process_id=m.process_id,
            user_endpoint=None
            if m.user_endpoint is None
            else ctx.nested("Endpoint", host=m.user_endpoint[0], port=m.user_endpoint[1]),
            client_tags=tuple(ctx.nested("KeyValue", key=k, value=v) for k, v in sorted(m.client_tags.items())),
            task_offsets=offsets(m.task_offsets),
            task_end_offsets=offsets(m.task_end_offsets),
            assignment=assignment(m.assigned),
            target_assignment=assignment(group.target_tuples.get(m.member_id, TasksTuple())),
            is_classic=False,
        )

    @staticmethod
    def _describe_tasks(ctx: RequestContext, tasks: Tasks) -> tuple[Any, ...]:
        return tuple(
            ctx.nested("TaskIds", subtopology_id=s, partitions=tuple(sorted(ps))) for s, ps in sorted(tasks.items())
        )


def heartbeat_error(ctx: RequestContext, error: int, message: str | None = None) -> Any:
    """A StreamsGroupHeartbeat failed: Kafka answers an error with a fresh response (no member
    id, epoch 0, no status)."""
    return ctx.response(
        throttle_time=0,
        error_code=error,
        error_message=message,
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
