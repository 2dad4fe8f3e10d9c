"""StreamsGroupHeartbeat and StreamsGroupDescribe (KIP-1071), as Kafka 4.4's GroupMetadataManager
(streamsGroupHeartbeat, streamsGroupLeave, the streams session and rebalance timeouts, the
initial rebalance delay).

One manager per shard, over the shard's groups (one namespace with the other types). A
heartbeat runs in one synchronous section. Everything that can refuse it is checked first
(the group, the member and its epoch, the topology, the owned tasks), so a refused heartbeat
changes nothing; then the member is updated, the topology set (the first member's), the
topology's topics checked against the broker's (topology.configure_topics: the statuses
Kafka reports, and the internal topics to create), the group epoch bumped if what the
assignment depends on changed, the target computed (assignor.py: Kafka's sticky task
assignor, then the warm-up refinement), and the member moved towards it
(streams_group.reconcile). The answer waits until the records that changed are durable.
Persistence, sessions and the assignment interval are the modern groups'
(ModernGroupManager): records diffed against `written`, a failed write rebuilding the groups
it touched, `replay` keeping `stored` for a restart.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from kio.schema.errors import ErrorCode as E

from protocol import streams_records as R
from protocol.group_records import GroupMetadataKey

from ..classic.classic_group import ClassicGroup
from ..clock import Clock
from ..metadata_hash import metadata_hash
from ..modern.modern_group import static_successor
from ..modern.modern_manager import ApiError, ModernGroupManager, known_member, static_member
from ..shard_context import CoordinatorResult, ShardContext
from ..settings import StreamsGroupConfig
from ..topic_image import TopicImage
from . import streams_group
from .assignor import AssignorMember, sticky_assign
from .streams_group import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    StreamsGroup,
    StreamsMember,
    TasksTuple,
    member_metadata,
    reconcile,
)
from .topology import (
    ASSIGNMENT_DELAYED,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    ConfiguredTopology,
    InternalTopic,
    RequestError,
    check_request_topology,
    configure_topics,
    required_topics,
)

log = logging.getLogger(__name__)

ASSIGNOR = "sticky"


@dataclass
class StreamsHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: R.StreamsGroupTopologyValue | None = None
    active: TasksTuple | None = None  # the three owned task lists, or None (unchanged)
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] | None = None
    task_offsets: dict[tuple[str, int], int] | None = None
    task_end_offsets: dict[tuple[str, int], int] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    # raw owned lists, to check the "all or none" rule: (active, standby, warmup) each None or given
    owned_given: tuple[bool, bool, bool] = (False, False, False)


@dataclass
class StreamsHeartbeatResult:
    error: int
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    acceptable_recovery_lag: int = 0
    task_offset_interval_ms: int = 0
    status: list[tuple[int, str]] | None = None
    assignment: TasksTuple | None = None
    endpoint_information_epoch: int = 0
    # (host, port) -> (active partitions, standby partitions) as [(topic, partitions)], or None
    partitions_by_endpoint: (
        list[tuple[tuple[str, int], list[tuple[str, list[int]]], list[tuple[str, list[int]]]]] | None
    ) = None
    to_create: dict[str, InternalTopic] = field(default_factory=dict)


def validate_request(r: StreamsHeartbeatRequest) -> None:
    """GroupCoordinatorService.throwIfStreamsGroupHeartbeatRequestIsInvalid (and the features
    Kafka 4.4 does not support yet): INVALID_REQUEST or STREAMS_INVALID_TOPOLOGY."""

    def bad(message: str) -> ApiError:
        return ApiError(E.invalid_request, message)

    if r.member_id == "":
        raise bad("MemberId can't be empty.")
    if r.group_id == "":
        raise bad("GroupId can't be empty.")
    if r.instance_id == "":
        raise bad("InstanceId can't be empty.")
    if r.rack_id == "":
        raise bad("RackId can't be empty.")
    active, standby, warmup = r.owned_given
    if r.member_epoch == 0:
        if r.rebalance_timeout_ms == -1:
            raise bad("RebalanceTimeoutMs must be provided in first request.")
        if r.active is not None:
            for name, tasks in (("ActiveTasks", r.active.active), ("StandbyTasks", r.active.standby)):
                if tasks:
                    raise bad(f"{name} must be empty when (re-)joining.")
            if r.active.warmup:
                raise bad("WarmupTasks must be empty when (re-)joining.")
        if r.topology is None:
            raise bad("Topology must be non-null when (re-)joining.")
        try:
            check_request_topology(r.topology)
        except RequestError as e:
            raise ApiError(e.code, str(e)) from None
    elif r.member_epoch == LEAVE_STATIC_EPOCH:
        if r.instance_id is None:
            raise bad("InstanceId can't be null.")
    elif r.member_epoch < LEAVE_STATIC_EPOCH:
        raise bad(f"MemberEpoch is {r.member_epoch}, but must be greater than or equal to -2.")
    if (active or standby or warmup) and not (active and standby and warmup):
        raise bad("If one task-type is non-null, all must be non-null.")
    if r.member_epoch != 0 and r.topology is not None:
        raise bad("Topology can only be provided when (re-)joining.")


# What a static member's successor takes over: all but its identity, sessions and task offsets.
_STATIC_CARRIED = (
    "instance_id",
    "rack_id",
    "rebalance_timeout_ms",
    "topology_epoch",
    "process_id",
    "user_endpoint",
    "client_tags",
    "state",
    "assigned",
    "pending_revocation",
    "active_epochs",
)


class StreamsGroupManager(ModernGroupManager):
    kind, group_type, model, records = "streams", StreamsGroup, streams_group, R

    def __init__(self, shard: ShardContext, clock: Clock, image: TopicImage) -> None:
        super().__init__(shard, clock, image)
        self._creating: set[str] = set()  # internal topics being created now

    @property
    def config(self) -> StreamsGroupConfig:
        return self.shard.runtime.streams_config

    def setting(self, group_id: str, name: str) -> int:
        return self.group_setting(group_id, f"streams.{name.replace('_', '.')}", getattr(self.config, name))

    # persistence ----------------------------------------------------------------------

    def replaceable(self, current: Any) -> bool:
        return type(current) is ClassicGroup and current.is_empty()

    def restored(self, group: StreamsGroup) -> None:
        if group.topology is not None:
            group.configured = configure_topics(group.topology, self._partitions_of)

    def stale_keys(self, group: StreamsGroup, written: dict[Any, Any]) -> list[Any]:
        # A member back with no target yet: its old target record goes.
        return [
            k
            for m in group.changed_members
            if m in group.members and m not in group.target_tuples
            for k in (R.StreamsGroupTargetAssignmentMemberKey(group.group_id, m),)
            if k in written
        ]

    def delete_records(self, group_id: str) -> list[tuple[Any, Any]]:
        return super().delete_records(group_id) or [(R.StreamsGroupMetadataKey(group_id), None)]

    # the heartbeat --------------------------------------------------------------------

    def heartbeat(self, r: StreamsHeartbeatRequest) -> StreamsHeartbeatResult | CoordinatorResult:
        """StreamsGroupHeartbeat: a result answered at once (a request refused), or the result
        of the group's new records, answered once they are durable (write_failed if not)."""
        created = False
        try:
            if r.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                result, group = self._leave(r)
            else:
                result, group, created = self._heartbeat(r)
        except ApiError as e:
            return StreamsHeartbeatResult(e.code, str(e), r.member_id, r.member_epoch)
        if result.to_create:
            self.create_internal_topics(result.to_create)
        return self.result_of(result, group)

    @staticmethod
    def heartbeat_failed(member_id: str) -> Callable[[int], StreamsHeartbeatResult]:
        """The heartbeat's answer when the group's records could not be written."""
        return lambda error: StreamsHeartbeatResult(error, "The group's records could not be written.", member_id)

    def _group(self, group_id: str, create: bool) -> StreamsGroup:
        """getOrMaybeCreatePersistedStreamsGroup: an empty classic group becomes a streams group;
        another type's is GROUP_ID_NOT_FOUND."""
        group = self.groups.get(group_id)
        if type(group) is StreamsGroup and not group.dead:
            return group
        if group is None or (create and type(group) is ClassicGroup and group.is_empty()):
            if not create:
                raise ApiError(E.group_id_not_found, f"Streams group {group_id} not found.")
            return StreamsGroup(group_id)  # (added to the shard's groups once the heartbeat is accepted)
        if type(group) is StreamsGroup:
            raise ApiError(E.group_id_not_found, f"Streams group {group_id} not found.")
        raise ApiError(E.group_id_not_found, f"Group {group_id} is not a streams group.")

    def _lookup(self, topic: str) -> tuple[uuid.UUID, int] | None:
        """The topic as the broker has it, but none while the coordinator is creating the batch
        of internal topics it is in: Kafka creates a batch in one controller write, so a group
        sees all of it or none, and its epoch moves once (not once per topic)."""
        return None if topic in self._creating else self.image.lookup(topic)

    def _partitions_of(self, topic: str) -> int | None:
        found = self._lookup(topic)
        return None if found is None else found[1]

    def _heartbeat(self, r: StreamsHeartbeatRequest) -> tuple[StreamsHeartbeatResult, StreamsGroup, bool]:
        group = self._group(r.group_id, r.member_epoch == 0)
        new_group = self.groups.get(r.group_id) is not group
        # 1. the member (checks only)
        member, replaces = self._member_to_update(group, r)
        # 2. the topology (checks only)
        topology = group.topology
        set_topology = False
        if r.topology is not None:
            if topology is None:
                topology, set_topology = r.topology, True
            elif topology.epoch > r.topology.epoch:
                log.info(
                    "group %s: member %s joined with stale topology epoch %d", r.group_id, r.member_id, r.topology.epoch
                )
            elif topology != r.topology:
                raise ApiError(E.invalid_request, "Topology updates are not supported yet.")
        assert topology is not None  # (a joining member brings one; an existing group has one)
        # 3. the topology's topics as the broker has them
        digest = metadata_hash({t: found for t in required_topics(topology) if (found := self._lookup(t)) is not None})
        configured = group.configured
        if set_topology or configured is None or digest != group.metadata_hash:
            configured = configure_topics(topology, self._partitions_of)
        if configured.is_ready():
            self._check_tasks(configured, r.active)
        # Accepted: from here on the group changes.
        if new_group:
            old = self.groups.get(r.group_id)
            if type(old) is ClassicGroup:
                log.info("group %s: converted the empty classic group to a streams group", r.group_id)
                group.extra_records = [(GroupMetadataKey(r.group_id), None)] if old.stored is not None else []
            self.groups[r.group_id] = group
        if replaces is not None:
            member = self._replace_static(group, replaces, r.member_id)
        bump = self._update_member(group, member, r)
        if set_topology:
            log.info(
                "group %s: member %s initialized the topology with epoch %d", r.group_id, r.member_id, topology.epoch
            )
            group.topology = topology
            group.dirty = True
            bump = True
        group.configured = configured
        if digest != group.metadata_hash:
            group.metadata_hash = digest
            bump = True
        validated = topology.epoch if configured.is_ready() else -1
        if validated != group.validated_topology_epoch:
            group.validated_topology_epoch = validated
            bump = True
        configs = (("num.standby.replicas", str(self.setting(r.group_id, "num_standby_replicas"))),)
        if configs != group.last_assignment_configs:
            group.last_assignment_configs = configs
            bump = True
        was_empty = not (set(group.members) - {member.member_id})
        if bump:
            group.group_epoch += 1
            group.dirty = True
            if was_empty and r.member_epoch == 0:
                self._maybe_delay_initial_assignment(group)
        self.maybe_compute_target(group)
        before = (member.member_epoch, member.assigned)
        target = group.target_tuples.get(member.member_id, TasksTuple())
        # (joining, a member owns nothing: validate_request made sure its lists are empty)
        owned = r.active if r.active is not None or r.member_epoch != 0 else TasksTuple()
        reconcile(group, member, group.assignment_epoch, target, owned)
        self._arm_rebalance_timeout(group, member, before[0])
        self.touch(group, member)
        if r.shutdown_application:
            group.shutdown_request_member_id = member.member_id
        if bump or before != (member.member_epoch, member.assigned) or self._stored_member_differs(group, member):
            group.dirty = True
            group.changed_members.add(member.member_id)
        # the answer
        status: list[tuple[int, str]] = []
        if member.topology_epoch < topology.epoch:
            status.append(
                (
                    STALE_TOPOLOGY,
                    f"The member's topology epoch {member.topology_epoch} is behind the group's topology epoch "
                    f"{topology.epoch}.",
                )
            )
        send = r.member_epoch == 0 or before[1] != member.assigned
        if send and member.user_endpoint is not None:
            group.endpoint_information_epoch += 1
        # (Kafka's order: the topology's epoch, the assignment's delay, the topics, a shutdown)
        if self._initial_delay_pending(group) and group.assignment_epoch < group.group_epoch:
            status.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."))
        if configured.status is not None:
            status.append(configured.status)
        if group.shutdown_request_member_id is not None:
            status.append(
                (
                    SHUTDOWN_APPLICATION,
                    f"Streams group member {group.shutdown_request_member_id} encountered a fatal error and "
                    "requested a shutdown for the entire application.",
                )
            )
        result = StreamsHeartbeatResult(
            E.none,
            None,
            member.member_id,
            member.member_epoch,
            self.setting(r.group_id, "heartbeat_interval_ms"),
            self.setting(r.group_id, "acceptable_recovery_lag"),
            self.setting(r.group_id, "task_offset_interval_ms"),
            status,  # (Kafka answers an empty list when there is none)
            member.assigned if send else None,
            group.endpoint_information_epoch,
            self.endpoints(group) if group.endpoint_information_epoch != r.endpoint_information_epoch else None,
            dict(configured.to_create),
        )
        return result, group, new_group

    def _check_tasks(self, configured: ConfiguredTopology, owned: TasksTuple | None) -> None:
        """throwIfRequestContainsInvalidTasks."""
        if owned is None or configured.subtopologies is None:
            return
        for tasks in (owned.active, owned.standby, owned.warmup):
            for s, ps in tasks.items():
                sub = configured.subtopologies.get(s)
                if sub is None:
                    raise ApiError(E.invalid_request, f"Subtopology {s} does not exist in the topology.")
                for p in sorted(ps):
                    if not 0 <= p < sub.number_of_tasks:
                        raise ApiError(
                            E.invalid_request,
                            f"Task {p} for subtopology {s} is invalid. Number of tasks for this subtopology: "
                            f"{sub.number_of_tasks}",
                        )

    def _member_to_update(
        self, group: StreamsGroup, r: StreamsHeartbeatRequest
    ) -> tuple[StreamsMember, StreamsMember | None]:
        """The member the heartbeat updates (a new one if it joins), and the static member it
        replaces, if any; raises what Kafka raises, changing nothing."""
        if r.instance_id is not None:
            old_id = group.static_members.get(r.instance_id)
            old = group.members.get(old_id) if old_id is not None else None
            if r.member_epoch == 0:
                if old is None:
                    self._check_size(group, r)
                    return self._new_member(r), None
                if old.member_epoch != LEAVE_STATIC_EPOCH and old.member_id != r.member_id:
                    raise ApiError(
                        E.unreleased_instance_id,
                        f"Static member {r.member_id} with instance id {r.instance_id} cannot join the group "
                        f"because the instance id is owned by {old.member_id} member.",
                    )
                if old.member_id == r.member_id:
                    return old, None
                return old, old
            known = static_member(group, r.instance_id, r.member_id)
            self.check_epoch(known, r.member_epoch)
            return known, None
        member = group.members.get(r.member_id)
        if member is None:
            if r.member_epoch != 0:
                raise ApiError(E.unknown_member_id, f"Member {r.member_id} is not a member of group {r.group_id}.")
            self._check_size(group, r)
            return self._new_member(r), None
        if r.member_epoch != 0:
            self.check_epoch(member, r.member_epoch)
        return member, None

    def _check_size(self, group: StreamsGroup, r: StreamsHeartbeatRequest) -> None:
        max_size = self.config.max_size  # (group.streams.max.size: a broker setting only)
        if len(group.members) >= max_size:
            raise ApiError(
                E.group_max_size_reached, f"The streams group has reached its maximum capacity of {max_size} members."
            )

    @staticmethod
    def _new_member(r: StreamsHeartbeatRequest) -> StreamsMember:
        return StreamsMember(r.member_id, instance_id=r.instance_id, member_epoch=0)

    def _replace_static(self, group: StreamsGroup, old: StreamsMember, new_id: str) -> StreamsMember:
        """A static member's new incarnation takes its predecessor's tasks and epoch, so
        nothing moves (Kafka's replaceStreamsMember)."""
        log.info(
            "group %s: static member with instance id %s re-joins; member %s replaces member %s",
            group.group_id,
            old.instance_id,
            new_id,
            old.member_id,
        )
        target = group.target_tuples.get(old.member_id)
        new = static_successor(StreamsMember, old, new_id, _STATIC_CARRIED)
        group.replace_static(old, new)
        if target is not None:
            group.target_tuples[new_id] = target
        group.dirty = True
        return new

    def _update_member(self, group: StreamsGroup, member: StreamsMember, r: StreamsHeartbeatRequest) -> bool:
        """Apply the heartbeat's member fields; whether the group epoch must move (a new
        member, or one whose assignment-relevant settings changed)."""
        new = member.member_id not in group.members
        relevant = (member.process_id, member.rack_id, member.client_tags, member.topology_epoch, member.instance_id)
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        if r.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = r.rebalance_timeout_ms
        if r.topology is not None:
            member.topology_epoch = r.topology.epoch
        member.client_id, member.client_host = r.client_id, r.client_host
        if r.process_id is not None:
            member.process_id = r.process_id
        if r.client_tags is not None:
            member.client_tags = dict(r.client_tags)
        if r.user_endpoint is not None:
            member.user_endpoint = r.user_endpoint
        if r.task_offsets is not None:
            member.task_offsets = dict(r.task_offsets)
        if r.task_end_offsets is not None:
            member.task_end_offsets = dict(r.task_end_offsets)
        if new:
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            log.info("group %s: member %s joins the streams group", group.group_id, member.member_id)
            group.changed_members.add(member.member_id)
            return True
        changed = relevant != (
            member.process_id,
            member.rack_id,
            member.client_tags,
            member.topology_epoch,
            member.instance_id,
        )
        return changed

    def _stored_member_differs(self, group: StreamsGroup, member: StreamsMember) -> bool:
        stored = self.written.get(group.group_id)
        if stored is None:
            return True
        return stored.get(R.StreamsGroupMemberMetadataKey(group.group_id, member.member_id)) != member_metadata(member)

    # the initial rebalance delay --------------------------------------------------------

    def _maybe_delay_initial_assignment(self, group: StreamsGroup) -> None:
        """The first member of an empty group waits streams.initial.rebalance.delay.ms for the
        others before the first target is computed (Kafka's streams initial rebalance timer)."""
        delay = self.setting(group.group_id, "initial_rebalance_delay_ms")
        if delay <= 0 or self._initial_delay_pending(group):
            return
        group.initial_delay_until = self.clock.now() + delay
        self.clock.call_at(group.initial_delay_until, self._delayed_assignment, group)

    def _initial_delay_pending(self, group: StreamsGroup) -> bool:
        return group.initial_delay_until > self.clock.now()

    def _delayed_assignment(self, group: StreamsGroup) -> CoordinatorResult | None:
        """computeDelayedTargetAssignment: the delay is over, the target is computed for
        everyone who joined meanwhile (members learn it at their next heartbeat)."""
        if self.groups.get(group.group_id) is not group or not group.members:
            return None
        if self._initial_delay_pending(group):  # moved later since: its own timer comes
            return None
        if group.group_epoch <= group.assignment_epoch:
            return None
        self.compute_target(group)
        out = CoordinatorResult()
        self.persist(out, group)
        return out

    # leaving and expiry ----------------------------------------------------------------

    def _leave(self, r: StreamsHeartbeatRequest) -> tuple[StreamsHeartbeatResult, StreamsGroup]:
        group = self._group(r.group_id, False)
        if r.instance_id is not None:
            member = static_member(group, r.instance_id, r.member_id)
            if r.member_epoch == LEAVE_STATIC_EPOCH:
                log.info("group %s: static member %s temporarily left the streams group", group.group_id, r.member_id)
                group.leave_static(member)
                return StreamsHeartbeatResult(E.none, None, r.member_id, LEAVE_STATIC_EPOCH, status=[]), group
        else:
            member = known_member(group, r.member_id)
        log.info("group %s: member %s left the streams group", group.group_id, member.member_id)
        self.remove(group, member)
        # (Kafka's answer to a leave carries an empty status list, not a null one)
        return StreamsHeartbeatResult(E.none, None, r.member_id, LEAVE_EPOCH, status=[]), group

    def remove(self, group: StreamsGroup, member: StreamsMember) -> None:
        """A member leaves or is fenced: the others are assigned anew at the next epoch."""
        group.remove_member(member)
        if group.shutdown_request_member_id == member.member_id and not group.members:
            group.shutdown_request_member_id = None
        group.group_epoch += 1
        self.maybe_compute_target(group)
        group.dirty = True

    def fence(self, group: StreamsGroup, member: StreamsMember, why: str) -> CoordinatorResult:
        log.info("group %s: streams member %s fenced: %s", group.group_id, member.member_id, why)
        self.remove(group, member)
        out = CoordinatorResult()
        self.persist(out, group)
        return out

    def _arm_rebalance_timeout(self, group: StreamsGroup, member: StreamsMember, epoch_before: int) -> None:
        """A member asked to revoke tasks must do so within its rebalance timeout, or it is
        fenced (scheduleStreamsGroupRebalanceTimeout)."""
        if member.state != streams_group.UNREVOKED_TASKS or member.rebalance_timer is not None:
            if member.state != streams_group.UNREVOKED_TASKS and member.rebalance_timer is not None:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
            return
        epoch = member.member_epoch
        member.rebalance_timer = self.clock.call_at(
            self.clock.now() + max(member.rebalance_timeout_ms, 0), self._on_rebalance_timeout, group, member, epoch
        )

    def _on_rebalance_timeout(self, group: StreamsGroup, member: StreamsMember, epoch: int) -> CoordinatorResult | None:
        member.rebalance_timer = None
        if (
            self.groups.get(group.group_id) is group
            and group.members.get(member.member_id) is member
            and member.state == streams_group.UNREVOKED_TASKS
            and member.member_epoch == epoch
        ):
            return self.fence(group, member, "did not revoke its tasks within the rebalance timeout")
        return None

    def session_timeout_ms(self, group: Any, member: Any) -> int:
        return self.setting(group.group_id, "session_timeout_ms")

    # assignment -----------------------------------------------------------------------

    def subscribed_topics(self, group: StreamsGroup) -> set[str]:
        return set(required_topics(group.topology)) if group.topology is not None else set()

    def maybe_compute_target(self, group: Any) -> None:
        if self._initial_delay_pending(group):
            return
        super().maybe_compute_target(group)

    def compute_target(self, group: StreamsGroup) -> None:
        """The sticky assignor's target for every member, then the warm-up refinement."""
        configured = group.configured
        subtopologies: dict[str, tuple[int, bool]] = {}
        if configured is not None and configured.is_ready() and configured.subtopologies is not None:
            subtopologies = {s: (c.number_of_tasks, c.stateful) for s, c in configured.subtopologies.items()}
        members = {
            m.member_id: AssignorMember(
                m.process_id,
                dict(m.assigned.active),
                dict(m.assigned.standby),
                dict(m.task_offsets),
            )
            for m in group.members.values()
        }
        standbys = self.setting(group.group_id, "num_standby_replicas")
        target = sticky_assign(members, subtopologies, standbys)
        # (Kafka 4.4's AssignmentRefiner, which would hold a moving stateful task back as a
        # warm-up task, keeps the assignor's target as it is: no warm-up tasks are assigned,
        # whatever group.streams.num.warmup.replicas says.)
        previous = group.target_tuples
        group.target_tuples = {m: TasksTuple(a, s, {}) for m, (a, s) in target.items()}
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = self.clock.wall()
        group.dirty = True
        group.changed_members.update(m for m, t in group.target_tuples.items() if previous.get(m) != t)

    def assignment_interval_ms(self, group_id: str) -> int:
        c = self.config
        value = self.group_setting(group_id, "streams.assignment.interval.ms", c.assignment_interval_ms)
        return min(max(value, c.min_assignment_interval_ms), c.max_assignment_interval_ms)

    # internal topics --------------------------------------------------------------------

    def create_internal_topics(self, topics: dict[str, InternalTopic]) -> None:
        """The coordinator creates the missing repartition and changelog topics (Kafka's
        AutoTopicCreationManager.createStreamsInternalTopics); the members wait on
        MISSING_INTERNAL_TOPICS until they exist."""
        broker_topics = self.image.topics
        if broker_topics is None:
            return
        wanted = [t for name, t in topics.items() if name not in self._creating]
        if not wanted:
            return
        self._creating.update(t.name for t in wanted)
        try:
            loop = self.shard.loop()
        except RuntimeError:
            self._creating.difference_update(t.name for t in wanted)
            return
        task = loop.create_task(self._create(broker_topics, wanted))
        # Registered with the broker's topic creations, which its close waits for (a creation
        # finishing after the close would open logs then).
        creating: dict[str, Any] | None = getattr(broker_topics, "auto_creating", None)
        if creating is not None:
            key = f"streams internal topics {' '.join(t.name for t in wanted)}"
            creating[key] = task

            def done(_: object) -> None:
                creating.pop(key, None)

            task.add_done_callback(done)

    async def _create(self, broker_topics: Any, wanted: list[InternalTopic]) -> None:
        try:
            for t in wanted:
                try:
                    if broker_topics.get(t.name) is None:
                        await broker_topics.create(t.name, t.partitions, t.replication_factor, dict(t.configs))
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # another creator won, a bad config: the next heartbeat reports it
                    log.info("streams internal topic %s not created: %s", t.name, e)
        finally:  # (the whole batch appears at once: _lookup)
            self._creating.difference_update(t.name for t in wanted)

    # StreamsGroupDescribe and the IQ endpoints --------------------------------------------

    def endpoints(
        self, group: StreamsGroup
    ) -> list[tuple[tuple[str, int], list[tuple[str, list[int]]], list[tuple[str, list[int]]]]]:
        """EndpointToPartitionsManager: for every member with a user endpoint, the source
        topic partitions (repartition sources included) of its active tasks, and of its
        standby and warm-up tasks."""
        configured = group.configured
        subs = configured.subtopologies if configured is not None and configured.subtopologies is not None else {}
        out = []
        for m in group.members.values():
            if m.user_endpoint is None:
                continue

            def partitions(tasks_list: list[dict[str, frozenset[int]]]) -> list[tuple[str, list[int]]]:
                by_topic: dict[str, set[int]] = {}
                for tasks in tasks_list:
                    for s, ps in tasks.items():
                        sub = subs.get(s)
                        if sub is None:
                            continue
                        for topic in (*sub.source_topics, *sub.repartition_source_topics):
                            count = self._partitions_of(topic)
                            by_topic.setdefault(topic, set()).update(p for p in ps if count is None or p < count)
                return [(t, sorted(ps)) for t, ps in sorted(by_topic.items())]

            out.append(
                (
                    m.user_endpoint,
                    partitions([m.assigned.active]),
                    partitions([m.assigned.standby, m.assigned.warmup]),
                )
            )
        return out
