"""The error answer to any request (protocol/error_response.py, Kafka's getErrorResponse):
for every API and version the server registers, built from random requests as the server
decodes them, it encodes; it decodes again, both by kio and by kafka-python's own parser
(Kafka's JSON schemas, read independently); every error field carries the error; the
entries the request named are answered one by one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import io
import typing
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records

from coordinator.config import parse_args
from coordinator.server import Server
from protocol.error_messages import DEFAULT_MESSAGES
from protocol.error_response import error_message, error_response
from protocol.ahead import AHEAD
from protocol.legacy import LEGACY
from protocol.messages import _strip_optional, codec, decode_body, encode_body


ERROR = ErrorCode.not_coordinator


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> list[tuple[int, int]]:
    """(api key, version) for every API a started server registers (SASL's on every listener)."""
    server = Server(parse_args(["--port", "0", "--data-dir", str(tmp_path_factory.mktemp("data"))]))

    async def run() -> list[tuple[int, int]]:
        await server.start()
        try:
            return sorted(
                {(a.key, v) for a in server.registry.apis.values() for v in range(a.min_version, a.max_version + 1)}
            )
        finally:
            await server.stop()

    return asyncio.run(run())


def kafka_python_response(api_key: int, version: int):
    import kafka.protocol.admin  # noqa: F401 (each module registers its response classes)
    import kafka.protocol.consumer  # noqa: F401
    import kafka.protocol.metadata  # noqa: F401
    import kafka.protocol.producer  # noqa: F401
    import kafka.protocol.sasl  # noqa: F401
    from kafka.protocol.api_header import ResponseClassRegistry

    cls = ResponseClassRegistry._response_class_registry.get(api_key)
    if cls is None or version > cls.max_version:
        return None
    return cls[version]


def error_codes(value, out: list) -> list:
    """Every error_code in a decoded kio response, at any depth."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.metadata.get("kafka_type") == "error_code":
                out.append(v)
            else:
                error_codes(v, out)
    elif isinstance(value, tuple):
        for v in value:
            error_codes(v, out)
    return out


def sample(cls: type, n: list[int]) -> Any:
    """A request entity with every field given (arrays of two), numbered so that echoed
    entries can be told apart: a small deterministic stand-in for a client's request."""
    values = {}
    for f in dataclasses.fields(cls):
        values[f.name] = sample_value(f, _strip_optional(f.type), n)
    return cls(**values)


def sample_value(f: dataclasses.Field, tp: Any, n: list[int]) -> Any:
    n[0] += 1
    kind = f.metadata.get("kafka_type")
    if typing.get_origin(tp) is tuple:
        inner = _strip_optional(typing.get_args(tp)[0])
        if dataclasses.is_dataclass(inner):
            return tuple(sample(inner, n) for _ in range(2))
        return tuple(sample_value(f, inner, n) for _ in range(2))
    if dataclasses.is_dataclass(tp):
        return sample(tp, n)
    if kind in ("int8", "int16", "int32", "int64", "uint16"):
        return 0 if f.name in ("acks", "key_type", "isolation_level") else n[0] % 100
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=n[0])
    if kind == "string":
        return f"s{n[0]}"
    if kind == "bool":
        return False
    if kind == "uuid":
        return uuid.UUID(int=n[0])
    if kind == "records":
        return Records(b"")
    if kind == "bytes":
        return b"x"
    if kind == "float64":
        return 0.5
    raise TypeError(f"{cls_name(f)}: {kind}")


def cls_name(f: dataclasses.Field) -> str:
    return f.name


def test_error_response_for_every_api_and_version(served):
    assert len(served) > 200
    for api_key, version in served:
        check_error_response(api_key, version)


def check_error_response(api_key: int, version: int) -> None:
    c = codec(api_key, version)
    request = sample(c.request_type, [0])
    if (api_key, version) not in LEGACY and (api_key, version) not in AHEAD:
        # what the server's handlers see: the request as the server's codec decodes it
        out = io.BytesIO()
        entity_writer(c.request_type)(out, request)
        request = decode_body(c, out.getvalue(), 0)
    body = error_response(api_key, version, c.response_type, request, ERROR)
    encoded = bytes(body) if isinstance(body, bytes) else encode_body(c, body)

    parsed = kafka_python_response(api_key, version)
    if parsed is not None:  # a second, independent reader of the same bytes
        try:
            parsed.decode(encoded)
        except Exception as e:
            raise AssertionError(f"kafka-python cannot read the answer to api {api_key} v{version}: {e!r}") from e

    if (LEGACY.get((api_key, version)) or AHEAD.get((api_key, version)) or (0, None, None))[2] is not None:
        return  # written by a hand-made writer for a layout kio does not know: it cannot read it back
    if api_key == 18:
        c = codec(18, 0)  # an ApiVersions error is answered in the v0 layout, as Kafka does
    response, size = entity_reader(c.response_type)(encoded, 0)
    assert size == len(encoded)
    codes = error_codes(response, [])
    assert codes, (
        f"api {api_key} v{version}: the error answer carries the error nowhere; tell "
        "protocol/error_response.py (_ECHOED_FROM) which request array its response answers"
    )
    assert all(code == ERROR for code in codes), (api_key, version, codes)


