"""Server-side assignors of KIP-848 consumer groups: `uniform` and `range`, as Kafka names them.

An assignor maps every member to the partitions it should own (the target assignment),
given each member's subscribed topics, the topics' partition counts and the previous
target. Both are sticky: a partition stays with its previous owner whenever balance
allows, so a member joining or leaving moves as few partitions as possible.

- uniform (Kafka's default): every partition of the subscribed topics is spread so that
  members with the same subscription differ by at most one partition. When every member
  subscribes to the same topics (what applications run), Kafka's homogeneous builder: each
  member's quota is total // members, one more for the first total % members members;
  a member keeps its previous partitions up to its quota; the partitions nobody keeps go,
  in topic and partition order, to the members below quota, in order. Kafka walks the
  members in its hash map's order; here they are in member id order. Different
  subscriptions: kept partitions first (up to each member's fair share), the rest to
  the least loaded subscriber (our own; Kafka's heterogeneous builder differs in detail).
- range: Kafka's RangeAssignor exactly. Per topic, its subscribers in order (static
  members first, by instance id, then the others by member id) get contiguous ranges, the
  first `partitions % members` one partition more, so co-partitioned topics line up (why
  applications pick it). Like Kafka's, it is not sticky: the ranges follow the order.
"""

from __future__ import annotations

import heapq
import uuid
from typing import Any, Callable, Mapping

Assignment = dict[uuid.UUID, frozenset[int]]
# member id -> (subscribed topic ids, previous target assignment, instance id or None)
Members = Mapping[str, tuple[frozenset[uuid.UUID], Assignment, str | None]]
# topic id -> partition count
TopicCounts = Mapping[uuid.UUID, int]
Assignor = Callable[[Members, TopicCounts], dict[str, Assignment]]


def _freeze(owned: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in owned.items()}


def _subscribers(members: Members, topics: TopicCounts) -> dict[uuid.UUID, list[str]]:
    out: dict[uuid.UUID, list[str]] = {}
    for m, (subscribed, *_) in sorted(members.items(), key=_range_order):
        for t in subscribed:
            if t in topics:
                out.setdefault(t, []).append(m)
    return out


def uniform(members: Members, topics: TopicCounts) -> dict[str, Assignment]:
    if len({subscribed for subscribed, *_ in members.values()}) == 1:
        return _uniform_homogeneous(members, topics)
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    subscribers = _subscribers(members, topics)
    # A member's fair share: its subscribed partitions spread over everyone sharing them
    # (exact for identical subscriptions, which is what applications run).
    floor: dict[str, int] = {}
    ceiling: dict[str, int] = {}
    shares: dict[frozenset[uuid.UUID], tuple[int, int]] = {}  # one per distinct subscription
    for m, (subscribed, *_) in members.items():
        share = shares.get(subscribed)
        if share is None:
            total = sum(topics[t] for t in subscribed if t in topics)
            sharers = max(len({s for t in subscribed if t in topics for s in subscribers[t]}), 1)
            share = shares[subscribed] = (total // sharers, -(-total // sharers))
        floor[m], ceiling[m] = share
    # Sticky: previous partitions are kept up to the floor first (so every member can reach
    # its floor), then up to the ceiling; the rest go to the least loaded subscriber.
    taken: dict[uuid.UUID, set[int]] = {t: set() for t in subscribers}
    for limit in (floor, ceiling):
        for m in sorted(members):
            subscribed, previous, _ = members[m]
            for t in sorted(previous, key=lambda u: u.int):
                if t not in subscribed or t not in topics:
                    continue
                count, done = topics[t], taken[t]
                for p in sorted(previous[t]):
                    if p < count and p not in done and load[m] < limit[m]:
                        owned[m].setdefault(t, set()).add(p)
                        load[m] += 1
                        done.add(p)
    for t in sorted(subscribers, key=lambda u: u.int):
        # The least loaded subscriber (then the smallest member id) takes each free partition.
        heap = [(load[m], m) for m in subscribers[t]]
        heapq.heapify(heap)
        done = taken[t]
        for p in range(topics[t]):
            if p not in done:
                n, m = heapq.heappop(heap)
                owned[m].setdefault(t, set()).add(p)
                load[m] = n + 1
                heapq.heappush(heap, (n + 1, m))
    return _freeze(owned)


def _uniform_homogeneous(members: Members, topics: TopicCounts) -> dict[str, Assignment]:
    subscribed = {t for t in next(iter(members.values()))[0] if t in topics}
    order = sorted(members)
    if not subscribed or not order:
        return {m: {} for m in members}
    # (Partitions are gathered per topic: a topic id hashes in Python, a partition number in C.)
    kept_anywhere: dict[uuid.UUID, set[int]] = {}
    for _, previous, _ in members.values():
        for t, ps in previous.items():
            kept = kept_anywhere.get(t)
            if kept is None:
                kept_anywhere[t] = set(ps)
            else:
                kept.update(ps)
    # The partitions to hand out, in order, as runs of one topic's partitions.
    unassigned: list[tuple[uuid.UUID, list[int]]] = []
    for t in sorted(subscribed, key=lambda u: u.int):
        kept = kept_anywhere.get(t, set())
        free = [p for p in range(topics[t]) if p not in kept]
        if free:
            unassigned.append((t, free))
    total = sum(topics[t] for t in subscribed)
    quota_base, extra = divmod(total, len(order))
    owned: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for i, m in enumerate(order):
        quota = quota_base + (1 if i < extra else 0)
        mine: dict[uuid.UUID, set[int]] = {}
        for t, ps in sorted(members[m][1].items(), key=lambda kv: kv[0].int):
            if t not in subscribed:
                continue
            count = topics[t]
            valid = sorted(p for p in ps if p < count)
            keep, revoke = valid[: max(quota, 0)], valid[max(quota, 0) :]
            if keep:
                mine[t] = set(keep)
            quota -= len(keep)
            if revoke:
                unassigned.append((t, revoke))
        owned[m] = mine
        if quota > 0:
            unfilled.append((m, quota))
    run, at = 0, 0  # the next free partition: unassigned[run][1][at]
    for m, quota in unfilled:
        mine = owned[m]
        while quota > 0 and run < len(unassigned):
            t, free = unassigned[run]
            taken = free[at : at + quota]
            if t in mine:
                mine[t].update(taken)
            else:
                mine[t] = set(taken)
            quota -= len(taken)
            at += len(taken)
            if at == len(free):
                run, at = run + 1, 0
    return _freeze(owned)


def _range_order(item: tuple[str, tuple[Any, ...]]) -> tuple[Any, ...]:
    """Kafka's RangeAssignor order: static members by instance id, then the others by member id."""
    member_id, (_, _, instance_id) = item
    return (0, instance_id, "") if instance_id is not None else (1, "", member_id)


def range_(members: Members, topics: TopicCounts) -> dict[str, Assignment]:
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for t, subs in _subscribers(members, topics).items():  # (subscribers in _range_order)
        quota, extra = divmod(topics[t], len(subs))
        start = 0
        for i, m in enumerate(subs):
            end = start + quota + (1 if i < extra else 0)
            owned[m][t] = set(range(start, end))
            start = end
    return _freeze(owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNORS = ("uniform", "range")  # group.consumer.assignors: the first is the default
