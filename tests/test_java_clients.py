"""The Java reference clients (kafka-clients and kafka-streams 4.x, tests/clients/java/) through
their life cycles against the server: KafkaConsumer on the classic protocol (eager range,
cooperative-sticky) and the consumer protocol, with members leaving and joining, a static
member restarting, a server restart and a resume from committed offsets."""

from __future__ import annotations

import pytest

from tests.support.process import wait_for
from tests.support.reference_clients import (
    build,
    cluster_actions,
    committed_offsets,
    end_offsets,
    java_command,
    picked_versions,
    proxied_server,
    run_parallel,
)

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

# Consumer-protocol members heartbeat at the broker's interval: short, so steps end quickly.
SERVER_ARGS = ("--group-consumer-heartbeat-interval-ms", "500")


@pytest.fixture(scope="module", autouse=True)
def java_clients():
    build("java-clients", ("java", "mvn"))


def assert_exact(result: dict) -> None:
    assert result["failures"] == [], result
    assert result["missing"] == [], "records never delivered"
    assert result["violations"] == {}, "records delivered again after a commit covered them"
    assert result["ok"], result


@pytest.mark.timeout(400)
def test_kafka_consumer_life_cycle(server_factory, tmp_path):
    modes = ("eager-range", "cooperative-sticky", "consumer")
    servers = {mode: proxied_server(server_factory, *SERVER_ARGS) for mode in modes}
    results = run_parallel(
        {
            mode: (
                java_command("consumer", servers[mode].proxy_bootstrap, mode),
                servers[mode],
                tmp_path / f"java-{mode}.log",
            )
            for mode in modes
        }
    )
    for mode, result in results.items():
        assert_exact(result)
        assert result["produced"] == 6 * 60
        # The committed offsets read back by another client: the whole log, nothing left over.
        topic = result["topic"]
        committed = committed_offsets(servers[mode].proxy_bootstrap, result["group"], topic, 6)
        assert committed == end_offsets(servers[mode].proxy_bootstrap, topic, 6)
        assert {str(p): o for p, o in committed.items()} == result["committed"]
    # The versions Java's clients picked (not those of the confluent-kafka readers above).
    print("\n[api versions] kafka-clients consumers:", picked_versions(servers, lambda c: c != "rdkafka"))


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> list[str]:
    """Every value in the topic, read by another client (confluent-kafka) with this isolation."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[str] = []
    try:
        wait_for(
            lambda: (
                values.extend(m.value().decode() for m in c.consume(500, 0.2) if not m.error())
                or len(values) >= expected
            ),
            what=f"{expected} records of {topic}",
        )
    finally:
        c.close()
    return values


@pytest.mark.timeout(400)
def test_producer_admin_streams_and_share_consumer(server_factory, tmp_path):
    """KafkaProducer idempotent across a server restart and transactional (consume-transform-
    produce with sendOffsetsToTransaction, an abort, fencing); AdminClient's group, offset,
    topic and config operations with Kafka's refusals; a Kafka Streams exactly-once word count
    across an instance restart and a server restart; KafkaShareConsumer (KIP-932) sharing,
    explicit acknowledgement, lock expiry and a server restart. All at once, each on its own
    server."""
    servers = {name: proxied_server(server_factory, *SERVER_ARGS) for name in ("producer", "admin", "streams")}
    # Share groups: record locks of a second, so that expiry is quick to see.
    servers["share"] = proxied_server(server_factory, *SERVER_ARGS, "--group-share-min-record-lock-duration-ms", "1000")
    results = run_parallel(
        {
            name: (java_command(name, srv.proxy_bootstrap), srv, tmp_path / f"java-{name}.log")
            for name, srv in servers.items()
        }
    )
    for result in results.values():
        assert result["failures"] == [], result
        assert result["ok"], result
    assert results["producer"]["idempotent records"] == 200
    assert results["producer"]["transactions"] > 1
    # Another client's read_committed view of the transactional output: each record once.
    bootstrap = servers["producer"].proxy_bootstrap
    committed = read_values(bootstrap, "txn-out", 3, "read_committed", 200)
    assert sorted(committed) == sorted(f"out{i}" for i in range(200))
    assert committed_offsets(bootstrap, "java-txn-group", "txn-in", 3) == end_offsets(bootstrap, "txn-in", 3)
    assert results["share"]["explicit deliveries"]["5"] == [1, 2]
    streams = results["streams"]
    assert streams["lines"] == 180
    assert streams["final counts"] == streams["expected"]
    print(
        "\n[api versions] kafka-clients producer, admin, streams, share consumer:",
        picked_versions(servers, lambda c: c != "rdkafka"),
    )


@pytest.mark.timeout(400)
def test_across_a_coordinator_move_a_broker_stop_and_a_leader_move(tmp_path):
    """Three brokers (coordinator.testing.Cluster): KafkaConsumer groups (cooperative-sticky and
    the consumer protocol) while their coordinator moves and then its broker stops; an
    idempotent KafkaProducer while a partition's leader moves."""
    from coordinator.testing import Cluster

    jobs = {
        "cooperative-sticky": ("consumer-cluster", "cooperative-sticky"),
        "consumer": ("consumer-cluster", "consumer"),
        "producer": ("producer-cluster",),
    }
    clusters = {
        name: Cluster(brokers=3, subprocess=True, group_consumer_heartbeat_interval_ms=500).start() for name in jobs
    }
    try:
        results = run_parallel(
            {
                name: (
                    java_command(job[0], clusters[name].bootstrap, *job[1:]),
                    None,
                    tmp_path / f"java-cluster-{name}.log",
                    cluster_actions(clusters[name]),
                )
                for name, job in jobs.items()
            }
        )
    finally:
        for cluster in clusters.values():
            cluster.close()
    for name, result in results.items():
        assert result["failures"] == [], (name, result)
        assert result["ok"], (name, result)
    for name in ("cooperative-sticky", "consumer"):
        assert results[name]["missing"] == [] and results[name]["violations"] == {}, results[name]
        assert results[name]["produced"] == 3 * 60
    assert results["producer"]["leader move records"] == 200