def test_partitions_and_groups_are_echoed():
    """The entries a request names are answered one by one, identified as it named them."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
    from kio.schema.list_offsets.v7 import request as lo
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    c = codec(2, 7)
    req = lo.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            lo.ListOffsetsTopic(
                name="orders",
                partitions=(
                    lo.ListOffsetsPartition(partition_index=3, timestamp=-1),
                    lo.ListOffsetsPartition(partition_index=5, timestamp=-2),
                ),
            ),
        ),
    )
    resp = error_response(2, 7, c.response_type, req, ERROR)
    (topic,) = resp.topics
    assert topic.name == "orders"
    assert [(p.partition_index, p.error_code, p.offset, p.timestamp) for p in topic.partitions] == [
        (3, ERROR, -1, -1),
        (5, ERROR, -1, -1),
    ]

    c = codec(15, 5)
    resp = error_response(
        15, 5, c.response_type, DescribeGroupsRequest(groups=("a", "b"), include_authorized_operations=False), ERROR
    )
    assert [(g.group_id, g.error_code) for g in resp.groups] == [("a", ERROR), ("b", ERROR)]

    c = codec(10, 4)
    resp = error_response(10, 4, c.response_type, FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)), ERROR)
    assert [(x.key, x.node_id, x.port, x.error_code) for x in resp.coordinators] == [("g", -1, -1, ERROR)]


def test_fetch_v13_answers_with_the_top_level_error_only():
    """FetchRequest.getErrorResponse: topic ids (v13+) get no partitions, older versions get
    the error in each."""
    from kio.schema.fetch.v12 import request as f12
    from kio.schema.fetch.v13 import request as f13

    topic_id = uuid.uuid4()
    new = f13.FetchRequest(
        max_wait=0,
        min_bytes=1,
        topics=(
            f13.FetchTopic(
                topic_id=topic_id, partitions=(f13.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1),)
            ),
        ),
        forgotten_topics_data=(),
    )
    resp = error_response(1, 13, codec(1, 13).response_type, new, ERROR)
    assert resp.error_code == ERROR and resp.responses == ()
    session = f13.FetchRequest(
        max_wait=0, min_bytes=1, session_id=77, session_epoch=3, topics=(), forgotten_topics_data=()
    )
    assert error_response(1, 13, codec(1, 13).response_type, session, ERROR).session_id == 77
    old = f12.FetchRequest(
        max_wait=0,
        min_bytes=1,
        topics=(
            f12.FetchTopic(
                topic="t", partitions=(f12.FetchPartition(partition=2, fetch_offset=0, partition_max_bytes=1),)
            ),
        ),
        forgotten_topics_data=(),
    )
    resp = error_response(1, 12, codec(1, 12).response_type, old, ERROR)
    (topic,) = resp.responses
    assert topic.topic == "t" and [(p.partition_index, p.error_code, p.high_watermark) for p in topic.partitions] == [
        (2, ERROR, -1)
    ]


def test_client_quota_and_scram_requests_answer_as_kafka_does():
    """DescribeClientQuotas: entries null; AlterClientQuotas: each entry's entity named back;
    AlterUserScramCredentials: a result per user named, once each, in name order; a message,
    when given, in every error message."""
    from kio.schema.alter_client_quotas.v1 import request as acq
    from kio.schema.alter_user_scram_credentials.v0 import request as scram
    from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest

    described = DescribeClientQuotasRequest(
        components=(ComponentData(entity_type="user", match_type=0, match="a"),), strict=False
    )
    resp = error_response(48, 1, codec(48, 1).response_type, described, ERROR, "why")
    assert (resp.error_code, resp.error_message, resp.entries) == (ERROR, "why", None)

    entity = acq.EntityData(entity_type="client-id", entity_name="app")
    altered = acq.AlterClientQuotasRequest(entries=(acq.EntryData(entity=(entity,), ops=()),), validate_only=False)
    (entry,) = error_response(49, 1, codec(49, 1).response_type, altered, ERROR).entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("client-id", "app")]
    # AlterClientQuotasRequest.getErrorResponse: Errors.forException(e).message(), the default
    assert (entry.error_code, entry.error_message) == (ERROR, "This is not the correct coordinator.")

    upsert = scram.ScramCredentialUpsertion(name="bob", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p")
    request = scram.AlterUserScramCredentialsRequest(
        deletions=(scram.ScramCredentialDeletion(name="carol", mechanism=1),),
        upsertions=(upsert, dataclasses.replace(upsert, mechanism=2)),
    )
    resp = error_response(51, 0, codec(51, 0).response_type, request, ERROR, "why")
    assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
        ("bob", ERROR, "why"),
        ("carol", ERROR, "why"),
    ]


def error_messages(value: Any, path: str, out: list) -> list:
    """(path, value) of every error_message field in a response, at any depth."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.name == "error_message":
                out.append((f"{path}.{f.name}", v))
            else:
                error_messages(v, f"{path}.{f.name}", out)
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            error_messages(v, f"{path}[{i}]", out)
    return out


