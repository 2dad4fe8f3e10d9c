"""The one write path of every coordinator (Kafka's coordinator-common CoordinatorRuntime):
the group coordinator's shards of `__consumer_offsets` (groups/runtime.py, groups/shard.py)
and the share coordinator's shards of `__share_group_state` (share/state_log.py) write
through it alike.

An operation validates against a shard's state and returns a CoordinatorResult: its
records, what it does once they are durable or failed, and its response. It never touches
the log. The runtime (`apply`) appends the records to the shard's partition; once they are
durable it replays them into the shard (`CoordinatorShard.replay_write`: the same replay
that loads the log at startup), runs the operation's continuations and answers (`respond`,
`answer`). A continuation is an operation too: what it returns is written the same way.

Every write, and every answer of an operation that wrote nothing, waits in the shard's
queue of pending writes (Kafka's deferred-event queue, keyed by the last written offset):
it completes only once everything written before it on the shard is durable, in the
order written, however the log reports its appends. So no answer describes state that is
not yet on disk, an operation that changed nothing included.

What the next operations compute on may include writes not yet durable (`written`: Kafka
replays a write before it appends it). If an append fails, it and every write queued after
it fail together (the log cuts them all: a later write was computed on top of the failed
one), and the shard reverts exactly their effect (`revert`); their continuations then get
the error Kafka gives for a failed coordinator write.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from functools import partial
from typing import Any, Callable, Generic, Protocol, TypeVar

from . import server_log
from .apis import LATER, RequestContext, answers_begin, answers_end
from .errors import E
from .futures import Done

log = server_log.get(__name__)

# Called once a write is durable (NONE) or failed (the client's error code). What it returns,
# if a CoordinatorResult, is a follow-up operation: the runtime appends its records too.
Complete = Callable[[int], object]


class CoordinatorResult:
    """What an operation returns (Kafka's CoordinatorResult): its writes and its response.

    Each write is records plus `then(error)`, what the operation does once they are durable
    and replayed (NONE) or could not be written (the client's error): live state that waits
    for the disk (a classic group going Stable, a static member's new id) and futures it
    settles. A wait (`wait`) is a `then` with no records: it runs once every write queued
    before it on the shard is durable. The runtime appends the writes in order, each its own
    append (a later one fails with an earlier one), and answers `response` once they are all
    durable; a response that is a future (a join phase, the leader's assignment) is answered
    when it settles. An operation with nothing to write returns a result without writes: its
    answer still waits for the shard's pending writes.
    """

    __slots__ = ("writes", "response")

    def __init__(self, response: Any = None) -> None:
        # (records, then, (producer id, producer epoch) of a transactional write or None);
        # records None: a wait
        self.writes: list[tuple[list[Any] | None, Complete | None, tuple[int, int] | None]] = []
        self.response = response

    def add(self, records: list[Any], then: Complete | None = None) -> None:
        self.writes.append((records, then, None))

    def add_txn(self, producer_id: int, producer_epoch: int, records: list[Any], then: Complete | None) -> None:
        """Transactional offsets: one transactional batch of this producer, replayed as
        pending offsets until its marker."""
        self.writes.append((records, then, (producer_id, producer_epoch)))

    def wait(self, then: Complete) -> None:
        self.writes.append((None, then, None))


PENDING, DURABLE, FAILED = "pending", "durable", "failed"


class PendingWrite:
    """One write in a shard's queue (records None: the answer of an operation that wrote
    nothing, durable as soon as everything before it is); `offset`: where its first record
    is in the log, once durable."""

    __slots__ = ("records", "complete", "state", "offset")

    def __init__(self, records: list[Any] | None, complete: Complete, state: str = PENDING) -> None:
        self.records = records
        self.complete = complete
        self.state = state
        self.offset = -1


class PartitionWriter(Protocol):
    """The log under a runtime's shards (coordinator.log.offsets.OffsetsLog; tests use one in
    memory)."""

    @property
    def partitions(self) -> int: ...

    def append_to(self, partition: int, records: list[Any], done: Done, /) -> object:
        """done(None, first offset) once durable, or done(error, None) with nothing left
        in the log, neither of this append nor of any append made to the partition after it
        and before its failure was reported (those fail too): a sync failure cuts everything
        past the durable offset, a refused append fails its whole round."""


def write_error(error: BaseException) -> int:
    """Kafka's answer to a coordinator write that failed. A refused disk or sync
    (KafkaStorageException) and a log being closed map to NOT_COORDINATOR, so the client
    looks the coordinator up again and retries, as it would after a leader change."""
    if isinstance(error, (OSError, RuntimeError)):
        return E.not_coordinator
    log.error("coordinator write failed unexpectedly: %r", error)
    return E.unknown_server_error


class CoordinatorShard:
    """The state machine of one partition of a coordinator's topic, as the runtime sees it:
    its queue of pending writes, and what a subclass says writes do to its state (`written`
    when queued, `replay_write` once durable, `revert` once failed)."""

    def __init__(self, partition: int, apply: Callable[[CoordinatorShard, CoordinatorResult], object]) -> None:
        self.partition = partition
        self._apply = apply  # the runtime's, for follow-up operations
        # Set once the shard is unloaded (its partition moved to another broker): it writes
        # nothing more; a new shard loads the partition.
        self.unloaded = False
        self.pending: deque[PendingWrite] = deque()  # not yet answered, in the order written
        self.drain_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the shard serves on (its waiters' futures, its drain), looked up
        once: on Python 3.11 each asyncio.get_running_loop() is a getpid() system call."""
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
        return loop

    # what writes do to the shard's state (the subclass's) ------------------------------

    def written(self, records: list[Any]) -> None:
        """A write was queued: what the next operations compute on, before it is durable."""

    def replay_write(self, records: list[Any], offset: int) -> None:
        """A write is durable, its first record at `offset`: replay it, as a load would."""
        raise NotImplementedError

    def revert(self, failed: list[PendingWrite]) -> None:
        """Undo exactly what `written` did for the failed writes."""

    # the queue of pending writes (the runtime's) -------------------------------------

    def after_pending(self, complete: Complete) -> None:
        """complete(NONE) once every write queued on the shard so far is durable (at once
        if none is), or complete(the error) if one of them fails: the answer of an
        operation that wrote nothing never runs ahead of the log."""
        if not self.pending:
            self.settle(complete, E.none)
        else:
            self.pending.append(PendingWrite(None, complete, DURABLE))

    def queue_write(self, records: list[Any], complete: Complete) -> PendingWrite:
        w = PendingWrite(records, complete)
        self.pending.append(w)
        self.written(records)
        return w

    def drain(self) -> None:
        """Replay and complete the writes at the head of the queue that are durable (their
        answers leave together: one socket write per connection)."""
        self.drain_scheduled = False
        pending = self.pending
        answers_begin()
        try:
            while pending and pending[0].state is DURABLE:
                w = pending.popleft()
                error = E.none
                if w.records is not None:
                    try:
                        self.replay_write(w.records, w.offset)
                    except Exception:  # a bug: the records are on disk, so the answer must not hang
                        log.exception("partition %d: replaying a write failed", self.partition)
                        error = E.unknown_server_error
                self.settle(w.complete, error)
        finally:
            answers_end()

    def fail_from(self, w: PendingWrite, error: int) -> None:
        """`w` failed: it and everything queued after it (computed on top of it, and cut
        from the log with it) fail; their effect on live state is undone first."""
        pending = self.pending
        failed: list[PendingWrite] = []
        while True:
            x = pending.pop()
            x.state = FAILED
            failed.append(x)
            if x is w:
                break
        failed.reverse()
        self.revert(failed)
        answers_begin()
        try:
            for x in failed:
                self.settle(x.complete, error)
        finally:
            answers_end()

    def settle(self, complete: Complete, error: int) -> None:
        """Run a write's continuation; what it returns, if a CoordinatorResult (a follow-up
        operation: a rebalance the outcome starts, a join run again), the runtime writes."""
        follow_up = complete(error)
        if type(follow_up) is CoordinatorResult:
            self._apply(self, follow_up)


W = TypeVar("W", bound=PartitionWriter)


class Runtime(Generic[W]):
    """The write path over a PartitionWriter: `apply` writes an operation's result on its
    shard, `respond` and `answer` settle its response once durable."""

    def __init__(self, writer: W) -> None:
        self.writer = writer

    def apply(self, shard: CoordinatorShard, result: CoordinatorResult) -> Any:
        """Write an operation's result: each of its writes appended in order (a wait queued
        behind those before it); returns its response."""
        for records, then, txn in result.writes:
            if records is None:
                shard.after_pending(then)  # type: ignore[arg-type]  # wait(), the one records-less write, always has a `then`
            elif txn is None:
                self.write(shard, records, then or _nothing)
            else:
                self.write_txn(shard, txn[0], txn[1], records, then or _nothing)
        return result.response

    def respond(
        self,
        shard: CoordinatorShard,
        result: CoordinatorResult | Any,
        failed: Callable[[int], Any],
        later: Callable[[Any], None],
    ) -> Any:
        """Write the result and settle its response: returned now if it is settled already
        (nothing pending on the shard, or a future already done), else LATER and later(it)
        once its writes, and every write before them on the shard, are durable; failed(the
        error) instead if one of them fails. A response that is a future (a join phase, the
        leader's assignment: the continuations settle it) is given when it settles. A
        response given without a CoordinatorResult (a request refused before anything was
        read that a pending write could change) is returned as it is."""
        if type(result) is not CoordinatorResult:
            return result
        response = result.response
        if isinstance(response, asyncio.Future):
            self.apply(shard, result)
            if response.done():
                return response.result()
            response.add_done_callback(lambda f: later(f.result()))
            return LATER
        answer = _Answer(response, failed, later)
        writes = result.writes
        if writes and writes[-1][0] is not None:
            # The answer rides on the operation's last write (the last queued on the shard,
            # so everything before it is durable when it is) rather than a wait of its own.
            records, then, txn = writes[-1]
            writes[-1] = (records, answer if then is None else _ThenAnswer(then, answer), txn)
            self.apply(shard, result)
        else:
            self.apply(shard, result)
            if not shard.pending:
                return response
            shard.after_pending(answer)
        if answer.settled is not _UNSETTLED:
            return answer.settled
        answer.waiting = True
        return LATER

    def answer(
        self,
        ctx: RequestContext,
        shard: CoordinatorShard,
        result: CoordinatorResult | Any,
        build: Callable[[Any], Any],
        failed: Callable[[int], Any],
    ) -> Any:
        """The one way a coordinator request is answered: `respond`, with the response
        body build(response) (its error's, failed(error), if a write fails)."""
        response = self.respond(shard, result, failed, lambda r: ctx.answer(build(r)))
        return LATER if response is LATER else build(response)

    def write(self, shard: CoordinatorShard, records: list[Any], complete: Complete) -> None:
        if shard.unloaded:  # its partition moved: the new coordinator owns it now
            shard.settle(complete, E.not_coordinator)
            return
        w = shard.queue_write(records, complete)
        try:
            self.writer.append_to(shard.partition, records, partial(reported, shard, w))
        except (struct.error, OverflowError, ValueError) as e:
            # A value the record schema cannot hold (validation should have refused it):
            # nothing was queued, so the write fails like any other, leaving no trace.
            reported(shard, w, e, None)

    def write_txn(
        self, shard: CoordinatorShard, producer_id: int, producer_epoch: int, records: list[Any], complete: Complete
    ) -> None:
        """A transactional write: only the group coordinator's shards make them."""
        raise NotImplementedError


_UNSETTLED: Any = object()


class _Answer:
    """The continuation that settles an operation's response once its writes are durable:
    kept (`settled`) while `respond` has not returned yet, given to later() after.

    A class rather than a closure: compiled, a closure and its environment refer to each
    other, so every request's objects would be left for the cycle collector."""

    __slots__ = ("response", "failed", "later", "settled", "waiting")

    def __init__(self, response: Any, failed: Callable[[int], Any], later: Callable[[Any], None]) -> None:
        self.response = response
        self.failed = failed
        self.later = later
        self.settled: Any = _UNSETTLED
        self.waiting = False

    def __call__(self, error: int) -> None:
        final = self.response if error == E.none else self.failed(error)
        if self.waiting:
            self.later(final)
        else:
            self.settled = final


class _ThenAnswer:
    """An operation's own continuation of its last write, then its answer."""

    __slots__ = ("then", "answer")

    def __init__(self, then: Complete, answer: _Answer) -> None:
        self.then = then
        self.answer = answer

    def __call__(self, error: int) -> object:
        follow_up = self.then(error)
        self.answer(error)
        return follow_up


def _nothing(_error: int) -> None:
    """The continuation of a write whose operation does nothing more once it is durable."""


def reported(shard: CoordinatorShard, w: PendingWrite, error: BaseException | None, first: object) -> None:
    """The log's report on one append (in any order): completions leave the shard's queue
    in the order written; a failure fails the append and everything queued after it."""
    if w.state is FAILED:
        if error is None:  # the PartitionWriter contract says this cannot happen
            log.error("partition %d: an append reported durable after an earlier one failed", shard.partition)
        return
    if error is not None:
        shard.fail_from(w, write_error(error))
        return
    w.state = DURABLE
    if type(first) is int:
        w.offset = first
    if shard.pending[0] is w and not shard.drain_scheduled:
        if _nothing_pending_after(shard, w):
            # Every write on the shard is durable: no later report can join the pass, so
            # it runs now rather than on the loop's next turn.
            shard.drain()
            return
        # Drained on the loop's next turn, so that every write the log reports durable in
        # one go (one sync round) is replayed and answered in one pass, one socket write per
        # connection for all their answers and those queued behind them.
        shard.drain_scheduled = True
        shard.loop().call_soon(shard.drain)


def _nothing_pending_after(shard: CoordinatorShard, w: PendingWrite) -> bool:
    """No write queued on the shard after `w` awaits its report (behind it: answers only,
    or writes reported durable already)."""
    for later in reversed(shard.pending):
        if later is w:
            return True
        if later.state is PENDING:
            return False
    return True
