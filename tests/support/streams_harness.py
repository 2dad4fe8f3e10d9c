"""A streams group (KIP-1071) driven in process through a GroupShard, with a manual clock and a
topic catalog the coordinator creates internal topics in."""

from __future__ import annotations

from typing import Any

from coordinator.groups.classic.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.modern.modern_manager import ApiError
from coordinator.groups.runtime import CoordinatorRuntime
from coordinator.groups.shard import OffsetConfig
from coordinator.groups.streams.streams_group import StreamsGroup, TasksTuple
from coordinator.groups.streams.streams_manager import (
    StreamsGroupConfig,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResult,
    validate_request,
)
from coordinator.groups.topic_image import TopicImage
from protocol import streams_records as R
from tests.support.consumer_shard import Catalog
from tests.support.group_harness import MemoryLog, respond, settle

GROUP = "app"


class StreamsCatalog(Catalog):
    """A catalog the coordinator can create topics in (the repartition and changelog topics)."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[tuple[str, int, dict[str, str]]] = []

    async def create(self, name: str, partitions: int, replication_factor: int = -1, configs: Any = None) -> Any:
        self.created.append((name, partitions, dict(configs or {})))
        return self.add(name, partitions)


def word_count(app: str = GROUP, source: str = "words", epoch: int = 1) -> R.StreamsGroupTopologyValue:
    """Kafka Streams' word count: 0 reads the input and writes the repartition topic; 1 reads
    it and counts into a store whose changelog the coordinator creates."""
    rep = f"{app}-count-repartition"
    return R.StreamsGroupTopologyValue(
        epoch,
        (
            R.Subtopology("0", (source,), repartition_sink_topics=(rep,)),
            R.Subtopology(
                "1",
                state_changelog_topics=(R.TopicInfo(f"{app}-count-changelog", 0, 0, (("cleanup.policy", "compact"),)),),
                repartition_source_topics=(R.TopicInfo(rep, 0, 0, (("cleanup.policy", "delete"),)),),
            ),
        ),
    )


def tasks(active: dict[str, list[int]] | None = None, standby=None, warmup=None) -> TasksTuple:
    def f(d):
        return {s: frozenset(ps) for s, ps in (d or {}).items() if ps}

    return TasksTuple(f(active), f(standby), f(warmup))


def flat(t: TasksTuple | None, kind: str = "active") -> set[tuple[str, int]]:
    if t is None:
        return set()
    return {(s, p) for s, ps in getattr(t, kind).items() for p in ps}


class Harness:
    def __init__(self, log: MemoryLog | None = None, catalog: StreamsCatalog | None = None, **config: Any) -> None:
        config.setdefault("assignment_interval_ms", 0)
        config.setdefault("initial_rebalance_delay_ms", 0)
        self.config = config
        self.log = log or MemoryLog()
        self.clock = ManualClock()
        self.catalog = catalog or StreamsCatalog()
        self.runtime = CoordinatorRuntime(
            self.log,
            self.clock,
            GroupConfig(),
            OffsetConfig(),
            image=TopicImage(self.catalog),
            streams=StreamsGroupConfig(**config),
        )
        self.shard = self.runtime.shard_for(GROUP)

    async def hb(
        self,
        member_id: str,
        epoch: int,
        topology: R.StreamsGroupTopologyValue | None = None,
        owned: TasksTuple | None = None,
        **kw: Any,
    ) -> StreamsHeartbeatResult:
        if epoch == 0:
            kw.setdefault("rebalance_timeout_ms", 60_000)
            kw.setdefault("process_id", f"p-{member_id}")
            if topology is None:
                topology = word_count()
            if owned is None:
                owned = TasksTuple()
        given = (owned is not None,) * 3
        r = StreamsHeartbeatRequest(
            kw.pop("group", GROUP), member_id, epoch, topology=topology, active=owned, owned_given=given, **kw
        )
        try:  # checked first, as the wire layer does (streams_api.py)
            validate_request(r)
        except ApiError as e:
            return StreamsHeartbeatResult(e.code, str(e), r.member_id, r.member_epoch)
        got: list[StreamsHeartbeatResult] = []
        result = respond(
            self.shard, self.shard.streams.heartbeat(r), got.append, self.shard.streams.heartbeat_failed(r.member_id)
        )
        if result is None:
            await settle()
            result = got[0]
        await settle()  # (internal topics the heartbeat asked for are created)
        return result

    @property
    def group(self) -> StreamsGroup:
        return self.shard.groups[GROUP]  # type: ignore[return-value]  # the test's group is a StreamsGroup

    def reload(self) -> "Harness":
        fresh = Harness(MemoryLog(), self.catalog, **self.config)
        fresh.log.records = self.log.records
        fresh.runtime.load(self.log.all_records())
        return fresh
