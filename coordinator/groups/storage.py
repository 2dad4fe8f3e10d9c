"""The group coordinator on top of the `__consumer_offsets` log: load by replay, write durably."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from protocol.group_records import UnknownKey

from ..log.config import OFFSETS_TOPIC_CONFIG
from ..log.offsets import OffsetsLog
from .coordinator import GroupCoordinator
from .offsets import Offsets
from .state import GroupState

log = logging.getLogger(__name__)


async def open_offsets_log(data_dir, partitions: int, fsync: str, fsync_interval_ms: int) -> OffsetsLog:
    config = dataclasses.replace(OFFSETS_TOPIC_CONFIG, fsync=fsync, fsync_interval_ms=fsync_interval_ms)
    return await OffsetsLog.open(data_dir, partitions, config)


def load(groups: GroupCoordinator, offsets_log: OffsetsLog) -> int:
    """Replay the log through GroupCoordinator.apply — the same path live writes take.

    Only the last record of each key is replayed, in log order: exactly what replaying
    the log after compaction gives, without decoding values superseded later."""
    started = time.perf_counter()
    count = 0
    for partition in range(offsets_log.partitions):
        for record in sorted(offsets_log.latest(partition).values(), key=lambda r: r.offset):
            if type(record.key) is UnknownKey:
                continue  # e.g. KIP-848 records: not ours to interpret, kept in the log
            groups.apply((record.key, record.value))  # type: ignore[arg-type]
            count += 1
    loaded = sum(1 for g in groups.groups.values() if not g.is_(GroupState.DEAD))
    log.info("loaded %d records: %d groups, %d committed offsets in %.2f s", count, loaded,
             sum(len(g.offsets) for g in groups.groups.values()), time.perf_counter() - started)
    return count


class OffsetExpiry:
    """Runs offset retention (KIP-211) every offsets.retention.check.interval.ms."""

    def __init__(self, offsets: Offsets, interval_ms: int) -> None:
        self.offsets = offsets
        self.task = asyncio.get_running_loop().create_task(self._run(interval_ms / 1000))

    async def _run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.offsets.expire()
            except Exception:
                log.exception("offset expiry failed")

    async def close(self) -> None:
        self.task.cancel()
