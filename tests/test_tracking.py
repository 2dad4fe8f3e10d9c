"""Request tracking (coordinator/tracking.py): a test asserts what its client sent, as with
librdkafka's rd_kafka_mock_start_request_tracking / get_requests. Real clients on a real
cluster (coordinator.testing, in process); the HTTP and kcoord surfaces in
test_tracking_control.py."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from coordinator.testing import Cluster, ClusterError

TOPIC = "orders"


def create_topic(bootstrap: str, partitions: int = 1, rf: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, partitions, rf)]).values():
        f.result(30)


def moved_between(commits: list[dict], found: list[dict], old: int, new: int, moved_at: float) -> None:
    """The commits made since the move (which began at `moved_at`, time.time() in ms) went to
    the old coordinator, then to the new one, which the client found with a FindCoordinator
    after the first commit the old one refused and before the first to the new one. A loaded
    machine may add retries on either side (a request timed out, a retry sent to the old
    coordinator while the lookup was under way, COORDINATOR_LOAD_IN_PROGRESS), and a client's
    own early lookups (librdkafka makes two or three as it starts) may come only after the
    move, in which case it goes to the new coordinator at once: what is asserted is the order,
    not the count, and that the new coordinator was found by a lookup made after the move."""
    commits = [r for r in commits if r["time_ms"] >= moved_at]
    brokers = [r["broker"] for r in commits]
    assert brokers and brokers[-1] == new, brokers
    switch = brokers.index(new)
    assert set(brokers[:switch]) <= {old} and set(brokers[switch:]) == {new}, brokers
    since = commits[0]["time_ms"] if switch else moved_at  # (the refusal, else the move)
    assert any(since <= r["time_ms"] <= commits[switch]["time_ms"] for r in found), (brokers, found)


def confluent_commit(bootstrap: str, group: str, offset: int, client_id: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id, "enable.auto.commit": False}
    )
    try:
        committed = consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
        assert committed[0].error is None
        assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset == offset
    finally:
        consumer.close()


def test_confluent_commit_goes_to_the_new_coordinator_after_a_move(tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    with Cluster(brokers=3, data_dir=tmp_path / "c") as cluster:
        create_topic(cluster.bootstrap, rf=3)
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "billing",
                "client.id": "app",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=False)
            old = cluster.coordinator_of("billing")
            cluster.start_tracking()  # (before the move: a lookup the client makes meanwhile is seen)
            moved_at = time.time() * 1000
            new = cluster.move_coordinator("billing")
            assert new != old
            committed = consumer.commit(offsets=[TopicPartition(TOPIC, 0, 7)], asynchronous=False)
            assert committed[0].error is None
            assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset == 7
        finally:
            consumer.close()
        commits = cluster.requests(api="OffsetCommit", client_id="app")
        assert commits and all(r["groups"] == ["billing"] and r["topics"] == [TOPIC] for r in commits)
        # the client still held the old coordinator: NOT_COORDINATOR there, then the new one
        found = cluster.requests(api="FindCoordinator", client_id="app", group="billing")
        moved_between(commits, found, old, new, moved_at)


def test_confluent_commit_retried_after_an_injected_not_coordinator(tmp_path):
    with Cluster(brokers=3, data_dir=tmp_path / "c") as cluster:
        create_topic(cluster.bootstrap, rf=3)
        coordinator = cluster.coordinator_of("billing")
        cluster.start_tracking()
        cluster.inject("OffsetCommit", "NOT_COORDINATOR", group="billing")
        confluent_commit(cluster.bootstrap, "billing", 5, "app")
        sent = [r for r in cluster.requests(client_id="app") if r["api"] in ("OffsetCommit", "FindCoordinator")]
        apis = [r["api"] for r in sent]
        first = apis.index("OffsetCommit")
        # the failed commit, a new look for the coordinator, and the commit again to it (a
        # loaded machine may add a retry: the order is asserted, not the count). That the
        # commit succeeded confluent_commit checks; a lookup may follow it (librdkafka's
        # periodic coordinator query, seen under load), so the last request is not asserted.
        assert apis[first:].count("OffsetCommit") >= 2
        assert "FindCoordinator" in apis[first : first + apis[first + 1 :].index("OffsetCommit") + 1]
        assert all(r["broker"] == coordinator for r in sent if r["api"] == "OffsetCommit")
        retried = [r["correlation_id"] for r in sent if r["api"] == "OffsetCommit"]
        assert retried == sorted(retried)


def test_kafka_python_commit_retried_on_the_new_coordinator(tmp_path):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    with Cluster(brokers=3, data_dir=tmp_path / "c") as cluster:
        create_topic(cluster.bootstrap, rf=3)
        consumer = KafkaConsumer(
            bootstrap_servers=cluster.bootstrap,
            group_id="ledger",
            client_id="kp",
            enable_auto_commit=False,
            retry_backoff_ms=10,
        )
        try:
            consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(2, "", -1)})
            old = cluster.coordinator_of("ledger")
            cluster.start_tracking()
            moved_at = time.time() * 1000
            new = cluster.move_coordinator("ledger")
            consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(4, "", -1)})
            assert consumer.committed(TopicPartition(TOPIC, 0)) == 4
        finally:
            consumer.close()
        commits = cluster.requests(api="OffsetCommit", client_id="kp", group="ledger")
        # kafka-python still holds the old coordinator: NOT_COORDINATOR there, then the new one
        found = cluster.requests(api="FindCoordinator", client_id="kp", group="ledger")
        moved_between(commits, found, old, new, moved_at)


def test_limit_keeps_the_newest_and_counts_the_dropped(tmp_path):
    from kafka import KafkaAdminClient

    with Cluster(brokers=2, data_dir=tmp_path / "c") as cluster:
        assert cluster.tracking() == {"tracking": False, "limit": 10_000, "recorded": 0, "dropped": 0}
        assert cluster._server.intercept is None  # off: the request path checks one attribute
        assert cluster.start_tracking(limit=3)["limit"] == 3
        for _ in range(3):
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="adm")
            admin.list_topics()
            admin.close()
        status = cluster.stop_tracking()
        assert status["tracking"] is False and status["recorded"] == 3 and status["dropped"] > 0
        held = cluster.requests()
        assert len(held) == 3 and [r["time_ms"] for r in held] == sorted(r["time_ms"] for r in held)
        for node_id in cluster.node_ids:
            assert all(r["broker"] == node_id for r in cluster.requests(broker=node_id))
        assert cluster._server.intercept is None
        before = cluster.tracking()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="late")
        admin.close()
        assert cluster.tracking() == before and cluster.requests(client_id="late") == []  # stopped
        assert cluster.start_tracking(limit=2) == {
            "tracking": True,
            "limit": 2,
            "recorded": 2,
            "dropped": 1 + before["dropped"],
        }
        assert cluster.clear_requests() == 2
        assert cluster.tracking() == {"tracking": True, "limit": 2, "recorded": 0, "dropped": 0}


def test_tracking_and_faults_together(tmp_path):
    """A request is recorded and then meets the fault rules; stopping either leaves the other."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    with Cluster(brokers=1, data_dir=tmp_path / "c") as cluster:
        cluster.start_tracking()
        cluster.inject("CreateTopics", "POLICY_VIOLATION", times=None)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="adm")
        try:
            from kafka.admin import NewTopic

            with pytest.raises(KafkaError):
                admin.create_topics([NewTopic("refused", 1, 1)])
            cluster.stop_tracking()
            assert cluster._server.intercept is cluster._server.faults
            with pytest.raises(KafkaError):
                admin.create_topics([NewTopic("refused", 1, 1)])
        finally:
            admin.close()
        tracked = cluster.requests(api=19)
        assert len(tracked) == 1 and tracked[0]["topics"] == ["refused"]
        cluster.clear_faults()
        assert cluster._server.intercept is None


