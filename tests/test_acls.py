"""ACLs with real clients over SASL: confluent-kafka's admin API creates, describes and
deletes them; consumers and producers are denied and allowed per group and topic with
Kafka's errors; DENY beats ALLOW, PREFIXED patterns, super users, ACLs kept across a restart."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.support.acls import (
    ALL,
    CLUSTER,
    CREATE_ACLS,
    DESCRIBE,
    GROUP,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    create_acls_body,
)
from tests.support.process import wait_for


@pytest.fixture
def secured(server_factory, tmp_path):
    users = tmp_path / "users.txt"
    users.write_text("admin:admin-secret\nalice:alice-secret\nbob:bob-secret\n")
    return server_factory(
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


def conf(server, user: str) -> dict:
    return {
        "bootstrap.servers": server.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def acl(rtype, name, principal, op, permission=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL):
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def commit_as(server, user: str, group: str, topic: str) -> KafkaError | None:
    """The error of a synchronous commit of offset 1 on topic-0 for this group, or None."""
    c = Consumer({**conf(server, user), "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        return None
    except KafkaException as e:
        return e.args[0]
    finally:
        c.close()


def test_acls_deny_and_allow_groups_and_topics(secured):
    admin = AdminClient(conf(secured, "admin"))
    for f in admin.create_topics(
        [NewTopic("orders", 1, 1), NewTopic("secret", 1, 1), NewTopic("app-x", 1, 1)]
    ).values():
        f.result(15)
    # No ACL names a resource yet: open (allow.everyone.if.no.acl.found, the default).
    assert commit_as(secured, "alice", "g1", "orders") is None
    bindings = [
        acl(ResourceType.GROUP, "g1", "User:alice", AclOperation.READ),
        acl(ResourceType.TOPIC, "orders", "User:alice", AclOperation.READ),
        acl(ResourceType.TOPIC, "orders", "User:alice", AclOperation.WRITE),
        acl(ResourceType.TOPIC, "secret", "User:bob", AclOperation.ALL),
        acl(ResourceType.TOPIC, "app-", "User:alice", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.GROUP, "g1", "User:*", AclOperation.READ, AclPermissionType.DENY),
        acl(ResourceType.GROUP, "g2", "User:alice", AclOperation.READ),
        acl(ResourceType.BROKER, "kafka-cluster", "User:ops", AclOperation.DESCRIBE),  # the cluster: not alice's
    ]
    for f in admin.create_acls(bindings).values():
        f.result(15)
    described = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
        )
    ).result(15)
    assert sorted(map(str, described)) == sorted(map(str, bindings))
    # DENY wins over ALLOW; a group with only someone else's ACLs is closed to alice
    assert commit_as(secured, "alice", "g1", "orders").code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert commit_as(secured, "alice", "g2", "orders") is None
    assert commit_as(secured, "alice", "g3", "orders") is None  # no ACL names g3
    error = commit_as(secured, "alice", "g2", "secret")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert commit_as(secured, "alice", "g2", "app-x") is None  # PREFIXED app-
    assert commit_as(secured, "admin", "g1", "secret") is None  # a super user
    # produce: allowed to orders, denied on secret
    p = Producer(conf(secured, "alice"))
    results = {}
    for topic in ("orders", "secret"):
        p.produce(topic, b"v", partition=0, on_delivery=lambda err, msg: results.__setitem__(msg.topic(), err))
    p.flush(15)
    assert results["orders"] is None and results["secret"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # metadata lists only what alice may describe
    topics = AdminClient(conf(secured, "alice")).list_topics(timeout=10).topics
    assert "orders" in topics and "app-x" in topics and "secret" not in topics
    # alice may not manage ACLs (CLUSTER ALTER / DESCRIBE: some ACL names the cluster, none for her)
    alice_admin = AdminClient(conf(secured, "alice"))  # (kept: a collected client fails its futures)
    with pytest.raises(KafkaException) as raised:
        for f in alice_admin.create_acls([acl(ResourceType.GROUP, "g9", "User:alice", AclOperation.ALL)]).values():
            f.result(15)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # deleting the DENY opens g1 to alice again; ACLs survive a restart
    deleted = admin.delete_acls(
        [
            AclBindingFilter(
                ResourceType.GROUP,
                "g1",
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.DENY,
            )
        ]
    )
    assert [str(b) for f in deleted.values() for b in f.result(15)] == [str(bindings[5])]
    secured.restart()
    admin = AdminClient(conf(secured, "admin"))
    after = wait_for(
        lambda: admin.describe_acls(
            AclBindingFilter(
                ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
            )
        ).result(15),
        what="ACLs after the restart",
    )
    assert sorted(map(str, after)) == sorted(map(str, bindings[:5] + bindings[6:]))
    assert commit_as(secured, "alice", "g1", "orders") is None


def test_invalid_acls_and_no_authorizer(server_factory, secured):
    admin = AdminClient(conf(secured, "admin"))
    bad = admin.create_acls(
        [
            AclBinding(
                ResourceType.BROKER,
                "not-the-cluster",
                ResourcePatternType.LITERAL,
                "User:alice",
                "*",
                AclOperation.ALTER,
                AclPermissionType.ALLOW,
            )
        ]
    )
    with pytest.raises(KafkaException) as raised:
        list(bad.values())[0].result(15)
    assert raised.value.args[0].code() == KafkaError.INVALID_REQUEST
    plain = server_factory()  # no --authorizer: the ACL APIs say so
    plain_admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    with pytest.raises(KafkaException) as raised:
        for f in plain_admin.create_acls([acl(ResourceType.GROUP, "g", "User:alice", AclOperation.READ)]).values():
            f.result(15)
    assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED


async def test_describe_acls_errors_over_raw_frames(server_factory):
    """DescribeAcls answers its error at the top level (librdkafka's describe_acls does not
    surface it, so this is checked on the wire): CLUSTER_AUTHORIZATION_FAILED for a
    principal without DESCRIBE on the cluster, SECURITY_DISABLED without --authorizer."""
    from tests.support.wire_client import WireClient, request_class as rc

    def describe_body():
        return rc(29, 3)(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )

    s = server_factory("--authorizer")
    c = await WireClient("acl-wire").connect("127.0.0.1", s.port)
    # the cluster named by an ACL (ops may DESCRIBE it): ANONYMOUS no longer passes
    r = await c.request(CREATE_ACLS, 3, create_acls_body((CLUSTER, "kafka-cluster", "User:ops", DESCRIBE)))
    assert r.results[0].error_code == 0
    assert (await c.request(29, 3, describe_body())).error_code == 31
    await c.close()
    plain = server_factory()
    c = await WireClient("acl-wire").connect("127.0.0.1", plain.port)
    assert (await c.request(29, 3, describe_body())).error_code == 54
    await c.close()


async def test_every_checked_api_answers_its_error_on_the_wire(server_factory):
    """Kafka's error where each API is denied, for a principal (ANONYMOUS) that the ACLs do
    not name while they name every resource (so allow.everyone.if.no.acl.found does not apply)."""
    import datetime

    from tests.support.wire_client import WireClient, request_class as rc
    from coordinator.apis import build

    s = server_factory("--authorizer")
    c = await WireClient("acl-wire").connect("127.0.0.1", s.port)
    await c.create_topics("t", "u", partitions=1)
    (t_id,) = [
        t.topic_id
        for t in (
            await c.request(
                3,
                12,
                build(
                    rc(3, 12),
                    dict(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                ),
            )
        ).topics
        if t.name == "t"
    ]
    names = [(TOPIC, "t"), (GROUP, "g"), (TRANSACTIONAL_ID, "tx"), (CLUSTER, "kafka-cluster")]
    acls = [(kind, name, "User:other", ALL) for kind, name in names]
    acls += [(GROUP, "g2", "User:ANONYMOUS", READ), (TOPIC, "u", "User:ANONYMOUS", READ)]  # for the v10 commits below
    r = await c.request(CREATE_ACLS, 3, create_acls_body(*acls))
    assert [x.error_code for x in r.results] == [0] * 6

    async def call(api, v, **values):
        return await c.request(api, v, build(rc(api, v), values))

    def nested(api, v, entity, /, **values):
        return build(rc(api, v, entity), values)

    ms = datetime.timedelta(milliseconds=1)
    r = await call(
        32,
        4,
        resources=(
            nested(32, 4, "DescribeConfigsResource", resource_type=2, resource_name="t", configuration_keys=None),
            nested(32, 4, "DescribeConfigsResource", resource_type=4, resource_name="1", configuration_keys=None),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    assert [x.error_code for x in r.results] == [29, 31]
    r = await call(
        21,
        2,
        topics=(
            nested(
                21,
                2,
                "DeleteRecordsTopic",
                name="t",
                partitions=(nested(21, 2, "DeleteRecordsPartition", partition_index=0, offset=0),),
            ),
        ),
        timeout=1000 * ms,
    )
    assert r.topics[0].partitions[0].error_code == 29
    r = await call(
        37,
        3,
        topics=(nested(37, 3, "CreatePartitionsTopic", name="t", count=2, assignments=None),),
        timeout=1000 * ms,
        validate_only=True,
    )
    assert r.results[0].error_code == 29
    r = await call(47, 0, group_id="g", topics=())
    assert r.error_code == 30
    r = await call(
        19,
        7,
        topics=(
            nested(
                19, 7, "CreatableTopic", name="t", num_partitions=1, replication_factor=-1, assignments=(), configs=()
            ),
            nested(
                19,
                7,
                "CreatableTopic",
                name="fresh",
                num_partitions=1,
                replication_factor=-1,
                assignments=(),
                configs=(),
            ),
        ),
        timeout=1000 * ms,
        validate_only=True,
    )
    assert [(t.name, t.error_code) for t in r.topics] == [("t", 29), ("fresh", 0)]  # no ACL names "fresh"
    r = await call(60, 1, include_cluster_authorized_operations=False, endpoint_type=1)
    assert r.error_code == 31
    r = await call(69, 1, group_ids=("g",), include_authorized_operations=False)
    assert r.groups[0].error_code == 30
    from tests.support.streams import describe_body, shb, subtopology, topology

    r = await c.request(88, 1, shb("g", "m", 0, topology(subtopology("0", sources=("u",)))))
    assert (r.error_code, r.member_id, r.status) == (30, "", ())  # READ on the group
    r = await c.request(88, 1, shb("g2", "m", 0, topology(subtopology("0", sources=("t",)))))
    assert r.error_code == 29  # DESCRIBE on the topology's topics
    r = await c.request(89, 1, describe_body("g"))
    assert r.groups[0].error_code == 30
    r = await call(10, 4, key_type=0, coordinator_keys=("g",))
    assert r.coordinators[0].error_code == 30
    r = await call(10, 4, key_type=1, coordinator_keys=("tx",))
    assert r.coordinators[0].error_code == 53
    r = await call(22, 4, transactional_id="tx", transaction_timeout=60000 * ms, producer_id=-1, producer_epoch=-1)
    assert r.error_code == 53
    r = await call(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert r.error_code == 30
    r = await call(
        2,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=(
            nested(
                2,
                7,
                "ListOffsetsTopic",
                name="t",
                partitions=(
                    nested(2, 7, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),
                ),
            ),
        ),
    )
    assert r.topics[0].partitions[0].error_code == 29
    r = await call(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert "t" not in [t.name for t in r.topics]  # all topics: hidden
    r = await call(3, 1, topics=(nested(3, 1, "MetadataRequestTopic", name="t"),))
    assert [(t.name, t.error_code) for t in r.topics] == [("t", 29)]  # named: said

    # OffsetCommit / OffsetFetch v10 name topics by id: authorized by the names they resolve to.
    import uuid

    meta = await call(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    u_id, nowhere = {t.name: t.topic_id for t in meta.topics}["u"], uuid.uuid4()
    r = await call(
        8,
        10,
        group_id="g2",
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=tuple(
            nested(
                8,
                10,
                "OffsetCommitRequestTopic",
                topic_id=i,
                partitions=(
                    nested(
                        8,
                        10,
                        "OffsetCommitRequestPartition",
                        partition_index=0,
                        committed_offset=5,
                        committed_metadata=None,
                    ),
                ),
            )
            for i in (t_id, u_id, nowhere)
        ),
    )
    # (what KafkaApis refuses itself comes before the coordinator's answers, as Kafka's)
    assert [(t.topic_id, t.partitions[0].error_code) for t in r.topics] == [(t_id, 29), (nowhere, 100), (u_id, 0)]
    r = await call(
        9,
        10,
        require_stable=False,
        groups=(
            nested(
                9,
                10,
                "OffsetFetchRequestGroup",
                group_id="g2",
                topics=tuple(
                    nested(9, 10, "OffsetFetchRequestTopics", topic_id=i, partition_indexes=(0,)) for i in (t_id, u_id)
                ),
            ),
        ),
    )
    assert [(t.topic_id, t.partitions[0].committed_offset, t.partitions[0].error_code) for t in r.groups[0].topics] == [
        (t_id, -1, 29),
        (u_id, 5, 0),
    ]
    await c.close()


def test_acl_apis_v0_for_older_admin_clients(server_factory):
    """CreateAcls / DescribeAcls / DeleteAcls v0 (v1 without pattern types; Kafka 4 dropped
    them, older admin clients still send them: a server that behaves as Kafka 3.9), over raw frames."""
    import socket
    import struct

    s = server_factory("--authorizer", "--kafka-version", "3.9")

    def string(v):
        return struct.pack(">h", -1) if v is None else struct.pack(">h", len(v)) + v.encode()

    def call(api, body):
        header = struct.pack(">hhi", api, 0, 7) + string("v0-admin")
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
                data += c.recv(65536)
        return data[8:]  # after size and correlation id

    acl_filter = struct.pack(">b", 1) + string(None) + string(None) + string(None) + struct.pack(">bb", 1, 1)
    body = call(
        30, struct.pack(">ib", 1, 3) + string("g") + string("User:alice") + string("*") + struct.pack(">bb", 3, 3)
    )
    assert struct.unpack_from(">iih", body) == (0, 1, 0)  # throttle, one result, NONE
    body = call(29, acl_filter)
    throttle, error = struct.unpack_from(">ih", body)
    assert error == 0
    pos = 6 + 2  # error message: null
    (n,) = struct.unpack_from(">i", body, pos)
    kind, name_len = struct.unpack_from(">bh", body, pos + 4)
    name = body[pos + 7 : pos + 7 + name_len].decode()
    assert (n, kind, name) == (1, 3, "g")  # one GROUP resource "g", no pattern type in v0
    body = call(31, struct.pack(">i", 1) + acl_filter)
    throttle, n, error = struct.unpack_from(">iih", body)
    assert (n, error) == (1, 0) and struct.unpack_from(">i", body, 12)[0] == 1  # one ACL deleted
    body = call(29, acl_filter)
    assert struct.unpack_from(">ihhi", body) == (0, 0, -1, 0)  # none left


async def test_denied_entries_answered_beside_the_served_ones(server_factory):
    """Where a request names several topics, the denied ones are left out of what the handler
    serves and answered TOPIC_AUTHORIZATION_FAILED where Kafka puts them: after the served ones
    (Produce, Fetch, DeleteTopics, TxnOffsetCommit) or in the request's order (DescribeProducers)."""
    import datetime

    from coordinator.apis import build
    from tests.support.consumer_groups import topic_ids
    from tests.support.wire_client import WireClient, request_class as rc

    s = server_factory("--authorizer")
    c = await WireClient("acl-merge").connect("127.0.0.1", s.port)
    await c.create_topics("t", "u", partitions=1)
    ids = await topic_ids(c, "t", "u")  # (before "t" is denied: Metadata would hide its id)
    r = await c.request(CREATE_ACLS, 3, create_acls_body((TOPIC, "t", "User:other", ALL)))
    assert [x.error_code for x in r.results] == [0]  # ("u" no ACL names: open)

    async def call(api, v, **values):
        return await c.request(api, v, build(rc(api, v), values))

    def nested(api, v, entity, /, **values):
        return build(rc(api, v, entity), values)

    ms = datetime.timedelta(milliseconds=1)
    r = await call(
        0,
        9,
        transactional_id=None,
        acks=1,
        timeout=1000 * ms,
        topic_data=tuple(
            nested(
                0,
                9,
                "TopicProduceData",
                name=n,
                partition_data=(nested(0, 9, "PartitionProduceData", index=0, records=None),),
            )
            for n in ("t", "u")
        ),
    )
    assert [(t.name, t.partition_responses[0].error_code == 29) for t in r.responses] == [("u", False), ("t", True)]

    def fetch_both(v: int, name: str) -> Any:
        """Fetch v`v` of partition 0 of t and u, each named by `name` (topic or topic_id)."""

        def topic(n: str) -> Any:
            partition = nested(
                1, v, "FetchPartition", partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1024
            )
            return nested(1, v, "FetchTopic", partitions=(partition,), **{name: n if name == "topic" else ids[n]})

        return call(
            1,
            v,
            replica_id=-1,
            max_wait=0 * ms,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=tuple(topic(n) for n in ("t", "u")),
            forgotten_topics_data=(),
            rack_id="",
        )

    r = await fetch_both(12, "topic")
    assert [(t.topic, t.partitions[0].error_code) for t in r.responses] == [("u", 0), ("t", 29)]
    # v13 names topics by id (librdkafka's consumer): the denied one's row has its id and no name
    r = await fetch_both(13, "topic_id")
    assert [(t.topic_id, t.partitions[0].error_code) for t in r.responses] == [(ids["u"], 0), (ids["t"], 29)]
    r = await call(
        61,
        0,
        topics=tuple(nested(61, 0, "TopicRequest", name=n, partition_indexes=(0,)) for n in ("t", "u")),
    )
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [("t", 29), ("u", 0)]
    r = await call(20, 4, topic_names=("t", "nowhere"), timeout=1000 * ms)
    assert [(t.name, t.error_code) for t in r.responses] == [("nowhere", 3), ("t", 29)]
    r = await call(3, 1, topics=(nested(3, 1, "MetadataRequestTopic", name="t"),))
    assert [(t.name, t.error_code) for t in r.topics] == [("t", 29)]  # not deleted
    # OffsetFetch: a topic named and denied has its partitions failed; a group denied, the group
    r = await call(
        9, 7, group_id="g", topics=(nested(9, 7, "OffsetFetchRequestTopic", name="t", partition_indexes=(0,)),)
    )
    assert (r.error_code, [(t.name, t.partitions[0].error_code) for t in r.topics]) == (0, [("t", 29)])
    await c.request(CREATE_ACLS, 3, create_acls_body((GROUP, "gx", "User:other", ALL)))
    r = await call(
        9,
        8,
        require_stable=False,
        groups=tuple(
            nested(
                9,
                8,
                "OffsetFetchRequestGroup",
                group_id=g,
                topics=(nested(9, 8, "OffsetFetchRequestTopics", name="t", partition_indexes=(0,)),),
            )
            for g in ("gx", "g")
        ),
    )
    assert [(g.group_id, g.error_code, [t.partitions[0].error_code for t in g.topics]) for g in r.groups] == [
        ("gx", 30, []),
        ("g", 0, [29]),
    ]
    await c.close()


