"""Raw-wire topics, Produce and Fetch: request classes, record batches, and a topic created in one call."""

from __future__ import annotations

import datetime
import time

from protocol.record_batch import build_batch
from tests.support.wire_client import request_class

PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, METADATA = 0, 1, 2, 19, 20, 37, 3


MS = datetime.timedelta(milliseconds=1)


def cls(api, v, name=None):
    return request_class(api, v, name)


def batch(n: int = 3, ts: int | None = None, value: bytes = b"v") -> bytes:
    ts = ts if ts is not None else int(time.time() * 1000)
    return build_batch([(b"k%d" % i, value) for i in range(n)], timestamp_ms=ts)


async def produce(conn, topic, records, partition=0, acks=-1, v=9):
    P, T = cls(PRODUCE, v, "PartitionProduceData"), cls(PRODUCE, v, "TopicProduceData")
    r = await conn.request(
        PRODUCE,
        v,
        cls(PRODUCE, v)(
            transactional_id=None,
            acks=acks,
            timeout=5000 * MS,
            topic_data=(T(name=topic, partition_data=(P(index=partition, records=records),)),),
        ),
    )
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def fetch_body(topic, offset, partition=0, max_wait_ms=0, min_bytes=1, v=11, session_id=0, session_epoch=-1):
    F, T = cls(FETCH, v, "FetchPartition"), cls(FETCH, v, "FetchTopic")
    return cls(FETCH, v)(
        replica_id=-1,
        max_wait=max_wait_ms * MS,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=(
            T(
                topic=topic,
                partitions=(
                    F(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


async def create(conn, name, partitions=3, rf=-1, configs=(), validate_only=False):
    C = cls(CREATE_TOPICS, 7, "CreatableTopicConfig")
    T = cls(CREATE_TOPICS, 7, "CreatableTopic")
    r = await conn.request(
        CREATE_TOPICS,
        7,
        cls(CREATE_TOPICS, 7)(
            topics=(
                T(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=rf,
                    assignments=(),
                    configs=tuple(C(name=k, value=v) for k, v in configs),
                ),
            ),
            timeout=5000 * MS,
            validate_only=validate_only,
        ),
    )
    return r.topics[0].error_code


async def first_group_use(conn, group: str = "first-use") -> None:
    """A group's FindCoordinator: what makes __consumer_offsets exist, as on Kafka."""
    body = cls(10, 4)(key_type=0, coordinator_keys=(group,))
    assert (await conn.request(10, 4, body)).coordinators[0].error_code == 0
