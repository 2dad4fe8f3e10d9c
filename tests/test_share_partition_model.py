"""A share-partition (coordinator/share/partition.py) against a model written from Kafka's
rules, under hypothesis: any sequence of fetches, acknowledgements (valid or not), lock
expiries, members leaving and restarts from the persisted state leaves both in the same
state. A restart rebuilds the share-partition from what its changes wrote (the state
batches of the changed offsets, applied as __share_group_state replays them)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from coordinator.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    DATA,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    SKIP,
    AckError,
    SharePartition,
)
from coordinator.share.state_log import StoredState
from protocol.share_records import StateBatch

MEMBERS = ("a", "b", "c")
LIMIT, MAX_DELIVERY, LOCK = 6, 3, 10.0


class Model:
    """Per offset [state, delivery count, member, lock deadline]; the log as batches."""

    def __init__(self, batches: list[tuple[int, int, int]]) -> None:
        self.batches = batches
        self.rec: dict[int, list] = {}
        self.start = self.end = 0

    def done(self, o: int) -> bool:
        return o not in self.rec or self.rec[o][0] in (ACKNOWLEDGED, ARCHIVED)

    def advance(self) -> None:
        while self.start < self.end and self.done(self.start):
            self.rec.pop(self.start, None)
            self.start += 1

    def fetch(self, member: str, max_records: int, now: float) -> list[int]:
        got = []
        for o in sorted(self.rec):
            if len(got) < max_records and self.rec[o][0] == AVAILABLE:
                self.rec[o] = [ACQUIRED, self.rec[o][1] + 1, member, now + LOCK]
                got.append(o)
        for base, last, kind in self.batches:
            if len(got) >= max_records or self.end - self.start >= LIMIT:
                break
            if last < self.end:
                continue
            for o in range(max(base, self.end), last + 1):
                if kind == SKIP:
                    self.rec[o] = [ARCHIVED, 0, None, 0.0]
                else:
                    self.rec[o] = [ACQUIRED, 1, member, now + LOCK]
                    got.append(o)
            self.end = last + 1
        self.advance()
        return got

    def allowed(self, member: str, first: int, last: int) -> bool:
        if last < self.start:
            return True
        return last < self.end and all(
            o in self.rec and self.rec[o][0] == ACQUIRED and self.rec[o][2] == member
            for o in range(max(first, self.start), last + 1)
        )

    def ack_all(self, member: str, batches: list[tuple[int, int, int]]) -> bool:
        """Whether one request's batches are allowed (and then applied): ascending without
        overlap, each allowed; all or none."""
        if any(b[0] <= a[1] for a, b in zip(batches, batches[1:])):
            return False
        if not all(self.allowed(member, first, last) for first, last, _ in batches):
            return False
        for first, last, kind in batches:
            self.ack(member, first, last, kind)
        return True

    def ack(self, member: str, first: int, last: int, kind: int) -> bool:
        """Whether the acknowledgement is allowed (and then applied)."""
        if last < self.start:
            return True
        if not self.allowed(member, first, last):
            return False
        for o in range(max(first, self.start), last + 1):
            r = self.rec[o]
            if kind == RENEW:
                continue
            if kind == ACCEPT:
                r[0] = ACKNOWLEDGED
            elif kind == RELEASE:
                r[0] = ARCHIVED if r[1] >= MAX_DELIVERY else AVAILABLE
            else:
                r[0] = ARCHIVED
            r[2] = None
        self.advance()
        return True

    def let_go(self, member: str | None, now: float | None) -> None:
        for r in self.rec.values():
            if r[0] == ACQUIRED and ((member is not None and r[2] == member) or (now is not None and r[3] <= now)):
                r[0] = ARCHIVED if r[1] >= MAX_DELIVERY else AVAILABLE
                r[2] = None
        self.advance()

    def restart(self, sp) -> None:
        """What a restart rebuilds (the written state) becomes the model's, once checked: an
        acquisition is never written, so the checks are that nothing finished comes back and
        that what was in flight comes back Available with at most the deliveries it had."""
        for o, r in sp.records.items():
            before = self.rec.get(o)
            assert o >= self.start or before is None
            if before is not None:
                assert not (self.done(o) and r.state == AVAILABLE)
                assert r.count <= before[1]
        self.rec = {o: [r.state, r.count, None, 0.0] for o, r in sp.records.items()}
        self.start, self.end = sp.start, sp.end
        # Offsets past the last one written are read from the log again.
        self.end = max([o + 1 for o in self.rec] + [self.start])


@st.composite
def logs(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    batches, offset = [], 0
    for size, skip in draw(st.lists(st.tuples(st.integers(1, 3), st.booleans()), min_size=1, max_size=8)):
        batches.append((offset, offset + size - 1, SKIP if skip and draw(st.integers(0, 3)) == 0 else DATA))
        offset += size
    return batches


class SharePartitionMachine(RuleBasedStateMachine):
    @initialize(batches=logs())
    def setup(self, batches: list[tuple[int, int, int]]) -> None:
        self.batches = batches
        self.model = Model(batches)
        self.sp = SharePartition(0, max_delivery=MAX_DELIVERY, max_in_flight=LIMIT)
        self.stored = StoredState()
        self.now = 0.0

    def persist(self, changed: list[int], op) -> None:
        """What the manager writes for an operation: its changed records (those it finished
        included) and the start as it was before it."""
        runs = tuple(StateBatch(*r) for r in self.sp.changed_runs(changed, op.finished))
        self.stored.apply(op.start, runs)

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 5))
    def fetch(self, member: str, max_records: int) -> None:
        ranges, changed = self.sp.acquire(member, self.now + LOCK, max_records, self.batches)
        got = [o for first, last, _ in ranges for o in range(first, last + 1)]
        assert got == self.model.fetch(member, max_records, self.now)
        assert all(count == self.model.rec[o][1] for first, last, count in ranges for o in range(first, last + 1))

    @rule(
        member=st.sampled_from(MEMBERS),
        first=st.integers(0, 16),
        length=st.integers(0, 3),
        kind=st.sampled_from((GAP, ACCEPT, RELEASE, REJECT, RENEW)),
    )
    def acknowledge(self, member: str, first: int, length: int, kind: int) -> None:
        last = first + length
        before = {o: (r.state, r.count, r.member) for o, r in self.sp.records.items()}
        self.sp.track()
        try:
            changed = self.sp.acknowledge(
                member, [(first, last, (kind,))], renew_allowed=True, renew_deadline=self.now + LOCK
            )
            allowed = True
        except AckError:
            allowed = False
        op = self.sp.tracked()
        if not allowed:
            assert {o: (r.state, r.count, r.member) for o, r in self.sp.records.items()} == before  # nothing changed
        assert allowed == self.model.ack(member, first, last, kind)
        if kind == RENEW and allowed:
            for o in range(max(first, self.model.start), last + 1):
                self.model.rec[o][3] = self.now + LOCK
        if allowed:
            self.persist(changed, op)

    @rule(
        member=st.sampled_from(MEMBERS),
        first=st.integers(0, 12),
        lengths=st.tuples(st.integers(0, 2), st.integers(0, 2)),
        gap=st.integers(-2, 2),
        kinds=st.tuples(st.sampled_from((ACCEPT, RELEASE, REJECT)), st.sampled_from((ACCEPT, RELEASE, REJECT))),
    )
    def acknowledge_two_batches(
        self, member: str, first: int, lengths: tuple[int, int], gap: int, kinds: tuple[int, int]
    ) -> None:
        """Two batches in one request, sometimes out of order or overlapping (INVALID_REQUEST)."""
        second = first + lengths[0] + gap
        batches = [(first, first + lengths[0], kinds[0]), (second, second + lengths[1], kinds[1])]
        before = {o: (r.state, r.count, r.member) for o, r in self.sp.records.items()}
        self.sp.track()
        try:
            changed = self.sp.acknowledge(member, [(f, last, (k,)) for f, last, k in batches])
            allowed = True
        except AckError:
            allowed = False
        op = self.sp.tracked()
        if not allowed:
            assert {o: (r.state, r.count, r.member) for o, r in self.sp.records.items()} == before  # nothing changed
        assert allowed == self.model.ack_all(member, batches)
        if allowed:
            self.persist(changed, op)

    @rule(data=st.data(), kind=st.sampled_from((GAP, ACCEPT, RELEASE, RELEASE, REJECT, RENEW)))
    def acknowledge_held(self, data: st.DataObject, kind: int) -> None:
        """Mostly allowed: a run of records one member holds."""
        held = sorted((r.member, o) for o, r in self.sp.records.items() if r.state == ACQUIRED)
        if not held:
            return
        member, first = data.draw(st.sampled_from(held))
        last = first
        while (member, last + 1) in held and data.draw(st.booleans()):
            last += 1
        self.acknowledge(member, first, last - first, kind)

    @rule(seconds=st.floats(0, 15))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        self.sp.track()
        changed = self.sp.release(now=self.now)
        self.persist(changed, self.sp.tracked())
        self.model.let_go(None, self.now)

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.sp.track()
        changed = self.sp.release(member=member)
        self.persist(changed, self.sp.tracked())
        self.model.let_go(member, None)

    @rule()
    def restart(self) -> None:
        self.sp = SharePartition.restored(
            self.stored.start, self.stored.records, max_delivery=MAX_DELIVERY, max_in_flight=LIMIT
        )
        self.model.restart(self.sp)

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 5), data=st.data())
    def failed_write(self, member: str, max_records: int, data: st.DataObject) -> None:
        """A fetch or an acknowledgement whose state write fails is undone: the share-partition
        is as it was (the model does not move), and so is what a restart rebuilds."""
        self.sp.track()
        held = sorted((r.member, o) for o, r in self.sp.records.items() if r.state == ACQUIRED)
        if held and data.draw(st.booleans()):
            holder, offset = data.draw(st.sampled_from(held))
            kind = data.draw(st.sampled_from((ACCEPT, RELEASE, REJECT, RENEW)))
            self.sp.acknowledge(holder, [(offset, offset, (kind,))], renew_allowed=True)
        else:
            self.sp.acquire(member, self.now + LOCK, max_records, self.batches)
        self.sp.undo(self.sp.tracked())

    @invariant()
    def same_state(self) -> None:
        if not hasattr(self, "sp"):
            return
        assert (self.sp.start, self.sp.end) == (self.model.start, self.model.end)
        mine = {o: (r.state, r.count, r.member) for o, r in self.sp.records.items()}
        assert mine == {o: (r[0], r[1], r[2]) for o, r in self.model.rec.items()}
        assert self.sp.acquired == sum(1 for r in self.model.rec.values() if r[0] == ACQUIRED)


TestSharePartition = SharePartitionMachine.TestCase
TestSharePartition.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
