"""`kcoord`: kafka-consumer-groups and kafka-topics verbs for any Kafka-compatible broker.

    kcoord groups list [--state Stable]
    kcoord groups describe GROUP [--members | --state]
    kcoord offsets reset GROUP --topic orders --to-earliest --execute
    kcoord topics create orders --partitions 3
    kcoord share-groups describe workers

Conventions are Kafka's tools': --bootstrap-server HOST:PORT (default 127.0.0.1:9092), a
dry run unless --execute (or --yes) for every command that changes or deletes offsets, groups
or topics, resets only of a group with no active members. Output is a table, or --output
json|csv for scripts. --bootstrap-server and --output go before or after the subcommand, as
Kafka's tools take their options in any order. Every failure is one line on stderr and exit
status 1 (2 for a usage error), never a traceback.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import re
import sys
import time
from typing import Any

import click
from kio.schema.errors import ErrorCode
from rich.console import Console
from rich.table import Table

from . import control_cli
from .client import BrokerError, Cluster, Connection

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 2, 3, 8, 9
DESCRIBE_GROUPS, LIST_GROUPS, CREATE_TOPICS, DELETE_TOPICS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 19, 20, 42, 47
DESCRIBE_CONFIGS, BROKER_RESOURCE = 32, 4
EARLIEST, LATEST = -2, -1
INACTIVE = ("Empty", "Dead")


class Failure(click.ClickException):
    """One line on stderr, exit 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


# output ---------------------------------------------------------------------------------

def emit(ctx: click.Context, columns: list[str], rows: list[list[Any]]) -> None:
    fmt = ctx.obj["output"]
    if fmt == "json":
        click.echo(json.dumps([dict(zip(columns, row)) for row in rows], indent=2, default=str))
    elif fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        click.echo(out.getvalue(), nl=False)
    else:
        table = Table(*columns, box=None, header_style="bold", pad_edge=False)
        for row in rows:
            table.add_row(*("-" if v is None else str(v) for v in row))
        Console(width=200).print(table)


def cluster_of(ctx: click.Context) -> Cluster:
    if "cluster" not in ctx.obj:
        ctx.obj["cluster"] = Cluster(ctx.obj["bootstrap"])
        ctx.call_on_close(ctx.obj["cluster"].close)
    return ctx.obj["cluster"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", default="127.0.0.1:9092", show_default=True, envvar="KCOORD_BOOTSTRAP_SERVER",
              help="HOST:PORT of any broker of the cluster")
