"""Every advertised Produce, Fetch and ListOffsets version over a raw socket.

Requests are built from one description per API with coordinator.apis.build, which keeps
only the fields a version has; Fetch v13+ names topics by id, as learnt from Metadata.
"""

from __future__ import annotations

import datetime

import pytest

from tests.support.wire_client import WireClient, request_class
from coordinator.apis import build
from tests.support.data_plane import batch, create

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
MS = datetime.timedelta(milliseconds=1)


def produce_request(v: int, topic: str, records: bytes):
    P = build(request_class(PRODUCE, v, "PartitionProduceData"), dict(index=0, records=records))
    T = build(request_class(PRODUCE, v, "TopicProduceData"), dict(name=topic, partition_data=(P,)))
    return build(request_class(PRODUCE, v), dict(transactional_id=None, acks=-1, timeout=5000 * MS, topic_data=(T,)))


def fetch_request(v: int, topic: str, topic_id, offset: int):
    F = build(
        request_class(FETCH, v, "FetchPartition"),
        dict(
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        ),
    )
    T = build(request_class(FETCH, v, "FetchTopic"), dict(topic=topic, topic_id=topic_id, partitions=(F,)))
    return build(
        request_class(FETCH, v),
        dict(
            replica_id=-1,
            max_wait=0 * MS,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(T,),
            forgotten_topics_data=(),
            rack_id="",
        ),
    )


def list_offsets_request(v: int, topic: str, timestamp: int):
    P = build(
        request_class(LIST_OFFSETS, v, "ListOffsetsPartition"),
        dict(partition_index=0, current_leader_epoch=-1, timestamp=timestamp, max_num_offsets=1),
    )
    T = build(request_class(LIST_OFFSETS, v, "ListOffsetsTopic"), dict(name=topic, partitions=(P,)))
    return build(request_class(LIST_OFFSETS, v), dict(replica_id=-1, isolation_level=0, topics=(T,), timeout=1000 * MS))


@pytest.fixture
async def conn(server):
    c = await WireClient("versions").connect("127.0.0.1", server.port)
    yield c
    await c.close()


async def topic_id(conn, name: str):
    M = request_class(METADATA, 12, "MetadataRequestTopic")
    r = await conn.request(
        METADATA,
        12,
        request_class(METADATA, 12)(
            topics=(M(topic_id=None, name=name),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    return r.topics[0].topic_id


async def test_every_produce_fetch_list_offsets_version(conn):
    await create(conn, "v", partitions=1)
    tid = await topic_id(conn, "v")
    offsets = []
    for v in range(3, 12):
        r = await conn.request(PRODUCE, v, produce_request(v, "v", batch(2)))
        p = r.responses[0].partition_responses[0]
        assert p.error_code == 0, (v, p)
        offsets.append(p.base_offset)
    assert offsets == list(range(0, 18, 2))
    for v in range(4, 19):
        r = await conn.request(FETCH, v, fetch_request(v, "v", tid, 4))
        t = r.responses[0]
        assert (t.topic_id if v >= 13 else t.topic) == (tid if v >= 13 else "v")
        p = t.partitions[0]
        assert (p.error_code, p.high_watermark) == (0, 18), v
        assert int.from_bytes(p.records[:8], "big") == 4, v  # the batch holding offset 4
    for v in range(1, 12):
        r = await conn.request(LIST_OFFSETS, v, list_offsets_request(v, "v", -1))
        p = r.topics[0].partitions[0]
        assert (p.error_code, p.offset) == (0, 18), v


async def test_fetch_unknown_topic_id(conn):
    import uuid

    r = await conn.request(FETCH, 16, fetch_request(16, "", uuid.uuid4(), 0))
    assert r.responses[0].partitions[0].error_code == 100  # UNKNOWN_TOPIC_ID
