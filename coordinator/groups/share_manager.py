"""ShareGroupHeartbeat and ShareGroupDescribe (KIP-932), as Kafka's GroupMetadataManager
(shareGroupHeartbeat, shareGroupLeave, scheduleShareGroupSessionTimeout).

One manager per shard, over the shard's groups (one namespace with classic and consumer
groups: a group id is one type's; Kafka converts nothing to or from a share group). A
heartbeat runs in one synchronous section: validate, update the member, bump the group
epoch if what the assignment depends on changed, recompute the target assignment (the
SimpleAssignor), move the member to its target, and answer once the records that changed
are durable. Persistence follows the runtime contract as consumer groups do
(consumer_manager.py): records are diffed against `written` (durable plus pending), a
failed write rebuilds the groups it touched from the records written before it (`revert`),
and `replay` keeps `stored`, what a restart rebuilds (on_loaded).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from kio.schema.errors import ErrorCode as E

from protocol import share_records as R

from .clock import Clock
from .consumer_manager import ApiError, ConsumerGroupManager, HeartbeatResult, apply_record, assignment_due
from .metadata_hash import metadata_hash
from .share_group import (
    LEAVE_EPOCH,
    ShareGroup,
    ShareMember,
    forget_topics,
    group_from_records,
    initialize_partitions,
    initialize_subscribed,
    member_keys,
    records_of,
    simple_assign,
)
from .topic_image import TopicImage
from .shard_context import ShardContext

log = logging.getLogger(__name__)

ASSIGNOR = "simple"
MAX_MEMBER_ID_LENGTH = 36  # a UUID's text, as KIP-1082 client-generated member ids are


@dataclass(frozen=True)
class ShareGroupConfig:
    """The broker's group.share.* settings (Kafka's names and defaults); per-group
    overrides come from GROUP config resources (share.*)."""

    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_attempt_limit: int = 5  # group.share.delivery.attempt.limit
    partition_max_record_locks: int = 2_000  # group.share.partition.max.record.locks
    snapshot_update_records: int = 500  # share.coordinator.snapshot.update.records.per.snapshot
    max_share_sessions: int = 2_000  # group.share.max.share.sessions
    assignment_interval_ms: int = 1_000  # group.share.assignment.interval.ms (KIP-1263)
    min_assignment_interval_ms: int = 0  # group.share.min.assignment.interval.ms
    max_assignment_interval_ms: int = 15_000  # group.share.max.assignment.interval.ms


@dataclass
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


# A ShareGroupHeartbeat response carries the fields a ConsumerGroupHeartbeat response does.
ShareHeartbeatResult = HeartbeatResult


def validate_request(r: ShareHeartbeatRequest) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (v1: the client names itself)."""
    if r.group_id == "":
        raise ApiError(E.invalid_request, "GroupId can't be empty.")
    if r.rack_id == "":
        raise ApiError(E.invalid_request, "RackId can't be empty.")
    if r.member_id == "":
        raise ApiError(E.invalid_request, "MemberId can't be empty.")
    if len(r.member_id) > MAX_MEMBER_ID_LENGTH:
        raise ApiError(E.invalid_request, f"MemberId can't be longer than {MAX_MEMBER_ID_LENGTH} characters.")
    if r.member_epoch == 0:
        if not r.subscribed_topic_names:
            raise ApiError(E.invalid_request, "SubscribedTopicNames must be set in first request.")
    elif r.member_epoch < LEAVE_EPOCH:
        raise ApiError(E.invalid_request, "MemberEpoch is invalid.")


