"""`kcoord groups` and `kcoord offsets`: kafka-consumer-groups.sh's verbs for consumer groups
and their committed offsets.

    kcoord groups list [--state Stable]
    kcoord groups describe GROUP [--members | --state]
    kcoord groups status GROUP
    kcoord offsets reset GROUP --topic orders --to-earliest --execute
    kcoord offsets export GROUP --file offsets.csv

As Kafka's tool: offsets are reset or imported only while the group has no active members,
and every command that changes or deletes something is a dry run unless --execute.
"""

from __future__ import annotations

import csv
import time
from typing import Any, Callable

import click
from kio.schema.errors import ErrorCode

from .client import Cluster, Connection
from .common import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    EARLIEST,
    Failure,
    INACTIVE,
    LATEST,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    cluster_of,
    dry_run_note,
    duration_ms,
    emit,
    error_name,
    execute_option,
    list_offsets,
    parse_topics,
    timestamp_ms,
    topic_partitions,
)


def describe_group(cluster: Cluster, group: str) -> tuple[Connection, Any]:
    conn = cluster.coordinator(group)
    r = conn.request(DESCRIBE_GROUPS, groups=(group,), include_authorized_operations=False)
    described = r.groups[0]
    if described.error_code:
        raise Failure(f"group {group!r}: {error_name(described.error_code)}")
    return conn, described


def describe_typed(cluster: Cluster, group: str, api_key: int, kind: str) -> tuple[Connection, Any]:
    """(coordinator, the group as {Share,Streams}GroupDescribe (`api_key`) answers it); an
    error, as for a group of another type, is a failure."""
    conn = cluster.coordinator(group)
    d = conn.request(api_key, group_ids=(group,), include_authorized_operations=False).groups[0]
    if d.error_code:
        raise Failure(f"{kind} group {group!r}: {d.error_message or error_name(d.error_code)}")
    return conn, d


