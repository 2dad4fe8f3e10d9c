"""ShareGroupHeartbeat and ShareGroupDescribe (KIP-932), as Kafka's GroupMetadataManager
(shareGroupHeartbeat, shareGroupLeave, scheduleShareGroupSessionTimeout).

One manager per shard, over the shard's groups (one namespace with classic and consumer
groups: a group id is one type's; Kafka converts nothing to or from a share group). A
heartbeat runs in one synchronous section: validate, update the member, bump the group
epoch if what the assignment depends on changed, recompute the target assignment (the
SimpleAssignor), move the member to its target, and answer once the records that changed
are durable. Persistence, sessions, subscription metadata and the assignment interval are
the consumer groups' (ModernGroupManager, modern_manager.py): records are diffed against
`written` (durable plus pending), a failed write rebuilds the groups it touched from the
records written before it (`revert`), and `replay` keeps `stored`, what a restart rebuilds
(on_loaded).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from kio.schema.errors import ErrorCode as E

from protocol import share_records as R
from protocol.error_messages import default_message

from .... import server_log
from . import share_group
from ...clock import Clock
from ..modern_group import heartbeat_order, initial_values
from ..modern_manager import ApiError, HeartbeatResult, ModernGroupManager, known_member
from ...metadata_hash import metadata_hash
from .share_group import (
    LEAVE_EPOCH,
    ShareGroup,
    ShareMember,
    assignable,
    finish_initializing,
    forget_topics,
    initialize_partitions,
    initialized_assignment_pending,
    simple_assign,
    start_initializing,
)
from ...topic_image import TopicImage
from ...shard_context import CoordinatorResult, ShardContext
from ...settings import ShareGroupConfig

log = server_log.get(__name__)

ASSIGNOR = "simple"
# group.share.initialize.retry.interval.ms (Kafka's internal default): partitions still
# initializing after this long are initialized again by the next heartbeat
INITIALIZE_RETRY_INTERVAL_MS = 30_000
MAX_MEMBER_ID_LENGTH = 36  # a UUID's text, as KIP-1082 client-generated member ids are


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
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (v1: the client names itself). Kafka
    4.4 refuses a missing or over-long member id before that, without a message."""
    if r.member_id == "" or len(r.member_id) > MAX_MEMBER_ID_LENGTH:
        raise ApiError(E.invalid_request, None)
    if r.group_id == "":
        raise ApiError(E.invalid_request, "GroupId can't be empty.")
    if r.rack_id == "":
        raise ApiError(E.invalid_request, "RackId can't be empty.")
    if r.member_epoch == 0:
        if not r.subscribed_topic_names:
            raise ApiError(E.invalid_request, "SubscribedTopicNames must be set in first request.")
    elif r.member_epoch < LEAVE_EPOCH:
        raise ApiError(E.invalid_request, "MemberEpoch is invalid.")


