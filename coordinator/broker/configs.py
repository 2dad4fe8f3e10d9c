"""Where a config's value comes from: a topic's own setting, or the broker configs behind it
(dynamic per broker, dynamic cluster default, static, default: Kafka's order).

BrokerConfigs keeps the static configs (this server's flags, under Kafka's names) and the
dynamic ones AlterConfigs / IncrementalAlterConfigs set, persisted in the data dir.
resolve() gives a topic's typed effective values; describe_topic()/describe_broker() give
DescribeConfigs' entries with sources and synonyms as Kafka builds them.
"""

from __future__ import annotations

import re

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from .config_defs import (
    BROKER_LOG_CONFIG_DEFS,
    DEFAULT_CONFIG,
    DEFAULT_RELEASE,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    LONG_MAX,
    PASSWORD,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIG,
    UNKNOWN,
    ConfigDef,
    ConfigError,
    check_topic_configs,
    kafka_table,
    parse,
    synonym_as_topic_value,
    to_string,
    topic_defs,
    typed,
)
from ..durable import JsonFile
from ..log.config import LogConfig
from .dynamic_configs import (
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    DYNAMIC_DEFS,
    PER_BROKER_CONFIGS,
    SECURITY_CONFIG_DEFS,
    STATIC_ONLY,
    listener_base,
)

BROKER_CONFIGS_FILE = "broker-configs.json"
# What Kafka's storage format step writes as the cluster's first dynamic default (4.0 on):
# DescribeConfigs then shows min.insync.replicas as a DYNAMIC_DEFAULT_BROKER_CONFIG.
FORMATTED_CLUSTER_DEFAULTS = {"min.insync.replicas": "1"}

# What Java's Integer.parseInt takes (Kafka's broker resource names are parsed by it)
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


@cache
def broker_defs(release: str = DEFAULT_RELEASE) -> tuple[dict[str, ConfigDef], frozenset[str]]:
    """Every broker config of a release (Kafka's names, types, defaults and documentation,
    with this server's validators where it has one), and the names of the dynamic ones."""
    ours = {**DYNAMIC_DEFS, **BROKER_LOG_CONFIG_DEFS}
    defs: dict[str, ConfigDef] = {}
    dynamic = set()
    for name, type_, default, is_dynamic, doc in kafka_table(release)["broker"]:
        mine = ours.get(name)
        defs[name] = ConfigDef(name, type_, typed(type_, default), doc or "", mine.validator if mine else None)
        if is_dynamic:
            dynamic.add(name)
    return defs, frozenset(dynamic)


@dataclass(frozen=True)
class Entry:
    """One DescribeConfigs result (synonyms as (name, value, source))."""

    name: str
    value: str | None
    source: int
    read_only: bool
    type: int
    doc: str | None
    synonyms: tuple[tuple[str, str | None, int], ...]
    sensitive: bool = False  # passwords, and configs of no known type: described without a value


