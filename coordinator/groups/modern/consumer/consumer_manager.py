"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848), as Kafka's GroupMetadataManager.

One manager per shard, over the shard's groups (one namespace with classic groups). A
heartbeat runs in one synchronous section: validate, update the member, bump the group
epoch if what the assignment depends on changed, recompute the target assignment, move
the member towards it (reconciliation.py), and answer.

The records are kept and written as ModernGroupManager (modern_manager.py) keeps them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, cast

import re2
from kio.schema.errors import ErrorCode as E

from .... import server_log
from ..assignors import ASSIGNORS, DEFAULT_ASSIGNORS
from ...classic.classic_group import ClassicGroup
from ...records import GroupMetadataKey
from ...clock import Clock
from protocol import consumer_records as R

from . import consumer_group

from .consumer_group import (
    LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
)
from ...metadata_hash import metadata_hash
from ..reconciliation import MemberState, owns_any, reconcile
from ..modern_group import HEARTBEAT_ROLES, STATIC_LEAVE_EPOCH, initial_values, record_types, static_successor
from ..modern_manager import ApiError, HeartbeatResult, ModernGroupManager, known_member, static_member
from ...topic_image import TopicImage
from ...shard_context import Complete, CoordinatorResult, ShardContext

log = server_log.get(__name__)

Owned = list[tuple[uuid.UUID, list[int]]]


@dataclass(frozen=True)
class ConsumerGroupConfig:
    heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = 45000  # group.consumer.session.timeout.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = DEFAULT_ASSIGNORS  # group.consumer.assignors, the first is the default
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    assignment_interval_ms: int = 1000  # group.consumer.assignment.interval.ms (KIP-1263)
    min_assignment_interval_ms: int = 0  # group.consumer.min.assignment.interval.ms
    max_assignment_interval_ms: int = 15000  # group.consumer.max.assignment.interval.ms
    # A group's regexes are resolved again at most once per min interval (Kafka 4.4's
    # REGEX_BATCH_REFRESH_MIN_INTERVAL_MS, a constant there: a setting here only so that the
    # test profile may shorten it), and at least once per interval (Kafka's internal
    # group.consumer.regex.refresh.interval.ms) even if no topic was created meanwhile.
    regex_min_refresh_interval_ms: int = 10_000
    regex_refresh_interval_ms: int = 600_000

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("bidirectional", "downgrade")


def consumer_group_config(c: Any) -> ConsumerGroupConfig:
    """From the server's flags; an unknown assignor name stops the server at startup."""
    assignors = tuple(a.strip() for a in c.group_consumer_assignors.split(",") if a.strip())
    unknown = [a for a in assignors if a not in ASSIGNORS]
    if unknown or not assignors:
        raise ValueError(
            f"--group-consumer-assignors: unknown assignor(s) {', '.join(unknown) or '(none given)'}; "
            f"known: {', '.join(ASSIGNORS)}"
        )
    interval, least, most = (
        c.group_consumer_assignment_interval_ms,
        c.group_consumer_min_assignment_interval_ms,
        c.group_consumer_max_assignment_interval_ms,
    )  # (their bounds checked by parse_args)
    return ConsumerGroupConfig(
        c.group_consumer_heartbeat_interval_ms,
        c.group_consumer_session_timeout_ms,
        c.group_consumer_max_size,
        assignors,
        c.group_consumer_migration_policy,
        interval,
        least,
        most,
        c.group_consumer_regex_min_refresh_interval_ms,
        c.group_consumer_regex_refresh_interval_ms,
    )


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Owned | None = None
    client_id: str = ""
    client_host: str = ""


