"""One share-partition's records: Kafka's SharePartition (core's kafka.server.share).

The share-partition start offset (SPSO) and end (the next offset to read from the log,
one past Kafka's endOffset) bound the in-flight window; every offset in it read from the
log has a state: Available, Acquired (by one member, under an acquisition lock),
Acknowledged or Archived, and a delivery count. Below the start every record is done.

- acquire: Available records in the window first (lowest offset first), then whole log
  batches past the end, while the window holds fewer than the in-flight limit
  (group.share.partition.max.record.locks), with the offsets compaction removed between
  them (Kafka acquires one range; the client acknowledges a missing offset as GAP). Each
  acquisition counts a delivery.
- acknowledge: ACCEPT -> Acknowledged, RELEASE -> Available, REJECT and GAP -> Archived,
  RENEW -> the lock starts over. Only records Acquired by the acknowledging member;
  anything else refuses the whole request for the partition (Kafka's INVALID_RECORD_STATE
  / INVALID_REQUEST), and nothing changes.
- A lock that expires, a member that leaves, a session that closes: its Acquired records
  become Available again, their delivery count kept. A record released or expired that
  has been delivered share.delivery.count.limit times is Archived instead.
- With a dead-letter queue (`dlq`: share.version 2 and the group's
  errors.deadletterqueue.topic.name, KIP-1191), a REJECT and a record at the delivery limit
  go to Archiving instead: not done yet (the start stops there) until its dead letter is
  written and archive() moves it to Archived. `causes` says why each went (Kafka's
  ShareGroupDLQManager.CLIENT_REJECT / DELIVERY_COUNT_EXCEEDED).
- The start moves past every leading Acknowledged or Archived record.

Pure state: no I/O and no clock of its own (callers pass `now`). The manager persists
what `acknowledge` / `acquire` / `expire` report as changed (state_log.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from kio.schema.errors import ErrorCode as E

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED = 0, 1, 2, 3, 4  # Kafka's RecordState ids
REJECTED, EXCEEDED = 0, 1  # why a record is dead-lettered: rejected by its client, or out of deliveries
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4  # AcknowledgeType
DATA, SKIP = 0, 1  # a log batch's records: delivered, or archived at once (control batches, aborted transactions)


class InFlight:
    __slots__ = ("state", "count", "member", "deadline")

    def __init__(self, state: int, count: int) -> None:
        self.state = state
        self.count = count
        self.member: str | None = None
        self.deadline = 0.0

    def __repr__(self) -> str:
        return f"InFlight({self.state}, {self.count}, {self.member!r})"


@dataclass(frozen=True)
class Undo:
    """What one operation changed: the window's bounds before it, and each record it touched
    as it was (state, count, member, deadline; None: not in the window)."""

    start: int
    end: int
    records: dict[int, tuple[int, int, str | None, float] | None]
    # Records the operation finished and the start moved past: (state, delivery count). Its
    # write carries them and the start as it was before, as Kafka's SharePartition writes its
    # state before it moves its start offset.
    finished: dict[int, tuple[int, int]]


@dataclass(frozen=True)
class AckError(Exception):
    code: int
    message: str


class SharePartition:
    def __init__(self, start: int, *, max_delivery: int = 5, max_in_flight: int = 2000) -> None:
        self.start = start
        self.end = start
        self.records: dict[int, InFlight] = {}
        self.max_delivery = max_delivery
        self.max_in_flight = max_in_flight
        # Records that would be archived go to Archiving (a dead letter first), as the manager
        # sets it from share.version and the group's errors.deadletterqueue.topic.name.
        self.dlq = False
        self.causes: dict[int, int] = {}  # an Archiving record's offset -> REJECTED or EXCEEDED
        self.acquired = 0  # records in the Acquired state (the in-flight gauge)
        # The state epoch it was loaded or started over under: its writes carry it, and the
        # share coordinator refuses them once the stored epoch moved on (FENCED_STATE_EPOCH).
        self.state_epoch = 0
        # While an operation runs (track() .. tracked()), what each record it touches was before
        # (None: it was not in the window), so that a write that fails can be undone.
        self._journal: dict[int, tuple[int, int, str | None, float] | None] | None = None
        self._journal_bounds = (start, start)
        self._finished: dict[int, tuple[int, int]] = {}

    @classmethod
    def restored(cls, start: int, states: dict[int, tuple[int, int]], **kw: int) -> SharePartition:
        """From persisted state: offset -> (state, delivery count), offsets >= start, as
        Kafka's SharePartition.maybeInitialize rebuilds its in-flight batches. An acquisition is
        never written (nor is Acquired), so a record acquired when the server stopped is
        Available with the count of its last written change: its next delivery counts as the
        one the stop interrupted, and no delivery count goes past the limit."""
        sp = cls(start, **kw)
        for offset in sorted(states):
            if offset >= start:
                state, count = states[offset]
                sp.records[offset] = InFlight(AVAILABLE if state == ACQUIRED else state, count)
                sp.end = offset + 1
                if state == ARCHIVING:  # its dead letter is written again (Kafka's maybeResumeDlqArchiving)
                    sp.causes[offset] = EXCEEDED if count >= sp.max_delivery else REJECTED
        sp.advance_start()
        return sp

    # undoing a failed write ---------------------------------------------------------------

    def track(self) -> None:
        """Start recording what the next operation changes (tracked() hands it over)."""
        self._journal = {}
        self._finished = {}
        self._journal_bounds = (self.start, self.end)

    def tracked(self) -> Undo:
        journal, self._journal = self._journal, None
        return Undo(*self._journal_bounds, journal or {}, self._finished)

    def changed_runs(
        self, offsets: Iterable[int], finished: dict[int, tuple[int, int]]
    ) -> list[tuple[int, int, int, int]]:
        """State batches of the changed offsets, those the start moved past included."""
        entries = dict(finished)
        for offset in offsets:
            r = self.records.get(offset)
            if r is not None:
                written = _as_written(r)
                if written is not None:
                    entries[offset] = written
        return runs_of(entries)

    def whole_runs(self, finished: dict[int, tuple[int, int]]) -> list[tuple[int, int, int, int]]:
        """Every state batch of the window, and the records the operation finished."""
        entries = dict(finished)
        for offset, r in self.records.items():
            written = _as_written(r)
            if written is not None:
                entries[offset] = written
        return runs_of(entries)

    def _touch(self, offset: int, r: InFlight | None) -> None:
        journal = self._journal
        if journal is not None and offset not in journal:
            journal[offset] = None if r is None else (r.state, r.count, r.member, r.deadline)

    def undo(self, undo: Undo) -> None:
        """Put back every record the operation changed, and the window's bounds, as they were
        before it (its write failed: Kafka's SharePartition.rollbackOrProcessStateUpdates)."""
        for offset, before in undo.records.items():
            r = self.records.get(offset)
            if r is not None and r.state == ACQUIRED:
                self.acquired -= 1
            if before is None:
                self.records.pop(offset, None)
                self.causes.pop(offset, None)
                continue
            if r is None:
                r = self.records[offset] = InFlight(before[0], before[1])
            r.state, r.count, r.member, r.deadline = before
            if r.state == ACQUIRED:
                self.acquired += 1
            if r.state != ARCHIVING:
                self.causes.pop(offset, None)
        self.start = min(self.start, undo.start)
        self.end = undo.end
        self.advance_start()

    # views ------------------------------------------------------------------------------

    def window_full(self) -> bool:
        return self.end - self.start >= self.max_in_flight

    def has_available(self) -> bool:
        return any(r.state == AVAILABLE for r in self.records.values())

    def next_fetch_offset(self) -> int:
        """Where a fetch reads the log from: the first Available record, else the end (Kafka's
        nextFetchOffset)."""
        return min((o for o, r in self.records.items() if r.state == AVAILABLE), default=self.end)

    def state_of(self, offset: int) -> tuple[int, int] | None:
        r = self.records.get(offset)
        return None if r is None else (r.state, r.count)

    def next_deadline(self) -> float | None:
        return min((r.deadline for r in self.records.values() if r.state == ACQUIRED), default=None)

    # acquiring --------------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        deadline: float,
        max_records: int,
        batches: Iterable[tuple[int, int, int]] = (),
        *,
        strict: bool = False,
        upto: int | None = None,
    ) -> tuple[list[tuple[int, int, int]], list[int]]:
        """Acquire up to max_records for `member` until `deadline`; a log batch is taken
        whole (Kafka's batch-optimized mode) unless `strict` (record-limit mode, ShareFetch
        v2). batches: (base offset, last offset, DATA or SKIP) of the log from `end` on, read
        lazily. upto: the last offset the fetch's byte limits let it read (Kafka acquires
        from what its log read returned). Returns the acquired ranges (first, last, delivery
        count) and the offsets whose state changed."""
        got: list[int] = []
        changed: list[int] = []
        for offset in sorted(o for o, r in self.records.items() if r.state == AVAILABLE):
            if len(got) >= max_records or (upto is not None and offset > upto):
                break
            r = self.records[offset]
            self._touch(offset, r)
            self._take(offset, r, member, deadline)
            got.append(offset)
        changed.extend(got)
        if len(got) < max_records and not self.window_full():
            read = False  # a batch of this read was taken: offsets between it and the next are a gap
            for base, last, kind in batches:
                if last < self.end:
                    continue
                if upto is not None and base > upto:
                    break
                # Kafka's acquireNewBatchRecords takes one range from the first batch read to the
                # last, so offsets that compaction removed between two batches are acquired too
                # (the client acknowledges them as GAP); a gap before the first batch read is not.
                for offset in range(self.end if read else max(base, self.end), last + 1):
                    gap = offset < base
                    if gap and self.window_full():
                        break  # (a long gap is taken up to the in-flight limit; the rest is passed over)
                    is_data = gap or kind == DATA
                    if strict and is_data and len(got) >= max_records:
                        break
                    self._touch(offset, None)
                    r = self.records[offset] = InFlight(AVAILABLE if is_data else ARCHIVED, 0)
                    if is_data:
                        self._take(offset, r, member, deadline)
                        got.append(offset)
                    changed.append(offset)
                    self.end = offset + 1
                read = True
                if len(got) >= max_records or self.window_full() or self.end <= last:
                    break
            self.advance_start()  # (a skipped batch at the start)
        return self._ranges(got), changed

    def _take(self, offset: int, r: InFlight, member: str, deadline: float) -> None:
        r.state, r.member, r.deadline = ACQUIRED, member, deadline
        r.count += 1
        self.acquired += 1

    def _ranges(self, offsets: list[int]) -> list[tuple[int, int, int]]:
        out: list[tuple[int, int, int]] = []
        for offset in sorted(offsets):
            count = self.records[offset].count
            if out and out[-1][1] == offset - 1 and out[-1][2] == count:
                out[-1] = (out[-1][0], offset, count)
            else:
                out.append((offset, offset, count))
        return out

    # acknowledging ----------------------------------------------------------------------

    def acknowledge(
        self,
        member: str,
        batches: list[tuple[int, int, tuple[int, ...]]],
        *,
        renew_allowed: bool = False,
        renew_deadline: float = 0.0,
    ) -> list[int]:
        """Apply a request's acknowledgement batches (first, last, types) for one partition,
        all or nothing: AckError (nothing changed) if any is not allowed. Returns the
        offsets whose state changed."""
        plan: list[tuple[int, int]] = []  # (offset, type)
        highest = RENEW if renew_allowed else REJECT
        previous_last = -1
        for first, last, types in batches:
            if first > last or not types or len(types) not in (1, last - first + 1):
                raise AckError(E.invalid_request, "Invalid acknowledgement batch: offsets or types do not match.")
            # KafkaApis.validateAcknowledgementBatches: batches ascend without overlapping,
            # so no offset is acknowledged twice in one request.
            if first <= previous_last:
                raise AckError(E.invalid_request, "Acknowledgement batches are not in order or overlap.")
            previous_last = last
            if any(not 0 <= t <= highest for t in types):
                raise AckError(E.invalid_request, f"Invalid acknowledge type: {list(types)}")
            if last < self.start:
                continue  # already done (archived by the start moving on), as Kafka skips it
            if first >= self.end or last >= self.end:
                raise AckError(
                    E.invalid_request,
                    "Batch record not found. The last offset in request is past acquired records."
                    if first < self.end
                    else "Batch record not found. The first offset in request is past acquired records.",
                )
            for offset in range(max(first, self.start), last + 1):
                r = self.records.get(offset)
                if r is None or r.state != ACQUIRED:
                    raise AckError(
                        E.invalid_record_state,
                        "The batch cannot be acknowledged. The batch is not in the acquired state.",
                    )
                if r.member != member:
                    raise AckError(E.invalid_record_state, "Member is not the owner of batch record")
                plan.append((offset, types[0] if len(types) == 1 else types[offset - first]))
        changed = []
        for offset, kind in plan:
            r = self.records[offset]
            self._touch(offset, r)
            if kind == RENEW:
                r.deadline = renew_deadline
                continue
            self.acquired -= 1
            r.member = None
            if kind == ACCEPT:
                r.state = ACKNOWLEDGED
            elif kind == RELEASE:
                r.state = self._archived(offset, EXCEEDED) if r.count >= self.max_delivery else AVAILABLE
            elif kind == REJECT:
                r.state = self._archived(offset, REJECTED)
            else:  # GAP: no record to dead-letter
                r.state = ARCHIVED
            changed.append(offset)
        self.advance_start()
        return changed

    # releasing --------------------------------------------------------------------------

    def release(self, member: str | None = None, now: float | None = None) -> list[int]:
        """Let go of Acquired records: those of `member` (it left, its session closed), or
        those whose lock expired by `now`. Their delivery count is kept; a record at the
        delivery limit is Archived. Returns the offsets whose state changed."""
        changed = []
        for offset, r in self.records.items():
            if r.state != ACQUIRED:
                continue
            if (member is not None and r.member == member) or (now is not None and r.deadline <= now):
                self._touch(offset, r)  # (a release is undone if its write fails)
                r.state = self._archived(offset, EXCEEDED) if r.count >= self.max_delivery else AVAILABLE
                r.member = None
                self.acquired -= 1
                changed.append(offset)
        if changed:
            self.advance_start()
        return changed

    def _archived(self, offset: int, cause: int) -> int:
        """The state of a record done with: Archiving (with why) where a dead letter is due."""
        if not self.dlq:
            return ARCHIVED
        self.causes[offset] = cause
        return ARCHIVING

    def dead_letters(self, offsets: Iterable[int]) -> list[tuple[int, int, int, int]]:
        """(first, last, delivery count, cause) runs of the given offsets still Archiving: the
        dead letters an operation that changed them owes."""
        out: list[tuple[int, int, int, int]] = []
        for offset in sorted(offsets):
            r = self.records.get(offset)
            if r is None or r.state != ARCHIVING:
                continue
            cause = self.causes.get(offset, REJECTED)
            if out and out[-1][1] == offset - 1 and out[-1][2] == r.count and out[-1][3] == cause:
                out[-1] = (out[-1][0], offset, r.count, cause)
            else:
                out.append((offset, offset, r.count, cause))
        return out

    def archive(self, first: int, last: int) -> list[int]:
        """The dead letters of first..last are written (or failed, which Kafka logs and goes
        on from): their Archiving records are Archived. Returns the offsets changed."""
        changed = []
        for offset in range(first, last + 1):
            r = self.records.get(offset)
            if r is not None and r.state == ARCHIVING:
                self._touch(offset, r)
                r.state = ARCHIVED
                self.causes.pop(offset, None)
                changed.append(offset)
        if changed:
            self.advance_start()
        return changed

    def advance_start(self) -> None:
        """Kafka's maybeUpdateCachedStateAndOffsets: past every leading finished record."""
        records = self.records
        start = self.start
        while start < self.end:
            r = records.get(start)
            if r is not None and r.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            if self._journal is not None:
                self._touch(start, r)
                if r is not None:
                    self._finished[start] = (r.state, r.count)
            records.pop(start, None)
            start += 1
        self.start = start

    def reset(self, start: int) -> None:
        """A new start (AlterShareGroupOffsets, or the log's start moved past it): the
        window starts over there."""
        self.records = {o: r for o, r in self.records.items() if o >= start} if start < self.end else {}
        self.causes = {o: c for o, c in self.causes.items() if o in self.records}
        self.acquired = sum(1 for r in self.records.values() if r.state == ACQUIRED)
        self.start = start
        self.end = max(self.end, start)
        self.advance_start()


def _as_written(r: InFlight) -> tuple[int, int] | None:
    """A record as its last write left it: an acquisition is never written (as in Kafka), so an
    Acquired record is Available with one delivery less, or was never written at all."""
    if r.state != ACQUIRED:
        return r.state, r.count
    return (AVAILABLE, r.count - 1) if r.count > 1 else None


def runs_of(entries: dict[int, tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """(first, last, state, delivery count) runs of offset -> (state, count)."""
    out: list[tuple[int, int, int, int]] = []
    for offset in sorted(entries):
        state, count = entries[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == state and out[-1][3] == count:
            out[-1] = (out[-1][0], offset, state, count)
        else:
            out.append((offset, offset, state, count))
    return out
