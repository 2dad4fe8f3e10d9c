"""Group configs: the GROUP config resource (type 32) of DescribeConfigs and
IncrementalAlterConfigs / AlterConfigs, as Kafka's GroupConfig and GroupConfigManager.

Per group id, overrides of the broker's group settings: Kafka 4.4's 21 group configs
(`consumer.*` for KIP-848 groups, `share.*` for KIP-932 share groups, `streams.*` for KIP-1071
streams groups, and the dead-letter-queue ones), with Kafka's names, types, defaults (the broker
config each stands for, its synonym) and checks: an unknown name is INVALID_CONFIG "Unknown
group config name: X", a value of the wrong type or below its least INVALID_CONFIG with
ConfigDef's words, one outside the broker's min/max INVALID_CONFIG with GroupConfig's. With
--kafka-version 3.9, 3.9's six and its words. A group id need not exist (Kafka allows configs
ahead of the group). Kept in `group-configs.json` in the data dir (coordinator.durable: a
change takes effect once durable), where Kafka keeps them in its metadata log. `value()` is
what the coordinators read: a group's own setting, else the broker's.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, Callable, cast

from kio.schema.errors import ErrorCode as E

from ..broker.config_defs import BOOLEAN, INT, LIST, STRING, ConfigDef, ConfigError, kafka_table, parse, to_string
from ..broker.configs import BrokerConfigs, Entry
from ..durable import NamedConfigs

FILE = "group-configs.json"
GROUP_CONFIG, DEFAULT_CONFIG = 8, 5  # DescribeConfigs config sources
_DURATION = re.compile(r"^P(?=\d|T\d)(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$")


@dataclass(frozen=True)
class Bounds:
    """The broker settings group configs are checked against (Kafka's names and defaults)."""

    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms (the default)
    consumer_min_session_timeout_ms: int = 45_000  # group.consumer.min.session.timeout.ms
    consumer_max_session_timeout_ms: int = 60_000  # group.consumer.max.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    share_session_timeout_ms: int = 45_000
    share_min_session_timeout_ms: int = 45_000
    share_max_session_timeout_ms: int = 60_000
    share_heartbeat_interval_ms: int = 5_000
    share_min_heartbeat_interval_ms: int = 5_000
    share_max_heartbeat_interval_ms: int = 15_000
    share_record_lock_duration_ms: int = 30_000
    share_min_record_lock_duration_ms: int = 15_000
    share_max_record_lock_duration_ms: int = 60_000
    consumer_assignment_interval_ms: int = 1_000  # group.consumer.assignment.interval.ms (KIP-1263)
    consumer_min_assignment_interval_ms: int = 0
    consumer_max_assignment_interval_ms: int = 15_000
    share_assignment_interval_ms: int = 1_000  # group.share.assignment.interval.ms (KIP-1263)
    share_min_assignment_interval_ms: int = 0
    share_max_assignment_interval_ms: int = 15_000
    share_delivery_count_limit: int = 5  # group.share.delivery.count.limit
    share_min_delivery_count_limit: int = 2  # group.share.min.delivery.count.limit
    share_max_delivery_count_limit: int = 10  # group.share.max.delivery.count.limit
    share_partition_max_record_locks: int = 2_000  # group.share.partition.max.record.locks
    share_min_partition_max_record_locks: int = 100  # group.share.min.partition.max.record.locks
    share_max_partition_max_record_locks: int = 4_000  # group.share.max.partition.max.record.locks
    # Streams groups (KIP-1071): group.streams.*, as Kafka 4.4 defines and bounds them
    streams_session_timeout_ms: int = 45_000
    streams_min_session_timeout_ms: int = 45_000
    streams_max_session_timeout_ms: int = 60_000
    streams_heartbeat_interval_ms: int = 5_000
    streams_min_heartbeat_interval_ms: int = 5_000
    streams_max_heartbeat_interval_ms: int = 15_000
    streams_assignment_interval_ms: int = 1_000
    streams_min_assignment_interval_ms: int = 0
    streams_max_assignment_interval_ms: int = 15_000
    streams_num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    streams_max_standby_replicas: int = 2  # group.streams.max.standby.replicas
    streams_initial_rebalance_delay_ms: int = 3_000  # group.streams.initial.rebalance.delay.ms


@dataclass(frozen=True)
class GroupConfigDef:
    """One group config: Kafka's name, type, the broker config that gives its default (its
    synonym in DescribeConfigs), the Bounds field holding that default (None: a fixed
    default), the least value its type takes, and the Bounds fields of the broker's range."""

    name: str
    type: int
    broker: str
    field: str | None = None
    default: str | None = None
    least: int | None = None
    low: str | None = None
    high: str | None = None


def _ranged(kind: str, what: str, least: int, broker_what: str | None = None) -> GroupConfigDef:
    """A config kept within the broker's group.<kind>.min/max.<what> (an int)."""
    f = what.replace(".", "_")
    return GroupConfigDef(
        f"{kind}.{what}", INT, f"group.{kind}.{broker_what or what}", f"{kind}_{f}", None, least,
        f"{kind}_min_{f}", f"{kind}_max_{f}",
    )  # fmt: skip


# Kafka 4.4's group configs (GroupConfig), in the order its validateValues checks them.
DEFINITIONS: tuple[GroupConfigDef, ...] = (
    _ranged("consumer", "session.timeout.ms", 1),
    _ranged("consumer", "heartbeat.interval.ms", 1),
    _ranged("consumer", "assignment.interval.ms", 0),
    _ranged("share", "session.timeout.ms", 1),
    _ranged("share", "heartbeat.interval.ms", 1),
    _ranged("share", "assignment.interval.ms", 0),
    _ranged("share", "record.lock.duration.ms", 1000),
    _ranged("share", "delivery.count.limit", 2),
    _ranged("share", "partition.max.record.locks", 100),
    GroupConfigDef("share.auto.offset.reset", STRING, "share.auto.offset.reset", default="latest"),
    GroupConfigDef("share.isolation.level", STRING, "share.isolation.level", default="read_uncommitted"),
    GroupConfigDef("share.renew.acknowledge.enable", BOOLEAN, "share.renew.acknowledge.enable", default="true"),
    _ranged("streams", "session.timeout.ms", 1),
    _ranged("streams", "heartbeat.interval.ms", 1),
    _ranged("streams", "assignment.interval.ms", 0),
    GroupConfigDef(
        "streams.num.standby.replicas",
        INT,
        "group.streams.num.standby.replicas",
        "streams_num_standby_replicas",
        least=0,
        high="streams_max_standby_replicas",
    ),  # fmt: skip
    GroupConfigDef(
        "streams.initial.rebalance.delay.ms",
        INT,
        "group.streams.initial.rebalance.delay.ms",
        "streams_initial_rebalance_delay_ms",
        least=0,
    ),  # fmt: skip
    GroupConfigDef("streams.assignor.name", STRING, "group.streams.assignors", default="sticky"),
    GroupConfigDef("streams.rack.aware.assignment.tags", LIST, "group.streams.rack.aware.assignment.tags", default=""),
    GroupConfigDef("errors.deadletterqueue.topic.name", STRING, "errors.deadletterqueue.topic.name", default=""),
    GroupConfigDef(
        "errors.deadletterqueue.copy.record.enable",
        BOOLEAN,
        "errors.deadletterqueue.copy.record.enable",
        default="false",
    ),  # fmt: skip
)
DEFS: dict[str, GroupConfigDef] = {d.name: d for d in DEFINITIONS}
# Kafka 3.9's group configs (a 3.9 server lists and takes only these).
IN_3_9 = frozenset(
    {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.auto.offset.reset",
    }
)
STREAMS_ASSIGNORS = ("sticky",)


@cache
def _docs() -> dict[str, str]:
    return {row[0]: row[-1] for row in kafka_table()["group"]}


def group_config_bounds(c: Any) -> Bounds:
    """From the server's flags (the streams bounds are Kafka's defaults: no flag sets them)."""
    names = {f.name for f in fields(Bounds)}
    return Bounds(**{n: getattr(c, f"group_{n}") for n in names if hasattr(c, f"group_{n}")})


def valid_auto_offset_reset(value: str) -> bool:
    if value in ("earliest", "latest"):
        return True
    return value.startswith("by_duration:") and bool(_DURATION.match(value.split(":", 1)[1]))


def _stored(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    """group id -> its settings, from the stored document (ValueError if not of that shape)."""
    configs = {str(group): dict(settings) for group, settings in doc.items()}
    for settings in configs.values():
        for name, value in settings.items():
            if type(value) is not str:
                raise ValueError(f"{name}: {value!r} is not a string")
            if name in DEFS and DEFS[name].type == INT:
                int(value)  # (ValueError: the group's timeouts are read as numbers)
    return configs


def _bound_name(d: GroupConfigDef, which: str) -> str:
    """The broker config of d's min or max: group.consumer.min.session.timeout.ms."""
    kind = d.name.split(".")[0]
    return d.broker.replace(f"{kind}.", f"{kind}.{which}.", 1)


def _typed(d: GroupConfigDef, raw: str) -> Any:
    """raw as d's type (ConfigError with Kafka's words if it is not one), at least d.least."""
    value = parse(ConfigDef(d.name, d.type, None, ""), raw)
    if d.least is not None and value < d.least:
        raise ConfigError(f"Invalid value {raw} for configuration {d.name}: Value must be at least {d.least}")
    return value


class GroupConfigs(NamedConfigs):
    def __init__(
        self,
        data_dir: Path | None,
        bounds: Bounds | None = None,
        release: str = "4.4",
        broker: BrokerConfigs | None = None,
    ) -> None:
        super().__init__(data_dir / FILE if data_dir is not None else None, _stored)
        self.bounds = bounds or Bounds()
        self.release = release
        if broker is not None:  # (the broker's dynamic assignment intervals, now and after each change)
            self.reconfigure(broker)
            broker.listeners.append(self.reconfigure)

    def reconfigure(self, broker: BrokerConfigs) -> None:
        """group.consumer.assignment.interval.ms and group.share.assignment.interval.ms, dynamic
        since Kafka 4.3 (GroupCoordinatorConfig.RECONFIGURABLE_CONFIGS): a value outside the
        static min and max is capped to them, not refused (GroupCoordinatorConfig.clampDynamicConfigs).
        Every group without its own interval uses the new one at its next heartbeat."""
        bounds = self.bounds
        changed = {}
        for kind in ("consumer", "share"):
            least, most = (getattr(bounds, f"{kind}_{b}_assignment_interval_ms") for b in ("min", "max"))
            changed[f"{kind}_assignment_interval_ms"] = min(
                max(broker.value(f"group.{kind}.assignment.interval.ms"), least), most
            )
        self.bounds = dataclasses.replace(bounds, **changed)

    def definitions(self) -> list[GroupConfigDef]:
        """The group configs of the release this server behaves as."""
        return [d for d in DEFINITIONS if self.release >= "4" or d.name in IN_3_9]

    def defs(self) -> dict[str, ConfigDef]:
        """The group configs as config definitions (names and types: APPEND/SUBTRACT look them up)."""
        return {d.name: ConfigDef(d.name, d.type, None, "") for d in self.definitions()}

    def get(self, group_id: str, name: str) -> str | None:
        """The group's own setting, or None (the broker's applies)."""
        return self.configs.get(group_id, {}).get(name)

    def default(self, d: GroupConfigDef) -> str:
        """The broker's value a group config defaults to, as DescribeConfigs shows it."""
        return str(getattr(self.bounds, d.field)) if d.field is not None else d.default or ""

    def value(self, group_id: str, name: str) -> Any:
        """A group config's typed value in force for the group: its own, else the broker's
        (what the coordinators read; streams.* included for streams groups)."""
        d = DEFS[name]
        own = self.get(group_id, name)
        return parse(ConfigDef(name, d.type, None, ""), self.default(d) if own is None else own)

    def assignment_interval_ms(self, group_id: str, kind: str = "consumer") -> int:
        """The group's consumer.assignment.interval.ms (kind "share": share.assignment.interval.ms),
        else the broker's, within the broker's min and max (Kafka 4.3's GroupConfig.evaluate caps
        it rather than refusing it: the broker's bounds may change after the group's value was set)."""
        interval, least, most = (
            getattr(self.bounds, f"{kind}_{bound}assignment_interval_ms") for bound in ("", "min_", "max_")
        )
        own = self.get(group_id, f"{kind}.assignment.interval.ms")
        return cast(int, min(max(interval if own is None else int(own), least), most))

    def delivery_count_limit(self, group_id: str) -> int:
        """The group's share.delivery.count.limit, else the broker's, within the broker's min
        and max (GroupConfigManager clamps a group's value that bounds changed since)."""
        b = self.bounds
        own = self.get(group_id, "share.delivery.count.limit")
        limit = b.share_delivery_count_limit if own is None else int(own)
        return min(max(limit, b.share_min_delivery_count_limit), b.share_max_delivery_count_limit)

    def _check_id(self, group_id: str) -> None:
        if not group_id:
            raise ConfigError(
                "Default group resources are not allowed." if self.release >= "4" else "Group id must not be empty.",
                E.invalid_request,
            )

    def describe(self, group_id: str) -> list[Entry]:
        self._check_id(group_id)
        own = self.configs.get(group_id, {})
        docs = _docs()
        out = []
        for d in self.definitions():
            default = self.default(d)
            synonyms: tuple[tuple[str, str | None, int], ...] = ((d.broker, default, DEFAULT_CONFIG),)
            value: str | None = default
            source = DEFAULT_CONFIG
            if d.name in own:
                try:  # (shown as Kafka shows it: parsed and written again, "a, b" as "a,b")
                    value = to_string(ConfigDef(d.name, d.type, None, ""), _typed(d, own[d.name]))
                except ConfigError:
                    value = own[d.name]
                source = GROUP_CONFIG
                synonyms = ((d.name, value, GROUP_CONFIG), *synonyms)
            out.append(Entry(d.name, value, source, False, d.type, docs.get(d.name), synonyms))
        return out

    def check(self, name: str, settings: dict[str, str | None]) -> None:
        self.validate(settings)

    def validate(self, settings: dict[str, str | None]) -> None:
        """Kafka's GroupConfig.validate: names, types and least values, then validateValues:
        each value within the broker's range, and the cross-config rules."""
        known = {d.name for d in self.definitions()}
        for name in settings:
            if name not in known:
                raise ConfigError(f"Unknown group config name: {name}")
        values: dict[str, Any] = {}
        for d in self.definitions():
            raw = settings.get(d.name)
            if raw is None:  # the broker's own value (its flags may go below Kafka's least: tests do)
                values[d.name] = parse(ConfigDef(d.name, d.type, None, ""), self.default(d))
            else:
                values[d.name] = _typed(d, raw)
        b = self.bounds
        for d in self.definitions():
            if d.name not in settings:
                continue  # (the broker's own setting)
            v = values[d.name]
            if d.low is not None and d.high is not None:
                lo, hi = getattr(b, d.low), getattr(b, d.high)
                if not lo <= v <= hi:
                    raise ConfigError(
                        f"{d.name} must be in the range {lo} to {hi} inclusive."
                        if self.release >= "4"
                        else f"{d.name} must be {'greater' if v < lo else 'less'} than or equal to "
                        + _bound_name(d, "min" if v < lo else "max")
                    )
            elif d.high is not None and v > getattr(b, d.high):
                raise ConfigError(f"{d.name} must be less than or equal to {getattr(b, d.high)}")
        for kind in ("consumer", "share"):
            if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
                raise ConfigError(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")
        reset = values["share.auto.offset.reset"]
        if not valid_auto_offset_reset(reset):
            raise ConfigError(
                f"Invalid value {reset} for configuration share.auto.offset.reset: Invalid value `{reset}` for "
                "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the "
                "format 'by_duration:<PnDTnHnMn.nS>'."
            )
        level = values.get("share.isolation.level", "read_uncommitted")
        if level not in ("read_committed", "read_uncommitted"):
            raise ConfigError(
                f"Invalid value {level} for configuration share.isolation.level: String must be one "
                "of: read_committed, read_uncommitted"
            )
        if self.release < "4":
            return
        assignor = values["streams.assignor.name"]
        if assignor not in STREAMS_ASSIGNORS:
            raise ConfigError(
                f"streams.assignor.name '{assignor}' is not a registered task assignor. "
                f"Registered assignors are: [{', '.join(STREAMS_ASSIGNORS)}]."
            )
        if any(not tag for tag in values["streams.rack.aware.assignment.tags"]):
            raise ConfigError("Configuration 'streams.rack.aware.assignment.tags' values must not be empty.")
        if values["errors.deadletterqueue.topic.name"].startswith("__"):
            raise ConfigError("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")

    async def replace(self, name: str, settings: Callable[[dict[str, str]], dict[str, str]]) -> None:
        self._check_id(name)
        await super().replace(name, settings)
