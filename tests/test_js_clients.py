"""kafkajs (tests/clients/js/, pinned in its package-lock.json), Node.js's common client, through
a classic group's life cycle (members joining and leaving, a member restarting and resuming from the
committed offsets, the group described and its offsets fetched through kafkajs's admin), its
idempotent and transactional producers (transaction(), sendOffsets, commit and abort, read back
read_committed and read_uncommitted), and a group across a coordinator move and the stop of its
broker on three brokers. Each scenario keeps its own ledger of produced, delivered and
committed records; see docs/clients.md."""

from __future__ import annotations

import pytest

from tests.support.reference_clients import (
    build,
    cluster_actions,
    committed_offsets,
    end_offsets,
    js_command,
    picked_versions,
    proxied_server,
    run_program,
)

pytestmark = [pytest.mark.slow, pytest.mark.process]  # a real client library through whole group life cycles


@pytest.fixture(scope="module", autouse=True)
def js_clients():
    build("js-clients", ("node", "npm"))


def kafkajs_only(client_id: str) -> bool:
    """The requests of kafkajs's clients, not those of the confluent-kafka readers ("rdkafka")."""
    return client_id.startswith("js-")


def assert_ledger(result: dict) -> None:
    assert result["failures"] == [], result
    assert result["ok"], result
    assert result["missing"] == [], "records never delivered"
    assert result["violations"] == {}, "records delivered again after a commit covered them"


@pytest.mark.timeout(300)
def test_kafkajs_group_lifecycle(server_factory, tmp_path):
    """Two members join, a third joins, one leaves, all leave, one restarts and resumes at the committed
    offsets; after each step every record is delivered and describeGroups matches the members."""
    server = proxied_server(server_factory)
    result = run_program(js_command("lifecycle", server.proxy_bootstrap), server, log=tmp_path / "js-lifecycle.log")
    assert_ledger(result)
    # The committed offsets read back by another client: the whole log.
    committed = committed_offsets(server.proxy_bootstrap, result["group"], result["topic"], 6)
    assert committed == end_offsets(server.proxy_bootstrap, result["topic"], 6)
    assert {str(p): o for p, o in committed.items()} == result["committed"]
    print("\n[api versions] kafkajs:", picked_versions({"lifecycle": server}, kafkajs_only))


@pytest.mark.timeout(300)
def test_kafkajs_producers(server_factory, tmp_path):
    """An idempotent producer's records once each and in order; consume-transform-produce with
    transaction() and sendOffsets after an aborted transaction, read back read_committed (only
    the committed records) and read_uncommitted; a second instance fences the first."""
    server = proxied_server(server_factory)
    result = run_program(js_command("txn", server.proxy_bootstrap), server, log=tmp_path / "js-txn.log")
    assert result["failures"] == [], result
    assert result["ok"], result
    assert result["transactions"] > 1
    print("\n[api versions] kafkajs:", picked_versions({"txn": server}, kafkajs_only))


@pytest.mark.timeout(300)
def test_kafkajs_group_across_coordinator_move_and_broker_stop(tmp_path):
    """Three brokers (coordinator.testing.Cluster): the group's coordinator moves, then its broker
    stops; the group converges again each time and no committed record is delivered again."""
    from coordinator.testing import Cluster

    cluster = Cluster(brokers=3, subprocess=True).start()
    try:
        result = run_program(
            js_command("cluster", cluster.bootstrap), log=tmp_path / "js-cluster.log", actions=cluster_actions(cluster)
        )
        assert_ledger(result)
        committed = committed_offsets(cluster.bootstrap, result["group"], result["topic"], 6)
        assert committed == end_offsets(cluster.bootstrap, result["topic"], 6)
    finally:
        cluster.close()
