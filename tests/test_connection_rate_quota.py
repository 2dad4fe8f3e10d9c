"""connection_creation_rate as Kafka's ConnectionQuotas enforces it per ip: connections from an
address past its rate are held unread and closed after their throttle time, not counted;
another quota-less address or a quota removed lets connections in again."""

from __future__ import annotations

import pytest

from tests.support.data_plane import cls
from tests.support.wire_client import WireClient
from tests.support.quotas import alter

API_VERSIONS, INVALID_REQUEST = 18, 42


async def api_versions(conn):
    return await conn.request(
        API_VERSIONS, 3, cls(API_VERSIONS, 3)(client_software_name="t", client_software_version="1")
    )


async def test_connections_over_the_rate_are_closed(server):
    admin = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    opened = []
    try:
        # 1 connection/s, measured over at least 10 s: about ten are let in, then no more
        assert await alter(admin, [([("ip", "127.0.0.1")], [("connection_creation_rate", 1)])]) == [(0, None)]
        refused = None
        for i in range(30):
            conn = await WireClient(f"c{i}").connect("127.0.0.1", server.port)
            opened.append(conn)
            try:
                await api_versions(conn)
            except ConnectionError:  # held unread, then closed
                refused = i
                break
        assert refused is not None and refused >= 5
        # the connections let in still work
        assert (await api_versions(opened[0])).error_code == 0
        # the quota removed: connections are let in again
        assert await alter(admin, [([("ip", "127.0.0.1")], [("connection_creation_rate", None)])]) == [(0, None)]
        conn = await WireClient("after").connect("127.0.0.1", server.port)
        opened.append(conn)
        assert (await api_versions(conn)).error_code == 0
    finally:
        for conn in opened:
            await conn.close()
        await admin.close()


@pytest.mark.parametrize("value", [0, -1, 1.5, 2**31])
async def test_bad_values(server, value):
    admin = await WireClient("quota-admin").connect("127.0.0.1", server.port)
    try:
        [(error, _)] = await alter(admin, [([("ip", None)], [("connection_creation_rate", value)])])
        assert error == INVALID_REQUEST
        [(error, _)] = await alter(admin, [([("client-id", "x")], [("connection_creation_rate", 5)])])
        assert error == INVALID_REQUEST
    finally:
        await admin.close()