def validate_request(r: HeartbeatRequest, version: int, assignors: tuple[str, ...]) -> None:
    """Kafka's checks before the shard is asked (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR)."""
    if (version >= 1 or r.member_epoch > 0 or r.member_epoch == LEAVE_EPOCH) and r.member_id == "":
        raise ApiError(E.invalid_request, "MemberId can't be empty.")
    if r.group_id == "":
        raise ApiError(E.invalid_request, "GroupId can't be empty.")
    if r.instance_id == "":
        raise ApiError(E.invalid_request, "InstanceId can't be empty.")
    if r.rack_id == "":
        raise ApiError(E.invalid_request, "RackId can't be empty.")
    if r.member_epoch == 0:
        if r.rebalance_timeout_ms == -1:
            raise ApiError(E.invalid_request, "RebalanceTimeoutMs must be provided in first request.")
        if r.owned is None or r.owned:
            raise ApiError(E.invalid_request, "TopicPartitions must be empty when (re-)joining.")
        if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
            raise ApiError(
                E.invalid_request,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            )
    elif r.member_epoch == STATIC_LEAVE_EPOCH:
        if r.instance_id is None:
            raise ApiError(E.invalid_request, "InstanceId can't be null.")
    elif r.member_epoch < STATIC_LEAVE_EPOCH:
        raise ApiError(E.invalid_request, "MemberEpoch is invalid.")
    if r.server_assignor is not None and r.server_assignor not in assignors:
        raise ApiError(
            E.unsupported_assignor,
            f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
        )
    if r.subscribed_topic_regex is not None:
        compile_regex(r.subscribed_topic_regex)


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's INVALID_REGULAR_EXPRESSION, not a log line


