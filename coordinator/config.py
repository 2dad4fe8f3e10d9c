"""Server configuration: CLI flags, each with an environment variable and a default."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from dataclasses import dataclass, field, fields
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NoReturn

from .profiles import PROFILES, apply_profile


def _opt(default: Any, help: str, env: str | None = None, **kw: Any) -> Any:
    return field(default=default, metadata={"help": help, "env": env, **kw})


@dataclass
class Config:
    host: str = _opt("127.0.0.1", "address to listen on")
    port: int = _opt(9092, "port to listen on (0 = any free port)")
    advertised_host: str | None = _opt(None, "host clients are told to connect to (default: --host)")
    advertised_port: int | None = _opt(None, "port clients are told to connect to (default: the bound port)")
    node_id: int = _opt(1, "this broker's node id (the first one's with --brokers)")
    brokers: int = _opt(
        1,
        "brokers served by this process, node ids --node-id and up, each its own listener "
        "(ports --port and up, or every port of --listeners / --advertised-listeners and up)",
    )
    cluster_id: str = _opt(
        "",
        "cluster id reported in Metadata (default: the data dir's, kept in its meta.properties, given at "
        "its first start: a new id in Kafka's format, 22 characters of base64)",
    )
    kafka_version: str = _opt(
        "4.4",
        "the Kafka release to behave as: its API version ranges and configs (3.9 also serves the "
        "request versions Kafka 4 removed, for old clients)",
        choices=("3.9", "4.4"),
    )
    data_dir: Path = _opt(Path("data"), "directory for __consumer_offsets and topic logs")
    offsets_partitions: int = _opt(50, "partitions of __consumer_offsets (offsets.topic.num.partitions)")
    # Limits on what one client can make the server hold (see README, "Hostile clients").
    socket_request_max_bytes: int = _opt(100 * 1024 * 1024, "largest request accepted (socket.request.max.bytes)")
    connections_max_idle_ms: int = _opt(600_000, "close connections idle this long (connections.max.idle.ms)")
    max_connections: int = _opt(10_000, "connections beyond this are refused and logged (max.connections)")
    connection_max_queued_bytes: int = _opt(
        4 * 1024 * 1024, "answers one connection may have waiting to be sent before it is read no more"
    )
    fetch_max_wait_ms: int = _opt(30_000, "cap on a Fetch's max_wait (a consumer's fetch.max.wait.ms)")
    fetch_max_bytes: int = _opt(57_671_680, "cap on a Fetch's max_bytes (fetch.max.bytes)")
    fsync: Literal["always", "interval", "never"] = _opt(
        "always", "when appends reach the disk: always | interval | never", choices=("always", "interval", "never")
    )
    fsync_interval_ms: int = _opt(1000, "fsync period with --fsync=interval")
    # Group coordinator (names follow Kafka's broker configs).
    group_min_session_timeout_ms: int = _opt(6000, "group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _opt(1_800_000, "group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms: int = _opt(
        50,
        "group.initial.rebalance.delay.ms: a new group's first join phase lasts this long, and again as "
        "long each time members keep arriving (up to the rebalance timeout); Kafka's default is 3000, 0 = none",
    )
    group_max_size: int = _opt(2**31 - 1, "group.max.size")
    # KIP-848 consumer groups (group.protocol=consumer).
    group_consumer_heartbeat_interval_ms: int = _opt(5000, "group.consumer.heartbeat.interval.ms")
    group_consumer_session_timeout_ms: int = _opt(45000, "group.consumer.session.timeout.ms")
    group_consumer_max_size: int = _opt(2**31 - 1, "group.consumer.max.size")
    group_consumer_assignors: str = _opt(
        "uniform,range",
        "group.consumer.assignors: server-side assignors (uniform, range), comma-separated; the first is the default",
    )
    group_consumer_migration_policy: str = _opt(
        "bidirectional",
        "group.consumer.migration.policy: which non-empty groups convert online between the "
        "classic and the consumer protocol (upgrade: a classic group a consumer-protocol member joins; "
        "downgrade: a consumer group left with classic members only); Empty groups always convert",
        choices=("bidirectional", "upgrade", "downgrade", "disabled"),
    )
    group_consumer_assignment_interval_ms: int = _opt(
        1000,
        "group.consumer.assignment.interval.ms: a consumer group's target assignment is computed again at "
        "most once per interval (the members keep the last one meanwhile); 0 = at every change",
    )
    group_consumer_min_assignment_interval_ms: int = _opt(0, "group.consumer.min.assignment.interval.ms")
    group_consumer_max_assignment_interval_ms: int = _opt(15000, "group.consumer.max.assignment.interval.ms")
    group_consumer_regex_refresh_interval_ms: int = _opt(
        600000,
        "group.consumer.regex.refresh.interval.ms (Kafka's internal setting): a consumer group's subscribed "
        "regexes are resolved again at least this often",
    )
    group_consumer_regex_min_refresh_interval_ms: int = _opt(
        10000,
        "a consumer group's subscribed regexes are resolved again at most once per this interval, a new regex "
        "or a created topic included (Kafka's fixed 10 s; the test profile's is 0)",
    )
    # KIP-932 share groups.
    group_share_session_timeout_ms: int = _opt(45000, "group.share.session.timeout.ms")
    group_share_heartbeat_interval_ms: int = _opt(5000, "group.share.heartbeat.interval.ms")
    group_share_max_size: int = _opt(200, "group.share.max.size")
    group_share_assignment_interval_ms: int = _opt(
        1000,
        "group.share.assignment.interval.ms: a share group's target assignment is computed again at "
        "most once per interval (the members keep the last one meanwhile); 0 = at every change",
    )
    group_share_min_assignment_interval_ms: int = _opt(0, "group.share.min.assignment.interval.ms")
    group_share_max_assignment_interval_ms: int = _opt(15000, "group.share.max.assignment.interval.ms")
    group_share_record_lock_duration_ms: int = _opt(
        30000, "group.share.record.lock.duration.ms: how long a share consumer holds the records it fetched"
    )
    group_share_delivery_count_limit: int = _opt(
        5, "group.share.delivery.count.limit: deliveries of a record before it is archived (2-10)"
    )
    group_share_partition_max_record_locks: int = _opt(
        2000, "group.share.partition.max.record.locks: in-flight records per share-partition"
    )
    errors_deadletterqueue_auto_create_topics_enable: bool = _opt(
        False,
        "errors.deadletterqueue.auto.create.topics.enable: a share group's dead-letter topic that does "
        "not exist is created at its first dead letter (KIP-1191)",
    )
    errors_deadletterqueue_topic_name_prefix: str = _opt(
        "dlq.", "errors.deadletterqueue.topic.name.prefix: what a dead-letter topic's name must start with ('': any)"
    )
    # KIP-1071 streams groups.
    group_streams_session_timeout_ms: int = _opt(45000, "group.streams.session.timeout.ms")
    group_streams_heartbeat_interval_ms: int = _opt(5000, "group.streams.heartbeat.interval.ms")
    group_streams_max_size: int = _opt(2**31 - 1, "group.streams.max.size")
    group_streams_num_standby_replicas: int = _opt(
        0, "group.streams.num.standby.replicas: standby copies of each stateful task a streams group runs"
    )
    group_streams_initial_rebalance_delay_ms: int = _opt(
        3000,
        "group.streams.initial.rebalance.delay.ms: how long the first member of an empty streams group "
        "waits for others before tasks are assigned",
    )
    group_streams_assignment_interval_ms: int = _opt(
        1000,
        "group.streams.assignment.interval.ms: a streams group's target assignment is computed again at "
        "most once per interval; 0 = at every change",
    )
    group_streams_num_warmup_replicas: int = _opt(
        2,
        "group.streams.num.warmup.replicas: accepted, without effect: Kafka 4.4 assigns no warm-up tasks, nor does this",
    )
    group_streams_acceptable_recovery_lag: int = _opt(
        10000,
        "group.streams.acceptable.recovery.lag: the lag at which a task's state counts as caught up (sent to members)",
    )
    # Bounds on the GROUP config resource's settings (Kafka's names and defaults).
    group_consumer_min_session_timeout_ms: int = _opt(45000, "group.consumer.min.session.timeout.ms")
    group_consumer_max_session_timeout_ms: int = _opt(60000, "group.consumer.max.session.timeout.ms")
    group_consumer_min_heartbeat_interval_ms: int = _opt(5000, "group.consumer.min.heartbeat.interval.ms")
    group_consumer_max_heartbeat_interval_ms: int = _opt(15000, "group.consumer.max.heartbeat.interval.ms")
    group_share_min_session_timeout_ms: int = _opt(45000, "group.share.min.session.timeout.ms")
    group_share_max_session_timeout_ms: int = _opt(60000, "group.share.max.session.timeout.ms")
    group_share_min_heartbeat_interval_ms: int = _opt(5000, "group.share.min.heartbeat.interval.ms")
    group_share_max_heartbeat_interval_ms: int = _opt(15000, "group.share.max.heartbeat.interval.ms")
    group_share_min_record_lock_duration_ms: int = _opt(15000, "group.share.min.record.lock.duration.ms")
    group_share_max_record_lock_duration_ms: int = _opt(60000, "group.share.max.record.lock.duration.ms")
    group_share_min_delivery_count_limit: int = _opt(2, "group.share.min.delivery.count.limit (2-5)")
    group_share_max_delivery_count_limit: int = _opt(10, "group.share.max.delivery.count.limit (5-25)")
    group_share_max_share_sessions: int = _opt(
        2000,
        "group.share.max.share.sessions: share sessions (ShareFetch) open at once; more: SHARE_SESSION_LIMIT_REACHED",
    )
    share_partitions: int = _opt(50, "partitions of __share_group_state (share.coordinator.state.topic.num.partitions)")
    share_snapshot_update_records: int = _opt(500, "share.coordinator.snapshot.update.records.per.snapshot")
    share_coordinator_cold_partition_snapshot_interval_ms: int = _opt(
        300_000,
        "share.coordinator.cold.partition.snapshot.interval.ms: how often share-partitions whose last "
        "snapshot is at least this old get a new one (so the state topic can be pruned)",
    )
    offset_metadata_max_bytes: int = _opt(4096, "offset.metadata.max.bytes")
    offsets_retention_minutes: int = _opt(7 * 24 * 60, "offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = _opt(600_000, "offsets.retention.check.interval.ms")
    # Transaction coordinator.
    transaction_partitions: int = _opt(50, "partitions of __transaction_state (transaction.state.log.num.partitions)")
    transaction_max_timeout_ms: int = _opt(
        900_000, "transaction.max.timeout.ms: longest transaction.timeout.ms a producer may ask for"
    )
    transaction_abort_check_interval_ms: int = _opt(
        10_000,
        "how often transactions past their timeout are aborted "
        "(transaction.abort.timed.out.transaction.cleanup.interval.ms)",
    )
    transactional_id_expiration_ms: int = _opt(
        604_800_000, "transactional.id.expiration.ms: an unused transactional id is forgotten after this long"
    )
    transaction_remove_expired_interval_ms: int = _opt(
        3_600_000,
        "how often transactional ids unused for transactional.id.expiration.ms are removed "
        "(transaction.remove.expired.transaction.cleanup.interval.ms)",
    )
    # Data plane.
    auto_create_topics: bool = _opt(True, "auto.create.topics.enable")
    num_partitions: int = _opt(1, "partitions of auto-created topics (num.partitions)")
    log_retention_check_interval_ms: int = _opt(
        30_000, "how often topic logs apply retention (log.retention.check.interval.ms)"
    )
    log_cleaner_backoff_ms: int = _opt(
        15_000,
        "how often the log cleaner looks at compacted logs again (log.cleaner.backoff.ms; also a "
        "dynamic broker config)",
    )
    quota_window_num: int = _opt(11, "samples a client quota's rate is measured over (quota.window.num)")
    quota_window_size_seconds: int = _opt(1, "length of each such sample (quota.window.size.seconds)")
    max_incremental_fetch_session_cache_slots: int = _opt(
        1000, "incremental fetch sessions kept (max.incremental.fetch.session.cache.slots; 0: none)"
    )
    # Security (off by default: the dev stand-in stays zero-config).
    listeners: str | None = _opt(
        None,
        "several ports, each with its protocol: PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093 "
        "(replaces --host, --port and --security-protocol)",
    )
    advertised_listeners: str | None = _opt(
        None, "what clients of each listener are told to connect to, same form (default: --listeners)"
    )
    security_protocol: str = _opt(
        "PLAINTEXT", "security.protocol of the Kafka port", choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
    )
    ssl_certfile: Path | None = _opt(None, "TLS certificate chain (PEM) for SSL / SASL_SSL")
    ssl_keyfile: Path | None = _opt(None, "its private key (PEM; default: in --ssl-certfile)")
    ssl_cafile: Path | None = _opt(None, "CA certificates that sign client certificates")
    ssl_client_auth: str = _opt(
        "none", "ssl.client.auth: none | requested | required", choices=("none", "requested", "required")
    )
    sasl_mechanisms: str = _opt(
        "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN", "sasl.enabled.mechanisms for SASL_PLAINTEXT / SASL_SSL"
    )
    sasl_users: Path | None = _opt(None, "file of user:password lines (dev use) for SASL_PLAINTEXT / SASL_SSL")
    authorizer: bool = _opt(
        False,
        "check ACLs on every request (Kafka's StandardAuthorizer rules); "
        "manage them with CreateAcls / DescribeAcls / DeleteAcls",
    )
    super_users: str = _opt("", "super.users: principals never checked, e.g. User:admin;User:ops")
    allow_everyone_if_no_acl_found: bool = _opt(
        True, "allow.everyone.if.no.acl.found: a resource no ACL names is open to all"
    )
    metrics_port: int | None = _opt(
        None, "serve Prometheus /metrics, /health and /ready on this port (off by default; 0 = any free port)"
    )
    metrics_lag_sample_ms: int = _opt(
        5000, "how often the metrics note each partition's newest commit for the lag status (Burrow's window)"
    )
    enable_test_control: bool = _opt(
        False,
        "serve the test control as JSON over HTTP on --metrics-port: injected faults (/faults), "
        "request tracking (/requests), narrowed API versions (/api-versions) and, with --brokers N, "
        "stopping brokers and moving coordinators and leaders (/cluster); "
        "for test clusters only, never in production",
    )
    fault_seed: int | None = _opt(
        None,
        "seed of the random draws of faults injected with a probability "
        "(a test that gives one sees the same faults every run)",
    )
    profile: str | None = _opt(
        None,
        "a set of settings for one use, under the flags given explicitly: client-suite (what client "
        "libraries' integration suites expect: a SASL listener on the next port, the authorizer, ...; see "
        "docs/client-suites.md); test (what tests want: no rebalance or assignment delays, short KIP-848 and "
        "share heartbeat intervals, low minimums, fsync never; see docs/operations.md)",
        choices=tuple(PROFILES),
    )
    log_level: str = _opt("INFO", "logging level: DEBUG, INFO, WARNING or ERROR")
    log_format: str = _opt(
        "text", "log lines as text, or one JSON object each (for log collectors)", choices=("text", "json")
    )


# Settings a value below which would break the server (a quota rate over no sample, a cleaner
# that never sleeps, a group hashed onto no partition): Kafka's ConfigDef bounds of the same names.
_AT_LEAST = {
    "offsets_partitions": 1,  # offsets.topic.num.partitions (GroupCoordinatorConfig)
    "transaction_partitions": 1,  # transaction.state.log.num.partitions
    "share_partitions": 1,  # share.coordinator.state.topic.num.partitions
    "num_partitions": 1,
    "offsets_retention_minutes": 1,
    "offsets_retention_check_interval_ms": 1,
    "share_coordinator_cold_partition_snapshot_interval_ms": 1,
    "quota_window_num": 1,
    "quota_window_size_seconds": 1,
    "log_cleaner_backoff_ms": 0,
    "group_consumer_assignment_interval_ms": 0,
    "group_consumer_min_assignment_interval_ms": 0,
    "group_consumer_regex_refresh_interval_ms": 0,
    "group_consumer_regex_min_refresh_interval_ms": 0,
    "group_share_assignment_interval_ms": 0,
    "group_share_min_assignment_interval_ms": 0,
}


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")  # a boolean KCOORD_ variable's values


def _env_name(name: str) -> str:
    return "KCOORD_" + name.upper()


# KCOORD_* variables read elsewhere than this server's settings: the build and the import of the
# compiled modules (protocol/compiled.py, setup.py) and the admin CLI's defaults. Not warned of.
NOT_SETTINGS = frozenset({"KCOORD_PURE", "KCOORD_OPT_LEVEL", "KCOORD_BOOTSTRAP_SERVER", "KCOORD_CONTROL"})


def parse_args(argv: list[str] | None = None) -> Config:
    """The configuration from flags over KCOORD_* variables over defaults. A bad value
    (from either) is one line on stderr and exit status 2; --help works whatever the
    environment says."""
    parser = argparse.ArgumentParser(
        prog="python -m coordinator",
        description="Kafka-wire-protocol consumer-group coordinator and stand-in broker. "
        "Every flag can also be set by the environment variable shown.",
    )
    parser.error = _one_line_error(parser)  # type: ignore[method-assign,assignment]  # argparse's documented way to change how usage errors are reported
    known = set(NOT_SETTINGS)
    env_errors = []
    for f in fields(Config):
        env = _env_name(f.name)
        known.add(env)
        flag = "--" + f.name.replace("_", "-")
        kind = f.type if isinstance(f.type, type) else None
        typ = {"int": int, "int | None": int, "Path": Path, "Path | None": Path, "str | None": str, "str": str}.get(
            str(f.type), kind or str
        )
        raw = os.environ.get(env)
        if str(f.type) == "bool":
            default = f.default
            if raw is not None and raw.lower() in _TRUE + _FALSE:
                default = raw.lower() in _TRUE
            elif raw is not None:
                env_errors.append(f"{env}={raw!r}: not one of {', '.join(_TRUE + _FALSE)}")
            shown = f" (default: {'on' if f.default else 'off'})"
            parser.add_argument(
                flag,
                default=default,
                action=argparse.BooleanOptionalAction,
                help=f"{f.metadata['help']}{shown} [env {env}]",
            )
            continue
        default = f.default
        if raw is not None:
            try:
                default = typ(raw)
                if "choices" in f.metadata and default not in f.metadata["choices"]:
                    raise ValueError(f"not one of {', '.join(f.metadata['choices'])}")
            except ValueError as e:
                why = e if "choices" in f.metadata else f"not a valid {typ.__name__}"
                env_errors.append(f"{env}={raw!r}: {why}")
                default = f.default
        extra = {"choices": f.metadata["choices"]} if "choices" in f.metadata else {}
        shown = "" if default in (None, "") else " (default: %(default)s)"
        parser.add_argument(flag, type=typ, default=default, help=f"{f.metadata['help']}{shown} [env {env}]", **extra)
    ns = parser.parse_args(argv)
    if env_errors:
        parser.error(env_errors[0])
    for name, least in _AT_LEAST.items():
        if getattr(ns, name) < least:
            parser.error(f"--{name.replace('_', '-')}: {getattr(ns, name)}; at least {least}")
    for group_type in ("consumer", "share"):
        interval, least, most = (
            getattr(ns, f"group_{group_type}_{bound}assignment_interval_ms") for bound in ("", "min_", "max_")
        )
        if not least <= interval <= most:  # (as Kafka's GroupCoordinatorConfig requires)
            parser.error(
                f"--group-{group_type}-assignment-interval-ms: {interval}; must be between "
                f"--group-{group_type}-min-assignment-interval-ms ({least}) and "
                f"--group-{group_type}-max-assignment-interval-ms ({most})"
            )
    # ShareGroupConfig's ranges (between(lo, hi)) and its validate(): max >= limit >= min.
    for bound, lo, hi in (("", 2, 10), ("min_", 2, 5), ("max_", 5, 25)):
        value = getattr(ns, f"group_share_{bound}delivery_count_limit")
        if not lo <= value <= hi:
            parser.error(
                f"--group-share-{bound.replace('_', '-')}delivery-count-limit: {value}; must be between {lo} and {hi}"
            )
    limit, least, most = (getattr(ns, f"group_share_{bound}delivery_count_limit") for bound in ("", "min_", "max_"))
    if not least <= limit <= most:
        parser.error(
            f"--group-share-delivery-count-limit: {limit}; must be between "
            f"--group-share-min-delivery-count-limit ({least}) and --group-share-max-delivery-count-limit ({most})"
        )
    for name in sorted(n for n in os.environ if n.startswith("KCOORD_") and n not in known):
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        print(f"warning: {name} is not a setting of this server, ignored{hint}", file=sys.stderr)
    return Config(**apply_profile(vars(ns), _explicit(sys.argv[1:] if argv is None else argv)))


def _explicit(argv: list[str]) -> set[str]:
    """The settings given by a flag or a KCOORD_* variable (a profile does not change them)."""
    out = set()
    for f in fields(Config):
        flag = "--" + f.name.replace("_", "-")
        if os.environ.get(_env_name(f.name)) is not None or any(
            a == flag or a.startswith(flag + "=") or a == "--no-" + flag[2:] for a in argv
        ):
            out.add(f.name)
    return out


def _one_line_error(parser: argparse.ArgumentParser) -> Callable[[str], NoReturn]:
    def error(message: str) -> NoReturn:
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)

    return error
