"""A streams group's topology and its validation against the topics that exist (Kafka 4.4's
StreamsTopology, InternalTopicManager, RepartitionTopics, CopartitionedTopicsEnforcer and
ChangelogTopics, and the request checks of GroupCoordinatorService).

The topology is what the first member sends (StreamsGroupHeartbeat at epoch 0): its
subtopologies, each with its source topics, the repartition topics it writes to and reads
from, its state changelog topics and its copartition groups. It is stored as Kafka's
StreamsGroupTopology record and compared as one. `configure_topics` decides the partition
count of every internal topic (a repartition topic as the largest source of the
subtopologies writing to it, or its copartition group's; a changelog topic as its
subtopology's task count), and says what is wrong, with Kafka's status codes, or which
internal topics must be created first. The group assigns tasks only once it is ready.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kio.schema.errors import ErrorCode as E

from protocol.streams_records import StreamsGroupTopologyValue, Subtopology, TopicInfo

# StreamsGroupHeartbeatResponse.Status codes
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5

# Partition count of a topic that exists (None: it does not).
PartitionCount = Callable[[str], int | None]


class TopologyError(Exception):
    """What Kafka raises while configuring the topics: a Status (code, detail) for the
    heartbeat, or (code None) STREAMS_INVALID_TOPOLOGY."""

    def __init__(self, status: int | None, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class RequestError(Exception):
    """A heartbeat Kafka refuses before touching the group: its error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class InternalTopic:
    """A repartition or changelog topic as the coordinator creates it (CreatableTopic)."""

    name: str
    partitions: int
    replication_factor: int  # -1: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ConfiguredSubtopology:
    number_of_tasks: int
    source_topics: tuple[str, ...]
    repartition_source_topics: dict[str, int]  # name -> partitions
    repartition_sink_topics: tuple[str, ...]
    state_changelog_topics: dict[str, int]  # name -> partitions

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)


@dataclass
class ConfiguredTopology:
    """Kafka's ConfiguredTopology: the subtopologies with their task counts (None if the
    topics are not in a valid configuration), the internal topics to create, and the status
    the heartbeat reports (None: ready)."""

    topology_epoch: int
    subtopologies: dict[str, ConfiguredSubtopology] | None
    to_create: dict[str, InternalTopic] = field(default_factory=dict)
    status: tuple[int, str] | None = None

    def is_ready(self) -> bool:
        return self.status is None and self.subtopologies is not None


# ---------------------------------------------------------------- the request's topology


def check_request_topology(topology: StreamsGroupTopologyValue) -> None:
    """GroupCoordinatorService.throwIfInvalidTopology and throwIfStreamsGroupHeartbeatRequest
    IsUsingUnsupportedFeatures, plus what Kafka's generated code and StreamsTopology would
    fail on (an index of a copartition group outside its subtopology's lists, a repeated
    subtopology id): STREAMS_INVALID_TOPOLOGY or INVALID_REQUEST, nothing changed."""
    seen: set[str] = set()
    for s in topology.subtopologies:
        if s.subtopology_id in seen:
            raise RequestError(E.streams_invalid_topology, f"Duplicate subtopology id {s.subtopology_id}.")
        seen.add(s.subtopology_id)
        for t in s.state_changelog_topics:
            if t.partitions != 0:
                raise RequestError(
                    E.streams_invalid_topology,
                    f"Changelog topic {t.name} must have an undefined partition count, but it is set to {t.partitions}.",
                )
        for g in s.copartition_groups:
            if any(not 0 <= i < len(s.source_topics) for i in g.source_topics) or any(
                not 0 <= i < len(s.repartition_source_topics) for i in g.repartition_source_topics
            ):
                raise RequestError(
                    E.streams_invalid_topology,
                    f"Copartition group of subtopology {s.subtopology_id} refers to a topic it does not have.",
                )
    for s in topology.subtopologies:
        if s.source_topic_regex:
            raise RequestError(E.invalid_request, "Regular expressions for source topics are not supported yet.")


def required_topics(topology: StreamsGroupTopologyValue) -> list[str]:
    """Every topic the topology reads or writes, source and internal (StreamsTopology.requiredTopics)."""
    out: dict[str, None] = {}
    for s in topology.subtopologies:
        out.update(dict.fromkeys(s.source_topics))
        out.update(dict.fromkeys(t.name for t in s.repartition_source_topics))
        out.update(dict.fromkeys(t.name for t in s.state_changelog_topics))
    return list(out)


def is_stateful(s: Subtopology) -> bool:
    return bool(s.state_changelog_topics)


# ---------------------------------------------------------------- configuring the topics


def _summarize(topics: list[str] | set[str]) -> str:
    """InternalTopicManager.summarizeTopics: up to three names, then how many more."""
    names = list(topics)
    if not names:
        return "<none>"
    text = ", ".join(names[:3])
    return text + (f" and {len(names) - 3} additional topics" if len(names) > 3 else "")