def answered(api_key: int, version: int, error: int, message: str | None) -> list:
    """The error messages of the error answer to a sample request, as a client decodes them."""
    c = codec(api_key, version)
    request = sample(c.request_type, [0])
    body = error_response(api_key, version, c.response_type, request, error, message)
    response, _ = entity_reader(c.response_type)(encode_body(c, body), 0)
    return error_messages(response, "", [])


WHY = "Topic orders has only 3 brokers to place it on."  # a message of the exception's own

# api key, version, where its getErrorResponse writes an error message (the fields of the
# answer that carry one), and how: "api_error" ApiError.fromThrowable(e).message(), "default"
# Errors.forException(e).message(), "exception" e.getMessage(), None: left null
WHERE_KAFKA_PUTS_IT = [
    (19, 7, {".topics[0].error_message", ".topics[1].error_message"}, "api_error"),  # CreateTopics
    (20, 6, {".responses[0].error_message", ".responses[1].error_message"}, None),  # DeleteTopics
    (37, 3, {".results[0].error_message", ".results[1].error_message"}, "api_error"),  # CreatePartitions
    (32, 4, {".results[0].error_message", ".results[1].error_message"}, "default"),  # DescribeConfigs
    (33, 2, {".responses[0].error_message", ".responses[1].error_message"}, "api_error"),  # AlterConfigs
    (44, 1, {".responses[0].error_message", ".responses[1].error_message"}, "api_error"),  # IncrementalAlterConfigs
    (30, 3, {".results[0].error_message", ".results[1].error_message"}, "api_error"),  # CreateAcls
    (29, 3, {".error_message"}, "api_error"),  # DescribeAcls
    (31, 3, {".filter_results[0].error_message", ".filter_results[1].error_message"}, "api_error"),  # DeleteAcls
    (
        45,
        0,
        {".error_message", *(f".responses[{t}].partitions[{p}].error_message" for t in (0, 1) for p in (0, 1))},
        "api_error",
    ),  # AlterPartitionReassignments
    (46, 0, {".error_message"}, "api_error"),  # ListPartitionReassignments
    (50, 0, {".error_message", ".results[0].error_message", ".results[1].error_message"}, "api_error"),
    (60, 1, {".error_message"}, "api_error"),  # DescribeCluster
    (10, 3, {".error_message"}, "default"),  # FindCoordinator, one key
    (10, 4, {".coordinators[0].error_message", ".coordinators[1].error_message"}, "default"),  # batched
    (90, 0, {".groups[0].error_message", ".groups[1].error_message"}, "exception"),  # DescribeShareGroupOffsets
    (92, 0, {".error_message"}, "default"),  # DeleteShareGroupOffsets: the top level alone
    (68, 0, {".error_message"}, None),  # ConsumerGroupHeartbeat
    (76, 1, {".error_message"}, None),  # ShareGroupHeartbeat
    (69, 0, {".groups[0].error_message", ".groups[1].error_message"}, None),  # ConsumerGroupDescribe
    (8, 9, set(), None),  # OffsetCommit: no error message anywhere
    (11, 9, set(), None),  # JoinGroup
    (22, 5, set(), None),  # InitProducerId
]


