"""Wire handlers of the group and offset APIs: kio requests in, kio responses out.

Each request goes to its group's shard (runtime.py); the logic lives in the shard's
managers, which return a CoordinatorResult, and this module only maps versions and fields.
Every operation is answered one way, by the runtime (`CoordinatorRuntime.answer`): once its
records, and every write before them on the shard, are durable; an operation that wrote
nothing waits for the shard's pending writes all the same, since what it says may rest on
them. Descriptions are reads, answered by `read_after_pending`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable
from typing import Any, Callable


from protocol.messages import encode_body
from protocol.offset_commit import OffsetCommitRequest, resolve_topic_ids, write_response_to

from ..errors import E
from ..apis import LATER, Raw, Registry, RequestContext, errors_by_topic, ms
from ..broker.transactions import TransactionChecks
from ..futures import future_and_callback
from ..java_order import JavaHashMap, topic_partition_hashcode
from .classic.classic_group import ClassicGroup, JoinRequest, JoinResult, SyncRequest, SyncResult
from .modern.consumer.consumer_group import ConsumerGroup
from .modern.consumer.consumer_manager import HeartbeatRequest, validate_request
from .modern.modern_manager import ApiError, HeartbeatResult, ModernGroupManager
from .streams.streams_group import StreamsGroup
from ..log.offsets import TOPIC as OFFSETS_TOPIC
from .offset_manager import NO_OFFSET
from .runtime import CoordinatorRuntime
from .shard import GroupShard
from .shard_context import CoordinatorResult
from .state import States as S

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 11, 12, 13, 14, 15, 16, 42
OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE, TXN_OFFSET_COMMIT = 8, 9, 47, 28
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: all a group supports (no ACLs here).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


INT64_MAX = 2**63 - 1


def _coordinates_all(ctx: RequestContext, partition: int) -> int:
    return E.none


def read_after_pending(ctx: RequestContext, shards: Iterable[GroupShard | None], read: Callable[[], Any]) -> Any:
    """A description of groups, read now, leaves once the writes pending on their shards
    (those of the groups it names) are durable, since what it says may rest on them; if one
    of them fails, it is read again."""
    response = read()
    waiting_on = {shard.partition: shard for shard in shards if shard is not None and shard.pending}
    if not waiting_on:
        return response
    state = {"waiting": len(waiting_on), "failed": False}

    def one(error: int) -> None:
        state["failed"] = state["failed"] or error != E.none
        state["waiting"] -= 1
        if state["waiting"] == 0:
            ctx.answer(read() if state["failed"] else response)

    for shard in waiting_on.values():
        shard.after_pending(one)
    return LATER


def described_group(
    ctx: RequestContext,
    group_id: str,
    ops: int,
    group: Any = None,
    assignor: str | None = "",
    members: tuple[Any, ...] = (),
    error: int = E.none,
    message: str | None = None,
    **more: Any,
) -> Any:
    """A {Consumer,Share,Streams}GroupDescribe entry: the group, or for one that is not
    described (no `group`) only its id, the error and the authorized operations; `more`: the
    group type's own fields (a streams group's topology)."""
    return ctx.nested(
        "DescribedGroup",
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state="" if group is None else group.state_name,
        group_epoch=0 if group is None else group.group_epoch,
        assignment_epoch=0 if group is None else group.assignment_epoch,
        assignor_name=assignor,
        members=members,
        authorized_operations=ops,
        **more,
    )


def undescribed_group(ctx: RequestContext, group_id: str, error: int, message: str | None, ops: int) -> Any:
    return described_group(ctx, group_id, ops, error=error, message=message)


def in_coordinator_order(group_ids: Iterable[str], partition_of: Callable[[str], int]) -> list[str]:
    """The order Kafka answers the group describes and DeleteGroups in: its GroupCoordinatorService
    splits the groups by __consumer_offsets partition (a HashMap<TopicPartition, List> filled
    by computeIfAbsent), runs one operation per partition and concatenates their answers in the
    map's order, each partition's groups in the request's order."""
    by_partition: dict[int, list[str]] = {}
    partitions = JavaHashMap(hash_code=_offsets_partition_hashcode)
    for group_id in group_ids:
        p = partition_of(group_id)
        partitions.compute_if_absent(p)
        by_partition.setdefault(p, []).append(group_id)
    return [g for p in partitions.keys() for g in by_partition[p]]


