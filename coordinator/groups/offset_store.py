"""Committed offsets by group id: the part of Kafka's OffsetMetadataManager that holds them.

Kept apart from the groups themselves (an offset outlives a group's members, and every
group type commits into the same store). Changed by replay only.
"""

from __future__ import annotations

from collections.abc import Iterator

from .records import OffsetCommitValue

TopicPartition = tuple[str, int]
_EMPTY: dict[TopicPartition, OffsetCommitValue] = {}  # (never mutated)


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        # Transactional commits not yet decided: producer id -> {(group, topic, partition): value}
        # (Kafka's pendingTransactionalOffsetCommits). Its marker applies or drops them.
        self.pending: dict[int, dict[tuple[str, str, int], OffsetCommitValue]] = {}

    def put_pending(
        self, producer_id: int, group_id: str, topic: str, partition: int, value: OffsetCommitValue
    ) -> None:
        self.pending.setdefault(producer_id, {})[(group_id, topic, partition)] = value

    def complete(self, producer_id: int, commit: bool) -> None:
        offsets = self.pending.pop(producer_id, None)
        if commit and offsets:
            for (group_id, topic, partition), value in offsets.items():
                self.put(group_id, topic, partition, value)

    def unstable(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with a transactional commit pending (KIP-447)."""
        return {(t, p) for offsets in self.pending.values() for (g, t, p) in offsets if g == group_id}

    def of(self, group_id: str) -> dict[TopicPartition, OffsetCommitValue]:
        """The group's offsets (read-only: replay is the only writer)."""
        return self._by_group.get(group_id, _EMPTY)

    def of_writable(self, group_id: str) -> dict[TopicPartition, OffsetCommitValue]:
        """The group's offsets, to put a write's commits into (replay only); made if none."""
        offsets = self._by_group.get(group_id)
        if offsets is None:
            offsets = self._by_group[group_id] = {}
        return offsets

    def put(self, group_id: str, topic: str, partition: int, value: OffsetCommitValue) -> None:
        offsets = self._by_group.get(group_id)
        if offsets is None:
            offsets = self._by_group[group_id] = {}
        offsets[(topic, partition)] = value

    def remove(self, group_id: str, topic: str, partition: int) -> None:
        offsets = self._by_group.get(group_id)
        if offsets is not None:
            offsets.pop((topic, partition), None)
            if not offsets:
                del self._by_group[group_id]

    def remove_group(self, group_id: str) -> None:
        self._by_group.pop(group_id, None)
        for offsets in self.pending.values():
            for key in [k for k in offsets if k[0] == group_id]:
                del offsets[key]

    def groups(self) -> Iterator[str]:
        return iter(list(self._by_group))

    def count(self) -> int:
        return sum(len(o) for o in self._by_group.values())

    def snapshot(self) -> dict[str, dict[TopicPartition, OffsetCommitValue]]:
        """A copy (tests compare a live store with one rebuilt by replay)."""
        return {g: dict(o) for g, o in self._by_group.items()}
