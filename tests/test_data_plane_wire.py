"""Data plane over raw sockets: exact error codes, bad input, ListOffsets, Fetch long-poll."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import struct

import pytest

from protocol.record_batch import CRC_OFFSET, build_batch, parse_header
from tests.support.data_plane import (
    CREATE_PARTITIONS,
    DELETE_TOPICS,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    MS,
    PRODUCE,
    batch,
    cls,
    create,
    fetch_body,
    first_group_use,
    produce,
)
from tests.support.wire_client import WireClient


@pytest.fixture
async def conn(server):
    c = await WireClient("data-test").connect("127.0.0.1", server.port)
    yield c
    await c.close()


async def test_create_topics_errors(conn):
    assert await create(conn, "ok") == 0
    assert await create(conn, "ok") == 36  # TOPIC_ALREADY_EXISTS
    assert await create(conn, "bad name!") == 17  # INVALID_TOPIC_EXCEPTION
    assert await create(conn, "x" * 250) == 17
    assert await create(conn, "..") == 17
    assert await create(conn, "zero", partitions=0) == 37  # INVALID_PARTITIONS
    assert await create(conn, "rf3", rf=3) == 38  # INVALID_REPLICATION_FACTOR
    assert await create(conn, "cfg", configs=[("no.such.config", "1")]) == 40  # INVALID_CONFIG
    assert await create(conn, "cfg", configs=[("retention.ms", "soon")]) == 40
    assert await create(conn, "dry", validate_only=True) == 0
    assert await create(conn, "dry") == 0  # validate_only created nothing
    D = cls(DELETE_TOPICS, 6, "DeleteTopicState")
    r = await conn.request(
        DELETE_TOPICS,
        6,
        cls(DELETE_TOPICS, 6)(topics=(D(name="dry", topic_id=None), D(name="never", topic_id=None)), timeout=5000 * MS),
    )
    assert [x.error_code for x in r.responses] == [0, 3]
    P = cls(CREATE_PARTITIONS, 3, "CreatePartitionsTopic")
    await first_group_use(conn)  # (__consumer_offsets exists from a group's first use, as on Kafka)
    r = await conn.request(
        CREATE_PARTITIONS,
        3,
        cls(CREATE_PARTITIONS, 3)(
            topics=(
                P(name="ok", count=5, assignments=None),
                P(name="ok", count=2, assignments=None),
                P(name="__consumer_offsets", count=60, assignments=None),
            ),
            timeout=5000 * MS,
            validate_only=False,
        ),
    )
    assert [x.error_code for x in r.results] == [0, 37, 42]


async def test_produce_errors(server, conn):
    await create(conn, "t", partitions=1)
    await first_group_use(conn)
    assert await produce(conn, "__consumer_offsets", batch()) == (17, -1)  # internal topic
    corrupt = bytearray(batch())
    corrupt[CRC_OFFSET] ^= 0xFF
    assert (await produce(conn, "t", bytes(corrupt)))[0] == 2  # CORRUPT_MESSAGE
    # a truncated batch: Kafka's request reads no whole batch in it, INVALID_RECORD
    assert (await produce(conn, "t", batch()[:-3]))[0] == 87
    assert (await produce(conn, "t", batch(), partition=7))[0] == 3  # no such partition
    big = batch(1, value=b"x" * 2_000_000)
    assert (await produce(conn, "t", big))[0] == 10  # MESSAGE_TOO_LARGE
    assert await produce(conn, "t", batch(3)) == (0, 0)
    assert await produce(conn, "t", batch(2)) == (0, 3)


async def test_unknown_topic_without_auto_create(server_factory):
    server = server_factory("--no-auto-create-topics")
    conn = await WireClient("x").connect("127.0.0.1", server.port)
    assert (await produce(conn, "nope", batch()))[0] == 3
    M = cls(METADATA, 12, "MetadataRequestTopic")
    r = await conn.request(
        METADATA,
        12,
        cls(METADATA, 12)(
            topics=(M(topic_id=None, name="nope"),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
    )
    assert r.topics[0].error_code == 3
    await conn.close()


async def test_auto_create_on_metadata(conn):
    """As a KRaft broker (AutoTopicCreationManager): the creating request is answered
    UNKNOWN_TOPIC_OR_PARTITION without partitions, the next finds the topic; a request
    with allow_auto_topic_creation=false creates nothing; Produce never creates."""
    M = cls(METADATA, 12, "MetadataRequestTopic")

    async def metadata(name, allow=True, v=12):
        body = cls(METADATA, v)(
            topics=(M(topic_id=None, name=name),),
            allow_auto_topic_creation=allow,
            include_topic_authorized_operations=False,
        )
        return (await conn.request(METADATA, v, body)).topics[0]

    assert (await metadata("manual", allow=False)).error_code == 3
    assert (await metadata("manual", allow=False)).error_code == 3  # still nothing
    first = await metadata("auto")
    assert (first.error_code, first.partitions) == (3, ())
    second = await metadata("auto")
    assert second.error_code == 0 and len(second.partitions) == 1
    assert (await metadata("bad name!")).error_code == 17  # INVALID_TOPIC_EXCEPTION
    assert (await produce(conn, "by-produce", batch()))[0] == 3
    assert (await metadata("by-produce", allow=False)).error_code == 3
    r = await conn.request(
        METADATA, 1, cls(METADATA, 1)(topics=(cls(METADATA, 1, "MetadataRequestTopic")(name="old-client"),))
    )  # v0-3 have no flag: they may create
    assert r.topics[0].error_code == 3
    assert (await metadata("old-client", allow=False)).error_code == 0


async def test_fetch_errors_and_offsets(conn):
    await create(conn, "f", partitions=1)
    await produce(conn, "f", batch(5))
    r = await conn.request(FETCH, 11, fetch_body("f", -1))
    assert r.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
    r = await conn.request(FETCH, 11, fetch_body("f", 6))
    assert r.responses[0].partitions[0].error_code == 1
    r = await conn.request(FETCH, 11, fetch_body("missing", 0))
    assert r.responses[0].partitions[0].error_code == 3
    r = await conn.request(FETCH, 11, fetch_body("f", 0, session_id=1234, session_epoch=5))
    assert r.error_code == 70  # FETCH_SESSION_ID_NOT_FOUND: an incremental fetch in no session we know
    for epoch in (-1, 0):  # KIP-227: full fetches whatever the id (kafka-go sends id -1, epoch -1)
        r = await conn.request(FETCH, 11, fetch_body("f", 0, session_id=-1, session_epoch=epoch))
        assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, 0)
        assert (r.session_id == 0) == (epoch == -1)  # epoch 0 opens a session (tests/test_fetch_sessions.py)
    r = await conn.request(FETCH, 11, fetch_body("f", 2))
    p = r.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (0, 5, 5, 0)
    assert p.records.startswith(struct.pack(">q", 0))  # the whole batch holding offset 2
    # stamped with the leader's epoch, as Kafka's leader does (the producer sent -1)
    assert parse_header(p.records, 0).partition_leader_epoch == 0


async def test_fetch_long_poll_wakes_on_produce(conn, server):
    await create(conn, "lp", partitions=1)
    waiting = conn.send(FETCH, 11, fetch_body("lp", 0, max_wait_ms=60_000))
    other = await WireClient("producer").connect("127.0.0.1", server.port)
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await produce(other, "lp", batch(2))
    r = await asyncio.wait_for(waiting, 10)  # woken by the produce, long before max_wait
    assert r.responses[0].partitions[0].records
    await other.close()


async def test_fetch_long_poll_ends_when_its_topic_is_deleted(conn, server):
    """As Kafka's DelayedFetch completes when a partition goes away: the long poll answers
    UNKNOWN_TOPIC_OR_PARTITION at once instead of waiting out max_wait."""
    await create(conn, "gone", partitions=1)
    waiting = conn.send(FETCH, 11, fetch_body("gone", 0, max_wait_ms=60_000))
    other = await WireClient("admin").connect("127.0.0.1", server.port)
    await asyncio.sleep(0.1)
    assert not waiting.done()
    D = cls(DELETE_TOPICS, 6, "DeleteTopicState")
    r = await other.request(
        DELETE_TOPICS, 6, cls(DELETE_TOPICS, 6)(topics=(D(name="gone", topic_id=None),), timeout=5000 * MS)
    )
    assert r.responses[0].error_code == 0
    r = await asyncio.wait_for(waiting, 10)  # long before max_wait
    assert r.responses[0].partitions[0].error_code == 3
    await other.close()


async def test_list_offsets(conn):
    await create(conn, "lo", partitions=1)
    await produce(conn, "lo", batch(2, ts=1000))
    await produce(conn, "lo", batch(3, ts=5000))
    await produce(conn, "lo", batch(1, ts=3000))
    P, T = cls(LIST_OFFSETS, 7, "ListOffsetsPartition"), cls(LIST_OFFSETS, 7, "ListOffsetsTopic")

    async def lookup(ts):
        r = await conn.request(
            LIST_OFFSETS,
            7,
            cls(LIST_OFFSETS, 7)(
                replica_id=-1,
                isolation_level=0,
                topics=(T(name="lo", partitions=(P(partition_index=0, current_leader_epoch=-1, timestamp=ts),)),),
            ),
        )
        p = r.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert await lookup(-2) == (0, 0, -1)  # earliest
    assert await lookup(-1) == (0, 6, -1)  # latest = log end offset (next offset to write)
    assert await lookup(2000) == (0, 2, 5000)  # first record with timestamp >= 2000
    assert await lookup(9999) == (0, -1, -1)
    assert (await lookup(-3))[:2] == (0, 2)  # max timestamp


def test_oversized_frame_closes_only_that_connection(server):
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 65536)  # a 200 MB produce
        s.settimeout(10)
        try:
            closed = s.recv(1) == b""  # closed without reading 200 MB
        except ConnectionResetError:  # (closed with our bytes still unread: the kernel sends a reset)
            closed = True
        assert closed
    with socket.create_connection(("127.0.0.1", server.port)) as s:  # others are still served
        s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
        s.settimeout(10)
        assert len(s.recv(4)) == 4


async def test_produce_request_level_errors(conn):
    await create(conn, "acks", partitions=1)
    assert (await produce(conn, "acks", batch(), acks=2))[0] == 21  # INVALID_REQUIRED_ACKS
    assert (await produce(conn, "acks", batch(2) + batch(2)))[0] == 87  # INVALID_RECORD: one batch only
    old_format = bytearray(batch(1))
    old_format[16] = 1  # a magic 1 message set
    assert (await produce(conn, "acks", bytes(old_format)))[0] == 87
    zstd = build_batch([(b"k", b"v")], timestamp_ms=1, compression=4)
    assert (await produce(conn, "acks", zstd, v=6))[0] == 76  # UNSUPPORTED_COMPRESSION_TYPE before v7
    assert await produce(conn, "acks", zstd, v=7) == (0, 0)  # nothing of the above was written


async def test_idempotent_sequences_and_restart(server):
    def idem(seq: int, n: int = 2, epoch: int = 0) -> bytes:
        return build_batch([(b"k", b"v")] * n, timestamp_ms=1, producer_id=7, producer_epoch=epoch, base_sequence=seq)

    conn = await WireClient("idem").connect("127.0.0.1", server.port)
    await create(conn, "seq", partitions=1)
    assert await produce(conn, "seq", idem(0)) == (0, 0)
    assert await produce(conn, "seq", idem(2)) == (0, 2)
    assert await produce(conn, "seq", idem(0)) == (0, 0)  # a retry: answered with its first offset
    assert (await produce(conn, "seq", idem(9)))[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER: a gap
    assert (await produce(conn, "seq", idem(4, epoch=1)))[0] == 45  # a new epoch starts at 0
    await conn.close()
    server.restart()
    conn = await WireClient("idem").connect("127.0.0.1", server.port)
    assert await produce(conn, "seq", idem(2)) == (0, 2)  # state rebuilt from the log
    assert await produce(conn, "seq", idem(4)) == (0, 4)
    assert (await produce(conn, "seq", idem(0, epoch=1))) == (0, 6)  # bumped epoch
    assert (await produce(conn, "seq", idem(6, epoch=0)))[0] == 47  # INVALID_PRODUCER_EPOCH: fenced
    await conn.close()


async def test_list_offsets_tiered_specs(conn):
    await create(conn, "lt", partitions=1)
    await produce(conn, "lt", batch(4))
    P, T = cls(LIST_OFFSETS, 9, "ListOffsetsPartition"), cls(LIST_OFFSETS, 9, "ListOffsetsTopic")
    for ts, want in ((-4, 0), (-5, -1)):  # earliest local = log start; nothing is tiered
        r = await conn.request(
            LIST_OFFSETS,
            9,
            cls(LIST_OFFSETS, 9)(
                replica_id=-1,
                isolation_level=0,
                topics=(T(name="lt", partitions=(P(partition_index=0, current_leader_epoch=-1, timestamp=ts),)),),
            ),
        )
        assert (r.topics[0].partitions[0].error_code, r.topics[0].partitions[0].offset) == (0, want)


async def test_fetch_max_bytes_across_partitions(conn):
    await create(conn, "mb", partitions=2)
    big = batch(1, value=b"x" * 3000)
    for p in (0, 1):
        await produce(conn, "mb", big, partition=p)
    F, T = cls(FETCH, 11, "FetchPartition"), cls(FETCH, 11, "FetchTopic")
    parts = tuple(
        F(partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1000)
        for p in (0, 1)
    )
    body = dataclasses.replace(fetch_body("mb", 0), max_bytes=1000, topics=(T(topic="mb", partitions=parts),))
    r = await conn.request(FETCH, 11, body)
    sizes = [len(p.records or b"") for p in r.responses[0].partitions]
    assert sizes[0] == len(big) and sizes[1] == 0  # only the first partition may exceed the limits


async def test_fetch_of_offsets_topic_wakes_on_group_commit(server, conn):
    """A long-polling reader of __consumer_offsets (kcat, Burrow) sees a commit at once."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    from coordinator.log.offsets import partition_for

    await create(conn, "c", partitions=1)
    await produce(conn, "c", batch(1))
    await first_group_use(conn, "wakers")
    part = partition_for("wakers")
    r = await conn.request(
        LIST_OFFSETS,
        7,
        cls(LIST_OFFSETS, 7)(
            replica_id=-1,
            isolation_level=0,
            topics=(
                cls(LIST_OFFSETS, 7, "ListOffsetsTopic")(
                    name="__consumer_offsets",
                    partitions=(
                        cls(LIST_OFFSETS, 7, "ListOffsetsPartition")(
                            partition_index=part, current_leader_epoch=-1, timestamp=-1
                        ),
                    ),
                ),
            ),
        ),
    )
    end = r.topics[0].partitions[0].offset
    waiting = conn.send(FETCH, 11, fetch_body("__consumer_offsets", end, partition=part, max_wait_ms=60_000))

    def commit():
        c = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="wakers", enable_auto_commit=False)
        c.commit({TopicPartition("c", 0): OffsetAndMetadata(1, None, -1)})
        c.close()

    await asyncio.get_running_loop().run_in_executor(None, commit)
    r = await asyncio.wait_for(waiting, 10)
    assert r.responses[0].partitions[0].records