def configure_topics(topology: StreamsGroupTopologyValue, partitions_of: PartitionCount) -> ConfiguredTopology:
    """InternalTopicManager.configureTopics: the topology against the topics that exist."""
    try:
        internal = {t.name for s in topology.subtopologies for t in s.repartition_source_topics}
        missing = sorted(
            {
                t
                for s in topology.subtopologies
                for t in s.source_topics
                if t not in internal and partitions_of(t) is None
            }
        )
        if missing:
            raise TopologyError(MISSING_SOURCE_TOPICS, f"Source topics {_summarize(missing)} are missing.")
        decided = _decide_partition_counts(topology, partitions_of)

        def count(topic: str) -> int:
            n = partitions_of(topic)
            return n if n is not None else decided[topic]

        configured: dict[str, ConfiguredSubtopology] = {}
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id):
            sources = [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
            if not sources:
                raise TopologyError(None, f"Subtopology {s.subtopology_id} does not contain any source topics.")
            tasks = max(count(t) for t in sources)
            configured[s.subtopology_id] = ConfiguredSubtopology(
                tasks,
                tuple(s.source_topics),
                {t.name: t.partitions or decided[t.name] for t in s.repartition_source_topics},
                tuple(s.repartition_sink_topics),
                {t.name: decided.get(t.name, tasks) for t in s.state_changelog_topics if t.name not in s.source_topics},
            )
        to_create = _missing_internal_topics(topology, configured, partitions_of)
    except TopologyError as e:
        if e.status is None:
            raise
        return ConfiguredTopology(topology.epoch, None, {}, (e.status, e.detail))
    if to_create:
        status = (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {_summarize(list(to_create))}")
        return ConfiguredTopology(topology.epoch, configured, to_create, status)
    return ConfiguredTopology(topology.epoch, configured)


def _decide_partition_counts(topology: StreamsGroupTopologyValue, partitions_of: PartitionCount) -> dict[str, int]:
    """RepartitionTopics, then CopartitionedTopicsEnforcer, then ChangelogTopics: the partition
    count of every internal topic that does not fix its own."""
    decided: dict[str, int] = {}
    repartition: dict[str, TopicInfo] = {t.name: t for s in topology.subtopologies for t in s.repartition_source_topics}
    for name, t in repartition.items():
        if t.partitions:
            decided[name] = t.partitions

    def count(topic: str) -> int | None:
        n = partitions_of(topic)
        return n if n is not None else decided.get(topic)

    # A repartition topic without a fixed count gets the largest source count of the
    # subtopologies that write to it, repeated until every one is known.
    unknown = [name for name, t in repartition.items() if not t.partitions]
    while unknown:
        progress = False
        for name in list(unknown):
            writers = [s for s in topology.subtopologies if name in s.repartition_sink_topics]
            if not writers:
                raise TopologyError(
                    None,
                    "Failed to compute number of partitions for all repartition topics, because a repartition "
                    "source topic is never used as a sink topic.",
                )
            candidates = [
                n
                for s in writers
                for n in (count(x) for x in (*s.source_topics, *(r.name for r in s.repartition_source_topics)))
                if n is not None
            ]
            if candidates:
                decided[name] = max(candidates)
                unknown.remove(name)
                progress = True
        if not progress:
            raise TopologyError(
                None,
                "Failed to compute number of partitions for all repartition topics. There may be loops in the "
                "topology that cannot be resolved.",
            )
    # Copartition groups: their topics must have one partition count; repartition topics
    # without a fixed count take it.
    fixed = {name for name, t in repartition.items() if t.partitions}
    for s in topology.subtopologies:
        for g in s.copartition_groups:
            group = [s.source_topics[i] for i in g.source_topics] + [
                s.repartition_source_topics[i].name for i in g.repartition_source_topics
            ]
            if not group:
                continue
            flexible = [t for t in group if t in repartition and t not in fixed]
            external = {name: count(name) or 0 for name in group if name not in repartition}
            if external:
                counts = set(external.values())
                if len(counts) > 1:
                    shown = ", ".join(f"{t}={n}" for t, n in sorted(external.items()))
                    raise TopologyError(INCORRECTLY_PARTITIONED_TOPICS, f"Topics not co-partitioned: [{{{shown}}}]")
                target = counts.pop()
            else:
                pinned = {t: decided[t] for t in group if t in fixed}
                if len(set(pinned.values())) > 1:
                    shown = ", ".join(f"{t}={n}" for t, n in sorted(pinned.items()))
                    raise TopologyError(
                        INCORRECTLY_PARTITIONED_TOPICS,
                        f"Following topics do not have the same number of partitions: [{{{shown}}}]",
                    )
                target = next(iter(pinned.values())) if pinned else max(decided[t] for t in group)
            for name in flexible:
                decided[name] = target
            for name in group:
                if name in repartition and decided[name] != target:
                    raise TopologyError(
                        INCORRECTLY_PARTITIONED_TOPICS,
                        f"Number of partitions [{decided[name]}] of repartition topic [{name}] doesn't match number "
                        f"of partitions [{target}] of the source topic.",
                    )
    return decided


def _missing_internal_topics(
    topology: StreamsGroupTopologyValue, configured: dict[str, ConfiguredSubtopology], partitions_of: PartitionCount
) -> dict[str, InternalTopic]:
    wanted: dict[str, InternalTopic] = {}
    infos = {
        t.name: t for s in topology.subtopologies for t in (*s.repartition_source_topics, *s.state_changelog_topics)
    }
    for c in configured.values():
        for name, n in (*c.repartition_source_topics.items(), *c.state_changelog_topics.items()):
            info = infos[name]
            wanted[name] = InternalTopic(
                name, n, info.replication_factor or -1, tuple((k, v) for k, v in info.topic_configs)
            )
    for name in required_topics(topology):
        existing = partitions_of(name)
        if existing is None:
            continue
        expected = wanted.pop(name, None)
        if expected is not None and existing != expected.partitions:
            raise TopologyError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {name} has different number of partitions: expected {expected.partitions}, "
                f"found {existing}",
            )
    return dict(sorted(wanted.items()))