@pytest.mark.timeout(400)
def test_kafka_streams_on_the_streams_protocol(server_factory, tmp_path):
    """Kafka Streams 4.4 with group.protocol=streams (KIP-1071): the coordinator validates the
    topology, creates the repartition and changelog topics and assigns the tasks. An exactly-once
    word count with two instances, then a third joining, then one stopped and started again with
    an empty state dir, with a standby replica of each stateful task: after each step the group is
    Stable with every member running active tasks and the standbys placed
    (Admin.describeStreamsGroups), and each word's output is exactly 1..n. On a server of its
    own, apart from the scenarios above (one more JVM beside them starves their timing)."""
    # One standby replica of each stateful task (group.streams.num.standby.replicas); the test
    # profile: no initial rebalance delay (Kafka's is 3 s), members heartbeat every 250 ms (Kafka:
    # every 5 s), so each step's new assignment reaches the instances at once.
    server = proxied_server(
        server_factory, *SERVER_ARGS, "--profile", "test", "--group-streams-num-standby-replicas", "1"
    )
    results = run_parallel(
        {"streams-protocol": (java_command("streams-protocol", server.proxy_bootstrap), server, tmp_path / "java.log")}
    )
    result = results["streams-protocol"]
    assert result["failures"] == [], result
    assert result["ok"], result
    assert result["lines"] == 240 and result["final counts"] == result["expected"]
    assert result["three instances: members with standby tasks"] >= 1  # (subtopology 1 is stateful)
    picked = picked_versions({"streams": server}, lambda c: c != "rdkafka")
    print("\n[api versions] Kafka Streams on the streams protocol:", picked)


