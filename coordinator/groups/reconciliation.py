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
from typing import Callable

Assignment = dict[uuid.UUID, frozenset[int]]


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
    owner_elsewhere: Callable[[uuid.UUID, int], bool],
) -> Reconciled:
    """The member's next state. `owned`: the partitions its heartbeat lists (None if it
    did not send them); `owner_elsewhere(topic, partition)`: whether another member
    still owns the partition."""
    if state is MemberState.UNREVOKED_PARTITIONS:
        # It may move on only once it no longer lists anything it was told to revoke.
        if owns_any(owned, pending):
            return Reconciled(state, member_epoch, previous_epoch, assigned, pending)
        pending = {}
        state = MemberState.STABLE if member_epoch == target_epoch else MemberState.UNKNOWN
    if state is MemberState.STABLE and member_epoch == target_epoch:
        return Reconciled(state, member_epoch, previous_epoch, assigned, pending)
    if state is MemberState.UNRELEASED_PARTITIONS and member_epoch == target_epoch:
        return _assign(member_epoch, previous_epoch, assigned, target, owner_elsewhere)
    # A new target: revoke first, or take what is free.
    keep = _and(assigned, target)
    revoke = _minus(assigned, target)
    if revoke and owns_any(owned, revoke):
        return Reconciled(MemberState.UNREVOKED_PARTITIONS, member_epoch, previous_epoch, keep, revoke)
    # Nothing to revoke that its heartbeat still lists (e.g. the partitions of a deleted
    # topic, which the client dropped itself): straight to the target's epoch, as Kafka.
    return _assign(target_epoch, member_epoch, keep, target, owner_elsewhere)


def _assign(
    epoch: int,
    previous_epoch: int,
    keep: Assignment,
    target: Assignment,
    owner_elsewhere: Callable[[uuid.UUID, int], bool],
) -> Reconciled:
    assigned = {t: set(ps) for t, ps in keep.items()}
    unreleased = False
    for t, ps in target.items():
        for p in ps:
            if p in assigned.get(t, ()):
                continue
            if owner_elsewhere(t, p):
                unreleased = True
            else:
                assigned.setdefault(t, set()).add(p)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(state, epoch, previous_epoch, {t: frozenset(ps) for t, ps in assigned.items() if ps})
