"""`--profile test`, what coordinator.testing.Cluster and the pytest fixtures run with: its
settings read back with DescribeConfigs, each overridable by a Cluster keyword; a share
group may then hold 1000 ms record locks (librdkafka's CI sets that minimum), as under the
client-suite profile, where the defaults refuse them."""

from __future__ import annotations

import asyncio

from coordinator.config import parse_args
from coordinator.profiles import TEST_HEARTBEAT_INTERVAL_MS
from coordinator.testing import Cluster
from tests.support.configs import BROKER, by_name, describe, incremental
from tests.support.wire_client import WireClient

GROUP_RESOURCE, INVALID_CONFIG = 32, 40

TEST_PROFILE = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.heartbeat.interval.ms": str(TEST_HEARTBEAT_INTERVAL_MS),
    "group.consumer.min.heartbeat.interval.ms": "1",
    "group.consumer.min.session.timeout.ms": "1",
    "group.share.assignment.interval.ms": "0",
    "group.share.heartbeat.interval.ms": str(TEST_HEARTBEAT_INTERVAL_MS),
    "group.share.min.heartbeat.interval.ms": "1",
    "group.share.min.session.timeout.ms": "1",
    "group.share.min.record.lock.duration.ms": "1000",
}


async def _described(bootstrap: str) -> tuple[dict[str, str | None], int]:
    """The profile's broker configs as DescribeConfigs shows them, and the error of setting a
    group's share.record.lock.duration.ms to 1000."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = await WireClient("profile").connect(host, int(port))
    try:
        configs = by_name(await describe(conn, BROKER, "1", keys=list(TEST_PROFILE)))
        locks = (await incremental(conn, GROUP_RESOURCE, "g", [("share.record.lock.duration.ms", 0, "1000")]))[0]
    finally:
        await conn.close()
    return {name: configs[name].value for name in TEST_PROFILE}, locks


def test_the_clusters_settings_read_back():
    with Cluster(brokers=1) as cluster:
        values, locks = asyncio.run(_described(cluster.bootstrap))
    assert values == TEST_PROFILE
    assert locks == 0


def test_each_setting_overridable():
    with Cluster(
        brokers=1, group_consumer_heartbeat_interval_ms=1000, group_share_min_record_lock_duration_ms=15000
    ) as c:
        values, locks = asyncio.run(_described(c.bootstrap))
    assert values == {
        **TEST_PROFILE,
        "group.consumer.heartbeat.interval.ms": "1000",
        "group.share.min.record.lock.duration.ms": "15000",
    }
    assert locks == INVALID_CONFIG  # 1000 ms is below the minimum given


def test_without_a_profile_the_servers_defaults():
    with Cluster(brokers=1, profile=None) as cluster:
        values, locks = asyncio.run(_described(cluster.bootstrap))
    assert values["group.consumer.heartbeat.interval.ms"] == "5000"
    assert values["group.share.min.record.lock.duration.ms"] == "15000"
    assert locks == INVALID_CONFIG


def test_client_suite_profile_gives_what_the_suites_brokers_run_with():
    suite = parse_args(["--profile", "client-suite"])
    assert suite.group_share_min_record_lock_duration_ms == 1000  # librdkafka's CI
    assert suite.group_initial_rebalance_delay_ms == 3000  # Kafka's default (kafka-go's compose)
    assert parse_args(["--profile", "test", "--fsync", "always"]).fsync == "always"
    assert parse_args(["--profile", "test"]).fsync == "never"
    streams = parse_args(["--profile", "test"])
    assert (
        streams.group_streams_heartbeat_interval_ms,
        streams.group_streams_assignment_interval_ms,
        streams.group_streams_initial_rebalance_delay_ms,
    ) == (TEST_HEARTBEAT_INTERVAL_MS, 0, 0)
