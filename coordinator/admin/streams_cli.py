"""`kcoord streams-groups`: kafka-streams-groups.sh's verbs for KIP-1071 streams groups.

    kcoord streams-groups list [--state Stable]
    kcoord streams-groups describe GROUP [--members | --state]
    kcoord streams-groups delete GROUP --execute

As Kafka's tool: describe shows, per partition of the topics the group reads (its input and
repartition topics), the committed offset, the log end offset and the lag; --members each
member's process and its active, standby and warm-up tasks; --state the coordinator, the
assignor, the state and the epochs (StreamsGroupDescribe). Delete is DeleteGroups, for a group
without members.
"""

from __future__ import annotations

from typing import Any

import click

from .client import Cluster, Connection
from .common import emit, list_offsets, topic_partitions
from .groups_cli import (
    add_delete_command,
    add_describe_command,
    committed,
    describe_typed,
    epochs_state,
    typed_groups_cli,
)

STREAMS_GROUP_DESCRIBE = 89
LATEST = -1


def describe(cluster: Cluster, group: str) -> tuple[Connection, Any]:
    return describe_typed(cluster, group, STREAMS_GROUP_DESCRIBE, "streams")


def tasks(ids: Any) -> str:
    return "; ".join(f"{t.subtopology_id}:[{','.join(map(str, t.partitions))}]" for t in ids)


streams_groups = typed_groups_cli(
    "streams-groups",
    "streams",
    "List, describe and delete streams groups (KIP-1071, Kafka Streams' group.protocol=streams).",
)


@add_describe_command(
    streams_groups,
    describe,
    "the group's state, assignor, epochs and coordinator",
    {"ASSIGNOR": lambda d: "sticky", **epochs_state("TARGET-ASSIGNMENT-EPOCH")},
)
def streams_groups_describe(
    ctx: click.Context, cluster: Cluster, conn: Connection, d: Any, group: str, view: str | None
) -> None:
    """Per partition the group reads: committed offset, log end offset and lag
    (kafka-streams-groups --describe)."""
    if view == "members":
        emit(
            ctx,
            ["GROUP", "MEMBER", "MEMBER-EPOCH", "PROCESS", "CLIENT-ID", "ACTIVE", "STANDBY", "WARMUP"],
            [
                [
                    group,
                    m.member_id,
                    m.member_epoch,
                    m.process_id,
                    m.client_id,
                    tasks(m.assignment.active_tasks),
                    tasks(m.assignment.standby_tasks),
                    tasks(m.assignment.warmup_tasks),
                ]
                for m in d.members
            ],
        )
        return
    offsets = committed(conn, group)
    read: set[str] = set()
    if d.topology is not None and d.topology.subtopologies is not None:
        for s in d.topology.subtopologies:
            read.update(s.source_topics)
            read.update(t.name for t in s.repartition_source_topics)
    parts = topic_partitions(cluster, sorted(read | {t for t, _ in offsets})) if read or offsets else {}
    partitions = sorted({(t, p) for t, ps in parts.items() if t in read for p in ps} | set(offsets))
    ends = list_offsets(cluster, {tp: LATEST for tp in partitions}, parts) if partitions else {}
    rows = []
    for tp in partitions:
        current, end = offsets.get(tp), ends.get(tp)
        rows.append(
            [group, tp[0], tp[1], current, end, end - current if current is not None and end is not None else None]
        )
    emit(ctx, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"], rows)


add_delete_command(
    streams_groups, "streams", "their committed offsets", lambda cluster, group: describe(cluster, group)[1].members
)
