"""Old clients that never send ApiVersions: Produce v0-2 and Fetch v0-3 with message formats
v0/v1, up-converted on produce and down-converted on fetch as Kafka 3.x does.

Requests and message sets are built, and answers decoded, by aiokafka's independent
protocol and legacy-record classes, over a raw socket."""

from __future__ import annotations

import pytest

import asyncio
import struct

from aiokafka.protocol.fetch import (
    FetchRequest_v0,
    FetchRequest_v2,
    FetchRequest_v3,
    FetchResponse_v0,
    FetchResponse_v2,
    FetchResponse_v3,
)
from aiokafka.protocol.produce import ProduceRequest_v0, ProduceRequest_v2, ProduceResponse_v0, ProduceResponse_v2
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from tests.support.wire_client import WireClient
from protocol.messages import MalformedRequest, codec, decode_body
from protocol.record_batch import GZIP, ZSTD, build_batch, iter_batches
from tests.support.data_plane import FETCH, create, fetch_body, produce
from tests.support.legacy import roundtrip


@pytest.fixture
def server(server_factory):
    """A server that behaves as Kafka 3.9: the request versions and message formats Kafka 4
    removed are what these tests are about."""
    return server_factory("--kafka-version", "3.9")


def message_set(magic: int, values: list[bytes], compression: int = 0, timestamp: int = 1_700_000_000_000) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, compression, 1 << 20)
    for i, v in enumerate(values):
        builder.append(i, timestamp, b"key-%d" % i, v)
    return bytes(builder.build())