class ShareGroupManager:
    def __init__(self, shard: ShardContext, clock: Clock, image: TopicImage) -> None:
        self.shard = shard
        self.clock = clock
        self.image = image
        self.groups = shard.groups
        # group id -> {key: value} of its share-group records as replayed from the log
        self.stored: dict[str, dict[Any, Any]] = {}
        # the same with the shard's pending writes applied: what live state is built from
        self.written: dict[str, dict[Any, Any]] = {}
        # called with (group id, member id) when a member is fenced (its session expired):
        # its share session and acquired records are let go (Kafka's ShareGroupListener). A
        # member that leaves closes its share session itself (a final ShareFetch or
        # ShareAcknowledge, which may come after its leave).
        self.member_fenced: list[Callable[[str, str], None]] = []
        # called with the group id when the group's tombstone is replayed (DeleteGroups)
        self.group_deleted: list[Callable[[str], None]] = []

    @property
    def config(self) -> ShareGroupConfig:
        return getattr(self.shard.runtime, "share_config", None) or ShareGroupConfig()

    def group_setting(self, group_id: str, name: str, default: int) -> int:
        """A per-group override (GROUP config resource) of a share setting, else the broker's."""
        configs = getattr(self.shard.runtime, "group_configs", None)
        value = configs.get(group_id, name) if configs is not None else None
        return default if value is None else int(value)

    # persistence ----------------------------------------------------------------------

    def replay(self, key: Any, value: Any) -> None:
        group_id = key.group
        apply_record(self.stored, key, value, R.ShareGroupMetadataKey)
        if value is None and group_id not in self.written:
            live = self.groups.get(group_id)
            if type(live) is ShareGroup:  # its last tombstone is durable: it is gone
                self.drop(live)
                for listener in self.group_deleted:
                    listener(group_id)

    def written_record(self, key: Any, value: Any) -> None:
        """A record handed to the log (shard.queue_write)."""
        apply_record(self.written, key, value, R.ShareGroupMetadataKey)

    def on_loaded(self) -> None:
        self.written = {g: dict(records) for g, records in self.stored.items()}
        for group_id in list(self.stored):
            self.restore(group_id)

    def revert(self, group_ids: list[str], still_pending: list[list[Any]]) -> None:
        """Failed writes touched these groups: each becomes what the durable records and
        the writes still pending (all before the failed ones) describe."""
        for group_id in group_ids:
            view: dict[str, dict[Any, Any]] = {}
            if group_id in self.stored:
                view[group_id] = dict(self.stored[group_id])
            for records in still_pending:
                for key, value in records:
                    if type(key) in R.KEY_TYPES and key.group == group_id:
                        apply_record(view, key, value, R.ShareGroupMetadataKey)
            if group_id in view:
                self.written[group_id] = view[group_id]
                self.restore(group_id)
            else:
                self.written.pop(group_id, None)
                live = self.groups.get(group_id)
                if type(live) is ShareGroup:
                    self.drop(live)

    def restore(self, group_id: str) -> None:
        """Make the live group what its written records say (at load, or after a failed append)."""
        old = self.groups.get(group_id)
        if type(old) is ShareGroup:
            self.drop(old)
        group = group_from_records(group_id, self.written.get(group_id, {}))
        if group is None:
            return
        current = self.groups.get(group_id)
        if current is not None and not current.is_empty():
            log.warning("group %s: share-group records beside a group of another type; ignored", group_id)
            return
        self.groups[group_id] = group
        group.subscription_metadata = self.subscription_metadata(group)
        for m in group.members.values():  # a fresh session each, as Kafka's onLoaded
            self.touch(group, m)

    def drop(self, group: ShareGroup) -> None:
        for m in group.members.values():
            if m.session_timer is not None:
                m.session_timer.cancel()
                m.session_timer = None
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def persist(self, group: ShareGroup, done: Callable[[int], None]) -> None:
        """Append what changed; done(error) once durable (NONE) or refused (the error; the
        runtime has reverted the group)."""
        written = self.written.get(group.group_id, {})
        now = records_of(group, group.changed_members)
        gone = [
            k
            for m in group.removed_members
            if m not in group.members
            for k in member_keys(group.group_id, m)
            if k in written
        ]
        group.dirty = False
        group.changed_members = set()
        group.removed_members = set()
        records: list[tuple[Any, Any]] = [(k, None) for k in gone]
        records += [(k, v) for k, v in now.items() if written.get(k) != v]
        if not records:
            self.shard.after_pending(done)
            return
        self.shard.write(records, done)

    def _deleted_topics(self, group: ShareGroup) -> set[uuid.UUID]:
        """Topics of the group's ShareGroupStatePartitionMetadata that were deleted since: Kafka
        drops them from every group's record when the metadata image loses them
        (maybeCleanupShareGroupState); here at the group's next heartbeat."""
        if self.image.topics is None:
            return set()
        return {t for t in (*group.initializing, *group.initialized, *group.deleting) if self.image.name_of(t) is None}

    def initialize_partitions(
        self, group_id: str, partitions: dict[uuid.UUID, tuple[str, frozenset[int]]], done: Callable[[int], None]
    ) -> None:
        """AlterShareGroupOffsets started these partitions' state afresh: they are initialized in
        the group's ShareGroupStatePartitionMetadata; done(error) once that is durable."""
        group = self.groups.get(group_id)
        if type(group) is ShareGroup and initialize_partitions(group, partitions):
            self.persist(group, done)
        else:
            self.shard.after_pending(done)

    def forget_topics(self, group_id: str, topic_ids: set[uuid.UUID], done: Callable[[int], None]) -> None:
        """The share-partition state of these topics is gone (DeleteShareGroupOffsets): they
        leave the group's ShareGroupStatePartitionMetadata; done(error) once that is durable."""
        group = self.groups.get(group_id)
        if type(group) is ShareGroup and forget_topics(group, topic_ids):
            self.persist(group, done)
        else:
            self.shard.after_pending(done)

    def delete_records(self, group_id: str) -> list[tuple[Any, Any]]:
        """DeleteGroups: tombstones of every record of the (empty) group, its epoch last."""
        keys = list(self.written.get(group_id, {}))
        keys.sort(key=lambda k: type(k) is R.ShareGroupMetadataKey)
        return [(k, None) for k in keys] or [(R.ShareGroupMetadataKey(group_id), None)]

    # the heartbeat --------------------------------------------------------------------

    def heartbeat(
        self, r: ShareHeartbeatRequest, answer: Callable[[ShareHeartbeatResult], None]
    ) -> ShareHeartbeatResult | None:
        """The answer now (an error, or nothing to write), or None and answer(result)
        once the group's new records are durable."""
        try:
            if r.member_epoch == LEAVE_EPOCH:
                result, group = self._leave(r)
            else:
                result, group = self._heartbeat(r)
        except ApiError as e:
            new = self.groups.get(r.group_id)
            if type(new) is ShareGroup and new.group_epoch == 0 and not new.members:
                del self.groups[r.group_id]  # created for a member that could not join: not kept
            return ShareHeartbeatResult(e.code, str(e))
        if not group.dirty:
            return ConsumerGroupManager.answer_when_written(
                self.shard.after_pending,
                result,
                lambda error: ShareHeartbeatResult(error, "The group's records could not be written."),
                answer,
            )
        return ConsumerGroupManager.answer_when_written(
            lambda done: self.persist(group, done),
            result,
            lambda error: ShareHeartbeatResult(error, "The group's records could not be written."),
            answer,
        )

    def _group(self, group_id: str, create: bool) -> ShareGroup:
        """Kafka's getOrMaybeCreatePersistedShareGroup: another type's group id is
        GROUP_ID_NOT_FOUND (no conversion to or from share groups)."""
        group = self.groups.get(group_id)
        if type(group) is ShareGroup and not group.dead:
            return group
        if group is None:
            if not create:
                raise ApiError(E.group_id_not_found, f"Share group {group_id} not found.")
            new = self.groups[group_id] = ShareGroup(group_id)
            return new
        raise ApiError(E.group_id_not_found, f"Group {group_id} is not a share group.")

    def _heartbeat(self, r: ShareHeartbeatRequest) -> tuple[ShareHeartbeatResult, ShareGroup]:
        group = self._group(r.group_id, r.member_epoch == 0)
        member = group.members.get(r.member_id)
        bump = False
        if member is None:
            if r.member_epoch != 0:
                raise ApiError(E.unknown_member_id, f"Member {r.member_id} is not a member of group {r.group_id}.")
            max_size = self.group_setting(r.group_id, "share.max.size", self.config.max_size)
            if len(group.members) >= max_size:
                raise ApiError(
                    E.group_max_size_reached, f"The share group has reached its maximum capacity of {max_size} members."
                )
            member = ShareMember(r.member_id)
            group.members[member.member_id] = member
            log.info("group %s: member %s joins the share group", group.group_id, member.member_id)
            bump = True
        elif r.member_epoch == 0:
            # Rejoining under its id (after a fencing error): it starts from the current target.
            member.member_epoch = 0
        else:
            self._check_epoch(member, r.member_epoch)
        before = (member.member_epoch, member.assigned)
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        member.client_id, member.client_host = r.client_id, r.client_host
        if r.subscribed_topic_names is not None:
            names = tuple(sorted(set(r.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                bump = True
        metadata = self.subscription_metadata(group)
        digest = metadata_hash(metadata)
        group.subscription_metadata = metadata
        if digest != group.metadata_hash:
            group.metadata_hash = digest
            bump = True
        if bump:
            group.group_epoch += 1
            group.dirty = True
        self.maybe_compute_target(group)
        if initialize_subscribed(group) | forget_topics(group, self._deleted_topics(group)):
            group.dirty = True
        self._reconcile(group, member)
        self.touch(group, member)
        if before != (member.member_epoch, member.assigned) or self._stored_member_differs(group, member):
            group.dirty = True
            group.changed_members.add(member.member_id)
        send = r.member_epoch == 0 or before[1] != member.assigned
        return ShareHeartbeatResult(
            E.none,
            None,
            member.member_id,
            member.member_epoch,
            self._heartbeat_interval(group.group_id),
            member.assigned if send else None,
        ), group

    def _heartbeat_interval(self, group_id: str) -> int:
        return self.group_setting(group_id, "share.heartbeat.interval.ms", self.config.heartbeat_interval_ms)

    @staticmethod
    def _check_epoch(member: ShareMember, epoch: int) -> None:
        """Kafka's throwIfShareGroupMemberEpochIsInvalid."""
        if epoch > member.member_epoch:
            raise ApiError(
                E.fenced_member_epoch,
                f"The share group member has a greater member epoch ({epoch}) "
                f"than the one known by the group coordinator ({member.member_epoch}). The member "
                "must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch and epoch != member.previous_member_epoch:
            raise ApiError(
                E.fenced_member_epoch,
                f"The share group member has a smaller member epoch ({epoch}) "
                f"than the one known by the group coordinator ({member.member_epoch}). The member "
                "must abandon all its partitions and rejoin.",
            )

    def _stored_member_differs(self, group: ShareGroup, member: ShareMember) -> bool:
        stored = self.written.get(group.group_id)
        if stored is None:
            return True
        value = stored.get(R.ShareGroupMemberMetadataKey(group.group_id, member.member_id))
        return value != R.ShareGroupMemberMetadataValue(
            member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names
        )

    # leaving and expiry ----------------------------------------------------------------

    def _leave(self, r: ShareHeartbeatRequest) -> tuple[ShareHeartbeatResult, ShareGroup]:
        group = self._group(r.group_id, False)
        member = group.members.get(r.member_id)
        if member is None:
            raise ApiError(E.unknown_member_id, f"Member {r.member_id} is not a member of group {r.group_id}.")
        log.info("group %s: member %s left the share group", group.group_id, member.member_id)
        self.remove(group, member)
        return ShareHeartbeatResult(E.none, None, r.member_id, LEAVE_EPOCH, 0), group

    def remove(self, group: ShareGroup, member: ShareMember, fenced: bool = False) -> None:
        """A member leaves or is fenced: the others share its partitions from the next epoch."""
        group.remove_member(member)
        group.group_epoch += 1
        group.subscription_metadata = self.subscription_metadata(group)
        group.metadata_hash = metadata_hash(group.subscription_metadata)
        self.maybe_compute_target(group)
        group.dirty = True
        if fenced:
            for listener in self.member_fenced:
                listener(group.group_id, member.member_id)

    def touch(self, group: ShareGroup, member: ShareMember) -> None:
        """A sign of life: the session starts over."""
        timeout = self.group_setting(group.group_id, "share.session.timeout.ms", self.config.session_timeout_ms)
        member.session_deadline = self.clock.now() + timeout
        if member.session_timer is None:
            member.session_timer = self.clock.call_at(member.session_deadline, self._on_session_timer, group, member)

    def _on_session_timer(self, group: ShareGroup, member: ShareMember) -> None:
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        if self.clock.now() < member.session_deadline:
            member.session_timer = self.clock.call_at(member.session_deadline, self._on_session_timer, group, member)
            return
        member.session_timer = None
        log.info("group %s: share member %s fenced: session expired", group.group_id, member.member_id)
        self.remove(group, member, fenced=True)
        self.persist(group, lambda error: None)

    # assignment -----------------------------------------------------------------------

    def subscription_metadata(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        """The subscribed topics that exist, with their ids and partition counts, as the
        broker has them now (a topic created or grown later bumps the epoch at the next heartbeat)."""
        out: dict[str, tuple[uuid.UUID, int]] = {}
        for name in group.subscribed_names():
            found = self.image.lookup(name)
            if found is not None:
                out[name] = found
        return out

    def assignment_interval_ms(self, group_id: str) -> int:
        """share.assignment.interval.ms of the group (group_configs.py), else the broker's,
        within the broker's min and max."""
        configs = getattr(self.shard.runtime, "group_configs", None)
        if configs is not None:
            return int(configs.assignment_interval_ms(group_id, "share"))
        c = self.config
        return min(max(c.assignment_interval_ms, c.min_assignment_interval_ms), c.max_assignment_interval_ms)

    def maybe_compute_target(self, group: ShareGroup) -> None:
        """Kafka 4.3's assignment batching for share groups (KIP-1263, GroupMetadataManager's
        shareGroupHeartbeat): as for consumer groups (ConsumerGroupManager.maybe_compute_target),
        the target is recomputed at most once per share.assignment.interval.ms; meanwhile
        members keep the last target and the assignment epoch lags the group epoch."""
        if group.assignment_epoch != group.group_epoch and assignment_due(
            group.assignment_timestamp, self.assignment_interval_ms(group.group_id), self.clock.wall()
        ):
            self.compute_target(group)

    def compute_target(self, group: ShareGroup) -> None:
        metadata = group.subscription_metadata
        counts = {tid: n for tid, n in metadata.values()}
        members = {
            m.member_id: frozenset(metadata[n][0] for n in m.subscribed_topic_names if n in metadata)
            for m in group.members.values()
        }
        previous = group.target
        group.target = simple_assign(members, counts, previous)
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = self.clock.wall()  # (when the computation finished, as Kafka records it)
        group.dirty = True
        group.changed_members.update(m for m, t in group.target.items() if previous.get(m) != t)

    @staticmethod
    def _reconcile(group: ShareGroup, member: ShareMember) -> None:
        """Kafka's ShareGroupAssignmentBuilder: straight to the target at the assignment epoch."""
        target = group.target.get(member.member_id, {})
        if member.member_epoch != group.assignment_epoch or member.assigned != target:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
            member.assigned = target

    # ShareGroupDescribe ---------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[int, str | None, ShareGroup | None]:
        group = self.groups.get(group_id)
        if group is None or (type(group) is ShareGroup and group.dead):
            return E.group_id_not_found, f"Group {group_id} not found.", None
        if type(group) is not ShareGroup:
            return E.group_id_not_found, f"Group {group_id} is not a share group.", None
        return E.none, None, group

    def member_of(self, group_id: str, member_id: str) -> ShareMember | None:
        group = self.groups.get(group_id)
        return group.members.get(member_id) if type(group) is ShareGroup else None
