"""GroupMetadata and MemberMetadata of Kafka's classic group protocol.

Plain data plus the small operations that keep its invariants (leader, protocol
votes, static-member index). Decisions (when to rebalance, what to answer) live in
coordinator.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode as E

from .state import VALID_PREVIOUS, GroupState, IllegalStateTransition

log = logging.getLogger(__name__)


@dataclass(slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member id, group instance id, metadata) — only the leader gets these.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    join_waiter: asyncio.Future | None = None  # set while its JoinGroup awaits the join phase
    sync_waiter: asyncio.Future | None = None  # set while its SyncGroup awaits the leader
    deadline: float = 0.0  # session expiry (ms, monotonic); moved by every heartbeat
    timer: Any = None  # lazy expiry timer, fires at some deadline <= the current one

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
    def __init__(self, group_id: str, now_wall_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now_wall_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # insertion order = join order
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, float] = {}  # KIP-394 ids handed out, not yet used -> expiry
        self.supported_protocols: Counter[str] = Counter()
        self.awaiting_join_count = 0
        self.pending_sync: set[str] = set()  # members that must SyncGroup in this generation
        self.new_member_added = False  # during the initial delayed join
        self.join_timer: Any = None
        self.join_started = 0.0  # when the current join phase began (ms)
        self.join_deadline = 0.0  # hard limit of the current join phase (ms)
        self.initial_delay = False  # the join phase is in group.initial.rebalance.delay.ms
        self.sync_timer: Any = None
        self.offsets: dict[tuple[str, int], Any] = {}  # (topic, partition) -> CommittedOffset

    # state ----------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, target: GroupState, now_wall_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateTransition(
                f"group {self.group_id!r}: illegal transition {self.state.value} -> {target.value}"
            )
        log.debug("group %s: %s -> %s", self.group_id, self.state.value, target.value)
        self.state = target
        self.state_timestamp = now_wall_ms

    def can_rebalance(self) -> bool:
        return GroupState.PREPARING_REBALANCE in _NEXT[self.state]

    # members --------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.supported_protocols.update(name for name, _ in member.protocols)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        self.supported_protocols += Counter()  # drop zero counts
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if member.awaiting_join:
            self.awaiting_join_count -= 1
        self.pending_sync.discard(member_id)
        if member.timer is not None:
            member.timer.cancel()
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_protocols(self, member: Member, protocols: list[tuple[str, bytes]]) -> None:
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols += Counter()

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count == len(self.members)

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's rule: an empty group takes any; otherwise type must match and one protocol be common."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        n = len(self.members)
        return any(self.supported_protocols[name] == n for name, _ in protocols)

    def select_protocol(self) -> str:
        """Protocol supported by every member, chosen by the members' first-preference votes."""
        n = len(self.members)
        candidates = {name for name, count in self.supported_protocols.items() if count == n}
        if not candidates:
            raise IllegalStateTransition(f"group {self.group_id!r}: no protocol supported by all members")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values()))
        # Ties go to the first member's preference order (deterministic, unlike Kafka's HashMap).
        order = {name: i for i, (name, _) in enumerate(first.protocols)}
        return max(candidates, key=lambda p: (votes[p], -order.get(p, 0)))

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def check_member(self, group_instance_id: str | None, member_id: str, generation_id: int
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


_NEXT: dict[GroupState, frozenset[GroupState]] = {
    s: frozenset(t for t, prev in VALID_PREVIOUS.items() if s in prev) for s in GroupState
}
