"""Share-group dead-letter queues (KIP-1191, share.version 2): Kafka 4.4's ShareGroupDLQManager.

A share group whose `errors.deadletterqueue.topic.name` is set (and share.version finalized at
2) does not archive a record its client rejects, or one released or expired at the delivery
limit, at once: the record goes to Archiving, that state is written, and a dead letter is
produced to the group's dead-letter topic; then (written or not) the record is Archived.

A dead letter is one record per offset, as Kafka's ProduceRequestHandler builds it:
- headers `__dlq.errors.topic` (the topic's name), `__dlq.errors.partition`,
  `__dlq.errors.offset`, `__dlq.errors.group`, `__dlq.errors.delivery.count` and
  `__dlq.errors.message` ("Offset rejected by client." or "Offset delivery count exceeded the
  threshold."), all as UTF-8 text;
- the original record's key and value when the group's
  `errors.deadletterqueue.copy.record.enable` is true (but for a record, or a compressed batch's
  records, over Kafka's 1 MiB copy budget), else none (the original's headers and timestamp are
  not copied: the dead letter is stamped when it is written);
- in the dead-letter topic's partition `source partition % its partitions`, uncompressed.

The topic must be usable as Kafka checks it, in Kafka's order and words: a name not starting
with `__`, a topic with `errors.deadletterqueue.group.enable=true`, or else a missing topic
created (with that config and `message.timestamp.type=CreateTime`, the broker's default
partitions and replication) when the broker's `errors.deadletterqueue.auto.create.topics.enable`
is true, and a name starting with the broker's `errors.deadletterqueue.topic.name.prefix`
(`dlq.`; empty: any name). A dead letter that cannot be written raises DeadLetterError, which
the manager logs, archiving the records regardless (as Kafka does).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as E

from protocol.record_batch import Record, build_batch_from, iter_batch_records

from ..log.partition import PartitionLog
from .partition import EXCEEDED

TOPIC_NAME = "errors.deadletterqueue.topic.name"
COPY_RECORD = "errors.deadletterqueue.copy.record.enable"
GROUP_ENABLE = "errors.deadletterqueue.group.enable"  # (a topic config)
AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"  # (broker configs)
PREFIX = "errors.deadletterqueue.topic.name.prefix"
# ShareGroupDLQManager's causes, as their messages
MESSAGES = {EXCEEDED: b"Offset delivery count exceeded the threshold."}
REJECTED_MESSAGE = b"Offset rejected by client."


class DeadLetterError(Exception):
    """A dead letter that could not be written (Kafka's ConfigException or produce error text)."""


class BrokerProducer(Protocol):
    """Where the broker produces on its own account (the data plane, coordinator.broker.data):
    a batch checked and stored as a Produce with acks=-1 stores a client's; (error, message)."""

    async def append_as_broker(self, topic: str, partition: int, records: bytes) -> tuple[int, str | None]: ...


class DeadLetters:
    def __init__(self, topics: Any, data_plane: BrokerProducer, groups: Any) -> None:
        self.topics = topics
        self.data_plane = data_plane
        self.groups = groups  # the CoordinatorRuntime: group configs

    def topic_for(self, group_id: str) -> str | None:
        """The group's dead-letter topic, None if it has none (blank, Kafka's default)."""
        configs = self.groups.group_configs
        name = configs.get(group_id, TOPIC_NAME) if configs is not None else None
        return name or None

    async def write(
        self,
        group_id: str,
        topic: str,
        partition: int,
        source: PartitionLog | None,
        runs: list[tuple[int, int, int, int]],
    ) -> None:
        """Produce the dead letters of `runs` (first, last, delivery count, cause) of the
        group's share-partition `topic`-`partition`: one batch per run, each durable before
        the next (a failed one leaves nothing of itself in the log)."""
        name = await self._usable_topic(group_id)
        info = self.topics.get(name)
        target = partition % info.partitions
        configs = self.groups.group_configs
        copy = configs is not None and bool(configs.value(group_id, COPY_RECORD))
        for first, last, count, cause in runs:
            originals = _originals(source, first, last) if copy else {}
            now = int(time.time() * 1000)
            fixed = [
                ("__dlq.errors.topic", topic.encode()),
                ("__dlq.errors.partition", str(partition).encode()),
            ]
            context = [
                ("__dlq.errors.group", group_id.encode()),
                ("__dlq.errors.delivery.count", str(count).encode()),
                ("__dlq.errors.message", MESSAGES.get(cause, REJECTED_MESSAGE)),
            ]
            records = [
                Record(
                    0,
                    now,
                    *originals.get(offset, (None, None)),
                    [*fixed, ("__dlq.errors.offset", str(offset).encode()), *context],
                )
                for offset in range(first, last + 1)
            ]
            for batch in _batches(records, info.max_message_bytes):
                error, message = await self.data_plane.append_as_broker(name, target, batch)
                if error != E.none:
                    raise DeadLetterError(
                        f"Unable to produce to DLQ topic {name}-{target}: {E(error).name.upper()}"
                        + (f" ({message})" if message else "")
                    )

    async def _usable_topic(self, group_id: str) -> str:
        """ProduceRequestHandler.validateDlqTopic, then the topic created if it may be."""
        name = self.topic_for(group_id)
        if name is None:
            raise DeadLetterError(f"Configured DLQ topic name in share group: {group_id} is empty.")
        if name.startswith("__"):
            raise DeadLetterError(
                f"Configured DLQ topic name in share group: {group_id} cannot start with __, topic: {name}."
            )
        info = self.topics.get(name)
        if info is not None and not info.values.get(GROUP_ENABLE):
            raise DeadLetterError(
                f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, topic: {name}."
            )
        broker = self.topics.broker_configs
        if info is None and not broker.value(AUTO_CREATE):
            raise DeadLetterError(
                f"DLQ topic does not exist and auto create is disabled on cluster for share group: {group_id}, topic: {name}."
            )
        prefix = broker.value(PREFIX) or ""
        if prefix and not name.startswith(prefix):
            raise DeadLetterError(
                "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
                f"{group_id}, topic: {name}, prefix: {prefix}."
            )
        if info is None:
            try:
                await self.topics.create(name, -1, -1, {GROUP_ENABLE: "true", "message.timestamp.type": "CreateTime"})
            except Exception as e:  # (the topics' TopicError: created meanwhile, or refused)
                if getattr(e, "code", None) != E.topic_already_exists:
                    raise DeadLetterError(f"Unable to create DLQ topic {name}: {e}") from e
            if self.topics.get(name) is None:
                raise DeadLetterError(f"DLQ topic {name} could not be created.")
        return name


COMPRESSION = 0x07  # a batch's attributes: its compression codec
BATCH_OVERHEAD = 61  # a record batch's header (Kafka's DefaultRecordBatch.RECORD_BATCH_OVERHEAD)


def _batches(records: list[Record], limit: int) -> list[bytes]:
    """The records in batches of at most `limit` bytes (the topic's max.message.bytes), in
    order, as Kafka's ProduceRequestHandler fills each produce: a record that does not fit
    starts the next batch, and one too big on its own is sent alone (and refused)."""
    out: list[bytes] = []
    current: list[Record] = []
    size = BATCH_OVERHEAD
    for r in records:
        own = len(build_batch_from([r], base_offset=0, relative=True)) - BATCH_OVERHEAD
        if current and size + own > limit:
            out.append(_batch(current))
            current, size = [], BATCH_OVERHEAD
        current.append(r)
        size += own
    if current:
        out.append(_batch(current))
    return out


def _batch(records: list[Record]) -> bytes:
    return build_batch_from([r._replace(offset=i) for i, r in enumerate(records)], base_offset=0, relative=True)


# ShareGroupDLQStateManager's DLQ_MAX_FETCH_BYTES: the decompressed original data Kafka's
# ShareGroupDLQRecordFetcher copies in one round. A record larger than that, or a compressed
# batch whose records are larger than that together, is never copied (its dead letters are
# headers only); the rest is copied, in as many rounds as it takes.
MAX_COPY_BYTES = 1024 * 1024


def _varint_size(value: int) -> int:
    """Bytes of a zigzag varint (Kafka's ByteUtils.sizeOfVarlong)."""
    v = (value << 1) ^ (value >> 63)
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size


def _field_size(data: bytes | None) -> int:
    return _varint_size(-1) if data is None else _varint_size(len(data)) + len(data)


def _record_size(r: Record, base_offset: int, base_timestamp: int) -> int:
    """The record's size in its batch (Kafka's DefaultRecord.sizeInBytes: its length, then its
    attributes, timestamp and offset deltas, key, value and headers)."""
    body = (
        1
        + _varint_size(r.timestamp - base_timestamp)
        + _varint_size(r.offset - base_offset)
        + _field_size(r.key)
        + _field_size(r.value)
        + _varint_size(len(r.headers))
        + sum(_field_size(k.encode()) + _field_size(v) for k, v in r.headers)
    )
    return _varint_size(body) + body


def _originals(source: PartitionLog | None, first: int, last: int) -> dict[int, tuple[bytes | None, bytes | None]]:
    """offset -> (key, value) of the records first..last still in the log (an offset the log
    no longer holds gets a dead letter of headers only, as Kafka's), but for those over
    Kafka's MAX_COPY_BYTES (alone, or in a compressed batch over it)."""
    out: dict[int, tuple[bytes | None, bytes | None]] = {}
    if source is None:
        return out
    for h, data in source.batches(first):
        if h.base_offset > last:
            break
        records = list(iter_batch_records(data, h))
        sizes = [_record_size(r, h.base_offset, h.first_timestamp) for r in records]
        if h.attributes & COMPRESSION and sum(sizes) > MAX_COPY_BYTES:
            continue  # (Kafka skips the whole batch: it never fits the budget)
        for r, size in zip(records, sizes):
            if first <= r.offset <= last and size <= MAX_COPY_BYTES:
                out[r.offset] = (r.key, r.value)
    return out