def describe_modern_groups(
    ctx: RequestContext,
    group_ids: Iterable[str],
    include_operations: bool,
    route: Callable[[RequestContext, str], tuple[Any, int]],
    manager: Callable[[Any], Any],
    entry: Callable[[Any, Any, int], Any],
    partition_of: Callable[[str], int],
    undescribed: Callable[[RequestContext, str, int, str | None, int], Any] = undescribed_group,
) -> Any:
    """{Consumer,Share,Streams}GroupDescribe: each group as its shard's manager describes it,
    read once the writes pending on those shards are durable (read_after_pending): entry(shard,
    group, authorized operations), or for a group not described (not coordinated here, not
    found, another type) undescribed(ctx, group id, error, message, operations). In Kafka's
    order: empty group ids first (refused before the others are split), then by coordinator
    partition (in_coordinator_order)."""
    given = list(group_ids)
    ids = [g for g in given if not g] + in_coordinator_order([g for g in given if g], partition_of)

    def read() -> Any:
        ops = GROUP_OPERATIONS if include_operations else AUTHORIZED_OPERATIONS_OMITTED
        out = []
        for group_id in ids:
            if not group_id:  # (Kafka: refused before the coordinator is asked)
                out.append(undescribed(ctx, group_id, E.invalid_group_id, None, AUTHORIZED_OPERATIONS_OMITTED))
                continue
            shard, error = route(ctx, group_id)
            message, group = None, None
            if shard is not None:
                error, message, group = manager(shard).describe(group_id)
            # (an error row carries no authorized operations, as Kafka's)
            out.append(
                undescribed(ctx, group_id, error, message, AUTHORIZED_OPERATIONS_OMITTED)
                if group is None
                else entry(shard, group, ops)
            )
        return ctx.response(throttle_time=0, groups=tuple(out))

    return read_after_pending(ctx, (route(ctx, g)[0] for g in ids), read)


def member_identity(m: Any) -> dict[str, Any]:
    """What a {Consumer,Share,Streams}GroupDescribe member starts with: the member, its epoch,
    and where it runs."""
    return {
        "member_id": m.member_id,
        "member_epoch": m.member_epoch,
        "rack_id": m.rack_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
    }


def described_member(
    ctx: RequestContext, m: Any, image: Any, drop_empty: bool = False, assigned: Any = None, **own: Any
) -> Any:
    """A ConsumerGroupDescribe / ShareGroupDescribe member: what both say of a member (its
    assignment named from `image`: `assigned` if given, else its assigned partitions), and
    the group type's `own` fields."""
    return ctx.nested(
        "Member",
        **member_identity(m),
        subscribed_topic_names=m.subscribed_topic_names,
        assignment=assignment_of(ctx, m.assigned if assigned is None else assigned, image, drop_empty),
        **own,
    )


def assignment_of(ctx: RequestContext, assignment: dict[Any, Any], image: Any = None, drop_empty: bool = False) -> Any:
    """The Assignment of a {Consumer,Share}GroupHeartbeat answer or a described member: its
    TopicPartitions in topic id order, each named from `image` (Describe's) when given; a topic
    with no partition left out if `drop_empty` (share groups)."""
    named = image is not None
    return ctx.nested(
        "Assignment",
        topic_partitions=tuple(
            ctx.nested(
                "TopicPartitions",
                topic_id=t,
                partitions=tuple(sorted(ps)),
                **({"topic_name": image.name_of(t) or ""} if named else {}),
            )
            for t, ps in sorted(assignment.items(), key=lambda kv: kv[0].bytes)
            if ps or not drop_empty
        ),
    )


def heartbeat_response(ctx: RequestContext, result: HeartbeatResult, drop_empty: bool = False) -> Any:
    """A {Consumer,Share}GroupHeartbeat answer (the two have the same fields)."""
    return ctx.response(
        throttle_time=0,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=None if result.assignment is None else assignment_of(ctx, result.assignment, None, drop_empty),
    )


def run_heartbeat(
    ctx: RequestContext,
    runtime: CoordinatorRuntime,
    routed: tuple[Any, int],
    heartbeat: Callable[[Any], Any],
    respond: Callable[[HeartbeatResult], Any],
) -> Any:
    """A valid {Consumer,Share}GroupHeartbeat: the routing error (NOT_COORDINATOR, ...) if
    `routed` has no shard, else the answer of heartbeat(shard)'s result."""
    shard, error = routed
    if shard is None:
        return respond(
            HeartbeatResult(error, "The coordinator is not available." if error == E.not_coordinator else None)
        )
    return runtime.answer(ctx, shard, heartbeat(shard), respond, ModernGroupManager.write_failed)


def _offsets_partition_hashcode(partition: int) -> int:
    return topic_partition_hashcode(OFFSETS_TOPIC, partition)


