"""A KIP-848 consumer group driven in process through a GroupShard, with a manual clock."""

from __future__ import annotations

from coordinator.groups.classic.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.modern.consumer.consumer_group import ConsumerGroup
from coordinator.groups.modern.consumer.consumer_manager import ConsumerGroupConfig, HeartbeatRequest
from coordinator.groups.modern.modern_manager import HeartbeatResult, ModernGroupManager
from coordinator.groups.runtime import CoordinatorRuntime
from coordinator.groups.shard import OffsetConfig
from coordinator.groups.topic_image import TopicImage
from tests.support.group_harness import MemoryLog, respond, settle
from tests.support.consumer_shard import (
    Catalog,
)


GROUP = "cg"


class Harness:
    def __init__(self, log: MemoryLog | None = None, catalog: Catalog | None = None, **config) -> None:
        # Every change computes a new target unless a test turns assignment batching on, as
        # Kafka's GroupMetadataManagerTest runs most of its cases.
        config.setdefault("assignment_interval_ms", 0)
        self.log = log or MemoryLog()
        self.clock = ManualClock()
        self.catalog = catalog or Catalog()
        self.runtime = CoordinatorRuntime(
            self.log, self.clock, GroupConfig(), OffsetConfig(), ConsumerGroupConfig(**config), TopicImage(self.catalog)
        )
        self.shard = self.runtime.shard_for(GROUP)

    async def hb(self, member_id: str, epoch: int, topics=None, owned=(), **kw) -> HeartbeatResult:
        r = HeartbeatRequest(
            GROUP,
            member_id,
            epoch,
            rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 60_000 if epoch == 0 else -1),
            subscribed_topic_names=topics,
            owned=None if owned is None else list(owned),
            **kw,
        )
        got: list[HeartbeatResult] = []
        result = respond(self.shard, self.shard.consumer.heartbeat(r), got.append, ModernGroupManager.write_failed)
        if result is None:
            await settle()
            result = got[0]
        return result

    @property
    def group(self) -> ConsumerGroup:
        return self.shard.groups[GROUP]  # type: ignore[return-value]  # the test's group is a ConsumerGroup; the shard's map holds every group type

    def reload(self) -> "Harness":
        fresh = Harness(MemoryLog(), self.catalog)
        fresh.log.records = self.log.records
        fresh.runtime.load(self.log.all_records())
        return fresh


def flat(assignment) -> set[int]:
    return {p for ps in (assignment or {}).values() for p in ps}