@click.option("--output", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.pass_context
def main(ctx: click.Context, bootstrap_server: str, output: str) -> None:
    """Consumer groups, offsets and topics of a Kafka-compatible cluster."""
    ctx.obj = {"bootstrap": bootstrap_server, "output": output}


def _set_global(name: str):
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:  # given after the subcommand: overrides the one before it
            ctx.obj[name] = value
    return callback


def accept_global_options_anywhere(group: click.Group) -> None:
    """Give every subcommand --bootstrap-server and --output too, so that `kcoord groups list
    --output json` works as `kcoord --output json groups list` does."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            accept_global_options_anywhere(command)
            continue
        command.params += [
            click.Option(["--bootstrap-server"], expose_value=False, callback=_set_global("bootstrap"),
                         help="HOST:PORT of any broker (also before the subcommand)"),
            click.Option(["--output"], type=click.Choice(["table", "json", "csv"]), expose_value=False,
                         callback=_set_global("output"), help="table, json or csv (also before the subcommand)")]


def execute_option(what: str):
    """--execute (alias --yes): a command that deletes or changes something is a dry run
    without it, as kafka-consumer-groups' --reset-offsets is."""
    return click.option("--execute", "--yes", "execute", is_flag=True,
                        help=f"{what} (default: a dry run that shows what would be done)")


def dry_run_note(action: str) -> None:
    click.echo(f"dry run: nothing was {action} (add --execute or --yes to do it)", err=True)


# metadata helpers ---------------------------------------------------------------------------

def topic_partitions(cluster: Cluster, topics: list[str] | None) -> dict[str, dict[int, int]]:
    """topic -> partition -> leader node, for the topics named (all when None)."""
    r = cluster.refresh(topics)
    out: dict[str, dict[int, int]] = {}
    for t in r.topics:
        if t.error_code:
            if topics is not None:
                raise Failure(f"topic {t.name!r}: {error_name(t.error_code)}")
            continue
        out[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
    return out


def list_offsets(cluster: Cluster, wanted: dict[tuple[str, int], int], leaders: dict[str, dict[int, int]]
                 ) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset for a timestamp spec (EARLIEST, LATEST or epoch ms),
    asked of each partition's leader. A timestamp past every record gives the log end."""
    by_leader: dict[int, list[tuple[str, int, int]]] = {}
    for (topic, partition), spec in wanted.items():
        by_leader.setdefault(leaders[topic][partition], []).append((topic, partition, spec))
    out: dict[tuple[str, int], int] = {}
    late: dict[tuple[str, int], int] = {}
    for leader, items in by_leader.items():
        conn = cluster.node(leader)
        topics: dict[str, list] = {}
        for topic, partition, spec in items:
            topics.setdefault(topic, []).append(conn.nested(
                LIST_OFFSETS, "ListOffsetsPartition", partition_index=partition, current_leader_epoch=-1,
                timestamp=spec, max_num_offsets=1))
        r = conn.request(LIST_OFFSETS, replica_id=-1, isolation_level=0, topics=tuple(
            conn.nested(LIST_OFFSETS, "ListOffsetsTopic", name=name, partitions=tuple(parts))
            for name, parts in topics.items()))
        for t in r.topics:
            for p in t.partitions:
                if p.error_code:
                    raise Failure(f"offsets of {t.name}-{p.partition_index}: {error_name(p.error_code)}")
                if p.offset < 0:
                    late[(t.name, p.partition_index)] = LATEST
                else:
                    out[(t.name, p.partition_index)] = p.offset
    if late:
        out.update(list_offsets(cluster, late, leaders))
    return out


def describe_group(cluster: Cluster, group: str) -> tuple[Connection, Any]:
    conn = cluster.coordinator(group)
    r = conn.request(DESCRIBE_GROUPS, groups=(group,), include_authorized_operations=False)
    described = r.groups[0]
    if described.error_code:
        raise Failure(f"group {group!r}: {error_name(described.error_code)}")
    return conn, described


def committed(conn: Connection, group: str) -> dict[tuple[str, int], int]:
    r = conn.request(OFFSET_FETCH, group_id=group, topics=None, require_stable=False)
    if getattr(r, "error_code", 0):
        raise Failure(f"offsets of group {group!r}: {error_name(r.error_code)}")
    return {(t.name, p.partition_index): p.committed_offset
            for t in r.topics for p in t.partitions if p.committed_offset >= 0}


def owners(described: Any) -> dict[tuple[str, int], Any]:
    from ..metrics.lag import assigned_partitions

    if described.protocol_type != "consumer":
        return {}
    return {tp: m for m in described.members for tp in assigned_partitions(m.member_assignment)}


# groups ---------------------------------------------------------------------------------------

@main.group()
def groups() -> None:
    """List, describe and delete consumer groups."""


@groups.command("list")
@click.option("--state", "states", multiple=True, help="only groups in this state (repeatable)")
@click.pass_context
def groups_list(ctx: click.Context, states: tuple[str, ...]) -> None:
    cluster = cluster_of(ctx)
    cluster.refresh([])
    rows = []
    for node_id in sorted(cluster.brokers):
        r = cluster.node(node_id).request(LIST_GROUPS, states_filter=tuple(states))
        if r.error_code:
            raise Failure(f"listing groups on broker {node_id}: {error_name(r.error_code)}")
        for g in r.groups:
            state = getattr(g, "group_state", "")
            if not states or state in states:
                rows.append([g.group_id, state, g.protocol_type])
    emit(ctx, ["GROUP", "STATE", "PROTOCOL-TYPE"], sorted(rows))


@groups.command("describe")
@click.argument("group")
@click.option("--members", "view", flag_value="members", help="one row per member")
@click.option("--state", "view", flag_value="state", help="the group's state and coordinator")
@click.pass_context
def groups_describe(ctx: click.Context, group: str, view: str | None) -> None:
    """Per partition: committed offset, log end offset, lag and owner (kafka-consumer-groups --describe)."""
    cluster = cluster_of(ctx)
    conn, d = describe_group(cluster, group)
    if view == "state":
        emit(ctx, ["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
             [[group, conn.address, d.protocol_data, d.group_state, len(d.members)]])
        return
    owned = owners(d)
    if view == "members":
        count: dict[str, int] = {}
        for member in owned.values():
            count[member.member_id] = count.get(member.member_id, 0) + 1
        emit(ctx, ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
             [[group, m.member_id, f"/{m.client_host}", m.client_id, count.get(m.member_id, 0)] for m in d.members])
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
        rows.append([group, tp[0], tp[1], current, end, lag, m.member_id if m else None,
                     f"/{m.client_host}" if m else None, m.client_id if m else None])
    if d.group_state not in ("Stable", *INACTIVE):
        click.echo(f"warning: consumer group {group!r} is {d.group_state}", err=True)
    emit(ctx, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
               "CLIENT-ID"], rows)


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
    click.echo(f"group {group}: {verdict} (Burrow's rules as of now, over the commits this server sampled; "
               "a pipeline report judges as of its data's latest record)", err=True)


@groups.command("delete")
@click.argument("group_ids", nargs=-1, required=True)
@execute_option("delete the groups and their committed offsets")
@click.pass_context
def groups_delete(ctx: click.Context, group_ids: tuple[str, ...], execute: bool) -> None:
    """Delete groups that have no active members (Kafka refuses others: NON_EMPTY_GROUP)."""
    cluster = cluster_of(ctx)
    rows, failed = [], []
    for group in group_ids:
        if execute:
            code = cluster.coordinator(group).request(DELETE_GROUPS, groups_names=(group,)).results[0].error_code
            result = "deleted" if not code else error_name(code)
        else:  # what the broker would answer, from the group's state
            _, described = describe_group(cluster, group)
            state = described.group_state
            code = {"Empty": 0, "Dead": ErrorCode.group_id_not_found}.get(state, ErrorCode.non_empty_group)
            result = "would be deleted" if not code else f"{error_name(code)} (the group is {state})"
        rows.append([group, result])
        if code:
            failed.append(f"{group}: {result}")
    emit(ctx, ["GROUP", "RESULT"], rows)
    if failed:
        raise Failure("; ".join(failed))
    if not execute:
        dry_run_note("deleted")


# offsets --------------------------------------------------------------------------------------

@main.group()
def offsets() -> None:
    """Reset, delete, export and import a group's committed offsets."""


def parse_topics(cluster: Cluster, specs: tuple[str, ...]) -> tuple[set[tuple[str, int]], dict[str, dict[int, int]]]:
    """--topic T or T:0,2 -> (topic, partition) pairs, and the topics' leaders."""
    named: dict[str, list[int] | None] = {}
    for spec in specs:
        topic, _, parts = spec.partition(":")
        try:
            named[topic] = [int(p) for p in parts.split(",")] if parts else None
        except ValueError:
            raise click.BadParameter(f"{spec!r}: expected TOPIC or TOPIC:P[,P...]", param_hint="--topic") from None
    leaders = topic_partitions(cluster, sorted(named))
    out = set()
    for topic, parts in named.items():
        for p in parts if parts is not None else leaders[topic]:
            if p not in leaders[topic]:
                raise Failure(f"topic {topic!r} has no partition {p}")
            out.add((topic, p))
    return out, leaders


DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def duration_ms(text: str) -> int:
    m = DURATION.fullmatch(text)
    if not m or not any(m.groups()):
        raise click.BadParameter(f"{text!r}: expected an ISO 8601 duration like PT1H or P1DT2H30M",
                                 param_hint="--by-duration")
    d, h, mi, s = (float(g or 0) for g in m.groups())
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)


def timestamp_ms(text: str) -> int:
    try:
        t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected ISO 8601, e.g. 2026-11-24T10:00:00Z",
                                 param_hint="--to-datetime") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp() * 1000)


