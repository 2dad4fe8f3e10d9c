"""What consumer groups see of the broker's topics: names, ids and partition counts.

Read live at every heartbeat (not cached), so a topic created after a member subscribed
to it, or a partition count that grows, changes the group's subscription metadata and
with it the group epoch: members get the new partitions without rejoining.
"""

from __future__ import annotations

import uuid
from typing import Any


class TopicImage:
    def __init__(self, topics: Any = None) -> None:
        self.topics = topics  # coordinator.broker.topics.Topics, or None (no topics: tests)

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        if self.topics is None:
            return None
        info = self.topics.get(name)
        if info is None or info.error:  # (an internal topic too, as Kafka's image has it)
            return None
        return info.topic_id, info.partitions

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        if self.topics is None:
            return None
        info = self.topics.by_id.get(topic_id)
        return info.name if info is not None else None

    def version(self) -> int | None:
        """Changes with every topic created, deleted or grown (None: not known)."""
        return getattr(self.topics, "changes", None)

    def names(self) -> list[str]:
        """Every topic a regex subscription may match: internal ones too, as Kafka 4.4's
        TopicRegexResolver matches every name of its metadata image (then keeps those the
        member may describe)."""
        if self.topics is None:
            return []
        return list(self.topics.topics)
