"""The versions Kafka 4.4 added that this server serves, with their semantics, over real sockets
(in-process server): ListOffsets v11 (EARLIEST_PENDING_UPLOAD, and each special timestamp only
from its version), Metadata v13 (a top-level error code), DeleteGroups v3 (a per-group error
message), ListTransactions v2 (a transactional-id pattern). Fetch v18 and every other Fetch,
Produce and ListOffsets version: tests/test_data_plane_versions.py."""

from __future__ import annotations

import datetime
import struct

import pytest

from coordinator.apis import build
from protocol.messages import encode_request
from tests.support.data_plane import batch, create, produce
from tests.support.raw_wire import Wire
from tests.support.transactions_wire import init_pid
from tests.support.wire_client import WireClient, request_class

LIST_OFFSETS, METADATA, DELETE_GROUPS, LIST_TRANSACTIONS, API_VERSIONS = 2, 3, 42, 66, 18
NONE, UNSUPPORTED_VERSION, INVALID_REQUEST, GROUP_ID_NOT_FOUND, INVALID_REGULAR_EXPRESSION = 0, 35, 42, 69, 128
MS = datetime.timedelta(milliseconds=1)
KAFKA_44_MAXIMA = {1: 18, 2: 11, 3: 13, 18: 5, 42: 3, 66: 2}  # Fetch, ListOffsets, Metadata, ...


@pytest.fixture
async def conn(server):
    c = await WireClient("kafka44").connect("127.0.0.1", server.port)
    yield c
    await c.close()


async def test_advertised_maxima_are_kafka_44s(conn):
    ranges = await conn.api_versions()
    assert {k: ranges[k][1] for k in KAFKA_44_MAXIMA} == KAFKA_44_MAXIMA


def _list_offsets(v: int, *asks: tuple[str, int, int]):
    P, T = (request_class(LIST_OFFSETS, v, n) for n in ("ListOffsetsPartition", "ListOffsetsTopic"))
    topics: dict[str, list] = {}
    for topic, partition, ts in asks:
        topics.setdefault(topic, []).append(
            build(P, dict(partition_index=partition, current_leader_epoch=-1, timestamp=ts))
        )
    return build(
        request_class(LIST_OFFSETS, v),
        dict(
            replica_id=-1,
            isolation_level=0,
            topics=tuple(build(T, dict(name=n, partitions=tuple(ps))) for n, ps in topics.items()),
            timeout=1000 * MS,
        ),
    )


def _rows(r):
    return [(t.name, p.partition_index, p.error_code, p.offset, p.leader_epoch) for t in r.topics for p in t.partitions]


async def test_list_offsets_special_timestamps_by_version(conn):
    await create(conn, "lo", partitions=2)
    assert (await produce(conn, "lo", batch(3)))[0] == 0
    # EARLIEST_PENDING_UPLOAD (-6, v11): nothing is tiered here, so -1 and epoch -1, as Kafka
    # without remote storage; before v11, and for a negative timestamp Kafka knows no meaning
    # of, UNSUPPORTED_VERSION (checked before the topic is looked up, as ReplicaManager does)
    r = await conn.request(LIST_OFFSETS, 11, _list_offsets(11, ("lo", 0, -6), ("lo", 1, -1), ("nope", 0, -6)))
    assert _rows(r) == [("lo", 0, NONE, -1, -1), ("lo", 1, NONE, 0, 0), ("nope", 0, 3, -1, -1)]
    r = await conn.request(LIST_OFFSETS, 10, _list_offsets(10, ("lo", 0, -6), ("nope", 0, -7), ("lo", 1, -5)))
    assert _rows(r) == [
        ("lo", 0, UNSUPPORTED_VERSION, -1, -1),
        ("lo", 1, NONE, -1, -1),
        ("nope", 0, UNSUPPORTED_VERSION, -1, -1),
    ]
    r = await conn.request(LIST_OFFSETS, 6, _list_offsets(6, ("lo", 0, -3), ("lo", 1, -2)))
    assert _rows(r) == [("lo", 0, UNSUPPORTED_VERSION, -1, -1), ("lo", 1, NONE, 0, 0)]  # max timestamp: v7+
    # a partition asked twice: answered once, INVALID_REQUEST
    r = await conn.request(LIST_OFFSETS, 11, _list_offsets(11, ("lo", 0, -1), ("lo", 0, -2), ("lo", 1, -1)))
    assert _rows(r) == [("lo", 0, INVALID_REQUEST, -1, -1), ("lo", 1, NONE, 0, 0)]
    r = await conn.request(LIST_OFFSETS, 11, _list_offsets(11, ("lo", 0, -1)))
    assert _rows(r) == [("lo", 0, NONE, 3, 0)]


