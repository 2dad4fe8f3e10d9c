"""Kafka's SimpleAssignor for share groups (coordinator/groups/share_group.py simple_assign),
checked as properties over any subscriptions, topic sizes and previous assignments:

- every partition of every subscribed topic goes to at least one member, and only to members
  subscribed to its topic;
- Kafka's balance rule: a topic with P partitions and S subscribers (with different
  subscriptions; all topics together when every member subscribes to the same ones) shares
  each partition among at most ceil(S / P) members, and a member holds at most
  ceil(sharing * P / S) of them; from no previous assignment every partition gets exactly
  ceil(S / P) members;
- members keep a previous partition that stays within those bounds when nothing changed.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.groups.modern.share.share_group import simple_assign

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


@st.composite
def groups(draw):
    n_topics = draw(st.integers(1, 4))
    counts = {t: draw(st.integers(1, 6)) for t in TOPICS[:n_topics]}
    n_members = draw(st.integers(1, 8))
    members = {
        f"m{i}": frozenset(draw(st.sets(st.sampled_from(TOPICS[:n_topics]), min_size=1))) for i in range(n_members)
    }
    previous = {}
    if draw(st.booleans()):
        for m in members:  # anything at all: other topics, partitions gone, partitions over-shared
            previous[m] = {
                t: frozenset(draw(st.sets(st.integers(0, 7), max_size=4)))
                for t in draw(st.sets(st.sampled_from(TOPICS), max_size=3))
            }
    return members, counts, previous


def _units(members, counts):
    """(topic ids, members) balanced together: all topics when the subscriptions are one."""
    if len(set(members.values())) == 1:
        return [(sorted(next(iter(members.values()))), sorted(members))]
    return [
        ([t], sorted(m for m, ts in members.items() if t in ts))
        for t in counts
        if any(t in ts for ts in members.values())
    ]


@settings(max_examples=400, deadline=None)
@given(groups())
def test_every_partition_assigned_to_subscribers_and_balanced(group):
    members, counts, previous = group
    out = simple_assign(members, counts, previous)
    assert set(out) == set(members)
    for m, assignment in out.items():
        for t, ps in assignment.items():
            assert t in members[m], (m, t)  # only subscribers
            assert ps and all(0 <= p < counts[t] for p in ps)
    for topic_ids, subscribers in _units(members, counts):
        parts = [(t, p) for t in topic_ids for p in range(counts[t])]
        sharing = -(-len(subscribers) // len(parts))
        most = -(-sharing * len(parts) // len(subscribers))
        holders = {tp: [m for m in subscribers if tp[1] in out[m].get(tp[0], ())] for tp in parts}
        for tp, hs in holders.items():
            assert 1 <= len(hs) <= sharing, (tp, hs, sharing)
            if not previous:
                assert len(hs) == sharing, (tp, hs)
        for m in subscribers:
            held = sum(len(out[m].get(t, ())) for t in topic_ids)
            assert held <= most, (m, held, most)


@settings(max_examples=200, deadline=None)
@given(groups())
def test_assignment_is_stable(group):
    """Assigning again from the result changes nothing (members keep what they have)."""
    members, counts, previous = group
    once = simple_assign(members, counts, previous)
    assert simple_assign(members, counts, once) == once


def test_mixed_subscriptions_are_balanced_per_topic_as_kafka():
    """Kafka's heterogeneous rule on one example: t (2 partitions) read by a, b, c; u (1) by c only."""
    t, u = TOPICS[:2]
    out = simple_assign({"a": frozenset({t}), "b": frozenset({t}), "c": frozenset({t, u})}, {t: 2, u: 1}, {})
    assert out["c"][u] == {0} and "u" not in out["a"] and u not in out["b"]
    # t: sharing ceil(3/2) = 2, four assignments over three members: 2, 1, 1
    assert sorted(len(out[m].get(t, ())) for m in "abc") == [1, 1, 2]
    assert all(sum(p in out[m].get(t, ()) for m in "abc") == 2 for p in (0, 1))
