"""`kcoord`: kafka-consumer-groups and kafka-topics verbs for any Kafka-compatible broker.

    kcoord groups list [--state Stable]
    kcoord groups describe GROUP [--members | --state]
    kcoord offsets reset GROUP --topic orders --to-earliest --execute
    kcoord topics create orders --partitions 3
    kcoord share-groups describe workers
    kcoord transactions producers orders
    kcoord streams-groups describe wordcount --members

Conventions are Kafka's tools': --bootstrap-server HOST:PORT (default 127.0.0.1:9092), a
dry run unless --execute (or --yes) for every command that changes or deletes offsets, groups
or topics, resets only of a group with no active members. Output is a table, or --output
json|csv for scripts. --bootstrap-server and --output go before or after the subcommand, as
Kafka's tools take their options in any order. Every failure is one line on stderr and exit
status 1 (2 for a usage error), never a traceback.

This module is the root command; each command group is a module of its own, as Kafka's tools
are scripts of their own: groups_cli (groups, offsets: kafka-consumer-groups), topics_cli
(kafka-topics), console_cli (produce, consume), share_cli (kafka-share-groups), streams_cli
(kafka-streams-groups), transactions_cli (kafka-transactions), control_cli (the test control),
all on common (output, failures, the requests they share).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from .client import BrokerError
from . import control_cli
from .console_cli import consume_cmd, produce_cmd
from .groups_cli import groups, offsets
from .share_cli import share_groups
from .streams_cli import streams_groups
from .topics_cli import topics
from .transactions_cli import transactions


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--bootstrap-server",
    default="127.0.0.1:9092",
    show_default=True,
    envvar="KCOORD_BOOTSTRAP_SERVER",
    show_envvar=True,
    help="HOST:PORT of any broker of the cluster",
)
@click.option(
    "--output",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="a table to read, or json or csv for scripts",
)
@click.pass_context
def main(ctx: click.Context, bootstrap_server: str, output: str) -> None:
    """Topics, records, consumer and share groups and their offsets of a Kafka-compatible
    cluster, in the manner of kafka-topics, kafka-consumer-groups and kcat; `fault`,
    `cluster`, `requests` and `api-versions` steer a test server (--enable-test-control)."""
    ctx.obj = {"bootstrap": bootstrap_server, "output": output}


def _set_global(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:  # given after the subcommand: overrides the one before it
            ctx.obj[name] = value

    return callback


def accept_global_options_anywhere(group: click.Group, bootstrap: bool = True) -> None:
    """Give every subcommand --bootstrap-server and --output too, so that `kcoord groups list
    --output json` works as `kcoord --output json groups list` does. The test control's
    commands (`fault`, `cluster`, `requests`, `api-versions`) speak HTTP to --control, so
    they take no --bootstrap-server."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            accept_global_options_anywhere(command, bootstrap and command not in CONTROL_GROUPS)
            continue
        if bootstrap:
            command.params.append(
                click.Option(
                    ["--bootstrap-server"],
                    expose_value=False,
                    callback=_set_global("bootstrap"),
                    help="HOST:PORT of any broker (also before the subcommand)",
                )
            )
        command.params += [
            click.Option(
                ["--output"],
                type=click.Choice(["table", "json", "csv"]),
                expose_value=False,
                callback=_set_global("output"),
                help="table, json or csv (also before the subcommand)",
            ),
        ]


for command in (groups, offsets, topics, produce_cmd, consume_cmd, share_groups, streams_groups, transactions):
    main.add_command(command)
# the test control of --enable-test-control servers
CONTROL_GROUPS = (control_cli.fault, control_cli.cluster, control_cli.requests_group, control_cli.api_versions)
for command in CONTROL_GROUPS:
    main.add_command(command)
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
