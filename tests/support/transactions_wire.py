"""Raw transactional requests over the wire: the helpers the transaction tests share."""

from __future__ import annotations

import asyncio
import datetime
import struct

from coordinator.apis import build
from protocol.messages import encode_request
from protocol.record_batch import build_batch
from tests.support.wire_client import request_class

PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FETCH, FIND_COORDINATOR, INIT_PRODUCER_ID = 0, 1, 2, 9, 10, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT, DESCRIBE_TXNS, LIST_TXNS = 24, 25, 26, 28, 65, 66
MS = datetime.timedelta(milliseconds=1)
E_NONE, UNKNOWN_TOPIC, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PID_MAPPING = 0, 3, 47, 48, 49
INVALID_TIMEOUT, CONCURRENT, TXN_ID_NOT_FOUND, OPERATION_NOT_ATTEMPTED, UNSTABLE = 50, 51, 105, 55, 88
PRODUCER_FENCED = 90


def cls(api, v, name=None):
    return request_class(api, v, name)


async def init_pid(conn, txn_id, timeout_ms=60_000, pid=-1, epoch=-1, v=4):
    r = await conn.request(
        INIT_PRODUCER_ID,
        v,
        cls(INIT_PRODUCER_ID, v)(
            transactional_id=txn_id, transaction_timeout=timeout_ms * MS, producer_id=pid, producer_epoch=epoch
        ),
    )
    return r.error_code, r.producer_id, r.producer_epoch


async def add_partitions(conn, txn_id, pid, epoch, parts, v=3):
    T = cls(ADD_PARTITIONS, v, "AddPartitionsToTxnTopic")
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    r = await conn.request(
        ADD_PARTITIONS,
        v,
        cls(ADD_PARTITIONS, v)(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=tuple(T(name=t, partitions=tuple(ps)) for t, ps in topics.items()),
        ),
    )
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def end_txn(conn, txn_id, pid, epoch, commit, v=3):
    r = await conn.request(
        END_TXN, v, cls(END_TXN, v)(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)
    )
    return r.error_code


async def end_txn_v5(conn, txn_id, pid, epoch, commit):
    """EndTxn v5 (transactions v2): (error, the producer id and epoch to go on with)."""
    r = await conn.request(
        END_TXN, 5, cls(END_TXN, 5)(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)
    )
    return r.error_code, r.producer_id, r.producer_epoch


