"""The topic catalog: names, partition counts, ids and configs, persisted in the data dir.

Each topic partition is a PartitionLog in `<data_dir>/<topic>-<partition>/`, the same log
implementation `__consumer_offsets` uses (whose partitions this catalog lends out but
does not own).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, cast

from kio.schema.errors import ErrorCode as E

from .. import server_log
from ..durable import JsonFile
from ..log.config import LogConfig
from .configs import BrokerConfigs, log_config, resolve, validate_topic_configs
from .config_defs import ConfigError
from ..log.partition import PartitionLog

log = server_log.get(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
CATALOG_FILE = "topics.json"
INTERNAL_TOPICS_FILE = "internal-topics.json"  # the internal topics created (at their first use)
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # Kafka's message.max.bytes


def _catalog(doc: dict[str, Any]) -> list[TopicInfo]:
    """The topics of a stored catalog (no logs yet)."""
    out = []
    for name, entry in doc.items():
        if name in (".", "..") or not _LEGAL.fullmatch(name):  # (the name is a directory's: no "../")
            raise ValueError(f"topic name {name!r} is illegal")
        partitions, replication_factor = entry["partitions"], entry.get("replication_factor", 1)
        if type(partitions) is not int or partitions < 1 or type(replication_factor) is not int:
            raise ValueError(f"topic {name!r}: {partitions!r} partitions, replication factor {replication_factor!r}")
        configs = {str(k): str(v) for k, v in entry.get("configs", {}).items()}
        out.append(
            TopicInfo(name, partitions, uuid.UUID(entry["topic_id"]), configs, replication_factor=replication_factor)
        )
    return out


def _names(doc: Any) -> list[str]:
    if not isinstance(doc, list) or not all(isinstance(n, str) for n in doc):
        raise ValueError("not a list of topic names")
    return doc


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not keep the internal topics created: %s", task.exception())


def _entry(info: TopicInfo) -> dict[str, Any]:
    """A topic's entry in the catalog file."""
    entry = {"partitions": info.partitions, "topic_id": str(info.topic_id), "configs": info.configs}
    if info.replication_factor != 1:
        entry["replication_factor"] = info.replication_factor
    return entry


class TopicError(Exception):
    def __init__(self, code: E, message: str) -> None:
        super().__init__(message)
        self.code = code


def validate_name(name: str | None) -> None:
    """Kafka's Topic.validate, in its controller's words."""
    if not name:
        why = "the empty string is not allowed"
    elif name in (".", ".."):
        why = f"'{name}' is not allowed"
    elif len(name) > MAX_NAME_LENGTH:
        why = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not _LEGAL.fullmatch(name):
        why = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return
    raise TopicError(E.invalid_topic_exception, f"Topic name is invalid: {why}")


def validate_configs(configs: dict[str, str | None], broker: BrokerConfigs | None = None) -> None:
    """Kafka's checks of a topic's own settings: known names, types, ranges, and across
    configs (min.compaction.lag.ms <= max.compaction.lag.ms)."""
    broker = broker or BrokerConfigs(None, 0, {})
    try:
        validate_topic_configs(configs, broker.topic_defs)
        resolve({k: v for k, v in configs.items() if v is not None}, broker)
    except ConfigError as e:
        raise TopicError(e.code, str(e)) from None


@dataclass
class TopicInfo:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    replication_factor: int = 1  # replicas Metadata reports (the data is stored once)
    error: E = E.none
    logs: list[PartitionLog] = field(default_factory=list, repr=False)
    # every topic config's typed value in force (its own settings over the broker's)
    values: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def max_message_bytes(self) -> int:
        return cast(int, self.values.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))

    @property
    def log_append_time(self) -> bool:
        return self.values.get("message.timestamp.type") == "LogAppendTime"


