"""The composition root: which parts make up the server, built and wired in one place,
in start order.

Each part gets what it needs, no part imports the server: the server hands this module its
configuration, its API registry, its listeners and the switch that opens and closes a
broker's listeners, and gets the parts back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .apis import Registry, RequestContext
from .broker.admin import TopicAdmin
from .broker.config_apis import ConfigApis
from .broker.configs import BrokerConfigs, live_broker_configs, static_broker_configs
from .broker.data import DataPlane
from .broker.log_dirs import LogDirApis
from .broker.partition_admin import PartitionAdminApis
from .broker.producers import ProducerIds
from .broker.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    ByteRateQuota,
    ClientQuotaApis,
    ConnectionRateQuota,
    ControllerMutationQuota,
    QuotaStore,
    RequestQuota,
)
from .broker.topics import Topics
from .cluster import Cluster
from .config import Config
from .errors import E
from .features import FeatureApis, Features, gate_apis
from .groups.api import GroupApis
from .groups.classic.classic_manager import GroupConfig
from .groups.clock import LoopClock
from .groups.modern.consumer.consumer_manager import consumer_group_config
from .groups.topic_image import TopicImage
from .groups.runtime import CoordinatorRuntime
from .groups.group_configs import GroupConfigs, group_config_bounds
from .groups.modern.share.share_api import ShareGroupApis
from .groups.streams.streams_api import StreamsGroupApis
from .groups.settings import ShareGroupConfig, StreamsGroupConfig
from .groups.shard import OffsetConfig
from .share.manager import SharePartitionManager
from .share.offsets_api import ShareOffsetsApis
from .share.state_log import TOPIC as SHARE_STATE_TOPIC, ShareStateLog
from .listeners import Listener
from .log.config import OFFSETS_TOPIC_CONFIG, LogConfig
from .log.offsets import OffsetsLog
from .topology import BrokerSwitch, ClusterControl, Topology
from .transactions.coordinator import TOPIC as TRANSACTION_TOPIC, TransactionCoordinator


@dataclass
class Parts:
    topics: Topics
    groups: CoordinatorRuntime
    offsets_log: OffsetsLog
    topology: Topology
    control: ClusterControl  # stop / start brokers, move leaders and coordinators
    components: list[Any] = field(default_factory=list)  # started in this order, closed in reverse
    request_quota: RequestQuota | None = None  # request_percentage, measured by the server's dispatch
    connection_quota: ConnectionRateQuota | None = None  # connection_creation_rate, checked on accept
    features: Features | None = None  # the finalized feature levels (ApiVersions, UpdateFeatures)
    shares: SharePartitionManager | None = None  # share-partitions (the metrics read their lag)


async def build_components(c: Config, registry: Registry, listeners: list[Listener], switch: BrokerSwitch) -> Parts:
    """Create, load and register every part."""
    broker_configs = BrokerConfigs(
        c.data_dir, c.node_id, static_broker_configs(c), c.kafka_version, live_broker_configs(c, listeners)
    )
    broker_configs.node_ids = {str(c.node_id + i) for i in range(c.brokers)}
    backoff = broker_configs.value("log.cleaner.backoff.ms")  # (a dynamic value saved earlier wins)
    internal = dataclasses.replace(
        OFFSETS_TOPIC_CONFIG, fsync=c.fsync, fsync_interval_ms=c.fsync_interval_ms, cleaner_backoff_ms=backoff
    )
    offsets_log = await OffsetsLog.open(c.data_dir, c.offsets_partitions, internal)
    txn_log = await OffsetsLog.open(c.data_dir, c.transaction_partitions, internal, topic=TRANSACTION_TOPIC)
    topics = Topics.load(
        c.data_dir,
        LogConfig(
            fsync=c.fsync,
            fsync_interval_ms=c.fsync_interval_ms,
            maintenance_interval_ms=c.log_retention_check_interval_ms,
            cleaner_backoff_ms=backoff,
        ),
        auto_create=c.auto_create_topics,
        default_partitions=c.num_partitions,
        offsets_logs=offsets_log.logs,
        broker_configs=broker_configs,
        brokers=c.brokers,
    )
    topics.add_internal(TRANSACTION_TOPIC, txn_log.logs, 2)
    apply_dynamic_broker_configs(c, topics, offsets_log)
    broker_configs.listeners.append(lambda: apply_dynamic_broker_configs(c, topics, offsets_log))
    topology = Topology(listeners, topics, offsets_log.partitions, txn_log.logs, c.data_dir)
    group_configs = GroupConfigs(c.data_dir, group_config_bounds(c), c.kafka_version)  # the GROUP config resource
    apply_assignment_intervals(broker_configs, group_configs)
    broker_configs.listeners.append(lambda: apply_assignment_intervals(broker_configs, group_configs))
    runtime = CoordinatorRuntime(
        offsets_log,
        LoopClock(),
        GroupConfig(
            min_session_timeout_ms=c.group_min_session_timeout_ms,
            max_session_timeout_ms=c.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
            max_size=c.group_max_size,
        ),
        OffsetConfig(
            c.offset_metadata_max_bytes, c.offsets_retention_minutes * 60_000, topics.partition_keys
        ),  # commits to unknown topics are refused, as Kafka does
        consumer_group_config(c),
        TopicImage(topics),
        share_group_config(c),
        streams_group_config(c),
        group_configs,
    )
    cluster = Cluster(c, topics, runtime, topology)
    cluster.register(registry)
    quotas = QuotaStore(c.data_dir)
    window = (c.quota_window_num, c.quota_window_size_seconds)
    data_plane = DataPlane(
        topics,
        ProducerIds(c.data_dir),
        c.node_id,
        c.max_incremental_fetch_session_cache_slots,
        fetch_max_wait_ms=c.fetch_max_wait_ms,
        fetch_max_bytes=c.fetch_max_bytes,
        topology=topology,
        produce_quota=ByteRateQuota(quotas, PRODUCER_BYTE_RATE, *window),
        fetch_quota=ByteRateQuota(quotas, CONSUMER_BYTE_RATE, *window),
    )
    topic_admin = TopicAdmin(topics, data_plane.leader_error, topology, ControllerMutationQuota(quotas, *window))
    topic_admin.register(registry)
    config_apis = ConfigApis(topics, cluster, group_configs)
    config_apis.register(registry)
    data_plane.register(registry)
    ClientQuotaApis(quotas).register(registry)
    request_quota = RequestQuota(quotas, *window)
    runtime.load(offsets_log.latest_records(), offsets_log.offline)
    runtime.start_offset_expiry(c.offsets_retention_check_interval_ms)

    def coordinates(ctx: RequestContext, partition: int) -> int:
        return topology.coordinator_error(ctx.connection.listener.node_id, partition)

    owner = _everything if topology.single else coordinates
    GroupApis(runtime, owner).register(registry)
    share_apis = ShareGroupApis(runtime, owner)
    share_apis.register(registry)
    StreamsGroupApis(runtime, owner).register(registry)

    def txn_owner(ctx: RequestContext, txn_id: str) -> int:
        return topology.txn_coordinator_error(ctx.connection.listener.node_id, txn_id)

    def txn_leader_epoch(partition: int) -> int:
        return topology.state(TRANSACTION_TOPIC, partition).epoch

    features = Features(c.data_dir, c.node_id, c.kafka_version)
    transactions = TransactionCoordinator(
        txn_log,
        data_plane,
        runtime,
        data_plane.producer_ids,
        max_timeout_ms=c.transaction_max_timeout_ms,
        abort_check_interval_ms=c.transaction_abort_check_interval_ms,
        id_expiration_ms=c.transactional_id_expiration_ms,
        remove_expired_interval_ms=c.transaction_remove_expired_interval_ms,
        # (with several brokers: the topology's coordinator of each id, its partition's leader epoch)
        owner=None if topology.single else txn_owner,
        leader_epoch=(lambda partition: 0) if topology.single else txn_leader_epoch,
        transaction_version=lambda: features.level("transaction.version"),
    )
    transactions.register(registry)
    # The one pair that needs each other: the coordinator writes markers through the data plane
    # and the group runtime, which ask it about transactional batches and commits.
    data_plane.transactions = transactions
    runtime.transactions = transactions
    transactions.load()
    transactions.start()
    share_state = await ShareStateLog.open(
        c.data_dir, c.share_partitions, c.fsync, c.fsync_interval_ms, c.share_snapshot_update_records
    )
    share_state.load()
    topics.add_internal(SHARE_STATE_TOPIC, share_state.log.logs, 3)
    share_state.first_write = share_apis.subscribed = lambda: topics.create_internal(SHARE_STATE_TOPIC)
    shares = SharePartitionManager(topics, data_plane, runtime, share_state, runtime.share_config, c.node_id)
    shares.register(registry)
    ShareOffsetsApis(shares).register(registry)
    control = ClusterControl(topology, runtime, switch, transactions, shares)
    PartitionAdminApis(topics, topology, control).register(registry)
    LogDirApis(topics, topology, c.data_dir).register(registry)
    FeatureApis(features).register(registry)
    gate_apis(registry, features)
    return Parts(
        topics,
        runtime,
        offsets_log,
        topology,
        control,
        [offsets_log, txn_log, topics, cluster, data_plane, runtime, transactions, shares],
        request_quota=request_quota,
        connection_quota=ConnectionRateQuota(quotas, *window),
        features=features,
        shares=shares,
    )


def streams_group_config(c: Config) -> StreamsGroupConfig:
    """The broker's KIP-1071 streams group settings."""
    return StreamsGroupConfig(
        session_timeout_ms=c.group_streams_session_timeout_ms,
        heartbeat_interval_ms=c.group_streams_heartbeat_interval_ms,
        max_size=c.group_streams_max_size,
        num_standby_replicas=c.group_streams_num_standby_replicas,
        initial_rebalance_delay_ms=c.group_streams_initial_rebalance_delay_ms,
        assignment_interval_ms=c.group_streams_assignment_interval_ms,
        num_warmup_replicas=c.group_streams_num_warmup_replicas,
        acceptable_recovery_lag=c.group_streams_acceptable_recovery_lag,
    )