def read_messages(data: bytes) -> list[tuple]:
    """(offset, timestamp, key, value, magic) of every message, as an old client reads them."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        out += [(r.offset, r.timestamp, r.key, r.value, data[16] if len(data) > 16 else None) for r in batch]
    return out


def setup_topics(port: int, *topics: tuple[str, list]) -> None:
    async def run():
        conn = await WireClient("setup").connect("127.0.0.1", port)
        for name, configs in topics:
            assert await create(conn, name, partitions=1, configs=configs) == 0
        await conn.close()

    asyncio.run(run())


def test_produce_v2_fetch_v2_round_trip_with_message_format_v1(server):
    setup_topics(server.port, ("old", []))
    r = roundtrip(
        server.port,
        ProduceRequest_v2(-1, 5000, [("old", [(0, message_set(1, [b"a", b"b"], GZIP))])]),
        ProduceResponse_v2,
    )
    assert r.topics == [("old", [(0, 0, 0, -1)])]  # offset 0, CreateTime: no log append time
    r = roundtrip(
        server.port, ProduceRequest_v2(-1, 5000, [("old", [(0, message_set(1, [b"c"]))])]), ProduceResponse_v2
    )
    assert r.topics == [("old", [(0, 0, 2, -1)])]
    r = roundtrip(server.port, FetchRequest_v2(-1, 0, 1, [("old", [(0, 0, 1 << 20)])]), FetchResponse_v2)
    ((topic, [(partition, error, high_watermark, data)]),) = r.topics
    assert (topic, partition, error, high_watermark) == ("old", 0, 0, 3)
    assert data[16] == 1  # magic 1 for Fetch v2
    assert [(o, t, k, v) for o, t, k, v, _ in read_messages(data)] == [
        (0, 1_700_000_000_000, b"key-0", b"a"),
        (1, 1_700_000_000_000, b"key-1", b"b"),
        (2, 1_700_000_000_000, b"key-0", b"c"),
    ]
    # Fetch v3 with a fetch offset inside the first (gzip) batch: whole batches, as Kafka
    r = roundtrip(server.port, FetchRequest_v3(-1, 0, 1, 1 << 20, [("old", [(0, 2, 1 << 20)])]), FetchResponse_v3)
    assert [m[3] for m in read_messages(r.topics[0][1][0][3])] == [b"c"]


def test_produce_v0_fetch_v0_with_message_format_v0_and_modern_readers(server):
    setup_topics(server.port, ("zero", []))
    r = roundtrip(
        server.port, ProduceRequest_v0(1, 5000, [("zero", [(0, message_set(0, [b"x", b"y"]))])]), ProduceResponse_v0
    )
    assert r.topics == [("zero", [(0, 0, 0)])]

    async def modern():  # what v2-format readers see: the up-converted batch
        conn = await WireClient("new").connect("127.0.0.1", server.port)
        await produce(conn, "zero", build_batch([(b"k", b"z")], timestamp_ms=5, compression=ZSTD))
        r = await conn.request(FETCH, 11, fetch_body("zero", 0))
        await conn.close()
        return r.responses[0].partitions[0].records

    data = asyncio.run(modern())
    (_, h), _zstd = list(iter_batches(data))
    assert h.record_count == 2 and h.max_timestamp == -1  # magic 0 messages have no timestamp
    r = roundtrip(server.port, FetchRequest_v0(-1, 0, 1, [("zero", [(0, 0, 1 << 20)])]), FetchResponse_v0)
    ((_, [(_, error, hw, data)]),) = r.topics
    # the zstd batch cannot be carried by message format v0: Kafka's UNSUPPORTED_COMPRESSION_TYPE,
    # answered as FetchResponse.partitionResponse(error) is, with no high watermark (-1)
    assert (error, hw, data) == (76, -1, b"")


def test_downconversion_disabled_and_bad_message_sets(server):
    setup_topics(server.port, ("nodown", [("message.downconversion.enable", "false")]), ("t", []))
    roundtrip(server.port, ProduceRequest_v2(-1, 5000, [("nodown", [(0, message_set(1, [b"a"]))])]), ProduceResponse_v2)
    r = roundtrip(server.port, FetchRequest_v2(-1, 0, 1, [("nodown", [(0, 0, 1 << 20)])]), FetchResponse_v2)
    assert r.topics[0][1][0][1] == 35  # UNSUPPORTED_VERSION, as Kafka
    good = message_set(1, [b"a", b"b"])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    for records in (bytes(bad_crc), good[:-3], good[:10]):
        r = roundtrip(server.port, ProduceRequest_v2(-1, 5000, [("t", [(0, records)])]), ProduceResponse_v2)
        assert r.topics[0][1][0][1] == 2, records  # CORRUPT_MESSAGE
    r = roundtrip(server.port, ProduceRequest_v2(-1, 5000, [("missing", [(0, good)])]), ProduceResponse_v2)
    assert r.topics[0][1][0][1] == 3
    assert "Traceback" not in server.log_text()


def test_truncated_old_produce_and_fetch_bodies_are_malformed():
    bodies = [
        (0, 2, ProduceRequest_v2(-1, 100, [("t", [(0, message_set(1, [b"a"]))])]).encode()),
        (1, 3, FetchRequest_v3(-1, 0, 1, 100, [("t", [(0, 0, 100)])]).encode()),
        (1, 0, FetchRequest_v0(-1, 0, 1, [("t", [(0, 0, 100)])]).encode()),
        (23, 1, struct.pack(">ih", 1, 1) + b"t" + struct.pack(">iii", 1, 0, 0)),
    ]
    for key, version, body in bodies:
        c = codec(key, version)
        decode_body(c, body, 0)
        for cut in range(len(body)):
            try:
                decode_body(c, body[:cut], 0)
            except MalformedRequest:
                continue
            raise AssertionError(f"api {key} v{version}: {cut} of {len(body)} bytes decoded")


def test_kafka_python_as_an_old_client(server):
    """kafka-python pinned to broker 0.9 (Produce/Fetch v1, message format v0) and 0.10.1
    (Produce v2, Fetch v3, format v1) produces and consumes end to end, in a group."""
    from kafka import KafkaConsumer, KafkaProducer

    setup_topics(server.port, ("legacy-e2e", []))
    for api, values in (((0, 9), [b"a", b"b"]), ((0, 10, 1), [b"c", b"d"])):
        producer = KafkaProducer(bootstrap_servers=server.bootstrap, api_version=api)
        for v in values:
            producer.send("legacy-e2e", key=b"k", value=v)
        producer.flush()
        producer.close()
    for api, group in (((0, 10, 1), "old-v1"), ((0, 9), "old-v0")):
        consumer = KafkaConsumer(
            "legacy-e2e",
            bootstrap_servers=server.bootstrap,
            api_version=api,
            group_id=group,
            auto_offset_reset="earliest",
            consumer_timeout_ms=3000,
        )
        got = []
        for m in consumer:
            got.append((m.offset, m.value))
            if len(got) == 4:
                break
        consumer.close()
        assert got == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")], api


async def olep(conn, v, topic, partition, epoch, current=-1):
    from tests.support.wire_client import request_class as rc

    P, T = rc(23, v, "OffsetForLeaderPartition"), rc(23, v, "OffsetForLeaderTopic")
    from coordinator.apis import build

    body = build(
        rc(23, v),
        dict(
            replica_id=-1,
            topics=(
                T(topic=topic, partitions=(P(partition=partition, current_leader_epoch=current, leader_epoch=epoch),)),
            ),
        ),
    )
    p = (await conn.request(23, v, body)).topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


async def test_offset_for_leader_epoch(server):
    """One leader epoch, 0, since the log's start: it ends at the log end offset."""
    conn = await WireClient("olep").connect("127.0.0.1", server.port)
    assert await create(conn, "e", partitions=1) == 0
    await produce(conn, "e", build_batch([(b"k", b"v")] * 3, timestamp_ms=1))
    for v in (2, 3, 4):
        assert await olep(conn, v, "e", 0, 0) == (0, 0, 3)
        assert await olep(conn, v, "e", 0, 5) == (0, -1, -1)  # an epoch we never had
        assert await olep(conn, v, "e", 0, 0, current=3) == (75, -1, -1)  # UNKNOWN_LEADER_EPOCH
        assert (await olep(conn, v, "e", 7, 0))[0] == 3
    await conn.close()
    from kafka.protocol.old.offset_for_leader_epoch import (
        OffsetForLeaderEpochRequest_v0,
        OffsetForLeaderEpochRequest_v1,
        OffsetForLeaderEpochResponse_v0,
        OffsetForLeaderEpochResponse_v1,
    )

    r = roundtrip(server.port, OffsetForLeaderEpochRequest_v0([("e", [(0, 0)])]), OffsetForLeaderEpochResponse_v0)
    assert r.topics == [("e", [(0, 0, 3)])]
    r = roundtrip(
        server.port, OffsetForLeaderEpochRequest_v1([("e", [(0, 0), (1, 0)])]), OffsetForLeaderEpochResponse_v1
    )
    assert r.topics == [("e", [(0, 0, 0, 3), (3, 1, -1, -1)])]


def test_damaged_message_sets_are_corrupt_never_a_crash():
    """Random damage with the CRC made valid again (what a buggy or hostile producer can
    send): up-conversion answers CorruptBatch, nothing else (aiokafka's legacy reader
    crashed the process on such input: it is not used for produced bytes)."""
    import random
    import zlib

    from protocol.legacy_records import up_convert
    from protocol.record_batch import LZ4, SNAPPY, CorruptBatch

    rng = random.Random(7)
    for magic, compression in ((0, 0), (1, 0), (0, GZIP), (1, GZIP), (1, SNAPPY), (1, LZ4)):
        good = message_set(magic, [b"v" * 50] * 3, compression)
        for _ in range(200):
            m = bytearray(good)
            for _ in range(rng.randint(1, 4)):
                m[rng.randrange(len(m))] = rng.randrange(256)
            if len(m) > 17 and rng.random() < 0.8:
                size = min(struct.unpack_from(">i", m, 8)[0] + 12, len(m))
                struct.pack_into(">I", m, 12, zlib.crc32(m[16:size]) & 0xFFFFFFFF)
            try:
                up_convert(bytes(m))
            except CorruptBatch:
                pass
