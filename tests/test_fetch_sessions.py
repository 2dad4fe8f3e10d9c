"""Incremental fetch sessions (KIP-227): raw frames for every rule of Kafka's FetchManager,
the cache's eviction order, and real clients observed through a proxy (kafka-python opens a
session and fetches incrementally; librdkafka 2.x sends epoch -1, sessionless)."""

from __future__ import annotations

import asyncio
import struct
import time

from tests.support.wire_client import WireClient
from coordinator.broker.fetch_sessions import CachedPartition, FetchSessionCache
from protocol.messages import decode_request
from protocol.record_batch import iter_records
from tests.support.process import create_topics, free_port
from tests.support.proxy import LoggingProxy
from tests.support.data_plane import FETCH, MS, batch, cls, create, produce

V = 12


def fetch_req(parts, session_id, epoch, forget=(), v=V, max_wait_ms=0, topic_ids=None):
    """parts: [(topic, partition, offset)]; forget: [(topic, [partitions])]."""
    F, T, Fg = cls(FETCH, v, "FetchPartition"), cls(FETCH, v, "FetchTopic"), cls(FETCH, v, "ForgottenTopic")
    topics = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(
            F(
                partition=partition,
                current_leader_epoch=-1,
                fetch_offset=offset,
                log_start_offset=-1,
                partition_max_bytes=1 << 20,
            )
        )
    key = (lambda n: {"topic_id": topic_ids[n]}) if v >= 13 else (lambda n: {"topic": n})
    return cls(FETCH, v)(
        replica_id=-1,
        max_wait=max_wait_ms * MS,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(T(**key(n), partitions=tuple(ps)) for n, ps in topics.items()),
        forgotten_topics_data=tuple(Fg(**key(n), partitions=tuple(ps)) for n, ps in forget),
        rack_id="",
    )


def seen(r):
    """{(topic, partition): number of records} of a response."""
    return {
        (t.topic, p.partition_index): sum(1 for _ in iter_records(p.records)) for t in r.responses for p in t.partitions
    }


async def test_session_rules_over_the_wire(server):
    conn = await WireClient("fs").connect("127.0.0.1", server.port)
    await create(conn, "s", partitions=3)
    await produce(conn, "s", batch(2), partition=0)
    await produce(conn, "s", batch(1), partition=1)
    r = await conn.request(FETCH, V, fetch_req([("s", 0, 0), ("s", 1, 0), ("s", 2, 0)], 0, 0))
    sid = r.session_id
    assert r.error_code == 0 and sid > 0
    assert seen(r) == {("s", 0): 2, ("s", 1): 1, ("s", 2): 0}  # the full answer
    # epoch 1: new fetch offsets, nothing new anywhere: an empty answer
    r = await conn.request(FETCH, V, fetch_req([("s", 0, 2), ("s", 1, 1)], sid, 1))
    assert (r.error_code, r.session_id, seen(r)) == (0, sid, {})
    await produce(conn, "s", batch(3), partition=2)
    r = await conn.request(FETCH, V, fetch_req([], sid, 2))
    assert seen(r) == {("s", 2): 3}  # only the partition with news (its cached offset was 0)
    # a wrong epoch, an unknown id: Kafka's errors, no data
    r = await conn.request(FETCH, V, fetch_req([], sid, 2))
    assert (r.error_code, r.session_id, r.responses) == (71, 0, ())  # INVALID_FETCH_SESSION_EPOCH
    r = await conn.request(FETCH, V, fetch_req([], sid + 1, 1))
    assert (r.error_code, r.responses) == (70, ())  # FETCH_SESSION_ID_NOT_FOUND
    # forget partition 0: its news is no longer sent
    r = await conn.request(FETCH, V, fetch_req([("s", 2, 3)], sid, 3, forget=[("s", [0])]))
    assert seen(r) == {}
    await produce(conn, "s", batch(1), partition=0)
    await produce(conn, "s", batch(1), partition=1)
    r = await conn.request(FETCH, V, fetch_req([], sid, 4))
    assert seen(r) == {("s", 1): 1}
    # a long poll in the session wakes on a produce to one of its partitions
    waiting = conn.send(FETCH, V, fetch_req([("s", 1, 2)], sid, 5, max_wait_ms=30_000))
    other = await WireClient("p").connect("127.0.0.1", server.port)
    await asyncio.sleep(0.05)
    await produce(other, "s", batch(2), partition=2)
    r = await asyncio.wait_for(waiting, 10)
    assert seen(r) == {("s", 2): 2}
    # forgetting every partition ends the session: answered without one
    r = await conn.request(FETCH, V, fetch_req([], sid, 6, forget=[("s", [1, 2])]))
    assert (r.error_code, r.session_id, r.responses) == (0, 0, ())
    r = await conn.request(FETCH, V, fetch_req([], sid, 7))
    assert r.error_code == 70
    # a session id in a full fetch closes that session; epoch -1 opens none
    r = await conn.request(FETCH, V, fetch_req([("s", 0, 0)], 0, 0))
    sid = r.session_id
    r = await conn.request(FETCH, V, fetch_req([("s", 0, 0)], sid, -1))
    assert (r.error_code, r.session_id, seen(r)) == (0, 0, {("s", 0): 3})
    assert (await conn.request(FETCH, V, fetch_req([], sid, 1))).error_code == 70
    await other.close()
    await conn.close()
    assert "Traceback" not in server.log_text()


