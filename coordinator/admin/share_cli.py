"""`kcoord share-groups`: kafka-share-groups.sh's verbs for KIP-932 share groups.

    kcoord share-groups list [--state Stable]
    kcoord share-groups describe GROUP [--members | --state]
    kcoord share-groups reset-offsets GROUP --topic orders --to-earliest --execute
    kcoord share-groups delete GROUP --execute

As Kafka's tool: describe shows each share-partition's start offset and lag
(DescribeShareGroupOffsets); offsets are reset only while the group has no members
(AlterShareGroupOffsets), as a dry run unless --execute; delete is DeleteGroups.
"""

from __future__ import annotations

from typing import Any

import click

from .common import (
    Failure,
    cluster_of,
    dry_run_note,
    emit,
    error_name,
    execute_option,
    parse_topics,
)
from .client import Cluster, Connection
from .groups_cli import (
    add_delete_command,
    add_describe_command,
    describe_typed,
    epochs_state,
    one_reset_target,
    reset_target_options,
    reset_targets,
    typed_groups_cli,
)

SHARE_GROUP_DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS = 77, 90, 91


def describe(cluster: Cluster, group: str) -> tuple[Connection, Any]:
    return describe_typed(cluster, group, SHARE_GROUP_DESCRIBE, "share")


share_groups = typed_groups_cli("share-groups", "share", "List, describe, reset and delete share groups (KIP-932).")


@add_describe_command(
    share_groups, describe, "the group's state, epochs and coordinator", epochs_state("ASSIGNMENT-EPOCH")
)
def share_groups_describe(
    ctx: click.Context, cluster: Cluster, conn: Connection, d: Any, group: str, view: str | None
) -> None:
    """Per share-partition: its start offset and lag (kafka-share-groups --describe)."""
    if view == "members":
        emit(
            ctx,
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
            [
                [
                    group,
                    m.member_id,
                    m.client_host,
                    m.client_id,
                    sum(len(tp.partitions) for tp in m.assignment.topic_partitions),
                    ",".join(
                        f"{tp.topic_name}:{','.join(map(str, tp.partitions))}" for tp in m.assignment.topic_partitions
                    )
                    or None,
                ]
                for m in d.members
            ],
        )
        return
    body = conn.nested(DESCRIBE_OFFSETS, "DescribeShareGroupOffsetsRequestGroup", group_id=group, topics=None)
    g = conn.request(DESCRIBE_OFFSETS, groups=(body,)).groups[0]
    if g.error_code:
        raise Failure(f"offsets of share group {group!r}: {g.error_message or error_name(g.error_code)}")
    rows = [
        [
            group,
            t.topic_name,
            p.partition_index,
            None if p.start_offset < 0 else p.start_offset,
            None if getattr(p, "lag", -1) < 0 else p.lag,
        ]
        for t in g.topics
        for p in t.partitions
    ]
    emit(ctx, ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], sorted(rows, key=lambda r: (r[1], r[2])))


@share_groups.command("reset-offsets")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, help="TOPIC or TOPIC:P[,P...] (repeatable)")
@reset_target_options(shift_by=False)
@execute_option("move the share-partitions' start offsets")
@click.pass_context
def share_groups_reset(
    ctx: click.Context,
    group: str,
    topics: tuple[str, ...],
    to: str | None,
    to_offset: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    execute: bool,
) -> None:
    """Move share-partition start offsets, as kafka-share-groups --reset-offsets (no members)."""
    one_reset_target(to, to_offset=to_offset, to_datetime=to_datetime, by_duration=by_duration)
    cluster = cluster_of(ctx)
    conn = cluster.coordinator(group)
    d = conn.request(SHARE_GROUP_DESCRIBE, group_ids=(group,), include_authorized_operations=False).groups[0]
    if d.error_code == 0 and d.members:
        raise Failure(
            f"offsets can only be reset while share group {group!r} has no members, but it has {len(d.members)}"
        )
    if d.error_code and "not a share group" in (d.error_message or ""):
        raise Failure(f"{d.error_message}")
    partitions, leaders = parse_topics(cluster, topics)
    targets = reset_targets(
        cluster, partitions, leaders, to=to, to_offset=to_offset, to_datetime=to_datetime, by_duration=by_duration
    )
    chosen_targets = {tp: targets[tp] for tp in sorted(partitions)}
    emit(
        ctx,
        ["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"],
        [[group, t, p, o] for (t, p), o in chosen_targets.items()],
    )
    if not execute:
        dry_run_note("changed")
        return
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in chosen_targets.items():
        by_topic.setdefault(topic, []).append(
            conn.nested(
                ALTER_OFFSETS, "AlterShareGroupOffsetsRequestPartition", partition_index=partition, start_offset=offset
            )
        )
    r = conn.request(
        ALTER_OFFSETS,
        group_id=group,
        topics=tuple(
            conn.nested(ALTER_OFFSETS, "AlterShareGroupOffsetsRequestTopic", topic_name=t, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )
    if r.error_code:
        raise Failure(f"share group {group!r}: {r.error_message or error_name(r.error_code)}")
    failures = [
        f"{t.topic_name}-{p.partition_index}: {error_name(p.error_code)}"
        for t in r.responses
        for p in t.partitions
        if p.error_code
    ]
    if failures:
        raise Failure("reset failed for " + "; ".join(failures))


add_delete_command(
    share_groups, "share", "their share-partitions' state", lambda cluster, group: describe(cluster, group)[1].members
)