def test_an_unsupported_version_is_tracked(tmp_path):
    """A version the brokers do not serve is recorded (supported: false) from its header."""
    with Cluster(brokers=1, data_dir=tmp_path / "c") as cluster:
        cluster.start_tracking()
        host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
        client_id = b"raw"
        for key, version in ((18, 99), (8, 99)):  # ApiVersions is answered v0; OffsetCommit closes
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                header = struct.pack(">hhih", key, version, 41, len(client_id)) + client_id + b"\x00"
                sock.sendall(struct.pack(">i", len(header)) + header)
                sock.recv(4096)
        tracked = cluster.requests(client_id="raw")
        assert [(r["api"], r["api_version"], r["supported"], r["correlation_id"]) for r in tracked] == [
            ("ApiVersions", 99, False, 41),
            ("OffsetCommit", 99, False, 41),
        ]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda c: c.start_tracking(limit=0), "limit must be an integer in 1..1000000"),
        (lambda c: c.start_tracking(limit="5"), "limit must be an integer"),
        (lambda c: c.requests(api="Nope"), "unknown Kafka API 'Nope'"),
        (lambda c: c.requests(api=999), "no Kafka API has key 999"),
        (lambda c: c.requests(broker="1"), "broker must be a node id"),
        (lambda c: c.requests(group=3), "group must be a string"),
    ],
)
def test_bad_tracking_input_is_refused_and_changes_nothing(tmp_path, call, message):
    with Cluster(brokers=1, data_dir=tmp_path / "c") as cluster:
        before = cluster.tracking()
        with pytest.raises(ClusterError, match=message):
            call(cluster)
        assert cluster.tracking() == before


@pytest.mark.kafka_cluster(brokers=1)
def test_the_pytest_fixture_tracks_and_narrows(kafka_cluster):
    """The plugin's kafka_cluster is the Cluster: both controls are there, nothing to add."""
    from kafka import KafkaAdminClient

    kafka_cluster.start_tracking(limit=100)
    kafka_cluster.set_api_version("Metadata", max_version=8)
    KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap, client_id="fixture").close()
    metadata = kafka_cluster.requests(api="Metadata", client_id="fixture")
    assert metadata and all(r["api_version"] <= 8 for r in metadata)
