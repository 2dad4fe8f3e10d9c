"""Retired admin versions old clients send without ApiVersions: CreateTopics v0/v1
(kafka-go sends v0), DeleteTopics v0.

Requests are built and responses decoded by aiokafka's independent protocol classes.
"""

from __future__ import annotations

import pytest


from aiokafka.protocol.admin import (
    CreateTopicsRequest_v0,
    CreateTopicsRequest_v1,
    CreateTopicsResponse_v0,
    CreateTopicsResponse_v1,
    DeleteTopicsRequest_v0,
    DeleteTopicsResponse_v0,
)

from protocol.messages import MalformedRequest, codec, decode_body
from tests.support.legacy import roundtrip


@pytest.fixture
def server(server_factory):
    """A server that behaves as Kafka 3.9: the request versions and message formats Kafka 4
    removed are what these tests are about."""
    return server_factory("--kafka-version", "3.9")


def test_create_topics_v0_v1_delete_topics_v0(server):
    r = roundtrip(
        server.port,
        CreateTopicsRequest_v0(
            [
                ("old", 4, 1, [], [("retention.ms", "60000")]),
                ("bad name", 1, 1, [], []),
                ("manual", -1, -1, [(0, [1]), (1, [1])], []),
            ],
            5000,
        ),
        CreateTopicsResponse_v0,
    )
    assert r.topic_errors == [("old", 0), ("bad name", 17), ("manual", 0)]
    r = roundtrip(
        server.port,
        CreateTopicsRequest_v1([("old", 1, 1, [], []), ("dry", 2, 1, [], [])], 5000, True),
        CreateTopicsResponse_v1,
    )
    assert [(name, code) for name, code, _ in r.topic_errors] == [("old", 36), ("dry", 0)]
    assert "already exists" in r.topic_errors[0][2]
    r = roundtrip(server.port, DeleteTopicsRequest_v0(["old", "dry", "manual"], 5000), DeleteTopicsResponse_v0)
    assert r.topic_error_codes == [("old", 0), ("dry", 3), ("manual", 0)]  # dry was validate_only


def test_create_topics_v0_truncated_is_malformed():
    body = CreateTopicsRequest_v0([("t", 3, 1, [(0, [1])], [("a", None)])], 100).encode()
    c = codec(19, 0)
    req = decode_body(c, body, 0)
    assert (req.topics[0].name, req.topics[0].num_partitions, req.topics[0].configs[0].value) == ("t", 3, None)
    for cut in range(len(body)):
        try:
            decode_body(c, body[:cut], 0)
        except MalformedRequest:
            continue
        raise AssertionError(f"{cut} of {len(body)} bytes decoded")
