"""Committed offsets of groups: OffsetCommit, OffsetFetch, OffsetDelete and retention.

Offsets belong to their group (as in Kafka's GroupMetadata). A commit validates,
appends OffsetCommit records durably, and only then applies them through
GroupCoordinator.apply — the same path the startup replay takes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Container

from kio.schema.errors import ErrorCode as E

from protocol.offset_commit import PartitionCommit

from .coordinator import UNKNOWN_MEMBER_ID, GroupCoordinator
from .group import ClassicGroup
from .records import Event, GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from .state import GroupState as S
from .subscription import subscribed_topics

_new = tuple.__new__

log = logging.getLogger(__name__)

NO_OFFSET = -1
_NONE, _METADATA_TOO_LARGE, _UNKNOWN_PARTITION = E.none, E.offset_metadata_too_large, E.unknown_topic_or_partition


class Offsets:
    def __init__(self, groups: GroupCoordinator, metadata_max_bytes: int = 4096, retention_ms: int = 7 * 86_400_000,
                 existing_partitions: Container[tuple[str, int]] | None = None) -> None:
        self.groups = groups
        self.metadata_max_bytes = metadata_max_bytes
        self.retention_ms = retention_ms
        self.existing_partitions = existing_partitions  # (topic, partition) pairs; None: all exist

    # OffsetCommit ---------------------------------------------------------------------

    def _validate(self, group: ClassicGroup | None, generation: int, member_id: str,
                  instance_id: str | None) -> int:
        """Kafka's validateOffsetCommit: members commit in their generation; others only to Empty groups."""
        if group is None:
            return E.none if generation < 0 else E.illegal_generation
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error, member = group.check_member(instance_id, member_id, generation)
            if member is None:
                return error
            if group.is_(S.COMPLETING_REBALANCE):
                return E.rebalance_in_progress
            member.deadline = self.groups.clock.now() + member.session_timeout_ms  # a commit is a heartbeat
            return E.none
        if not group.is_(S.EMPTY):
            return E.unknown_member_id  # a non-empty group takes commits only from its members
        return E.none

    async def commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                     partitions: list[PartitionCommit], expire_timestamp: int = -1) -> list[int]:
        """One error per requested partition, in request order."""
        later: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        errors = self.commit_nowait(group_id, generation, member_id, instance_id, partitions, later.set_result,
                                    expire_timestamp)
        return errors if errors is not None else await later

    def commit_nowait(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                      partitions: list[PartitionCommit], on_done: Callable[[list[int]], None],
                      expire_timestamp: int = -1) -> list[int] | None:
        """Like commit(), without a coroutine (this runs for every commit of every consumer):
        the errors at once if nothing is to be written, else None, and on_done(errors) is
        called once the records are durable and applied.

        Kafka's order: partitions of topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION
        first (the broker's check); the group's error, if any, goes to the others; then
        each offset's metadata size is checked."""
        existing = self.existing_partitions
        unknown: list[bool] | None = None  # per partition, whether it does not exist (None: all do)
        if existing is not None:
            for p in partitions:  # (no list built when all exist: the usual case)
                if (p[0], p[1]) not in existing:
                    unknown = [(q[0], q[1]) not in existing for q in partitions]
                    if False not in unknown:
                        return [_UNKNOWN_PARTITION] * len(partitions)  # nothing reaches the coordinator
                    break
        group = self.groups.groups.get(group_id)
        error = self._validate(group, generation, member_id, instance_id) if group_id else E.invalid_group_id
        if error != E.none:
            if unknown is None:
                return [error] * len(partitions)
            return [_UNKNOWN_PARTITION if u else error for u in unknown]
        now = self.groups.clock.wall()
        errors: list[int] = []
        events: list[Event] = []
        max_bytes = self.metadata_max_bytes
        for i, (topic, partition, offset, leader_epoch, metadata) in enumerate(partitions):
            metadata = metadata or ""
            if unknown is not None and unknown[i]:
                errors.append(_UNKNOWN_PARTITION)
            elif len(metadata) * 4 > max_bytes and len(metadata.encode()) > max_bytes:  # UTF-8: <= 4 B/char
                errors.append(_METADATA_TOO_LARGE)
            else:
                errors.append(_NONE)
                # (named tuples built as tuples of their class: their __new__ is a Python call)
                events.append((_new(OffsetCommitKey, (group_id, topic, partition)), _new(OffsetCommitValue, (
                    offset, metadata, now, leader_epoch, expire_timestamp))))
        if not events:
            return errors
        if group is None:
            self.groups.get_or_create(group_id)  # standalone commits create an Empty group, like Kafka

        def durable(error: BaseException | None, _first: int | None) -> None:
            if error is not None:
                log.error("group %s: committing offsets failed: %r", group_id, error)
                on_done([E.unknown_server_error if err == _NONE else err for err in errors])
                return
            apply = self.groups.apply
            for event in events:
                apply(event)
            on_done(errors)

        self.groups.append_events(group_id, events, durable)
        return None

    # OffsetFetch ----------------------------------------------------------------------

    def fetch(self, group_id: str, wanted: list[tuple[str, list[int]]] | None
              ) -> tuple[int, list[tuple[str, list[tuple[int, OffsetCommitValue | None]]]]]:
        """(group error, [(topic, [(partition, offset or None)])]); wanted=None means all."""
        if not group_id:
            return E.invalid_group_id, []
        group = self.groups.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(S.DEAD) else {}
        if wanted is None:
            by_topic: dict[str, list[tuple[int, OffsetCommitValue | None]]] = {}
            for (topic, partition), value in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append((partition, value))
            return E.none, list(by_topic.items())
        return E.none, [(topic, [(p, offsets.get((topic, p))) for p in parts]) for topic, parts in wanted]

    # OffsetDelete ---------------------------------------------------------------------

    async def delete(self, group_id: str, wanted: list[tuple[str, list[int]]]
                     ) -> tuple[int, list[tuple[str, list[tuple[int, int]]]]]:
        if not group_id:
            return E.invalid_group_id, []
        group = self.groups.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found, []
        subscribed: set[str] = set()
        if not group.is_(S.EMPTY):
            if group.protocol_type != "consumer":
                return E.non_empty_group, []
            subscribed = self.subscribed(group) or set()
        results = []
        events: list[Event] = []
        existing = self.existing_partitions
        for topic, parts in wanted:
            row = []
            for p in parts:
                if existing is not None and (topic, p) not in existing:
                    row.append((p, _UNKNOWN_PARTITION))  # (the broker's check, as for commits)
                elif topic in subscribed:
                    row.append((p, E.group_subscribed_to_topic))
                else:
                    row.append((p, E.none))
                    if (topic, p) in group.offsets:
                        events.append((OffsetCommitKey(group_id, topic, p), None))
            results.append((topic, row))
        if events:
            try:
                await self.groups.write(group_id, events)
            except Exception as e:
                log.error("group %s: deleting offsets failed: %r", group_id, e)
                return E.unknown_server_error, []
            for event in events:
                self.groups.apply(event)
        return E.none, results

    @staticmethod
    def subscribed(group: ClassicGroup) -> set[str] | None:
        """Topics the group's members subscribe to (consumer protocol); None if unknown."""
        if group.protocol_type != "consumer" or not group.members:
            return None
        topics: set[str] = set()
        for member in group.members.values():
            if not member.protocols:
                continue
            topics |= subscribed_topics(member.protocols[0][1])
        return topics

    # retention (KIP-211) --------------------------------------------------------------

    def expired(self, group: ClassicGroup, now_wall: int) -> list[tuple[str, int]]:
        """Offsets due to expire: all of an Empty group's once it has been Empty for the
        retention time; in a live consumer group only those of unsubscribed topics."""
        if group.is_(S.EMPTY):
            base_for = lambda value: max(group.state_timestamp, value.commit_timestamp)  # noqa: E731
            candidates = group.offsets.items()
        else:
            subscribed = self.subscribed(group)
            if subscribed is None or not group.is_(S.STABLE):
                return []
            base_for = lambda value: value.commit_timestamp  # noqa: E731
            candidates = [(k, v) for k, v in group.offsets.items() if k[0] not in subscribed]
        out = []
        for key, value in candidates:
            if value.expire_timestamp >= 0:
                due = value.expire_timestamp <= now_wall
            else:
                due = base_for(value) + self.retention_ms <= now_wall
            if due:
                out.append(key)
        return out

    async def expire(self) -> int:
        """Write tombstones for expired offsets; Empty groups left with nothing become Dead."""
        now = self.groups.clock.wall()
        removed = 0
        for group in list(self.groups.groups.values()):
            keys = self.expired(group, now)
            events: list[Event] = [(OffsetCommitKey(group.group_id, t, p), None) for t, p in keys]
            if group.is_(S.EMPTY) and len(keys) == len(group.offsets) and not group.pending_members:
                events.append((GroupMetadataKey(group.group_id), None))
            if not events:
                continue
            try:
                await self.groups.write(group.group_id, events)
            except Exception as e:
                log.error("group %s: expiring offsets failed: %r", group.group_id, e)
                continue
            for event in events:
                self.groups.apply(event)
            removed += len(keys)
            log.info("group %s: expired %d offsets", group.group_id, len(keys))
        return removed
