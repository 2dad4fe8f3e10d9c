"""DeleteRecords: the log start offset moves up; Fetch below it is OFFSET_OUT_OF_RANGE,
ListOffsets earliest and a consumer from the earliest start there."""

from __future__ import annotations

import datetime

from tests.support.wire_client import WireClient
from tests.support.process import create_topics
from tests.support.data_plane import FETCH, batch, cls, create, fetch_body, first_group_use, produce

DELETE_RECORDS = 21


async def delete(conn, topic, partition, offset, v=2):
    P, T = cls(DELETE_RECORDS, v, "DeleteRecordsPartition"), cls(DELETE_RECORDS, v, "DeleteRecordsTopic")
    r = await conn.request(
        DELETE_RECORDS,
        v,
        cls(DELETE_RECORDS, v)(
            topics=(T(name=topic, partitions=(P(partition_index=partition, offset=offset),)),),
            timeout=datetime.timedelta(seconds=5),
        ),
    )
    p = r.topics[0].partitions[0]
    return p.error_code, p.low_watermark


async def test_delete_records_over_the_wire(server):
    conn = await WireClient("dr").connect("127.0.0.1", server.port)
    await conn.create_topics("t", partitions=1)
    for _ in range(4):
        await produce(conn, "t", batch(3))  # offsets 0..11
    assert await delete(conn, "t", 0, 5) == (0, 5)
    r = await conn.request(FETCH, 11, fetch_body("t", 2))
    assert r.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE below the start
    r = await conn.request(FETCH, 11, fetch_body("t", 5))
    assert r.responses[0].partitions[0].log_start_offset == 5
    assert await delete(conn, "t", 0, 3) == (0, 5)  # never backwards
    assert await delete(conn, "t", 0, -1, v=0) == (0, 12)  # -1: up to the high watermark
    assert (await delete(conn, "t", 0, 13))[0] == 1  # past the high watermark: OFFSET_OUT_OF_RANGE
    assert (await delete(conn, "t", 0, -7))[0] == 1
    assert (await delete(conn, "t", 3, 1))[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert (await delete(conn, "nope", 0, 1))[0] == 3
    await first_group_use(conn)
    assert (await delete(conn, "__consumer_offsets", 0, 0))[0] == 17  # INVALID_TOPIC_EXCEPTION
    await create(conn, "compacted", partitions=1, configs=[("cleanup.policy", "compact")])
    await create(conn, "both", partitions=1, configs=[("cleanup.policy", "compact,delete")])
    await produce(conn, "compacted", batch(2))
    await produce(conn, "both", batch(2))
    assert (await delete(conn, "compacted", 0, 1))[0] == 44  # POLICY_VIOLATION: compact only
    assert await delete(conn, "both", 0, 1) == (0, 1)
    await conn.close()
    assert "Traceback" not in server.log_text()


def test_confluent_delete_records(server):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topics(server.port, "dr", partitions=1)
    producer = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        producer.produce("dr", value=b"m%d" % i, partition=0)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    (future,) = admin.delete_records([TopicPartition("dr", 0, 6)]).values()
    assert future.result(timeout=30).low_watermark == 6
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "dr-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("dr", 0)])
    first = None
    for _ in range(100):
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            first = msg.offset()
            break
    consumer.close()
    assert first == 6
