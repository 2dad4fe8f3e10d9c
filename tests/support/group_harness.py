"""The group coordinator in process over an in-memory log (no sockets, no disk): for the
state-machine and property tests, which drive it with a manual clock."""

from __future__ import annotations

import asyncio
import errno

from coordinator.apis import LATER
from coordinator.groups.classic.classic_group import JoinRequest, SyncRequest
from coordinator.groups.classic.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.runtime import CoordinatorRuntime
from coordinator.groups.shard import OffsetConfig
from coordinator.groups.shard_context import CoordinatorResult
from coordinator.log.offsets import partition_for
from coordinator.log.partition import StorageError


class MemoryLog:
    """A PartitionWriter in memory whose appends can be made to fail, as a full disk would:
    a failed append leaves nothing behind (as the real log guarantees)."""

    def __init__(self, partitions: int = 1) -> None:
        self.partitions = partitions
        self.records: list[list] = [[] for _ in range(partitions)]
        self.failing = False

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def append_to(self, p: int, records, done) -> None:
        loop = asyncio.get_running_loop()
        if self.failing:
            loop.call_soon(done, StorageError(errno.ENOSPC, "no space left on device"), None)
            return
        first = len(self.records[p])
        self.records[p].extend(records)
        loop.call_soon(done, None, first)  # durable later, as a real sync round

    def all_records(self):
        return [(p, k, v) for p, recs in enumerate(self.records) for k, v in recs]


class ControlledLog:
    """A PartitionWriter whose appends stay in flight until the test decides: `sync` makes
    the oldest durable and may report them in any order; `fail_from` cuts an append and
    every later one in flight on its partition, as a failed sync cuts the log past its
    durable offset; `refusing` refuses new appends at once, as a full disk. `records` holds
    only what is durable: what a restart replays."""

    def __init__(self, partitions: int = 1) -> None:
        self.partitions = partitions
        self.records: list[list] = [[] for _ in range(partitions)]
        self.in_flight: list[list[tuple[list, object]]] = [[] for _ in range(partitions)]
        self.refusing = False

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def append_to(self, p: int, records, done) -> None:
        if self.refusing:
            asyncio.get_running_loop().call_soon(done, StorageError(errno.ENOSPC, "no space left on device"), None)
            return
        self.in_flight[p].append((list(records), done))

    def append_txn_to(self, p: int, records, producer_id: int, producer_epoch: int, done) -> None:
        from coordinator.groups.records import TxnOffsetCommitKey

        self.append_to(p, [(TxnOffsetCommitKey(producer_id, k), v) for k, v in records], done)

    def sync(self, p: int = 0, count: int | None = None, order: list[int] | None = None) -> int:
        """The oldest `count` appends (all if None) become durable; their callbacks run in
        `order` (indexes into them; in order if None). Returns how many."""
        flight = self.in_flight[p]
        n = len(flight) if count is None else min(count, len(flight))
        batch, self.in_flight[p] = flight[:n], flight[n:]
        first = len(self.records[p])
        firsts = []
        for records, _ in batch:
            firsts.append(len(self.records[p]))
            self.records[p].extend(records)
        for i in order if order is not None else range(n):
            if i < n:
                batch[i][1](None, firsts[i])
        assert first <= len(self.records[p])
        return n

    def fail_from(self, p: int, index: int = 0, order: list[int] | None = None) -> int:
        """Append `index` of those in flight and every later one fail, none of them kept."""
        flight = self.in_flight[p]
        cut, self.in_flight[p] = flight[index:], flight[:index]
        error = StorageError(errno.EIO, "sync failed")
        for i in order if order is not None else range(len(cut)):
            if i < len(cut):
                cut[i][1](error, None)
        return len(cut)

    def all_records(self):
        return [(p, k, v) for p, recs in enumerate(self.records) for k, v in recs]


def new_runtime(
    log: MemoryLog, clock: ManualClock, config: GroupConfig | None = None, offsets: OffsetConfig | None = None
) -> CoordinatorRuntime:
    return CoordinatorRuntime(log, clock, config or GroupConfig(), offsets or OffsetConfig())


async def settle() -> None:
    """Let appends complete and their continuations run."""
    for _ in range(5):
        await asyncio.sleep(0)


def respond(shard, result, later, failed=lambda error: error):
    """An operation's result run as the wire layer runs it (CoordinatorRuntime.respond): its
    response now, or None and later(response) once its writes and those before them are
    durable (later(failed(error)) if one fails)."""
    now = shard.runtime.respond(shard, result, failed, later)
    return None if now is LATER else now


def commit_failed(result):
    """A commit's errors once its write failed: each partition it wrote carries the error."""
    if not isinstance(result, CoordinatorResult):
        return lambda error: error
    errors = result.response
    if result.writes:
        return lambda error: [error if e == 0 else e for e in errors]
    return lambda error: [error] * len(errors)


async def answered(shard, result, failed=lambda error: error):
    """The response of an operation's result once the runtime gives it."""
    fut = asyncio.get_running_loop().create_future()
    now = respond(shard, result, lambda r: fut.done() or fut.set_result(r), failed)
    return now if now is not None else await fut


class Operations:
    """A shard's classic-group manager whose operations the runtime writes as the wire layer
    has it write them: join and sync give their response (a value, or a future the
    continuations settle), leave its answer now or a future of it once written."""

    def __init__(self, shard) -> None:
        self.shard = shard
        self.manager = shard.classic
        self.groups = shard.classic.groups

    def __getattr__(self, name):
        return getattr(self.manager, name)

    def join(self, group_id, *args, **kwargs):
        request = JoinRequest(*args, group_id=group_id, **kwargs)
        return self.shard.runtime.apply(self.shard, self.manager.join(request))

    def sync(self, *args, **kwargs):
        return self.shard.runtime.apply(self.shard, self.manager.sync(SyncRequest(*args, **kwargs)))

    def leave(self, *args, **kwargs):
        fut = self.shard.loop().create_future()
        now = respond(self.shard, self.manager.leave(*args, **kwargs), fut.set_result, lambda error: (error, []))
        return fut if now is None else now