def compile_regex(pattern: str) -> Any:
    """RE2 syntax, as Kafka's RE2/J: linear-time matching (no pattern can stall the
    loop), matched against the whole topic name. A pattern RE2 refuses (backreferences,
    lookaround, ...) is INVALID_REGULAR_EXPRESSION."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as e:
        why = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ApiError(
            E.invalid_regular_expression, f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {why}."
        ) from None


# What a static member's successor takes over (its assignment follows through set_owned).
_STATIC_CARRIED = (
    "instance_id",
    "rack_id",
    "subscribed_topic_names",
    "subscribed_topic_regex",
    "server_assignor",
    "rebalance_timeout_ms",
    "state",
)


class ConsumerGroupManager(ModernGroupManager):
    kind, group_type, model, records = "consumer", ConsumerGroup, consumer_group, R
    initial_values = initial_values(R, "ConsumerGroup")
    # Kafka's heartbeat order, a regex's record (a resolution's, or the tombstone of one no
    # member subscribes to any more) right after the member's subscription
    record_order = {
        t: i
        for i, t in enumerate(
            record_types(R, "ConsumerGroup", HEARTBEAT_ROLES[0], "RegularExpression", *HEARTBEAT_ROLES[1:])
        )
    }

    def __init__(self, shard: ShardContext, clock: Clock, config: ConsumerGroupConfig, image: TopicImage) -> None:
        super().__init__(shard, clock, image)
        self.config = config

    # persistence ----------------------------------------------------------------------

    def rebuild(self, group_id: str) -> None:
        """After `revert`: the live group becomes what its written records say; one that has no
        records left becomes what it was before them (a classic group, or none)."""
        live = self.groups.get(group_id)
        if group_id not in self.written and type(live) is not ConsumerGroup:
            return  # a classic group's write: replayed only once durable, nothing to undo
        log.warning("group %s: its records could not be written; back to the records written before them", group_id)
        if group_id in self.written:
            if type(live) is ClassicGroup and not live.is_empty():
                # A downgrade that could not be written: the consumer group stays.
                self.shard.migration.retire_classic(live)
                del self.groups[group_id]
            self.restore(group_id)
            return
        assert type(live) is ConsumerGroup
        self.drop(live)
        if live.converted_from is not None:
            self.shard.migration.undo_upgrade(live)  # still the classic group on disk
        elif self.shard.offsets.of(group_id):
            # Its offsets stay: as after a restart, a memberless classic group holds them.
            self.groups[group_id] = ClassicGroup(group_id, self.clock.wall())

    def replaceable(self, current: Any) -> bool:
        return type(current) is ClassicGroup and current.is_empty()

    def restored(self, group: ConsumerGroup) -> None:
        # Its regexes as their ConsumerGroupRegularExpression records say (the next heartbeat
        # resolves them again, the topic image's version being unknown); resolved now only
        # if a log written without those records has none for one.
        if any(x not in group.regex_resolutions for x in group.subscriptions()[1]):
            self.resolve_regexes(group)
        if not group.subscription_metadata and group.metadata_hash:
            # Kafka 4.1+ keeps only the hash: the topics are as the group saw them if the hash
            # of what the broker has now matches; otherwise the next heartbeat bumps the epoch.
            seen = self.subscription_metadata(group)
            if metadata_hash(seen) == group.metadata_hash:
                group.subscription_metadata = seen

    def stale_keys(self, group: ConsumerGroup, written: dict[Any, Any]) -> list[Any]:
        # A member back with no target yet (it left and joined again while the target lags):
        # its old target record goes.
        gone: list[Any] = [
            k
            for m in group.changed_members
            if m in group.members and m not in group.target
            for k in (R.ConsumerGroupTargetAssignmentMemberKey(group.group_id, m),)
            if k in written
        ]
        # Kafka 4.1+ writes no ConsumerGroupPartitionMetadata (the hash in the group's metadata
        # record replaces it) and removes one an older log holds.
        legacy = R.ConsumerGroupPartitionMetadataKey(group.group_id)
        if legacy in written:
            gone.append(legacy)
        return gone

    def dropped_keys(self, group: ConsumerGroup, written: dict[Any, Any], now: dict[Any, Any]) -> list[Any]:
        """Kafka's tombstone of a resolved regex no member subscribes to any more (a member
        changing its regex, leaving or fenced): written after the member's subscription and
        before the group epoch, as consumerGroupHeartbeat and consumerGroupFenceMembers do."""
        if not group.resolved_regexes and not group.regex_resolutions:
            return []
        regexes = group.subscriptions()[1]
        for x in [x for x in group.resolved_regexes if x not in regexes]:
            del group.resolved_regexes[x]
            group.regex_resolutions.pop(x, None)
        return [k for k in written if type(k) is R.ConsumerGroupRegularExpressionKey and k not in now]

    def durable(self, group: ConsumerGroup) -> None:
        """A group converted from a classic one is that no more once its records are durable
        (nothing to put back if a later write fails)."""
        group.converted_from = None

    def convert_to_classic(self, out: CoordinatorResult, group: ConsumerGroup, then: Complete) -> None:
        """An Empty consumer group that a classic member joins: its records go (tombstones),
        and once they are durable the group id is free for the classic group: then(NONE),
        or then(error) with the consumer group still there. Its committed offsets stay."""
        records = self.delete_records(group.group_id)
        group.dead = True  # no member joins it while its tombstones are written
        if not records:
            self.drop(group)
            out.wait(then)  # (nothing of its own to write: once what is pending is)
            return
        out.add(records, then)

    # the heartbeat --------------------------------------------------------------------

    def heartbeat(self, r: HeartbeatRequest) -> HeartbeatResult | CoordinatorResult:
        """ConsumerGroupHeartbeat: a HeartbeatResult answered at once (a request refused), or
        the result of the group's new records, answered once they are durable (write_failed
        if they cannot be written)."""
        try:
            if r.member_epoch == LEAVE_EPOCH:
                leaving = self._downgrading_member(r.group_id, r.member_id)
                if leaving is not None:
                    # The last consumer-protocol member leaves a group of classic members:
                    # it becomes a classic group (Kafka's online downgrade).
                    out = CoordinatorResult(HeartbeatResult(E.none, None, r.member_id, LEAVE_EPOCH, 0))
                    self.shard.migration.downgrade(out, *leaving)
                    return out
            if r.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result, group = self._leave(r)
            else:
                result, group = self._heartbeat(r)
        except ApiError as e:
            new = self.groups.get(r.group_id)
            if type(new) is ConsumerGroup and new.converted_from is not None and new.dirty:
                self.shard.migration.undo_upgrade(new)  # converted for a member that could not join
            elif type(new) is ConsumerGroup and not new.members and r.group_id not in self.written:
                del self.groups[r.group_id]  # created for a member that could not join: not kept
            return HeartbeatResult(e.code, e.message)
        return self.result_of(result, group)

    def _downgrading_member(self, group_id: str, member_id: str) -> tuple[ConsumerGroup, ConsumerMember] | None:
        group = self.groups.get(group_id)
        if type(group) is not ConsumerGroup or group.dead:
            return None
        member = group.members.get(member_id)
        if member is None or not self.shard.migration.can_downgrade(group, member):
            return None
        return group, member

    def _group(self, group_id: str, create: bool) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if type(group) is ConsumerGroup and not group.dead:
            return group
        if group is None or (type(group) is ClassicGroup and group.is_empty() and create):
            if not create:
                raise ApiError(E.group_id_not_found, f"Group {group_id} not found.")
            # An Empty classic group (e.g. one holding only committed offsets) becomes a
            # consumer group when a consumer-protocol member joins, as Kafka converts it
            # (maybeDeleteEmptyClassicGroup): the classic group's record is tombstoned first,
            # in the batch of the consumer group's first records.
            new = ConsumerGroup(group_id)
            if group is not None:
                new.extra_records = [(GroupMetadataKey(group_id), None)]
                new.converted_from = group.stored  # (put back if the join fails)
            self.groups[group_id] = new
            return new
        if create and type(group) is ClassicGroup:
            upgraded = self.shard.migration.upgrade(group)  # Kafka's online upgrade, if allowed
            if upgraded is not None:
                return upgraded
        raise ApiError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")

    def _heartbeat(self, r: HeartbeatRequest) -> tuple[HeartbeatResult, ConsumerGroup]:
        group = self._group(r.group_id, r.member_epoch == 0)
        full = r.member_epoch == 0
        member: ConsumerMember | None
        if r.member_epoch == 0:
            member = self._joining_member(group, r)
        else:
            member = known_member(group, r.member_id)
            # a member at its previous epoch is accepted if it owns no more than it is assigned
            self.check_epoch(member, r.member_epoch, lambda: _subset(r.owned, member.assigned))
        # Kafka bumps the group epoch for a change of the member's subscribed topic names, of
        # its regex to one the group has resolved already (or to none), of the group's
        # preferred assignor, or of the subscribed topics' metadata (update_member): not for a
        # member joining as such (one subscribing to nothing leaves the epoch where it is).
        bump = False
        subscription_changed = False
        assignor_before = None
        if r.server_assignor is not None and r.server_assignor != (
            None if member.member_id not in group.members else member.server_assignor
        ):
            assignor_before = self._assignor_name(group)
        if r.instance_id is not None:
            member.instance_id = r.instance_id
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        if r.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = r.rebalance_timeout_ms
        member.client_id, member.client_host = r.client_id, r.client_host
        if (
            r.subscribed_topic_names is not None
            and tuple(sorted(r.subscribed_topic_names)) != member.subscribed_topic_names
        ):
            member.subscribed_topic_names = tuple(sorted(r.subscribed_topic_names))
            bump = subscription_changed = True
        # Null: unchanged. "" (librdkafka sends it in every full heartbeat) means no regex,
        # as Kafka's hasSubscribedTopicRegex: the same as a member that never had one.
        if r.subscribed_topic_regex is not None and (r.subscribed_topic_regex or None) != member.subscribed_topic_regex:
            regex = r.subscribed_topic_regex or None
            # None now, or one other members subscribe to and the group has resolved; a regex
            # new to the group bumps the epoch once resolved (_resolve_regexes), as Kafka's.
            if regex is None or (
                regex in group.resolved_regexes
                and any(m.subscribed_topic_regex == regex for m in group.members.values() if m is not member)
            ):
                bump = True
            member.subscribed_topic_regex = regex
            group.subscriptions_changed()
            subscription_changed = True
        if r.server_assignor is not None:
            member.server_assignor = r.server_assignor
        changed = self.update_member(group, member, bump, r.owned, assignor_before, subscription_changed)
        send = full or changed or (r.owned is not None and not _same(r.owned, member.assigned))
        return HeartbeatResult(
            E.none,
            None,
            member.member_id,
            member.member_epoch,
            self.group_setting(group.group_id, "consumer.heartbeat.interval.ms", self.config.heartbeat_interval_ms),
            member.assigned if send else None,
        ), group

    def update_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        bump: bool,
        owned: Owned | None,
        assignor_before: str | None = None,
        subscription_changed: bool | None = None,
    ) -> bool:
        """After a member's subscription was updated (bump: its topic names changed): add it
        if new, bump the group epoch if what the assignment depends on changed (the group's
        preferred assignor, if it was `assignor_before`; the subscribed topics' metadata),
        recompute the target, move the member towards it (`subscription_changed`: its topic
        names or regex changed; `bump` if not given). Whether its epoch or partitions changed."""
        if member.member_id not in group.members:
            group.members[member.member_id] = member
            group.subscriptions_added(member)
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        elif bump:
            group.subscriptions_changed()
        if assignor_before is not None and self._assignor_name(group) != assignor_before:
            bump = True
        if group.subscriptions()[1]:
            self._maybe_resolve_regexes(group)
        metadata = self.subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
        self.maybe_compute_target(group)
        before = (
            member.member_epoch,
            member.assigned,
            member.pending_revocation,
            member.state,
            member.previous_member_epoch,
        )
        self._reconcile(group, member, owned, bump if subscription_changed is None else subscription_changed)
        self.touch(group, member)
        after = (
            member.member_epoch,
            member.assigned,
            member.pending_revocation,
            member.state,
            member.previous_member_epoch,
        )
        if bump or before != after or stored_member_differs(self.written.get(group.group_id), group, member):
            group.dirty = True
            group.changed_members.add(member.member_id)
        return before[:2] != after[:2]

    def _joining_member(self, group: ConsumerGroup, r: HeartbeatRequest) -> ConsumerMember:
        member_id = r.member_id or str(uuid.uuid4())  # v0: the coordinator names the member
        if r.instance_id is not None:
            old_id = group.static_members.get(r.instance_id)
            old = group.members.get(old_id) if old_id is not None else None
            if old is not None:
                if old.member_epoch != STATIC_LEAVE_EPOCH:
                    raise ApiError(
                        E.unreleased_instance_id,
                        f"Static member {member_id} with instance id {r.instance_id} cannot join the "
                        f"group because the instance id is owned by {old.member_id} member.",
                    )
                return self.replace_static(group, old, member_id)
        existing = group.members.get(member_id)
        if existing is not None:
            # Rejoining (epoch 0) under the same id: Kafka carries on with the member as it is
            # (its epoch and assignment), answering its assignment in full.
            return existing
        if len(group.members) >= self.config.max_size:
            raise ApiError(
                E.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        return ConsumerMember(
            member_id, rebalance_timeout_ms=r.rebalance_timeout_ms, server_assignor=r.server_assignor, member_epoch=0
        )

    def replace_static(self, group: ConsumerGroup, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """KIP-345 under KIP-848: the instance's new member takes its predecessor's
        assignment and epoch, so nothing moves."""
        target = group.target.get(old.member_id, {})
        assigned, pending, epochs = old.assigned, old.pending_revocation, old.assignment_epochs
        new = static_successor(ConsumerMember, old, new_id, _STATIC_CARRIED)
        group.replace_static(old, new)
        group.subscriptions_changed()
        group.target[new_id] = target
        group.set_owned(new, assigned, pending)
        new.assignment_epochs = epochs  # (its partitions keep the epochs they were assigned at)
        return new

    # leaving --------------------------------------------------------------------------

    def _leave(self, r: HeartbeatRequest) -> tuple[HeartbeatResult, ConsumerGroup]:
        group = self._group(r.group_id, False)
        if r.member_epoch == STATIC_LEAVE_EPOCH:
            leaving = static_member(group, r.instance_id, r.member_id)
            group.leave_static(leaving)
            log.info(
                "group %s: static member %s (instance %s) left temporarily", group.group_id, r.member_id, r.instance_id
            )
            return HeartbeatResult(E.none, None, r.member_id, STATIC_LEAVE_EPOCH, 0), group
        member = known_member(group, r.member_id)
        log.info("group %s: member %s left", group.group_id, member.member_id)
        self.remove(group, member)
        return HeartbeatResult(E.none, None, r.member_id, LEAVE_EPOCH, 0), group

    def remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A member leaves or is fenced: its partitions are free; the others are
        assigned anew at the next group epoch."""
        group.remove_member(member)
        self.after_removal(group)

    def after_removal(self, group: ConsumerGroup) -> None:
        """Kafka's consumerGroupFenceMembers: the epoch moves on (the remaining members get
        a new target at their next heartbeat); the last member gone, the target is the empty
        one at that epoch, its time reset (the next member's target is computed at once)."""
        group.group_epoch += 1
        group.subscription_metadata = self.subscription_metadata(group)
        if not group.members:
            group.assignment_epoch, group.assignment_timestamp = group.group_epoch, 0
        group.dirty = True

    # timers ---------------------------------------------------------------------------

    def session_timeout_ms(self, group: ConsumerGroup, member: ConsumerMember) -> int:
        """A classic member's own session timeout, else the group's."""
        return member.session_timeout_ms or super().session_timeout_ms(group, member)

    def _on_revocation_timer(
        self, group: ConsumerGroup, member: ConsumerMember, deadline: float
    ) -> CoordinatorResult | None:
        if (
            self.groups.get(group.group_id) is group
            and group.members.get(member.member_id) is member
            and member.state is MemberState.UNREVOKED_PARTITIONS
            and member.revocation_deadline == deadline
        ):
            return self.fence(group, member, "did not revoke its partitions within the rebalance timeout")
        return None

    def fence(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> CoordinatorResult:
        log.info("group %s: member %s fenced: %s", group.group_id, member.member_id, why)
        out = CoordinatorResult()
        if self.shard.migration.can_downgrade(group, member):
            self.shard.migration.downgrade(out, group, member)
            return out
        self.remove(group, member)
        self.persist(out, group)
        return out

    # regular expressions (Kafka resolves them apart from the heartbeat) ----------------

    def _maybe_resolve_regexes(self, group: ConsumerGroup) -> None:
        """Kafka's maybeUpdateRegularExpressions: a regex no member had before, topics
        created or deleted since the last resolution, or a last resolution older than the
        refresh interval schedule a resolution, but none within the min refresh interval of
        the last one (a regex new to the group included: a later heartbeat resolves it). It
        runs after the heartbeat, as Kafka's asynchronous one: a member subscribing to a
        regex and a topic name gets the named topic first and the regex's topics at a later
        epoch."""
        if group.regex_refresh is not None:
            return
        now = self.clock.wall()
        # (every resolution stamps all the group's regexes at once: Kafka reads any one's time)
        last = max((stamp for _, stamp in group.regex_resolutions.values()), default=None)
        cfg = self.config
        if last is not None and now <= last + cfg.regex_min_refresh_interval_ms:
            return
        version = self.image.version()
        if (
            last is None
            or version is None
            or version != group.regex_version
            or now > last + cfg.regex_refresh_interval_ms
            or any(x not in group.resolved_regexes for x in group.subscriptions()[1])
        ):
            group.regex_refresh = self.clock.call_at(self.clock.now(), self._resolve_regexes, group)

    def resolve_regexes(self, group: ConsumerGroup) -> bool:
        """Match every regex of the group against the topics now (Kafka's TopicRegexResolver:
        each resolution stamped with the topic metadata's version and its start time, which its
        ConsumerGroupRegularExpression record keeps); whether the topics matched changed."""
        version = group.regex_version = self.image.version()
        stamp = (version or 0, self.clock.wall())
        names = self.image.names()
        regexes = group.subscriptions()[1]
        resolved = {x: frozenset(n for n in names if compile_regex(x).fullmatch(n)) for x in regexes}
        group.regex_resolutions = dict.fromkeys(regexes, stamp)
        if resolved == group.resolved_regexes:
            return False
        group.resolved_regexes = resolved
        return True

    def _resolve_regexes(self, group: ConsumerGroup) -> CoordinatorResult | None:
        """Kafka's handleRegularExpressionsResult: each subscribed regex's resolution is
        written (changed or not), and the group epoch moves if a regex's topics changed (one
        newly resolved to none did not) or the subscribed topics' metadata did; the target
        follows at the next heartbeat."""
        group.regex_refresh = None
        before = group.resolved_regexes
        if self.groups.get(group.group_id) is not group or group.dead:
            return None
        self.resolve_regexes(group)
        metadata = self.subscription_metadata(group)
        after = group.resolved_regexes
        group.dirty = True
        if metadata != group.subscription_metadata or any(
            before.get(x, frozenset()) != topics for x, topics in after.items()
        ):
            log.info(
                "group %s: its regular expressions now match %s",
                group.group_id,
                sorted(n for ns in group.resolved_regexes.values() for n in ns),
            )
            group.subscription_metadata = metadata
            group.group_epoch += 1
        out = CoordinatorResult()
        self.persist(out, group)
        return out

    # assignment -----------------------------------------------------------------------

    def _subscribed_names(self, member: ConsumerMember, group: ConsumerGroup) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names.update(group.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return names

    def subscribed_topics(self, group: ConsumerGroup) -> frozenset[str]:
        """The names subscribed to, and the topics of the regexes as last resolved."""
        names, regexes = group.subscriptions()
        if regexes:
            resolved = group.resolved_regexes
            names = names.union(*(resolved.get(x, ()) for x in regexes))
        return names

    def _assignor_name(self, group: ConsumerGroup) -> str:
        """Kafka: the assignor most members ask for, else the configured default."""
        counts: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if counts:
            return max(sorted(counts), key=lambda a: counts[a])
        return cast(str, self.config.assignors[0])

    def compute_target(self, group: ConsumerGroup) -> None:
        metadata = group.subscription_metadata
        counts = {tid: n for tid, n in metadata.values()}
        members = {}
        for m in group.members.values():
            topic_ids = frozenset(metadata[n][0] for n in self._subscribed_names(m, group) if n in metadata)
            members[m.member_id] = (topic_ids, group.target.get(m.member_id, {}), m.instance_id)
        previous = group.target
        group.target = ASSIGNORS[self._assignor_name(group)](members, counts)
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = self.clock.wall()  # (when the computation finished, as Kafka records it)
        group.dirty = True
        # Only members whose target moved get a new target record (Kafka writes those only).
        group.changed_members.update(m for m, t in group.target.items() if previous.get(m) != t)

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Owned | None, subscription_changed: bool = False
    ) -> None:
        """Kafka's CurrentAssignmentBuilder: towards the member's target, of the topics it still
        subscribes to; a member whose subscription changed gives up the partitions of the
        topics it dropped at once (updateCurrentAssignment), at its epoch, even while the
        target that leaves them out is still to be computed."""
        stable = member.member_epoch == group.assignment_epoch and member.state is MemberState.STABLE
        revoking = member.state is MemberState.UNREVOKED_PARTITIONS and owns_any(owned, member.pending_revocation)
        if (stable or revoking) and not subscription_changed:
            return
        subscribed = self._subscribed_ids(group, member)
        if stable or revoking:
            self._drop_unsubscribed(group, member, owned, subscribed)
            return
        target = group.target.get(member.member_id, {})
        if any(t not in subscribed for t in target):
            target = {t: ps for t, ps in target.items() if t in subscribed}
        out = reconcile(
            member.state,
            member.member_epoch,
            member.previous_member_epoch,
            member.assigned,
            member.pending_revocation,
            group.assignment_epoch,
            target,
            owned,
            group.owners,
            member.member_id,
        )
        if out.state is MemberState.UNREVOKED_PARTITIONS and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._revocation_deadline(group, member)
        member.state, member.member_epoch, member.previous_member_epoch = (
            out.state,
            out.member_epoch,
            out.previous_member_epoch,
        )
        group.set_owned(member, out.assigned, out.pending_revocation)

    def _drop_unsubscribed(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Owned | None, subscribed: set[uuid.UUID]
    ) -> None:
        """Kafka's updateCurrentAssignment: the partitions of topics the member no longer
        subscribes to join those it is revoking (all of them if it subscribes to nothing);
        UNREVOKED_PARTITIONS while its heartbeat still lists any, its epoch unchanged."""
        if not subscribed and not member.pending_revocation:
            keep: dict[uuid.UUID, frozenset[int]] = {}
        else:
            keep = {t: ps for t, ps in member.assigned.items() if t in subscribed}
        if len(keep) == len(member.assigned):
            return
        pending = dict(member.pending_revocation)
        for t, ps in member.assigned.items():
            if t not in keep:
                pending[t] = pending.get(t, frozenset()) | ps
        member.previous_member_epoch = member.member_epoch  # (Kafka's updateMemberEpoch, at its epoch)
        if owns_any(owned, pending):
            if member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._revocation_deadline(group, member)
            member.state = MemberState.UNREVOKED_PARTITIONS
            group.set_owned(member, keep, pending)
        else:
            group.set_owned(member, keep, member.pending_revocation)

    def _revocation_deadline(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """It must revoke within its rebalance timeout, or it is fenced (its partitions freed)."""
        member.revocation_deadline = deadline = self.clock.now() + member.rebalance_timeout_ms
        self.clock.call_at(deadline, self._on_revocation_timer, group, member, deadline)

    def _subscribed_ids(self, group: ConsumerGroup, member: ConsumerMember) -> set[uuid.UUID]:
        """The ids of the existing topics the member subscribes to (names and its regex's
        topics as last resolved)."""
        out = set()
        for name in self._subscribed_names(member, group):
            found = self.image.lookup(name)
            if found is not None:
                out.add(found[0])
        return out

    # ConsumerGroupDescribe ------------------------------------------------------------

    def assignor_of(self, group: ConsumerGroup) -> str:
        return self._assignor_name(group)


def stored_member_differs(stored: dict[Any, Any] | None, group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Whether the member's subscription record is not what was written (a changed
    client id, rack, rebalance timeout...): cheap, one record."""
    if stored is None:
        return True
    value = stored.get(R.ConsumerGroupMemberMetadataKey(group.group_id, member.member_id))
    return value is None or (
        value.instance_id,
        value.rack_id,
        value.client_id,
        value.client_host,
        value.subscribed_topic_regex or None,
        value.rebalance_timeout_ms,
        value.server_assignor,
    ) != (
        member.instance_id,
        member.rack_id,
        member.client_id,
        member.client_host,
        member.subscribed_topic_regex,
        member.rebalance_timeout_ms,
        member.server_assignor,
    )


def _subset(owned: Owned | None, assigned: dict[uuid.UUID, frozenset[int]]) -> bool:
    if owned is None:
        return False
    return all(set(ps) <= assigned.get(t, frozenset()) for t, ps in owned)


def _same(owned: Owned, assigned: dict[uuid.UUID, frozenset[int]]) -> bool:
    mine = {t: frozenset(ps) for t, ps in owned if ps}
    return mine == {t: ps for t, ps in assigned.items() if ps}
