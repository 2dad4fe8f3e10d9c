"""controller_mutation_rate (KIP-599) as Kafka's ControllerMutationQuotaManager enforces it:
strict for CreateTopics v6+, DeleteTopics v5+ and CreatePartitions v3+ (THROTTLING_QUOTA_EXCEEDED
per topic once the token bucket is in debt), permissive before (the mutation passes, the answer
is throttled); over the wire and with confluent-kafka's admin client."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.data_plane import MS, cls
from tests.support.wire_client import WireClient
from tests.support.quotas import alter

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
NONE, INVALID_REQUEST, THROTTLING_QUOTA_EXCEEDED = 0, 42, 89


async def connect(server, client_id):
    return await WireClient(client_id).connect("127.0.0.1", server.port)


async def create_topic(server, client_id, name, partitions, v=7):
    """One CreateTopics on a fresh connection (the previous one may be muted) -> (error, throttle)."""
    conn = await connect(server, client_id)
    try:
        T = cls(CREATE_TOPICS, v, "CreatableTopic")
        r = await conn.request(
            CREATE_TOPICS,
            v,
            cls(CREATE_TOPICS, v)(
                topics=(T(name=name, num_partitions=partitions, replication_factor=-1, assignments=(), configs=()),),
                timeout=5000 * MS,
                validate_only=False,
            ),
        )
        return r.topics[0].error_code, round(r.throttle_time.total_seconds() * 1000)
    finally:
        await conn.close()


async def delete_topic(server, client_id, name, v):
    conn = await connect(server, client_id)
    try:
        if v >= 6:
            T = cls(DELETE_TOPICS, v, "DeleteTopicState")
            req = cls(DELETE_TOPICS, v)(topics=(T(name=name, topic_id=None),), timeout=5000 * MS)
        else:
            req = cls(DELETE_TOPICS, v)(topic_names=(name,), timeout=5000 * MS)
        r = await conn.request(DELETE_TOPICS, v, req)
        return r.responses[0].error_code, round(r.throttle_time.total_seconds() * 1000)
    finally:
        await conn.close()


async def create_partitions(server, client_id, name, count, v):
    conn = await connect(server, client_id)
    try:
        T = cls(CREATE_PARTITIONS, v, "CreatePartitionsTopic")
        r = await conn.request(
            CREATE_PARTITIONS,
            v,
            cls(CREATE_PARTITIONS, v)(
                topics=(T(name=name, count=count, assignments=None),), timeout=5000 * MS, validate_only=False
            ),
        )
        return r.results[0].error_code, round(r.throttle_time.total_seconds() * 1000)
    finally:
        await conn.close()


async def set_rate(server, client_id, rate):
    conn = await connect(server, "quota-admin")
    try:
        assert await alter(conn, [([("client-id", client_id)], [("controller_mutation_rate", rate)])]) == [(0, None)]
    finally:
        await conn.close()


async def test_create_topics_strict_and_permissive(server):
    # 1 partition/s over 11 one-second samples: a burst of 11 partitions
    await set_rate(server, "mut", 1)
    assert await create_topic(server, "mut", "small", 3) == (NONE, 0)
    error, throttle = await create_topic(server, "mut", "big", 20)  # may take the bucket into debt
    assert error == NONE and throttle > 0
    error, throttle = await create_topic(server, "mut", "refused", 1)  # strict: v6+
    assert error == THROTTLING_QUOTA_EXCEEDED and throttle > 0
    error, throttle = await create_topic(server, "mut", "permitted", 1, v=5)  # permissive before v6
    assert error == NONE and throttle > 0
    # another client id is not held to this quota
    assert await create_topic(server, "other", "free", 30) == (NONE, 0)


async def test_delete_topics_and_create_partitions(server):
    assert await create_topic(server, "setup", "doomed", 20) == (NONE, 0)
    assert await create_topic(server, "setup", "kept", 2) == (NONE, 0)
    assert await create_topic(server, "setup", "grown", 1) == (NONE, 0)
    await set_rate(server, "mut", 1)
    error, throttle = await delete_topic(server, "mut", "doomed", v=6)
    assert error == NONE and throttle > 0
    assert (await delete_topic(server, "mut", "kept", v=5))[0] == THROTTLING_QUOTA_EXCEEDED
    assert (await create_partitions(server, "mut", "grown", 4, v=3))[0] == THROTTLING_QUOTA_EXCEEDED
    error, throttle = await create_partitions(server, "mut", "grown", 4, v=2)  # permissive
    assert error == NONE and throttle > 0
    error, throttle = await delete_topic(server, "mut", "kept", v=4)  # permissive
    assert error == NONE and throttle > 0
    # errors Kafka finds before the quota still come first
    assert (await delete_topic(server, "mut", "missing", v=5))[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION


async def test_bad_values(server):
    conn = await connect(server, "quota-admin")
    try:
        results = await alter(
            conn,
            [
                ([("client-id", "a")], [("controller_mutation_rate", -1)]),
                ([("client-id", "b")], [("controller_mutation_rate", 0)]),
                ([("ip", "127.0.0.1")], [("controller_mutation_rate", 5)]),
            ],
        )
        assert [e for e, _ in results] == [INVALID_REQUEST] * 3
    finally:
        await conn.close()


async def test_confluent_admin_is_throttled(server):
    await set_rate(server, "rated-admin", 1)
    admin = AdminClient({"bootstrap.servers": server.bootstrap, "client.id": "rated-admin"})
    admin.create_topics([NewTopic("first", 20)])["first"].result(30)
    try:
        admin.create_topics([NewTopic("second", 1)], operation_timeout=5)["second"].result(30)
    except KafkaException as e:  # a client that speaks CreateTopics v6+ sees the strict quota
        assert e.args[0].code() == THROTTLING_QUOTA_EXCEEDED
    else:  # an older one is let through and throttled
        assert "second" in admin.list_topics(timeout=30).topics
