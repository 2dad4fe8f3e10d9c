"""Wiring: which components make up the server and in which order they start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .broker.topics import Topics
from .cluster import Cluster

if TYPE_CHECKING:
    from .server import Server


async def build_components(server: Server) -> list[Any]:
    """Create, load and register every component; returned in start order (closed in reverse)."""
    server.topics = Topics(server.config.offsets_partitions)
    cluster = Cluster(server)
    cluster.register()
    return [server.topics, cluster]