@pytest.mark.timeout(400)
def test_kafka_streams_on_the_streams_protocol_across_a_coordinator_move(tmp_path):
    """The same KIP-1071 word count on three brokers (coordinator.testing.Cluster): after the
    third instance joins, the group's coordinator moves to another broker; the new one loads
    the group from `__consumer_offsets` and the instances carry on, counts exact."""
    from coordinator.testing import Cluster

    cluster = Cluster(brokers=3, subprocess=True).start()
    try:
        results = run_parallel(
            {
                "streams-protocol-cluster": (
                    java_command("streams-protocol-cluster", cluster.bootstrap),
                    None,
                    tmp_path / "java-streams-cluster.log",
                    cluster_actions(cluster),
                )
            }
        )
    finally:
        cluster.close()
    result = results["streams-protocol-cluster"]
    assert result["failures"] == [], result
    assert result["ok"], result
    assert result["lines"] == 300 and result["final counts"] == result["expected"]


@pytest.mark.timeout(300)
def test_share_consumer_on_three_brokers(tmp_path):
    """Kafka's KafkaShareConsumer on three brokers with a partition led by each: three
    consumers get every record once, and with explicit acknowledgement a released record comes
    back once more and the acknowledged ones never (a share session with every broker)."""
    from coordinator.testing import Cluster

    cluster = Cluster(brokers=3, subprocess=True).start()
    try:
        results = run_parallel(
            {"share-cluster": (java_command("share-cluster", cluster.bootstrap), None, tmp_path / "java-share.log")}
        )
        assert sorted(cluster.leader_of("spread", p) for p in range(3)) == [1, 2, 3]
    finally:
        cluster.close()
    result = results["share-cluster"]
    assert result["failures"] == [], result
    assert result["ok"], result


def _downgrade_transaction_version(port: int) -> None:
    """UpdateFeatures: transaction.version 2 -> 1 (a safe downgrade, as kafka-features does)."""
    import asyncio
    import datetime

    from tests.support.wire_client import WireClient, request_class

    async def downgrade() -> None:
        conn = await WireClient("features").connect("127.0.0.1", port)
        key = request_class(57, 1, "FeatureUpdateKey")
        r = await conn.request(
            57,
            1,
            request_class(57, 1)(
                timeout=datetime.timedelta(seconds=5),
                feature_updates=(key(feature="transaction.version", max_version_level=1, upgrade_type=2),),
                validate_only=False,
            ),
        )
        await conn.close()
        assert r.error_code == 0, r

    asyncio.run(downgrade())


@pytest.mark.timeout(400)
def test_transactions_v2_and_v1(server_factory, tmp_path):
    """KafkaProducer 4.4 against the server as formatted (transaction.version 2) and after a
    downgrade to 1: 20 transactions (every fourth aborted) with sendOffsetsToTransaction; the
    epoch DescribeProducers reports rises 1..20 under v2 (EndTxn v5, no AddPartitionsToTxn or
    AddOffsetsToTxn) and stays 0 under v1; a read_committed reader sees exactly the committed
    records, the group's offset is the last committed transaction's, a zombie is fenced."""
    servers = {tv: proxied_server(server_factory, *SERVER_ARGS) for tv in (2, 1)}
    _downgrade_transaction_version(servers[1].port)
    results = run_parallel(
        {
            tv: (java_command("txn-v2", srv.proxy_bootstrap, str(tv)), srv, tmp_path / f"java-txn-v{tv}.log")
            for tv, srv in servers.items()
        }
    )
    for tv, result in results.items():
        assert result["failures"] == [], (tv, result)
        assert result["committed records"] == 15 * 5
        assert result["group offset"] == result["expected group offset"] == 95
        assert result["zombie topic"] == ["first", "second"]
        assert result["zombie"] in ("ProducerFencedException", "InvalidProducerEpochException"), result
    assert results[2]["epochs"] == list(range(1, 21))
    assert results[1]["epochs"] == [0] * 20
    versions = {tv: servers[tv].proxy.versions(lambda c: c is not None and "producer-java-v2" in c) for tv in servers}
    for server in servers.values():
        server.proxy.close()
    assert "AddPartitionsToTxn" not in versions[2] and "AddOffsetsToTxn" not in versions[2], versions[2]
    assert versions[2]["EndTxn"] == [5] and max(versions[2]["Produce"]) >= 12, versions[2]
    assert "AddPartitionsToTxn" in versions[1] and max(versions[1]["EndTxn"]) <= 4, versions[1]
    print("\n[api versions] kafka-clients transactional producer, v2 and v1:", versions)
