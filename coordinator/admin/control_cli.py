"""`kcoord fault ...`, `kcoord requests ...`, `kcoord api-versions ...` and `kcoord cluster ...`:
the test control of a server started with `--enable-test-control` (coordinator/control.py),
over its JSON HTTP API on the metrics port.

    kcoord fault add OffsetCommit NOT_COORDINATOR --times 2 --group orders
    kcoord fault add Produce --drop after --topic orders
    kcoord fault list
    kcoord fault clear [ID]
    kcoord requests start [--limit N] | stop | status | clear
    kcoord requests list [--api API] [--client-id ID] [--broker ID] [--group G] [--topic T]
    kcoord api-versions list [--narrowed] | set API [--min N] [--max N] | reset [API]
    kcoord cluster show | stop ID | start ID [--preferred] | move-coordinator GROUP [--to ID]
    kcoord cluster move-transaction-coordinator TXN_ID [--to ID] | move-leader TOPIC PARTITION [--to ID]

--control HOST:PORT (env KCOORD_CONTROL, default 127.0.0.1:9308) names the metrics port.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import click

from ..faults import FIELDS
from .common import Failure, emit

# a rule as the control lists it: its id, the fields of its spec, how often it has fired
FAULT_KEYS = ["id", *FIELDS, "fired"]
FAULT_COLUMNS = [key.upper() for key in FAULT_KEYS]


def control_option(f: Any) -> Any:
    return click.option(
        "--control",
        default="127.0.0.1:9308",
        show_default=True,
        envvar="KCOORD_CONTROL",
        show_envvar=True,
        help="HOST:PORT of the server's metrics port (started with --enable-test-control)",
    )(f)


def call(control: str, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
    """One request to the control API; its JSON answer. An error answer is a Failure (one line)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://{control}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read())["error"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {e.code} {e.reason}"
        raise Failure(message) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise Failure(
            f"cannot reach the test control at {control} ({reason}); is the server running with "
            "--enable-test-control and --metrics-port?"
        ) from None


def show(ctx: click.Context, answer: Any, columns: list[str], rows: list[list[Any]]) -> None:
    """The control's answer as it came (--output json), else `rows` as a table or csv."""
    if ctx.obj["output"] == "json":
        click.echo(json.dumps(answer, indent=2))
    else:
        emit(ctx, columns, rows)


def show_faults(ctx: click.Context, rules: list[dict[str, Any]]) -> None:
    show(ctx, rules, FAULT_COLUMNS, [[r.get(k) for k in FAULT_KEYS] for r in rules])


@click.group("fault")
def fault() -> None:
    """Injected faults: errors, latency, dropped connections, stalls (test servers only)."""


@fault.command("add")
@click.argument("api")
@click.argument("error", required=False)
@click.option("--times", type=int, default=None, help="fire for the next N matching requests (default 1)")
@click.option("--forever", is_flag=True, help="fire until cleared (with --probability: each time the draw says so)")
@click.option("--probability", type=float, help="fire for each matching request with this probability (0, 1]")
@click.option("--seed", type=int, help="seed of this rule's draws (the same faults every run)")
@click.option("--delay-ms", type=int, default=0, help="answer this much later")
@click.option(
    "--drop",
    type=click.Choice(["before", "after"]),
    help="close the connection before handling the request, or after (its reply lost)",
)
@click.option("--stall", is_flag=True, help="hold matching requests until the fault is cleared")
@click.option("--stall-ms", type=int, help="hold them at most this long")
@click.option("--client-id", help="only requests from this client id")
@click.option("--group", help="only requests naming this group")
@click.option("--topic", help="only requests naming this topic")
@click.option("--broker", type=int, help="only requests to this broker (node id)")
@control_option
@click.pass_context
def fault_add(
    ctx: click.Context,
    api: str,
    error: str | None,
    times: int | None,
    forever: bool,
    probability: float | None,
    seed: int | None,
    delay_ms: int,
    drop: str | None,
    stall: bool,
    stall_ms: int | None,
    client_id: str | None,
    group: str | None,
    topic: str | None,
    broker: int | None,
    control: str,
) -> None:
    """Add a fault for API (a name like OffsetCommit, or a key), answering ERROR (a name like
    NOT_COORDINATOR, or a code) and/or delaying, dropping or stalling."""
    if forever and times is not None:
        raise click.UsageError("--times and --forever exclude each other")
    spec: dict[str, Any] = {"api": int(api) if api.isdigit() else api}
    if forever or times is not None:  # (--times 0 goes to the server, which refuses it)
        spec["times"] = None if forever else times
    if error is not None:
        spec["error"] = int(error) if error.lstrip("-").isdigit() else error
    for name, value in (
        ("probability", probability),
        ("seed", seed),
        ("drop", drop),
        ("client_id", client_id),
        ("group", group),
        ("topic", topic),
        ("broker", broker),
    ):
        if value is not None:
            spec[name] = value
    if delay_ms:
        spec["delay_ms"] = delay_ms
    if stall_ms is not None:
        spec["stall"] = stall_ms
    elif stall:
        spec["stall"] = True
    show_faults(ctx, [call(control, "POST", "/faults", spec)])