class ShareGroupManager(ModernGroupManager):
    kind, group_type, model, records = "share", ShareGroup, share_group, R
    initial_values = initial_values(R, "ShareGroup")
    record_order = heartbeat_order(R, "ShareGroup", "StatePartitionMetadata")

    def __init__(self, shard: ShardContext, clock: Clock, image: TopicImage) -> None:
        super().__init__(shard, clock, image)
        # called with (group id, member id) when a member is fenced (its session expired):
        # its share session and acquired records are let go (Kafka's ShareGroupListener). A
        # member that leaves closes its share session itself (a final ShareFetch or
        # ShareAcknowledge, which may come after its leave).
        self.member_fenced: list[Callable[[str, str], None]] = []
        # called with the group id when the group's tombstone is replayed (DeleteGroups)
        self.group_deleted: list[Callable[[str], None]] = []
        # group id -> the partitions its running heartbeat set initializing (heartbeat)
        self._initializing: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        # Kafka's persister: initialize_state(group id, partitions, state epoch, done) writes the
        # partitions' first share-partition state, then done(NONE or the error of its write)
        # (None: nothing to write)
        self.initialize_state: (
            Callable[[str, dict[uuid.UUID, frozenset[int]], int, Callable[[int], None]], None] | None
        ) = None

    @property
    def config(self) -> ShareGroupConfig:
        return self.shard.runtime.share_config

    # persistence ----------------------------------------------------------------------

    def deleted(self, group_id: str) -> None:
        for listener in self.group_deleted:
            listener(group_id)

    def restored(self, group: ShareGroup) -> None:
        group.subscription_metadata = self.subscription_metadata(group)
        # (as Kafka's replay: a topic still initializing is waited for from now)
        group.initializing_since = dict.fromkeys(group.initializing, self.clock.now())

    def _deleted_topics(self, group: ShareGroup) -> set[uuid.UUID]:
        """Topics of the group's ShareGroupStatePartitionMetadata that were deleted since: Kafka
        drops them from every group's record when the metadata image loses them
        (maybeCleanupShareGroupState); here at the group's next heartbeat."""
        if self.image.topics is None:
            return set()
        return {t for t in (*group.initializing, *group.initialized, *group.deleting) if self.image.name_of(t) is None}

    def initialize_partitions(
        self, group_id: str, partitions: dict[uuid.UUID, tuple[str, frozenset[int]]]
    ) -> CoordinatorResult:
        """AlterShareGroupOffsets started these partitions' state afresh: they are initialized in
        the group's ShareGroupStatePartitionMetadata (the response NONE once that is durable)."""
        out = CoordinatorResult(E.none)
        group = self.groups.get(group_id)
        if type(group) is ShareGroup and initialize_partitions(group, partitions):
            self.persist(out, group)
        return out

    def forget_topics(self, group_id: str, topic_ids: set[uuid.UUID]) -> CoordinatorResult:
        """The share-partition state of these topics is gone (DeleteShareGroupOffsets): they
        leave the group's ShareGroupStatePartitionMetadata (the response NONE once durable)."""
        out = CoordinatorResult(E.none)
        group = self.groups.get(group_id)
        if type(group) is ShareGroup and forget_topics(group, topic_ids):
            self.persist(out, group)
        return out

    def delete_records(self, group_id: str) -> list[tuple[Any, Any]]:
        """DeleteGroups: tombstones of every record of the (empty) group, its epoch last (the
        epoch's alone for a group that wrote none)."""
        return super().delete_records(group_id) or [(R.ShareGroupMetadataKey(group_id), None)]

    # the heartbeat --------------------------------------------------------------------

    def heartbeat(self, r: ShareHeartbeatRequest) -> ShareHeartbeatResult | CoordinatorResult:
        """ShareGroupHeartbeat: a result answered at once (a request refused), or the result
        of the group's new records, answered once they are durable."""
        try:
            if r.member_epoch == LEAVE_EPOCH:
                result, group = self._leave(r)
            else:
                result, group = self._heartbeat(r)
        except ApiError as e:
            new = self.groups.get(r.group_id)
            if type(new) is ShareGroup and not new.members and r.group_id not in self.written:
                del self.groups[r.group_id]  # created for a member that could not join: not kept
            return ShareHeartbeatResult(e.code, e.message)
        out = self.result_of(result, group)
        started = self._initializing.pop(group.group_id, None)
        if started and self.initialize_state is not None:
            out.response = self._initialize(out, group.group_id, started, group.group_epoch, result)
        elif started:  # (no share coordinator: the partitions are initialized once the records are durable)
            group_id = group.group_id

            def initialized(error: int) -> None:
                if error == E.none:
                    self.clock.call_at(self.clock.now(), self._initialized, group_id, started, E.none)

            out.wait(initialized)
        return out

    def _initialize(
        self,
        out: CoordinatorResult,
        group_id: str,
        started: dict[uuid.UUID, frozenset[int]],
        state_epoch: int,
        result: ShareHeartbeatResult,
    ) -> asyncio.Future[Any]:
        """Kafka's persisterInitialize: once the heartbeat's records are durable, the share
        coordinator writes the partitions' first state (under the group's epoch, Kafka's state
        epoch), and its outcome is an operation of the group's: the partitions initialized
        (initializeShareGroupState), or, if that state could not be written, no longer
        initializing (uninitializeShareGroupState, so the next heartbeat tries them again) and
        the heartbeat answered with the write's error. The heartbeat is answered after that."""
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        initialize_state = self.initialize_state
        assert initialize_state is not None

        def settle(answered: ShareHeartbeatResult) -> None:
            if not answer.done():
                answer.set_result(answered)

        def written(error: int) -> None:
            self.clock.call_at(self.clock.now(), self._initialized, group_id, started, error)
            # (Kafka answers the persister's error with its default message)
            settle(result if error == E.none else ShareHeartbeatResult(error, default_message(error)))

        def durable(error: int) -> None:
            if error != E.none:
                settle(self.write_failed(error))  # (the heartbeat's own records failed)
            else:
                initialize_state(group_id, started, state_epoch, written)

        out.wait(durable)
        return answer

    def _initialized(
        self, group_id: str, partitions: dict[uuid.UUID, frozenset[int]], error: int
    ) -> CoordinatorResult | None:
        """Kafka's initializeShareGroupState (NONE: the partitions' state is initialized) or
        uninitializeShareGroupState (its write failed)."""
        group = self.groups.get(group_id)
        if type(group) is not ShareGroup or group.dead:
            return None
        if not finish_initializing(group, partitions, initialized=error == E.none):
            return None
        group.dirty = True
        out = CoordinatorResult()
        self.persist(out, group)
        return out

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
        elif r.member_epoch != 0:  # (epoch 0 under its id: Kafka carries on with the member as it is)
            self.check_epoch(member, r.member_epoch)
        before = (member.member_epoch, member.assigned)
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        member.client_id, member.client_host = r.client_id, r.client_host
        if r.subscribed_topic_names is not None:
            names = tuple(sorted(set(r.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                bump = True
        if group.assignment_epoch >= group.group_epoch and initialized_assignment_pending(group):
            bump = True  # partitions initialized since the target was computed: assign them
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
        self._reconcile(group, member, bump)
        self.touch(group, member)
        # Kafka's maybeCreateInitializeShareGroupStateRequest: the subscribed partitions whose
        # state is not initialized are written as initializing; their state is initialized
        # once this heartbeat's records are durable (heartbeat), and the heartbeat after that
        # assigns them.
        started = start_initializing(group, self.clock.now(), INITIALIZE_RETRY_INTERVAL_MS)
        if started:
            group.dirty = True
            self._initializing[group.group_id] = started
        if forget_topics(group, self._deleted_topics(group)):
            group.dirty = True
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
        member = known_member(group, r.member_id)
        log.info("group %s: member %s left the share group", group.group_id, member.member_id)
        self.remove(group, member)
        return ShareHeartbeatResult(E.none, None, r.member_id, LEAVE_EPOCH, 0), group

    def remove(self, group: ShareGroup, member: ShareMember, fenced: bool = False) -> None:
        """A member leaves or is fenced (Kafka's shareGroupFenceMember): the epoch moves on, the
        others share its partitions from their next heartbeat's target; the last member gone,
        the target is the empty one at that epoch, its time reset."""
        group.remove_member(member)
        group.group_epoch += 1
        group.subscription_metadata = self.subscription_metadata(group)
        group.metadata_hash = metadata_hash(group.subscription_metadata)
        if not group.members:
            group.assignment_epoch, group.assignment_timestamp = group.group_epoch, 0
        group.dirty = True
        if fenced:
            for listener in self.member_fenced:
                listener(group.group_id, member.member_id)

    def fence(self, group: ShareGroup, member: ShareMember, why: str) -> CoordinatorResult:
        log.info("group %s: share member %s fenced: %s", group.group_id, member.member_id, why)
        self.remove(group, member, fenced=True)
        out = CoordinatorResult()
        self.persist(out, group)
        return out

    # assignment -----------------------------------------------------------------------

    def subscribed_topics(self, group: ShareGroup) -> set[str]:
        return group.subscribed_names()

    def compute_target(self, group: ShareGroup) -> None:
        metadata = group.subscription_metadata
        counts = {tid: n for tid, n in metadata.values()}
        members = {
            m.member_id: frozenset(metadata[n][0] for n in m.subscribed_topic_names if n in metadata)
            for m in group.members.values()
        }
        previous = group.target
        group.target = simple_assign(members, counts, previous, assignable(group))
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = self.clock.wall()  # (when the computation finished, as Kafka records it)
        group.dirty = True
        group.changed_members.update(m for m, t in group.target.items() if previous.get(m) != t)

    @staticmethod
    def _reconcile(group: ShareGroup, member: ShareMember, bumped: bool) -> None:
        """Kafka's ShareGroupAssignmentBuilder: straight to the target, of the topics the member
        subscribes to, at the assignment epoch; at the same epoch, again only in a heartbeat that
        moved the group epoch (its subscription may have changed)."""
        if member.member_epoch == group.assignment_epoch and not bumped:
            return
        target = group.target.get(member.member_id, {})
        metadata = group.subscription_metadata
        subscribed = {metadata[n][0] for n in member.subscribed_topic_names if n in metadata}
        if any(t not in subscribed for t in target):
            target = {t: ps for t, ps in target.items() if t in subscribed}
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.assigned = target

    # ShareGroupDescribe ---------------------------------------------------------------

    def member_of(self, group_id: str, member_id: str) -> ShareMember | None:
        group = self.groups.get(group_id)
        return group.members.get(member_id) if type(group) is ShareGroup else None
