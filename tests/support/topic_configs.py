"""Producing until a partition is full, for the topic-config tests."""

from __future__ import annotations

from tests.support.data_plane import PRODUCE, cls


async def produce_full(conn, topic, records, v=9):
    P, T = cls(PRODUCE, v, "PartitionProduceData"), cls(PRODUCE, v, "TopicProduceData")
    r = await conn.request(
        PRODUCE,
        v,
        cls(PRODUCE, v)(
            transactional_id=None,
            acks=-1,
            timeout=asyncio_ms(5000),
            topic_data=(T(name=topic, partition_data=(P(index=0, records=records),)),),
        ),
    )
    return r.responses[0].partition_responses[0]


def asyncio_ms(n):
    import datetime

    return datetime.timedelta(milliseconds=n)