def owning_shard(
    ctx: RequestContext, shard: GroupShard, owner: Callable[[RequestContext, int], int]
) -> tuple[GroupShard | None, int]:
    """The group's shard and NONE; or None and the error to answer: NOT_COORDINATOR if its
    partition is offline or another broker coordinates it, COORDINATOR_LOAD_IN_PROGRESS
    while this one loads it (Kafka's isCoordinatorForGroup / isGroupLoading)."""
    if shard.offline is not None:
        return None, E.not_coordinator
    error = owner(ctx, shard.partition)
    return (shard, error) if error == E.none else (None, error)


class GroupApis:
    def __init__(
        self,
        runtime: CoordinatorRuntime,
        owner: Callable[[RequestContext, int], int] = _coordinates_all,
        transactions: TransactionChecks | None = None,
    ) -> None:
        self.runtime = runtime
        # owner(ctx, partition): whether the broker the request reached coordinates the
        # groups of that __consumer_offsets partition (NONE), or the error to answer
        # (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS): the topology's check.
        self.owner = owner
        # The transaction coordinator, as TxnOffsetCommit asks it (None: transactions unsupported)
        self.transactions = transactions
        self.shard_for = runtime.shard_for
        self.shard_of = runtime.shard_of
        self.answer = runtime.answer
        self._heartbeat_bodies: dict[tuple[int, int], Raw] = {}

    def register(self, registry: Registry) -> None:
        registry.add(JOIN_GROUP, range(0, 10), self.join_group)
        registry.add(SYNC_GROUP, range(0, 6), self.sync_group)
        registry.add(HEARTBEAT, range(0, 5), self.heartbeat)
        registry.add(LEAVE_GROUP, range(0, 6), self.leave_group)
        registry.add(LIST_GROUPS, range(0, 6), self.list_groups)
        registry.add(DESCRIBE_GROUPS, range(0, 7), self.describe_groups)
        registry.add(DELETE_GROUPS, range(0, 4), self.delete_groups)
        registry.add(OFFSET_COMMIT, range(0, 11), self.offset_commit)
        registry.add(OFFSET_FETCH, range(0, 11), self.offset_fetch)
        registry.add(OFFSET_DELETE, range(0, 1), self.offset_delete)
        registry.add(TXN_OFFSET_COMMIT, range(0, 7), self.txn_offset_commit)
        registry.add(CONSUMER_GROUP_HEARTBEAT, range(0, 2), self.consumer_group_heartbeat)
        registry.add(CONSUMER_GROUP_DESCRIBE, range(0, 2), self.consumer_group_describe)

    # JoinGroup ------------------------------------------------------------------------

    def _route(self, ctx: RequestContext, group_id: str) -> tuple[GroupShard | None, int]:
        """The group's shard and NONE, or None and the error to answer (owning_shard)."""
        return owning_shard(ctx, self.shard_of.get(group_id) or self.shard_for(group_id), self.owner)

    def _commit_refused(self, group_id: str, partitions: list[Any], error: int) -> list[int]:
        """A commit to a group not coordinated here: `error`, or UNKNOWN_TOPIC_OR_PARTITION
        where the partition does not exist (the broker's check comes first)."""
        shard = self.shard_of.get(group_id) or self.shard_for(group_id)
        return shard.offset_manager.refused(partitions, error)

    def _partition_of(self, group_id: str) -> int:
        return (self.shard_of.get(group_id) or self.shard_for(group_id)).partition

    def _in_coordinator_order(self, group_ids: Iterable[str]) -> list[str]:
        return in_coordinator_order(group_ids, self._partition_of)

    def join_group(self, ctx: RequestContext, req: Any) -> Any:
        shard, error = self._route(ctx, req.group_id)
        if shard is None:
            return self._join_response(ctx, JoinResult(error, req.member_id))
        # Fields a version lacks are read by version, not getattr(req, name, None): a missing
        # attribute costs an AttributeError raised and cleared, in every request of a cycle.
        version = ctx.version
        session_ms = ms(req.session_timeout)
        rebalance_ms = ms(req.rebalance_timeout) if version >= 1 else session_ms  # v0 has none
        protocols = [(p.name, p.metadata) for p in req.protocols]
        result = shard.classic.join(
            JoinRequest(
                req.member_id,
                req.group_instance_id if version >= 5 else None,
                ctx.header.client_id or "",
                ctx.client_address,
                session_ms,
                rebalance_ms,
                req.protocol_type,
                protocols,
                require_known_member_id=version >= 4,  # KIP-394; never for v0-v3 clients
                group_id=req.group_id,
                supports_skip_assignment=version >= 9,
                reason=req.reason if version >= 8 else None,
            )
        )
        return self.answer(
            ctx, shard, result, lambda r: self._join_response(ctx, r), lambda error: JoinResult(error, req.member_id)
        )

    @staticmethod
    def _join_response(ctx: RequestContext, r: JoinResult) -> Any:
        members = (
            tuple(
                ctx.nested("JoinGroupResponseMember", member_id=m, group_instance_id=i, metadata=meta)
                for m, i, meta in r.members
            )
            if r.members  # (the leader's only)
            else ()
        )
        error = r.error
        if error == E.fenced_instance_id and ctx.version < 5:
            error = E.unknown_member_id
        return ctx.response(
            throttle_time=0,
            error_code=error,
            generation_id=r.generation_id,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name if r.error == E.none or ctx.version >= 7 else "",
            leader=r.leader_id,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
            members=members,
        )

    # SyncGroup ------------------------------------------------------------------------

    def sync_group(self, ctx: RequestContext, req: Any) -> Any:
        version = ctx.version  # (fields by version, as in join_group)
        if version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            # From v5 both are mandatory: Kafka's KafkaApis refuses their absence before anything else.
            return self._sync_response(ctx, SyncResult(E.inconsistent_group_protocol))
        shard, error = self._route(ctx, req.group_id)
        if shard is None:
            return self._sync_response(ctx, SyncResult(error))
        result = shard.classic.sync(
            SyncRequest(
                req.group_id,
                req.member_id,
                req.group_instance_id if version >= 3 else None,
                req.generation_id,
                req.protocol_type if version >= 5 else None,
                req.protocol_name if version >= 5 else None,
                {a.member_id: a.assignment for a in req.assignments},
            )
        )
        return self.answer(ctx, shard, result, lambda r: self._sync_response(ctx, r), SyncResult)

    @staticmethod
    def _sync_response(ctx: RequestContext, r: SyncResult) -> Any:
        return ctx.response(
            throttle_time=0,
            error_code=r.error,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            assignment=r.assignment,
        )

    # Heartbeat ------------------------------------------------------------------------

    def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        shard, error = self._route(ctx, req.group_id)
        if shard is not None:
            error = shard.classic.heartbeat(
                req.group_id,
                req.member_id,
                req.group_instance_id if ctx.version >= 3 else None,  # (by version, as in join_group)
                req.generation_id,
            )
        if shard is not None and shard.pending:  # (else answered now: the heartbeat's one check)
            return self.answer(ctx, shard, CoordinatorResult(error), lambda e: self._heartbeat_body(ctx, e), int)
        return self._heartbeat_body(ctx, error)

    def _heartbeat_body(self, ctx: RequestContext, error: int) -> Raw:
        # The body is (throttle time 0, error code): one encoding per version and error.
        key = (ctx.header.api_version, error)
        body = self._heartbeat_bodies.get(key)
        if body is None:
            body = self._heartbeat_bodies[key] = Raw(
                encode_body(ctx.codec, ctx.response(throttle_time=0, error_code=error))
            )
        return body

    # LeaveGroup -----------------------------------------------------------------------

    def leave_group(self, ctx: RequestContext, req: Any) -> Any:
        shard, error = self._route(ctx, req.group_id)
        if shard is None:
            return self._leave_response(ctx, error, [])
        if ctx.version < 3:
            result = shard.classic.leave(req.group_id, [(req.member_id, None)])
        else:
            reasons = {m.reason for m in req.members if m.reason} if ctx.version >= 5 else None  # (as in join_group)
            result = shard.classic.leave(
                req.group_id,
                [(m.member_id, m.group_instance_id) for m in req.members],
                reason="; ".join(sorted(reasons)) if reasons else None,
            )
        return self.answer(ctx, shard, result, lambda r: self._leave_response(ctx, *r), lambda error: (error, []))

    @staticmethod
    def _leave_response(ctx: RequestContext, top: int, results: list[Any]) -> Any:
        if ctx.version < 3:
            if top == E.none and results:
                top = results[0][2]
            return ctx.response(throttle_time=0, error_code=top)
        return ctx.response(
            throttle_time=0,
            error_code=top,
            members=tuple(
                ctx.nested("MemberResponse", member_id=m, group_instance_id=i, error_code=e) for m, i, e in results
            ),
        )

    # ListGroups / DescribeGroups / DeleteGroups ---------------------------------------

    def list_groups(self, ctx: RequestContext, req: Any) -> Any:
        states = {s.lower() for s in getattr(req, "states_filter", ())}
        types = {t.lower() for t in getattr(req, "types_filter", ())}
        # Each broker lists the groups it coordinates (admin clients ask every broker).
        groups = [
            g
            for shard in self.runtime.shards
            if self.owner(ctx, shard.partition) == E.none
            for g in shard.list_groups(states, types)
        ]
        return ctx.response(
            throttle_time=0,
            error_code=E.none,
            groups=tuple(
                ctx.nested(
                    "ListedGroup",
                    group_id=g.group_id,
                    protocol_type=g.protocol_type or "",
                    group_state=g.state_name,
                    group_type=g.group_type,
                )
                for g in groups
            ),
        )

    def describe_groups(self, ctx: RequestContext, req: Any) -> Any:
        return read_after_pending(
            ctx, (self._route(ctx, g)[0] for g in req.groups), lambda: self._describe_groups(ctx, req)
        )

    def _describe_groups(self, ctx: RequestContext, req: Any) -> Any:
        include_ops = getattr(req, "include_authorized_operations", False)
        ops = GROUP_OPERATIONS if include_ops else AUTHORIZED_OPERATIONS_OMITTED
        described = []
        for group_id in self._in_coordinator_order(req.groups):
            shard, error = self._route(ctx, group_id)
            if shard is None:
                described.append(
                    ctx.nested(
                        "DescribedGroup",
                        error_code=error,
                        group_id=group_id,
                        group_state="",
                        protocol_type="",
                        protocol_data="",
                        members=(),
                        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,  # (Kafka: an error row has none)
                    )
                )
                continue
            group = self.runtime.group(group_id)
            if type(group) is not ClassicGroup or group.is_(S.DEAD):
                # Kafka describes an unknown group as a Dead one (v6+: GROUP_ID_NOT_FOUND), and
                # a consumer group as "not a classic group" (ConsumerGroupDescribe describes it).
                other = group is not None and type(group) is not ClassicGroup and group.state_name != "Dead"
                error = E.group_id_not_found if other or ctx.version >= 6 else E.none
                message = f"Group {group_id} is not a classic group." if other else f"Group {group_id} not found."
                described.append(
                    ctx.nested(
                        "DescribedGroup",
                        error_code=error,
                        error_message=message,
                        group_id=group_id,
                        group_state=S.DEAD.value,
                        protocol_type="",
                        protocol_data="",
                        members=(),
                        authorized_operations=ops if error == E.none else AUTHORIZED_OPERATIONS_OMITTED,
                    )
                )
                continue
            stable = group.is_(S.STABLE)
            protocol = group.protocol_name if stable else None
            members = tuple(
                ctx.nested(
                    "DescribedGroupMember",
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata_for(protocol) if protocol else b"",
                    member_assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            described.append(
                ctx.nested(
                    "DescribedGroup",
                    error_code=E.none,
                    group_id=group_id,
                    group_state=group.state.value,
                    protocol_type=group.protocol_type or "",
                    protocol_data=protocol or "",
                    members=members,
                    authorized_operations=ops,
                )
            )
        return ctx.response(throttle_time=0, groups=tuple(described))

    async def delete_groups(self, ctx: RequestContext, req: Any) -> Any:
        waits = []
        # (a group named twice: one result, as Kafka's)
        names = self._in_coordinator_order(dict.fromkeys(req.groups_names))
        for group_id in names:
            fut, done = future_and_callback()
            # ("": no such group, Kafka's coordinator answers; only null is INVALID_GROUP_ID)
            shard, error = self._route(ctx, group_id) if group_id else (None, E.group_id_not_found)
            if shard is not None:  # (its own name: an error code, or LATER)
                answer = self.runtime.respond(shard, shard.delete_group(group_id), int, functools.partial(done, None))
                if answer is not LATER:
                    done(None, answer)
            else:
                done(None, error)
            waits.append(fut)
        errors = await asyncio.gather(*waits)
        return ctx.response(
            throttle_time=0,
            results=tuple(
                ctx.nested("DeletableGroupResult", group_id=group_id, error_code=error)
                for group_id, error in zip(names, errors)
            ),
        )

    # OffsetCommit / OffsetFetch / OffsetDelete ----------------------------------------

    def offset_commit(self, ctx: RequestContext, req: OffsetCommitRequest) -> Any:
        """Read by protocol/offset_commit.py (every version); answered once durable."""
        if ctx.header.api_version >= 10:
            if req.topic_ids is None:  # (the ACL gate may have resolved them already)
                req = resolve_topic_ids(req, self.runtime.image.name_of)
            if any(type(p.topic) is not str for p in req.partitions):
                return self._commit_some(ctx, req)
        expire = -1
        if req.retention_ms >= 0:  # v2-v4 only
            # A retention of up to 2^63-1 ms is valid on the wire: the sum must stay an int64.
            expire = min(self.runtime.clock.wall() + req.retention_ms, INT64_MAX)
        version = ctx.header.api_version
        shard, error = self._route(ctx, req.group_id)
        if shard is None:
            return write_response_to(req, version, self._commit_refused(req.group_id, req.partitions, error), True)
        result = shard.offset_manager.commit(
            req.group_id, req.generation, req.member_id, req.instance_id, req.partitions, expire, version
        )
        return self.answer(
            ctx, shard, result, lambda errors: write_response_to(req, version, errors, True), _commit_failed(result)
        )

    def _commit_some(self, ctx: RequestContext, req: OffsetCommitRequest) -> Any:
        """v10 with topic ids no topic has: those partitions are answered UNKNOWN_TOPIC_ID
        (as Kafka, before anything else is checked), the others committed."""
        version = ctx.header.api_version
        known = [p for p in req.partitions if type(p.topic) is str]
        if not known:
            return write_response_to(req, version, [E.unknown_topic_id] * len(req.partitions), True)

        def merged(errors: list[int]) -> Raw:
            it = iter(errors)
            return write_response_to(
                req, version, [next(it) if type(p.topic) is str else E.unknown_topic_id for p in req.partitions], True
            )

        shard, error = self._route(ctx, req.group_id)
        if shard is None:
            return merged(self._commit_refused(req.group_id, known, error))
        result = shard.offset_manager.commit(
            req.group_id, req.generation, req.member_id, req.instance_id, known, -1, version
        )
        return self.answer(ctx, shard, result, merged, _commit_failed(result))

    async def txn_offset_commit(self, ctx: RequestContext, req: Any) -> Any:
        # v6 names topics by id (KIP-1319): an id no topic has is answered UNKNOWN_TOPIC_ID
        # before anything else is checked, as Kafka's handler does; the rest go on by name.
        by_id = ctx.version >= 6
        name_of = self.runtime.image.name_of
        keys = [t.topic_id if by_id else t.name for t in req.topics]  # each topic as the answer names it
        names = [(name_of(t.topic_id) if t.topic_id is not None else None) if by_id else t.name for t in req.topics]
        partitions = [
            (
                name,
                p.partition_index,
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                p.committed_metadata,
            )
            for t, name in zip(req.topics, names)
            if name is not None
            for p in t.partitions
        ]

        def respond(errors: list[int]) -> Any:
            it = iter(errors)
            by_topic: dict[Any, list[Any]] = {}
            for t, key, name in zip(req.topics, keys, names):
                by_topic.setdefault(key, []).extend(
                    ctx.nested(
                        "TxnOffsetCommitResponsePartition",
                        partition_index=p.partition_index,
                        error_code=E.unknown_topic_id if name is None else next(it),
                    )
                    for p in t.partitions
                )
            field = "topic_id" if by_id else "name"
            return ctx.response(
                throttle_time=0,
                topics=tuple(
                    ctx.nested("TxnOffsetCommitResponseTopic", **{field: k}, partitions=tuple(ps))
                    for k, ps in by_topic.items()
                ),
            )

        if not partitions:
            return respond([])
        shard, error = self._route(ctx, req.group_id)
        transactions = self.transactions
        if shard is None:
            errors = [error] * len(partitions)
        elif transactions is None:
            errors = [E.transactional_id_authorization_failed] * len(partitions)
        else:
            # The producer must have added the group's partition to its ongoing transaction
            # (AddOffsetsToTxn), under its current epoch (KIP-890 verification); from v5
            # (transactions v2, KIP-890 part 2) the commit adds it itself.
            tp = (OFFSETS_TOPIC, shard.partition)
            error = E.none
            if ctx.version >= 5:
                error = (
                    await transactions.add_implicitly(req.transactional_id, req.producer_id, req.producer_epoch, [tp])
                )[tp]
            if error == E.none:
                error = transactions.verify(req.transactional_id, req.producer_id, req.producer_epoch, *tp)
            if error == E.producer_fenced:
                # (as Kafka's AddPartitionsToTxnManager answers a fenced epoch to the leader or
                # group coordinator verifying for its client, at every version)
                error = E.invalid_producer_epoch
            elif error == E.transaction_abortable and ctx.version < 4:
                error = E.invalid_txn_state  # (TRANSACTION_ABORTABLE came with v4)
            if error != E.none:
                errors = [error] * len(partitions)
            else:
                result = shard.offset_manager.txn_commit(
                    req.group_id,
                    req.producer_id,
                    req.producer_epoch,
                    getattr(req, "generation_id", -1),
                    getattr(req, "member_id", ""),
                    getattr(req, "group_instance_id", None),
                    partitions,
                    ctx.version,
                )
                # (a coroutine since v5 waits to add the partition: the runtime's answer awaited)
                written, done = future_and_callback()
                answer = self.runtime.respond(shard, result, _commit_failed(result), lambda e: done(None, e))
                errors = await written if answer is LATER else answer  # (its own name: error codes, or LATER)
        return respond(errors)

    def _fetched_topics(
        self, ctx: RequestContext, topics: list[Any], suffix: str, unstable: set[tuple[str, int]] | None = None
    ) -> tuple[Any, ...]:
        """suffix: '' for v1-v7 entity names, 's' for the v8+ batched ones. unstable: partitions
        with a transactional commit pending, asked with require_stable (KIP-447): answered
        UNSTABLE_OFFSET_COMMIT, so the consumer waits rather than reading an offset about to change.
        v10 names topics by id: a topic asked by an id no topic has is answered UNKNOWN_TOPIC_ID
        (its name is that id here); of all the group's topics, one that no longer exists (no id) is left out."""
        out = []
        by_id = ctx.version >= 10
        for name, parts in topics:
            topic = {"name": name}
            if by_id:
                if type(name) is not str:
                    out.append(
                        ctx.nested(
                            "OffsetFetchResponseTopics",
                            topic_id=name,
                            partitions=tuple(
                                ctx.nested(
                                    "OffsetFetchResponsePartitions",
                                    partition_index=partition,
                                    committed_offset=NO_OFFSET,
                                    committed_leader_epoch=-1,
                                    metadata="",
                                    error_code=E.unknown_topic_id,
                                )
                                for partition, _ in parts
                            ),
                        )
                    )
                    continue
                found = self.runtime.image.lookup(name)
                if found is None:
                    continue
                topic = {"topic_id": found[0]}
            rows = []
            for partition, value in parts:
                if unstable and (name, partition) in unstable:
                    rows.append(
                        ctx.nested(
                            "OffsetFetchResponsePartition" + suffix,
                            partition_index=partition,
                            committed_offset=NO_OFFSET,
                            committed_leader_epoch=-1,
                            metadata="",
                            error_code=E.unstable_offset_commit,
                        )
                    )
                    continue
                rows.append(
                    ctx.nested(
                        "OffsetFetchResponsePartition" + suffix,
                        partition_index=partition,
                        committed_offset=value.offset if value else NO_OFFSET,
                        committed_leader_epoch=value.leader_epoch if value else -1,
                        metadata=value.metadata if value else "",
                        error_code=E.none,
                    )
                )
            out.append(ctx.nested("OffsetFetchResponseTopic" + suffix, **topic, partitions=tuple(rows)))
        return tuple(out)

    def _unstable(self, ctx: RequestContext, group_id: str) -> set[tuple[str, int]]:
        shard = self._route(ctx, group_id)[0] if group_id else None
        return shard.offsets.unstable(group_id) if shard is not None else set()

    def _fetch(self, ctx: RequestContext, group_id: str, wanted: list[Any] | None) -> tuple[int, list[Any]]:
        shard, error = self._route(ctx, group_id)
        if shard is None:
            return error, []
        return shard.offset_manager.fetch(group_id, wanted)

    def offset_fetch(self, ctx: RequestContext, req: Any) -> Any:
        if ctx.version < 8:
            wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
            error, topics = self._fetch(ctx, req.group_id, wanted)
            if ctx.version < 2 and error != E.none:
                # v0/v1 have no top-level error: it goes on every partition.
                topics = [(n, [(p, None) for p in ps]) for n, ps in (wanted or [])]
            unstable = self._unstable(ctx, req.group_id) if getattr(req, "require_stable", False) else None
            return ctx.response(
                throttle_time=0, topics=self._fetched_topics(ctx, topics, "", unstable), error_code=error
            )
        groups = []
        for g in req.groups:
            if g.topics is None:
                wanted = None
            elif ctx.version >= 10:
                name_of = self.runtime.image.name_of
                wanted = [(name_of(t.topic_id) or t.topic_id, list(t.partition_indexes)) for t in g.topics]
            else:
                wanted = [(t.name, list(t.partition_indexes)) for t in g.topics]
            # (the coordinator check first: a group being loaded or moved away is not looked at)
            group = self.runtime.group(g.group_id) if g.group_id and self._route(ctx, g.group_id)[0] else None
            if type(group) is ConsumerGroup or type(group) is StreamsGroup:
                # v9+: a consumer-protocol or streams member fetches with its id and epoch (Kafka checks them).
                error = group.validate_offset_fetch(getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
                if error != E.none:
                    groups.append(
                        ctx.nested("OffsetFetchResponseGroup", group_id=g.group_id, topics=(), error_code=error)
                    )
                    continue
            error, topics = self._fetch(ctx, g.group_id, wanted)
            unstable = self._unstable(ctx, g.group_id) if req.require_stable else None
            groups.append(
                ctx.nested(
                    "OffsetFetchResponseGroup",
                    group_id=g.group_id,
                    topics=self._fetched_topics(ctx, topics, "s", unstable),
                    error_code=error,
                )
            )
        return ctx.response(throttle_time=0, groups=tuple(groups))

    def offset_delete(self, ctx: RequestContext, req: Any) -> Any:
        wanted = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics]

        def respond(outcome: tuple[int, list[Any]]) -> Any:
            error, results = outcome
            topics = errors_by_topic(ctx, "OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition", results)
            return ctx.response(throttle_time=0, error_code=error, topics=topics)

        shard, error = self._route(ctx, req.group_id)
        if shard is None:
            return respond((error, []))
        result = shard.offset_manager.delete(req.group_id, wanted)
        return self.answer(ctx, shard, result, respond, lambda error: (error, []))

    # ConsumerGroupHeartbeat / ConsumerGroupDescribe (KIP-848) -------------------------

    def consumer_group_heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        r = HeartbeatRequest(
            req.group_id,
            req.member_id,
            req.member_epoch,
            req.instance_id,
            req.rack_id,
            ms(req.rebalance_timeout),
            req.subscribed_topic_names,
            getattr(req, "subscribed_topic_regex", None),
            req.server_assignor,
            None if req.topic_partitions is None else [(t.topic_id, list(t.partitions)) for t in req.topic_partitions],
            ctx.header.client_id or "",
            ctx.client_address,
        )
        try:
            validate_request(r, ctx.version, self.runtime.consumer_config.assignors)
        except ApiError as e:
            return heartbeat_response(ctx, HeartbeatResult(e.code, e.message))
        return run_heartbeat(
            ctx,
            self.runtime,
            self._route(ctx, req.group_id),
            lambda shard: shard.consumer.heartbeat(r),
            lambda result: heartbeat_response(ctx, result),
        )

    def consumer_group_describe(self, ctx: RequestContext, req: Any) -> Any:
        def entry(shard: GroupShard, group: Any, ops: int) -> Any:
            image = shard.consumer.image
            members = tuple(
                described_member(
                    ctx,
                    m,
                    image,
                    instance_id=m.instance_id,
                    subscribed_topic_regex=m.subscribed_topic_regex or "",  # (Kafka: none is "")
                    assigned=m.owns(),  # (Kafka: with what it is revoking)
                    target_assignment=assignment_of(ctx, group.target.get(m.member_id, {}), image),
                    member_type=0 if m.classic is not None else 1,  # 0: classic, 1: consumer protocol
                )
                for m in group.members.values()
            )
            return described_group(ctx, group.group_id, ops, group, shard.consumer.assignor_of(group), members)

        return describe_modern_groups(
            ctx,
            req.group_ids,
            req.include_authorized_operations,
            self._route,
            lambda shard: shard.consumer,
            entry,
            self._partition_of,
        )


def _commit_failed(result: CoordinatorResult | list[int]) -> Callable[[int], list[int]]:
    """A commit's errors when a write fails: each partition it wrote carries the write's
    error; a commit that wrote nothing gets it on every partition."""
    if not isinstance(result, CoordinatorResult):
        return _CommitFailed(result, False)  # (answered at once: never called)
    return _CommitFailed(result.response, bool(result.writes))


class _CommitFailed:
    """A class rather than a closure over the result: compiled, the closure's environment
    would hold the result, which holds this continuation, and every commit's objects would
    be left for the cycle collector."""

    __slots__ = ("errors", "wrote")

    def __init__(self, errors: list[int], wrote: bool) -> None:
        self.errors = errors
        self.wrote = wrote

    def __call__(self, error: int) -> list[int]:
        if self.wrote:
            return [error if e == E.none else e for e in self.errors]
        return [error] * len(self.errors)
