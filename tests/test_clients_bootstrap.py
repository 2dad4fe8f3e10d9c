"""Real clients bootstrap against the server and find our node as the group coordinator.

Every client connects through a small logging TCP proxy, and the server advertises the
proxy's port, so every request of every client passes the proxy. The proxy records the
(api key, version) of each request: the versions each client picks after ApiVersions must
be within the ranges we advertise.
"""

from __future__ import annotations

import pytest

from coordinator.data_dir import stored_cluster_id
from tests.support.process import free_port
from tests.support.proxy import (
    LoggingProxy,
    advertised_api_keys,
    assert_within_our_ranges,
)

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

OUR_RANGES = {18: (0, 5), 3: (0, 13), 10: (0, 6)}
GROUP = "bootstrap-group"


@pytest.fixture
def proxied(server_factory):
    """A server whose advertised address is a logging proxy in front of it."""
    proxy_port = free_port()
    server = server_factory("--advertised-host", "127.0.0.1", "--advertised-port", str(proxy_port))
    proxy = LoggingProxy(proxy_port, server.port)
    server.proxy_port = proxy_port
    server.proxy = proxy
    yield server
    proxy.close()


def report(client: str, seen: dict[str, list[int]]) -> None:
    print(f"\n[api versions] {client}: " + ", ".join(f"{k} v{'/'.join(map(str, v))}" for k, v in seen.items()))


# --- kafka-python ---------------------------------------------------------------------------


def test_kafka_python_admin_and_consumer(proxied):
    from kafka import KafkaAdminClient, KafkaConsumer

    bootstrap = f"127.0.0.1:{proxied.proxy_port}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=10000)
    try:
        cluster = admin.describe_cluster()
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
            (1, "127.0.0.1", proxied.proxy_port)
        ]
        assert "__consumer_offsets" not in admin.list_topics()  # (created at its first use, as on Kafka)
        assert admin._manager.run(admin._find_coordinator_id, GROUP) == 1
        assert "__consumer_offsets" in admin.list_topics()
    finally:
        admin.close()

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        client_id="kp-consumer",
        enable_auto_commit=False,
        request_timeout_ms=10000,
    )
    try:
        assert consumer.topics() == set()  # internal topics are hidden from consumers
        assert [(b.node_id, b.host, b.port) for b in consumer._client.cluster.brokers()] == [
            (1, "127.0.0.1", proxied.proxy_port)
        ]
        coordinator = consumer._coordinator
        coordinator.ensure_coordinator_ready(timeout_ms=10000)
        assert coordinator.coordinator_id == "coordinator-1"  # kafka-python's name for node 1's group link
    finally:
        consumer.close()

    seen = proxied.proxy.versions()
    report("kafka-python", seen)
    assert seen["ApiVersions"] and seen["Metadata"] and seen["FindCoordinator"]
    assert_within_our_ranges(seen, advertised_api_keys(proxied.port))


# --- aiokafka -------------------------------------------------------------------------------


async def test_aiokafka_client(proxied):
    from aiokafka.client import AIOKafkaClient

    client = AIOKafkaClient(
        bootstrap_servers=f"127.0.0.1:{proxied.proxy_port}", client_id="aiokafka-test", request_timeout_ms=10000
    )
    await client.bootstrap()
    try:
        brokers = client.cluster.brokers()
        assert [(b.nodeId, b.host, b.port) for b in brokers] == [(1, "127.0.0.1", proxied.proxy_port)]
        assert await client.coordinator_lookup(0, GROUP) == 1
    finally:
        await client.close()

    seen = proxied.proxy.versions()
    report("aiokafka", seen)
    assert seen["ApiVersions"] and seen["Metadata"] and seen["FindCoordinator"]
    assert_within_our_ranges(seen, advertised_api_keys(proxied.port))


# --- confluent-kafka ----------------------------------------------------------------------------


def test_confluent_admin_list_topics(proxied):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{proxied.proxy_port}", "client.id": "rdkafka-admin"})
    md = admin.list_topics(timeout=15)
    assert [(b.id, b.host, b.port) for b in md.brokers.values()] == [(1, "127.0.0.1", proxied.proxy_port)]
    assert md.cluster_id == stored_cluster_id(proxied.data_dir)
    assert "__consumer_offsets" not in md.topics  # (created at its first use, as on Kafka)
    md = admin.list_topics("__consumer_offsets", timeout=15)  # a Metadata naming it creates it
    assert len(md.topics["__consumer_offsets"].partitions) == 50

    ranges = advertised_api_keys(proxied.port)
    if 15 in ranges and 16 in ranges:  # DescribeGroups/ListGroups come with the group coordinator
        groups = admin.list_consumer_groups(request_timeout=15).result()
        assert groups.errors == []
        described = admin.describe_consumer_groups([GROUP], request_timeout=15)[GROUP].result()
        assert described.coordinator.id == 1 and described.coordinator.port == proxied.proxy_port
    seen = proxied.proxy.versions()
    report("confluent-kafka", seen)
    assert seen["ApiVersions"] and seen["Metadata"]
    assert_within_our_ranges(seen, ranges)
    if 15 not in ranges or 16 not in ranges:
        pytest.skip(
            "list/describe_consumer_groups need ListGroups (16) and DescribeGroups (15), not served yet; "
            "Metadata bootstrap checked"
        )
