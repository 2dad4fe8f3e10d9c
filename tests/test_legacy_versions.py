"""Retired versions old clients still send: OffsetCommit v0/v1, OffsetFetch v0.

Requests are built by aiokafka's independent protocol classes and sent over a raw
socket; responses are decoded by them too.
"""

from __future__ import annotations

import pytest

import asyncio

from aiokafka.protocol.commit import (
    OffsetCommitRequest_v0,
    OffsetCommitRequest_v1,
    OffsetCommitResponse_v0,
    OffsetCommitResponse_v1,
    OffsetFetchRequest_v0,
    OffsetFetchResponse_v0,
)

from protocol.legacy import LEGACY
from protocol.messages import MalformedRequest, codec, decode_body
from tests.support.legacy import (
    roundtrip,
)
from tests.support.process import create_topics


@pytest.fixture
def server(server_factory):
    """A server that behaves as Kafka 3.9: the request versions and message formats Kafka 4
    removed are what these tests are about."""
    return server_factory("--kafka-version", "3.9")


def test_offset_commit_v0_v1_and_fetch_v0(server):
    create_topics(server.port, "t")
    r = roundtrip(server.port, OffsetCommitRequest_v0("old", [("t", [(0, 42, "zk-era")])]), OffsetCommitResponse_v0)
    assert r.topics == [("t", [(0, 0)])]
    # v1 with generation -1 and no member: a standalone commit, as sarama sends it.
    r = roundtrip(
        server.port, OffsetCommitRequest_v1("old", -1, "", [("t", [(1, 43, -1, "v1")])]), OffsetCommitResponse_v1
    )
    assert r.topics == [("t", [(1, 0)])]
    r = roundtrip(
        server.port, OffsetCommitRequest_v1("old", 3, "ghost", [("t", [(1, 44, -1, "")])]), OffsetCommitResponse_v1
    )
    assert r.topics == [("t", [(1, 25)])]  # UNKNOWN_MEMBER_ID: the group has no such member
    r = roundtrip(server.port, OffsetFetchRequest_v0("old", [("t", [0, 1, 2])]), OffsetFetchResponse_v0)
    assert r.topics == [("t", [(0, 42, "zk-era", 0), (1, 43, "v1", 0), (2, -1, "", 0)])]


def test_legacy_truncated_bodies_are_malformed():
    body = OffsetCommitRequest_v1("g", -1, "", [("t", [(0, 5, -1, "m")])]).encode()
    c = codec(8, 1)
    assert decode_body(c, body, 0).partitions[0].offset == 5  # protocol/offset_commit.py reads it
    for cut in range(len(body)):
        try:
            decode_body(c, body[:cut], 0)
        except MalformedRequest:
            continue
        raise AssertionError(f"accepted a body cut at {cut}")
    assert set(LEGACY) == {
        (8, 0),
        (8, 1),
        (9, 0),
        (2, 0),
        (19, 0),
        (19, 1),
        (20, 0),
        (32, 0),
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
        (1, 3),
        (23, 0),
        (23, 1),
        (29, 0),
        (30, 0),
        (31, 0),
        (34, 0),
        (35, 0),
        (38, 0),
        (39, 0),
        (40, 0),
        (41, 0),
    }  # CreateTopics/DeleteTopics: tests/test_data_plane_legacy.py;
    # the ACL APIs' v0: tests/test_acls.py; the log-dir and delegation-token v0s: below


def _raw(port: int, api_key: int, version: int, body: bytes) -> bytes:
    """One request of a version no library here encodes; the answer's body after its header."""
    import socket
    import struct

    header = struct.pack(">hhih", api_key, version, 9, 6) + b"legacy"
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = s.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", data)[0] == 9
    return data[4:]


def test_log_dir_and_delegation_token_v0_are_v1_layouts(server):
    """Kafka 3.9 serves v0 of DescribeLogDirs and the delegation-token APIs, whose layout is
    v1's (v1 only moved throttling, KIP-219): v1's classes read and write them."""
    import struct

    create_topics(server.port, "t")
    # DescribeLogDirs v0, every topic (null): throttle, one dir, no error, its path, topic t.
    answer = _raw(server.port, 35, 0, struct.pack(">i", -1))
    throttle, dirs, error = struct.unpack_from(">iih", answer)
    assert (throttle, dirs, error) == (0, 1, 0)
    assert b"\x00\x01t" in answer
    # CreateDelegationToken v0 on a plaintext listener: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64).
    answer = _raw(server.port, 38, 0, struct.pack(">iq", 0, -1))
    assert struct.unpack_from(">h", answer)[0] == 64


def test_list_offsets_v0_for_burrow(server):
    """ListOffsets v0 answers with old_style_offsets (Burrow's sarama client reads v0)."""
    from aiokafka.protocol.offset import OffsetRequest_v0, OffsetResponse_v0

    from tests.support.data_plane import batch, create, produce
    from tests.support.wire_client import WireClient

    async def setup():
        conn = await WireClient("setup").connect("127.0.0.1", server.port)
        await create(conn, "burrow", partitions=1)
        await produce(conn, "burrow", batch(4))
        await conn.close()

    asyncio.run(setup())
    r = roundtrip(
        server.port, OffsetRequest_v0(-1, [("burrow", [(0, -1, 1), (0, -2, 1), (3, -1, 1)])]), OffsetResponse_v0
    )
    assert r.topics == [("burrow", [(0, 0, [4]), (0, 0, [0]), (3, 3, [])])]
