"""CreateTopics and CreatePartitions honour an explicit replica assignment on three brokers, as
Kafka's controller does, and refuse a bad one with its errors and messages
(ReplicationControlManager): over real sockets, brokers in this process."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from coordinator.testing import Cluster
from tests.support.wire_client import WireClient, request_class

CREATE_TOPICS, CREATE_PARTITIONS, METADATA = 19, 37, 3
NONE, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST = 0, 37, 39, 42
SECONDS = datetime.timedelta(seconds=5)


@pytest.fixture(scope="module")
def cluster():
    with Cluster(brokers=3) as c:
        yield c


def _run(cluster: Cluster, work):
    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)

    async def call():
        conn = await WireClient("assignments").connect(host, int(port))
        try:
            return await work(conn)
        finally:
            await conn.close()

    return asyncio.run(call())


def _topic(name: str, assignments: dict[int, list[int]], partitions: int = -1, rf: int = -1):
    a = request_class(CREATE_TOPICS, 7, "CreatableReplicaAssignment")
    return request_class(CREATE_TOPICS, 7, "CreatableTopic")(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=tuple(a(partition_index=p, broker_ids=tuple(b)) for p, b in assignments.items()),
        configs=(),
    )


async def _create(conn, *topics, validate_only: bool = False):
    r = await conn.request(
        CREATE_TOPICS, 7, request_class(CREATE_TOPICS, 7)(topics=topics, timeout=SECONDS, validate_only=validate_only)
    )
    return [(t.name, t.error_code, t.error_message, t.num_partitions, t.replication_factor) for t in r.topics]


async def _placement(conn, name: str):
    t = request_class(METADATA, 12, "MetadataRequestTopic")
    r = await conn.request(
        METADATA,
        12,
        request_class(METADATA, 12)(
            topics=(t(topic_id=None, name=name),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    return [(p.partition_index, list(p.replica_nodes), p.leader_id) for p in r.topics[0].partitions]


async def _add(conn, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool = False):
    a = request_class(CREATE_PARTITIONS, 3, "CreatePartitionsAssignment")
    topic = request_class(CREATE_PARTITIONS, 3, "CreatePartitionsTopic")(
        name=name,
        count=count,
        assignments=None if assignments is None else tuple(a(broker_ids=tuple(b)) for b in assignments),
    )
    r = await conn.request(
        CREATE_PARTITIONS,
        3,
        request_class(CREATE_PARTITIONS, 3)(topics=(topic,), timeout=SECONDS, validate_only=validate_only),
    )
    return r.results[0].error_code, r.results[0].error_message


def test_create_topics_places_partitions_as_assigned(cluster):
    async def work(conn):
        # validate-only: answered as the creation would be, nothing created
        assert await _create(conn, _topic("m-dry", {0: [2, 3]}), validate_only=True) == [("m-dry", NONE, None, 1, 2)]
        assert await _create(conn, _topic("m", {1: [3, 1], 0: [2, 3], 2: [1, 2]})) == [("m", NONE, None, 3, 2)]
        assert await _placement(conn, "m") == [(0, [2, 3], 2), (1, [3, 1], 3), (2, [1, 2], 1)]
        assert await _placement(conn, "m-dry") == []
        # more partitions: placed as assigned, checked against the topic's replication factor
        assert await _add(conn, "m", 5, [[3, 2], [1, 3]]) == (NONE, None)
        assert (await _placement(conn, "m"))[3:] == [(3, [3, 2], 3), (4, [1, 3], 1)]
        assert await _add(conn, "m", 6, None) == (NONE, None)  # (null: the default placement)
        assert len(await _placement(conn, "m")) == 6

    _run(cluster, work)


def test_bad_assignments_get_kafkas_errors(cluster):
    manual = "A manual partition assignment was specified, but"
    cases = [
        (_topic("b1", {0: [1, 2]}, partitions=1), INVALID_REQUEST, f"{manual} numPartitions was not set to -1."),
        (_topic("b2", {0: [1, 2]}, rf=2), INVALID_REQUEST, f"{manual} replication factor was not set to -1."),
        (
            _topic("b3", {0: [1], 2: [2]}),
            INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            _topic("b4", {0: []}),
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            _topic("b5", {0: [1, 7]}),
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
        (
            _topic("b6", {0: [2, 1, 2]}),
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 2 more than once.",
        ),
        (
            _topic("b7", {0: [1, 2], 1: [3]}),
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent"
            " with previous partitions, which have 2 replica(s).",
        ),
    ]

    async def work(conn):
        for topic, error, message in cases:
            assert await _create(conn, topic) == [(topic.name, error, message, -1, -1)], topic.name
            assert await _placement(conn, topic.name) == []  # nothing created
        # the same partition twice (built by hand: a dict cannot say it)
        twice = _topic("b8", {0: [1]})
        twice = type(twice)(
            **{
                **{f: getattr(twice, f) for f in ("name", "num_partitions", "replication_factor", "configs")},
                "assignments": twice.assignments * 2,
            }
        )
        assert await _create(conn, twice) == [
            ("b8", INVALID_REPLICA_ASSIGNMENT, "Found multiple manual partition assignments for partition 0", -1, -1)
        ]
        assert (await _create(conn, _topic("p", {0: [1, 2], 1: [2, 3]})))[0][1] == NONE
        assert await _add(conn, "p", 4, [[1, 2]]) == (
            INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        )
        assert await _add(conn, "p", 3, [[1, 2, 3]]) == (
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes a partition with 3 replica(s), but this is not consistent"
            " with previous partitions, which have 2 replica(s).",
        )
        assert await _add(conn, "p", 3, [[4, 1]]) == (
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 4, but no such broker is registered.",
        )
        assert await _add(conn, "p", 3, [[3, 1]], validate_only=True) == (NONE, None)
        assert len(await _placement(conn, "p")) == 2  # (nothing added by a refusal or a validation)

    _run(cluster, work)


def test_an_assignment_of_stopped_brokers_only_is_refused(cluster):
    cluster.stop_broker(3)
    try:

        async def work(conn):
            assert await _create(conn, _topic("f", {0: [3]})) == [
                (
                    "f",
                    INVALID_REPLICA_ASSIGNMENT,
                    "All brokers specified in the manual partition assignment for partition 0 are fenced or in"
                    " controlled shutdown.",
                    -1,
                    -1,
                )
            ]
            assert await _create(conn, _topic("g", {0: [3, 2]})) == [("g", NONE, None, 1, 2)]
            assert await _placement(conn, "g") == [(0, [3, 2], 2)]  # (led by the live one)

        _run(cluster, work)
    finally:
        cluster.start_broker(3)
