"""Server-side assignors of KIP-848 consumer groups: `uniform` and `range`, as Kafka names them.

An assignor maps every member to the partitions it should own (the target assignment),
given each member's subscribed topics, the topics' partition counts and the previous
target. Both are sticky: a partition stays with its previous owner whenever balance
allows, so a member joining or leaving moves as few partitions as possible.

- uniform (Kafka's default): every partition of the subscribed topics is spread so that
  members with the same subscription differ by at most one partition; kept partitions
  first (up to each member's fair share), the rest to the least loaded subscriber.
- range: per topic, its subscribers sorted by member id get contiguous ranges, the first
  `partitions % members` one partition more (co-partitioned topics line up, which is
  why applications pick it); a member keeps its previous partitions of the topic when
  its range size is unchanged.
"""

from __future__ import annotations

import heapq
import uuid
from typing import Callable, Mapping

Assignment = dict[uuid.UUID, frozenset[int]]
# member id -> (subscribed topic ids, previous target assignment)
Members = Mapping[str, tuple[frozenset[uuid.UUID], Assignment]]
# topic id -> partition count
TopicCounts = Mapping[uuid.UUID, int]
Assignor = Callable[[Members, TopicCounts], dict[str, Assignment]]


def _freeze(owned: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in owned.items()}


def _subscribers(members: Members, topics: TopicCounts) -> dict[uuid.UUID, list[str]]:
    out: dict[uuid.UUID, list[str]] = {}
    for m, (subscribed, _) in sorted(members.items()):
        for t in subscribed:
            if t in topics:
                out.setdefault(t, []).append(m)
    return out


def uniform(members: Members, topics: TopicCounts) -> dict[str, Assignment]:
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    subscribers = _subscribers(members, topics)
    # A member's fair share: its subscribed partitions spread over everyone sharing them
    # (exact for identical subscriptions, which is what applications run).
    floor: dict[str, int] = {}
    ceiling: dict[str, int] = {}
    shares: dict[frozenset[uuid.UUID], tuple[int, int]] = {}  # one per distinct subscription
    for m, (subscribed, _) in members.items():
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
            subscribed, previous = members[m]
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


def range_(members: Members, topics: TopicCounts) -> dict[str, Assignment]:
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for t, subs in _subscribers(members, topics).items():
        count = topics[t]
        quota, extra = divmod(count, len(subs))
        sizes = {m: quota + (1 if i < extra else 0) for i, m in enumerate(subs)}
        taken: set[int] = set()
        # Sticky: a member whose previous partitions of the topic fit its new size keeps them.
        for m in subs:
            previous = members[m][1].get(t, frozenset())
            kept = sorted(p for p in previous if p < count and p not in taken)[:sizes[m]]
            owned[m][t] = set(kept)
            taken.update(kept)
        free = iter(p for p in range(count) if p not in taken)
        for m in subs:
            mine = owned[m][t]
            while len(mine) < sizes[m]:
                mine.add(next(free))
    return _freeze(owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNORS = ("uniform", "range")  # group.consumer.assignors: the first is the default
