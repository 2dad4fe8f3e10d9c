"""The group coordinator in process over an in-memory log (no sockets, no disk): for the
state-machine and property tests, which drive it with a manual clock."""

from __future__ import annotations

import asyncio
import errno

from coordinator.groups.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.runtime import CoordinatorRuntime
from coordinator.groups.shard import OffsetConfig
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


def new_runtime(log: MemoryLog, clock: ManualClock, config: GroupConfig | None = None,
                offsets: OffsetConfig | None = None) -> CoordinatorRuntime:
    return CoordinatorRuntime(log, clock, config or GroupConfig(), offsets or OffsetConfig())


async def settle() -> None:
    """Let appends complete and their continuations run."""
    for _ in range(5):
        await asyncio.sleep(0)
