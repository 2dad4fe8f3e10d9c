"""Classic members in consumer groups, and groups changing protocol while they have
members: Kafka's KIP-848 online migration (GroupMetadataManager's classicGroupJoinTo-,
classicGroupSyncTo-, classicGroupHeartbeatTo-, classicGroupLeaveToConsumerGroup,
convertToConsumerGroup, convertToClassicGroup).

- Upgrade: a ConsumerGroupHeartbeat joining a classic group with members turns it into a
  consumer group (if `group.consumer.migration.policy` allows, the group uses the
  `consumer` protocol type, and it is not larger than `group.consumer.max.size`). Its
  members stay, as classic members of the consumer group, with the partitions they were
  assigned and the classic generation as their epoch; the classic group's record gets a
  tombstone in the same batch as the consumer group's records.
- Classic members of a consumer group keep using JoinGroup/SyncGroup/Heartbeat/LeaveGroup.
  The server assigns for them as for everyone: a JoinGroup updates the member's
  subscription and is answered at once (no join phase; no leader: the member is told its
  epoch as generation), SyncGroup returns the member's current partitions (serialized
  in its consumer protocol version), and Heartbeat answers REBALANCE_IN_PROGRESS while the
  member is behind the group epoch or has partitions to revoke or to pick up, so it rejoins.
  A classic member must rejoin, and sync after joining, within its rebalance timeout.
- Downgrade: when the last consumer-protocol member leaves or is fenced and classic members
  remain, the group becomes a classic group at generation = the group epoch, each member
  holding its target assignment, and rebalances (if the policy allows downgrades).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol import consumer_records as R
from protocol.consumer_protocol import (
    ConsumerProtocolError,
    read_assignment,
    read_subscription,
    version_of,
    write_assignment,
)

from .... import server_log
from ...classic.classic_group import ClassicGroup, JoinRequest, JoinResult, Member, SyncRequest, SyncResult
from ...classic.classic_manager import ClassicGroupManager
from . import consumer_group
from .consumer_group import ConsumerGroup, ConsumerMember
from .consumer_manager import ConsumerGroupManager
from ..modern_group import heartbeat_order
from ..reconciliation import MemberState
from ...records import GroupMetadataKey
from ...shard_context import CoordinatorResult, ShardContext
from ...state import GroupState

log = server_log.get(__name__)

PROTOCOL_TYPE = "consumer"

# the order of a converted group's records (Kafka's ConsumerGroup.createConsumerGroupRecords:
# by role, as a heartbeat writes them)
_CONVERSION_ORDER = heartbeat_order(R, "ConsumerGroup")


class GroupMigration:
    def __init__(self, shard: ShardContext, classic: ClassicGroupManager, consumer: ConsumerGroupManager) -> None:
        self.shard = shard
        self.groups = shard.groups
        self.consumer = consumer
        self.classic = classic
        self.clock = classic.clock

    # topic names <-> ids --------------------------------------------------------------

    def _by_id(self, partitions: list[tuple[str, list[int]]]) -> list[tuple[uuid.UUID, list[int]]]:
        """Partitions of topics that exist, by topic id (others are dropped, as Kafka does)."""
        out = []
        for name, ps in partitions:
            found = self.consumer.image.lookup(name)
            if found is not None:
                out.append((found[0], [p for p in ps if 0 <= p < found[1]]))
        return out

    def _by_name(self, assignment: dict[uuid.UUID, frozenset[int]]) -> list[tuple[str, list[int]]]:
        named = []
        for topic_id, ps in assignment.items():
            name = self.consumer.image.name_of(topic_id)
            if name is not None and ps:
                named.append((name, sorted(ps)))
        return sorted(named)

    # upgrade --------------------------------------------------------------------------

    def upgrade(self, classic: ClassicGroup) -> ConsumerGroup | None:
        """The consumer group this classic group with members becomes, or None if it may not
        (the caller answers GROUP_ID_NOT_FOUND, as Kafka)."""
        config = self.consumer.config
        if not config.upgrade_enabled:
            log.info(
                "group %s: not upgraded to a consumer group: the migration policy is %s",
                classic.group_id,
                config.migration_policy,
            )
            return None
        if (
            classic.protocol_type != PROTOCOL_TYPE
            or len(classic.members) > config.max_size
            or classic.is_(GroupState.DEAD)
        ):
            return None
        group = ConsumerGroup(classic.group_id)
        group.group_epoch = group.assignment_epoch = classic.generation_id
        try:
            for m in classic.members.values():
                protocol = classic.protocol_name or m.protocols[0][0]
                subscription = read_subscription(m.metadata_for(protocol))
                assigned = {t: frozenset(ps) for t, ps in self._by_id(read_assignment(m.assignment)) if ps}
                member = ConsumerMember(
                    m.member_id,
                    m.group_instance_id,
                    subscription.rack_id,
                    m.client_id,
                    m.client_host,
                    tuple(sorted(subscription.topics)),
                    None,
                    None,
                    m.rebalance_timeout_ms,
                    member_epoch=classic.generation_id,
                    previous_member_epoch=classic.generation_id,
                    classic=R.ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
                )
                group.members[member.member_id] = member
                if member.instance_id is not None:
                    group.static_members[member.instance_id] = member.member_id
                group.target[member.member_id] = assigned
                group.set_owned(member, assigned, {})
        except (ConsumerProtocolError, KeyError):
            log.info("group %s: not upgraded: a member's embedded consumer protocol is malformed", classic.group_id)
            return None
        log.info(
            "group %s: classic group (generation %d, %d members) becomes a consumer group",
            classic.group_id,
            classic.generation_id,
            len(group.members),
        )
        self.retire_classic(classic)
        group.subscription_metadata = self.consumer.subscription_metadata(group)
        # Kafka's convertToConsumerGroup: the classic group's tombstone, then the consumer
        # group as converted (createConsumerGroupRecords: every member's subscription, the
        # epoch, every member's target, the target's metadata, every member's current
        # assignment), all before what the joining member's heartbeat writes.
        converted = consumer_group.records_of(group)
        group.extra_records = [(GroupMetadataKey(classic.group_id), None)] + sorted(
            converted.items(), key=lambda kv: _CONVERSION_ORDER[type(kv[0])]
        )
        group.converted_from = classic.stored
        group.dirty = True
        group.changed_members = set(group.members)
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.consumer.touch(group, member)
        return group

    def retire_classic(self, classic: ClassicGroup) -> None:
        """The classic group's waiting members rejoin (REBALANCE_IN_PROGRESS); its timers stop."""
        for m in list(classic.members.values()):
            self.classic.resolve(m.join_waiter, JoinResult(E.rebalance_in_progress, m.member_id))
            self.classic.resolve(m.sync_waiter, SyncResult(E.rebalance_in_progress))
            m.join_waiter = m.sync_waiter = None
            classic.remove(m.member_id)
        for timer in (classic.join_timer, classic.sync_timer, classic.session_timer, classic.pending_timer):
            if timer is not None:
                timer.cancel()
        classic.join_timer = classic.sync_timer = classic.session_timer = classic.pending_timer = None
        classic.transition(GroupState.DEAD, self.clock.wall())

    def undo_upgrade(self, group: ConsumerGroup) -> None:
        """The upgrade could not be written: the classic group comes back as its log has it."""
        self.consumer.drop(group)
        record = group.converted_from
        if record is None:
            return
        classic = self.groups[group.group_id] = ClassicGroup.loaded(group.group_id, record)
        self.classic.on_loaded(classic)

    # the classic protocol's requests for a consumer group -----------------------------

    def join(self, out: CoordinatorResult, group: ConsumerGroup, r: JoinRequest) -> Any:
        """A JoinGroup: a JoinResult now, or a future of it once the member's records are written."""
        member_id, instance_id, protocol_type, protocols = (
            r.member_id,
            r.group_instance_id,
            r.protocol_type,
            r.protocols,
        )
        rebalance_timeout_ms = r.rebalance_timeout_ms
        # (a static member's id is the one it had: it need not come back for one)
        require_known_member_id = r.require_known_member_id and instance_id is None
        unknown = member_id == ""
        if unknown:
            member_id = str(uuid.uuid4())
        if member_id not in group.members and len(group.members) >= self.consumer.config.max_size:
            return JoinResult(E.group_max_size_reached, member_id)
        if not group.supports_classic_protocols(protocol_type, [name for name, _ in protocols]):
            return JoinResult(E.inconsistent_group_protocol, member_id)
        if unknown and require_known_member_id:
            return JoinResult(E.member_id_required, member_id)
        try:
            subscription = read_subscription(protocols[0][1])
        except ConsumerProtocolError:
            return JoinResult(E.unknown_server_error, member_id)  # Kafka: an IllegalStateException
        if instance_id is None:
            member = group.members.get(member_id) or ConsumerMember(member_id)
        else:
            current_id = group.static_members.get(instance_id)
            current = group.members.get(current_id) if current_id is not None else None
            if not unknown:
                if current is None:
                    return JoinResult(E.unknown_member_id, member_id)
                if current.member_id != member_id:
                    return JoinResult(E.fenced_instance_id, member_id)
                member = current
            elif current is None:
                member = ConsumerMember(member_id)
            else:
                member = self.consumer.replace_static(group, current, member_id)
                member.member_epoch = member.previous_member_epoch = 0
        bump = False
        topics = tuple(sorted(subscription.topics))
        if topics != member.subscribed_topic_names:
            member.subscribed_topic_names = topics
            bump = True
        member.instance_id = instance_id
        if subscription.rack_id is not None:
            member.rack_id = subscription.rack_id
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id, member.client_host = r.client_id, r.client_host
        classic = R.ClassicMemberMetadata(r.session_timeout_ms, tuple(protocols))
        if classic != member.classic:
            member.classic = classic
            group.dirty = True
            group.changed_members.add(member.member_id)
        self.consumer.update_member(group, member, bump, self._by_id(subscription.owned))
        member.classic_deadline = None  # joined: the join timeout is over
        result = JoinResult(E.none, member.member_id, member.member_epoch, PROTOCOL_TYPE, protocols[0][0], "")

        def joined(error: int) -> None:
            if error == E.none and group.members.get(member.member_id) is member:
                # It must now SyncGroup within its rebalance timeout.
                self._expect(group, member, rebalance_timeout_ms)

        if not group.dirty:
            joined(E.none)
            return result
        fut = asyncio.get_running_loop().create_future()

        def done(error: int) -> None:
            joined(error)
            if not fut.done():
                fut.set_result(result if error == E.none else JoinResult(error, member.member_id))

        self.consumer.persist(out, group, done)
        return fut

    def _member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[int, ConsumerMember | None]:
        """Kafka's validateConsumerGroupMember, then that it speaks the classic protocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                return E.unknown_member_id, None
        else:
            current_id = group.static_members.get(instance_id)
            member = group.members.get(current_id) if current_id is not None else None
            if member is None:
                return E.unknown_member_id, None
            if member.member_id != member_id:
                return E.fenced_instance_id, None
        if member.classic is None:
            return E.unknown_member_id, None
        return E.none, member

    def sync(self, group: ConsumerGroup, r: SyncRequest) -> SyncResult:
        error, member = self._member(group, r.member_id, r.group_instance_id)
        if member is None:
            return SyncResult(error)
        assert member.classic is not None
        if r.generation_id != member.member_epoch:
            return SyncResult(E.illegal_generation)
        name, metadata = member.classic.supported_protocols[0]
        if (r.protocol_type is not None and r.protocol_type != PROTOCOL_TYPE) or (
            r.protocol_name is not None and r.protocol_name != name
        ):
            return SyncResult(E.inconsistent_group_protocol)
        # Rejoin only for a newer target (KAFKA-20272): with assignment batching the group
        # epoch may be ahead of the target's for a while, and rejoining would bring nothing.
        if group.assignment_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._expect_rejoin(group, member)
            return SyncResult(E.rebalance_in_progress)
        member.classic_deadline = None
        self.consumer.touch(group, member)
        try:
            version = version_of(metadata)
        except ConsumerProtocolError:
            version = 0
        return SyncResult(E.none, PROTOCOL_TYPE, name, write_assignment(version, self._by_name(member.assigned)))

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int) -> int:
        error, member = self._member(group, member_id, instance_id)
        if member is None:
            return error
        if generation_id != member.member_epoch:
            return E.illegal_generation
        self.consumer.touch(group, member)
        # It rejoins when a newer target exists (KAFKA-20272: not merely a newer group epoch,
        # which batching lets run ahead), when it must revoke, or when partitions it waited
        # for are free.
        if (
            member.member_epoch < group.assignment_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not self._waiting(group, member))
        ):
            self._expect_rejoin(group, member)
            return E.rebalance_in_progress
        return E.none

    @staticmethod
    def _waiting(group: ConsumerGroup, member: ConsumerMember) -> bool:
        """Whether a partition of its target that it does not have is still owned by another."""
        owned_elsewhere = group.owned_elsewhere(member.member_id)
        for topic_id, ps in group.target.get(member.member_id, {}).items():
            mine = member.assigned.get(topic_id, frozenset())
            if any(p not in mine and owned_elsewhere(topic_id, p) for p in ps):
                return True
        return False

    def leave(self, out: CoordinatorResult, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> Any:
        """LeaveGroup: (top-level error, [(member id, instance id, error)]), answered once the
        members' tombstones are written."""
        results: list[tuple[str, str | None, int]] = []
        leaving: list[ConsumerMember] = []
        for member_id, instance_id in members:
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                current_id = group.static_members.get(instance_id)
                member = group.members.get(current_id) if current_id is not None else None
                if member is not None and member_id != "" and member.member_id != member_id:
                    results.append((member_id, instance_id, E.fenced_instance_id))
                    continue
            if member is None or member.classic is None or member in leaving:
                results.append((member_id, instance_id, E.unknown_member_id))
                continue
            log.info("group %s: classic member %s leaves", group.group_id, member.member_id)
            leaving.append(member)
            results.append((member.member_id, instance_id, E.none))
        if not leaving:
            return E.none, results
        for member in leaving:
            group.remove_member(member)
        self.consumer.after_removal(group)
        self.consumer.persist(out, group)
        return E.none, results

    # timers: a classic member must rejoin / sync within its rebalance timeout ----------

    def _expect_rejoin(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.classic_deadline is None:  # Kafka's scheduleIfAbsent
            self._expect(group, member, member.rebalance_timeout_ms)

    def _expect(self, group: ConsumerGroup, member: ConsumerMember, timeout_ms: int) -> None:
        member.classic_deadline = deadline = self.clock.now() + timeout_ms
        self.clock.call_at(deadline, self._on_deadline, group, member, deadline)

    def _on_deadline(self, group: ConsumerGroup, member: ConsumerMember, deadline: float) -> CoordinatorResult | None:
        if (
            self.groups.get(group.group_id) is group
            and group.members.get(member.member_id) is member
            and member.classic_deadline == deadline
        ):
            return self.consumer.fence(
                group, member, "the classic member did not rejoin or sync within its rebalance timeout"
            )
        return None

    # downgrade ------------------------------------------------------------------------

    def can_downgrade(self, group: ConsumerGroup, leaving: ConsumerMember) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        if not group.all_classic_except(leaving.member_id) or len(group.members) <= 1:
            return False
        if not self.consumer.config.downgrade_enabled:
            log.info(
                "group %s: not downgraded to a classic group: the migration policy is %s",
                group.group_id,
                self.consumer.config.migration_policy,
            )
            return False
        return len(group.members) - 1 <= self.classic.config.max_size

    def downgrade(self, out: CoordinatorResult, group: ConsumerGroup, leaving: ConsumerMember) -> None:
        """`leaving` (the last consumer-protocol member) goes; the others form a classic group
        with their target partitions, which rebalances."""
        group_id = group.group_id
        classic = ClassicGroup(group_id, self.clock.wall())
        classic.generation_id = group.group_epoch
        for m in group.members.values():
            if m is leaving:
                continue
            assert m.classic is not None
            classic.add(
                Member(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.classic.session_timeout_ms,
                    m.rebalance_timeout_ms,
                    PROTOCOL_TYPE,
                    list(m.classic.supported_protocols),
                )
            )
        classic.protocol_name = protocol = classic.select_protocol()
        for cm in classic.members.values():
            try:
                version = version_of(cm.metadata_for(protocol))
            except ConsumerProtocolError:
                version = 0
            cm.assignment = write_assignment(version, self._by_name(group.target.get(cm.member_id, {})))
        classic.state = GroupState.STABLE  # as Kafka builds it, before the rebalance below
        log.info(
            "group %s: the last consumer-protocol member %s leaves; the group becomes a classic group at generation %d",
            group_id,
            leaving.member_id,
            classic.generation_id,
        )
        records = self.consumer.delete_records(group_id)
        records.append((GroupMetadataKey(group_id), self.classic.group_record(classic)))
        self.consumer.drop(group)
        self.groups[group_id] = classic
        for cm in classic.members.values():
            self.classic.schedule_expiry(classic, cm)
        self.classic.prepare_rebalance(out, classic, f"downgrade of group {group_id} from consumer to classic")

        # If this cannot be written, the runtime's revert brings the consumer group back
        # (its records are still the written ones) and retires the classic group.
        out.add(records)