async def test_metadata_v13_has_a_top_level_error_code(conn):
    await create(conn, "md", partitions=1)
    T = request_class(METADATA, 13, "MetadataRequestTopic")
    r = await conn.request(
        METADATA,
        13,
        request_class(METADATA, 13)(
            topics=(T(topic_id=None, name="md"), T(topic_id=None, name="absent")),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    assert r.error_code == NONE
    assert [(t.name, t.error_code, len(t.partitions)) for t in r.topics] == [("md", 0, 1), ("absent", 3, 0)]


def _read_delete_groups_v3(data: bytes):
    pos = 4  # throttle time
    count, pos = data[pos] - 1, pos + 1
    out = []
    for _ in range(count):
        n = data[pos] - 1
        name = data[pos + 1 : pos + 1 + n].decode()
        pos += 1 + n
        (error,) = struct.unpack_from(">h", data, pos)
        pos += 2
        m = data[pos]
        message = None if m == 0 else data[pos + 1 : pos + m].decode()
        pos += 1 if m == 0 else m
        assert data[pos] == 0  # no tagged fields
        pos += 1
        out.append((name, error, message))
    assert data[pos:] == b"\0"
    return out


def test_delete_groups_v3_answers_each_group_once_with_its_message(server):
    w = Wire(server.port)
    try:
        w.send(
            encode_request(
                DELETE_GROUPS, 3, 9, "t", request_class(DELETE_GROUPS, 2)(groups_names=("absent", "", "absent"))
            )
        )
        data = w.read_frame()
    finally:
        w.close()
    assert data is not None and struct.unpack_from(">i", data)[0] == 9 and data[4] == 0  # (response header v1)
    # "" is a group no one has (only a null id is INVALID_GROUP_ID); a name given twice, one
    # result; in Kafka's order of their coordinator partitions ("" is on partition 0, first)
    assert _read_delete_groups_v3(data[5:]) == [("", GROUP_ID_NOT_FOUND, None), ("absent", GROUP_ID_NOT_FOUND, None)]


def _list_transactions(pattern):
    return request_class(LIST_TRANSACTIONS, 2)(
        state_filters=(), producer_id_filters=(), duration_filter=-1, transactional_id_pattern=pattern
    )


async def test_list_transactions_v2_filters_by_pattern(conn):
    for txn_id in ("orders-1", "orders-2", "billing-1"):
        assert (await init_pid(conn, txn_id))[0] == NONE
    for pattern, expected in (
        (None, ["billing-1", "orders-1", "orders-2"]),
        ("", ["billing-1", "orders-1", "orders-2"]),
        ("orders-.*", ["orders-1", "orders-2"]),
        ("orders", []),  # matched against the whole id
    ):
        r = await conn.request(LIST_TRANSACTIONS, 2, _list_transactions(pattern))
        assert r.error_code == NONE and sorted(s.transactional_id for s in r.transaction_states) == expected, pattern
    for bad in ("(a", "(?=x)a", r"(a)\1"):  # RE2 syntax, as Kafka's RE2/J: no lookaround, no backreference
        r = await conn.request(LIST_TRANSACTIONS, 2, _list_transactions(bad))
        assert (r.error_code, r.transaction_states) == (INVALID_REGULAR_EXPRESSION, ()), bad
