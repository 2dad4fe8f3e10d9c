"""Topic catalog (placeholder until the data plane lands): names, partition counts, ids."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable

from kio.schema.errors import ErrorCode

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass
class TopicInfo:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    internal: bool = False
    error: ErrorCode = ErrorCode.none


class Topics:
    def __init__(self, offsets_partitions: int) -> None:
        self.topics: dict[str, TopicInfo] = {
            OFFSETS_TOPIC: TopicInfo(OFFSETS_TOPIC, offsets_partitions, internal=True)
        }

    def describe(self, names: list[str] | None, *, auto_create: bool) -> Iterable[tuple[str, TopicInfo | None]]:
        if names is None:
            return list(self.topics.items())
        return [(n, self.topics.get(n)) for n in names]