def share_group_config(c: Config) -> ShareGroupConfig:
    """The broker's KIP-932 share group settings."""
    return ShareGroupConfig(
        c.group_share_session_timeout_ms,
        c.group_share_heartbeat_interval_ms,
        c.group_share_max_size,
        c.group_share_record_lock_duration_ms,
        c.group_share_delivery_count_limit,
        c.group_share_partition_max_record_locks,
        c.share_snapshot_update_records,
        c.group_share_max_share_sessions,
        c.group_share_assignment_interval_ms,
        c.group_share_min_assignment_interval_ms,
        c.group_share_max_assignment_interval_ms,
    )


def _everything(ctx: RequestContext, partition: int) -> int:
    """A single broker coordinates every group."""
    return E.none


def apply_assignment_intervals(broker: BrokerConfigs, group_configs: GroupConfigs) -> None:
    """group.consumer.assignment.interval.ms and group.share.assignment.interval.ms, dynamic
    since Kafka 4.3 (GroupCoordinatorConfig.RECONFIGURABLE_CONFIGS): a value outside the
    static min and max is capped to them, not refused (GroupCoordinatorConfig.clampDynamicConfigs).
    Every group without its own interval uses the new one at its next heartbeat."""
    bounds = group_configs.bounds
    changed = {}
    for kind in ("consumer", "share"):
        least, most = (getattr(bounds, f"{kind}_{b}_assignment_interval_ms") for b in ("min", "max"))
        changed[f"{kind}_assignment_interval_ms"] = min(
            max(broker.value(f"group.{kind}.assignment.interval.ms"), least), most
        )
    group_configs.bounds = dataclasses.replace(bounds, **changed)


def apply_dynamic_broker_configs(config: Config, topics: Topics, offsets_log: OffsetsLog) -> None:
    """The dynamic broker configs this server implements beyond the log defaults (Kafka's
    reconfigurables): max.connections, and log.cleaner.backoff.ms for every log, the
    internal ones too (Kafka's one LogCleaner cleans them all)."""
    broker = topics.broker_configs
    config.max_connections = broker.value("max.connections")
    backoff = broker.value("log.cleaner.backoff.ms")
    if topics.base_config.cleaner_backoff_ms != backoff:
        topics.base_config = dataclasses.replace(topics.base_config, cleaner_backoff_ms=backoff)
        user_logs = [plog for info in topics.topics.values() if not info.internal for plog in info.logs]
        for plog in [*offsets_log.logs, *user_logs]:
            plog.config = dataclasses.replace(plog.config, cleaner_backoff_ms=backoff)
            plog.cleaner_reconfigured()
