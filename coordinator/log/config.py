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
    # cleanup.policy: "delete", "compact", both ("compact,delete": compaction, then retention
    # removes old segments too) or "" (neither)
    cleanup_policy: str = "delete"
    retention_ms: int | None = 7 * DAY_MS  # None: keep forever
    retention_bytes: int | None = None
    delete_retention_ms: int = DAY_MS  # how long compaction keeps tombstones
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0  # a record stays uncompacted at least this long
    max_compaction_lag_ms: int | None = None  # ... and at most this long (None: no limit)
    # log.retention.check.interval.ms: how often retention runs; None = no background
    # maintenance at all (neither retention nor cleaning)
    maintenance_interval_ms: int | None = 30_000
    cleaner_backoff_ms: int = 15_000  # log.cleaner.backoff.ms: how often compaction looks again
    # log.flush.offset.checkpoint.interval.ms: how often the recovery point advances; None = off
    checkpoint_interval_ms: int | None = 60_000

    def __post_init__(self) -> None:
        if self.fsync not in ("always", "interval", "never"):
            raise ValueError(f"fsync must be always|interval|never, not {self.fsync!r}")
        if not set(self.cleanup_policy.split(",")) <= {"delete", "compact", ""}:
            raise ValueError(f"cleanup_policy must be delete, compact or both, not {self.cleanup_policy!r}")
        if self.segment_bytes < 14:  # Kafka's floor (one legacy record's overhead)
            raise ValueError("segment_bytes is too small")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")


OFFSETS_TOPIC_CONFIG = LogConfig(cleanup_policy="compact", retention_ms=None, segment_ms=None)
