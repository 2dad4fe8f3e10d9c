"""The topic catalog: names, partition counts, ids and configs, persisted in the data dir.

Each topic partition is a PartitionLog in `<data_dir>/<topic>-<partition>/`, the same log
implementation `__consumer_offsets` uses (whose partitions this catalog lends out but
does not own).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from kio.schema.errors import ErrorCode as E

from ..log.config import LogConfig
from ..log.partition import PartitionLog

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
CATALOG_FILE = "topics.json"
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

# Topic configs we honour, with how each maps onto the log (Kafka's names and defaults).
TOPIC_CONFIGS = {
    "retention.ms": ("retention_ms", int),
    "retention.bytes": ("retention_bytes", int),
    "segment.bytes": ("segment_bytes", int),
    "segment.ms": ("segment_ms", int),
    "cleanup.policy": ("cleanup_policy", str),
    "delete.retention.ms": ("delete_retention_ms", int),
    "max.message.bytes": (None, int),
    "min.insync.replicas": (None, int),
    "message.timestamp.type": (None, str),
    "compression.type": (None, str),
}
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # Kafka's message.max.bytes


class TopicError(Exception):
    def __init__(self, code: E, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate_name(name: str | None) -> None:
    if not name or name in (".", "..") or len(name) > MAX_NAME_LENGTH or not _LEGAL.fullmatch(name):
        raise TopicError(E.invalid_topic_exception,
                         f"topic name {name!r} is illegal: 1-249 of [a-zA-Z0-9._-], not '.' or '..'")


def validate_configs(configs: dict[str, str | None]) -> None:
    for key, value in configs.items():
        spec = TOPIC_CONFIGS.get(key)
        if spec is None:
            raise TopicError(E.invalid_config, f"unknown topic config {key!r}")
        if value is None:
            continue
        _, kind = spec
        if kind is int:
            try:
                int(value)
            except ValueError:
                raise TopicError(E.invalid_config, f"{key} must be an integer, not {value!r}") from None
        if key == "cleanup.policy" and value not in ("delete", "compact"):
            raise TopicError(E.invalid_config, f"cleanup.policy must be delete or compact, not {value!r}")


@dataclass
class TopicInfo:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    error: E = E.none
    logs: list[PartitionLog] = field(default_factory=list, repr=False)

    @property
    def max_message_bytes(self) -> int:
        return int(self.configs.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))


class Topics:
    def __init__(self, data_dir: Path, base_config: LogConfig, *, auto_create: bool, default_partitions: int,
                 offsets_logs: list[PartitionLog]) -> None:
        self.data_dir = Path(data_dir)
        self.base_config = base_config
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        self.topics: dict[str, TopicInfo] = {
            OFFSETS_TOPIC: TopicInfo(OFFSETS_TOPIC, len(offsets_logs), uuid.UUID(int=1), {"cleanup.policy": "compact"},
                                     internal=True, logs=offsets_logs),
        }
        self.by_id: dict[uuid.UUID, TopicInfo] = {t.topic_id: t for t in self.topics.values()}
        # Every (topic, partition) that exists: checked by each offset commit, one set lookup.
        self.partition_keys: set[tuple[str, int]] = {(OFFSETS_TOPIC, p) for p in range(len(offsets_logs))}
        self.changes = 0  # bumped on every catalog change (Metadata caches by it)
        # Topics whose deletion is still closing and removing files: their name cannot be
        # created again until it is done (Kafka: "marked for deletion").
        self.deleting: set[str] = set()

    # persistence ------------------------------------------------------------------------

    @classmethod
    def load(cls, data_dir: Path, base_config: LogConfig, **kw: Any) -> "Topics":
        topics = cls(data_dir, base_config, **kw)
        path = topics.data_dir / CATALOG_FILE
        if path.exists():
            for name, entry in json.loads(path.read_text()).items():
                info = TopicInfo(name, entry["partitions"], uuid.UUID(entry["topic_id"]), entry.get("configs", {}))
                info.logs = [topics._open(name, p, info.configs) for p in range(info.partitions)]
                topics._add(info)
        return topics

    def _save(self) -> None:
        self.changes += 1
        data = {t.name: {"partitions": t.partitions, "topic_id": str(t.topic_id), "configs": t.configs}
                for t in self.topics.values() if not t.internal}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.data_dir / (CATALOG_FILE + ".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.data_dir / CATALOG_FILE)

    def _log_config(self, configs: dict[str, str]) -> LogConfig:
        changes: dict[str, Any] = {}
        for key, value in configs.items():
            attr, kind = TOPIC_CONFIGS[key]
            if attr is None:
                continue  # validated and reported, but not a property of the log
            v = kind(value)
            changes[attr] = None if kind is int and v < 0 else v  # -1: unlimited
        return replace(self.base_config, **changes)

    def _open(self, name: str, partition: int, configs: dict[str, str]) -> PartitionLog:
        plog = PartitionLog.open_sync(self.data_dir / f"{name}-{partition}", self._log_config(configs))
        plog.start_background()
        return plog

    def _open_partitions(self, name: str, partitions: range, configs: dict[str, str]) -> list[PartitionLog]:
        """Open (create) the logs of new partitions; if the disk or the process refuses one
        (no space, no file descriptor left), none is kept and the client is told."""
        opened: list[PartitionLog] = []
        try:
            for p in partitions:
                opened.append(self._open(name, p, configs))
        except OSError as e:
            for plog in opened:
                plog.discard_sync()
            for p in partitions:
                shutil.rmtree(self.data_dir / f"{name}-{p}", ignore_errors=True)
            log.warning("cannot create partitions %s of topic %s: %s", partitions, name, e.strerror or e)
            raise TopicError(E.kafka_storage_error,
                             f"cannot create the files of topic {name!r}: {e.strerror or e}") from e
        return opened

    def _add(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.by_id[info.topic_id] = info
        self.partition_keys.update((info.name, p) for p in range(info.partitions))

    # operations -------------------------------------------------------------------------

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def partition_log(self, name: str, partition: int) -> PartitionLog | None:
        info = self.topics.get(name)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return info.logs[partition]

    def create(self, name: str, partitions: int, replication_factor: int = -1,
               configs: dict[str, str | None] | None = None, validate_only: bool = False) -> TopicInfo:
        validate_name(name)
        if name in self.topics:
            raise TopicError(E.topic_already_exists, f"topic {name!r} already exists")
        if name in self.deleting:
            raise TopicError(E.topic_already_exists, f"topic {name!r} is marked for deletion")
        clash = self._collision(name)
        if clash is not None:  # Kafka: '.' and '_' map to the same metric names
            raise TopicError(E.invalid_topic_exception, f"topic {name!r} collides with existing topic {clash!r}")
        if partitions == -1:
            partitions = self.default_partitions
        if partitions <= 0:
            raise TopicError(E.invalid_partitions, f"number of partitions must be at least 1, not {partitions}")
        if replication_factor not in (-1, 1):
            raise TopicError(E.invalid_replication_factor,
                             f"replication factor {replication_factor} is larger than the 1 available broker")
        configs = dict(configs or {})
        validate_configs(configs)
        clean = {k: v for k, v in configs.items() if v is not None}
        info = TopicInfo(name, partitions, configs=clean)
        if validate_only:
            return info
        for p in range(partitions):  # a delete cut short by a crash may have left data behind
            shutil.rmtree(self.data_dir / f"{name}-{p}", ignore_errors=True)
        info.logs = self._open_partitions(name, range(partitions), clean)
        self._add(info)
        self._save()
        log.info("created topic %s with %d partitions %s", name, partitions, clean or "")
        return info

    def _collision(self, name: str) -> str | None:
        key = name.replace(".", "_")
        return next((t for t in self.topics if t.replace(".", "_") == key), None)

    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        info = self.topics.get(name)
        if info is None:
            raise TopicError(E.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if info.internal:
            raise TopicError(E.invalid_request, f"cannot change the partitions of internal topic {name}")
        if count <= info.partitions:
            raise TopicError(E.invalid_partitions,
                             f"topic {name} has {info.partitions} partitions; the new count {count} must be larger")
        if validate_only:
            return
        info.logs += self._open_partitions(name, range(info.partitions, count), info.configs)
        self.partition_keys.update((name, p) for p in range(info.partitions, count))
        info.partitions = count
        self._save()

    async def delete(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise TopicError(E.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if info.internal:
            raise TopicError(E.invalid_request, f"cannot delete internal topic {name}")
        del self.topics[name]
        self.by_id.pop(info.topic_id, None)
        self.partition_keys.difference_update((name, p) for p in range(info.partitions))
        self._save()
        for plog in info.logs:  # long-polling fetches re-read now, find the topic gone and answer
            plog.wake_listeners()
        self.deleting.add(name)  # a CreateTopics of the name now must not get files we remove
        try:
            for p, plog in enumerate(info.logs):
                await plog.close()
                shutil.rmtree(self.data_dir / f"{name}-{p}", ignore_errors=True)
        finally:
            self.deleting.discard(name)
        log.info("deleted topic %s", name)
        return info

    def describe(self, names: list[str] | None, *, auto_create: bool) -> Iterable[tuple[str, TopicInfo | None]]:
        """(name, info or None) for Metadata; unknown names may be auto-created."""
        if names is None:
            return list(self.topics.items())
        out = []
        for name in names:
            info = self.topics.get(name)
            if info is None and auto_create and self.auto_create:
                try:
                    info = self.create(name, self.default_partitions)
                except TopicError as e:
                    info = TopicInfo(name, 0, uuid.UUID(int=0), error=e.code)
            out.append((name, info))
        return out

    async def close(self) -> None:
        for info in self.topics.values():
            if not info.internal:  # the offsets log closes itself
                for plog in info.logs:
                    await plog.close()
