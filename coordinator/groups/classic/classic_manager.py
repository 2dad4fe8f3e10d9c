"""The classic group protocol: Kafka's JoinGroup/SyncGroup/Heartbeat/LeaveGroup logic.

One manager per shard (shard.py), over the shard's groups. Concurrency: every decision
about a group runs in a synchronous section on the event loop, so requests for one group
are serialized exactly as an actor would; the only waits (a durable write, the join
phase, the leader's assignment) happen outside those sections, and their continuations
re-check the group's generation and state, as Kafka's callbacks do.

An operation never writes: it returns a CoordinatorResult, records and a continuation
(helpers add to the operation's `out`, as Kafka's pass their list of records); the
runtime appends them, replays them into the shard once durable (replay sets only what a
restart brings back, `ClassicGroup.stored`), then runs the continuation with the outcome.
Answering members, completing a join phase and moving to Stable are the continuation's,
and a failed write changes nothing but what the continuation does about it. Timers are
operations too: what they return the runtime writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast


from ... import server_log
from ...errors import E
from ...metrics.stats import STATS
from .classic_group import ClassicGroup, JoinRequest, JoinResult, Member, MemberSpec, SyncRequest, SyncResult
from ..clock import ShardClock
from ..records import GroupMetadataKey, GroupMetadataValue, MemberMetadata, group_metadata_value, member_metadata
from ..modern.share.share_group import ShareGroup
from ..streams.streams_group import StreamsGroup
from ..state import States as S
from ..shard_context import CoordinatorResult, ShardContext

if TYPE_CHECKING:
    from ..modern.consumer.consumer_group import ConsumerGroup

log = server_log.get(__name__)

UNKNOWN_MEMBER_ID = ""

_hex = ""  # random hex digits for member ids, 32 taken per id from _hex_at
_hex_at = 0
_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}  # a digit's IETF variant digit

# Groups a classic request never joins or converts (Kafka's classicGroupJoin answers them
# INCONSISTENT_GROUP_PROTOCOL): a consumer group is the only other type classic members reach.
NOT_CLASSIC_OR_CONSUMER = (ShareGroup, StreamsGroup)


def random_uuid() -> str:
    """A random (version 4) UUID as Java's UUID.randomUUID().toString() writes it, the tail
    of Kafka's member ids. Its digits come from os.urandom read 2 KiB at a time, as hex:
    uuid.uuid4() makes a getrandom() system call and a 128-bit integer for every id."""
    global _hex, _hex_at
    at = _hex_at
    if at + 32 > len(_hex):
        _hex, at = os.urandom(2048).hex(), 0
    h = _hex[at : at + 32]
    _hex_at = at + 32
    # (the version digit is 4; the variant's two high bits are 10)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


# LeaveGroup's outcome: (top-level error, [(member id, group instance id, error)])
LeaveResult = tuple[int, list[tuple[str, str | None, int]]]


@dataclass
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 0
    max_size: int = 2**31 - 1
    # A KIP-394 member id that has not rejoined holds a finished join phase at most this long.
    pending_member_join_grace_ms: int = 1000


class ClassicGroupManager:
    def __init__(self, shard: ShardContext, clock: ShardClock, config: GroupConfig) -> None:
        self.shard = shard
        self.clock = clock
        self.config = config
        self.groups = shard.groups  # every type's, by id: one namespace

    # helpers --------------------------------------------------------------------------

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if type(group) is ClassicGroup else None

    def get_or_create(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.clock.wall())
        return cast("ClassicGroup", group)  # its caller asks only for an id no group has yet

    @staticmethod
    def resolve(fut: asyncio.Future[Any] | None, value: Any) -> None:
        if fut is not None and not fut.done():
            fut.set_result(value)

    def on_loaded(self, group: ClassicGroup) -> None:
        """After the log is replayed: the loaded members' sessions start now (Kafka's
        onLoaded), so a member that does not come back expires and triggers a rebalance."""
        for member in group.members.values():
            self.schedule_expiry(group, member)

    # JoinGroup ------------------------------------------------------------------------

    def join(self, r: JoinRequest) -> CoordinatorResult:
        """JoinGroup. The response is a JoinResult now, or a future resolved when the join
        phase ends.

        A join that creates the group and writes nothing else (its answer MEMBER_ID_REQUIRED,
        a join phase under way, a refusal) writes the new group's empty record, as Kafka's
        classicGroupJoinToClassicGroup does to commit the group it created: if that write
        fails the group is gone again, and a member still waiting is answered the error."""
        out = CoordinatorResult()
        existed = r.group_id in self.groups
        out.response = self._join(out, r)
        if not existed and not out.writes:
            group = self.groups.get(r.group_id)
            if type(group) is ClassicGroup:
                self._store_new_group(out, group)
        return out

    def _store_new_group(self, out: CoordinatorResult, group: ClassicGroup) -> None:
        # Kafka's newEmptyGroupMetadataRecord: no protocol type, generation 0, no members,
        # whatever the join did to the group; the timestamp is its state's.
        record = GroupMetadataValue(
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            members=(),
            current_state_timestamp=group.state_timestamp,
        )

        def stored(error: int) -> None:
            if error != E.none and self.groups.get(group.group_id) is group:
                log.warning("group %s: storing the new group failed (error %d): it is removed", group.group_id, error)
                self._discard(group, error)

        out.add([(GroupMetadataKey(group.group_id), record)], stored)

    def _discard(self, group: ClassicGroup, error: int) -> None:
        """A new group whose first record could not be written goes, with all that was done
        to it meanwhile (those writes failed too): Kafka reverts to the snapshot before it."""
        del self.groups[group.group_id]
        for timer in (group.join_timer, group.session_timer, group.sync_timer, group.pending_timer):
            if timer is not None:
                timer.cancel()
        group.join_timer = group.session_timer = group.sync_timer = group.pending_timer = None
        for member in group.members.values():
            self.resolve(member.join_waiter, JoinResult(error))
            self.resolve(member.sync_waiter, SyncResult(error))
            member.join_waiter = member.sync_waiter = None
        if group.state is not S.DEAD:
            group.transition(S.DEAD, self.clock.wall())  # stale references see it gone

    def _join(self, out: CoordinatorResult, r: JoinRequest) -> JoinResult | asyncio.Future[Any]:
        group_instance_id: str | None  # (declared: mypyc would type the name by a branch that narrows it to None)
        group_id, member_id, group_instance_id, client_id = r.group_id, r.member_id, r.group_instance_id, r.client_id
        protocol_type, protocols = r.protocol_type, r.protocols
        session_timeout_ms, rebalance_timeout_ms = r.session_timeout_ms, r.rebalance_timeout_ms
        if not group_id:
            return JoinResult(E.invalid_group_id, member_id)
        group = self.groups.get(group_id)
        if type(group) in NOT_CLASSIC_OR_CONSUMER:
            return JoinResult(E.inconsistent_group_protocol, UNKNOWN_MEMBER_ID)  # as Kafka's classicGroupJoin
        if group is not None and type(group) is not ClassicGroup and not group.is_empty():
            # A classic member of a consumer group (KIP-848 migration): the server assigns.
            return cast(
                "JoinResult | asyncio.Future[Any]", self.shard.migration.join(out, cast("ConsumerGroup", group), r)
            )  # a group a classic request reaches here that is neither classic, share nor streams is a consumer group
        cfg = self.config
        if not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(E.invalid_session_timeout, member_id)
        if rebalance_timeout_ms <= 0:
            return JoinResult(E.invalid_request, member_id)
        if r.reason:
            log.info("group %s: member %r joins: %s", group_id, member_id or client_id, r.reason)
        if group is not None and type(group) is not ClassicGroup:
            # An Empty consumer group becomes a classic one, as Kafka converts it: once its
            # tombstones are durable, the join runs again against no group at all.
            if getattr(group, "dead", False):
                return JoinResult(E.coordinator_not_available, member_id)
            fut = self.shard.loop().create_future()

            def converted(error: int) -> CoordinatorResult | None:
                if error != E.none:
                    self.resolve(fut, JoinResult(error, member_id))
                    return None
                again = self.join(dataclasses.replace(r, reason=None))
                joined = again.response
                if isinstance(joined, JoinResult):
                    self.resolve(fut, joined)
                else:
                    joined.add_done_callback(lambda f: self.resolve(fut, f.result()))
                return again  # (written by the runtime, as a follow-up of the conversion)

            self.shard.consumer.convert_to_classic(
                out, cast("ConsumerGroup", group), converted
            )  # a group a classic request reaches here that is neither classic, share nor streams is a consumer group
            return fut
        if group is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return JoinResult(E.unknown_member_id, member_id)
            group = self.get_or_create(group_id)
        if group.state is S.DEAD:
            # The group was deleted under us; the client will find the coordinator again.
            return JoinResult(E.coordinator_not_available, member_id)
        if not group.supports_protocols(protocol_type, protocols):
            return JoinResult(E.inconsistent_group_protocol, member_id)
        if not self._accepts(group, member_id):
            return JoinResult(E.group_max_size_reached, member_id)
        if member_id == UNKNOWN_MEMBER_ID:
            new_id = f"{client_id}-{random_uuid()}"
            if group_instance_id is not None:
                return self._static_join(out, group, group_instance_id, new_id, r, r.supports_skip_assignment)
            if r.require_known_member_id:
                # KIP-394: hand out the id first; the member must come back with it.
                expiry = self.clock.now() + session_timeout_ms
                group.pending_members[new_id] = expiry
                if group.initial_delay:  # a member is arriving: the initial delay waits for it too
                    group.new_member_added = True
                self._expire_pending_at(group, expiry)
                return JoinResult(E.member_id_required, new_id)
            return self._add_member_and_rebalance(out, group, new_id, group_instance_id, r)
        # A known member id.
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return self._add_member_and_rebalance(out, group, member_id, group_instance_id, r)
        if group.fenced(group_instance_id, member_id):
            return JoinResult(E.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None or group.state is S.EMPTY:
            return JoinResult(E.unknown_member_id, member_id)
        if group.state is S.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(out, group, member, r)
        if group.state is S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member (typically the leader) missed its JoinGroup response: repeat it.
                return self._join_result(group, member)
            return self._update_member_and_rebalance(out, group, member, r)
        # Stable
        if member_id == group.leader_id or not member.matches(protocols):
            return self._update_member_and_rebalance(out, group, member, r)
        return self._join_result(group, member)

    def _accepts(self, group: ClassicGroup, member_id: str) -> bool:
        """Kafka's acceptJoiningMember: existing members may always rejoin."""
        if group.state is S.EMPTY or group.state is S.DEAD or member_id in group.members:
            return True
        return len(group.members) + len(group.pending_members) < self.config.max_size or (
            member_id in group.pending_members and len(group.members) < self.config.max_size
        )

    def _new_member(self, member_id: str, group_instance_id: str | None, spec: MemberSpec) -> Member:
        return Member(
            member_id,
            group_instance_id,
            spec.client_id,
            spec.client_host,
            spec.session_timeout_ms,
            spec.rebalance_timeout_ms,
            spec.protocol_type,
            list(spec.protocols),
        )

    def _add_member_and_rebalance(
        self, out: CoordinatorResult, group: ClassicGroup, member_id: str, instance_id: str | None, spec: MemberSpec
    ) -> asyncio.Future[Any]:
        member = self._new_member(member_id, instance_id, spec)
        group.add(member)
        instance = f", instance {instance_id}" if instance_id else ""
        begins = group.can_rebalance()
        if not begins:
            log.info(
                "group %s: member %s joins (client %s, host %s%s)",
                group.group_id,
                member_id,
                member.client_id,
                member.client_host,
                instance,
            )
        if group.state is S.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        fut = self._await_join(group, member)
        self.schedule_expiry(group, member)
        if begins:
            # The join phase it begins is said by one line with this reason in it (its
            # generation's if it ends at once, the churn of a test suite; else the preparing
            # line): the member's client and host are said there, not in a line of their own.
            reason = f"member {member_id} joined, client {member.client_id}, host {member.client_host}{instance}"
            self.prepare_rebalance(out, group, reason)
        self._try_complete_join(out, group)
        return fut

    def _update_member_and_rebalance(
        self, out: CoordinatorResult, group: ClassicGroup, member: Member, spec: MemberSpec
    ) -> asyncio.Future[Any]:
        group.update_protocols(member, list(spec.protocols))
        member.session_timeout_ms, member.rebalance_timeout_ms = spec.session_timeout_ms, spec.rebalance_timeout_ms
        fut = self._await_join(group, member)
        self._maybe_prepare_rebalance(out, group, f"member {member.member_id} rejoined with new metadata or as leader")
        self._try_complete_join(out, group)
        return fut

    def _await_join(self, group: ClassicGroup, member: Member) -> asyncio.Future[Any]:
        if member.join_waiter is not None:
            # A second JoinGroup from the same member replaces the first (its connection
            # may be gone); the old one learns it was superseded.
            self.resolve(member.join_waiter, JoinResult(E.unknown_member_id, member.member_id))
        else:
            group.awaiting_join_count += 1
        member.join_waiter = self.shard.loop().create_future()
        return member.join_waiter

    def _static_join(
        self,
        out: CoordinatorResult,
        group: ClassicGroup,
        instance_id: str,
        new_id: str,
        spec: MemberSpec,
        supports_skip: bool,
    ) -> JoinResult | asyncio.Future[Any]:
        old_id = group.static_members.get(instance_id)
        if old_id is None:
            return self._add_member_and_rebalance(out, group, new_id, instance_id, spec)
        # KIP-345: a known static member restarted; it takes over the old member's place.
        old = group.members[old_id]
        protocols = list(spec.protocols)
        if group.state is S.STABLE and group.select_protocol(old, protocols) == group.protocol_name:
            return self._static_rejoin_stable(out, group, old, new_id, spec, supports_skip)
        self._replace_static_member(group, old, new_id, spec)
        fut = self._await_join(group, old)
        if group.state is S.STABLE:
            self._maybe_prepare_rebalance(out, group, f"static member {instance_id} changed protocols")
        elif group.state is S.COMPLETING_REBALANCE:
            # The leader may already hold the old member id in its assignment: rebalance.
            self.prepare_rebalance(out, group, f"static member {instance_id} rejoined during CompletingRebalance")
        self._try_complete_join(out, group)
        return fut

    def _static_rejoin_stable(
        self,
        out: CoordinatorResult,
        group: ClassicGroup,
        old: Member,
        new_id: str,
        spec: MemberSpec,
        supports_skip: bool,
    ) -> asyncio.Future[Any]:
        """Same metadata in a Stable group: no rebalance. The new member id is stored
        first and takes the old one's place only once on disk; the member is answered as
        of the current generation, and a static leader learns the members but skips
        assignment (KIP-814). If the write fails, the old id stays, as Kafka's
        "reverting to old member id", and the member gets the storage error."""
        old_id = old.member_id
        instance_id = cast("str", old.group_instance_id)  # `old` is a static member: it has one
        protocols = list(spec.protocols)
        was_leader = group.leader_id == old_id
        current_leader = group.leader_id
        generation = group.generation_id
        record = self.group_record(group)
        replaced = MemberMetadata(
            member_id=new_id,
            group_instance_id=instance_id,
            client_id=spec.client_id,
            client_host=spec.client_host,
            rebalance_timeout=spec.rebalance_timeout_ms,
            session_timeout=spec.session_timeout_ms,
            subscription=dict(protocols)[cast("str", group.protocol_name)],  # (Stable: a protocol is selected)
            assignment=old.assignment,
        )
        record = GroupMetadataValue(
            protocol_type=record.protocol_type,
            generation=record.generation,
            protocol=record.protocol,
            leader=new_id if was_leader else record.leader,
            members=tuple(replaced if m.member_id == old_id else m for m in record.members),
            current_state_timestamp=record.current_state_timestamp,
        )
        fut = self.shard.loop().create_future()

        def stored(error: int) -> None:
            if error != E.none:
                log.warning(
                    "group %s: storing static member %s's new member id failed: it keeps %s",
                    group.group_id,
                    instance_id,
                    old_id,
                )
                self.resolve(
                    fut,
                    JoinResult(
                        error,
                        UNKNOWN_MEMBER_ID,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        current_leader or "",
                    ),
                )
                return
            member = group.members.get(old_id)
            if member is None or group.static_members.get(instance_id) != old_id:
                self.resolve(fut, JoinResult(E.unknown_member_id, new_id))  # removed meanwhile
                return
            self._replace_static_member(group, member, new_id, spec)
            if group.generation_id != generation or group.state is not S.STABLE:
                self.resolve(fut, JoinResult(E.rebalance_in_progress, new_id))
                return
            if was_leader and supports_skip:
                result = self._join_result(group, member, as_leader=True)
                result.skip_assignment = True
            else:
                result = self._join_result(group, member, as_leader=False)
                result.leader_id = current_leader or ""
            self.resolve(fut, result)

        out.add([(GroupMetadataKey(group.group_id), record)], stored)
        return fut

    def _replace_static_member(self, group: ClassicGroup, old: Member, new_id: str, spec: MemberSpec) -> None:
        """The static member `old` continues as `new_id` with the rejoin's settings; a
        request still waiting under the old id learns it was fenced."""
        old_id = old.member_id
        self.resolve(old.join_waiter, JoinResult(E.fenced_instance_id, old_id))
        self.resolve(old.sync_waiter, SyncResult(E.fenced_instance_id))
        if old.join_waiter is not None:
            group.awaiting_join_count -= 1
        old.join_waiter = old.sync_waiter = None
        del group.members[old_id]
        old.member_id = new_id
        old.client_id, old.client_host = spec.client_id, spec.client_host
        old.session_timeout_ms, old.rebalance_timeout_ms = spec.session_timeout_ms, spec.rebalance_timeout_ms
        group.members[new_id] = old
        group.static_members[old.group_instance_id] = new_id  # type: ignore[index]  # only static members get here, and they have an instance id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        group.update_protocols(old, list(spec.protocols))
        self._heartbeat_ok(old)

    def _join_result(self, group: ClassicGroup, member: Member, as_leader: bool | None = None) -> JoinResult:
        leader = group.leader_id == member.member_id if as_leader is None else as_leader
        members = []
        if leader and group.protocol_name is not None:
            members = [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name)) for m in group.members.values()
            ]
        return JoinResult(
            E.none,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            False,
            members,
        )

    # the join phase -------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, out: CoordinatorResult, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(out, group, reason)

    def prepare_rebalance(self, out: CoordinatorResult, group: ClassicGroup, reason: str) -> None:
        # Kafka's "Preparing to rebalance" line is written for a join phase that waits; one
        # that ends at once (a lone member joining or leaving: the churn of a test suite)
        # is said by its generation's line alone, with this reason in it.
        group.rebalance_reason = reason
        if group.state is S.COMPLETING_REBALANCE:
            self._fail_pending_syncs(group, E.rebalance_in_progress)
        group.sync_deadline = None  # (its timer, if armed, fires to no effect)
        now = self.clock.now()
        group.join_started = now
        rebalance_ms = group.max_rebalance_timeout_ms()
        group.initial_delay = group.state is S.EMPTY and self.config.initial_rebalance_delay_ms > 0
        if group.initial_delay:
            # Kafka's InitialDelayedJoin: wait a little for more members, extending the
            # delay while new ones keep arriving, never beyond the rebalance timeout.
            group.new_member_added = False
            group.join_deadline = now + rebalance_ms
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_ms)
            self._log_preparing(group)
            group.transition(S.PREPARING_REBALANCE, self.clock.wall())
            self._arm_join_timer(group, now + delay, initial=True)
            return
        group.join_deadline = now + rebalance_ms
        group.transition(S.PREPARING_REBALANCE, self.clock.wall())
        # Kafka's tryCompleteElseWatch: a join phase every member has already joined ends
        # now (a one-member group's rejoin), with no timer armed and cancelled for it.
        if self._join_ready(group, now):
            self._complete_join(out, group)
        else:
            self._log_preparing(group)
            self._arm_join_timer(group, self._next_join_check(group, now), initial=False)

    @staticmethod
    def _log_preparing(group: ClassicGroup) -> None:
        # The join phase's lines are made here, compiled, as f-strings: `msg % args` in the
        # log's formatting is several times the cost (a join-sync-leave cycle writes two).
        log.info(
            f"group {group.group_id}: preparing to rebalance (generation {group.generation_id}): {group.rebalance_reason}"
        )

    def _arm_join_timer(self, group: ClassicGroup, when: float, initial: bool) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_timer = self.clock.call_at(when, self._on_join_timer, group, initial)

    def _on_join_timer(self, group: ClassicGroup, initial: bool) -> CoordinatorResult | None:
        group.join_timer = None
        if group.state is not S.PREPARING_REBALANCE:
            return None
        out = CoordinatorResult()
        self._join_phase_timer(out, group, initial)
        return out

    def _join_phase_timer(self, out: CoordinatorResult, group: ClassicGroup, initial: bool) -> None:
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
                self._complete_join(out, group)
            else:
                self._arm_join_timer(group, self._next_join_check(group, now), initial=False)
            return
        if now >= group.join_deadline or self._join_ready(group, now):
            self._complete_join(out, group)
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

    def _try_complete_join(self, out: CoordinatorResult, group: ClassicGroup) -> None:
        """Kafka's tryCompleteElseWatch: end the join phase as soon as it can end."""
        if group.state is not S.PREPARING_REBALANCE:
            return
        if group.initial_delay:
            return  # the initial delay runs its course
        now = self.clock.now()
        if self._join_ready(group, now):
            self._complete_join(out, group)
        elif group.has_all_members_joined() and group.pending_members:
            self._arm_join_timer(group, self._next_join_check(group, now), initial=False)

    def _complete_join(self, out: CoordinatorResult, group: ClassicGroup) -> None:
        """Kafka's onCompleteJoin: drop members that did not rejoin, start the next generation."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.has_all_members_joined():
            for member in [m for m in group.members.values() if not m.awaiting_join]:
                log.info("group %s: removing member %s, which did not rejoin in time", group.group_id, member.member_id)
                self._remove_member(group, member)
        if group.leader_id is not None and not group.members[group.leader_id].awaiting_join:
            group.leader_id = next((m.member_id for m in group.members.values() if m.awaiting_join), None)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(S.EMPTY, self.clock.wall())
            log.info(f"group {group.group_id}: generation {group.generation_id} is empty ({group.rebalance_reason})")
            stored = group.stored
            if stored is not None and stored.generation == group.generation_id and not stored.members:
                return  # stored before the last members left (leave())
            # Members that expired are gone whatever the disk says: if this fails, as in
            # Kafka, the last stored generation stays on disk, and its members, loaded
            # back after a restart, expire there.
            out.add(
                [(GroupMetadataKey(group.group_id), self.group_record(group))],
                lambda error: (
                    error == E.none
                    or log.error(
                        "group %s: storing empty generation %d failed (error %d)",
                        group.group_id,
                        group.generation_id,
                        error,
                    )
                ),
            )
            return
        group.protocol_name = group.select_protocol()
        group.transition(S.COMPLETING_REBALANCE, self.clock.wall())
        now = self.clock.now()  # (read once: the members' sessions and the sync deadline start now)
        STATS.rebalances += 1
        STATS.rebalance_seconds.observe((now - group.join_started) / 1000)
        log.info(
            f"group {group.group_id}: generation {group.generation_id} with {len(group.members)} members, "
            f"protocol {group.protocol_name}, leader {group.leader_id} ({group.rebalance_reason})"
        )
        group.pending_sync = set(group.members)
        for member in group.members.values():
            result = self._join_result(group, member)
            fut, member.join_waiter = member.join_waiter, None
            self.resolve(fut, result)
            member.deadline = now + member.session_timeout_ms  # (_heartbeat_ok)
        group.awaiting_join_count = 0
        # Members that never send SyncGroup are removed after the rebalance timeout.
        group.sync_deadline = deadline = now + group.max_rebalance_timeout_ms()
        self._arm_sync_timer(group, deadline)

    def _arm_sync_timer(self, group: ClassicGroup, deadline: float) -> None:
        """The group's one sync timer fires by `deadline`. Lazy, as members' session timers
        are: a timer armed for an earlier generation's deadline is kept, and moves itself
        to the current one when it fires, rather than being cancelled and armed again with
        every generation."""
        group.sync_timer, group.sync_timer_at = self.clock.fire_by(
            group.sync_timer, group.sync_timer_at, deadline, self._on_sync_timeout, group
        )

    def _on_sync_timeout(self, group: ClassicGroup) -> CoordinatorResult | None:
        group.sync_timer = None
        deadline = group.sync_deadline
        if deadline is None:
            return None  # no generation awaits its SyncGroups (a rebalance began since)
        if self.clock.now() < deadline:  # armed for an earlier generation
            self._arm_sync_timer(group, deadline)
            return None
        group.sync_deadline = None
        if not group.pending_sync:
            return None
        if not (group.state is S.COMPLETING_REBALANCE or group.state is S.STABLE):
            return None
        out = CoordinatorResult()
        missing = [group.members[m] for m in group.pending_sync if m in group.members]
        for member in missing:
            log.info("group %s: removing member %s, which sent no SyncGroup", group.group_id, member.member_id)
            self._remove_member(group, member)
        self._after_removal(out, group, "members did not sync")
        return out

    # SyncGroup ------------------------------------------------------------------------

    def sync(self, r: SyncRequest) -> CoordinatorResult:
        """SyncGroup. The response is a SyncResult now, or a future resolved once the
        leader's assignment is stored."""
        out = CoordinatorResult()
        out.response = self._sync(out, r)
        return out

    def _sync(self, out: CoordinatorResult, r: SyncRequest) -> SyncResult | asyncio.Future[Any]:
        if not r.group_id:
            return SyncResult(E.invalid_group_id)
        group = self.groups.get(r.group_id)
        if type(group) in NOT_CLASSIC_OR_CONSUMER:
            return SyncResult(E.unknown_member_id)
        if group is not None and type(group) is not ClassicGroup:
            return self.shard.migration.sync(
                cast(
                    "ConsumerGroup", group
                ),  # a group a classic request reaches here that is neither classic, share nor streams is a consumer group
                r,
            )
        if group is None:
            return SyncResult(E.unknown_member_id)
        if group.state is S.DEAD:
            return SyncResult(E.coordinator_not_available)
        if group.fenced(r.group_instance_id, r.member_id):
            return SyncResult(E.fenced_instance_id)
        member = group.members.get(r.member_id)
        if member is None:
            return SyncResult(E.unknown_member_id)
        if r.generation_id != group.generation_id:
            return SyncResult(E.illegal_generation)
        if (r.protocol_type is not None and r.protocol_type != group.protocol_type) or (
            r.protocol_name is not None and r.protocol_name != group.protocol_name
        ):
            return SyncResult(E.inconsistent_group_protocol)
        if group.state is S.EMPTY:
            return SyncResult(E.unknown_member_id)
        if group.state is S.PREPARING_REBALANCE:
            return SyncResult(E.rebalance_in_progress)
        group.pending_sync.discard(r.member_id)
        self._heartbeat_ok(member)
        if group.state is S.STABLE:
            return SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: wait for the leader's assignment.
        fut = self.shard.loop().create_future()
        if member.sync_waiter is not None:  # a second SyncGroup replaces the first
            self.resolve(member.sync_waiter, SyncResult(E.rebalance_in_progress))
        member.sync_waiter = fut
        if r.member_id == group.leader_id:
            self._store_assignment(out, group, self.group_record(group, r.assignments))
        return fut

    def _store_assignment(self, out: CoordinatorResult, group: ClassicGroup, record: GroupMetadataValue) -> None:
        """The leader's assignment: on disk first, then handed to every member (Stable).
        If it cannot be stored, the members are told so and must rejoin (Kafka's
        resetAndPropagateAssignmentWithError, then a rebalance)."""
        generation = record.generation

        def stored(error: int) -> CoordinatorResult | None:
            if not (group.state is S.COMPLETING_REBALANCE and group.generation_id == generation):
                return None  # the group moved on meanwhile (a member left, joined, expired)
            if error != E.none:
                log.error("group %s: storing generation %d failed (error %d)", group.group_id, generation, error)
                self._fail_pending_syncs(group, error)
                follow_up = CoordinatorResult()
                self.prepare_rebalance(follow_up, group, "storing the assignment failed")
                return follow_up
            by_id = {m.member_id: m.assignment for m in record.members}
            for member in group.members.values():
                member.assignment = by_id.get(member.member_id, b"")
            for member in group.members.values():
                fut, member.sync_waiter = member.sync_waiter, None
                self.resolve(fut, SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment))
            group.transition(S.STABLE, self.clock.wall())
            return None

        out.add([(GroupMetadataKey(group.group_id), record)], stored)

    def group_record(self, group: ClassicGroup, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        # (the tuples built by records' member_metadata and group_metadata_value, in the
        # tuples' order: a NamedTuple's own __new__ is interpreted Python)
        protocol = group.protocol_name
        members: list[MemberMetadata] = []
        for m in group.members.values():
            members.append(
                member_metadata(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout_ms,
                    m.metadata_for(protocol) if protocol else b"",  # subscription
                    # Assignments for unknown members are dropped; missing ones are empty.
                    assignments.get(m.member_id, b"") if assignments is not None else m.assignment,
                    m.rebalance_timeout_ms,
                    m.group_instance_id,
                )
            )
        return group_metadata_value(
            group.protocol_type or "", group.generation_id, protocol, group.leader_id, tuple(members), self.clock.wall()
        )

    def _fail_pending_syncs(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            fut, member.sync_waiter = member.sync_waiter, None
            self.resolve(fut, SyncResult(error))

    # Heartbeat ------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        if not group_id:
            return E.invalid_group_id
        group = self.groups.get(group_id)
        if type(group) in NOT_CLASSIC_OR_CONSUMER:
            return E.unknown_member_id
        if group is not None and type(group) is not ClassicGroup:
            return self.shard.migration.heartbeat(
                cast("ConsumerGroup", group), member_id, group_instance_id, generation_id
            )  # a group a classic request reaches here that is neither classic, share nor streams is a consumer group
        if group is None:
            return E.unknown_member_id
        if group.state is S.DEAD:
            return E.coordinator_not_available
        error, member = group.check_member(group_instance_id, member_id, generation_id)
        if member is None:
            return error
        state = group.state
        if state is S.EMPTY:
            return E.unknown_member_id
        member.deadline = self.clock.now() + member.session_timeout_ms  # O(1): the group's timer re-arms lazily
        if state is S.PREPARING_REBALANCE:
            return E.rebalance_in_progress
        return E.none

    def _heartbeat_ok(self, member: Member) -> None:
        member.deadline = self.clock.now() + member.session_timeout_ms

    def schedule_expiry(self, group: ClassicGroup, member: Member) -> None:
        """The member's session starts now; the group's session timer fires by its deadline."""
        self._heartbeat_ok(member)
        self._expire_sessions_at(group, member.deadline)

    def _expire_sessions_at(self, group: ClassicGroup, when: float) -> None:
        """The group's one session timer fires by `when`. Lazy (like Kafka's purgatory): a
        heartbeat only moves its member's deadline, and the timer, when it fires, expires
        the members past theirs and moves itself to the earliest remaining one."""
        group.session_timer, group.session_timer_at = self.clock.fire_by(
            group.session_timer, group.session_timer_at, when, self._on_session_timer, group
        )

    def _on_session_timer(self, group: ClassicGroup) -> CoordinatorResult | None:
        group.session_timer = None
        now = self.clock.now()
        expired: list[Member] = []
        earliest: float | None = None
        for member in group.members.values():
            if member.deadline <= now:
                # Members blocked in JoinGroup or SyncGroup are alive: their request is the heartbeat.
                if member.awaiting_join or member.sync_waiter is not None:
                    member.deadline = now + member.session_timeout_ms
                else:
                    expired.append(member)
                    continue
            if earliest is None or member.deadline < earliest:
                earliest = member.deadline
        if earliest is not None:
            self._expire_sessions_at(group, earliest)
        if not expired:
            return None
        out = CoordinatorResult()
        for member in expired:
            if group.members.get(member.member_id) is not member:
                continue  # (removed meanwhile, by the removal of another)
            STATS.expired_members += 1
            log.info(
                "group %s: member %s session expired (client %s, host %s, session timeout %d ms)",
                group.group_id,
                member.member_id,
                member.client_id,
                member.client_host,
                member.session_timeout_ms,
            )
            self._remove_member(group, member)
            self._after_removal(out, group, f"member {member.member_id} session expired")
        return out

    def _expire_pending_at(self, group: ClassicGroup, expiry: float) -> None:
        """The group's one timer for its KIP-394 pending member ids fires by `expiry` (Kafka
        arms one per id; ids are mostly used within milliseconds, and the timer armed for
        an earlier id's expiry serves the later ones)."""
        group.pending_timer, group.pending_timer_at = self.clock.fire_by(
            group.pending_timer, group.pending_timer_at, expiry, self._expire_pending, group
        )

    def _expire_pending(self, group: ClassicGroup) -> CoordinatorResult | None:
        group.pending_timer = None
        now = self.clock.now()
        expired = [member_id for member_id, expiry in group.pending_members.items() if expiry <= now]
        for member_id in expired:
            del group.pending_members[member_id]
            log.info("group %s: pending member %s never rejoined", group.group_id, member_id)
        if group.pending_members:
            self._expire_pending_at(group, min(group.pending_members.values()))
        if not expired:
            return None
        out = CoordinatorResult()
        self._try_complete_join(out, group)
        return out

    # LeaveGroup -----------------------------------------------------------------------

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]], reason: str | None = None
    ) -> CoordinatorResult:
        """LeaveGroup. The response is (top-level error, [(member id, instance id, error)]),
        Kafka's v3+ shape. A leave that empties the group stores the empty generation first,
        and the members leave once it is on disk (if it cannot be stored, the answer is the
        storage error and the group is as it was)."""
        out = CoordinatorResult()
        out.response = self._leave(out, group_id, members, reason)
        return out

    def _leave(
        self, out: CoordinatorResult, group_id: str, members: list[tuple[str, str | None]], reason: str | None
    ) -> LeaveResult:
        if not group_id:
            return E.invalid_group_id, []
        group = self.groups.get(group_id)
        if type(group) in NOT_CLASSIC_OR_CONSUMER:
            return E.unknown_member_id, []
        if group is not None and type(group) is not ClassicGroup:
            return cast(
                "tuple[int, list[tuple[str, str | None, int]]]",
                self.shard.migration.leave(out, cast("ConsumerGroup", group), members),
            )  # a group a classic request reaches here that is neither classic, share nor streams is a consumer group
        if group is None:
            return E.none, [(m, i, E.unknown_member_id) for m, i in members]
        if group.state is S.DEAD:
            return E.coordinator_not_available, []
        results: list[tuple[str, str | None, int]] = []
        leaving: list[Member] = []
        pending: list[str] = []
        instance_id: str | None  # (declared, as group_instance_id in _join)
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
                pending.append(member_id)
                results.append((member_id, instance_id, E.none))
                continue
            else:
                target = member_id
            member = group.members.get(target)
            if member is None or member in leaving:
                results.append((member_id, instance_id, E.unknown_member_id))
                continue
            leaving.append(member)
            results.append((member_id, instance_id, E.none))
        empties = (
            len(leaving) == len(group.members) > 0
            and not group.initial_delay
            and not (group.pending_members and group.pending_members.keys() - set(pending))
        )
        if not empties:
            self._remove_leaving(out, group, leaving, pending, reason)
            return E.none, results
        # The next generation, empty (protocol type, generation, protocol, leader, members,
        # timestamp, as in group_record)
        record = group_metadata_value(
            group.protocol_type or "", group.generation_id + 1, None, None, (), self.clock.wall()
        )

        def stored(error: int) -> CoordinatorResult | None:
            if error != E.none:
                return None  # (answered with the error: the members stay)
            follow_up = CoordinatorResult()
            self._remove_leaving(
                follow_up, group, [m for m in leaving if group.members.get(m.member_id) is m], pending, reason
            )
            return follow_up

        out.add([(GroupMetadataKey(group.group_id), record)], stored)
        return E.none, results

    def _remove_leaving(
        self, out: CoordinatorResult, group: ClassicGroup, leaving: list[Member], pending: list[str], reason: str | None
    ) -> None:
        for member_id in pending:
            group.pending_members.pop(member_id, None)
        why = f": {reason}" if reason else ""
        # A lone member leaving a Stable or CompletingRebalance group begins a join phase
        # (_after_removal), said by one line with the leave in its reason (its generation's,
        # "is empty", for the group's last member: the churn of a test suite).
        alone = len(leaving) == 1 and (group.state is S.STABLE or group.state is S.COMPLETING_REBALANCE)
        left = "members left"
        for member in leaving:
            if alone:
                left = f"member {member.member_id} left, client {member.client_id}, host {member.client_host}{why}"
            else:
                log.info(
                    "group %s: member %s leaves (client %s, host %s)%s",
                    group.group_id,
                    member.member_id,
                    member.client_id,
                    member.client_host,
                    why,
                )
            self._remove_member(group, member)
        if leaving or pending:
            self._after_removal(out, group, left)

    def _remove_member(self, group: ClassicGroup, member: Member) -> None:
        if member.join_waiter is not None:
            self.resolve(member.join_waiter, JoinResult(E.unknown_member_id, member.member_id))
        if member.sync_waiter is not None:
            self.resolve(member.sync_waiter, SyncResult(E.unknown_member_id))
        group.remove(member.member_id)
        member.join_waiter = member.sync_waiter = None

    def _after_removal(self, out: CoordinatorResult, group: ClassicGroup, reason: str) -> None:
        """Kafka's removeMemberAndUpdateGroup tail: rebalance, or finish a pending join."""
        if group.state is S.STABLE or group.state is S.COMPLETING_REBALANCE:
            self.prepare_rebalance(out, group, reason)
            self._try_complete_join(out, group)
        elif group.state is S.PREPARING_REBALANCE:
            self._try_complete_join(out, group)