class BrokerConfigs:
    def __init__(
        self,
        data_dir: Path | None,
        node_id: int,
        static: dict[str, tuple[ConfigDef, Any]],
        release: str = DEFAULT_RELEASE,
        live: Callable[[str, str], Any] | None = None,
        node_ids: Iterable[int] = (),
        listeners: Iterable[Callable[[BrokerConfigs], None]] = (),
    ) -> None:
        self.data_dir = data_dir
        self.node_id = node_id
        self.release = release
        self.defs, self.dynamic_names = broker_defs(release)
        self.topic_defs = topic_defs(release)
        # (name, node id) -> a static value known only once the server runs (the listeners'
        # bound ports), or None: the server's, read when described
        self.live = live
        # The node ids whose broker resource this is: with --brokers N, every broker of the
        # process (they share one set of configs).
        self.node_ids = {str(node_id)} | {str(n) for n in node_ids}
        # name -> (definition, typed value): the server's own settings, read-only
        self.static_defs = {name: d for name, (d, _) in static.items()}
        self.static = {name: v for name, (_, v) in static.items() if v is not None}
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_default: dict[str, str] = {}
        self.changes = 0
        # Called with these configs after each change: the components whose settings are dynamic
        # (Kafka's Reconfigurables; a part given these configs adds itself when it is built).
        self.listeners: list[Callable[[BrokerConfigs], None]] = list(listeners)
        self.file = JsonFile(data_dir / BROKER_CONFIGS_FILE) if data_dir is not None else None
        first = release >= "4" and (self.file is None or not self.file.path.exists())
        if self.file is not None:
            self.dynamic_broker, self.dynamic_default = self.file.load(({}, {}), parse=self._layers)
        if first:  # a new data dir is formatted as Kafka 4's storage tool formats one
            self.dynamic_default = dict(FORMATTED_CLUSTER_DEFAULTS)

    def _layers(self, doc: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
        """(this broker's dynamic configs, the cluster defaults) from the stored document;
        ValueError for a value its config's type refuses (every topic's configs derive from them)."""
        broker, default = ({str(k): str(v) for k, v in doc.get(name, {}).items()} for name in ("broker", "default"))
        for name, raw in [*broker.items(), *default.items()]:
            d = self.definition(name)
            try:
                if d is not None:
                    parse(d, raw)
            except ConfigError as e:
                raise ValueError(str(e)) from None
        return broker, default

    def definition(self, name: str) -> ConfigDef | None:
        """Kafka's definition of a broker config (a listener override: its base config's);
        None for a name Kafka does not know (a custom config)."""
        d = self.defs.get(name) or DYNAMIC_DEFS.get(name) or self.static_defs.get(name)
        base_name = listener_base(name) if d is None else None
        if base_name is not None:
            base = self.definition(base_name)
            d = None if base is None else ConfigDef(name, base.type, None, base.doc, base.validator)
        return d

    def is_dynamic(self, name: str) -> bool:
        """Whether AlterConfigs may set it (DynamicConfig.Broker: every name but Kafka's static ones)."""
        if name in self.defs:
            return name in self.dynamic_names
        if name in self.static_defs:
            return name in DYNAMIC_DEFS
        # a name Kafka does not know: a custom config (3.9's static ones it had are refused)
        return self.release >= "4" or name not in STATIC_ONLY

    def _static(self, name: str, node: str) -> Any:
        """The server's own setting of `name` (None: Kafka's default applies)."""
        if self.live is not None:
            value = self.live(name, node)
            if value is not None:
                return value
        return self.static.get(name)

    def value(self, name: str) -> Any:
        """The typed value in force (None: unset with no default, or a custom config)."""
        d = self.definition(name)
        if d is None:
            return None
        for layer in (self.dynamic_broker, self.dynamic_default):
            if name in layer:
                return parse(d, layer[name])
        static = self._static(name, str(self.node_id))
        return d.default if static is None else static

    def _sources(self, name: str, node: str | None = None) -> list[tuple[str, str | None, int]]:
        """Every place a value for `name` is set, most important first."""
        d = self.definition(name)
        out: list[tuple[str, str | None, int]] = []
        if name in self.dynamic_broker:
            out.append((name, self.dynamic_broker[name], DYNAMIC_BROKER_CONFIG))
        if name in self.dynamic_default:
            out.append((name, self.dynamic_default[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        static = self._static(name, node or str(self.node_id))
        if static is not None:
            out.append((name, to_string(d, static) if d is not None else str(static), STATIC_BROKER_CONFIG))
        if d is not None and d.default is not None:
            out.append((name, to_string(d, d.default), DEFAULT_CONFIG))
        return out

    def synonyms(self, names: tuple[str, ...]) -> list[tuple[str, str | None, int]]:
        """Kafka's configSynonyms: by source, then by synonym; entries before the first
        naming names[0] are dropped (so log.retention.hours' default is not listed under
        retention.ms while log.retention.ms itself is unset, as Kafka answers)."""
        by_source: dict[int, list[Any]] = {}
        for n in names:
            for entry in self._sources(n):
                by_source.setdefault(entry[2], []).append(entry)
        ordered = [
            e
            for src in (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG)
            for e in by_source.get(src, [])
        ]
        while ordered and ordered[0][0] != names[0]:
            ordered.pop(0)
        return ordered

    # changes ----------------------------------------------------------------------------

    def layer(self, resource_name: str) -> dict[str, str]:
        """The dynamic configs a broker resource name addresses: this node's, or ("") the
        cluster default; ConfigError(INVALID_REQUEST) for another broker."""
        if resource_name == "":
            return self.dynamic_default
        if not _JAVA_INT.fullmatch(resource_name) or not -(2**31) <= int(resource_name) < 2**31:
            raise ConfigError(f"Broker id must be an integer, but it is: {resource_name}", E.invalid_request)
        if str(int(resource_name)) in self.node_ids:  # ("+1" and "01" name broker 1, as parseInt reads them)
            return self.dynamic_broker
        raise ConfigError(
            f"Unexpected broker id, expected {self.node_id} or empty string, but received {resource_name}",
            E.invalid_request,
        )

    def validate(self, values: dict[str, str | None], per_broker: bool) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs, in its order: names that are not
        dynamic, security configs without a listener prefix, values, then per-broker configs
        given as the cluster default. A broker refuses these with INVALID_REQUEST and the
        message (ConfigAdminManager.validateBrokerConfigChange)."""

        def refuse(names: list[str], why: str) -> None:
            if names:  # (Kafka 4 writes a Java set, 3.9 a Scala one)
                shown = f"[{', '.join(sorted(names))}]" if self.release >= "4" else f"Set({', '.join(sorted(names))})"
                raise ConfigError(f"{why}: {shown}", E.invalid_request)

        refuse([n for n in values if not self.is_dynamic(n)], "Cannot update these configs dynamically")
        refuse(
            [n for n in values if n in SECURITY_CONFIG_DEFS],
            "These security configs can be dynamically updated only per-listener using the listener prefix",
        )
        for name, value in values.items():
            d = self.definition(name)
            if d is not None and value is not None:
                try:
                    parse(d, value)
                except ConfigError as e:
                    raise ConfigError(str(e), E.invalid_request) from None
        if not per_broker:

            def per_broker_only(name: str) -> bool:
                base = listener_base(name)
                return name in PER_BROKER_CONFIGS or (base is not None and base not in CLUSTER_LEVEL_LISTENER_CONFIGS)

            refuse(
                [n for n in values if per_broker_only(n)],
                "Cannot update these configs at default cluster level, broker id must be specified",
            )

    async def replace(self, resource_name: str, settings: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """A broker resource's dynamic configs become settings(the ones in force), once
        durable. OSError if the disk refused, or what settings() raised: nothing changed."""
        self.layer(resource_name)  # (the name is checked before anything is written)

        def commit() -> tuple[Any, Any]:
            values = settings(dict(self.layer(resource_name)))
            broker = values if resource_name else self.dynamic_broker
            default = values if not resource_name else self.dynamic_default

            def install() -> None:
                self.dynamic_broker, self.dynamic_default = broker, default
                self.changes += 1
                for listener in self.listeners:
                    listener(self)

            return {"broker": broker, "default": default}, install

        if self.file is None:
            commit()[1]()
        else:
            await self.file.update(commit)

    # DescribeConfigs --------------------------------------------------------------------

    def describe_broker(self, resource_name: str) -> list[Entry]:
        """Kafka answers a broker id with every config in force, and "" (the cluster
        default) with only the dynamic defaults set."""
        layer = self.layer(resource_name)
        names = (
            sorted(layer)
            if resource_name == ""
            # (this server's own settings under a name the release does not have are not listed)
            else sorted(set(self.defs) | set(self.dynamic_broker) | set(self.dynamic_default))
        )
        out = []
        for name in names:
            d = self.definition(name)
            syns: list[tuple[str, str | None, int]]
            if resource_name == "":
                syns = [(name, layer[name], DYNAMIC_DEFAULT_BROKER_CONFIG)]
            else:
                syns = self._sources(name, resource_name)
            source = syns[0][2] if syns else DEFAULT_CONFIG
            if d is None:  # a custom config: Kafka knows no type, so treats it as sensitive
                value = syns[0][1] if syns else None
                out.append(Entry(name, value, source, True, UNKNOWN, None, tuple(syns), sensitive=True))
                continue
            value = layer[name] if resource_name == "" else (syns[0][1] if syns else None)
            out.append(
                Entry(
                    name,
                    value,
                    source,
                    not self.is_dynamic(name),
                    d.type,
                    d.doc,
                    tuple(syns),
                    sensitive=d.type == PASSWORD,
                )
            )
        return out


def validate_topic_configs(values: dict[str, str | None], defs: dict[str, ConfigDef] | None = None) -> dict[str, Any]:
    """Parse a topic's own settings (None values are skipped); ConfigError if any is bad."""
    defs = topic_defs() if defs is None else defs
    out = {}
    for name, raw in values.items():
        d = defs.get(name)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if raw is not None:
            out[name] = parse(d, raw)
    return out


def resolve(overrides: dict[str, str], broker: BrokerConfigs) -> dict[str, Any]:
    """Every topic config's typed value in force: the topic's own, else the first of its
    broker synonyms that has one, else the topic default."""
    values = {}
    for name, d in broker.topic_defs.items():
        if name in overrides:
            values[name] = parse(d, overrides[name])
            continue
        value = d.default
        for syn in d.synonyms:
            v = broker.value(syn)
            if v is not None:
                value = synonym_as_topic_value(syn, v)
                break
        values[name] = value
    check_topic_configs(values)
    return values


def describe_topic(overrides: dict[str, str], broker: BrokerConfigs) -> list[Entry]:
    values = resolve(overrides, broker)
    out = []
    for name, d in broker.topic_defs.items():
        syns = broker.synonyms(d.synonyms) if d.synonyms else []
        if name in overrides:
            syns.insert(0, (name, overrides[name], TOPIC_CONFIG))
        source = syns[0][2] if syns else DEFAULT_CONFIG
        out.append(Entry(name, to_string(d, values[name]), source, False, d.type, d.doc, tuple(syns)))
    return out


def log_config(base: LogConfig, values: dict[str, Any]) -> LogConfig:
    """The log settings a topic's effective configs make."""
    from dataclasses import replace

    policy = ",".join(sorted(set(values["cleanup.policy"])))
    segment_ms = values["segment.ms"]
    max_lag = values["max.compaction.lag.ms"]
    if "compact" in policy and max_lag < segment_ms:
        segment_ms = max_lag  # Kafka rolls a compacted log by max.compaction.lag.ms too
    return replace(
        base,
        segment_bytes=values["segment.bytes"],
        segment_ms=segment_ms,
        index_interval_bytes=max(values["index.interval.bytes"], 1),
        cleanup_policy=policy,
        retention_ms=None if values["retention.ms"] < 0 else values["retention.ms"],
        retention_bytes=None if values["retention.bytes"] < 0 else values["retention.bytes"],
        delete_retention_ms=values["delete.retention.ms"],
        min_cleanable_dirty_ratio=values["min.cleanable.dirty.ratio"],
        min_compaction_lag_ms=values["min.compaction.lag.ms"],
        max_compaction_lag_ms=None if max_lag == LONG_MAX else max_lag,
    )


def static_broker_configs(c: Any) -> dict[str, tuple[ConfigDef, Any]]:
    """This server's settings under Kafka's broker config names (read-only in
    DescribeConfigs); a setting equal to Kafka's default is reported as DEFAULT_CONFIG."""
    from .config_defs import BOOLEAN, INT, LIST, LONG, SHORT, STRING

    rows = [
        (
            "auto.create.topics.enable",
            BOOLEAN,
            True,
            c.auto_create_topics,
            "Create a topic that Metadata or Produce names and that does not exist.",
        ),
        ("num.partitions", INT, 1, c.num_partitions, "Partitions of auto-created topics."),
        ("default.replication.factor", INT, 1, 1, "Replication factor of auto-created topics."),
        ("offsets.topic.num.partitions", INT, 50, c.offsets_partitions, "Partitions of __consumer_offsets."),
        (
            "offsets.retention.minutes",
            INT,
            10080,
            c.offsets_retention_minutes,
            "How long committed offsets of an empty group are kept.",
        ),
        (
            "offsets.retention.check.interval.ms",
            LONG,
            600_000,
            c.offsets_retention_check_interval_ms,
            "How often expired offsets are removed.",
        ),
        ("offset.metadata.max.bytes", INT, 4096, c.offset_metadata_max_bytes, "Largest commit metadata."),
        (
            "group.initial.rebalance.delay.ms",
            INT,
            3000,
            c.group_initial_rebalance_delay_ms,
            "How long a new group waits for more members before its first rebalance.",
        ),
        ("group.min.session.timeout.ms", INT, 6000, c.group_min_session_timeout_ms, "Shortest session timeout."),
        ("group.max.session.timeout.ms", INT, 1_800_000, c.group_max_session_timeout_ms, "Longest session timeout."),
        ("group.max.size", INT, 2**31 - 1, c.group_max_size, "Most members of a group."),
        (
            "group.consumer.heartbeat.interval.ms",
            INT,
            5000,
            c.group_consumer_heartbeat_interval_ms,
            "Heartbeat interval of consumer-protocol members.",
        ),
        (
            "group.consumer.session.timeout.ms",
            INT,
            45000,
            c.group_consumer_session_timeout_ms,
            "Session timeout of consumer-protocol members.",
        ),
        ("group.consumer.max.size", INT, 2**31 - 1, c.group_consumer_max_size, "Most members of a consumer group."),
        # The bounds of group configs (and the share groups' settings), as --profile test
        # lowers them: DescribeConfigs shows what the server really uses.
        *(
            (
                f"group.{kind}.{setting.replace('_', '.')}.ms",
                INT,
                default,
                getattr(c, f"group_{kind}_{setting}_ms"),
                f"{what} of {kind} groups.",
            )
            for kind, setting, default, what in (
                ("consumer", "min_session_timeout", 45000, "The shortest session timeout"),
                ("consumer", "max_session_timeout", 60000, "The longest session timeout"),
                ("consumer", "min_heartbeat_interval", 5000, "The shortest heartbeat interval"),
                ("consumer", "max_heartbeat_interval", 15000, "The longest heartbeat interval"),
                ("share", "heartbeat_interval", 5000, "The heartbeat interval"),
                ("share", "session_timeout", 45000, "The session timeout"),
                ("share", "min_session_timeout", 45000, "The shortest session timeout"),
                ("share", "max_session_timeout", 60000, "The longest session timeout"),
                ("share", "min_heartbeat_interval", 5000, "The shortest heartbeat interval"),
                ("share", "max_heartbeat_interval", 15000, "The longest heartbeat interval"),
                ("share", "record_lock_duration", 30000, "The record lock duration"),
                ("share", "min_record_lock_duration", 15000, "The shortest record lock duration"),
                ("share", "max_record_lock_duration", 60000, "The longest record lock duration"),
            )
        ),
        *(
            (
                f"group.{kind}.{bound}assignment.interval.ms",
                INT,
                default,
                getattr(c, f"group_{kind}_{bound.replace('.', '_')}assignment_interval_ms"),
                f"The {what}interval between assignment updates for a {kind} group.",
            )
            for kind in ("consumer", "share")
            for bound, default, what in (("", 1000, ""), ("min.", 0, "minimum "), ("max.", 15000, "maximum "))
        ),
        (
            "group.consumer.assignors",
            LIST,
            "uniform,range",
            c.group_consumer_assignors,
            "Server-side assignors of consumer groups; the first is the default.",
        ),
        (
            "errors.deadletterqueue.auto.create.topics.enable",
            BOOLEAN,
            False,
            c.errors_deadletterqueue_auto_create_topics_enable,
            "Create a share group's dead-letter topic at its first dead letter.",
        ),
        (
            "errors.deadletterqueue.topic.name.prefix",
            STRING,
            "dlq.",
            c.errors_deadletterqueue_topic_name_prefix,
            "What a share group's dead-letter topic's name must start with.",
        ),
        ("socket.request.max.bytes", INT, 104_857_600, c.socket_request_max_bytes, "Largest request accepted."),
        (
            "connections.max.idle.ms",
            LONG,
            600_000,
            c.connections_max_idle_ms,
            "Idle connections are closed after this long.",
        ),
        ("max.connections", INT, 2**31 - 1, c.max_connections, "Most connections open at once."),
        ("fetch.max.bytes", INT, 57_671_680, c.fetch_max_bytes, "Largest answer to one Fetch."),
        (
            "log.retention.check.interval.ms",
            LONG,
            300_000,
            c.log_retention_check_interval_ms,
            "How often logs apply retention.",
        ),
        ("quota.window.num", INT, 11, c.quota_window_num, "Samples a client quota's rate is measured over."),
        ("quota.window.size.seconds", INT, 1, c.quota_window_size_seconds, "Length of each sample."),
        (
            "log.cleaner.backoff.ms",
            LONG,
            15_000,
            c.log_cleaner_backoff_ms,
            "How long the cleaner sleeps when no log needs cleaning.",
        ),
        ("log.dirs", LIST, None, [str(Path(c.data_dir).resolve())], "The data dir: every log, and the stores."),
    ]
    slots = getattr(c, "max_incremental_fetch_session_cache_slots", None)
    if slots is not None:
        rows.append(
            ("max.incremental.fetch.session.cache.slots", INT, 1000, slots, "Most incremental fetch sessions kept.")
        )
    rows.append(("process.roles", LIST, None, ["broker", "controller"], "This node's roles: a combined node."))
    # The internal topics are kept once and reported with as many replicas as there are
    # brokers, up to Kafka's 3, with Kafka's min.isr of 2 where there are two.
    replicas, isr = min(c.brokers, 3), min(c.brokers, 2)
    for prefix, least in (
        ("offsets.topic", None),
        ("transaction.state.log", isr),
        ("share.coordinator.state.topic", isr),
    ):
        short = SHORT if prefix != "transaction.state.log" else INT
        rows.append((f"{prefix}.replication.factor", SHORT, 3, replicas, "Replication factor of the internal topic."))
        if least is not None:
            rows.append((f"{prefix}.min.isr", short, 2, least, "min.insync.replicas of the internal topic."))
    out = {}
    for name, type_, default, value, doc in rows:
        if type_ == LIST:  # (a flag's comma-separated string, as a list)
            default, value = (
                [item.strip() for item in v.split(",") if item.strip()] if isinstance(v, str) else v
                for v in (default, value)
            )
        d = ConfigDef(name, type_, default, doc)
        out[name] = (d, value if value != default else None)
    return out


def live_broker_configs(c: Any, listeners: list[Any]) -> Callable[[str, str], Any]:
    """The static configs whose value is known only once the server runs, per broker node:
    its id and the listeners it really serves (their bound ports; advertised ones only when
    given, as Kafka shows advertised.listeners only when set)."""
    advertised = bool(c.advertised_listeners or c.advertised_host or c.advertised_port)

    def value(name: str, node: str) -> Any:
        if name in ("node.id", "broker.id"):
            return int(node) if node.isdigit() else None
        mine = [x for x in listeners if str(x.node_id) == node]
        if name == "listeners" and mine:
            return [f"{x.protocol}://{_host(x.host)}:{x.port}" for x in mine]
        if name == "advertised.listeners" and mine and advertised:
            return [f"{x.protocol}://{_host(x.advertised[0])}:{x.advertised[1]}" for x in mine]
        return None

    return value


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