async def produce_txn(conn, txn_id, topic, partition, pid, epoch, seq, n=2, v=9, topic_id=None):
    """(error, base offset) of one transactional batch; v13 names the topic by topic_id."""
    records = build_batch(
        [(b"k", b"v%d" % i) for i in range(n)],
        timestamp_ms=1_700_000_000_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    P, T = cls(PRODUCE, v, "PartitionProduceData"), cls(PRODUCE, v, "TopicProduceData")
    r = await conn.request(
        PRODUCE,
        v,
        cls(PRODUCE, v)(
            transactional_id=txn_id,
            acks=-1,
            timeout=5000 * MS,
            topic_data=(
                T(topic_id=topic_id, partition_data=(P(index=partition, records=records),))
                if v >= 13
                else T(name=topic, partition_data=(P(index=partition, records=records),)),
            ),
        ),
    )
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


async def fetch(conn, topic, offset, isolation):
    F, T = cls(FETCH, 12, "FetchPartition"), cls(FETCH, 12, "FetchTopic")
    r = await conn.request(
        FETCH,
        12,
        cls(FETCH, 12)(
            replica_id=-1,
            max_wait=0 * MS,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=isolation,
            session_id=0,
            session_epoch=-1,
            topics=(
                T(
                    topic=topic,
                    partitions=(
                        F(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        ),
    )
    return r.responses[0].partitions[0]


async def latest(conn, topic, isolation):
    P, T = cls(LIST_OFFSETS, 7, "ListOffsetsPartition"), cls(LIST_OFFSETS, 7, "ListOffsetsTopic")
    r = await conn.request(
        LIST_OFFSETS,
        7,
        cls(LIST_OFFSETS, 7)(
            replica_id=-1,
            isolation_level=isolation,
            topics=(T(name=topic, partitions=(P(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),),
        ),
    )
    return r.topics[0].partitions[0].offset


async def txn_commit(conn, txn_id, group, pid, epoch, topic, offset, v=3, generation=-1, member="", topic_id=None):
    """The partition's error; v6 names the topic by topic_id."""
    T, P = (
        cls(TXN_OFFSET_COMMIT, v, "TxnOffsetCommitRequestTopic"),
        cls(TXN_OFFSET_COMMIT, v, "TxnOffsetCommitRequestPartition"),
    )
    r = await conn.request(
        TXN_OFFSET_COMMIT,
        v,
        build(
            cls(TXN_OFFSET_COMMIT, v),
            dict(
                transactional_id=txn_id,
                group_id=group,
                producer_id=pid,
                producer_epoch=epoch,
                generation_id=generation,
                member_id=member,
                group_instance_id=None,
                topics=(
                    build(
                        T,
                        dict(
                            **({"topic_id": topic_id} if v >= 6 else {"name": topic}),
                            partitions=(
                                build(
                                    P,
                                    dict(
                                        partition_index=0,
                                        committed_offset=offset,
                                        committed_leader_epoch=-1,
                                        committed_metadata="",
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )
    return r.topics[0].partitions[0].error_code


async def offset_fetch(conn, group, topic, require_stable):
    T = cls(OFFSET_FETCH, 7, "OffsetFetchRequestTopic")
    r = await conn.request(
        OFFSET_FETCH,
        7,
        cls(OFFSET_FETCH, 7)(
            group_id=group, topics=(T(name=topic, partition_indexes=(0,)),), require_stable=require_stable
        ),
    )
    p = r.topics[0].partitions[0]
    return p.error_code, p.committed_offset


async def describe(conn, txn_id):
    r = await conn.request(DESCRIBE_TXNS, 0, cls(DESCRIBE_TXNS, 0)(transactional_ids=(txn_id,)))
    return r.transaction_states[0]


async def describe_unknown(port, txn_id):
    """The error code DescribeTransactions gives an unknown id, read from the raw frame:
    its start time is -1, as in Kafka, which kio's decoder refuses."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_request(DESCRIBE_TXNS, 0, 1, "t", cls(DESCRIBE_TXNS, 0)(transactional_ids=(txn_id,))))
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    frame = await reader.readexactly(size)
    writer.close()
    # correlation id, header tags, throttle time, compact array length, then the first error code
    return struct.unpack_from(">h", frame, 4 + 1 + 4 + 1)[0]


async def wait_for_state(conn, txn_id, state, timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while (await describe(conn, txn_id)).transaction_state != state:
        assert asyncio.get_running_loop().time() < deadline, f"{txn_id} never reached {state}"
        await asyncio.sleep(0.02)


DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS, INCREMENTAL_ALTER_CONFIGS = 61, 27, 44
TXN_COORDINATOR_FENCED = 52


async def describe_producers(conn, topic, partition=0):
    """(error, {producer id: (epoch, last sequence, last timestamp, coordinator epoch,
    current transaction's first offset)}) of one partition."""
    T = cls(DESCRIBE_PRODUCERS, 0, "TopicRequest")
    r = await conn.request(
        DESCRIBE_PRODUCERS, 0, cls(DESCRIBE_PRODUCERS, 0)(topics=(T(name=topic, partition_indexes=(partition,)),))
    )
    p = r.topics[0].partitions[0]
    return p.error_code, {
        s.producer_id: (
            s.producer_epoch,
            s.last_sequence,
            s.last_timestamp,
            s.coordinator_epoch,
            s.current_txn_start_offset,
        )
        for s in p.active_producers
    }


async def write_marker(conn, pid, epoch, commit, parts, coordinator_epoch=0, v=1, transaction_version=0):
    """WriteTxnMarkers with one marker: {(topic, partition): error}."""
    M, T = cls(WRITE_TXN_MARKERS, v, "WritableTxnMarker"), cls(WRITE_TXN_MARKERS, v, "WritableTxnMarkerTopic")
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    extra = {"transaction_version": transaction_version} if v >= 2 else {}
    r = await conn.request(
        WRITE_TXN_MARKERS,
        v,
        cls(WRITE_TXN_MARKERS, v)(
            markers=(
                M(
                    producer_id=pid,
                    producer_epoch=epoch,
                    transaction_result=commit,
                    topics=tuple(T(name=t, partition_indexes=tuple(ps)) for t, ps in topics.items()),
                    coordinator_epoch=coordinator_epoch,
                    **extra,
                ),
            )
        ),
    )
    return {(t.name, p.partition_index): p.error_code for t in r.markers[0].topics for p in t.partitions}


async def set_broker_config(conn, name, value):
    R = cls(INCREMENTAL_ALTER_CONFIGS, 1, "AlterConfigsResource")
    C = cls(INCREMENTAL_ALTER_CONFIGS, 1, "AlterableConfig")
    r = await conn.request(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        cls(INCREMENTAL_ALTER_CONFIGS, 1)(
            resources=(R(resource_type=4, resource_name="", configs=(C(name=name, config_operation=0, value=value),)),),
            validate_only=False,
        ),
    )
    assert r.responses[0].error_code == 0, r
