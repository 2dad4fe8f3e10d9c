"""The BROKER_LOGGER config resource (type 8): the server's log levels, described and changed
at run time as Kafka's broker does with its log4j loggers (DescribeConfigs, and
IncrementalAlterConfigs through RuntimeLoggerManager).

Kafka lists every logger it has (`root`, the loggers its log4j configuration names and those
its classes created) with its effective level, as DYNAMIC_BROKER_LOGGER_CONFIG entries. Here
the loggers are Python's: `root` is the root logger, the server's own loggers are listed under
their module names (`coordinator.server`, `coordinator.groups.runtime`, ...), and the names
Kafka's own configuration gives the parts this server has stand for the Python logger of that
part (ALIASES; docs/operations.md#logging lists them)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from kio.schema.errors import ErrorCode as E

from .. import server_log
from ..java_order import java_hash_order
from .config_defs import ConfigError
from .configs import Entry

ROOT = "root"  # Kafka keeps log4j 1's name for the root logger
SERVER = "coordinator"  # the package whose loggers are the server's
DYNAMIC_BROKER_LOGGER_CONFIG = 6
UNKNOWN_TYPE = 0
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TRACE = 5  # log4j's TRACE, below Python's DEBUG

# Kafka's logger name -> the Python logger that does that part's logging here. `kafka` is the
# parent of Kafka's broker loggers (its shipped log4j2.yaml sets it); the others name the
# coordinators' and the log cleaner's packages or classes.
ALIASES = {
    "kafka": SERVER,
    "org.apache.kafka.coordinator.group": f"{SERVER}.groups",
    "org.apache.kafka.coordinator.share": f"{SERVER}.share",
    "kafka.coordinator.transaction": f"{SERVER}.transactions",
    "kafka.log.LogCleaner": f"{SERVER}.log.compaction",
}
# log4j's levels a SET may give (Kafka's LogLevelConfig.VALID_LOG_LEVELS) -> Python's
LEVELS = {
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}
VALID_LEVELS = ", ".join(sorted(LEVELS))
_JAVA_INT = re.compile(r"[+-]?[0-9]+")  # what Integer.parseInt reads


def level_name(level: int) -> str:
    """A Python level as the log4j level it is (the next one up between two)."""
    if level > logging.CRITICAL:
        return "OFF"
    for name, value in LEVELS.items():  # (highest first)
        if level >= value:
            return name
    return "TRACE" if level > 0 else "ALL"


class BrokerLoggers:
    def __init__(self, node_id: int, node_ids: Iterable[str]) -> None:
        self.node_id = node_id
        self.node_ids = set(node_ids)  # every broker this process serves shares its loggers

    def _python_logger(self, name: str) -> logging.Logger | None:
        if name == ROOT:
            return logging.getLogger()
        if name in ALIASES:
            return logging.getLogger(ALIASES[name])
        found = logging.root.manager.loggerDict.get(name)
        return found if isinstance(found, logging.Logger) and _is_server_logger(name) else None

    def loggers(self) -> dict[str, str]:
        """Each logger's name and effective level, in the order of Kafka's HashMap of them."""
        names = [n for n, v in logging.root.manager.loggerDict.items() if isinstance(v, logging.Logger)]
        listed = [ROOT, *ALIASES, *sorted(n for n in names if _is_server_logger(n))]
        out = {}
        for name in java_hash_order(listed):
            found = self._python_logger(name)
            if found is not None:
                out[name] = level_name(found.getEffectiveLevel())
        return out

    # DescribeConfigs --------------------------------------------------------------------

    def describe(self, resource_name: str) -> list[Entry]:
        """Kafka's ConfigHelper: the resource names this broker; every logger, dynamic."""
        if not resource_name:
            raise ConfigError("Broker id must not be empty", E.invalid_request)
        if not self._is_node(resource_name, "Broker id must be an integer, but it is: "):
            raise ConfigError(
                f"Unexpected broker id, expected {self.node_id} but received {resource_name}", E.invalid_request
            )
        return [
            Entry(name, level, DYNAMIC_BROKER_LOGGER_CONFIG, False, UNKNOWN_TYPE, "", ())
            for name, level in self.loggers().items()
        ]

    def _is_node(self, resource_name: str, not_int: str) -> bool:
        if not _JAVA_INT.fullmatch(resource_name) or not -(2**31) <= int(resource_name) < 2**31:
            raise ConfigError(f"{not_int}{resource_name}", E.invalid_request)
        return str(int(resource_name)) in self.node_ids

    # IncrementalAlterConfigs ------------------------------------------------------------

    def alter(self, resource_name: str, configs: Iterable[tuple[str, int, str | None]], validate_only: bool) -> None:
        """Kafka's ConfigAdminManager.preprocess and RuntimeLoggerManager: (name, operation,
        value) each validated in order, then applied unless validate_only."""
        ops = list(configs)
        names = [name for name, _, _ in ops]
        if len(set(names)) != len(names):
            raise ConfigError("Error due to duplicate config keys", E.invalid_request)
        nulls = [name for name, op, value in ops if op != DELETE and value is None]
        if nulls:
            raise ConfigError(f"Null value not supported for : {', '.join(nulls)}", E.invalid_request)
        if not self._is_node(resource_name, "Node id must be an integer, but it is: "):
            raise ConfigError(
                f"Unexpected node id. Expected {self.node_id}, but received {int(resource_name)}", E.invalid_request
            )
        known = self.loggers()
        for name, op, value in ops:
            if op in (SET, DELETE) and name not in known:
                raise ConfigError(f"Logger {name} does not exist!", E.invalid_config)
            if op == SET and value not in LEVELS:
                raise ConfigError(
                    f"Cannot set the log level of {name} to {value} as it is not a supported log level."
                    f" Valid log levels are {VALID_LEVELS}",
                    E.invalid_config,
                )
            if op == DELETE and name == ROOT:
                raise ConfigError(f"Removing the log level of the {ROOT} logger is not allowed", E.invalid_request)
            if op in (APPEND, SUBTRACT):
                word = "APPEND" if op == APPEND else "SUBTRACT"
                raise ConfigError(f"{word} operation is not allowed for the BROKER_LOGGER resource", E.invalid_request)
            if op not in (SET, DELETE, APPEND, SUBTRACT):
                raise ConfigError(
                    f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource", E.invalid_request
                )
        if validate_only:
            return
        for name, op, value in ops:
            target = self._python_logger(name)
            assert target is not None  # (validated above)
            if op == SET and value is not None:
                target.setLevel(LEVELS[value])
                logging.getLogger(__name__).warning("Updated the log level of %s to %s", name, value)
            else:
                target.setLevel(logging.NOTSET)
                logging.getLogger(__name__).warning("Unset the log level of %s", name)
        server_log.levels_changed()


def _is_server_logger(name: str) -> bool:
    return name == SERVER or name.startswith(SERVER + ".")
