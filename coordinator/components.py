"""Wiring: which components make up the server and in which order they start."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .broker.admin import TopicAdmin
from .broker.config_apis import ConfigApis
from .broker.configs import BrokerConfigs, static_broker_configs
from .broker.data import DataPlane
from .broker.producers import ProducerIds
from .broker.topics import Topics
from .cluster import Cluster
from .groups.api import GroupApis
from .groups.classic_manager import GroupConfig
from .groups.clock import LoopClock
from .groups.consumer_manager import consumer_group_config
from .groups.topic_image import TopicImage
from .groups.runtime import CoordinatorRuntime
from .groups.share_api import ShareGroupApis
from .groups.share_manager import ShareGroupConfig
from .groups.shard import OffsetConfig
from .log.config import OFFSETS_TOPIC_CONFIG, LogConfig
from .log.offsets import OffsetsLog
from .transactions.coordinator import TOPIC as TRANSACTION_TOPIC, TransactionCoordinator

if TYPE_CHECKING:
    from .server import Server


async def build_components(server: Server) -> list[Any]:
    """Create, load and register every component; returned in start order (closed in reverse)."""
    c = server.config
    broker_configs = BrokerConfigs(c.data_dir, c.node_id, static_broker_configs(c))
    backoff = broker_configs.value("log.cleaner.backoff.ms")  # (a dynamic value saved earlier wins)
    offsets_log = await OffsetsLog.open(c.data_dir, c.offsets_partitions, dataclasses.replace(
        OFFSETS_TOPIC_CONFIG, fsync=c.fsync, fsync_interval_ms=c.fsync_interval_ms, cleaner_backoff_ms=backoff))
    server.offsets_log = offsets_log
    server.topics = topics = Topics.load(
        c.data_dir, LogConfig(fsync=c.fsync, fsync_interval_ms=c.fsync_interval_ms,  # type: ignore[arg-type]
                              maintenance_interval_ms=c.log_retention_check_interval_ms, cleaner_backoff_ms=backoff),
        auto_create=c.auto_create_topics, default_partitions=c.num_partitions, offsets_logs=offsets_log.logs,
        broker_configs=broker_configs)
    apply_dynamic_broker_configs(server)
    broker_configs.listeners.append(lambda: apply_dynamic_broker_configs(server))
    cluster = Cluster(server)
    cluster.register()
    TopicAdmin(topics).register(server.registry)
    ConfigApis(topics, cluster).register(server.registry)
    data_plane = DataPlane(topics, ProducerIds(c.data_dir), c.node_id, c.max_incremental_fetch_session_cache_slots,
                           fetch_max_wait_ms=c.fetch_max_wait_ms, fetch_max_bytes=c.fetch_max_bytes)
    data_plane.register(server.registry)
    runtime = CoordinatorRuntime(offsets_log, LoopClock(), GroupConfig(
        min_session_timeout_ms=c.group_min_session_timeout_ms,
        max_session_timeout_ms=c.group_max_session_timeout_ms,
        initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
        max_size=c.group_max_size,
    ), OffsetConfig(c.offset_metadata_max_bytes, c.offsets_retention_minutes * 60_000,
                    topics.partition_keys),  # commits to unknown topics are refused, as Kafka does
        consumer_group_config(c), TopicImage(topics))
    runtime.share_config = ShareGroupConfig(  # type: ignore[attr-defined]
        c.group_share_session_timeout_ms, c.group_share_heartbeat_interval_ms, c.group_share_max_size,
        c.group_share_record_lock_duration_ms, c.group_share_delivery_attempt_limit,
        c.group_share_partition_max_record_locks, c.share_snapshot_update_records)
    runtime.load(offsets_log.latest_records(), offsets_log.offline)
    runtime.start_offset_expiry(c.offsets_retention_check_interval_ms)
    GroupApis(runtime).register(server.registry)
    ShareGroupApis(runtime).register(server.registry)
    server.groups = runtime
    txn_log = await OffsetsLog.open(c.data_dir, c.transaction_partitions, dataclasses.replace(
        OFFSETS_TOPIC_CONFIG, fsync=c.fsync, fsync_interval_ms=c.fsync_interval_ms, cleaner_backoff_ms=backoff),
        topic=TRANSACTION_TOPIC)
    transactions = TransactionCoordinator(txn_log, data_plane, runtime, data_plane.producer_ids,
                                          max_timeout_ms=c.transaction_max_timeout_ms,
                                          abort_check_interval_ms=c.transaction_abort_check_interval_ms,
                                          id_expiration_ms=c.transactional_id_expiration_ms)
    transactions.register(server.registry)
    data_plane.transactions = transactions
    runtime.transactions = transactions
    transactions.load()
    transactions.start()
    return [offsets_log, txn_log, topics, cluster, data_plane, runtime, transactions]


def apply_dynamic_broker_configs(server: Server) -> None:
    """The dynamic broker configs this server implements beyond the log defaults (Kafka's
    reconfigurables): max.connections, and log.cleaner.backoff.ms for every log, the
    internal ones too (Kafka's one LogCleaner cleans them all)."""
    broker, topics = server.topics.broker_configs, server.topics
    server.config.max_connections = broker.value("max.connections")
    backoff = broker.value("log.cleaner.backoff.ms")
    if topics.base_config.cleaner_backoff_ms != backoff:
        topics.base_config = dataclasses.replace(topics.base_config, cleaner_backoff_ms=backoff)
        for plog in server.offsets_log.logs:
            plog.config = dataclasses.replace(plog.config, cleaner_backoff_ms=backoff)
