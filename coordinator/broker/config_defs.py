"""Kafka's configs: the topic configs (with the broker configs that stand behind them) and
every broker config, each with its type, default, valid values, synonyms and documentation.

It is what CreateTopics, AlterConfigs and IncrementalAlterConfigs validate against and what
DescribeConfigs answers from. Names, types, defaults and documentation are Kafka's own, from
kafka_configs.json (written from a real Kafka 4.4 broker's DescribeConfigs answers by
tests/support/kafka_config_table.py); the validators are written here. The release the server
behaves as (--kafka-version) picks the set: 4.4's, or 3.9's, which still has the configs
Kafka 4.0 removed (message.format.version and its like, that older tools send) and no
one-hour limit on future timestamps. Values are kept as the strings clients send; `parse`
turns one into its typed value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, Callable, cast

from kio.schema.errors import ErrorCode as E

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DAY_MS = 24 * 3600 * 1000

# DescribeConfigs config_type codes (Kafka's ConfigType in the response schema)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9
# DescribeConfigs config sources
UNKNOWN, TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 0, 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5


class ConfigError(Exception):
    """An invalid name or value: Kafka's INVALID_CONFIG (or the code given) with its message."""

    def __init__(self, message: str, code: E = E.invalid_config) -> None:
        super().__init__(message)
        self.code = code


# Validators take the parsed value and return why it is invalid, or None.
def at_least(n: float) -> Callable[[Any], str | None]:
    return lambda v: None if v is None or v >= n else f"Value must be at least {n}"


def between(lo: float, hi: float) -> Callable[[Any], str | None]:
    """Kafka's Range.between: its message names the bound passed."""
    return lambda v: (
        None if lo <= v <= hi else (f"Value must be at least {lo}" if v < lo else f"Value must be no more than {hi}")
    )


def one_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


def each_of(*allowed: str) -> Callable[[Any], Any]:
    """Kafka's ValidList: the first item not allowed is the value its message names."""

    def check(items: list[str]) -> tuple[str, str] | None:
        bad = [i for i in items if i not in allowed]
        return (bad[0], f"String must be one of: {', '.join(allowed)}") if bad else None

    return check


def _level(lo: int, hi: int, default_ok: int | None = None) -> Callable[[Any], str | None]:
    also = "" if default_ok is None else f" or equal to {default_ok}"
    return lambda v: None if lo <= v <= hi or v == default_ok else f"Value must be between {lo} and {hi}{also}"


_THROTTLED = re.compile(r"\d+:\d+")


def _throttled_replicas(items: list[str]) -> str | None:
    if items == ["*"] or all(_THROTTLED.fullmatch(i) for i in items):
        return None
    return "must be the literal '*' or a list of replicas in the format [PartitionId]:[BrokerId],..."


_VERSION = re.compile(r"\d+\.\d+(\.\d+)?(-IV\d+)?")


def _message_format(v: str) -> str | None:
    return None if _VERSION.fullmatch(v) else f"{v} is not a valid version"


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: int
    default: Any  # typed; None: no default
    doc: str
    validator: Callable[[Any], Any] | None = None  # why a value is refused (or (item, why)), or None
    synonyms: tuple[str, ...] = ()  # broker configs standing behind a topic config, in precedence order


def parse(d: ConfigDef, raw: str) -> Any:
    """The typed value of `raw`, as Kafka's ConfigDef.parseType does; ConfigError if it
    is not one or the validator refuses it."""
    s = raw.strip()
    try:
        if d.type == BOOLEAN:
            if s.lower() not in ("true", "false"):
                raise ValueError
            value: Any = s.lower() == "true"
        elif d.type in (SHORT, INT, LONG):
            value = int(s)
            bits = {SHORT: 15, INT: 31, LONG: 63}[d.type]
            if not -(2**bits) <= value < 2**bits:
                raise ValueError
        elif d.type == DOUBLE:
            value = float(s)
        elif d.type == LIST:
            value = [] if not s else [item.strip() for item in s.split(",")]
        else:
            value = s
    except ValueError:
        kind = {
            BOOLEAN: "Expected value to be either true or false",
            SHORT: "Not a number of type SHORT",
            INT: "Not a number of type INT",
            LONG: "Not a number of type LONG",
            DOUBLE: "Not a number of type DOUBLE",
        }[d.type]
        raise ConfigError(f"Invalid value {raw} for configuration {d.name}: {kind}") from None
    why = d.validator(value) if d.validator else None
    if why:
        # Kafka names the parsed value (2.0 for a double's "2"), or the item a list refused
        shown, why = why if isinstance(why, tuple) else (raw if d.type == LIST else to_string(d, value), why)
        raise ConfigError(f"Invalid value {shown} for configuration {d.name}: {why}")
    return value


