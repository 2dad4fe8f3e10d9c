"""The classic group coordinator: Kafka's JoinGroup/SyncGroup/Heartbeat/LeaveGroup logic.

Concurrency: every decision about a group runs in a synchronous section on the event
loop, so requests for one group are serialized exactly as an actor would; the only
awaits (durable appends, waiting for the join phase or the leader's assignment)
happen outside those sections, and their continuations re-check the group's state
and generation, as Kafka's callbacks do. Different groups interleave freely.

Persistence follows "records as events": the group's GroupMetadata record is built,
appended durably, and only then applied to the in-memory group by `apply_group_record`,
the same function that loads the log at startup.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from kio.schema.errors import ErrorCode as E

from ..futures import Done, future_and_callback
from .clock import Clock
from .group import ClassicGroup, JoinResult, Member, SyncResult
from .records import Event, GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitKey
from .state import GroupState as S

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""


@dataclass
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 0
    max_size: int = 2**31 - 1
    # A KIP-394 member id that has not rejoined holds a finished join phase at most this long.
    pending_member_join_grace_ms: int = 1000


# append(group_id, events, done): durably append one group's events, in order, then call
# done(None, offset of the first), or done(error, None) if they could not be written. The
# coordinator applies them itself once durable: the same `apply` that replays the log at
# startup. A callback, not a coroutine: offset commits go through it at every consumer's
# commit rate.
EventWriter = Callable[[str, list[Event], Done], None]


def _no_persistence(group_id: str, events: list[Event], done: Done) -> None:
    done(None, None)


class GroupCoordinator:
    def __init__(self, clock: Clock, config: GroupConfig | None = None, writer: EventWriter = _no_persistence) -> None:
        self.clock = clock
        self.config = config or GroupConfig()
        self.append_events = writer
        self.groups: dict[str, ClassicGroup] = {}
        self._tasks: set[asyncio.Task] = set()

    # helpers --------------------------------------------------------------------------

    async def write(self, group_id: str, events: list[Event]) -> None:
        """append_events, awaited: returns once durable, raises if they were not written."""
        written, done = future_and_callback()
        self.append_events(group_id, events, done)
        await written

    def _transition(self, group: ClassicGroup, state: S) -> None:
        group.transition(state, self.clock.wall())

    def get_or_create(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.clock.wall())
        return group

    @staticmethod
    def _resolve(fut: asyncio.Future | None, value: Any) -> None:
        if fut is not None and not fut.done():
            fut.set_result(value)

    # JoinGroup ------------------------------------------------------------------------

    def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        supports_skip_assignment: bool = False,
        reason: str | None = None,
    ) -> JoinResult | asyncio.Future:
        """Answer now (a JoinResult) or later (a future resolved when the join phase ends)."""
        if not group_id:
            return JoinResult(E.invalid_group_id, member_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(E.invalid_session_timeout, member_id)
        if rebalance_timeout_ms <= 0:
            return JoinResult(E.invalid_request, member_id)
        if reason:
            log.info("group %s: member %r joins: %s", group_id, member_id or client_id, reason)
        group = self.groups.get(group_id)
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return JoinResult(E.unknown_member_id, member_id)
            group = self.get_or_create(group_id)
        if group.is_(S.DEAD):
            # The group was deleted under us; the client will find the coordinator again.
            return JoinResult(E.coordinator_not_available, member_id)
        if not group.supports_protocols(protocol_type, protocols):
            return JoinResult(E.inconsistent_group_protocol, member_id)
        if not self._accepts(group, member_id):
            return JoinResult(E.group_max_size_reached, member_id)
        params = (client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
        if member_id == UNKNOWN_MEMBER_ID:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if group_instance_id is not None:
                return self._static_join(group, group_instance_id, new_id, params, supports_skip_assignment)
            if require_known_member_id:
                # KIP-394: hand out the id first; the member must come back with it.
                expiry = self.clock.now() + session_timeout_ms
                group.pending_members[new_id] = expiry
                self.clock.call_at(expiry, self._expire_pending, group, new_id)
                return JoinResult(E.member_id_required, new_id)
            return self._add_member_and_rebalance(group, new_id, group_instance_id, params)
        # A known member id.
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(group, member_id, group_instance_id, params)
        if group.fenced(group_instance_id, member_id):
            return JoinResult(E.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None or group.is_(S.EMPTY):
            return JoinResult(E.unknown_member_id, member_id)
        if group.is_(S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, params)
        if group.is_(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member (typically the leader) missed its JoinGroup response: repeat it.
                return self._join_result(group, member)
            return self._update_member_and_rebalance(group, member, params)
        # Stable
        if member_id == group.leader_id or not member.matches(protocols):
            return self._update_member_and_rebalance(group, member, params)
        return self._join_result(group, member)

    def _accepts(self, group: ClassicGroup, member_id: str) -> bool:
        """Kafka's acceptJoiningMember: existing members may always rejoin."""
        if group.is_(S.EMPTY) or group.is_(S.DEAD) or member_id in group.members:
            return True
        return len(group.members) + len(group.pending_members) < self.config.max_size or (
            member_id in group.pending_members and len(group.members) < self.config.max_size
        )

    def _new_member(self, member_id: str, group_instance_id: str | None, params: tuple) -> Member:
        client_id, client_host, session_ms, rebalance_ms, protocol_type, protocols = params
        return Member(member_id, group_instance_id, client_id, client_host, session_ms, rebalance_ms,
                      protocol_type, list(protocols))

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                                  params: tuple) -> asyncio.Future:
        member = self._new_member(member_id, instance_id, params)
        group.add(member)
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        fut = self._await_join(group, member)
        self._schedule_expiry(group, member)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")
        self._try_complete_join(group)
        return fut

    def _update_member_and_rebalance(self, group: ClassicGroup, member: Member, params: tuple) -> asyncio.Future:
        _client_id, _host, session_ms, rebalance_ms, _ptype, protocols = params
        group.update_protocols(member, list(protocols))
        member.session_timeout_ms, member.rebalance_timeout_ms = session_ms, rebalance_ms
        fut = self._await_join(group, member)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined with new metadata or as leader")
        self._try_complete_join(group)
        return fut

    def _await_join(self, group: ClassicGroup, member: Member) -> asyncio.Future:
        if member.join_waiter is not None:
            # A second JoinGroup from the same member replaces the first (its connection
            # may be gone); the old one learns it was superseded.
            self._resolve(member.join_waiter, JoinResult(E.unknown_member_id, member.member_id))
        else:
            group.awaiting_join_count += 1
        member.join_waiter = asyncio.get_running_loop().create_future()
        return member.join_waiter

    def _static_join(self, group: ClassicGroup, instance_id: str, new_id: str, params: tuple,
                     supports_skip: bool) -> JoinResult | asyncio.Future:
        old_id = group.static_members.get(instance_id)
        if old_id is None:
            return self._add_member_and_rebalance(group, new_id, instance_id, params)
        # KIP-345: a known static member restarted; it takes over the old member's place.
        old = group.members[old_id]
        protocols = list(params[5])
        was_leader = group.leader_id == old_id
        current_leader = group.leader_id
        self._resolve(old.join_waiter, JoinResult(E.fenced_instance_id, old_id))
        self._resolve(old.sync_waiter, SyncResult(E.fenced_instance_id))
        if old.join_waiter is not None:
            group.awaiting_join_count -= 1
        old.join_waiter = old.sync_waiter = None
        del group.members[old_id]
        old.member_id = new_id
        old.client_id, old.client_host = params[0], params[1]
        old.session_timeout_ms, old.rebalance_timeout_ms = params[2], params[3]
        group.members[new_id] = old
        group.static_members[instance_id] = new_id
        if was_leader:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        self._heartbeat_ok(old)
        if group.is_(S.STABLE):
            group.update_protocols(old, protocols)
            if group.select_protocol() != group.protocol_name:
                fut = self._await_join(group, old)
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed protocols")
                return fut
            # Same metadata: no rebalance. Persist the new member id, then answer as the
            # old generation; a static leader learns the members but skips assignment (KIP-814).
            fut = asyncio.get_running_loop().create_future()
            generation = group.generation_id

            async def persist_then_answer() -> None:
                await self._store(group)
                if group.generation_id != generation or new_id not in group.members:
                    self._resolve(fut, JoinResult(E.rebalance_in_progress, new_id))
                    return
                if was_leader and supports_skip:
                    result = self._join_result(group, old, as_leader=True)
                    result.skip_assignment = True
                else:
                    result = self._join_result(group, old, as_leader=False)
                    result.leader_id = current_leader if not was_leader else old_id
                self._resolve(fut, result)

            self._spawn(persist_then_answer())
            return fut
        group.update_protocols(old, protocols)
        fut = self._await_join(group, old)
        if group.is_(S.COMPLETING_REBALANCE):
            # The leader may already hold the old member id in its assignment: rebalance.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        self._try_complete_join(group)
        return fut

    def _join_result(self, group: ClassicGroup, member: Member, as_leader: bool | None = None) -> JoinResult:
        leader = group.leader_id == member.member_id if as_leader is None else as_leader
        members = []
        if leader and group.protocol_name is not None:
            members = [(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(E.none, member.member_id, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "", False, members)

    # the join phase -------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id, group.generation_id, reason)
        if group.is_(S.COMPLETING_REBALANCE):
            self._fail_pending_syncs(group, E.rebalance_in_progress)
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        now = self.clock.now()
        group.join_started = now
        rebalance_ms = group.max_rebalance_timeout_ms()
        group.initial_delay = group.is_(S.EMPTY) and self.config.initial_rebalance_delay_ms > 0
        if group.initial_delay:
            # Kafka's InitialDelayedJoin: wait a little for more members, extending the
            # delay while new ones keep arriving, never beyond the rebalance timeout.
            group.new_member_added = False
            group.join_deadline = now + rebalance_ms
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_ms)
            self._transition(group, S.PREPARING_REBALANCE)
            self._arm_join_timer(group, now + delay, initial=True)
            return
        group.join_deadline = now + rebalance_ms
        self._transition(group, S.PREPARING_REBALANCE)
        self._arm_join_timer(group, group.join_deadline, initial=False)

    def _arm_join_timer(self, group: ClassicGroup, when: float, initial: bool) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_timer = self.clock.call_at(when, self._on_join_timer, group, initial)

    def _on_join_timer(self, group: ClassicGroup, initial: bool) -> None:
        group.join_timer = None
        if not group.is_(S.PREPARING_REBALANCE):
            return
        now = self.clock.now()
        if initial and group.new_member_added and now < group.join_deadline:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.join_deadline - now)
            self._arm_join_timer(group, now + delay, initial=True)
            return
        if initial:
            # The initial delay is over: from here on it is an ordinary delayed join.
            group.initial_delay = False
            if self._join_ready(group, now):
                self._complete_join(group)
            else:
                self._arm_join_timer(group, self._next_join_check(group, now), initial=False)
            return
        if now >= group.join_deadline or self._join_ready(group, now):
            self._complete_join(group)
        else:
            self._arm_join_timer(group, self._next_join_check(group, now), initial=False)

    def _next_join_check(self, group: ClassicGroup, now: float) -> float:
        if group.has_all_members_joined() and group.pending_members:
            return min(group.join_deadline, now + self.config.pending_member_join_grace_ms)
        return group.join_deadline

    def _join_ready(self, group: ClassicGroup, now: float) -> bool:
        """Every known member rejoined; KIP-394 pending ids hold it only for a short grace."""
        if not group.has_all_members_joined():
            return False
        if not group.pending_members:
            return True
        return now >= group.join_started + self.config.pending_member_join_grace_ms

    def _try_complete_join(self, group: ClassicGroup) -> None:
        """Kafka's tryCompleteElseWatch: end the join phase as soon as it can end."""
        if not group.is_(S.PREPARING_REBALANCE):
            return
        if group.initial_delay:
            return  # the initial delay runs its course
        now = self.clock.now()
        if self._join_ready(group, now):
            self._complete_join(group)
        elif group.has_all_members_joined() and group.pending_members:
            self._arm_join_timer(group, self._next_join_check(group, now), initial=False)

    def _complete_join(self, group: ClassicGroup) -> None:
        """Kafka's onCompleteJoin: drop members that did not rejoin, start the next generation."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("group %s: removing member %s, which did not rejoin in time", group.group_id, member.member_id)
            self._remove_member(group, member)
        if group.leader_id is not None and not group.members[group.leader_id].awaiting_join:
            group.leader_id = next((m.member_id for m in group.members.values() if m.awaiting_join), None)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            self._transition(group, S.EMPTY)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._spawn(self._store(group))
            return
        group.protocol_name = group.select_protocol()
        self._transition(group, S.COMPLETING_REBALANCE)
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        group.pending_sync = set(group.members)
        for member in group.members.values():
            result = self._join_result(group, member)
            fut, member.join_waiter = member.join_waiter, None
            self._resolve(fut, result)
            self._heartbeat_ok(member)
        group.awaiting_join_count = 0
        # Members that never send SyncGroup are removed after the rebalance timeout.
        group.sync_timer = self.clock.call_at(self.clock.now() + group.max_rebalance_timeout_ms(),
                                              self._on_sync_timeout, group, group.generation_id)

    def _on_sync_timeout(self, group: ClassicGroup, generation: int) -> None:
        group.sync_timer = None
        if group.generation_id != generation or not group.pending_sync:
            return
        if not (group.is_(S.COMPLETING_REBALANCE) or group.is_(S.STABLE)):
            return
        missing = [group.members[m] for m in group.pending_sync if m in group.members]
        for member in missing:
            log.info("group %s: removing member %s, which sent no SyncGroup", group.group_id, member.member_id)
            self._remove_member(group, member)
        self._after_removal(group, "members did not sync")

    # SyncGroup ------------------------------------------------------------------------

    def sync(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes]) -> SyncResult | asyncio.Future:
        if not group_id:
            return SyncResult(E.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(E.unknown_member_id)
        if group.is_(S.DEAD):
            return SyncResult(E.coordinator_not_available)
        if group.fenced(group_instance_id, member_id):
            return SyncResult(E.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(E.unknown_member_id)
        if generation_id != group.generation_id:
            return SyncResult(E.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(E.inconsistent_group_protocol)
        if group.is_(S.EMPTY):
            return SyncResult(E.unknown_member_id)
        if group.is_(S.PREPARING_REBALANCE):
            return SyncResult(E.rebalance_in_progress)
        group.pending_sync.discard(member_id)
        self._heartbeat_ok(member)
        if group.is_(S.STABLE):
            return SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: wait for the leader's assignment.
        fut = asyncio.get_running_loop().create_future()
        self._resolve(member.sync_waiter, SyncResult(E.rebalance_in_progress))
        member.sync_waiter = fut
        if member_id == group.leader_id:
            record = self._group_record(group, assignments)
            self._spawn(self._persist_assignment(group, record))
        return fut

    async def _persist_assignment(self, group: ClassicGroup, record: GroupMetadataValue) -> None:
        try:
            await self.write(group.group_id, [(GroupMetadataKey(group.group_id), record)])
        except Exception as e:  # the disk said no: members must rejoin, nothing was applied
            log.error("group %s: storing generation %d failed: %r", group.group_id, record.generation, e)
            if group.is_(S.COMPLETING_REBALANCE) and group.generation_id == record.generation:
                self._fail_pending_syncs(group, E.coordinator_not_available)
                self._prepare_rebalance(group, "storing the assignment failed")
            return
        self.apply_group_record(group.group_id, record)

    def _group_record(self, group: ClassicGroup, assignments: dict[str, bytes] | None = None
                      ) -> GroupMetadataValue:
        protocol = group.protocol_name
        members = tuple(
            MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata_for(protocol) if protocol else b"",
                # Assignments for unknown members are dropped; missing ones are empty.
                assignment=assignments.get(m.member_id, b"") if assignments is not None else m.assignment)
            for m in group.members.values()
        )
        return GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation_id,
                                  protocol=protocol, leader=group.leader_id, members=members,
                                  current_state_timestamp=self.clock.wall())

    async def _store(self, group: ClassicGroup) -> None:
        record = self._group_record(group)
        try:
            await self.write(group.group_id, [(GroupMetadataKey(group.group_id), record)])
        except Exception as e:
            log.error("group %s: storing group metadata failed: %r", group.group_id, e)
            return
        self.apply_group_record(group.group_id, record)

    def apply(self, event: Event) -> None:
        """Replay one event: at startup, and after every durable append. The only way
        persisted state (offsets, generations, assignments) enters memory."""
        key, value = event
        if type(key) is OffsetCommitKey:
            group = self.groups.get(key.group)
            if value is None:
                if group is not None:
                    group.offsets.pop((key.topic, key.partition), None)
                return
            if group is None:
                group = self.get_or_create(key.group)
            group.offsets[(key.topic, key.partition)] = value
        else:
            self.apply_group_record(key.group, value)  # type: ignore[arg-type]

    def apply_group_record(self, group_id: str, record: GroupMetadataValue | None) -> None:
        """Replay one GroupMetadata record: at startup and after every durable append.

        Loading: the group comes back Empty with its generation and protocol; members
        must rejoin. Live: a record of the current generation carries the leader's
        assignment: hand it out and become Stable. Stale records change nothing.
        """
        group = self.groups.get(group_id)
        if record is None:  # tombstone: the group and its offsets are gone
            if group is not None and not group.members:
                self._remove_group(group)
            return
        if group is None or (not group.members and group.is_(S.EMPTY)):
            group = self.get_or_create(group_id)
            group.generation_id = record.generation
            group.protocol_type = record.protocol_type or None
            group.protocol_name = record.protocol
            group.state_timestamp = record.current_state_timestamp
            return
        if not (group.is_(S.COMPLETING_REBALANCE) and group.generation_id == record.generation):
            return
        by_id = {m.member_id: m.assignment for m in record.members}
        for member in group.members.values():
            member.assignment = by_id.get(member.member_id, b"")
        for member in group.members.values():
            fut, member.sync_waiter = member.sync_waiter, None
            self._resolve(fut, SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment))
        self._transition(group, S.STABLE)

    def _fail_pending_syncs(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            fut, member.sync_waiter = member.sync_waiter, None
            self._resolve(fut, SyncResult(error))

    # Heartbeat ------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        if not group_id:
            return E.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        error, member = group.check_member(group_instance_id, member_id, generation_id)
        if member is None:
            return error
        state = group.state
        if state is S.EMPTY:
            return E.unknown_member_id
        member.deadline = self.clock.now() + member.session_timeout_ms  # O(1): the timer re-arms lazily
        if state is S.PREPARING_REBALANCE:
            return E.rebalance_in_progress
        return E.none

    def _heartbeat_ok(self, member: Member) -> None:
        member.deadline = self.clock.now() + member.session_timeout_ms

    def _schedule_expiry(self, group: ClassicGroup, member: Member) -> None:
        self._heartbeat_ok(member)
        member.timer = self.clock.call_at(member.deadline, self._on_expiry_timer, group, member)

    def _on_expiry_timer(self, group: ClassicGroup, member: Member) -> None:
        if group.members.get(member.member_id) is not member:
            return
        now = self.clock.now()
        # Members blocked in JoinGroup or SyncGroup are alive: their request is the heartbeat.
        if member.awaiting_join or member.sync_waiter is not None:
            member.deadline = now + member.session_timeout_ms
        if now < member.deadline:
            member.timer = self.clock.call_at(member.deadline, self._on_expiry_timer, group, member)
            return
        member.timer = None
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member(group, member)
        self._after_removal(group, f"member {member.member_id} session expired")

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        expiry = group.pending_members.get(member_id)
        if expiry is not None and self.clock.now() >= expiry:
            del group.pending_members[member_id]
            log.info("group %s: pending member %s never rejoined", group.group_id, member_id)
            self._try_complete_join(group)

    # LeaveGroup -----------------------------------------------------------------------

    def leave(self, group_id: str, members: list[tuple[str, str | None]], reason: str | None = None
              ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """(top-level error, [(member id, instance id, error)]) — Kafka's v3+ shape."""
        if not group_id:
            return E.invalid_group_id, []
        group = self.groups.get(group_id)
        if group is None:
            return E.none, [(m, i, E.unknown_member_id) for m, i in members]
        if group.is_(S.DEAD):
            return E.coordinator_not_available, []
        results = []
        removed = False
        for member_id, instance_id in members:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    results.append((member_id, instance_id, E.unknown_member_id))
                    continue
                if member_id != UNKNOWN_MEMBER_ID and member_id != current:
                    results.append((member_id, instance_id, E.fenced_instance_id))
                    continue
                target = current
            elif member_id in group.pending_members:
                del group.pending_members[member_id]
                results.append((member_id, instance_id, E.none))
                removed = True
                continue
            else:
                target = member_id
            member = group.members.get(target)
            if member is None:
                results.append((member_id, instance_id, E.unknown_member_id))
                continue
            log.info("group %s: member %s leaves%s", group.group_id, target, f": {reason}" if reason else "")
            self._remove_member(group, member)
            removed = True
            results.append((member_id, instance_id, E.none))
        if removed:
            self._after_removal(group, "members left")
        return E.none, results

    def _remove_member(self, group: ClassicGroup, member: Member) -> None:
        self._resolve(member.join_waiter, JoinResult(E.unknown_member_id, member.member_id))
        self._resolve(member.sync_waiter, SyncResult(E.unknown_member_id))
        group.remove(member.member_id)
        member.join_waiter = member.sync_waiter = None

    def _after_removal(self, group: ClassicGroup, reason: str) -> None:
        """Kafka's removeMemberAndUpdateGroup tail: rebalance, or finish a pending join."""
        if group.is_(S.STABLE) or group.is_(S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
            self._try_complete_join(group)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ListGroups / DescribeGroups / DeleteGroups ---------------------------------------

    def list_groups(self, states: set[str] | None = None) -> list[ClassicGroup]:
        return [g for g in self.groups.values()
                if not g.is_(S.DEAD) and (not states or g.state.value.lower() in states)]

    async def delete_group(self, group_id: str) -> int:
        """DeleteGroups for one group: only Empty groups; offsets go with it."""
        if not group_id:
            return E.invalid_group_id
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found
        if not group.is_(S.EMPTY):
            return E.non_empty_group
        events: list[Event] = [(OffsetCommitKey(group_id, t, p), None) for t, p in group.offsets]
        events.append((GroupMetadataKey(group_id), None))
        self._transition(group, S.DEAD)  # refuses joins and commits while the tombstones are written
        try:
            await self.write(group_id, events)
        except Exception as e:
            log.error("group %s: delete failed: %r", group_id, e)
            return E.unknown_server_error
        for event in events:
            self.apply(event)
        return E.none

    def _remove_group(self, group: ClassicGroup) -> None:
        group.offsets.clear()
        if group.state is not S.DEAD:
            self._transition(group, S.DEAD)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
