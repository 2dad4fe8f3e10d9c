"""Wiring: which components make up the server and in which order they start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .broker.admin import TopicAdmin
from .broker.data import DataPlane
from .broker.producers import ProducerIds
from .broker.topics import Topics
from .log.config import LogConfig
from .cluster import Cluster
from .groups.api import GroupApis
from .groups.clock import LoopClock
from .groups.coordinator import GroupConfig, GroupCoordinator
from .groups.offsets import Offsets
from .groups.storage import OffsetExpiry, load, open_offsets_log

if TYPE_CHECKING:
    from .server import Server


async def build_components(server: Server) -> list[Any]:
    """Create, load and register every component; returned in start order (closed in reverse)."""
    c = server.config
    offsets_log = await open_offsets_log(c.data_dir, c.offsets_partitions, c.fsync, c.fsync_interval_ms)
    server.offsets_log = offsets_log
    server.topics = topics = Topics.load(
        c.data_dir, LogConfig(fsync=c.fsync, fsync_interval_ms=c.fsync_interval_ms),  # type: ignore[arg-type]
        auto_create=c.auto_create_topics, default_partitions=c.num_partitions, offsets_logs=offsets_log.logs)
    cluster = Cluster(server)
    cluster.register()
    TopicAdmin(topics).register(server.registry)
    data_plane = DataPlane(topics, ProducerIds(c.data_dir), c.node_id)
    data_plane.register(server.registry)
    groups = GroupCoordinator(LoopClock(), GroupConfig(
        min_session_timeout_ms=c.group_min_session_timeout_ms,
        max_session_timeout_ms=c.group_max_session_timeout_ms,
        initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
        max_size=c.group_max_size,
    ), offsets_log.append)  # durable appends of a group's events, in the group's partition
    load(groups, offsets_log)
    offsets = Offsets(groups, c.offset_metadata_max_bytes, c.offsets_retention_minutes * 60_000,
                      topics.partition_keys)  # commits to unknown topics are refused, as Kafka does
    GroupApis(groups, offsets).register(server.registry)
    server.groups = groups
    expiry = OffsetExpiry(offsets, c.offsets_retention_check_interval_ms)
    return [offsets_log, topics, cluster, data_plane, groups, expiry]
