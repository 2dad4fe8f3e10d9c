"""Driving a cluster from outside its process: coordinator.testing's subprocess mode and
`kcoord cluster ...`, both over the HTTP test control; and the faults coordinator.testing
delegates to (coordinator/faults.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from tests.support.wire_client import WireClient, request_class
from coordinator.testing import Cluster, ClusterError

ROOT = Path(__file__).resolve().parent.parent
OFFSET_FETCH = 9


async def offset_fetch_errors(host: str, port: int, group: str, n: int) -> list[int]:
    conn = await WireClient("control-test").connect(host, port)
    try:
        out = []
        for _ in range(n):
            r = await conn.request(OFFSET_FETCH, 7, request_class(OFFSET_FETCH, 7)(
                group_id=group, topics=None, require_stable=False))
            out.append(r.error_code)
        return out
    finally:
        await conn.close()


def kcoord(control: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coordinator.admin", "cluster", *args, "--control", control],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_subprocess_cluster_is_driven_over_http_and_by_kcoord(tmp_path):
    with Cluster(brokers=3, subprocess=True, data_dir=tmp_path / "data") as cluster:
        assert len(cluster.bootstrap.split(",")) == 3 and cluster.node_ids == [1, 2, 3]
        old = cluster.coordinator_of("g")
        new = cluster.move_coordinator("g")
        assert new != old and cluster.coordinator_of("g") == new
        cluster.stop_broker(new)
        assert [b["alive"] for b in cluster.brokers()].count(False) == 1
        assert cluster.coordinator_of("g") != new
        with pytest.raises(ClusterError, match="no broker 9"):
            cluster.stop_broker(9)
        cluster.start_broker(new)
        assert all(b["alive"] for b in cluster.brokers())
        tx = cluster.move_transaction_coordinator("tx")
        assert cluster.transaction_coordinator_of("tx") == tx
        # kcoord cluster, on the same control port
        control = cluster._control_url.removeprefix("http://")
        shown = kcoord(control, "show")
        assert shown.returncode == 0 and '"node_id": 3' in shown.stdout
        moved = kcoord(control, "move-coordinator", "g", "--to", "2")
        assert moved.returncode == 0 and "coordinator 2" in moved.stdout
        assert cluster.coordinator_of("g") == 2
        assert kcoord(control, "stop", "3").returncode == 0
        assert not cluster.brokers()[2]["alive"]
        refused = kcoord(control, "stop", "7")
        assert refused.returncode != 0 and "no broker 7" in refused.stderr
        assert kcoord(control, "start", "3").returncode == 0
        assert cluster.brokers()[2]["alive"]
        # a fault through the same control
        rule = cluster.inject("OffsetFetch", "COORDINATOR_LOAD_IN_PROGRESS", times=1, group="g")
        assert rule["error"] in ("COORDINATOR_LOAD_IN_PROGRESS", 14)
        host, port = next(b for b in cluster.brokers() if b["node_id"] == 2)["host"], \
            next(b for b in cluster.brokers() if b["node_id"] == 2)["port"]
        assert asyncio.run(offset_fetch_errors(host, port, "g", 2)) == [E.coordinator_load_in_progress, E.none]
        assert cluster.clear_faults() == 0  # (spent: nothing left)


@pytest.mark.kafka_cluster(brokers=2)
def test_faults_through_the_fixture(kafka_cluster):
    coordinator = kafka_cluster.coordinator_of("g")
    broker = next(b for b in kafka_cluster.brokers() if b["node_id"] == coordinator)
    kafka_cluster.inject(9, 16, times=2, group="g")  # OffsetFetch, NOT_COORDINATOR, by key and code
    errors = asyncio.run(offset_fetch_errors(broker["host"], broker["port"], "g", 3))
    assert errors == [E.not_coordinator, E.not_coordinator, E.none]
    kafka_cluster.delay("OffsetFetch", 10)
    kafka_cluster.drop_connections("Produce", after=True)
    assert len(kafka_cluster.faults()) == 2
    assert kafka_cluster.clear_faults() == 2 and kafka_cluster.faults() == []
    with pytest.raises(ClusterError):
        kafka_cluster.inject("NoSuchApi", "NOT_COORDINATOR")
    with pytest.raises(ClusterError):
        kafka_cluster.inject("OffsetFetch", "NO_SUCH_ERROR")
    assert kafka_cluster.faults() == []


async def test_the_cluster_is_an_async_context_manager_too():
    async with Cluster(brokers=2) as cluster:
        assert len(cluster.bootstrap.split(",")) == 2
        moved = await cluster.amove_coordinator("g")
        assert cluster.coordinator_of("g") == moved
        await cluster.astop_broker(moved)
        assert cluster.coordinator_of("g") != moved
        await cluster.astart_broker(moved)
