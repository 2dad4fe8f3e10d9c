"""Group configs: the GROUP config resource (type 32) of DescribeConfigs and
IncrementalAlterConfigs / AlterConfigs, as Kafka's GroupConfig and GroupConfigManager.

Per group id, overrides of the broker's group settings: `consumer.session.timeout.ms`,
`consumer.heartbeat.interval.ms`, `consumer.assignment.interval.ms` (KIP-848 groups; the last
Kafka 4.3's, at least 0 and used within the broker's min and max), `share.session.timeout.ms`,
`share.heartbeat.interval.ms`, `share.assignment.interval.ms` (Kafka 4.3's, as its consumer
twin), `share.record.lock.duration.ms`, `share.delivery.count.limit`, `share.auto.offset.reset`,
`share.isolation.level` (KIP-932). Names, defaults and checks are Kafka 4.2's: an unknown
name is INVALID_CONFIG "Unknown group config name: X", a value outside the broker's
min/max bounds INVALID_CONFIG with GroupConfig.validateValues' message. A group id need not
exist (Kafka allows configs ahead of the group). Kept in `group-configs.json` in the data
dir (coordinator.durable: a change takes effect once durable), where Kafka keeps them in
its metadata log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kio.schema.errors import ErrorCode as E

from ..broker.config_defs import INT, STRING, ConfigError
from ..broker.configs import Entry
from ..durable import JsonFile

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


# name -> (type, the Bounds field of its default and bounds (None: a string), documentation)
DEFS: dict[str, tuple[int, str | None, str]] = {
    "consumer.session.timeout.ms": (
        INT,
        "consumer_session_timeout_ms",
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    "consumer.heartbeat.interval.ms": (
        INT,
        "consumer_heartbeat_interval_ms",
        "The heartbeat interval given to the members of a consumer group.",
    ),
    "consumer.assignment.interval.ms": (
        INT,
        "consumer_assignment_interval_ms",
        "The interval between assignment updates for a consumer group.",
    ),
    "share.session.timeout.ms": (
        INT,
        "share_session_timeout_ms",
        "The timeout to detect client failures when using the share group protocol.",
    ),
    "share.heartbeat.interval.ms": (
        INT,
        "share_heartbeat_interval_ms",
        "The heartbeat interval given to the members of a share group.",
    ),
    "share.assignment.interval.ms": (
        INT,
        "share_assignment_interval_ms",
        "The interval between assignment updates for a share group.",
    ),
    "share.record.lock.duration.ms": (
        INT,
        "share_record_lock_duration_ms",
        "The record acquisition lock duration in milliseconds for share groups.",
    ),
    "share.delivery.count.limit": (
        INT,
        "share_delivery_count_limit",
        "The maximum number of delivery attempts for a record delivered to a share group.",
    ),
    "share.auto.offset.reset": (
        STRING,
        None,
        "The strategy to initialize the share-partition start offset: "
        "earliest, latest or by_duration:<ISO-8601 duration>.",
    ),
    "share.isolation.level": (
        STRING,
        None,
        "Controls how to read records written transactionally: read_committed or read_uncommitted.",
    ),
}
STRING_DEFAULTS = {"share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted"}
_BROKER_NAMES = {  # the broker config each bound is (for the error messages)
    "consumer_min_session_timeout_ms": "group.consumer.min.session.timeout.ms",
    "consumer_max_session_timeout_ms": "group.consumer.max.session.timeout.ms",
    "consumer_min_heartbeat_interval_ms": "group.consumer.min.heartbeat.interval.ms",
    "consumer_max_heartbeat_interval_ms": "group.consumer.max.heartbeat.interval.ms",
    "share_min_session_timeout_ms": "group.share.min.session.timeout.ms",
    "share_max_session_timeout_ms": "group.share.max.session.timeout.ms",
    "share_min_heartbeat_interval_ms": "group.share.min.heartbeat.interval.ms",
    "share_max_heartbeat_interval_ms": "group.share.max.heartbeat.interval.ms",
    "share_min_record_lock_duration_ms": "group.share.min.record.lock.duration.ms",
    "share_max_record_lock_duration_ms": "group.share.max.record.lock.duration.ms",
    "share_min_delivery_count_limit": "group.share.min.delivery.count.limit",
    "share_max_delivery_count_limit": "group.share.max.delivery.count.limit",
}


def group_config_bounds(c: Any) -> Bounds:
    """From the server's flags."""
    return Bounds(
        c.group_consumer_session_timeout_ms,
        c.group_consumer_min_session_timeout_ms,
        c.group_consumer_max_session_timeout_ms,
        c.group_consumer_heartbeat_interval_ms,
        c.group_consumer_min_heartbeat_interval_ms,
        c.group_consumer_max_heartbeat_interval_ms,
        c.group_share_session_timeout_ms,
        c.group_share_min_session_timeout_ms,
        c.group_share_max_session_timeout_ms,
        c.group_share_heartbeat_interval_ms,
        c.group_share_min_heartbeat_interval_ms,
        c.group_share_max_heartbeat_interval_ms,
        c.group_share_record_lock_duration_ms,
        c.group_share_min_record_lock_duration_ms,
        c.group_share_max_record_lock_duration_ms,
        c.group_consumer_assignment_interval_ms,
        c.group_consumer_min_assignment_interval_ms,
        c.group_consumer_max_assignment_interval_ms,
        c.group_share_assignment_interval_ms,
        c.group_share_min_assignment_interval_ms,
        c.group_share_max_assignment_interval_ms,
        c.group_share_delivery_count_limit,
        c.group_share_min_delivery_count_limit,
        c.group_share_max_delivery_count_limit,
    )


