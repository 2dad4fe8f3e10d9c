"""Raw-wire streams groups (KIP-1071): StreamsGroupHeartbeat / StreamsGroupDescribe bodies of
either version (version 1 from protocol/streams_*_v1.py, which kio lacks), and topologies as
Kafka Streams sends them."""

from __future__ import annotations

import datetime
from typing import Any

from protocol.messages import codec

SHB, SDESCRIBE = 88, 89
# A streams group assigning at every change and without the initial delay, for tests that
# follow each heartbeat's exact answer (as Kafka runs its request tests).
NO_DELAY = (
    "--group-streams-assignment-interval-ms",
    "0",
    "--group-streams-initial-rebalance-delay-ms",
    "0",
)


def hb_class(name: str | None = None, v: int = 1) -> Any:
    cls = codec(SHB, v).request_type
    if name is None:
        return cls
    import sys

    return getattr(sys.modules[cls.__module__], name)


def topic_info(name: str, partitions: int = 0, configs: dict[str, str] | None = None) -> Any:
    KV = hb_class("KeyValue")
    return hb_class("TopicInfo")(
        name=name,
        partitions=partitions,
        replication_factor=0,
        topic_configs=tuple(KV(key=k, value=v) for k, v in (configs or {}).items()),
    )


def subtopology(
    sid: str,
    sources: tuple[str, ...] = (),
    changelogs: tuple[str, ...] = (),
    sinks: tuple[str, ...] = (),
    repartition_sources: tuple[Any, ...] = (),
    copartition: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (),
    regex: tuple[str, ...] = (),
) -> Any:
    CG = hb_class("CopartitionGroup")
    return hb_class("Subtopology")(
        subtopology_id=sid,
        source_topics=sources,
        source_topic_regex=regex,
        state_changelog_topics=tuple(
            topic_info(c, 0, {"cleanup.policy": "compact"}) if isinstance(c, str) else c for c in changelogs
        ),
        repartition_sink_topics=sinks,
        repartition_source_topics=repartition_sources,
        copartition_groups=tuple(
            CG(source_topics=s, source_topic_regex=(), repartition_source_topics=r) for s, r in copartition
        ),
    )


def topology(*subtopologies: Any, epoch: int = 1) -> Any:
    return hb_class("Topology")(epoch=epoch, subtopologies=subtopologies)


def word_count(app: str = "app", source: str = "words") -> Any:
    """Kafka Streams' word count: subtopology 0 reads the input and writes the repartition
    topic, subtopology 1 reads it and counts into a store with a changelog."""
    rep = f"{app}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
    return topology(
        subtopology("0", sources=(source,), sinks=(rep,)),
        subtopology(
            "1",
            changelogs=(f"{app}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog",),
            repartition_sources=(topic_info(rep, 0, {"cleanup.policy": "delete"}),),
        ),
    )


def tasks(d: dict[str, list[int]] | None) -> Any:
    if d is None:
        return None
    T = hb_class("TaskIds")
    return tuple(T(subtopology_id=s, partitions=tuple(ps)) for s, ps in sorted(d.items()))


def shb(
    group: str,
    member_id: str,
    epoch: int,
    topo: Any = None,
    *,
    active: dict[str, list[int]] | None = None,
    standby: dict[str, list[int]] | None = None,
    warmup: dict[str, list[int]] | None = None,
    owned: bool | None = None,
    process_id: str | None = None,
    rebalance_timeout_ms: int | None = None,
    endpoint: tuple[str, int] | None = None,
    v: int = 1,
    **kw: Any,
) -> Any:
    """StreamsGroupHeartbeat's body. Joining (epoch 0) sends the topology, a process id, the
    rebalance timeout and empty task lists, as Kafka Streams does; `owned` sends the three
    task lists (empty unless given)."""
    if owned is None:
        owned = epoch == 0 or active is not None or standby is not None or warmup is not None
    if epoch == 0:
        process_id = process_id or f"process-{member_id}"
        if rebalance_timeout_ms is None:
            rebalance_timeout_ms = 300_000
    E = hb_class("Endpoint")
    return hb_class(v=v)(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        endpoint_information_epoch=kw.pop("endpoint_information_epoch", 0),
        rebalance_timeout=datetime.timedelta(milliseconds=-1 if rebalance_timeout_ms is None else rebalance_timeout_ms),
        topology=topo,
        active_tasks=tasks(active or {}) if owned else None,
        standby_tasks=tasks(standby or {}) if owned else None,
        warmup_tasks=tasks(warmup or {}) if owned else None,
        process_id=process_id,
        user_endpoint=None if endpoint is None else E(host=endpoint[0], port=endpoint[1]),
        client_tags=kw.pop("client_tags", None),
        task_offsets=kw.pop("task_offsets", None),
        task_end_offsets=kw.pop("task_end_offsets", None),
        **kw,
    )


def active_of(resp: Any) -> dict[str, list[int]] | None:
    if resp.active_tasks is None:
        return None
    return {t.subtopology_id: list(t.partitions) for t in resp.active_tasks}


def describe_body(*groups: str, v: int = 1, include_topology_description: bool = False) -> Any:
    cls = codec(SDESCRIBE, v).request_type
    extra = {"include_topology_description": include_topology_description} if v >= 1 else {}
    return cls(group_ids=groups, include_authorized_operations=False, **extra)