@fault.command("list")
@control_option
@click.pass_context
def fault_list(ctx: click.Context, control: str) -> None:
    """The active faults, with how often each has fired."""
    show_faults(ctx, call(control, "GET", "/faults"))


@fault.command("clear")
@click.argument("fault_id", type=int, required=False)
@control_option
def fault_clear(fault_id: int | None, control: str) -> None:
    """Clear one fault by its id, or all; requests they stall go on."""
    answer = call(control, "DELETE", "/faults" if fault_id is None else f"/faults/{fault_id}")
    click.echo(f"cleared {answer['cleared']} fault(s)")


@click.group("cluster")
def cluster() -> None:
    """Brokers, coordinators and leaders of a test cluster (servers with several brokers)."""


@cluster.command("show")
@control_option
@click.pass_context
def cluster_show(ctx: click.Context, control: str) -> None:
    """The cluster's brokers: address, listeners, whether running, and how many partitions
    each leads."""
    brokers = call(control, "GET", "/cluster")["brokers"]
    rows = [[b["node_id"], b["host"], b["port"], b["alive"], ",".join(b["listeners"]), b["leader_of"]] for b in brokers]
    show(ctx, brokers, ["NODE-ID", "HOST", "PORT", "ALIVE", "LISTENERS", "LEADER-OF"], rows)


@cluster.command("stop")
@click.argument("node_id", type=int)
@control_option
def cluster_stop(node_id: int, control: str) -> None:
    """Stop a broker: its listener and connections close, its partitions and groups move."""
    call(control, "POST", f"/cluster/brokers/{node_id}/stop")
    click.echo(f"broker {node_id} stopped")


@cluster.command("start")
@click.argument("node_id", type=int)
@click.option("--preferred", is_flag=True, help="and lead again the partitions it is the preferred replica of")
@control_option
def cluster_start(node_id: int, preferred: bool, control: str) -> None:
    """Start a stopped broker again: it rejoins the ISRs."""
    call(control, "POST", f"/cluster/brokers/{node_id}/start", {"preferred": preferred})
    click.echo(f"broker {node_id} started")


def add_move_coordinator_command(name: str, key: str, what: str, path: str) -> None:
    """`cluster NAME KEY [--to N]`: move the coordinator of a group or a transactional id (the
    `key` of the test control's `path`) to another broker."""

    @cluster.command(name, help=f"Move a {what}'s coordinator to another broker.")
    @click.argument(key)
    @click.option("--to", "to", type=int, help="node id of the new coordinator (default: another live broker)")
    @control_option
    def move(to: int | None, control: str, **named: str) -> None:
        answer = call(control, "POST", path, {key: named[key], "to": to})
        click.echo(f"{what} {named[key]}: coordinator {answer.get('coordinator')}")


add_move_coordinator_command("move-coordinator", "group_id", "group", "/cluster/coordinators/move")
add_move_coordinator_command(
    "move-transaction-coordinator", "transactional_id", "transactional id", "/cluster/transaction-coordinators/move"
)


@cluster.command("move-leader")
@click.argument("topic")
@click.argument("partition", type=int)
@click.option("--to", "to", type=int, help="node id of the new leader (default: another live broker)")
@control_option
def cluster_move_leader(topic: str, partition: int, to: int | None, control: str) -> None:
    """Move a partition's leadership to another broker."""
    answer = call(control, "POST", "/cluster/leaders/move", {"topic": topic, "partition": partition, "to": to})
    click.echo(f"{topic}-{partition}: leader {answer.get('leader')}")


REQUEST_COLUMNS = ["BROKER", "API", "VERSION", "CLIENT_ID", "CORRELATION_ID", "TIME_MS", "GROUPS", "TOPICS"]


@click.group("requests")
def requests_group() -> None:
    """Request tracking: what the brokers received, for tests to assert on (test servers only)."""


