"""Per-partition log settings (names follow Kafka's topic configs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 100 * 1024 * 1024  # segment.bytes (offsets.topic.segment.bytes: 100 MiB)
    segment_ms: int | None = 7 * DAY_MS  # segment.ms: roll even a small segment so retention can act
    index_interval_bytes: int = 4096  # index.interval.bytes: sparse index density
    fsync: Literal["always", "interval", "never"] = "always"
    fsync_interval_ms: int = 1000
    cleanup_policy: Literal["delete", "compact"] = "delete"
    retention_ms: int | None = 7 * DAY_MS  # None: keep forever
    retention_bytes: int | None = None
    delete_retention_ms: int = DAY_MS  # how long compaction keeps tombstones
    min_cleanable_dirty_ratio: float = 0.5
    maintenance_interval_ms: int | None = 30_000  # background retention/compaction; None = off
    # log.flush.offset.checkpoint.interval.ms: how often the recovery point advances; None = off
    checkpoint_interval_ms: int | None = 60_000

    def __post_init__(self) -> None:
        if self.fsync not in ("always", "interval", "never"):
            raise ValueError(f"fsync must be always|interval|never, not {self.fsync!r}")
        if self.cleanup_policy not in ("delete", "compact"):
            raise ValueError(f"cleanup_policy must be delete|compact, not {self.cleanup_policy!r}")
        if self.segment_bytes < 128:
            raise ValueError("segment_bytes is too small")


OFFSETS_TOPIC_CONFIG = LogConfig(cleanup_policy="compact", retention_ms=None, segment_ms=None)