async def test_topic_name_collision_and_leftover_data(server):
    conn = await WireClient("names").connect("127.0.0.1", server.port)
    assert await create(conn, "a.b", partitions=1) == 0
    assert await create(conn, "a_b", partitions=1) == 17  # collides with a.b, as in Kafka
    assert await produce(conn, "a.b", batch(3)) == (0, 0)
    await conn.close()
    # A crash after the catalog forgot a deleted topic but before its files were removed:
    server.stop()
    catalog = server.data_dir / "topics.json"
    catalog.write_text(catalog.read_text().replace('"a.b"', '"gone"'))
    server.start()
    conn = await WireClient("names").connect("127.0.0.1", server.port)
    assert await create(conn, "a.b", partitions=1) == 0
    r = await conn.request(FETCH, 11, fetch_body("a.b", 0))
    p = r.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.records or b"") == (0, 0, b"")  # starts empty
    await conn.close()


async def test_acks_0_error_closes_the_connection(server, conn):
    await create(conn, "quiet", partitions=1)
    conn.send(
        PRODUCE,
        9,
        cls(PRODUCE, 9)(
            transactional_id=None,
            acks=0,
            timeout=5000 * MS,
            topic_data=(
                cls(PRODUCE, 9, "TopicProduceData")(
                    name="quiet", partition_data=(cls(PRODUCE, 9, "PartitionProduceData")(index=0, records=batch(2)),)
                ),
            ),
        ),
    )
    r = await conn.request(FETCH, 11, fetch_body("quiet", 0))  # acks=0: no answer, the next one comes
    assert r.responses[0].partitions[0].high_watermark == 2
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        from protocol.messages import encode_request

        body = cls(PRODUCE, 9)(
            transactional_id=None,
            acks=0,
            timeout=5000 * MS,
            topic_data=(
                cls(PRODUCE, 9, "TopicProduceData")(
                    name="quiet", partition_data=(cls(PRODUCE, 9, "PartitionProduceData")(index=5, records=batch(2)),)
                ),
            ),
        )
        s.sendall(encode_request(PRODUCE, 9, 1, "acks0", body))
        s.settimeout(10)
        assert s.recv(1) == b""  # no such partition: closed, as Kafka does for acks=0


async def test_shutdown_answers_long_polls_at_once(server, conn):
    """SIGTERM ends a long poll with what it has instead of waiting it out; clients that
    keep sending cannot hold the shutdown for its grace period (requests read later are
    not taken)."""
    await create(conn, "quiet", partitions=1)
    poll = conn.send(FETCH, 11, fetch_body("quiet", 0, max_wait_ms=60_000, min_bytes=10_000))
    await asyncio.sleep(0.1)  # the poll is waiting
    server.stop(timeout=30)  # (the poll alone would hold it for 60 s)
    r = await asyncio.wait_for(poll, 5)
    assert r.error_code == 0 and r.responses[0].partitions[0].records in (b"", None)
