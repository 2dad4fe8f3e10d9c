"""A GroupShard's topic catalog for driving KIP-848 consumer groups in process, and their owned partitions."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from coordinator.groups.modern.modern_manager import HeartbeatResult


@dataclass
class Info:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    internal: bool = False
    error: int = 0


class Catalog:
    """The slice of the broker's topic catalog a TopicImage reads."""

    def __init__(self) -> None:
        self.topics: dict[str, Info] = {}
        self.by_id: dict[uuid.UUID, Info] = {}
        self.changes = 0  # (the broker's catalog's version: TopicImage.version)

    def add(self, name: str, partitions: int) -> Info:
        self.changes += 1
        info = self.topics[name] = Info(name, partitions)
        self.by_id[info.topic_id] = info
        return info

    def get(self, name: str) -> Info | None:
        return self.topics.get(name)


def owned(result_or_assignment) -> list[tuple[uuid.UUID, list[int]]]:
    a = result_or_assignment.assignment if isinstance(result_or_assignment, HeartbeatResult) else result_or_assignment
    return [(t, sorted(ps)) for t, ps in (a or {}).items()]
