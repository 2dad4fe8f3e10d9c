"""The composition root: which parts make up the server, built and wired in one place,
in start order.

Each part gets what it needs, no part imports the server or is given it: the server hands
this module its configuration, its API registry, its listeners, and the two calls that close
and open a broker's listeners, and gets the parts back.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Awaitable, Callable

from .apis import Registry, RequestContext, coordinates_every_group
from .broker.admin import TopicAdmin
from .broker.config_apis import ConfigApis
from .broker.configs import BrokerConfigs, live_broker_configs, static_broker_configs
from .broker.data import DataPlane
from .broker.log_dirs import LogDirApis
from .broker.partition_admin import PartitionAdminApis
from .broker.partition_states import PartitionStates
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
from .share.state_log import TOPIC as SHARE_STATE_TOPIC, ShareCoordinator, open_log as open_share_state_log
from .listeners import Listener
from .log.config import OFFSETS_TOPIC_CONFIG, LogConfig
from .log.offsets import OffsetsLog
from .security.acl_gate import AclGate
from .security.acls import AclStore, Authorizer
from .topology import ClusterControl, Topology
from .transactions.coordinator import TOPIC as TRANSACTION_TOPIC, TransactionCoordinator


@dataclass
class Parts:
    topics: Topics
    groups: CoordinatorRuntime
    offsets_log: OffsetsLog
    topology: Topology
    control: ClusterControl  # stop / start brokers, move leaders and coordinators
    components: list[Any] = field(default_factory=list)  # started in this order, closed in reverse
    request_quota: RequestQuota | None = None  # request_percentage, measured by the request channel
    connection_quota: ConnectionRateQuota | None = None  # connection_creation_rate, checked on accept
    features: Features | None = None  # the finalized feature levels (ApiVersions, UpdateFeatures)
    shares: SharePartitionManager | None = None  # share-partitions (the metrics read their lag)
    acl_gate: AclGate | None = None  # with --authorizer: where each request's ACLs are checked


async def build_components(
    c: Config,
    registry: Registry,
    listeners: list[Listener],
    acls: AclStore | None = None,
    *,
    close_broker: Callable[[int], None],
    open_broker: Callable[[int], Awaitable[None]],
) -> Parts:
    """Create, load and register every part. Each part is built once what it needs is: it gets
    its collaborators in its constructor, never later (tests/test_layout.py checks this)."""
    broker_configs = BrokerConfigs(
        c.data_dir,
        c.node_id,
        static_broker_configs(c),
        c.kafka_version,
        live_broker_configs(c, listeners),
        node_ids=range(c.node_id, c.node_id + c.brokers),
        listeners=[functools.partial(apply_max_connections, c)],
    )
    apply_max_connections(c, broker_configs)
    backoff = broker_configs.value("log.cleaner.backoff.ms")  # (a dynamic value saved earlier wins)
    internal = dataclasses.replace(
        OFFSETS_TOPIC_CONFIG, fsync=c.fsync, fsync_interval_ms=c.fsync_interval_ms, cleaner_backoff_ms=backoff
    )
    # The internal topics' logs first: the topics hold them (and the group, transaction and
    # share coordinators write them).
    offsets_log = await OffsetsLog.open(c.data_dir, c.offsets_partitions, internal)
    txn_log = await OffsetsLog.open(c.data_dir, c.transaction_partitions, internal, topic=TRANSACTION_TOPIC)
    share_log = await open_share_state_log(c.data_dir, c.share_partitions, c.fsync, c.fsync_interval_ms)
    topics = Topics.load(
        c.data_dir,
        LogConfig(
            fsync=c.fsync,
            fsync_interval_ms=c.fsync_interval_ms,
            maintenance_interval_ms=c.log_retention_check_interval_ms,
            cleaner_backoff_ms=backoff,
        ),
        [(TRANSACTION_TOPIC, txn_log.logs, 2), (SHARE_STATE_TOPIC, share_log.logs, 3)],
        auto_create=c.auto_create_topics,
        default_partitions=c.num_partitions,
        offsets_logs=offsets_log.logs,
        broker_configs=broker_configs,
        brokers=c.brokers,
    )
    topology = Topology(listeners, topics, offsets_log.partitions, txn_log.logs, c.data_dir)
    # the GROUP config resource
    group_configs = GroupConfigs(c.data_dir, group_config_bounds(c), c.kafka_version, broker_configs)
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
    request_quota = RequestQuota(quotas, *window)
    producer_ids = ProducerIds(c.data_dir)

    def coordinates(ctx: RequestContext, partition: int) -> int:
        return topology.coordinator_error(ctx.connection.listener.node_id, partition)

    def txn_owner(ctx: RequestContext, txn_id: str) -> int:
        return topology.txn_coordinator_error(ctx.connection.listener.node_id, txn_id)

    def txn_leader_epoch(partition: int) -> int:
        return topology.state(TRANSACTION_TOPIC, partition).epoch

    def leads(ctx: RequestContext, topic: str, partition: int) -> int:
        return topology.leader_error(ctx.connection.listener.node_id, topic, partition)

    owner = coordinates_every_group if topology.single else coordinates
    features = Features(c.data_dir, c.node_id, c.kafka_version, listeners=[registry.answers.clear])
    # The transaction coordinator, the data plane and the group coordinator's APIs need one
    # another only through the partitions' producer state, built first: the coordinator writes
    # its markers there (and into the group runtime's shards), the other two ask the
    # coordinator (TransactionChecks) about transactional batches and offset commits.
    states = PartitionStates(topics)
    transactions = TransactionCoordinator(
        txn_log,
        topics,
        states,
        runtime,
        producer_ids,
        leader_error=leads,
        max_timeout_ms=c.transaction_max_timeout_ms,
        abort_check_interval_ms=c.transaction_abort_check_interval_ms,
        id_expiration_ms=c.transactional_id_expiration_ms,
        remove_expired_interval_ms=c.transaction_remove_expired_interval_ms,
        # (with several brokers: the topology's coordinator of each id, its partition's leader epoch)
        owner=None if topology.single else txn_owner,
        leader_epoch=(lambda partition: 0) if topology.single else txn_leader_epoch,
        transaction_version=lambda: features.level("transaction.version"),
    )
    data_plane = DataPlane(
        topics,
        states,
        producer_ids,
        c.node_id,
        c.max_incremental_fetch_session_cache_slots,
        transactions=transactions,
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
    # (every store is read by now: a bad one is the one line said before anything is loaded)
    runtime.load(offsets_log.latest_records(), offsets_log.offline)
    runtime.start_offset_expiry(c.offsets_retention_check_interval_ms)
    GroupApis(runtime, owner, transactions).register(registry)

    def share_state_topic() -> None:  # (created at its first use, as Kafka's share coordinator does)
        topics.create_internal(SHARE_STATE_TOPIC)

    ShareGroupApis(runtime, owner, subscribed=share_state_topic).register(registry)
    StreamsGroupApis(runtime, owner).register(registry)
    transactions.register(registry)
    transactions.load()
    transactions.start()
    share_state = ShareCoordinator(share_log, c.share_snapshot_update_records, first_write=share_state_topic)
    share_state.load()
    shares = SharePartitionManager(
        topics,
        data_plane,
        runtime,
        share_state,
        runtime.share_config,
        c.node_id,
        share_version=lambda: features.level("share.version"),
    )
    shares.register(registry)
    ShareOffsetsApis(shares).register(registry)
    control = ClusterControl(topology, runtime, close_broker, open_broker, transactions, shares)
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
        acl_gate=None
        if acls is None
        else AclGate(Authorizer(acls, super_users(c), c.allow_everyone_if_no_acl_found), topics),
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
        c.share_coordinator_cold_partition_snapshot_interval_ms,
    )


def apply_max_connections(config: Config, broker: BrokerConfigs) -> None:
    """max.connections, a dynamic broker config: the server reads it from its config at each accept."""
    config.max_connections = broker.value("max.connections")


def super_users(c: Config) -> set[str]:
    """super.users: principals separated by semicolons."""
    return {p.strip() for p in c.super_users.split(";") if p.strip()}
