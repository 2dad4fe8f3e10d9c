"""request_percentage as Kafka's ClientRequestQuotaManager enforces it, the event loop being
the one thread it is a share of: a client whose requests take more of the loop's time than its
quota gets throttle_time_ms > 0 (at most one window) and its connection muted; ApiVersions is
exempt; seen over the wire and by confluent-kafka's throttle_cb."""

from __future__ import annotations

import asyncio

from confluent_kafka import Producer

from tests.support.data_plane import cls
from tests.support.wire_client import WireClient
from tests.support.quotas import alter

METADATA, API_VERSIONS = 3, 18
INVALID_REQUEST = 42
WINDOW_MS = 1000  # --quota-window-size-seconds 1: the longest a request quota throttles


async def set_percentage(server, entity, value):
    conn = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    try:
        return await alter(conn, [(entity, [("request_percentage", value)])])
    finally:
        await conn.close()


async def metadata_throttle(conn) -> int:
    r = await conn.request(
        METADATA,
        12,
        cls(METADATA, 12)(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
    )
    return round(r.throttle_time.total_seconds() * 1000)


async def test_requests_over_the_quota_are_throttled(server):
    # a millionth of the loop's time: any few requests are over it
    assert await set_percentage(server, [("client-id", "busy")], 0.0001) == [(0, None)]
    conn = await WireClient("busy").connect("127.0.0.1", server.port)
    other = await WireClient("idle").connect("127.0.0.1", server.port)
    try:
        throttles = [await metadata_throttle(conn) for _ in range(5)]
        assert all(0 <= t <= WINDOW_MS for t in throttles) and max(throttles) > 0
        # ApiVersions is exempt: it is answered and counted nothing
        r = await conn.request(
            API_VERSIONS, 3, cls(API_VERSIONS, 3)(client_software_name="t", client_software_version="1")
        )
        assert r.throttle_time.total_seconds() == 0
        # a client id without a quota is not held to it
        assert [await metadata_throttle(other) for _ in range(5)] == [0] * 5
    finally:
        await conn.close()
        await other.close()


async def test_bad_values(server):
    results = await set_percentage(server, [("client-id", "x")], -5)
    results += await set_percentage(server, [("user", None)], 0)
    results += await set_percentage(server, [("ip", "127.0.0.1")], 10)
    assert [e for e, _ in results] == [INVALID_REQUEST] * 3


async def test_confluent_client_sees_the_throttle(server):
    assert await set_percentage(server, [("client-id", "busy-producer")], 0.0001) == [(0, None)]
    throttled = []
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "client.id": "busy-producer",
            "throttle_cb": lambda event: throttled.append(event.throttle_time),
        }
    )

    def until_throttled():
        for _ in range(50):
            producer.list_topics(timeout=10)
            producer.poll(0.05)
            if throttled:
                return

    await asyncio.to_thread(until_throttled)
    producer.flush(10)
    assert throttled and throttled[0] > 0