def committed(conn: Connection, group: str) -> dict[tuple[str, int], int]:
    r = conn.request(OFFSET_FETCH, group_id=group, topics=None, require_stable=False)
    if getattr(r, "error_code", 0):
        raise Failure(f"offsets of group {group!r}: {error_name(r.error_code)}")
    return {
        (t.name, p.partition_index): p.committed_offset
        for t in r.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


def members_count(described: Any) -> int:
    return len(described.members)


def epochs_state(assignment_epoch: str) -> dict[str, Callable[[Any], Any]]:
    """The --state columns of a share or streams group (its {Share,Streams}GroupDescribe): its
    state, epochs (the target's under the name given) and member count."""
    return {
        "STATE": lambda d: d.group_state,
        "GROUP-EPOCH": lambda d: d.group_epoch,
        assignment_epoch: lambda d: d.assignment_epoch,
        "#MEMBERS": members_count,
    }


def typed_groups_cli(name: str, kind: str, help: str) -> click.Group:
    """The commands of one group type (kafka-share-groups, kafka-streams-groups), with its list."""
    cli = click.Group(name, help=help)
    add_list_command(cli, kind, f"{kind.capitalize()} groups with their state (kafka-{kind}-groups --list).")
    return cli


def owners(described: Any) -> dict[tuple[str, int], Any]:
    from ..metrics.lag import assigned_partitions

    if described.protocol_type != "consumer":
        return {}
    return {tp: m for m in described.members for tp in assigned_partitions(m.member_assignment)}


# what kafka-consumer-groups and kafka-share-groups share ---------------------------------------


# A describe command's default and --members views: body(ctx, cluster, coordinator, the
# described group, group id, view).
DescribeBody = Callable[[click.Context, Cluster, Connection, Any, str, str | None], None]


def add_describe_command(
    cli: click.Group,
    describe: Callable[[Cluster, str], tuple[Connection, Any]],
    state_help: str,
    state: dict[str, Callable[[Any], Any]],
) -> Callable[[DescribeBody], DescribeBody]:
    """Give a group type's commands its `describe` GROUP, with its views: per partition (the
    default), --members (a row per member), both answered by the decorated body, and --state
    (`state_help`): the group, its coordinator and `state` (column -> its value in the
    described group, as `describe(cluster, group)` gives it)."""

    def decorate(body: DescribeBody) -> DescribeBody:
        def describe_command(ctx: click.Context, group: str, view: str | None) -> None:
            cluster = cluster_of(ctx)
            conn, d = describe(cluster, group)
            if view == "state":
                emit(ctx, ["GROUP", "COORDINATOR", *state], [[group, conn.address, *(f(d) for f in state.values())]])
                return
            body(ctx, cluster, conn, d, group, view)

        describe_command.__doc__ = body.__doc__  # (the command's help)
        f = click.pass_context(describe_command)
        f = click.option("--state", "view", flag_value="state", help=state_help)(f)
        f = click.option("--members", "view", flag_value="members", help="one row per member")(f)
        cli.command("describe")(click.argument("group")(f))
        return body

    return decorate


def delete_groups(
    ctx: click.Context, group_ids: tuple[str, ...], execute: bool, verdict: Callable[[Cluster, str], tuple[int, str]]
) -> None:
    """DeleteGroups for each group with --execute; without, a dry run: `verdict(cluster, group)`
    is (the error the broker would answer, how to say it)."""
    cluster = cluster_of(ctx)
    rows, failed = [], []
    for group in group_ids:
        if execute:
            code = cluster.coordinator(group).request(DELETE_GROUPS, groups_names=(group,)).results[0].error_code
            result = "deleted" if not code else error_name(code)
        else:
            code, result = verdict(cluster, group)
        rows.append([group, result])
        if code:
            failed.append(f"{group}: {result}")
    emit(ctx, ["GROUP", "RESULT"], rows)
    if failed:
        raise Failure("; ".join(failed))
    if not execute:
        dry_run_note("deleted")


def add_delete_command(cli: click.Group, kind: str, erased: str, members: Callable[[Cluster, str], Any]) -> None:
    """Give a group type's commands its `delete`, refused for a group with members (a dry run
    reads them with `members(cluster, group)`)."""

    @cli.command("delete", help=f"Delete {kind} groups that have no members (Kafka refuses others: NON_EMPTY_GROUP).")
    @click.argument("group_ids", nargs=-1, required=True)
    @execute_option(f"delete the {kind} groups and {erased}")
    @click.pass_context
    def delete_of_type(ctx: click.Context, group_ids: tuple[str, ...], execute: bool) -> None:
        def verdict(cluster: Cluster, group: str) -> tuple[int, str]:
            n = len(members(cluster, group))
            code = 0 if not n else ErrorCode.non_empty_group
            return code, "would be deleted" if not code else f"{error_name(code)} (the group has {n} members)"

        delete_groups(ctx, group_ids, execute, verdict)


def one_reset_target(to: str | None, **others: Any) -> None:
    """kafka-*-groups --reset-offsets takes exactly one target: --to-earliest or --to-latest
    (`to`), or one of `others` (option name -> its value)."""
    if (to is not None) + sum(v is not None for v in others.values()) != 1:
        names = ", ".join(["--to-earliest", "--to-latest", *("--" + name.replace("_", "-") for name in others)])
        raise click.UsageError(f"give exactly one of {names}")


def reset_target_options(shift_by: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The targets kafka-*-groups --reset-offsets offers, one_reset_target checking that one is
    given: --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by (a consumer
    group's: from its committed offsets) and --by-duration."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option("--by-duration", help="the first offset at or after now minus this (e.g. PT1H)")(f)
        if shift_by:
            f = click.option("--shift-by", type=int, help="the committed offset plus N (N < 0: back)")(f)
        f = click.option("--to-datetime", help="the first offset at or after this time (ISO 8601)")(f)
        f = click.option("--to-offset", type=int, help="this offset (kept within each partition's range)")(f)
        f = click.option("--to-latest", "to", flag_value="latest", help="each partition's log end offset")(f)
        return click.option("--to-earliest", "to", flag_value="earliest", help="each partition's log start offset")(f)

    return decorate


def reset_targets(
    cluster: Cluster,
    partitions: set[tuple[str, int]],
    leaders: Any,
    *,
    to: str | None,
    to_offset: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    shift_by: int | None = None,
    current: dict[tuple[str, int], int] | None = None,
) -> dict[tuple[str, int], int]:
    """The new offset of each partition, as kafka-*-groups --reset-offsets: the earliest, the
    latest, an offset or the `current` one shifted (the latest where there is none) kept within
    the partition's range, or the first offset at or after a time."""
    earliest = list_offsets(cluster, {tp: EARLIEST for tp in partitions}, leaders)
    latest = list_offsets(cluster, {tp: LATEST for tp in partitions}, leaders)

    def clamp(tp: tuple[str, int], offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    if to == "earliest":
        targets = earliest
    elif to == "latest":
        targets = latest
    elif to_offset is not None:
        targets = {tp: clamp(tp, to_offset) for tp in partitions}
    elif shift_by is not None:
        targets = {tp: clamp(tp, (current or {}).get(tp, latest[tp]) + shift_by) for tp in partitions}
    else:
        at = timestamp_ms(to_datetime) if to_datetime else int(time.time() * 1000) - duration_ms(by_duration or "")
        targets = list_offsets(cluster, {tp: at for tp in partitions}, leaders)
    return {tp: targets[tp] for tp in partitions}


# groups ---------------------------------------------------------------------------------------


@click.group()
def groups() -> None:
    """List, describe and delete consumer groups."""


@groups.command("list")
@click.option("--state", "states", multiple=True, help="only groups in this state (repeatable)")
@click.pass_context
def groups_list(ctx: click.Context, states: tuple[str, ...]) -> None:
    """Every group of the cluster, of any type, with its state (kafka-groups --list)."""
    rows = [[g.group_id, state, g.protocol_type] for g, state in listed_groups(ctx, states)]
    emit(ctx, ["GROUP", "STATE", "PROTOCOL-TYPE"], sorted(rows))


def add_list_command(cli: click.Group, protocol_type: str, help: str) -> None:
    """Give a group type's commands (share-groups, streams-groups) its `list`: the groups of
    that protocol type, with their state."""

    @cli.command("list", help=help)
    @click.option("--state", "states", multiple=True, help="only groups in this state (repeatable)")
    @click.pass_context
    def list_of_type(ctx: click.Context, states: tuple[str, ...]) -> None:
        rows = [[g.group_id, state] for g, state in listed_groups(ctx, states) if g.protocol_type == protocol_type]
        emit(ctx, ["GROUP", "STATE"], sorted(rows))


def listed_groups(ctx: click.Context, states: tuple[str, ...]) -> list[tuple[Any, str]]:
    """(ListGroups' group, its state) from every broker (each lists the groups it
    coordinates), those in `states` when any are named."""
    cluster = cluster_of(ctx)
    cluster.refresh([])
    out = []
    for node_id in sorted(cluster.brokers):
        r = cluster.node(node_id).request(LIST_GROUPS, states_filter=tuple(states))
        if r.error_code:
            raise Failure(f"listing groups on broker {node_id}: {error_name(r.error_code)}")
        for g in r.groups:
            state = getattr(g, "group_state", "")
            if not states or state in states:
                out.append((g, state))
    return out


@add_describe_command(
    groups,
    describe_group,
    "the group's state and coordinator",
    {"ASSIGNMENT-STRATEGY": lambda d: d.protocol_data, "STATE": lambda d: d.group_state, "#MEMBERS": members_count},
)
def groups_describe(
    ctx: click.Context, cluster: Cluster, conn: Connection, d: Any, group: str, view: str | None
) -> None:
    """Per partition: committed offset, log end offset, lag and owner (kafka-consumer-groups --describe)."""
    owned = owners(d)
    if view == "members":
        count: dict[str, int] = {}
        for member in owned.values():
            count[member.member_id] = count.get(member.member_id, 0) + 1
        emit(
            ctx,
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
            [[group, m.member_id, m.client_host, m.client_id, count.get(m.member_id, 0)] for m in d.members],
        )
        return
    offsets = committed(conn, group)
    if d.group_state == "Dead" and not offsets:
        raise Failure(f"consumer group {group!r} does not exist")
    partitions = sorted(set(offsets) | set(owned))
    leaders = topic_partitions(cluster, sorted({t for t, _ in partitions})) if partitions else {}
    ends = list_offsets(cluster, {tp: LATEST for tp in partitions}, leaders) if partitions else {}
    rows = []
    for tp in partitions:
        current, end, m = offsets.get(tp), ends.get(tp), owned.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append(
            [
                group,
                tp[0],
                tp[1],
                current,
                end,
                lag,
                m.member_id if m else None,
                m.client_host if m else None,
                m.client_id if m else None,
            ]
        )
    if d.group_state not in ("Stable", *INACTIVE):
        click.echo(f"warning: consumer group {group!r} is {d.group_state}", err=True)
    emit(
        ctx,
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
        rows,
    )


@groups.command("status")
@click.argument("group")
@click.option("--metrics-url", help="the server's metrics (default: http://BOOTSTRAP-HOST:9308/metrics)")
@click.pass_context
def groups_status(ctx: click.Context, group: str, metrics_url: str | None) -> None:
    """Burrow's verdict per partition and for the group, as this server evaluates it over the
    group's recent commits (needs the server's --metrics-port)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    url = metrics_url or f"http://{ctx.obj['bootstrap'].rpartition(':')[0]}:9308/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
    except (OSError, ValueError) as e:
        raise Failure(f"cannot read metrics from {url}: {getattr(e, 'reason', None) or e}") from None
    rows: dict[tuple[str, int], list[Any]] = {}
    verdict = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if labels.get("group") != group:
                continue
            if sample.name == "kcoord_group_lag_status" and sample.value == 1:
                verdict = labels["status"]
            key = (labels.get("topic", ""), int(labels.get("partition", -1)))
            if sample.name == "kcoord_partition_lag_status" and sample.value == 1:
                rows.setdefault(key, [group, *key, None, None, None])[5] = labels["status"]
            elif sample.name == "kafka_consumergroup_group_lag":
                rows.setdefault(key, [group, *key, None, None, None])[3] = int(sample.value)
            elif sample.name == "kafka_consumergroup_group_lag_seconds":
                rows.setdefault(key, [group, *key, None, None, None])[4] = round(sample.value, 3)
    if verdict is None:
        raise Failure(f"the server at {url} has no committed offsets of group {group!r}")
    emit(ctx, ["GROUP", "TOPIC", "PARTITION", "LAG", "LAG-SECONDS", "STATUS"], [rows[k] for k in sorted(rows)])
    click.echo(
        f"group {group}: {verdict} (Burrow's rules as of now, over the commits this server sampled; "
        "a pipeline report judges as of its data's latest record)",
        err=True,
    )


@groups.command("delete")
@click.argument("group_ids", nargs=-1, required=True)
@execute_option("delete the groups and their committed offsets")
@click.pass_context
def groups_delete(ctx: click.Context, group_ids: tuple[str, ...], execute: bool) -> None:
    """Delete groups that have no active members (Kafka refuses others: NON_EMPTY_GROUP)."""

    def verdict(cluster: Cluster, group: str) -> tuple[int, str]:  # from the group's state
        state = describe_group(cluster, group)[1].group_state
        code = {"Empty": 0, "Dead": ErrorCode.group_id_not_found}.get(state, ErrorCode.non_empty_group)
        return code, "would be deleted" if not code else f"{error_name(code)} (the group is {state})"

    delete_groups(ctx, group_ids, execute, verdict)


# offsets --------------------------------------------------------------------------------------


@click.group()
def offsets() -> None:
    """Reset, delete, export and import a group's committed offsets."""


def require_inactive(cluster: Cluster, group: str) -> Connection:
    conn, d = describe_group(cluster, group)
    if d.group_state not in INACTIVE:
        raise Failure(
            f"offsets can only be changed while group {group!r} has no active members "
            f"(Empty), but it is {d.group_state}"
        )
    return conn


def commit(conn: Connection, group: str, targets: dict[tuple[str, int], int]) -> list[str]:
    """Commit as an admin client does (no generation, no member); the failures."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in sorted(targets.items()):
        by_topic.setdefault(topic, []).append(
            conn.nested(
                OFFSET_COMMIT,
                "OffsetCommitRequestPartition",
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata="",
                commit_timestamp=-1,
            )
        )
    r = conn.request(
        OFFSET_COMMIT,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=tuple(
            conn.nested(OFFSET_COMMIT, "OffsetCommitRequestTopic", name=t, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )
    return [
        f"{t.name}-{p.partition_index}: {error_name(p.error_code)}"
        for t in r.topics
        for p in t.partitions
        if p.error_code
    ]


def apply(ctx: click.Context, conn: Connection, group: str, targets: dict[tuple[str, int], int], execute: bool) -> None:
    emit(
        ctx, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [[group, t, p, o] for (t, p), o in sorted(targets.items())]
    )
    if not execute:
        dry_run_note("committed")
        return
    failures = commit(conn, group, targets)
    if failures:
        raise Failure("commit failed for " + "; ".join(failures))


@offsets.command("reset")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, help="TOPIC or TOPIC:P[,P...] (repeatable)")
@click.option("--all-topics", is_flag=True, help="every topic the group has offsets for")
@reset_target_options(shift_by=True)
@execute_option("commit them")
@click.option("--dry-run", is_flag=True, help="show the new offsets only (the default)")
@click.pass_context
def offsets_reset(
    ctx: click.Context,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to: str | None,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    by_duration: str | None,
    execute: bool,
    dry_run: bool,
) -> None:
    """Move a group's offsets, as kafka-consumer-groups --reset-offsets (group must be Empty)."""
    one_reset_target(to, to_offset=to_offset, to_datetime=to_datetime, shift_by=shift_by, by_duration=by_duration)
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (one or more) or --all-topics")
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run exclude each other")
    cluster = cluster_of(ctx)
    conn = require_inactive(cluster, group)
    current = committed(conn, group)
    if all_topics:
        partitions, leaders = parse_topics(cluster, tuple(sorted({t for t, _ in current})))
    else:
        partitions, leaders = parse_topics(cluster, topics)
    if not partitions:
        raise Failure(f"group {group!r} has no committed offsets to reset")
    targets = reset_targets(
        cluster,
        partitions,
        leaders,
        to=to,
        to_offset=to_offset,
        to_datetime=to_datetime,
        by_duration=by_duration,
        shift_by=shift_by,
        current=current,
    )
    apply(ctx, conn, group, targets, execute)


@offsets.command("delete")
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, help="TOPIC or TOPIC:P[,P...] (repeatable)")
@execute_option("delete the offsets")
@click.pass_context
def offsets_delete(ctx: click.Context, group: str, topics: tuple[str, ...], execute: bool) -> None:
    """Delete committed offsets (Kafka refuses topics the group still consumes)."""
    cluster = cluster_of(ctx)
    partitions, _ = parse_topics(cluster, topics)
    conn = cluster.coordinator(group)
    if not execute:
        current = committed(conn, group)
        emit(
            ctx,
            ["GROUP", "TOPIC", "PARTITION", "RESULT"],
            [
                [group, t, p, f"offset {current[t, p]} would be deleted" if (t, p) in current else "no offset"]
                for t, p in sorted(partitions)
            ],
        )
        dry_run_note("deleted")
        return
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    r = conn.request(
        OFFSET_DELETE,
        group_id=group,
        topics=tuple(
            conn.nested(
                OFFSET_DELETE,
                "OffsetDeleteRequestTopic",
                name=t,
                partitions=tuple(
                    conn.nested(OFFSET_DELETE, "OffsetDeleteRequestPartition", partition_index=p) for p in ps
                ),
            )
            for t, ps in by_topic.items()
        ),
    )
    if r.error_code:
        raise Failure(f"group {group!r}: {error_name(r.error_code)}")
    rows = [
        [group, t.name, p.partition_index, error_name(p.error_code) if p.error_code else "deleted"]
        for t in r.topics
        for p in t.partitions
    ]
    emit(ctx, ["GROUP", "TOPIC", "PARTITION", "RESULT"], rows)
    failed = [f"{t}-{p}: {res}" for _, t, p, res in rows if res != "deleted"]
    if failed:
        raise Failure("; ".join(failed))


@offsets.command("export")
@click.argument("group")
@click.option("--file", "path", type=click.Path(dir_okay=False, writable=True), help="default: standard output")
@click.pass_context
def offsets_export(ctx: click.Context, group: str, path: str | None) -> None:
    """The committed offsets as kafka-consumer-groups' CSV: topic,partition,offset."""
    cluster = cluster_of(ctx)
    conn, _ = describe_group(cluster, group)
    lines = "".join(f"{t},{p},{o}\n" for (t, p), o in sorted(committed(conn, group).items()))
    if path:
        with open(path, "w") as f:
            f.write(lines)
    else:
        click.echo(lines, nl=False)


@offsets.command("import")
@click.argument("group")
@click.option("--file", "path", type=click.File("r"), required=True, help="CSV lines topic,partition,offset")
@execute_option("commit them")
@click.pass_context
def offsets_import(ctx: click.Context, group: str, path: Any, execute: bool) -> None:
    """Commit offsets from kafka-consumer-groups' CSV (as --reset-offsets --from-file)."""
    targets: dict[tuple[str, int], int] = {}
    for n, row in enumerate(csv.reader(path), 1):
        if not row:
            continue
        try:
            topic, partition, offset = row[-3], int(row[-2]), int(row[-1])  # (group,topic,... also accepted)
        except (IndexError, ValueError):
            raise Failure(f"{path.name} line {n}: expected topic,partition,offset") from None
        targets[(topic, partition)] = offset
    cluster = cluster_of(ctx)
    parse_topics(cluster, tuple(sorted({f"{t}:{p}" for t, p in targets})))  # every partition exists
    apply(ctx, require_inactive(cluster, group), group, targets, execute)
