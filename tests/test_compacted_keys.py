"""Keyless records on a compacted topic, refused as Kafka's LogValidator refuses them:
INVALID_RECORD (87) for the whole batch, with each keyless record named in record_errors
(Produce v8+); confluent-kafka's producer reports it in the delivery report."""

from __future__ import annotations

import time

import pytest

from tests.support.wire_client import WireClient
from protocol.record_batch import GZIP, build_batch
from tests.support.data_plane import MS, PRODUCE, cls, create

INVALID_RECORD, INVALID_TIMESTAMP = 87, 32


async def produce_v(conn, topic, records, v):
    P, T = cls(PRODUCE, v, "PartitionProduceData"), cls(PRODUCE, v, "TopicProduceData")
    r = await conn.request(
        PRODUCE,
        v,
        cls(PRODUCE, v)(
            transactional_id=None,
            acks=-1,
            timeout=5000 * MS,
            topic_data=(T(name=topic, partition_data=(P(index=0, records=records),)),),
        ),
    )
    return r.responses[0].partition_responses[0]


@pytest.fixture
async def conn(server):
    c = await WireClient("keys").connect("127.0.0.1", server.port)
    yield c
    await c.close()


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
async def test_keyless_records_refused_with_record_errors(conn, server, policy):
    assert await create(conn, "c", partitions=1, configs=[("cleanup.policy", policy)]) == 0
    now = int(time.time() * 1000)
    records = build_batch([(b"k", b"1"), (None, b"2"), (b"", b"3"), (None, b"4")], timestamp_ms=now)
    p = await produce_v(conn, "c", records, 9)
    assert p.error_code == INVALID_RECORD and p.base_offset == -1
    why = "Compacted topic cannot accept message without key in topic partition c-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [(1, why), (3, why)]
    assert p.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{why}'), "
        f"RecordError(batchIndex=3, message='{why}')]"
    )
    # compressed batches are looked into too; an empty key is a key
    p = await produce_v(conn, "c", build_batch([(None, b"x")], timestamp_ms=now, compression=GZIP), 8)
    assert p.error_code == INVALID_RECORD and [e.batch_index for e in p.record_errors] == [0]
    # before v8 there is no room for record errors: the code alone
    p = await produce_v(conn, "c", build_batch([(None, b"x")], timestamp_ms=now), 7)
    assert p.error_code == INVALID_RECORD and not hasattr(p, "record_errors")
    # nothing of the refused batches was stored: keyed records start at offset 0
    p = await produce_v(conn, "c", build_batch([(b"k", b"1"), (b"", b"2")], timestamp_ms=now), 9)
    assert p.error_code == 0 and p.base_offset == 0 and p.record_errors == ()
    # a delete-only topic takes keyless records
    assert await create(conn, "d", partitions=1) == 0
    assert (await produce_v(conn, "d", build_batch([(None, b"x")], timestamp_ms=now), 9)).error_code == 0
    assert "Traceback" not in server.log_text()


async def test_timestamp_errors_name_every_record(conn):
    assert await create(conn, "fresh", partitions=1, configs=[("message.timestamp.before.max.ms", "60000")]) == 0
    old = int(time.time() * 1000) - 3_600_000
    p = await produce_v(conn, "fresh", build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=old), 9)
    assert p.error_code == INVALID_TIMESTAMP
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in p.record_errors] == [0, 1]
    assert p.record_errors[0].batch_index_error_message.startswith(
        f"Timestamp {old} of message with offset 0 is out of range. The timestamp should be within ["
    )


def test_confluent_producer_delivery_report_says_invalid_record(server):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("table", 1, 1, config={"cleanup.policy": "compact"})])["table"].result(30)
    reports = []
    producer = Producer({"bootstrap.servers": server.bootstrap, "retries": 0})
    producer.produce("table", value=b"no key", on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(30) == 0  # (alone: Kafka refuses the whole batch a keyless record is in)
    producer.produce("table", key=b"k", value=b"keyed", on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(30) == 0
    by_value = {msg.value(): err for err, msg in reports}
    assert by_value[b"no key"] is not None and by_value[b"no key"].code() == KafkaError.INVALID_RECORD
    assert by_value[b"keyed"] is None
