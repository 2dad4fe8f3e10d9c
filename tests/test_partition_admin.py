"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on three brokers:
confluent-kafka's elect_leaders and kafka-python's reassignment calls round-trip, and the
errors are Kafka's controller's (wire-level for what the clients do not expose)."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.testing import Cluster
from tests.support.wire_client import WireClient, request_class

ELECT, ALTER, LIST = 43, 45, 46
NONE, UNKNOWN_TOPIC, INVALID_REQUEST = 0, 3, 42
PREFERRED_LEADER_NOT_AVAILABLE, ELECTION_NOT_NEEDED, NO_REASSIGNMENT = 80, 84, 85
INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR = 39, 38


@pytest.fixture
def cluster():
    with Cluster(brokers=3) as c:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        admin.create_topics([NewTopic("t", 2, 3)])
        admin.close()
        yield c


def _wire(cluster, api, version, body):
    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)

    async def call():
        conn = await WireClient("partition-admin").connect(host, int(port))
        try:
            return await conn.request(api, version, body)
        finally:
            await conn.close()

    return asyncio.run(call())


def test_preferred_election_with_confluent_admin(cluster):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    preferred = cluster.leader_of("t", 0)  # a new partition's leader is its first replica
    cluster.stop_broker(preferred)
    assert cluster.leader_of("t", 0) != preferred
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # stopped: not in the ISR
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("t", 0)]).result(30)
    assert result[TopicPartition("t", 0)].code() == PREFERRED_LEADER_NOT_AVAILABLE
    cluster.start_broker(preferred)  # back, but not leading
    assert cluster.leader_of("t", 0) != preferred
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("t", 0)]).result(30)
    assert result[TopicPartition("t", 0)] is None and cluster.leader_of("t", 0) == preferred
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("t", 0)]).result(30)
    assert result[TopicPartition("t", 0)].code() == ELECTION_NOT_NEEDED
    # an unclean election is not needed while the partition has a leader
    result = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("t", 1)]).result(30)
    assert result[TopicPartition("t", 1)].code() == ELECTION_NOT_NEEDED
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("nope", 0)]).result(30)
    assert result[TopicPartition("nope", 0)].code() == UNKNOWN_TOPIC


def test_election_errors_on_the_wire(cluster):
    TP = request_class(ELECT, 2, "TopicPartitions")

    def elect(election_type, topics):
        return _wire(
            cluster,
            ELECT,
            2,
            request_class(ELECT, 2)(
                election_type=election_type,
                topic_partitions=topics,
                timeout=__import__("datetime").timedelta(seconds=5),
            ),
        )

    r = elect(0, (TP(topic="nope", partitions=(0,)), TP(topic="t", partitions=(9, 0))))
    rows = {
        (x.topic, p.partition_id): (p.error_code, p.error_message)
        for x in r.replica_election_results
        for p in x.partition_result
    }
    assert rows == {
        ("nope", 0): (UNKNOWN_TOPIC, "No such topic as nope"),
        ("t", 9): (UNKNOWN_TOPIC, "No such partition as t-9"),
        ("t", 0): (ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),  # (Kafka's default text)
    }
    r = elect(0, None)  # every partition: only those that needed an election are answered
    assert r.error_code == 0 and all(not x.partition_result for x in r.replica_election_results)
    assert elect(7, None).error_code == INVALID_REQUEST
    r = elect(7, (TP(topic="t", partitions=(0, 1)),))  # the error in each partition named, as Kafka's
    assert r.error_code == INVALID_REQUEST and [
        (x.topic, p.partition_id, p.error_code, p.error_message)
        for x in r.replica_election_results
        for p in x.partition_result
    ] == [("t", 0, INVALID_REQUEST, "Unknown election type 7"), ("t", 1, INVALID_REQUEST, "Unknown election type 7")]


def test_reassignments_with_kafka_python(cluster):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    tp = TopicPartition("t", 0)
    leader = cluster.leader_of("t", 0)
    others = [n for n in cluster.node_ids if n != leader]
    # the leader leaves the replicas: it completes at once, and the first new replica leads
    assert admin.alter_partition_reassignments({tp: others}) == {tp: None}
    assert cluster.leader_of("t", 0) == others[0]
    assert admin.list_partition_reassignments() == {}
    # a stopped broker added: in progress until it runs again
    cluster.stop_broker(leader)
    assert admin.alter_partition_reassignments({tp: [others[0], leader]}) == {tp: None}
    ongoing = admin.list_partition_reassignments()
    assert ongoing == {
        tp: {"replicas": [others[0], leader, others[1]], "adding_replicas": [leader], "removing_replicas": [others[1]]}
    }
    # cancelled: back to where it started; nothing left to cancel
    result = admin.alter_partition_reassignments({tp: None})
    assert result == {tp: None} and admin.list_partition_reassignments() == {}
    result = admin.alter_partition_reassignments({tp: None})
    assert result[tp] is not None and result[tp].errno == NO_REASSIGNMENT
    cluster.start_broker(leader)
    admin.close()


