"""What the managers of Kafka's modern groups share (GroupMetadataManager over its ModernGroup):
KIP-848 consumer groups (consumer_manager.py) and KIP-932 share groups (share_manager.py).

Persistence (Kafka's runtime contract, runtime.py): a heartbeat (or a leave, an expiry)
changes the live group, and returns the records that differ from what was written so far
(`written`: the durable records plus those of the shard's pending writes) in its
CoordinatorResult; the runtime appends them and answers once they, and every write before
them, are durable. An answer that writes nothing waits for the shard's pending writes all
the same.

Live state is what its records say. If a write fails, the runtime fails it and every
write after it, and `revert` rebuilds each group they touched from the records still
written (durable, or pending before the failed one): exactly the failed writes' effect
is undone, and a member whose join is still on its way to the disk stays. Rebuilding
from records, rather than keeping an undo log per change, needs nothing new: the records
are complete enough for a restart, so they are complete enough for a revert (a member's
session starts over, as after a restart). `replay` (durable records only) keeps `stored`,
what a restart rebuilds.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, cast

from kio.schema.errors import ErrorCode as E

from ..clock import Clock
from .modern_group import Member, ModernGroup, Static, StaticGroup
from ..shard_context import Complete, CoordinatorResult, ShardContext
from ..topic_image import TopicImage

log = logging.getLogger(__name__)


@dataclass
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, frozenset[int]] | None = None


class ApiError(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message  # (None: Kafka answers the error without one)


def known_member(group: ModernGroup[Member], member_id: str) -> Member:
    """The group's member of this id, else UNKNOWN_MEMBER_ID."""
    member = group.members.get(member_id)
    if member is None:
        raise ApiError(E.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}.")
    return member


def static_member(group: StaticGroup[Static], instance_id: str | None, member_id: str) -> Static:
    """The member of the instance id, which must be the one named (a static member's leave)."""
    found = group.static_members.get(instance_id or "")
    member = group.members.get(found) if found is not None else None
    if member is None:
        raise ApiError(E.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        raise ApiError(
            E.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} was fenced by member {member.member_id}.",
        )
    return member


