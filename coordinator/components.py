"""Wiring: which components make up the server and in which order they start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .broker.topics import Topics
from .cluster import Cluster
from .groups.api import GroupApis
from .groups.clock import LoopClock
from .groups.coordinator import GroupConfig, GroupCoordinator
from .groups.offsets import Offsets

if TYPE_CHECKING:
    from .server import Server


async def build_components(server: Server) -> list[Any]:
    """Create, load and register every component; returned in start order (closed in reverse)."""
    server.topics = Topics(server.config.offsets_partitions)
    cluster = Cluster(server)
    cluster.register()
    c = server.config
    groups = GroupCoordinator(LoopClock(), GroupConfig(
        min_session_timeout_ms=c.group_min_session_timeout_ms,
        max_session_timeout_ms=c.group_max_session_timeout_ms,
        initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
        max_size=c.group_max_size,
    ))
    offsets = Offsets(groups, c.offset_metadata_max_bytes, c.offsets_retention_minutes * 60_000)
    GroupApis(groups, offsets).register(server.registry)
    server.groups = groups
    return [server.topics, cluster, groups]
