"""OffsetCommit, OffsetFetch, OffsetDelete and offset retention of one shard's groups
(Kafka's OffsetMetadataManager). Groups are reached through the Group interface, so
every group type commits the same way; the offsets themselves are in the shard's
OffsetStore, which only replay changes.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Container, cast

from ..errors import E

from protocol.offset_commit import PartitionCommit

from .group import CommitFrom
from .records import Event, OffsetCommitKey, OffsetCommitValue
from .shard_context import CoordinatorResult, ShardContext

_new = tuple.__new__

# Members commit the same partitions again and again: each commit's record keys are the keys
# made before (a named tuple costs several times a tuple's making, and a key seen before is
# found at once in the encoded keys' cache). By group, then topic, then partition: no tuple
# is made and hashed to find one. At most _MAX_COMMIT_KEYS (_commit_key_count[0]) are kept.
_commit_keys: dict[str, dict[Any, dict[int, OffsetCommitKey]]] = {}
_commit_key_count = [0]
_MAX_COMMIT_KEYS = 100_000

log = logging.getLogger(__name__)

NO_OFFSET = -1
_NONE, _METADATA_TOO_LARGE, _UNKNOWN_PARTITION = E.none, E.offset_metadata_too_large, E.unknown_topic_or_partition
DEAD = "Dead"

# OffsetDelete's outcome: (group error, [(topic, [(partition, error)])])
OffsetDeleteResult = tuple[int, list[tuple[str, list[tuple[int, int]]]]]


class OffsetManager:
    def __init__(
        self,
        shard: ShardContext,
        metadata_max_bytes: int = 4096,
        retention_ms: int = 7 * 86_400_000,
        existing_partitions: Container[tuple[str, int]] | None = None,
    ) -> None:
        self.shard = shard
        self.groups = shard.groups
        self.store = shard.offsets
        self.clock = shard.clock
        self.metadata_max_bytes = metadata_max_bytes
        self.retention_ms = retention_ms
        self.existing_partitions = existing_partitions  # (topic, partition) pairs; None: all exist

    # OffsetCommit ---------------------------------------------------------------------

    def _unknown(self, partitions: list[PartitionCommit]) -> list[bool] | None:
        """Per partition, whether it does not exist (None: all do)."""
        existing = self.existing_partitions
        if existing is not None:
            for p in partitions:  # (no list built when all exist: the usual case)
                if (p[0], p[1]) not in existing:
                    return [(q[0], q[1]) not in existing for q in partitions]
        return None

    def refused(self, partitions: list[PartitionCommit], error: int) -> list[int]:
        """The answer to a commit the coordinator refuses whole (NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS): `error`, but UNKNOWN_TOPIC_OR_PARTITION for partitions
        that do not exist, which Kafka's KafkaApis answers itself before it asks the
        coordinator."""
        unknown = self._unknown(partitions)
        return [error] * len(partitions) if unknown is None else [_UNKNOWN_PARTITION if u else error for u in unknown]

    def commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        partitions: list[PartitionCommit],
        expire_timestamp: int = -1,
        version: int = 9,
    ) -> CoordinatorResult:
        """The response is one error per requested partition, in request order; the records
        are the offsets to write (none: the commit is refused). If they cannot be written,
        each partition the commit would have written carries that error.

        Kafka's order: partitions of topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION
        first (the broker's check); the group's error, if any, goes to the others; then
        each offset's metadata size is checked."""
        unknown = self._unknown(partitions)
        if unknown is not None and False not in unknown:  # nothing reaches the coordinator
            return CoordinatorResult([_UNKNOWN_PARTITION] * len(partitions))
        error: int | Callable[[Any, int], int]  # a callable: KIP-1251's per-partition epoch check
        if not group_id:
            error = E.invalid_group_id
        else:
            group = self.groups.get(group_id)
            if group is not None:
                # (named tuples built as tuples of their class: their __new__ is a Python call)
                who = _new(CommitFrom, (member_id, instance_id, generation, version, False))
                error = group.validate_offset_commit(who, self.clock.now())
            elif generation < 0:
                error = _NONE  # replaying the commit creates a simple (memberless) group, as Kafka
            else:
                error = E.group_id_not_found if version >= 9 else E.illegal_generation
        check = None
        if callable(error):  # KIP-1251: an older epoch, checked per partition
            check, error = self._by_name(error), _NONE
        if error != _NONE:
            if unknown is None:
                return CoordinatorResult([error] * len(partitions))
            return CoordinatorResult([_UNKNOWN_PARTITION if u else error for u in unknown])
        # (objects: compiled, an int is made an object again wherever it goes into a tuple,
        # a new one for most offsets and every timestamp)
        now: object = self.clock.wall()
        expire: object = expire_timestamp
        errors: list[int] = []
        records: list[Event] = []
        max_bytes = self.metadata_max_bytes
        # (compiled, a module's names are dict lookups: taken once, not per partition)
        none, new, value_type = _NONE, _new, OffsetCommitValue
        keys = _commit_keys.get(group_id)
        for i, fields in enumerate(cast("list[tuple[Any, ...]]", partitions)):  # (so, its fields as objects)
            topic, partition, offset, leader_epoch, metadata = fields
            metadata = metadata or ""
            if unknown is not None and unknown[i]:
                errors.append(_UNKNOWN_PARTITION)
            elif check is not None and (stale := check(cast(str, topic), partition)) != none:  # (named by now)
                errors.append(stale)
            elif len(metadata) * 4 > max_bytes and len(metadata.encode()) > max_bytes:  # UTF-8: <= 4 B/char
                errors.append(_METADATA_TOO_LARGE)
            else:
                errors.append(none)
                of_topic = keys.get(topic) if keys is not None else None
                key = of_topic.get(partition) if of_topic is not None else None
                if key is None:
                    key = _commit_key(group_id, topic, partition)
                    keys = _commit_keys[group_id]  # (_commit_key may have emptied the cache)
                # (named tuples built as tuples of their class: their __new__ is a Python call)
                records.append((key, new(value_type, (offset, metadata, now, leader_epoch, expire))))
        result = CoordinatorResult(errors)
        if records:
            result.add(records)  # (offsets change only at replay: nothing to do once durable)
        return result

    # TxnOffsetCommit ------------------------------------------------------------------

    def txn_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation: int,
        member_id: str,
        instance_id: str | None,
        partitions: list[tuple[str, int, int, int, str | None]],
        version: int = 5,
    ) -> list[int] | CoordinatorResult:
        """Offsets committed inside a transaction: written as a transactional batch of the
        producer, pending until its marker (applied on commit, dropped on abort). Errors per
        partition as commit(), answered at once if nothing is written; the group checks are Kafka's for transactional commits
        (KIP-447: a member id and generation are checked when given; no rebalance check).
        A failed member epoch check fails the whole request, as Kafka's validator throws;
        GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH are answered from version 6 (KIP-1319),
        ILLEGAL_GENERATION before."""
        existing = self.existing_partitions
        unknown = [existing is not None and (t, p) not in existing for t, p, *_ in partitions]
        group = self.groups.get(group_id) if group_id else None
        error: int | Callable[[Any, int], int]  # a callable: KIP-1251's per-partition epoch check
        if not group_id:
            error = E.invalid_group_id
        elif group is None:
            error = _NONE if generation < 0 else E.group_id_not_found if version >= 6 else E.illegal_generation
        elif group.state_name == DEAD:
            error = E.coordinator_not_available
        elif generation < 0 and not member_id and instance_id is None:
            error = _NONE  # v0-2, or a producer outside the group
        elif type(group).__name__ == "ClassicGroup":
            error, _ = group.check_member(instance_id, member_id, generation)  # type: ignore[attr-defined]  # the class-name check above narrows to ClassicGroup without importing it
        else:
            error = group.validate_offset_commit(
                CommitFrom(member_id, instance_id, generation, transactional=True), self.clock.now()
            )
        if callable(error):  # KIP-1251: an older epoch, checked per partition; one refused refuses all
            check = self._by_name(error)
            error = next(
                (
                    stale
                    for (topic, partition, _, _, metadata), missing in zip(partitions, unknown)
                    if not missing
                    and len((metadata or "").encode()) <= self.metadata_max_bytes
                    and (stale := check(topic, partition)) != _NONE
                ),
                _NONE,
            )
        if error == E.stale_member_epoch and version < 6:
            error = E.illegal_generation
        now = self.clock.wall()
        errors: list[int] = []
        records: list[Event] = []
        for (topic, partition, offset, leader_epoch, metadata), missing in zip(partitions, unknown):
            metadata = metadata or ""
            if missing:
                errors.append(_UNKNOWN_PARTITION)
            elif error != _NONE:
                errors.append(error)
            elif len(metadata.encode()) > self.metadata_max_bytes:
                errors.append(_METADATA_TOO_LARGE)
            else:
                errors.append(_NONE)
                records.append(
                    (
                        OffsetCommitKey(group_id, topic, partition),
                        OffsetCommitValue(offset, metadata, now, leader_epoch, -1),
                    )
                )
        if not records:
            return errors
        result = CoordinatorResult(errors)
        result.add_txn(producer_id, producer_epoch, records, None)
        return result

    def _by_name(self, check: Callable[[Any, int], int]) -> Callable[[str, int], int]:
        """A group's per-partition commit check (by topic id) for partitions named by topic."""
        lookup = self.shard.consumer.image.lookup

        def by_name(topic: str, partition: int) -> int:
            found = lookup(topic)
            return check(found[0] if found is not None else None, partition)

        return by_name

    # OffsetFetch ----------------------------------------------------------------------

    def fetch(
        self,
        group_id: str,
        wanted: list[tuple[Any, list[int]]] | None,  # (a topic: its name, or v10's unknown id)
    ) -> tuple[int, list[tuple[str, list[tuple[int, OffsetCommitValue | None]]]]]:
        """(group error, [(topic, [(partition, offset or None)])]); wanted=None means all. An
        empty group id is a group like any other, as at Kafka 4.4."""
        group = self.groups.get(group_id)
        if group is not None and group.group_type == "share":
            return E.group_id_not_found, []  # Kafka's ShareGroup.validateOffsetFetch: no committed offsets
        offsets = self.store.of(group_id) if group is None or group.state_name != DEAD else {}
        if wanted is None:
            by_topic: dict[str, list[tuple[int, OffsetCommitValue | None]]] = {}
            for (topic, partition), value in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append((partition, value))
            return E.none, list(by_topic.items())
        return E.none, [(topic, [(p, offsets.get((topic, p))) for p in parts]) for topic, parts in wanted]

    # OffsetDelete ---------------------------------------------------------------------

    def delete(self, group_id: str, wanted: list[tuple[str, list[int]]]) -> OffsetDeleteResult | CoordinatorResult:
        """(group error, [(topic, [(partition, error)])]): at once if nothing is deleted, else
        the response of the tombstones' result."""
        if not group_id:
            return E.invalid_group_id, []
        group = self.groups.get(group_id)
        if group is None:
            return E.group_id_not_found, []
        error = group.validate_offset_delete()
        if error != _NONE:
            return error, []
        offsets = self.store.of(group_id)
        existing = self.existing_partitions
        results: list[tuple[str, list[tuple[int, int]]]] = []
        records: list[Event] = []
        for topic, parts in wanted:
            subscribed = group.is_subscribed_to(topic)
            row: list[tuple[int, int]] = []
            for p in parts:
                if existing is not None and (topic, p) not in existing:
                    row.append((p, _UNKNOWN_PARTITION))  # (the broker's check, as for commits)
                elif subscribed:
                    row.append((p, E.group_subscribed_to_topic))
                else:
                    row.append((p, _NONE))
                    if (topic, p) in offsets:
                        records.append((OffsetCommitKey(group_id, topic, p), None))
            results.append((topic, row))
        if not records:
            return _NONE, results
        result = CoordinatorResult((_NONE, results))
        result.add(records)
        return result

    # retention (KIP-211) --------------------------------------------------------------

    def expired(self, group_id: str, now_wall: int) -> list[tuple[str, int]]:
        """Offsets of the group due to expire, by Kafka's rules: none of a group in a
        rebalance; an Empty group's once it has been Empty for the retention time; in a
        Stable consumer group only those of topics nobody subscribes to."""
        group = self.groups.get(group_id)
        offsets = self.store.of(group_id)
        base_of = group.expiration_base() if group is not None else _commit_time
        if base_of is None:
            return []
        out = []
        for key, value in offsets.items():
            if group is not None and not group.is_empty() and group.is_subscribed_to(key[0]):
                continue
            if value.expire_timestamp >= 0:
                due = value.expire_timestamp <= now_wall
            else:
                due = base_of(value) + self.retention_ms <= now_wall
            if due:
                out.append(key)
        return out

    def expire(self) -> CoordinatorResult:
        """Tombstones for the shard's expired offsets, and for Empty groups left with none
        (Kafka's cleanupGroupMetadata); the response is how many offsets expire."""
        now = self.clock.wall()
        records: list[Event] = []
        undo: list[Callable[[], None]] = []
        expired = 0
        for group_id in list(self.groups.keys() | set(self.store.groups())):
            keys = self.expired(group_id, now)
            records += [(OffsetCommitKey(group_id, t, p), None) for t, p in keys]
            expired += len(keys)
            group = self.groups.get(group_id)
            if (
                group is not None
                and len(keys) == len(self.store.of(group_id))
                and group.validate_delete_group() == _NONE
            ):
                records += self.shard.group_tombstones(group)
                undo.append(group.mark_deleting())  # no member may join while it goes

        def written(error: int) -> None:
            if error != _NONE:
                for revert in undo:
                    revert()
                log.error(
                    "partition %d: expiring offsets failed (error %d): retried at the next check",
                    self.shard.partition,
                    error,
                )

        result = CoordinatorResult(expired)
        if records:
            result.add(records, written)
        return result


def _commit_key(group_id: str, topic: Any, partition: int) -> OffsetCommitKey:
    """A key not in _commit_keys yet: made, and kept there."""
    if _commit_key_count[0] >= _MAX_COMMIT_KEYS:
        _commit_keys.clear()
        _commit_key_count[0] = 0
    key = _new(OffsetCommitKey, (group_id, topic, partition))
    _commit_keys.setdefault(group_id, {}).setdefault(topic, {})[partition] = key
    _commit_key_count[0] += 1
    return key


def _commit_time(value: OffsetCommitValue) -> int:
    return value.commit_timestamp