def assignment_due(last_computed_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Kafka 4.3's assignment batching (KIP-1263), for consumer and share groups alike: a
    group whose epoch moved past its target's gets a new target only once its assignment
    interval has passed since the last one was computed (0: at every change)."""
    return interval_ms <= 0 or now_ms >= last_computed_ms + interval_ms


class ModernGroupManager:
    """What the managers of Kafka's modern groups share (GroupMetadataManager over its
    ModernGroup: KIP-848 consumer groups here, KIP-932 share groups in share_manager.py): the
    group's state kept as its records under the runtime contract (this module's docstring),
    member sessions, subscription metadata, the assignment interval, and describe. A subclass
    names its group type and records, and fills in what differs."""

    kind: str  # "consumer" or "share": its group configs' prefix, its name in errors
    group_type: type  # ConsumerGroup or ShareGroup
    model: ModuleType  # the group type's module: group_from_records, records_of, member_keys
    records: ModuleType  # its records' codec: KEY_TYPES, METADATA_KEY
    config: Any  # its group.<kind>.* settings
    # key type -> the value a group's record of that type has before it is first written
    # (Kafka's initial epochs, kept in memory only): {} for a type that writes them all
    initial_values: dict[type, Any] = {}
    # key type -> its place among a write's records, as Kafka's heartbeat appends them ({}:
    # records_of's order); a removed member's tombstones are then all of its keys, in the
    # reverse of member_keys' order
    record_order: dict[type, int] = {}

    def __init__(self, shard: ShardContext, clock: Clock, image: TopicImage) -> None:
        self.shard = shard
        self.clock = clock
        self.image = image
        self.groups = shard.groups
        # group id -> {key: value} of its records as replayed from the log
        self.stored: dict[str, dict[Any, Any]] = {}
        # the same with the shard's pending writes applied: what live state is built from
        self.written: dict[str, dict[Any, Any]] = {}

    def check_epoch(self, member: Any, epoch: int, previous_accepted: Callable[[], bool] | None = None) -> None:
        """Kafka's throwIf{Consumer,Share,Streams}GroupMemberEpochIsInvalid: a heartbeat at an
        epoch past the member's is fenced, and one before it too unless at its previous epoch
        (the answer with the bumped epoch may have been lost) where `previous_accepted` allows."""
        if epoch > member.member_epoch:
            relation = "greater"
        elif epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or (previous_accepted is not None and not previous_accepted())
        ):
            relation = "smaller"
        else:
            return
        raise ApiError(
            E.fenced_member_epoch,
            f"The {self.kind} group member has a {relation} member epoch ({epoch}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )

    # persistence ----------------------------------------------------------------------

    def replay(self, key: Any, value: Any) -> None:
        group_id = key.group
        apply_record(self.stored, key, value, self.records.METADATA_KEY)
        if value is None and group_id not in self.written:
            live = self.groups.get(group_id)
            if type(live) is self.group_type:  # its last tombstone is durable: it is gone
                self.drop(live)
                self.deleted(group_id)

    def deleted(self, group_id: str) -> None:
        """The group's deletion is durable (its metadata record's tombstone replayed)."""

    def written_record(self, key: Any, value: Any) -> None:
        """A record handed to the log (shard.queue_write)."""
        apply_record(self.written, key, value, self.records.METADATA_KEY)

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
                    if type(key) in self.records.KEY_TYPES and key.group == group_id:
                        apply_record(view, key, value, self.records.METADATA_KEY)
            if group_id in view:
                self.written[group_id] = view[group_id]
            else:
                self.written.pop(group_id, None)
            self.rebuild(group_id)

    def rebuild(self, group_id: str) -> None:
        """After `revert`: the live group becomes what its written records say, or goes."""
        if group_id in self.written:
            self.restore(group_id)
            return
        live = self.groups.get(group_id)
        if type(live) is self.group_type:
            self.drop(live)

    def restore(self, group_id: str) -> None:
        """Make the live group what its written records say (at load, or after a failed append)."""
        old = self.groups.get(group_id)
        if type(old) is self.group_type:
            self.drop(old)
        group = self.model.group_from_records(group_id, self.written.get(group_id, {}))
        if group is None:
            return
        current = self.groups.get(group_id)
        if current is not None and not self.replaceable(current):
            log.warning(
                "group %s: %s-group records beside a live %s; ignored", group_id, self.kind, type(current).__name__
            )
            return
        self.groups[group_id] = group
        self.restored(group)
        for m in group.members.values():  # a fresh session each, as Kafka's onLoaded
            self.touch(group, m)

    def replaceable(self, current: Any) -> bool:
        """Whether a group of another type under the same id gives way to a restored one."""
        return cast(bool, current.is_empty())

    def restored(self, group: Any) -> None:
        """A group rebuilt from its records, before its members' sessions start."""

    def drop(self, group: Any) -> None:
        for m in group.members.values():
            if m.session_timer is not None:
                m.session_timer.cancel()
                m.session_timer = None
        group_id = group.group_id
        if self.groups.get(group_id) is group:
            del self.groups[group_id]

    def persist(self, out: CoordinatorResult, group: Any, done: Complete | None = None) -> None:
        """What changed, into the operation's result (a classic group's tombstone first if it
        just became this group); done(error) once durable (NONE) or refused (the error; the
        runtime has reverted the group), or once the writes before it are if nothing changed."""
        extra, written = group.extra_records, self.written.get(group.group_id, {})
        if extra:
            # Written first (a replaced group's tombstone, a converted group's records as
            # Kafka writes them at the conversion): what changed since is written after them.
            written = dict(written)
            for key, value in extra:
                if value is None:
                    written.pop(key, None)
                else:
                    written[key] = value
        records = extra + self.changed_records(group, written)
        group.extra_records = []
        if not records:
            if done is not None:
                out.wait(done)
            return

        def then(error: int) -> object:
            if error == E.none:
                self.durable(group)
            return done(error) if done is not None else None

        out.add(records, then)

    def durable(self, group: Any) -> None:
        """The group's records just written are durable (nothing to do here)."""

    def result_of(self, response: Any, group: Any) -> CoordinatorResult:
        """A heartbeat's result: its response, answered once what it changed in the group
        (if anything) is durable."""
        out = CoordinatorResult(response)
        if group.dirty:
            self.persist(out, group)
        return out

    def changed_records(self, group: Any, written: dict[Any, Any]) -> list[tuple[Any, Any]]:
        """The group's records that differ from `written`: tombstones of what its removed
        members (and `stale_keys`) leave first, as Kafka orders them, then what changed.
        The group has nothing left to write after."""
        now = self.model.records_of(group, group.changed_members)
        order = self.record_order
        # (Kafka tombstones each of a removed member's records, written or not)
        gone = [
            k
            for m in group.removed_members
            if m not in group.members
            for k in (reversed if order else tuple)(self.model.member_keys(group.group_id, m))
            if order or k in written
        ]
        gone += self.stale_keys(group, written)
        group.dirty = False
        group.changed_members = set()
        group.removed_members = set()
        # (A record built again from unchanged inputs is the written value itself: `is` settles it.
        # A group-level record never written holds its initial value, as Kafka's in-memory
        # group: not written until it moves from there.)
        initial = self.initial_values
        changed = [(k, v) for k, v in now.items() if (w := written.get(k, initial.get(type(k)))) is not v and w != v]
        changed += [(k, None) for k in self.dropped_keys(group, written, now)]
        if order and len(changed) > 1:
            changed.sort(key=lambda kv: order.get(type(kv[0]), len(order)))
        return [(k, None) for k in gone] + changed

    def stale_keys(self, group: Any, written: dict[Any, Any]) -> list[Any]:
        """Written records of the group that nothing writes again and that go (none here)."""
        return []

    def dropped_keys(self, group: Any, written: dict[Any, Any], now: dict[Any, Any]) -> list[Any]:
        """Written group-level records that go, their tombstones in `record_order` among the
        write's other records (`now`: the group's records as they are; none here)."""
        return []

    def delete_records(self, group_id: str) -> list[tuple[Any, Any]]:
        """DeleteGroups: tombstones of every record of the (empty) group, its epoch last."""
        keys = list(self.written.get(group_id, {}))
        keys.sort(key=lambda k: type(k) is self.records.METADATA_KEY)
        return [(k, None) for k in keys]

    # answers --------------------------------------------------------------------------

    @staticmethod
    def write_failed(error: int) -> HeartbeatResult:
        """The heartbeat's answer when the group's records could not be written."""
        return HeartbeatResult(error, "The group's records could not be written.")

    # sessions -------------------------------------------------------------------------

    def group_setting(self, group_id: str, name: str, default: int) -> int:
        """A GROUP config resource's override (consumer.session.timeout.ms,
        share.heartbeat.interval.ms, ...: coordinator/groups/group_configs.py), else the broker's."""
        configs = self.shard.runtime.group_configs
        value = configs.get(group_id, name) if configs is not None else None
        return default if value is None else int(value)

    def session_timeout_ms(self, group: Any, member: Any) -> int:
        return self.group_setting(group.group_id, f"{self.kind}.session.timeout.ms", self.config.session_timeout_ms)

    def touch(self, group: Any, member: Any) -> None:
        """A sign of life: the session starts over."""
        member.session_deadline = self.clock.now() + self.session_timeout_ms(group, member)
        if member.session_timer is None:
            member.session_timer = self.clock.call_at(member.session_deadline, self._on_session_timer, group, member)

    def _on_session_timer(self, group: Any, member: Any) -> CoordinatorResult | None:
        if group.members.get(member.member_id) is not member or self.groups.get(group.group_id) is not group:
            return None
        if self.clock.now() < member.session_deadline:
            member.session_timer = self.clock.call_at(member.session_deadline, self._on_session_timer, group, member)
            return None
        member.session_timer = None
        return self.fence(group, member, "session expired")

    def fence(self, group: Any, member: Any, why: str) -> CoordinatorResult:
        """The member is removed (its session expired, a deadline passed): the operation
        that writes it."""
        raise NotImplementedError

    # assignment -----------------------------------------------------------------------

    def subscribed_topics(self, group: Any) -> frozenset[str] | set[str]:
        """The names of the topics the group's members subscribe to."""
        raise NotImplementedError

    def subscription_metadata(self, group: Any) -> dict[str, tuple[uuid.UUID, int]]:
        """The subscribed topics that exist, with their ids and partition counts, as the
        broker has them now (a topic created or grown later changes it at the next heartbeat)."""
        out: dict[str, tuple[uuid.UUID, int]] = {}
        for name in self.subscribed_topics(group):
            found = self.image.lookup(name)
            if found is not None:
                out[name] = found
        return out

    def assignment_interval_ms(self, group_id: str) -> int:
        """<kind>.assignment.interval.ms of the group (group_configs.py), else the broker's,
        within the broker's min and max."""
        configs = self.shard.runtime.group_configs
        if configs is not None:
            return int(configs.assignment_interval_ms(group_id, self.kind))
        c = self.config
        return cast(int, min(max(c.assignment_interval_ms, c.min_assignment_interval_ms), c.max_assignment_interval_ms))

    def maybe_compute_target(self, group: Any) -> None:
        """Kafka 4.3's assignment batching (KIP-1263, GroupMetadataManager's target assignment
        update, for consumer and share groups alike): once the group epoch has moved past the
        target's, a new target is computed only if the group's assignment interval has passed
        since the last one was computed; until then every member keeps the last target and the
        assignment epoch lags the group epoch (the group is Assigning). The heartbeat after the
        interval computes it, for every change since at once. An interval of 0 computes at
        every change."""
        if group.assignment_epoch != group.group_epoch and assignment_due(
            group.assignment_timestamp, self.assignment_interval_ms(group.group_id), self.clock.wall()
        ):
            self.compute_target(group)

    def compute_target(self, group: Any) -> None:
        raise NotImplementedError

    # describe -------------------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[int, str | None, Any]:
        """{Consumer,Share}GroupDescribe's view of one group: (error, message, the group or None)."""
        group = self.groups.get(group_id)
        if group is None or (type(group) is self.group_type and cast("ModernGroup[Any]", group).dead):
            return E.group_id_not_found, f"Group {group_id} not found.", None
        if type(group) is not self.group_type:
            return E.group_id_not_found, f"Group {group_id} is not a {self.kind} group.", None
        return E.none, None, group


def apply_record(views: dict[str, dict[Any, Any]], key: Any, value: Any, metadata_key: type[Any]) -> None:
    """One group record into a view of group id -> its records (a tombstone of the
    group's metadata record is its last: the group is gone)."""
    if value is None:
        view = views.get(key.group)
        if view is not None:
            view.pop(key, None)
            if type(key) is metadata_key:
                del views[key.group]
    else:
        view = views.get(key.group)
        if view is None:
            view = views[key.group] = {}
        view[key] = value