def to_string(d: ConfigDef, value: Any) -> str | None:
    """A typed value the way DescribeConfigs shows it (Kafka's ConfigDef.convertToString)."""
    if value is None:
        return None
    if d.type == BOOLEAN:
        return "true" if value else "false"
    if d.type == LIST:
        return ",".join(value) if isinstance(value, (list, tuple)) else str(value)
    if d.type == DOUBLE:
        return java_double(float(value))
    return str(value)


def java_double(v: float) -> str:
    """Java's Double.toString: the shortest repr, in scientific notation (1.0E7) outside
    [1e-3, 1e7)."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(v)
    exponent = int(f"{v:e}".partition("e")[2])
    # repr's shortest digits (those that read back as v), placed as d.dddE<exponent>
    digits = repr(abs(v)).partition("e")[0].replace(".", "").strip("0") or "0"
    return f"{'-' if v < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _t(
    name: str,
    type_: int,
    default: Any,
    doc: str,
    validator: Callable[[Any], Any] | None = None,
    *synonyms: str,
) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, validator, tuple(synonyms))


# Every release's topic configs (LogConfig), with the broker configs they default to
# (ServerTopicConfigSynonyms), in Kafka's order of precedence; topic_defs() picks a release's.
_TOPIC_DEFS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        _t(
            "errors.deadletterqueue.group.enable",
            BOOLEAN,
            False,
            "Whether share groups may use this topic as their dead-letter queue.",
        ),
        _t(
            "max.decompressed.message.bytes",
            INT,
            INT_MAX - 8,
            "Largest decompressed record accepted.",
            at_least(1),
            "max.decompressed.message.bytes",
        ),
        _t(
            "remote.copy.lag.bytes",
            LONG,
            -1,
            "Bytes of newer data after which a segment may be copied to tiered storage.",
            at_least(-1),
            "log.remote.copy.lag.bytes",
        ),
        _t(
            "remote.copy.lag.ms",
            LONG,
            0,
            "Age after which a segment may be copied to tiered storage.",
            at_least(-1),
            "log.remote.copy.lag.ms",
        ),
        _t(
            "cleanup.policy",
            LIST,
            ["delete"],
            "delete: old segments are removed by retention time or size; "
            "compact: only the latest record of each key is kept; both may be given.",
            each_of("compact", "delete"),
            "log.cleanup.policy",
        ),
        _t(
            "compression.type",
            STRING,
            "producer",
            "The codec of stored batches: producer keeps the producer's; any other recompresses to it.",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            "compression.type",
        ),
        _t(
            "compression.gzip.level",
            INT,
            -1,
            "gzip level for compression.type=gzip.",
            _level(1, 9, -1),
            "compression.gzip.level",
        ),
        _t(
            "compression.lz4.level",
            INT,
            9,
            "lz4 level for compression.type=lz4.",
            _level(1, 17),
            "compression.lz4.level",
        ),
        _t(
            "compression.zstd.level",
            INT,
            3,
            "zstd level for compression.type=zstd.",
            _level(-131072, 22),
            "compression.zstd.level",
        ),
        _t(
            "delete.retention.ms",
            LONG,
            DAY_MS,
            "How long compaction keeps tombstones (delete markers).",
            at_least(0),
            "log.cleaner.delete.retention.ms",
        ),
        _t(
            "file.delete.delay.ms",
            LONG,
            60_000,
            "Delay before a deleted segment file is removed from disk.",
            at_least(0),
            "log.segment.delete.delay.ms",
        ),
        _t(
            "flush.messages",
            LONG,
            LONG_MAX,
            "Force an fsync after this many messages.",
            at_least(1),
            "log.flush.interval.messages",
        ),
        _t(
            "flush.ms",
            LONG,
            LONG_MAX,
            "Force an fsync after this much time.",
            at_least(0),
            "log.flush.interval.ms",
            "log.flush.scheduler.interval.ms",
        ),
        _t(
            "follower.replication.throttled.replicas",
            LIST,
            [],
            "Replicas throttled on the follower side.",
            _throttled_replicas,
        ),
        _t(
            "index.interval.bytes",
            INT,
            4096,
            "Bytes between entries of the offset index.",
            at_least(0),
            "log.index.interval.bytes",
        ),
        _t(
            "leader.replication.throttled.replicas",
            LIST,
            [],
            "Replicas throttled on the leader side.",
            _throttled_replicas,
        ),
        _t(
            "local.retention.bytes",
            LONG,
            -2,
            "Local bytes kept with tiered storage (-2: retention.bytes).",
            at_least(-2),
            "log.local.retention.bytes",
        ),
        _t(
            "local.retention.ms",
            LONG,
            -2,
            "Local time kept with tiered storage (-2: retention.ms).",
            at_least(-2),
            "log.local.retention.ms",
        ),
        _t(
            "max.compaction.lag.ms",
            LONG,
            LONG_MAX,
            "Longest a record stays uncompacted.",
            at_least(1),
            "log.cleaner.max.compaction.lag.ms",
        ),
        _t("max.message.bytes", INT, 1_048_588, "Largest record batch accepted.", at_least(0), "message.max.bytes"),
        _t(
            "message.downconversion.enable",
            BOOLEAN,
            True,
            "Whether old Fetch versions get down-converted batches.",
            None,
            "log.message.downconversion.enable",
        ),
        _t(
            "message.format.version",
            STRING,
            "3.0-IV1",
            "Deprecated: ignored from message format v2 on.",
            _message_format,
            "log.message.format.version",
        ),
        _t(
            "message.timestamp.after.max.ms",
            LONG,
            LONG_MAX,
            "How far in the future (CreateTime) a record's timestamp may be.",
            at_least(0),
            "log.message.timestamp.after.max.ms",
        ),
        _t(
            "message.timestamp.before.max.ms",
            LONG,
            LONG_MAX,
            "How far in the past (CreateTime) a record's timestamp may be.",
            at_least(0),
            "log.message.timestamp.before.max.ms",
        ),
        _t(
            "message.timestamp.difference.max.ms",
            LONG,
            LONG_MAX,
            "Deprecated: the largest difference between the broker's time and a record's.",
            at_least(0),
            "log.message.timestamp.difference.max.ms",
        ),
        _t(
            "message.timestamp.type",
            STRING,
            "CreateTime",
            "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's time.",
            one_of("CreateTime", "LogAppendTime"),
            "log.message.timestamp.type",
        ),
        _t(
            "min.cleanable.dirty.ratio",
            DOUBLE,
            0.5,
            "Share of the log that must be uncompacted before compaction runs.",
            between(0, 1),
            "log.cleaner.min.cleanable.ratio",
        ),
        _t(
            "min.compaction.lag.ms",
            LONG,
            0,
            "Shortest a record stays uncompacted.",
            at_least(0),
            "log.cleaner.min.compaction.lag.ms",
        ),
        _t(
            "min.insync.replicas",
            INT,
            1,
            "Replicas that must acknowledge an acks=all write.",
            at_least(1),
            "min.insync.replicas",
        ),
        _t("preallocate", BOOLEAN, False, "Preallocate segment files.", None, "log.preallocate"),
        _t("remote.log.copy.disable", BOOLEAN, False, "Stop copying to tiered storage.", None),
        _t("remote.log.delete.on.disable", BOOLEAN, False, "Delete tiered data when tiered storage is disabled.", None),
        _t("remote.storage.enable", BOOLEAN, False, "Tiered storage for this topic.", None),
        _t(
            "retention.bytes",
            LONG,
            -1,
            "Largest size of a partition before old segments go (-1: no limit).",
            None,
            "log.retention.bytes",
        ),
        _t(
            "retention.ms",
            LONG,
            7 * DAY_MS,
            "Age after which old segments go (-1: no limit).",
            at_least(-1),
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ),
        _t(
            "segment.bytes",
            INT,
            1024**3,
            "Size of a segment file before a new one starts.",
            at_least(14),
            "log.segment.bytes",
        ),
        _t(
            "segment.index.bytes",
            INT,
            10 * 1024 * 1024,
            "Size of a segment's index file.",
            at_least(4),
            "log.index.size.max.bytes",
        ),
        _t(
            "segment.jitter.ms",
            LONG,
            0,
            "Random jitter subtracted from segment.ms.",
            at_least(0),
            "log.roll.jitter.ms",
            "log.roll.jitter.hours",
        ),
        _t(
            "segment.ms",
            LONG,
            7 * DAY_MS,
            "Age of a segment before a new one starts.",
            at_least(1),
            "log.roll.ms",
            "log.roll.hours",
        ),
        _t(
            "unclean.leader.election.enable",
            BOOLEAN,
            False,
            "Whether an out-of-sync replica may become leader.",
            None,
            "unclean.leader.election.enable",
        ),
    )
}


def _b(name: str, type_: int, default: Any, doc: str, validator: Callable[[Any], Any] | None = None) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, validator)


# Broker configs that stand behind topic configs. Those named in DYNAMIC_BROKER_CONFIGS
# can be changed at run time (per broker, or as the cluster default) as in Kafka; their
# default is what a topic without its own value uses.
BROKER_LOG_CONFIG_DEFS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        _b("log.cleanup.policy", LIST, ["delete"], "Default cleanup.policy.", each_of("compact", "delete")),
        _b(
            "compression.type",
            STRING,
            "producer",
            "Default compression.type.",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        _b("compression.gzip.level", INT, -1, "Default compression.gzip.level.", _level(1, 9, -1)),
        _b("compression.lz4.level", INT, 9, "Default compression.lz4.level.", _level(1, 17)),
        _b("compression.zstd.level", INT, 3, "Default compression.zstd.level.", _level(-131072, 22)),
        _b("log.cleaner.delete.retention.ms", LONG, DAY_MS, "Default delete.retention.ms.", at_least(0)),
        _b("log.segment.delete.delay.ms", LONG, 60_000, "Default file.delete.delay.ms.", at_least(0)),
        _b("log.flush.interval.messages", LONG, LONG_MAX, "Default flush.messages.", at_least(1)),
        _b("log.flush.interval.ms", LONG, None, "Default flush.ms."),
        _b("log.flush.scheduler.interval.ms", LONG, LONG_MAX, "How often the log flusher checks flush.ms."),
        _b("log.index.interval.bytes", INT, 4096, "Default index.interval.bytes.", at_least(0)),
        _b("log.local.retention.bytes", LONG, -2, "Default local.retention.bytes.", at_least(-2)),
        _b("log.local.retention.ms", LONG, -2, "Default local.retention.ms.", at_least(-2)),
        _b("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, "Default max.compaction.lag.ms.", at_least(1)),
        _b("message.max.bytes", INT, 1_048_588, "Default max.message.bytes.", at_least(0)),
        _b("max.decompressed.message.bytes", INT, INT_MAX - 8, "Default max.decompressed.message.bytes.", at_least(1)),
        _b("log.remote.copy.lag.bytes", LONG, -1, "Default remote.copy.lag.bytes.", at_least(-1)),
        _b("log.remote.copy.lag.ms", LONG, 0, "Default remote.copy.lag.ms.", at_least(-1)),
        _b("log.message.downconversion.enable", BOOLEAN, True, "Default message.downconversion.enable."),
        _b("log.message.format.version", STRING, "3.0-IV1", "Default message.format.version.", _message_format),
        _b(
            "log.message.timestamp.after.max.ms",
            LONG,
            3_600_000,
            "Default message.timestamp.after.max.ms.",
            at_least(0),
        ),
        _b(
            "log.message.timestamp.before.max.ms",
            LONG,
            LONG_MAX,
            "Default message.timestamp.before.max.ms.",
            at_least(0),
        ),
        _b(
            "log.message.timestamp.difference.max.ms",
            LONG,
            LONG_MAX,
            "Default message.timestamp.difference.max.ms.",
            at_least(0),
        ),
        _b(
            "log.message.timestamp.type",
            STRING,
            "CreateTime",
            "Default message.timestamp.type.",
            one_of("CreateTime", "LogAppendTime"),
        ),
        _b("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, "Default min.cleanable.dirty.ratio.", between(0, 1)),
        _b("log.cleaner.min.compaction.lag.ms", LONG, 0, "Default min.compaction.lag.ms.", at_least(0)),
        _b("min.insync.replicas", INT, 1, "Default min.insync.replicas.", at_least(1)),
        _b("log.preallocate", BOOLEAN, False, "Default preallocate."),
        _b("log.retention.bytes", LONG, -1, "Default retention.bytes."),
        _b("log.retention.ms", LONG, None, "Default retention.ms (over log.retention.minutes and .hours)."),
        _b("log.retention.minutes", INT, None, "Default retention.ms in minutes (over log.retention.hours)."),
        _b("log.retention.hours", INT, 168, "Default retention.ms in hours."),
        _b("log.segment.bytes", INT, 1024**3, "Default segment.bytes.", at_least(14)),
        _b("log.index.size.max.bytes", INT, 10 * 1024 * 1024, "Default segment.index.bytes.", at_least(4)),
        _b("log.roll.jitter.ms", LONG, None, "Default segment.jitter.ms."),
        _b("log.roll.jitter.hours", INT, 0, "Default segment.jitter.ms in hours.", at_least(0)),
        _b("log.roll.ms", LONG, None, "Default segment.ms (over log.roll.hours)."),
        _b("log.roll.hours", INT, 168, "Default segment.ms in hours.", at_least(1)),
        _b("unclean.leader.election.enable", BOOLEAN, False, "Default unclean.leader.election.enable."),
    )
}

# The releases --kafka-version may name, each with its broker's table (kafka_table): Kafka 4.0
# removed message.format.version and its like (KIP-724) and message.timestamp.difference.max.ms
# (KIP-937), and made message.timestamp.after.max.ms one hour; 4.x added the dead-letter queue,
# remote copy lag and decompressed size configs.
RELEASES = ("3.9", "4.4")
DEFAULT_RELEASE = "4.4"


@cache
def kafka_table(release: str = DEFAULT_RELEASE) -> dict[str, Any]:
    """A release's configs as its broker describes them (kafka_configs.json for 4.4,
    kafka_configs_3.9.json for 3.9): rows of [name, type, default, ...]; see
    tests/support/kafka_config_table.py."""
    name = "kafka_configs.json" if release == DEFAULT_RELEASE else f"kafka_configs_{release}.json"
    return cast("dict[str, Any]", json.loads((Path(__file__).with_name(name)).read_text()))


def typed(type_: int, text: str | None) -> Any:
    """A default as the table writes it, typed (no validator: it is Kafka's own)."""
    if text is None:
        return None
    return parse(ConfigDef("default", type_, None, ""), text)


def _with_kafka_doc(d: ConfigDef, row: list[Any] | None) -> ConfigDef:
    """d with Kafka's default and documentation (a row of the table), where Kafka has it."""
    if row is None:
        return d
    return replace(d, default=typed(row[1], row[2]), doc=row[-1] or d.doc)


@cache
def topic_defs(release: str = DEFAULT_RELEASE) -> dict[str, ConfigDef]:
    """The topic configs of a release, by name, in Kafka's order of precedence of synonyms."""
    rows = {r[0]: r for r in kafka_table(release)["topic"]}
    return {n: _with_kafka_doc(d, rows[n]) for n, d in _TOPIC_DEFS.items() if n in rows}


TOPIC_CONFIG_DEFS = topic_defs()

# Units of broker synonyms that are not in milliseconds (log.retention.hours -> retention.ms).
_UNIT_MS = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}


def synonym_as_topic_value(broker_name: str, value: Any) -> Any:
    """A broker synonym's typed value in its topic config's unit."""
    return value * _UNIT_MS.get(broker_name, 1)


def check_topic_configs(values: dict[str, Any]) -> None:
    """Checks across configs (Kafka's LogConfig.validate)."""
    lo, hi = values.get("min.compaction.lag.ms", 0), values.get("max.compaction.lag.ms", LONG_MAX)
    if lo > hi:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > max.compaction.lag.ms ({hi})")
