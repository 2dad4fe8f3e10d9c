"""Several in-process brokers over the wire: a connection per live broker, topics with a
replication factor (the helpers the cluster tests share)."""

from __future__ import annotations

import datetime

from coordinator.testing import Cluster
from tests.support.wire_client import WireClient, request_class


def nested(api: int, v: int, name: str):
    return request_class(api, v, name)


async def connect(cluster: Cluster) -> dict[int, WireClient]:
    """One connection per live broker, by node id."""
    out = {}
    for b in cluster.brokers():
        if b["alive"]:
            out[b["node_id"]] = await WireClient("cluster-test").connect(b["host"], b["port"])
    return out


async def close(conns: dict[int, WireClient]) -> None:
    for c in conns.values():
        await c.close()


async def create_topic(conn: WireClient, name: str, partitions: int, rf: int) -> int:
    topic = nested(19, 4, "CreatableTopic")
    r = await conn.request(
        19,
        4,
        request_class(19, 4)(
            topics=(topic(name=name, num_partitions=partitions, replication_factor=rf, assignments=(), configs=()),),
            timeout=datetime.timedelta(seconds=5),
            validate_only=False,
        ),
    )
    return r.topics[0].error_code