def _show_status(status: dict[str, Any]) -> None:
    click.echo(
        f"tracking {'on' if status['tracking'] else 'off'}: {status['recorded']} request(s) held "
        f"(limit {status['limit']}), {status['dropped']} dropped"
    )


@requests_group.command("start")
@click.option("--limit", type=int, help="hold at most this many requests (default 10000); past it the oldest go")
@control_option
def requests_start(limit: int | None, control: str) -> None:
    """Record every request the brokers receive from now on."""
    _show_status(call(control, "POST", "/requests/tracking", {} if limit is None else {"limit": limit}))


@requests_group.command("stop")
@control_option
def requests_stop(control: str) -> None:
    """Record no more; what was recorded stays listed until cleared."""
    _show_status(call(control, "DELETE", "/requests/tracking"))


@requests_group.command("status")
@control_option
def requests_status(control: str) -> None:
    """Whether requests are tracked, and how many are held and were dropped."""
    _show_status(call(control, "GET", "/requests/tracking"))


@requests_group.command("clear")
@control_option
def requests_clear(control: str) -> None:
    """Forget the recorded requests."""
    click.echo(f"cleared {call(control, 'DELETE', '/requests')['cleared']} request(s)")


@requests_group.command("list")
@click.option("--api", help="only this API (a name like OffsetCommit, or a key)")
@click.option("--client-id", help="only requests from this client id")
@click.option("--broker", type=int, help="only requests to this broker (node id)")
@click.option("--group", help="only requests naming this group")
@click.option("--topic", help="only requests naming this topic")
@click.option("--transactional-id", help="only requests naming this transactional id")
@control_option
@click.pass_context
def requests_list(ctx: click.Context, /, control: str, **filters: Any) -> None:
    """The recorded requests, oldest first."""
    query = urllib.parse.urlencode({k: v for k, v in filters.items() if v is not None})
    answer = call(control, "GET", "/requests" + (f"?{query}" if query else ""))
    rows = [
        [
            r["broker"],
            r["api"],
            r["api_version"] if r["supported"] else f"{r['api_version']} (unsupported)",
            r["client_id"],
            r["correlation_id"],
            int(r["time_ms"]),
            ",".join(r["groups"] + r["transactional_ids"]),
            ",".join(r["topics"]),
        ]
        for r in answer["requests"]
    ]
    show(ctx, answer, REQUEST_COLUMNS, rows)


VERSION_COLUMNS = ["API", "KEY", "MIN", "MAX", "SERVED_MIN", "SERVED_MAX", "NARROWED"]
VERSION_KEYS = ["api", "api_key", "min_version", "max_version", "served_min_version", "served_max_version", "narrowed"]


def show_versions(ctx: click.Context, ranges: list[dict[str, Any]]) -> None:
    show(ctx, ranges, VERSION_COLUMNS, [[r.get(k) for k in VERSION_KEYS] for r in ranges])


@click.group("api-versions")
def api_versions() -> None:
    """Narrowed API version ranges: what the brokers advertise and accept (test servers only)."""


@api_versions.command("list")
@click.option("--narrowed", is_flag=True, help="only the APIs whose range is narrowed")
@control_option
@click.pass_context
def api_versions_list(ctx: click.Context, narrowed: bool, control: str) -> None:
    """Every served API: the versions advertised, and those served."""
    ranges = call(control, "GET", "/api-versions")
    show_versions(ctx, [r for r in ranges if r["narrowed"]] if narrowed else ranges)


@api_versions.command("set")
@click.argument("api")
@click.option("--min", "min_version", type=int, help="the lowest version to advertise (default: the lowest served)")
@click.option("--max", "max_version", type=int, help="the highest version to advertise (default: the highest served)")
@control_option
@click.pass_context
def api_versions_set(
    ctx: click.Context, api: str, min_version: int | None, max_version: int | None, control: str
) -> None:
    """Advertise and accept only a range of API's versions (a name like Fetch, or a key)."""
    spec = {"api": int(api) if api.isdigit() else api, "min_version": min_version, "max_version": max_version}
    show_versions(ctx, [call(control, "POST", "/api-versions", spec)])


@api_versions.command("reset")
@click.argument("api", required=False)
@control_option
def api_versions_reset(api: str | None, control: str) -> None:
    """The full served ranges again, of API or of all."""
    path = "/api-versions" if api is None else f"/api-versions/{urllib.parse.quote(api, safe='')}"
    click.echo(f"reset {call(control, 'DELETE', path)['reset']} api(s)")