async def test_denied_groups_before_or_after_the_coordinators_answers(server_factory):
    """DescribeGroups answers the denied groups first and DeleteGroups last, around the
    coordinator's answers in its partitions' order, where Kafka's KafkaApis puts them."""
    from coordinator.apis import build
    from tests.support.wire_client import WireClient, request_class as rc

    s = server_factory("--authorizer")
    c = await WireClient("acl-groups").connect("127.0.0.1", s.port)
    r = await c.request(CREATE_ACLS, 3, create_acls_body((GROUP, "denied", "User:other", ALL)))
    assert [x.error_code for x in r.results] == [0]
    open_groups = ["oracle-order-alpha", "oracle-order-beta", "oracle-order-gamma"]  # (partitions 2, 10, 49)

    async def describe(groups):
        body = await c.request(
            15, 5, build(rc(15, 5), {"groups": tuple(groups), "include_authorized_operations": False})
        )
        return [(g.group_id, g.error_code) for g in body.groups]

    served = await describe(open_groups)
    assert [g for g, _ in served] != open_groups  # (Kafka's order is not the request's)
    assert await describe([open_groups[0], "denied", *open_groups[1:]]) == [("denied", 30), *served]
    deleted = await c.request(42, 2, build(rc(42, 2), {"groups_names": (open_groups[0], "denied", *open_groups[1:])}))
    assert [(g.group_id, g.error_code) for g in deleted.results] == [(g, 69) for g, _ in served] + [("denied", 30)]
    await c.close()