def require_inactive(cluster: Cluster, group: str) -> Connection:
    conn, d = describe_group(cluster, group)
    if d.group_state not in INACTIVE:
        raise Failure(f"offsets can only be changed while group {group!r} has no active members "
                      f"(Empty), but it is {d.group_state}")
    return conn


def commit(conn: Connection, group: str, targets: dict[tuple[str, int], int]) -> list[str]:
    """Commit as an admin client does (no generation, no member); the failures."""
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in sorted(targets.items()):
        by_topic.setdefault(topic, []).append(conn.nested(
            OFFSET_COMMIT, "OffsetCommitRequestPartition", partition_index=partition, committed_offset=offset,
            committed_leader_epoch=-1, committed_metadata="", commit_timestamp=-1))
    r = conn.request(OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                     group_instance_id=None, retention_time_ms=-1, topics=tuple(
                         conn.nested(OFFSET_COMMIT, "OffsetCommitRequestTopic", name=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()))
    return [f"{t.name}-{p.partition_index}: {error_name(p.error_code)}"
            for t in r.topics for p in t.partitions if p.error_code]


def apply(ctx: click.Context, conn: Connection, group: str, targets: dict[tuple[str, int], int],
          execute: bool) -> None:
    emit(ctx, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
         [[group, t, p, o] for (t, p), o in sorted(targets.items())])
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
@click.option("--to-earliest", "to", flag_value="earliest")
@click.option("--to-latest", "to", flag_value="latest")
@click.option("--to-offset", type=int, help="this offset (kept within each partition's range)")
@click.option("--to-datetime", help="the first offset at or after this time (ISO 8601)")
@click.option("--shift-by", type=int, help="the committed offset plus N (N < 0: back)")
@click.option("--by-duration", help="the first offset at or after now minus this (e.g. PT1H)")
@execute_option("commit them")
@click.option("--dry-run", is_flag=True, help="show the new offsets only (the default)")
@click.pass_context
def offsets_reset(ctx: click.Context, group: str, topics: tuple[str, ...], all_topics: bool, to: str | None,
                  to_offset: int | None, to_datetime: str | None, shift_by: int | None, by_duration: str | None,
                  execute: bool, dry_run: bool) -> None:
    """Move a group's offsets, as kafka-consumer-groups --reset-offsets (group must be Empty)."""
    chosen = [x for x in (to, to_offset, to_datetime, shift_by, by_duration) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
                               "--shift-by, --by-duration")
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
        targets = {tp: clamp(tp, current.get(tp, latest[tp]) + shift_by) for tp in partitions}
    else:
        at = timestamp_ms(to_datetime) if to_datetime else int(time.time() * 1000) - duration_ms(by_duration or "")
        targets = list_offsets(cluster, {tp: at for tp in partitions}, leaders)
    apply(ctx, conn, group, {tp: targets[tp] for tp in partitions}, execute)


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
        emit(ctx, ["GROUP", "TOPIC", "PARTITION", "RESULT"],
             [[group, t, p, f"offset {current[t, p]} would be deleted" if (t, p) in current else "no offset"]
              for t, p in sorted(partitions)])
        dry_run_note("deleted")
        return
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    r = conn.request(OFFSET_DELETE, group_id=group, topics=tuple(
        conn.nested(OFFSET_DELETE, "OffsetDeleteRequestTopic", name=t, partitions=tuple(
            conn.nested(OFFSET_DELETE, "OffsetDeleteRequestPartition", partition_index=p) for p in ps))
        for t, ps in by_topic.items()))
    if r.error_code:
        raise Failure(f"group {group!r}: {error_name(r.error_code)}")
    rows = [[group, t.name, p.partition_index, error_name(p.error_code) if p.error_code else "deleted"]
            for t in r.topics for p in t.partitions]
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


# topics ---------------------------------------------------------------------------------------

@main.group()
def topics() -> None:
    """List, create, describe and delete topics."""


@topics.command("list")
@click.option("--internal", is_flag=True, help="also internal topics (__consumer_offsets)")
@click.pass_context
def topics_list(ctx: click.Context, internal: bool) -> None:
    r = cluster_of(ctx).refresh(None)
    emit(ctx, ["TOPIC", "PARTITIONS"], sorted([t.name, len(t.partitions)] for t in r.topics
                                              if not t.error_code and (internal or not t.is_internal)))


@topics.command("describe")
@click.argument("names", nargs=-1, required=True)
@click.pass_context
def topics_describe(ctx: click.Context, names: tuple[str, ...]) -> None:
    cluster = cluster_of(ctx)
    r = cluster.refresh(list(names))
    rows, offline = [], []
    for t in r.topics:
        if t.error_code:
            raise Failure(f"topic {t.name!r}: {error_name(t.error_code)}")
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            rows.append([t.name, p.partition_index, p.leader_id, ",".join(map(str, p.replica_nodes)),
                         ",".join(map(str, p.isr_nodes)), ",".join(map(str, p.offline_replicas))])
            if p.leader_id in p.offline_replicas:  # (a follower out of the ISR is listed too: not this)
                offline.append((t.name, p.partition_index, p.leader_id))
    emit(ctx, ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"], rows)
    for topic, partition, node in offline:
        click.echo(f"{topic}-{partition} is offline on node {node}: its log is damaged (the server's log names the "
                   f"bytes). To repair: stop that server, run `python -m coordinator.log repair "
                   f"{log_dir_of(cluster, node)}/{topic}-{partition}` (it keeps a copy), start it again", err=True)


def log_dir_of(cluster: Cluster, node: int) -> str:
    """A broker's data dir, from its static config log.dirs (Kafka's name for it)."""
    try:
        conn = cluster.node(node)
        r = conn.request(DESCRIBE_CONFIGS, include_synonyms=False, include_documentation=False, resources=(
            conn.nested(DESCRIBE_CONFIGS, "DescribeConfigsResource", resource_type=BROKER_RESOURCE,
                        resource_name=str(node), configuration_keys=("log.dirs",)),))
        for c in r.results[0].configs:
            if c.name == "log.dirs" and c.value:
                return c.value.split(",")[0]
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
def topics_create(ctx: click.Context, name: str, partitions: int | None, replication_factor: int,
                  configs: tuple[str, ...], if_not_exists: bool) -> None:
    pairs = []
    for c in configs:
        key, sep, value = c.partition("=")
        if not sep:
            raise click.BadParameter(f"{c!r}: expected KEY=VALUE", param_hint="--config")
        pairs.append((key, value))
    conn = cluster_of(ctx).any_node()
    r = conn.request(CREATE_TOPICS, timeout=datetime.timedelta(seconds=30), validate_only=False, topics=(
        conn.nested(CREATE_TOPICS, "CreatableTopic", name=name, num_partitions=partitions or -1,
                    replication_factor=replication_factor, assignments=(), configs=tuple(
                        conn.nested(CREATE_TOPICS, "CreatableTopicConfig", name=k, value=v) for k, v in pairs)),))
    result = r.topics[0]
    if if_not_exists and result.error_code == ErrorCode.topic_already_exists:
        click.echo(f"topic {name} exists already", err=True)
        return
    if result.error_code:
        raise Failure(f"topic {name!r}: {error_name(result.error_code)}"
                      + (f": {result.error_message}" if getattr(result, "error_message", None) else ""))
    click.echo(f"created topic {name}", err=True)


@topics.command("delete")
@click.argument("names", nargs=-1, required=True)
@execute_option("delete the topics and their records")
@click.pass_context
def topics_delete(ctx: click.Context, names: tuple[str, ...], execute: bool) -> None:
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


# produce / consume (kcat -P / -C) -------------------------------------------------------------

PRODUCE, FETCH = 0, 1


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2: the hash its default partitioner puts keyed records by."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail, rest = length % 4, length - length % 4
    if tail == 3:
        h ^= data[rest + 2] << 16
    if tail >= 2:
        h ^= data[rest + 1] << 8
    if tail >= 1:
        h ^= data[rest]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


@main.command("produce")
@click.argument("topic")
@click.option("--partition", type=int, help="default: by key as Kafka's default partitioner, else round robin")
@click.option("--key-separator", help="split each line into KEY<sep>VALUE")
@click.pass_context
def produce_cmd(ctx: click.Context, topic: str, partition: int | None, key_separator: str | None) -> None:
    """Each line of standard input becomes a record (like kcat -P); acks=all."""
    from protocol.record_batch import build_batch

    cluster = cluster_of(ctx)
    leaders = topic_partitions(cluster, [topic])[topic]
    if partition is not None and partition not in leaders:
        raise Failure(f"topic {topic!r} has no partition {partition}")
    by_partition: dict[int, list[tuple[bytes | None, bytes]]] = {}
    for n, line in enumerate(sys.stdin.buffer):
        line = line.rstrip(b"\n")
        key = None
        if key_separator is not None:
            key, sep, line = line.partition(key_separator.encode())
            if not sep:
                raise Failure(f"line {n + 1}: no key separator {key_separator!r}")
        p = partition if partition is not None else (
            (murmur2(key) & 0x7FFFFFFF) % len(leaders) if key is not None else n % len(leaders))
        by_partition.setdefault(p, []).append((key, line))
    now = int(time.time() * 1000)
    count = 0
    for p, records in sorted(by_partition.items()):
        conn = cluster.node(leaders[p])
        r = conn.request(PRODUCE, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                         topic_data=(conn.nested(PRODUCE, "TopicProduceData", name=topic, partition_data=(
                             conn.nested(PRODUCE, "PartitionProduceData", index=p,
                                         records=build_batch(records, timestamp_ms=now)),)),))
        result = r.responses[0].partition_responses[0]
        if result.error_code:
            raise Failure(f"producing to {topic}-{p}: {error_name(result.error_code)}")
        count += len(records)
    click.echo(f"produced {count} records to {topic}", err=True)


@main.command("consume")
@click.argument("topic")
@click.option("--partition", "partitions", type=int, multiple=True, help="default: every partition")
@click.option("--offset", "start", default="beginning", show_default=True, help="beginning, end, or an offset")
@click.option("--max-messages", type=click.IntRange(min=1), help="stop after this many")
@click.option("--timeout", type=float, default=2.0, show_default=True, help="stop after this long without records")
@click.pass_context
def consume_cmd(ctx: click.Context, topic: str, partitions: tuple[int, ...], start: str,
                max_messages: int | None, timeout: float) -> None:
    """Print records (like kcat -C, no group): values one per line, or --output json/csv rows."""
    from protocol.record_batch import CONTROL_MASK, LOG_OVERHEAD, TruncatedBatch, iter_batch_records, parse_header

    if start not in ("beginning", "end") and not start.lstrip("-").isdigit():
        raise click.BadParameter(f"{start!r}: expected beginning, end or an offset", param_hint="--offset")
    cluster = cluster_of(ctx)
    leaders = topic_partitions(cluster, [topic])[topic]
    wanted = list(partitions) or sorted(leaders)
    for p in wanted:
        if p not in leaders:
            raise Failure(f"topic {topic!r} has no partition {p}")
    if start in ("beginning", "end"):
        spec = EARLIEST if start == "beginning" else LATEST
        found = list_offsets(cluster, {(topic, p): spec for p in wanted}, {topic: leaders})
        position = {p: o for (_, p), o in found.items()}
    else:
        position = {p: int(start) for p in wanted}
    fmt, shown = ctx.obj["output"], 0
    rows: list[list[Any]] = []
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < timeout and (max_messages is None or shown < max_messages):
        got = 0
        for p in wanted:
            conn = cluster.node(leaders[p])
            r = conn.request(FETCH, replica_id=-1, max_wait=datetime.timedelta(milliseconds=200), min_bytes=1,
                             max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, topics=(
                                 conn.nested(FETCH, "FetchTopic", topic=topic, topic_id=None, partitions=(
                                     conn.nested(FETCH, "FetchPartition", partition=p, current_leader_epoch=-1,
                                                 fetch_offset=position[p], log_start_offset=-1,
                                                 partition_max_bytes=1 << 20),)),),
                             forgotten_topics_data=(), rack_id="")
            data = r.responses[0].partitions[0]
            if data.error_code:
                raise Failure(f"fetching {topic}-{p}: {error_name(data.error_code)}")
            buf, pos = data.records or b"", 0
            while pos < len(buf):
                try:
                    h = parse_header(buf, pos)
                except TruncatedBatch:  # a partial batch at the size limit: fetched again next time
                    break
                end = pos + h.batch_length + LOG_OVERHEAD
                if not h.attributes & CONTROL_MASK:
                    for rec in iter_batch_records(memoryview(buf)[pos:end], h):
                        if rec.offset < position[p] or (max_messages is not None and shown >= max_messages):
                            continue
                        shown += 1
                        got += 1
                        value = bytes(rec.value).decode(errors="replace") if rec.value is not None else None
                        if fmt == "table":
                            click.echo(value if value is not None else "")
                        else:
                            key = bytes(rec.key).decode(errors="replace") if rec.key is not None else None
                            rows.append([topic, p, rec.offset, rec.timestamp, key, value])
                position[p] = max(position[p], h.base_offset + h.last_offset_delta + 1)
                pos = end
        if got:
            idle_since = time.monotonic()
    if fmt != "table":
        emit(ctx, ["TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "KEY", "VALUE"], rows)


from .share_cli import share_groups  # noqa: E402  (it builds on this module's helpers)

main.add_command(share_groups)
main.add_command(control_cli.fault)  # the test control of --enable-test-control servers
main.add_command(control_cli.cluster)
accept_global_options_anywhere(main)


def run(argv: list[str] | None = None, prog: str = "kcoord") -> None:
    """Entry point: BrokerError (unreachable, closed, unsupported) is one line too."""
    try:
        main.main(args=argv, prog_name=prog, standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except BrokerError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except OSError as e:  # e.g. an export file that cannot be written
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except Exception as e:  # a broker's answer this tool cannot read: still one line
        click.echo(f"error: unexpected {type(e).__name__}: {e}", err=True)
        sys.exit(1)