@pytest.mark.parametrize("api_key, version, fields, how", WHERE_KAFKA_PUTS_IT)
def test_error_message_is_where_kafka_puts_it(api_key, version, fields, how):
    """Each API's getErrorResponse writes the message (or not) where Kafka's request class
    does: for a bare Errors.X.exception(), for an exception with a message of its own, for one
    whose message is the default, and for UNKNOWN_SERVER_ERROR, which fromThrowable hides."""
    default = DEFAULT_MESSAGES[ERROR]
    unknown = ErrorCode.unknown_server_error
    expected = {
        "api_error": {(ERROR, None): None, (ERROR, WHY): WHY, (ERROR, default): None, (unknown, WHY): None},
        "default": {(ERROR, None): default, (ERROR, WHY): default, (ERROR, default): default},
        "exception": {(ERROR, None): default, (ERROR, WHY): WHY, (unknown, WHY): DEFAULT_MESSAGES[-1]},
        None: {(ERROR, None): None, (ERROR, WHY): None, (unknown, WHY): None},
    }[how]
    if how == "default":
        expected[unknown, WHY] = DEFAULT_MESSAGES[-1]
    for (error, message), want in expected.items():
        got = answered(api_key, version, error, message)
        assert {path for path, _ in got} == fields, (api_key, version)
        assert all(value == want for _, value in got), (api_key, version, error, message, got)
        if fields:
            assert error_message(api_key, error, message) == want


def test_default_messages_are_kafkas():
    """A few of Errors.java's strings, character for character, and every code kio knows
    that Kafka's Errors enum names has its message (NONE none)."""
    assert DEFAULT_MESSAGES[-1] == "The server experienced an unexpected error when processing the request."
    assert DEFAULT_MESSAGES[0] is None
    assert DEFAULT_MESSAGES[14] == "The coordinator is loading and hence can't process requests."
    assert DEFAULT_MESSAGES[31] == "Cluster authorization failed."
    assert DEFAULT_MESSAGES[41] == "This is not the correct controller for this cluster."
    assert sorted(DEFAULT_MESSAGES) == list(range(-1, 129))
    assert all(isinstance(m, str) and m for c, m in DEFAULT_MESSAGES.items() if c != 0)


def test_confluent_admin_shows_the_message_kafka_sends():
    """Through librdkafka: an injected DescribeConfigs error surfaces Kafka's default message,
    which DescribeConfigsRequest.getErrorResponse writes for each resource; an injected
    CreateTopics error carries none (ApiError.fromThrowable of a bare exception), so the client
    shows its own name for the error, as it would against Kafka."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    from coordinator.testing import Cluster

    with Cluster(1) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)

        cluster.inject("DescribeConfigs", "POLICY_VIOLATION")
        (future,) = admin.describe_configs([ConfigResource("topic", "orders")]).values()
        with pytest.raises(KafkaException) as raised:
            future.result(30)
        error = raised.value.args[0]
        assert (error.code(), error.str()) == (44, "Request parameters do not satisfy the configured policy.")

        cluster.inject("CreateTopics", "POLICY_VIOLATION")
        with pytest.raises(KafkaException) as raised:
            admin.create_topics([NewTopic("audit", 1, 1)])["audit"].result(30)
        error = raised.value.args[0]
        assert (error.code(), error.str()) == (44, "Broker: Policy violation")


async def test_acl_denial_carries_the_message_kafka_sends(server_factory):
    """A principal without the cluster's ACLs, on the wire: AlterClientQuotas answers each entry
    with CLUSTER_AUTHORIZATION_FAILED's default message (Errors.forException(e).message() in
    its getErrorResponse); DescribeUserScramCredentials with none (ApiError.fromThrowable of the
    bare exception KafkaApis fails it with). (Not through confluent-kafka: its
    describe_user_scram_credentials aborts the interpreter at exit after a request-level error,
    whether the answer names the users or not.)"""
    from kio.schema.alter_client_quotas.v1 import request as acq
    from kio.schema.describe_user_scram_credentials.v0 import request as dus

    from tests.support.acls import CLUSTER, CREATE_ACLS, DESCRIBE, create_acls_body
    from tests.support.wire_client import WireClient

    server = server_factory("--authorizer")
    client = await WireClient("denied").connect("127.0.0.1", server.port)
    try:
        # an ACL naming the cluster, so that allow.everyone.if.no.acl.found no longer applies
        r = await client.request(CREATE_ACLS, 3, create_acls_body((CLUSTER, "kafka-cluster", "User:ops", DESCRIBE)))
        assert r.results[0].error_code == 0
        entity = acq.EntityData(entity_type="client-id", entity_name="app")
        altered = acq.AlterClientQuotasRequest(entries=(acq.EntryData(entity=(entity,), ops=()),), validate_only=False)
        (entry,) = (await client.request(49, 1, altered)).entries
        assert (entry.error_code, entry.error_message) == (31, "Cluster authorization failed.")
        described = await client.request(
            50, 0, dus.DescribeUserScramCredentialsRequest(users=(dus.UserName(name="bob"),))
        )
        assert (described.error_code, described.error_message) == (31, None)
        # a row per user asked for, without the user's name (Kafka never sets it there)
        assert [(r.user, r.error_code, r.error_message) for r in described.results] == [("", 31, None)]
    finally:
        await client.close()
