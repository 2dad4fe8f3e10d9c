"""`kcoord topics`: kafka-topics.sh's verbs (list, describe, create, delete)."""

from __future__ import annotations

from typing import cast

import datetime

import click
from kio.schema.errors import ErrorCode

from .client import BrokerError, Cluster
from .common import (
    BROKER_RESOURCE,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    Failure,
    cluster_of,
    dry_run_note,
    emit,
    error_name,
    execute_option,
    topic_partitions,
)


# topics ---------------------------------------------------------------------------------------


@click.group()
def topics() -> None:
    """List, create, describe and delete topics."""


@topics.command("list")
@click.option("--internal", is_flag=True, help="also internal topics (__consumer_offsets)")
@click.pass_context
def topics_list(ctx: click.Context, internal: bool) -> None:
    """Topics and their partition counts (kafka-topics --list)."""
    r = cluster_of(ctx).refresh(None)
    emit(
        ctx,
        ["TOPIC", "PARTITIONS"],
        sorted([t.name, len(t.partitions)] for t in r.topics if not t.error_code and (internal or not t.is_internal)),
    )


@topics.command("describe")
@click.argument("names", nargs=-1, required=True)
@click.pass_context
def topics_describe(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Per partition: leader, replicas, ISR and offline replicas (kafka-topics --describe)."""
    cluster = cluster_of(ctx)
    r = cluster.refresh(list(names))
    rows, offline = [], []
    for t in r.topics:
        if t.error_code:
            raise Failure(f"topic {t.name!r}: {error_name(t.error_code)}")
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            rows.append(
                [
                    t.name,
                    p.partition_index,
                    p.leader_id,
                    ",".join(map(str, p.replica_nodes)),
                    ",".join(map(str, p.isr_nodes)),
                    ",".join(map(str, p.offline_replicas)),
                ]
            )
            if p.leader_id in p.offline_replicas:  # (a follower out of the ISR is listed too: not this)
                offline.append((t.name, p.partition_index, p.leader_id))
    emit(ctx, ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"], rows)
    for topic, partition, node in offline:
        click.echo(
            f"{topic}-{partition} is offline on node {node}: its log is damaged (the server's log names the "
            f"bytes). To repair: stop that server, run `python -m coordinator.log repair "
            f"{log_dir_of(cluster, node)}/{topic}-{partition}` (it keeps a copy), start it again",
            err=True,
        )


def log_dir_of(cluster: Cluster, node: int) -> str:
    """A broker's data dir, from its static config log.dirs (Kafka's name for it)."""
    try:
        conn = cluster.node(node)
        r = conn.request(
            DESCRIBE_CONFIGS,
            include_synonyms=False,
            include_documentation=False,
            resources=(
                conn.nested(
                    DESCRIBE_CONFIGS,
                    "DescribeConfigsResource",
                    resource_type=BROKER_RESOURCE,
                    resource_name=str(node),
                    configuration_keys=("log.dirs",),
                ),
            ),
        )
        for c in r.results[0].configs:
            if c.name == "log.dirs" and c.value:
                return cast(str, c.value.split(",")[0])
    except BrokerError:
        pass
    return "<data dir>"


@topics.command("create")
@click.argument("name")
@click.option("--partitions", type=click.IntRange(min=1), default=None, help="default: the broker's num.partitions")
@click.option("--replication-factor", type=int, default=-1, help="default: the broker's")
@click.option("--config", "configs", multiple=True, help="KEY=VALUE (repeatable)")
@click.option("--if-not-exists", is_flag=True, help="a topic that exists already is not a failure (kafka-topics')")
@click.pass_context
def topics_create(
    ctx: click.Context,
    name: str,
    partitions: int | None,
    replication_factor: int,
    configs: tuple[str, ...],
    if_not_exists: bool,
) -> None:
    """Create a topic (kafka-topics --create); a name taken is a failure unless --if-not-exists."""
    pairs = []
    for c in configs:
        key, sep, value = c.partition("=")
        if not sep:
            raise click.BadParameter(f"{c!r}: expected KEY=VALUE", param_hint="--config")
        pairs.append((key, value))
    conn = cluster_of(ctx).any_node()
    r = conn.request(
        CREATE_TOPICS,
        timeout=datetime.timedelta(seconds=30),
        validate_only=False,
        topics=(
            conn.nested(
                CREATE_TOPICS,
                "CreatableTopic",
                name=name,
                num_partitions=partitions or -1,
                replication_factor=replication_factor,
                assignments=(),
                configs=tuple(conn.nested(CREATE_TOPICS, "CreatableTopicConfig", name=k, value=v) for k, v in pairs),
            ),
        ),
    )
    result = r.topics[0]
    if if_not_exists and result.error_code == ErrorCode.topic_already_exists:
        click.echo(f"topic {name} exists already", err=True)
        return
    if result.error_code:
        raise Failure(
            f"topic {name!r}: {error_name(result.error_code)}"
            + (f": {result.error_message}" if getattr(result, "error_message", None) else "")
        )
    click.echo(f"created topic {name}", err=True)


@topics.command("delete")
@click.argument("names", nargs=-1, required=True)
@execute_option("delete the topics and their records")
@click.pass_context
def topics_delete(ctx: click.Context, names: tuple[str, ...], execute: bool) -> None:
    """Delete topics and their records; without --execute, show what would be deleted."""
    if not execute:
        found = topic_partitions(cluster_of(ctx), list(names))  # an unknown topic fails here
        click.echo(f"would delete {', '.join(f'{t} ({len(found[t])} partitions)' for t in names)}", err=True)
        dry_run_note("deleted")
        return
    conn = cluster_of(ctx).any_node()
    r = conn.request(DELETE_TOPICS, topic_names=names, timeout=datetime.timedelta(seconds=30))
    failed = [f"{t.name}: {error_name(t.error_code)}" for t in r.responses if t.error_code]
    if failed:
        raise Failure("; ".join(failed))
    click.echo(f"deleted {', '.join(names)}", err=True)
