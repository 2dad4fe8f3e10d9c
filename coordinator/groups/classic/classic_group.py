"""ClassicGroup and its members: Kafka's classic group protocol's GroupMetadata / MemberMetadata.

Plain data plus the small operations that keep its invariants (leader, protocol
votes, static-member index) and the Group interface (group.py). Decisions (when to
rebalance, what to answer) live in classic_manager.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, cast


from ...errors import E
from ..group import CommitFrom, ExpirationBase
from ..records import GroupMetadataValue
from ..state import VALID_PREVIOUS, GroupState, IllegalStateTransition, States
from .subscription import subscribed_topics as topics_of


# These classes are built for every JoinGroup and SyncGroup, so each writes its own __init__
# (init=False): compiled, a dataclass's generated __init__ stays interpreted Python, several
# times the cost of the object it builds. The decorator still gives them repr (and eq).


@dataclass(slots=True, eq=False, init=False)
class MemberSpec:
    """What a JoinGroup says of its member, and the Member it makes keeps."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols


@dataclass(slots=True, init=False)
class JoinRequest(MemberSpec):
    """A JoinGroup as the coordinator reads it (Kafka's JoinGroupRequestData, with what its
    version decides resolved: whether a new member must come back with its id, KIP-394, and
    may skip the assignment, KIP-814); its group by keyword."""

    require_known_member_id: bool
    group_id: str
    supports_skip_assignment: bool
    reason: str | None

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        *,
        group_id: str,
        supports_skip_assignment: bool = False,
        reason: str | None = None,
    ) -> None:
        # (MemberSpec's, by name: a slots dataclass is a new class, which super() does not know)
        MemberSpec.__init__(
            self,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
        )
        self.require_known_member_id = require_known_member_id
        self.group_id = group_id
        self.supports_skip_assignment = supports_skip_assignment
        self.reason = reason


