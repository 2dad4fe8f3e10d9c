"""What every `kcoord` command group shares: Kafka's api keys and error names, the one-line
Failure, the table / json / csv output, the cluster connection of a command, the --execute
convention, and the metadata, ListOffsets and --topic / time parsing the offset commands use."""

from __future__ import annotations

import csv
import datetime
import io
import json
import re
from typing import Any, Callable, TypeVar, cast

import click
from kio.schema.errors import ErrorCode
from rich.console import Console
from rich.table import Table

from .client import Cluster

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 2, 3, 8, 9
DESCRIBE_GROUPS, LIST_GROUPS, CREATE_TOPICS, DELETE_TOPICS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 19, 20, 42, 47
DESCRIBE_CONFIGS, BROKER_RESOURCE = 32, 4
EARLIEST, LATEST = -2, -1
INACTIVE = ("Empty", "Dead")

F = TypeVar("F", bound=Callable[..., Any])


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
    return cast("Cluster", ctx.obj["cluster"])


def execute_option(what: str) -> Callable[[F], F]:
    """--execute (alias --yes): a command that deletes or changes something is a dry run
    without it, as kafka-consumer-groups' --reset-offsets is."""
    return click.option(
        "--execute", "--yes", "execute", is_flag=True, help=f"{what} (default: a dry run that shows what would be done)"
    )


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


def list_offsets(
    cluster: Cluster, wanted: dict[tuple[str, int], int], leaders: dict[str, dict[int, int]]
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
        topics: dict[str, list[Any]] = {}
        for topic, partition, spec in items:
            topics.setdefault(topic, []).append(
                conn.nested(
                    LIST_OFFSETS,
                    "ListOffsetsPartition",
                    partition_index=partition,
                    current_leader_epoch=-1,
                    timestamp=spec,
                    max_num_offsets=1,
                )
            )
        r = conn.request(
            LIST_OFFSETS,
            replica_id=-1,
            isolation_level=0,
            topics=tuple(
                conn.nested(LIST_OFFSETS, "ListOffsetsTopic", name=name, partitions=tuple(parts))
                for name, parts in topics.items()
            ),
        )
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


def parse_topics(cluster: Cluster, specs: tuple[str, ...]) -> tuple[set[tuple[str, int]], dict[str, dict[int, int]]]:
    """--topic T or T:0,2 -> (topic, partition) pairs, and the topics' leaders."""
    named: dict[str, list[int] | None] = {}
    for spec in specs:
        topic, _, listed = spec.partition(":")
        try:
            named[topic] = [int(p) for p in listed.split(",")] if listed else None
        except ValueError:
            raise click.BadParameter(f"{spec!r}: expected TOPIC or TOPIC:P[,P...]", param_hint="--topic") from None
    leaders = topic_partitions(cluster, sorted(named))
    out: set[tuple[str, int]] = set()
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
        raise click.BadParameter(
            f"{text!r}: expected an ISO 8601 duration like PT1H or P1DT2H30M", param_hint="--by-duration"
        )
    d, h, mi, s = (float(g or 0) for g in m.groups())
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)


def timestamp_ms(text: str) -> int:
    try:
        t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: expected ISO 8601, e.g. 2026-11-24T10:00:00Z", param_hint="--to-datetime"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp() * 1000)
