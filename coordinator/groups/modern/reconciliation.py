"""A member's move from its current assignment to its target (Kafka's CurrentAssignmentBuilder).

The rule that makes incremental rebalances safe: a partition goes to its new owner only
once no other member owns it. So a member first gives up what it must lose (state
UNREVOKED_PARTITIONS: its epoch stays, it is told only what to keep) and its heartbeat
must no longer list those partitions before it moves to the new epoch. A member whose
new partitions are still owned by others waits in UNRELEASED_PARTITIONS with the new
epoch, owning the free part, and gets the rest as their owners release them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

Assignment = dict[uuid.UUID, frozenset[int]]
# topic id -> partition -> the member owning it (ConsumerGroup.owners)
Owners = Mapping[uuid.UUID, Mapping[int, str]]


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


@dataclass
class Reconciled:
    state: MemberState
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment
    pending_revocation: Assignment = field(default_factory=dict)


def _minus(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _and(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def owns_any(owned: list[tuple[uuid.UUID, list[int]]] | None, partitions: Assignment) -> bool:
    """Whether a heartbeat's owned partitions include any of `partitions` (Kafka's
    ownsRevokedPartitions; None, a heartbeat that did not list them: assumed so)."""
    if owned is None:
        return True
    for t, ps in owned:
        these = partitions.get(t)
        if these and any(p in these for p in ps):
            return True
    return False


def reconcile(
    state: MemberState,
    member_epoch: int,
    previous_epoch: int,
    assigned: Assignment,
    pending: Assignment,
    target_epoch: int,
    target: Assignment,
    owned: list[tuple[uuid.UUID, list[int]]] | None,
    owners: Owners,
    member_id: str,
) -> Reconciled:
    """The member's next state. `owned`: the partitions its heartbeat lists (None if it
    did not send them); `owners`: who owns each partition now (a partition owned by a
    member other than `member_id` is not yet free)."""
    if state is MemberState.UNREVOKED_PARTITIONS:
        # It may move on only once it no longer lists anything it was told to revoke.
        if owns_any(owned, pending):
            return Reconciled(state, member_epoch, previous_epoch, assigned, pending)
    elif state is MemberState.STABLE and member_epoch == target_epoch:
        return Reconciled(state, member_epoch, previous_epoch, assigned, pending)
    # Kafka's computeNextAssignment: towards the target, revoking first or taking what is
    # free; whatever it decides, the member's previous epoch becomes its epoch before it
    # (ConsumerGroupMember.Builder.updateMemberEpoch), even when the epoch stays.
    epoch = target_epoch if state is MemberState.UNKNOWN else member_epoch
    keep = _and(assigned, target)
    revoke = _minus(assigned, target)
    if revoke and owns_any(owned, revoke):
        return Reconciled(MemberState.UNREVOKED_PARTITIONS, epoch, member_epoch, keep, revoke)
    # Nothing to revoke that its heartbeat still lists (e.g. the partitions of a deleted
    # topic, which the client dropped itself): straight to the target's epoch, as Kafka.
    return _assign(target_epoch, member_epoch, keep, target, owners, member_id)


def _assign(
    epoch: int,
    previous_epoch: int,
    keep: Assignment,
    target: Assignment,
    owners: Owners,
    member_id: str,
) -> Reconciled:
    """`keep` and every partition of `target` no other member owns; UNRELEASED_PARTITIONS
    if some are still owned by others."""
    assigned = dict(keep)
    unreleased = False
    for t, ps in target.items():
        have = assigned.get(t, frozenset())
        wanted = ps - have
        if not wanted:
            continue
        of_topic = owners.get(t)
        if of_topic:
            taken = [p for p in wanted if of_topic.get(p, member_id) != member_id]
            if taken:
                unreleased = True
                wanted = wanted.difference(taken)
        if wanted:
            assigned[t] = have | wanted
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(state, epoch, previous_epoch, {t: ps for t, ps in assigned.items() if ps})
