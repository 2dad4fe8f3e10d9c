"""The Go reference clients (tests/clients/go/, pinned in its go.mod): franz-go's kgo group
consumer (cooperative-sticky, and the KIP-848 consumer protocol), segmentio/kafka-go v0.4's
ConsumerGroup and Reader, and IBM/sarama's consumer group, each through a group's life cycle
against the server: members joining and leaving, a static member restarting (where the client
has static membership), a server restart and a resume from committed offsets; and franz-go's
GroupTransactSession (consume-transform-produce, exactly once) across a server restart."""

from __future__ import annotations

import pytest

from tests.support.reference_clients import (
    build,
    cluster_actions,
    committed_offsets,
    end_offsets,
    go_command,
    picked_versions,
    proxied_server,
    run_parallel,
)

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

SERVER_ARGS = ("--group-consumer-heartbeat-interval-ms", "500")
LIFECYCLES = ("franz-cooperative", "franz-consumer", "kafka-go-group", "kafka-go-reader", "sarama")
SCENARIOS = (*LIFECYCLES, "franz-txn")


@pytest.fixture(scope="module", autouse=True)
def go_clients():
    build("go-clients", ("go",))


@pytest.mark.timeout(400)
def test_go_clients(server_factory, tmp_path):
    """Each scenario on its own server, all at once; franz-cluster on three brokers
    (coordinator.testing.Cluster), across a coordinator move and the stop of its broker."""
    from coordinator.testing import Cluster

    servers = {name: proxied_server(server_factory, *SERVER_ARGS) for name in SCENARIOS}
    cluster = Cluster(brokers=3, subprocess=True).start()
    jobs = {
        name: (go_command(name, servers[name].proxy_bootstrap), servers[name], tmp_path / f"go-{name}.log")
        for name in SCENARIOS
    }
    jobs["franz-cluster"] = (
        go_command("franz-cluster", cluster.bootstrap),
        None,
        tmp_path / "go-franz-cluster.log",
        cluster_actions(cluster),
    )
    try:
        results = run_parallel(jobs)
    finally:
        cluster.close()
    for name, result in results.items():
        assert result["failures"] == [], (name, result)
        assert result["ok"], (name, result)
        if name == "franz-txn":
            assert result["transactions"] > 1
            continue
        assert result["missing"] == [], (name, "records never delivered")
        assert result["violations"] == {}, (name, "records delivered again after a commit covered them")
        if name == "franz-cluster":
            continue
        # The committed offsets read back by another client: the whole log.
        committed = committed_offsets(servers[name].proxy_bootstrap, result["group"], result["topic"], 6)
        assert committed == end_offsets(servers[name].proxy_bootstrap, result["topic"], 6), name
        assert {str(p): o for p, o in committed.items()} == result["committed"], name
    # The versions each library picked, not those of the confluent-kafka readers above
    # ("rdkafka"); in the kafka-go and sarama scenarios franz-go's kadm and producer say "kgo".
    for library, names in (
        ("franz-go", ("franz-cooperative", "franz-consumer", "franz-txn")),
        ("kafka-go", ("kafka-go-group", "kafka-go-reader")),
        ("sarama", ("sarama",)),
    ):
        others = ("rdkafka",) if library == "franz-go" else ("rdkafka", "kgo")
        picked = picked_versions({n: servers[n] for n in names}, lambda c, others=others: c not in others)
        print(f"\n[api versions] {library}:", picked)