@dataclass(slots=True, init=False)
class SyncRequest:
    """A SyncGroup as the coordinator reads it (Kafka's SyncGroupRequestData): the leader's
    assignments by member id (empty from the others)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]

    def __init__(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: dict[str, bytes] | None = None,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.assignments = {} if assignments is None else assignments


@dataclass(slots=True, init=False)
class JoinResult:
    error: int
    member_id: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader_id: str
    skip_assignment: bool
    # (member id, group instance id, metadata) — only the leader gets these.
    members: list[tuple[str, str | None, bytes]]

    def __init__(
        self,
        error: int,
        member_id: str = "",
        generation_id: int = -1,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str = "",
        skip_assignment: bool = False,
        members: list[tuple[str, str | None, bytes]] | None = None,
    ) -> None:
        self.error = error
        self.member_id = member_id
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.skip_assignment = skip_assignment
        self.members = [] if members is None else members


@dataclass(slots=True, init=False)
class SyncResult:
    error: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes

    def __init__(
        self, error: int, protocol_type: str | None = None, protocol_name: str | None = None, assignment: bytes = b""
    ) -> None:
        self.error = error
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.assignment = assignment


@dataclass(slots=True, eq=False, init=False)
class Member(MemberSpec):
    assignment: bytes
    join_waiter: asyncio.Future[Any] | None  # set while its JoinGroup awaits the join phase
    sync_waiter: asyncio.Future[Any] | None  # set while its SyncGroup awaits the leader
    deadline: float  # session expiry (ms, monotonic); moved by every heartbeat

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        assignment: bytes = b"",
    ) -> None:
        # (MemberSpec's, by name: a slots dataclass is a new class, which super() does not know)
        MemberSpec.__init__(
            self,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
        )
        self.assignment = assignment
        self.join_waiter = None
        self.sync_waiter = None
        self.deadline = 0.0

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


class ClassicGroup:
    group_type = "classic"

    def __init__(self, group_id: str, now_wall_ms: int) -> None:
        self.group_id = group_id
        self.state = States.EMPTY
        self.state_timestamp = now_wall_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # insertion order = join order
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, float] = {}  # KIP-394 ids handed out, not yet used -> expiry
        self.supported_protocols: dict[str, int] = {}  # protocol name -> members supporting it
        self.awaiting_join_count = 0
        self.pending_sync: set[str] = set()  # members that must SyncGroup in this generation
        self.new_member_added = False  # during the initial delayed join
        self.join_timer: Any = None
        self.join_started = 0.0  # when the current join phase began (ms)
        self.rebalance_reason = ""  # why the current join phase began (said by its log lines)
        self.join_deadline = 0.0  # hard limit of the current join phase (ms)
        self.initial_delay = False  # the join phase is in group.initial.rebalance.delay.ms
        # The group's lazy timers (classic_manager): each fires by its `_at` and moves itself on.
        self.session_timer: Any = None  # members' sessions
        self.session_timer_at = 0.0
        self.sync_timer: Any = None  # this generation's SyncGroups
        self.sync_timer_at = 0.0
        self.sync_deadline: float | None = None  # when this generation's missing SyncGroups time out
        self.pending_timer: Any = None  # pending_members' ids
        self.pending_timer_at = 0.0
        # The group's last GroupMetadata record that is on disk: set by replay only, and
        # what a restart brings back. The fields above are the live group, which runs
        # ahead of it during a rebalance.
        self.stored: GroupMetadataValue | None = None

    @classmethod
    def loaded(cls, group_id: str, record: GroupMetadataValue) -> ClassicGroup:
        """The group as Kafka loads it from its last record: every member back with its
        assignment and the selected protocol's subscription, Stable if it has members,
        else Empty. Members get fresh session deadlines from the caller."""
        group = cls(group_id, record.current_state_timestamp)
        group.stored = record
        group.generation_id = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        for m in record.members:
            protocols = [(record.protocol, m.subscription)] if record.protocol is not None else []
            rebalance_ms = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout  # v0 has none
            group.add(
                Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout,
                    rebalance_ms,
                    group.protocol_type or "",
                    protocols,
                    m.assignment,
                )
            )
        group.leader_id = record.leader if record.leader in group.members else next(iter(group.members), None)
        if group.members:
            group.state = States.STABLE
        return group

    # the Group interface --------------------------------------------------------------

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return not self.members

    def validate_offset_commit(self, commit: CommitFrom, now_ms: float) -> int:
        """Kafka's ClassicGroup.validateOffsetCommit, in its order. A commit counts as a heartbeat."""
        member_id, instance_id, generation = commit.member_id, commit.instance_id, commit.generation
        state = self.state
        if state is States.DEAD:
            return E.coordinator_not_available
        if generation < 0 and state is States.EMPTY:
            return E.none  # an admin or a consumer without group management
        if generation >= 0 or member_id or instance_id is not None:
            error, member = self.check_member(instance_id, member_id, generation)
            if member is None:
                return error
            if state is States.COMPLETING_REBALANCE:
                return E.rebalance_in_progress
            member.deadline = now_ms + member.session_timeout_ms
            return E.none
        return E.unknown_member_id  # no member id: only an Empty group takes it

    def validate_offset_delete(self) -> int:
        if self.state is States.DEAD:
            return E.group_id_not_found
        if self.state is not States.EMPTY and self.protocol_type != "consumer":
            return E.non_empty_group
        return E.none

    def validate_delete_group(self) -> int:
        if self.state is States.DEAD:
            return E.group_id_not_found
        if self.state is not States.EMPTY:
            return E.non_empty_group
        return E.none

    def mark_deleting(self) -> Callable[[], None]:
        previous, since = self.state, self.state_timestamp
        self.state = States.DEAD  # (a group that is Empty may go Dead)

        def undo() -> None:
            self.state, self.state_timestamp = previous, since  # a revert, not a transition

        return undo

    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to (consumer protocol); None if not known."""
        if self.protocol_type != "consumer" or not self.members:
            return None
        topics: frozenset[str] = frozenset()
        for member in self.members.values():
            if member.protocols:
                topics |= topics_of(member.protocols[0][1])
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return topics is not None and topic in topics

    def expiration_base(self) -> ExpirationBase | None:
        """Kafka's offsetExpirationCondition: an Empty group's offsets count from when it
        became Empty; a Stable consumer group's (of topics nobody subscribes to) and a
        standalone committer's from their commit."""
        if self.protocol_type is None:
            return _commit_time
        if self.state is States.EMPTY:
            since = self.state_timestamp
            return (lambda value: since) if since >= 0 else _commit_time
        if self.protocol_type == "consumer" and self.state is States.STABLE and self.members:
            return _commit_time
        return None

    # state ----------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, target: GroupState, now_wall_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateTransition(
                f"group {self.group_id!r}: illegal transition {self.state.value} -> {target.value}"
            )
        # No line, as Kafka's ClassicGroup.transitionTo logs none: every join, sync and leave
        # passes here (a level check alone is a call into logging), and the manager's INFO
        # lines say what the group did.
        self.state = target
        self.state_timestamp = now_wall_ms

    def can_rebalance(self) -> bool:
        return States.PREPARING_REBALANCE in _NEXT[self.state]

    # members --------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self._count_protocols(member.protocols, 1)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._count_protocols(member.protocols, -1)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if member.awaiting_join:
            self.awaiting_join_count -= 1
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_protocols(self, member: Member, protocols: list[tuple[str, bytes]]) -> None:
        self._count_protocols(member.protocols, -1)
        member.protocols = protocols
        self._count_protocols(protocols, 1)

    def _count_protocols(self, protocols: list[tuple[str, bytes]], delta: int) -> None:
        """Kafka's supportedProtocols: how many members support each protocol (none: absent)."""
        counts = self.supported_protocols
        for name, _ in protocols:
            n = counts.get(name, 0) + delta
            if n:
                counts[name] = n
            else:
                del counts[name]

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count == len(self.members)

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's rule: an empty group takes any; otherwise type must match and one protocol be common."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        n = len(self.members)
        return any(self.supported_protocols.get(name) == n for name, _ in protocols)

    def select_protocol(self, changed: Member | None = None, protocols: list[tuple[str, bytes]] | None = None) -> str:
        """Protocol supported by every member, chosen by the members' first-preference votes;
        as it would be if `changed` had `protocols` instead of its own, when given."""

        def protocols_of(m: Member) -> list[tuple[str, bytes]]:
            return protocols if m is changed and protocols is not None else m.protocols

        n = len(self.members)
        if n == 1:  # every protocol of the only member is supported by all: its first wins the vote
            first_choice = protocols_of(next(iter(self.members.values())))
            if first_choice:
                return first_choice[0][0]
        counts = self.supported_protocols
        if changed is not None:
            counts = {}
            for m in self.members.values():
                for name, _ in protocols_of(m):
                    counts[name] = counts.get(name, 0) + 1
        candidates = {name for name, count in counts.items() if count == n}
        if not candidates:
            raise IllegalStateTransition(f"group {self.group_id!r}: no protocol supported by all members")
        votes: dict[str, int] = {}
        for m in self.members.values():
            vote = next(name for name, _ in protocols_of(m) if name in candidates)
            votes[vote] = votes.get(vote, 0) + 1
        first = next(iter(self.members.values()))
        # Ties go to the first member's preference order (deterministic, unlike Kafka's HashMap).
        order = {name: i for i, (name, _) in enumerate(protocols_of(first))}
        return max(candidates, key=lambda p: (votes.get(p, 0), -order.get(p, 0)))

    def max_rebalance_timeout_ms(self) -> int:
        longest = 0  # (a loop: no generator for the few members of most groups)
        for m in self.members.values():
            if m.rebalance_timeout_ms > longest:
                longest = m.rebalance_timeout_ms
        return longest

    def check_member(
        self, group_instance_id: str | None, member_id: str, generation_id: int
    ) -> tuple[int, Member | None]:
        """Kafka's member checks shared by Heartbeat and OffsetCommit, in Kafka's order:
        (FENCED_INSTANCE_ID | UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION | 0, the member)."""
        if group_instance_id is not None and self.fenced(group_instance_id, member_id):
            return E.fenced_instance_id, None
        member = self.members.get(member_id)
        if member is None:
            return E.unknown_member_id, None
        if generation_id != self.generation_id:
            return E.illegal_generation, None
        return E.none, member

    def fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """A static member id that is no longer the one registered for its instance id."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id


def _commit_time(value: Any) -> int:
    return cast(int, value.commit_timestamp)


_NEXT: dict[GroupState, frozenset[GroupState]] = {
    s: frozenset(t for t, prev in VALID_PREVIOUS.items() if s in prev) for s in GroupState
}
