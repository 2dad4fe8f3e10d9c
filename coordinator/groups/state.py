"""Group states and Kafka's legal-transition table (GroupState.validPreviousStates)."""

from __future__ import annotations

import enum
from types import SimpleNamespace
from typing import TYPE_CHECKING


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    # Members are singletons: identity hashing, not Enum's hash of the name in Python, for
    # the state-machine lookups every join, sync and leave makes.
    __hash__ = object.__hash__


# The members as plain attributes, for the classic group paths that read them at every
# request: on Python 3.11 `GroupState.X` passes through EnumType.__getattr__'s Python-level
# hook (see coordinator/errors.py). Type checkers see GroupState itself.
if TYPE_CHECKING:
    States = GroupState
else:
    States = SimpleNamespace(**GroupState.__members__)

_S = GroupState
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
}


class IllegalStateTransition(RuntimeError):
    """A bug: the coordinator tried a transition Kafka's state machine forbids."""