def test_bad_reassignments_on_the_wire(cluster):
    P, T = request_class(ALTER, 1, "ReassignablePartition"), request_class(ALTER, 1, "ReassignableTopic")

    def alter(replicas, topic="t", partition=0, allow=True):
        r = _wire(
            cluster,
            ALTER,
            1,
            request_class(ALTER, 1)(
                timeout=__import__("datetime").timedelta(seconds=5),
                allow_replication_factor_change=allow,
                topics=(T(name=topic, partitions=(P(partition_index=partition, replicas=replicas),)),),
            ),
        )
        p = r.responses[0].partitions[0]
        return p.error_code, p.error_message

    assert alter(()) == (INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    assert alter((1, 1, 2)) == (
        INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes the broker 1 more than once.",
    )
    assert alter((1, 99)) == (
        INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 99, but no such broker is registered.",
    )
    assert alter((1, 2), allow=False)[0] == INVALID_REPLICATION_FACTOR
    assert alter((1,), topic="nope") == (UNKNOWN_TOPIC, "Unable to find a topic named nope.")
    assert alter((1,), partition=5) == (UNKNOWN_TOPIC, "Unable to find partition t:5.")
    L, LT = request_class(LIST, 0), request_class(LIST, 0, "ListPartitionReassignmentsTopics")
    r = _wire(
        cluster,
        LIST,
        0,
        L(
            timeout=__import__("datetime").timedelta(seconds=5),
            topics=(LT(name="nope", partition_indexes=(0,)), LT(name="t", partition_indexes=(0, 1))),
        ),
    )
    assert r.error_code == 0 and r.topics == ()


def test_denied_without_cluster_alter(server_factory, tmp_path):
    """Under --authorizer: ALTER on the cluster for elections and reassignments, DESCRIBE to
    list them (CLUSTER_AUTHORIZATION_FAILED, as Kafka)."""
    from confluent_kafka import ElectionType, KafkaException, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )
    from kafka.admin import KafkaAdminClient
    from kafka.errors import ClusterAuthorizationFailedError

    users = tmp_path / "users.txt"
    users.write_text("admin:admin-secret\nalice:alice-secret\n")
    server = server_factory(
        "--security-protocol",
        "SASL_PLAINTEXT",
        "--sasl-users",
        str(users),
        "--sasl-mechanisms",
        "PLAIN",
        "--authorizer",
        "--super-users",
        "User:admin",
    )

    def conf(user):
        return {
            "bootstrap.servers": server.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-secret",
        }

    admin = AdminClient(conf("admin"))
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
    deny = AclBinding(
        ResourceType.BROKER,
        "kafka-cluster",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    admin.create_acls([deny])[deny].result(30)
    alice = AdminClient(conf("alice"))
    with pytest.raises(KafkaException) as denied:
        alice.elect_leaders(ElectionType.PREFERRED, [TopicPartition("t", 0)]).result(30)
    assert denied.value.args[0].code() == 31  # CLUSTER_AUTHORIZATION_FAILED
    kp = KafkaAdminClient(
        bootstrap_servers=server.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    with pytest.raises(ClusterAuthorizationFailedError):
        kp.list_partition_reassignments()
    kp.close()
    assert "Traceback" not in server.log_text()


def test_any_election_or_reassignment_is_answered_with_kafka_codes(cluster):
    """Whatever election type, topics, partitions and replicas the requests carry, each is
    answered (no closed connection) with the controller's error codes."""
    import datetime

    from hypothesis import HealthCheck, given, settings, strategies as st

    TP = request_class(ELECT, 2, "TopicPartitions")
    P, T = request_class(ALTER, 1, "ReassignablePartition"), request_class(ALTER, 1, "ReassignableTopic")
    timeout = datetime.timedelta(seconds=5)
    topics = st.sampled_from(["t", "nope", "", "__consumer_offsets"])
    partitions = st.integers(-1, 3) | st.integers(-(2**31), 2**31 - 1)
    replicas = st.none() | st.lists(st.integers(-1, 4) | st.integers(-(2**31), 2**31 - 1), max_size=4)
    expected = {
        NONE,
        UNKNOWN_TOPIC,
        INVALID_REQUEST,
        PREFERRED_LEADER_NOT_AVAILABLE,
        ELECTION_NOT_NEEDED,
        83,
        INVALID_REPLICA_ASSIGNMENT,
        INVALID_REPLICATION_FACTOR,
        NO_REASSIGNMENT,
    }

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        election=st.integers(-128, 127) | st.sampled_from([0, 1]),
        named=st.none() | st.lists(st.tuples(topics, st.lists(partitions, max_size=3)), max_size=2),
        moves=st.lists(st.tuples(topics, partitions, replicas), max_size=3),
        allow=st.booleans(),
    )
    def check(election, named, moves, allow):
        r = _wire(
            cluster,
            ELECT,
            2,
            request_class(ELECT, 2)(
                election_type=election,
                timeout=timeout,
                topic_partitions=None if named is None else tuple(TP(topic=t, partitions=tuple(ps)) for t, ps in named),
            ),
        )
        codes = {r.error_code} | {p.error_code for x in r.replica_election_results for p in x.partition_result}
        assert codes <= expected, codes
        r = _wire(
            cluster,
            ALTER,
            1,
            request_class(ALTER, 1)(
                timeout=timeout,
                allow_replication_factor_change=allow,
                topics=tuple(
                    T(name=t, partitions=(P(partition_index=p, replicas=None if rs is None else tuple(rs)),))
                    for t, p, rs in moves
                ),
            ),
        )
        codes = {r.error_code} | {p.error_code for x in r.responses for p in x.partitions}
        assert codes <= expected, codes

    check()


@pytest.mark.parametrize("subprocess", [False, True])
def test_placement_outlives_a_restart(tmp_path, subprocess):
    """Moved leaders, completed and in-progress reassignments and a moved coordinator are
    kept as Kafka's controller keeps its PartitionRegistrations: a restarted cluster reports
    the same replicas, leaders and leader epochs in Metadata (epochs never go backwards),
    and a reassignment that waited for a stopped broker completes once every broker runs."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    def placement(cluster):
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            described = admin.describe_topics(["t", "__consumer_offsets"])
            return {
                (t["name"], p["partition_index"]): (p["leader_id"], p["leader_epoch"], p["replica_nodes"])
                for t in described
                for p in t["partitions"]
            }
        finally:
            admin.close()

    data = tmp_path / "d"
    with Cluster(brokers=3, data_dir=data, subprocess=subprocess, offsets_partitions=2) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.create_topics([NewTopic("t", 3, 2)])
        first = placement(cluster)
        cluster.move_leader("t", 0)  # within the replicas: epoch 1
        outside = next(n for n in cluster.node_ids if n not in first[("t", 1)][2])
        assert admin.alter_partition_reassignments({TopicPartition("t", 1): [outside]}) == {
            TopicPartition("t", 1): None
        }
        moved_to = cluster.move_coordinator("g")
        # partition 2 waits for a stopped broker: in progress over the restart
        waiting = next(n for n in cluster.node_ids if n not in first[("t", 2)][2])
        cluster.stop_broker(waiting)
        admin.close()  # (it may have chosen the stopped broker as its controller)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        target = [waiting, first[("t", 2)][2][0]]
        assert admin.alter_partition_reassignments({TopicPartition("t", 2): target}) == {TopicPartition("t", 2): None}
        assert TopicPartition("t", 2) in admin.list_partition_reassignments()
        admin.close()
        cluster.start_broker(waiting)  # (running, so Metadata lists it for the comparison)
        before = placement(cluster)
    assert before[("t", 0)][1] >= 1 and before[("t", 1)][2] == [outside]
    with Cluster(brokers=3, data_dir=data, subprocess=subprocess, offsets_partitions=2) as cluster:
        after = placement(cluster)
        assert after == before
        assert cluster.coordinator_of("g") == moved_to and cluster.leader_of("t", 1) == outside
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        assert admin.list_partition_reassignments() == {}  # every broker runs: it completed
        admin.close()
        done = placement(cluster)
        assert done[("t", 2)][2] == target and done[("t", 2)][1] >= before[("t", 2)][1]
    # once more: the completed reassignment was kept too
    with Cluster(brokers=3, data_dir=data, subprocess=subprocess, offsets_partitions=2) as cluster:
        assert placement(cluster) == done