def valid_auto_offset_reset(value: str) -> bool:
    if value in ("earliest", "latest"):
        return True
    return value.startswith("by_duration:") and bool(_DURATION.match(value.split(":", 1)[1]))


def _stored(doc: dict) -> dict[str, dict[str, str]]:
    """group id -> its settings, from the stored document (ValueError if not of that shape)."""
    configs = {str(group): dict(settings) for group, settings in doc.items()}
    for settings in configs.values():
        for name, value in settings.items():
            if type(value) is not str:
                raise ValueError(f"{name}: {value!r} is not a string")
            if DEFS.get(name, (STRING,))[0] == INT:
                int(value)  # (ValueError: the group's timeouts are read as numbers)
    return configs


class GroupConfigs:
    def __init__(self, data_dir: Path | None, bounds: Bounds | None = None) -> None:
        self.bounds = bounds or Bounds()
        self.file = JsonFile(data_dir / FILE) if data_dir is not None else None
        self.configs: dict[str, dict[str, str]] = {} if self.file is None else self.file.load({}, parse=_stored)

    def get(self, group_id: str, name: str) -> str | None:
        """The group's own setting, or None (the broker's applies)."""
        return self.configs.get(group_id, {}).get(name)

    def assignment_interval_ms(self, group_id: str, kind: str = "consumer") -> int:
        """The group's consumer.assignment.interval.ms (kind "share": share.assignment.interval.ms),
        else the broker's, within the broker's min and max (Kafka 4.3's GroupConfig.evaluate caps
        it rather than refusing it: the broker's bounds may change after the group's value was set)."""
        interval, least, most = (
            getattr(self.bounds, f"{kind}_{bound}assignment_interval_ms") for bound in ("", "min_", "max_")
        )
        own = self.get(group_id, f"{kind}.assignment.interval.ms")
        return min(max(interval if own is None else int(own), least), most)

    def delivery_count_limit(self, group_id: str) -> int:
        """The group's share.delivery.count.limit, else the broker's, within the broker's min
        and max (GroupConfigManager clamps a group's value that bounds changed since)."""
        b = self.bounds
        own = self.get(group_id, "share.delivery.count.limit")
        limit = b.share_delivery_count_limit if own is None else int(own)
        return min(max(limit, b.share_min_delivery_count_limit), b.share_max_delivery_count_limit)

    def layer(self, group_id: str) -> dict[str, str]:
        return dict(self.configs.get(group_id, {}))

    def describe(self, group_id: str) -> list[Entry]:
        if not group_id:
            raise ConfigError("Group id must not be empty.", E.invalid_request)
        own = self.configs.get(group_id, {})
        out = []
        for name, (kind, field_name, doc) in DEFS.items():
            default = STRING_DEFAULTS[name] if field_name is None else str(getattr(self.bounds, field_name))
            if name in own:
                out.append(
                    Entry(
                        name,
                        own[name],
                        GROUP_CONFIG,
                        False,
                        kind,
                        doc,
                        ((name, own[name], GROUP_CONFIG), (name, default, DEFAULT_CONFIG)),
                    )
                )
            else:
                out.append(Entry(name, default, DEFAULT_CONFIG, False, kind, doc, ((name, default, DEFAULT_CONFIG),)))
        return out

    def validate(self, settings: dict[str, str | None]) -> None:
        """Kafka's GroupConfig.validate: names, types, then validateValues against the broker's bounds."""
        for name in settings:
            if name not in DEFS:
                raise ConfigError(f"Unknown group config name: {name}")
        values: dict[str, Any] = {}
        for name, (kind, field_name, _) in DEFS.items():
            raw = settings.get(name)
            if raw is None:
                values[name] = STRING_DEFAULTS[name] if field_name is None else getattr(self.bounds, field_name)
                continue
            if kind == INT:
                try:
                    values[name] = int(raw.strip())
                except ValueError:
                    raise ConfigError(
                        f"Invalid value {raw} for configuration {name}: Not a number of type INT"
                    ) from None
                if not -(2**31) <= values[name] < 2**31:
                    raise ConfigError(f"Invalid value {raw} for configuration {name}: Not a number of type INT")
                least = {
                    "share.record.lock.duration.ms": 1000,
                    "share.delivery.count.limit": 2,
                    "consumer.assignment.interval.ms": 0,
                    "share.assignment.interval.ms": 0,
                }.get(name, 1)
                if values[name] < least:
                    raise ConfigError(f"Invalid value {raw} for configuration {name}: Value must be at least {least}")
            else:
                values[name] = raw
        b = self.bounds
        for name, lo, hi in (
            (
                "consumer.heartbeat.interval.ms",
                "consumer_min_heartbeat_interval_ms",
                "consumer_max_heartbeat_interval_ms",
            ),
            ("consumer.session.timeout.ms", "consumer_min_session_timeout_ms", "consumer_max_session_timeout_ms"),
            ("share.heartbeat.interval.ms", "share_min_heartbeat_interval_ms", "share_max_heartbeat_interval_ms"),
            ("share.session.timeout.ms", "share_min_session_timeout_ms", "share_max_session_timeout_ms"),
            ("share.record.lock.duration.ms", "share_min_record_lock_duration_ms", "share_max_record_lock_duration_ms"),
            ("share.delivery.count.limit", "share_min_delivery_count_limit", "share_max_delivery_count_limit"),
        ):
            if name not in settings:
                continue  # (the broker's own setting)
            if values[name] < getattr(b, lo):
                raise ConfigError(f"{name} must be greater than or equal to {_BROKER_NAMES[lo]}")
            if values[name] > getattr(b, hi):
                raise ConfigError(f"{name} must be less than or equal to {_BROKER_NAMES[hi]}")
        if values["consumer.session.timeout.ms"] <= values["consumer.heartbeat.interval.ms"]:
            raise ConfigError("consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
        if values["share.session.timeout.ms"] <= values["share.heartbeat.interval.ms"]:
            raise ConfigError("share.session.timeout.ms must be greater than share.heartbeat.interval.ms")
        reset = values["share.auto.offset.reset"]
        if not valid_auto_offset_reset(reset):
            raise ConfigError(
                f"Invalid value {reset} for configuration share.auto.offset.reset: the value must be "
                "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."
            )
        level = values["share.isolation.level"]
        if level not in ("read_committed", "read_uncommitted"):
            raise ConfigError(
                f"Invalid value {level} for configuration share.isolation.level: String must be one "
                "of: read_committed, read_uncommitted"
            )

    async def replace(self, group_id: str, settings: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """The group's configs become settings(the ones in force), once durable. OSError if
        the disk refused, or what settings() raised (its validation): nothing changed."""
        if not group_id:
            raise ConfigError("Group id must not be empty.", E.invalid_request)

        def commit() -> tuple[Any, Callable[[], None]]:
            values = settings(self.layer(group_id))
            configs = {g: c for g, c in self.configs.items() if g != group_id}
            if values:
                configs[group_id] = dict(values)

            def install() -> None:
                self.configs = configs

            return configs, install

        if self.file is None:
            commit()[1]()
        else:
            await self.file.update(commit)