async def test_topic_id_sessions_and_the_slot_limit(server_factory):
    server = server_factory("--max-incremental-fetch-session-cache-slots", "1")
    conn = await WireClient("fs").connect("127.0.0.1", server.port)
    await create(conn, "s", partitions=1)
    M = cls(3, 12, "MetadataRequestTopic")
    md = await conn.request(
        3,
        12,
        cls(3, 12)(
            topics=(M(topic_id=None, name="s"),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    ids = {"s": md.topics[0].topic_id}
    r = await conn.request(FETCH, 13, fetch_req([("s", 0, 0)], 0, 0, v=13, topic_ids=ids))
    sid = r.session_id
    assert sid > 0 and r.responses[0].topic_id == ids["s"]
    # the one slot is taken by a young session: the next full fetch gets no session
    r = await conn.request(FETCH, 13, fetch_req([("s", 0, 0)], 0, 0, v=13, topic_ids=ids))
    assert (r.error_code, r.session_id) == (0, 0)
    # a topic-id session fetched with names: FETCH_SESSION_TOPIC_ID_ERROR
    assert (await conn.request(FETCH, 12, fetch_req([], sid, 1))).error_code == 106
    await produce(conn, "s", batch(2))
    r = await conn.request(FETCH, 13, fetch_req([], sid, 1, v=13, topic_ids=ids))
    assert r.session_id == sid and [(t.topic_id, len(t.partitions)) for t in r.responses] == [(ids["s"], 1)]
    await conn.close()


def test_cache_eviction_follows_kafka():
    now = [0]
    cache = FetchSessionCache(max_slots=2, eviction_ms=120_000, clock=lambda: now[0])

    def parts(n):
        return {("t", i): CachedPartition("t", None, i, 0, 1) for i in range(n)}

    a = cache.create(False, parts(1))
    b = cache.create(False, parts(3))
    assert a and b
    assert cache.create(False, parts(10)) == 0  # both young: nothing may go
    now[0] = 121_000
    cache.touch(cache.get(a))
    cache.touch(cache.get(b))
    assert cache.create(False, parts(1)) == 0  # old enough, but not smaller than the new one
    c = cache.create(False, parts(2))  # evicts a (1 partition, created over 2 minutes ago)
    assert c and cache.get(a) is None and cache.get(b) is not None
    now[0] = 300_000
    cache.touch(cache.get(c))
    d = cache.create(False, parts(1))  # b unused for over 2 minutes: stale, evicted first
    assert d and cache.get(b) is None and cache.get(c) is not None


class FetchProxy(LoggingProxy):
    """Also keeps (session id, epoch) of every Fetch request that passes."""

    def __init__(self, *a) -> None:
        self.fetches: list[tuple[int, int]] = []
        super().__init__(*a)

    def _record(self, req: bytes) -> None:
        super()._record(req)
        if struct.unpack_from(">h", req)[0] == 1:
            _, body = decode_request(req)
            with self.lock:
                self.fetches.append((body.session_id, body.session_epoch))


def test_kafka_python_fetches_incrementally(server_factory):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    proxy_port = free_port()
    server = server_factory("--advertised-host", "127.0.0.1", "--advertised-port", str(proxy_port))
    proxy = FetchProxy(proxy_port, server.port)
    try:
        create_topics(server.port, "inc", partitions=2)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy_port}")
        for i in range(6):
            producer.send("inc", value=b"a%d" % i, partition=i % 2)
        producer.flush()
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{proxy_port}", fetch_max_wait_ms=50)
        consumer.assign([TopicPartition("inc", 0), TopicPartition("inc", 1)])
        consumer.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 30
        produced_at = set()
        while len(got) < 12 and time.monotonic() < deadline:
            for msgs in consumer.poll(100).values():
                got += [m.value for m in msgs]
            if len(got) in (6, 8, 10) and len(got) not in produced_at:  # more, in three rounds, in the session
                produced_at.add(len(got))
                producer.send("inc", value=b"b%d" % len(got), partition=0)
                producer.send("inc", value=b"b%d" % (len(got) + 1), partition=1)
                producer.flush()
        consumer.close()
        producer.close()
        assert sorted(got) == sorted([b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(6, 12)])
        with proxy.lock:
            fetches = list(proxy.fetches)
        assert fetches[0][1] == 0  # a full fetch asking for a session
        sid = fetches[1][0]
        assert sid > 0
        in_session = [e for s, e in fetches if s == sid]
        assert len(in_session) >= 3, fetches
        assert in_session == list(range(1, len(in_session) + 1))
    finally:
        proxy.close()


def test_confluent_kafka_fetches_sessionless(server_factory):
    """librdkafka 2.x does not implement KIP-227: every Fetch is epoch -1, answered in full."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    proxy_port = free_port()
    server = server_factory("--advertised-host", "127.0.0.1", "--advertised-port", str(proxy_port))
    proxy = FetchProxy(proxy_port, server.port)
    try:
        create_topics(server.port, "rd", partitions=1)
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{proxy_port}"})
        for i in range(3):
            producer.produce("rd", value=b"%d" % i)
        producer.flush(30)
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{proxy_port}", "group.id": "rd", "fetch.wait.max.ms": 50})
        consumer.assign([TopicPartition("rd", 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                got.append(m.value())
        consumer.close()
        assert got == [b"0", b"1", b"2"]
        with proxy.lock:
            assert proxy.fetches and all(e == -1 for _, e in proxy.fetches)
    finally:
        proxy.close()