class Topics:
    def __init__(
        self,
        data_dir: Path,
        base_config: LogConfig,
        *,
        auto_create: bool,
        default_partitions: int,
        offsets_logs: list[PartitionLog],
        broker_configs: BrokerConfigs | None = None,
        brokers: int = 1,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.brokers = brokers  # the largest replication factor a topic may have
        self.base_config = base_config
        self.broker_configs = broker_configs or BrokerConfigs(None, 0, {})
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        # Every (topic, partition) that exists: checked by each offset commit, one set lookup.
        self.partition_keys: set[tuple[str, int]] = {(OFFSETS_TOPIC, p) for p in range(len(offsets_logs))}
        # The internal topics (__consumer_offsets, __transaction_state, __share_group_state):
        # their logs are open from the start, but as in Kafka a topic exists (is listed,
        # described, fetched from) only once its coordinator first needs it: until then it
        # waits here. The names created are kept in the data dir.
        self.internal_pending: dict[str, TopicInfo] = {}
        self.internal_file = JsonFile(self.data_dir / INTERNAL_TOPICS_FILE)
        self.internal_created: set[str] = set(self.internal_file.load([], parse=_names))
        self.changes = 0  # bumped on every catalog change (Metadata caches by it)
        self.add_internal(OFFSETS_TOPIC, offsets_logs, 1)
        self.offsets_logs = offsets_logs
        self.broker_configs.listeners.append(self.reconfigure)
        # Topics whose deletion is still closing and removing files: their name cannot be
        # created again until it is done (Kafka: "marked for deletion").
        self.deleting: set[str] = set()
        self.file = JsonFile(self.data_dir / CATALOG_FILE)
        # Catalog changes run one at a time (Kafka's controller handles them in order): each
        # checks, writes the catalog durably, and only then takes effect.
        self._changing = asyncio.Lock()
        # Auto-creations under way (name -> task): a Metadata naming one waits for it, so the
        # next request finds the topic.
        self.auto_creating: dict[str, asyncio.Task[None]] = {}

    def reconfigure(self, broker: BrokerConfigs) -> None:
        """A dynamic log.cleaner.backoff.ms applies to every log, the internal ones too
        (Kafka's one LogCleaner cleans them all)."""
        backoff = broker.value("log.cleaner.backoff.ms")
        if self.base_config.cleaner_backoff_ms != backoff:
            self.base_config = dataclasses.replace(self.base_config, cleaner_backoff_ms=backoff)
            user_logs = [plog for info in self.topics.values() if not info.internal for plog in info.logs]
            for plog in [*self.offsets_logs, *user_logs]:
                plog.config = dataclasses.replace(plog.config, cleaner_backoff_ms=backoff)
                plog.cleaner_reconfigured()

    # internal topics --------------------------------------------------------------------

    def add_internal(self, name: str, logs: list[PartitionLog], id_number: int) -> None:
        """An internal topic's logs: the topic exists if it was created before (or, in a
        data dir from before this was kept, holds records), else once create_internal()."""
        info = TopicInfo(name, len(logs), uuid.UUID(int=id_number), {"cleanup.policy": "compact"}, internal=True)
        info.logs = logs
        info.values = resolve(
            {**info.configs, "segment.bytes": str(logs[0].config.segment_bytes)} if logs else info.configs,
            self.broker_configs,
        )
        if name in self.internal_created or any(plog.log_end_offset > 0 for plog in logs):
            self._add(info)
        else:
            self.internal_pending[name] = info

    def create_internal(self, name: str) -> None:
        """The internal topic exists from now on, as Kafka creates it at its first use
        (a FindCoordinator of its key type, a Metadata naming it, a share group's first
        subscription or share-partition state): listed, described and readable. The name is kept in the data dir in the
        background (should that fail, the topic is found again by its records)."""
        info = self.internal_pending.pop(name, None)
        if info is None:
            return
        self._add(info)
        self.changes += 1
        self.internal_created.add(name)
        log.info("created internal topic %s with %d partitions", name, info.partitions)
        names = sorted(self.internal_created)
        task = asyncio.ensure_future(self.internal_file.save(names))
        task.add_done_callback(_log_failure)

    # persistence ------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        data_dir: Path,
        base_config: LogConfig,
        internal: Iterable[tuple[str, list[PartitionLog], int]] = (),
        **kw: Any,
    ) -> "Topics":
        """The catalog's topics, then the other internal topics' logs (name, logs, the
        number of the topic's fixed id), opened before: add_internal."""
        topics = cls(data_dir, base_config, **kw)
        for info in topics.file.load([], parse=_catalog):
            info.values = topics._resolve(info.configs)
            info.logs = [topics._open(info.name, p, info.values) for p in range(info.partitions)]
            topics._add(info)
        for name, logs, id_number in internal:
            topics.add_internal(name, logs, id_number)
        return topics

    async def _commit(self, changed: dict[str, TopicInfo | None], install: Any) -> None:
        """Write the catalog with these topics changed (None: deleted), durably, then
        install() the change in memory. TopicError(KAFKA_STORAGE_ERROR) if the disk refused:
        nothing changed."""
        doc = {t.name: _entry(t) for t in self.topics.values() if not t.internal}
        for name, info in changed.items():
            if info is None:
                doc.pop(name, None)
            else:
                doc[name] = _entry(info)

        def then() -> None:
            install()
            self.changes += 1

        try:
            await self.file.save(doc, then)
        except OSError as e:
            log.warning("cannot write the topic catalog: %s", e.strerror or e)
            raise TopicError(E.kafka_storage_error, f"cannot store the topic catalog: {e.strerror or e}") from e

    def _resolve(self, configs: dict[str, str]) -> dict[str, Any]:
        try:
            return resolve(configs, self.broker_configs)
        except ConfigError as e:  # (a catalog written by hand): the topic still opens, on defaults
            log.warning("topic configs %s: %s; using the defaults", configs, e)
            return resolve({}, self.broker_configs)

    def _open(self, name: str, partition: int, values: dict[str, Any]) -> PartitionLog:
        plog = PartitionLog.open_sync(self.data_dir / f"{name}-{partition}", log_config(self.base_config, values))
        plog.start_background()
        return plog

    def _open_partitions(self, name: str, partitions: range, values: dict[str, Any]) -> list[PartitionLog]:
        """Open (create) the logs of new partitions; if the disk or the process refuses one
        (no space, no file descriptor left), none is kept and the client is told."""
        opened: list[PartitionLog] = []
        try:
            for p in partitions:
                opened.append(self._open(name, p, values))
        except OSError as e:
            self._discard(name, partitions, opened)
            log.warning("cannot create partitions %s of topic %s: %s", partitions, name, e.strerror or e)
            raise TopicError(
                E.kafka_storage_error, f"cannot create the files of topic {name!r}: {e.strerror or e}"
            ) from e
        return opened

    async def set_configs(self, name: str, settings: Any) -> None:
        """Replace a topic's own settings (AlterConfigs) with settings(the current ones):
        saved, then in effect at once."""
        async with self._changing:
            info = self.topics.get(name)
            if info is None:
                raise TopicError(E.unknown_topic_or_partition, f"Topic {name} does not exist")
            configs = dict(settings(info.configs))

            def install() -> None:
                info.configs = configs
                self._apply(info)

            await self._commit({name: TopicInfo(name, info.partitions, info.topic_id, configs)}, install)

    def broker_configs_changed(self) -> None:
        """Topics that follow a broker default pick up its new value."""
        for info in self.topics.values():
            if not info.internal:
                self._apply(info)
        self.changes += 1

    def _apply(self, info: TopicInfo) -> None:
        info.values = self._resolve(info.configs)
        config = log_config(self.base_config, info.values)
        for plog in info.logs:
            plog.config = config

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

    def _new_topic(
        self, name: str, partitions: int, replication_factor: int = -1, configs: dict[str, str | None] | None = None
    ) -> TopicInfo:
        """CreateTopics' checks, and the topic it would create (no files yet)."""
        validate_name(name)
        if name in self.internal_pending:  # (created as Kafka would at its first use: it exists now)
            self.create_internal(name)
        if name in self.topics:
            raise TopicError(E.topic_already_exists, f"Topic '{name}' already exists.")
        if name in self.deleting:
            raise TopicError(E.topic_already_exists, f"topic {name!r} is marked for deletion")
        clash = self._collision(name)
        if clash is not None:  # Kafka: '.' and '_' map to the same metric names
            raise TopicError(E.invalid_topic_exception, f"topic {name!r} collides with existing topic {clash!r}")
        if partitions == -1:
            partitions = self.default_partitions
        if partitions <= 0:
            raise TopicError(E.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
        if replication_factor == -1:
            replication_factor = 1  # default.replication.factor
        if replication_factor <= 0:
            raise TopicError(E.invalid_replication_factor, "Replication factor must be larger than 0.")
        if replication_factor > self.brokers:
            raise TopicError(
                E.invalid_replication_factor,
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                f"{self.brokers} broker(s) are registered or some brokers have all their log directories cordoned.",
            )
        configs = dict(configs or {})
        validate_configs(configs, self.broker_configs)
        clean = {k: v for k, v in configs.items() if v is not None}
        info = TopicInfo(name, partitions, configs=clean, replication_factor=replication_factor)
        info.values = self._resolve(clean)
        return info

    async def create(
        self,
        name: str,
        partitions: int,
        replication_factor: int = -1,
        configs: dict[str, str | None] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        info = self._new_topic(name, partitions, replication_factor, configs)
        if validate_only:
            return info
        async with self._changing:
            self._new_topic(name, partitions, replication_factor, configs)  # (again: a change may have come first)
            for p in range(info.partitions):  # a delete cut short by a crash may have left data behind
                shutil.rmtree(self.data_dir / f"{name}-{p}", ignore_errors=True)
            info.logs = self._open_partitions(name, range(info.partitions), info.values)
            try:
                await self._commit({name: info}, lambda: self._add(info))
            except TopicError:
                self._discard(name, range(info.partitions), info.logs)
                raise
        log.info("created topic %s with %d partitions %s", name, info.partitions, info.configs or "")
        return info

    def _discard(self, name: str, partitions: range, logs: list[PartitionLog]) -> None:
        for plog in logs:
            plog.discard_sync()
        for p in partitions:
            shutil.rmtree(self.data_dir / f"{name}-{p}", ignore_errors=True)

    def _collision(self, name: str) -> str | None:
        key = name.replace(".", "_")
        return next((t for t in self.topics if t.replace(".", "_") == key), None)

    def _check_add_partitions(self, name: str, count: int) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise TopicError(E.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if info.internal:
            raise TopicError(E.invalid_request, f"cannot change the partitions of internal topic {name}")
        if count == info.partitions:  # (Kafka's texts, from its controller's ReplicationControlManager)
            raise TopicError(E.invalid_partitions, f"Topic already has {count} partition(s).")
        if count < info.partitions:
            raise TopicError(
                E.invalid_partitions,
                f"The topic {name} currently has {info.partitions} partition(s); {count} would not be an increase.",
            )
        return info

    async def add_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        self._check_add_partitions(name, count)
        if validate_only:
            return
        async with self._changing:
            info = self._check_add_partitions(name, count)
            new = range(info.partitions, count)
            opened = self._open_partitions(name, new, info.values)

            def install() -> None:
                info.logs += opened
                self.partition_keys.update((name, p) for p in new)
                info.partitions = count

            try:
                await self._commit({name: TopicInfo(name, count, info.topic_id, info.configs)}, install)
            except TopicError:
                self._discard(name, new, opened)
                raise

    async def delete(self, name: str) -> TopicInfo:
        async with self._changing:
            info = self.topics.get(name)
            if info is None:  # (Kafka's answer: the error's default message)
                raise TopicError(E.unknown_topic_or_partition, "This server does not host this topic-partition.")
            if info.internal:
                raise TopicError(E.invalid_request, f"cannot delete internal topic {name}")

            def install() -> None:
                del self.topics[name]
                self.by_id.pop(info.topic_id, None)
                self.partition_keys.difference_update((name, p) for p in range(info.partitions))
                self.deleting.add(name)  # a CreateTopics of the name now must not get files we remove

            await self._commit({name: None}, install)
        for plog in info.logs:  # long-polling fetches re-read now, find the topic gone and answer
            plog.wake_listeners()
        try:
            for p, plog in enumerate(info.logs):
                await plog.close()
                shutil.rmtree(self.data_dir / f"{name}-{p}", ignore_errors=True)
        finally:
            self.deleting.discard(name)
        log.info("deleted topic %s", name)
        return info

    def describe(self, names: list[str] | None, *, auto_create: bool) -> Iterable[tuple[str, TopicInfo | None]]:
        """(name, info or None) for Metadata. An unknown name may be auto-created; the
        request that creates it is answered as a KRaft broker answers it (Kafka's
        AutoTopicCreationManager): UNKNOWN_TOPIC_OR_PARTITION and no partitions (an
        illegal name: INVALID_TOPIC_EXCEPTION); the topic is there for the next one."""
        if names is None:
            return list(self.topics.items())
        out = []
        for name in names:
            if name in self.internal_pending:  # (Kafka creates an internal topic a Metadata names)
                self.create_internal(name)
            info = self.topics.get(name)
            if info is None and auto_create and self.auto_create and name is not None:
                error = E.unknown_topic_or_partition
                try:
                    self._new_topic(name, self.default_partitions)
                    if name not in self.auto_creating:
                        task = asyncio.ensure_future(self._auto_create(name))
                        self.auto_creating[name] = task

                        def created(_: object, name: str = name) -> None:
                            self.auto_creating.pop(name, None)

                        task.add_done_callback(created)
                except TopicError as e:
                    if e.code == E.invalid_topic_exception:
                        error = e.code
                info = TopicInfo(name, 0, uuid.UUID(int=0), error=error)
            out.append((name, info))
        return out

    async def _auto_create(self, name: str) -> None:
        try:
            await self.create(name, self.default_partitions)
        except TopicError as e:  # (created meanwhile by someone else: nothing to say)
            if e.code != E.topic_already_exists:
                log.warning("auto-creating topic %s: %s", name, e)

    async def close(self) -> None:
        if self.auto_creating:  # (a creation that finished later would open logs after the close)
            await asyncio.wait(list(self.auto_creating.values()))
        for info in self.topics.values():
            if not info.internal:  # the offsets log closes itself
                for plog in info.logs:
                    await plog.close()
