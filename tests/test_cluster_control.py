"""Driving a cluster from outside its process: coordinator.testing's subprocess mode and
`kcoord cluster ...`, both over the HTTP test control; and the faults coordinator.testing
delegates to (coordinator/faults.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from tests.support.wire_client import WireClient, request_class
from coordinator.testing import Cluster, ClusterError

pytestmark = pytest.mark.slow  # a subprocess cluster driven over HTTP and by kcoord

ROOT = Path(__file__).resolve().parent.parent
OFFSET_FETCH = 9


async def offset_fetch_errors(host: str, port: int, group: str, n: int) -> list[int]:
    conn = await WireClient("control-test").connect(host, port)
    try:
        out = []
        for _ in range(n):
            r = await conn.request(
                OFFSET_FETCH, 7, request_class(OFFSET_FETCH, 7)(group_id=group, topics=None, require_stable=False)
            )
            out.append(r.error_code)
        return out
    finally:
        await conn.close()


def kcoord(control: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "coordinator.admin", "cluster", *args, "--control", control],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


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
        header = ["NODE-ID", "HOST", "PORT", "ALIVE", "LISTENERS", "LEADER-OF"]
        assert shown.returncode == 0 and shown.stdout.split()[:6] == header
        assert [line.split()[0] for line in shown.stdout.splitlines()[1:]] == ["1", "2", "3"]
        shown = kcoord(control, "show", "--output", "json")
        assert [b["node_id"] for b in json.loads(shown.stdout)] == [1, 2, 3]
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
        host, port = (
            next(b for b in cluster.brokers() if b["node_id"] == 2)["host"],
            next(b for b in cluster.brokers() if b["node_id"] == 2)["port"],
        )
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


async def _poll_while_moving(cluster: Cluster, group: str, to: int) -> list[int]:
    """OffsetFetch to broker `to`, back to back, while the group's coordinator moves there:
    the error codes seen, in order (repeats collapsed)."""
    broker = next(b for b in cluster.brokers() if b["node_id"] == to)
    conn = await WireClient("load-watcher").connect(broker["host"], broker["port"])
    seen: list[int] = []
    move = asyncio.create_task(asyncio.to_thread(cluster.move_coordinator, group, to))
    try:
        while True:
            done = move.done()
            r = await conn.request(
                OFFSET_FETCH, 7, request_class(OFFSET_FETCH, 7)(group_id=group, topics=None, require_stable=False)
            )
            if not seen or seen[-1] != r.error_code:
                seen.append(r.error_code)
            if done:
                break
        assert move.result() == to
        return seen
    finally:
        await conn.close()


def test_the_new_coordinator_answers_load_in_progress_while_it_loads(tmp_path):
    """One __consumer_offsets partition holding 500 groups' 50,000 offsets: while its new
    coordinator replays it, the group's requests there are answered COORDINATOR_LOAD_IN_PROGRESS
    (before: NOT_COORDINATOR), and afterwards its offsets are all there."""

    async def commit_all(host: str, port: int) -> None:
        conn = await WireClient("loader").connect(host, port)
        await conn.create_topics("t100", partitions=100)
        topic, part = (
            request_class(8, 8, "OffsetCommitRequestTopic"),
            request_class(8, 8, "OffsetCommitRequestPartition"),
        )
        for first in range(0, 500, 50):
            answers = await asyncio.gather(
                *conn.send_many(
                    [
                        (
                            8,
                            8,
                            request_class(8, 8)(
                                group_id=f"g{g}",
                                generation_id_or_member_epoch=-1,
                                member_id="",
                                group_instance_id=None,
                                topics=(
                                    topic(
                                        name="t100",
                                        partitions=tuple(
                                            part(
                                                partition_index=p,
                                                committed_offset=g + p,
                                                committed_leader_epoch=-1,
                                                committed_metadata="",
                                            )
                                            for p in range(100)
                                        ),
                                    ),
                                ),
                            ),
                        )
                        for g in range(first, first + 50)
                    ]
                )
            )
            assert all(p.error_code == 0 for a in answers for t in a.topics for p in t.partitions)
        await conn.close()

    with Cluster(brokers=2, subprocess=True, data_dir=tmp_path / "data", offsets_partitions=1) as cluster:
        old = cluster.coordinator_of("g7")
        b = next(b for b in cluster.brokers() if b["node_id"] == old)
        asyncio.run(commit_all(b["host"], b["port"]))
        seen = asyncio.run(_poll_while_moving(cluster, "g7", 3 - old))
        assert seen[0] == E.not_coordinator and seen[-1] == E.none
        assert E.coordinator_load_in_progress in seen
        assert seen == [e for e in (E.not_coordinator, E.coordinator_load_in_progress, E.none) if e in seen]

        async def fetched() -> dict:
            broker = next(b for b in cluster.brokers() if b["node_id"] == 3 - old)
            conn = await WireClient("check").connect(broker["host"], broker["port"])
            r = await conn.request(
                OFFSET_FETCH, 7, request_class(OFFSET_FETCH, 7)(group_id="g7", topics=None, require_stable=False)
            )
            await conn.close()
            return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}

        assert asyncio.run(fetched()) == {("t100", p): 7 + p for p in range(100)}
