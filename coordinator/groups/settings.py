"""The broker's settings of the share and streams group types (Kafka's names and defaults),
apart from their managers so that the runtime and the shard context can name them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShareGroupConfig:
    """The broker's group.share.* settings (Kafka's names and defaults); per-group
    overrides come from GROUP config resources (share.*)."""

    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2_000  # group.share.partition.max.record.locks
    snapshot_update_records: int = 500  # share.coordinator.snapshot.update.records.per.snapshot
    max_share_sessions: int = 2_000  # group.share.max.share.sessions
    assignment_interval_ms: int = 1_000  # group.share.assignment.interval.ms (KIP-1263)
    min_assignment_interval_ms: int = 0  # group.share.min.assignment.interval.ms
    max_assignment_interval_ms: int = 15_000  # group.share.max.assignment.interval.ms
    cold_partition_snapshot_interval_ms: int = 300_000  # share.coordinator.cold.partition.snapshot.interval.ms


@dataclass(frozen=True)
class StreamsGroupConfig:
    """The broker's group.streams.* settings (Kafka 4.4's names and defaults); per-group
    overrides come from GROUP config resources (streams.*)."""

    session_timeout_ms: int = 45_000  # group.streams.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.streams.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.streams.max.size
    num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    initial_rebalance_delay_ms: int = 3_000  # group.streams.initial.rebalance.delay.ms
    assignment_interval_ms: int = 1_000  # group.streams.assignment.interval.ms
    min_assignment_interval_ms: int = 0  # group.streams.min.assignment.interval.ms
    max_assignment_interval_ms: int = 15_000  # group.streams.max.assignment.interval.ms
    task_offset_interval_ms: int = 60_000  # group.streams.task.offset.interval.ms
    num_warmup_replicas: int = 2  # group.streams.num.warmup.replicas
    acceptable_recovery_lag: int = 10_000  # group.streams.acceptable.recovery.lag
