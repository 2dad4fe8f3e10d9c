"""Committed offsets and group metadata survive restarts (SIGTERM and SIGKILL) via the log."""

from __future__ import annotations

import signal

import pytest

from tests.support.wire_client import WireClient
from tests.support.groups_wire import COMMIT, DESCRIBE, FETCH, HEARTBEAT, cls, commit_body, form, hb_body

pytestmark = [
    pytest.mark.slow,
    pytest.mark.process,
]  # server processes started, killed and restarted, or filled to their limits


async def fetch_all(port: int, group: str) -> dict:
    conn = await WireClient("fetcher").connect("127.0.0.1", port)
    try:
        r = await conn.request(FETCH, 5, cls(FETCH, 5)(group_id=group, topics=None))
        return {
            (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
            for t in r.topics
            for p in t.partitions
        }
    finally:
        await conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
async def test_offsets_survive_restart(server, sig):
    conn = await WireClient("committer").connect("127.0.0.1", server.port)
    await conn.create_topics("t", "u", partitions=20)
    member, gen = await form(conn, "durable")
    offsets = [("t", p, 100 + p) for p in range(20)] + [("u", 0, 5)]
    r = await conn.request(COMMIT, 8, commit_body(8, "durable", member, gen, offsets))
    assert all(p.error_code == 0 for t in r.topics for p in t.partitions)
    await conn.request(COMMIT, 2, commit_body(2, "standalone", "", -1, [("t", 0, 9)]))
    await conn.close()
    before = await fetch_all(server.port, "durable")
    assert len(before) == 21
    server.restart(sig)
    assert await fetch_all(server.port, "durable") == before
    assert await fetch_all(server.port, "standalone") == {("t", 0): (9, -1, "m")}
    # The group comes back as Kafka loads it: Stable, its member, assignment and generation.
    conn = await WireClient("describer").connect("127.0.0.1", server.port)
    r = await conn.request(DESCRIBE, 5, cls(DESCRIBE, 5)(groups=("durable",), include_authorized_operations=False))
    g = r.groups[0]
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.member_assignment) for m in g.members] == [(member, b"assignment")]
    hb = await conn.request(HEARTBEAT, 3, hb_body(3, "durable", member, gen))
    assert hb.error_code == 0  # the member goes on in its generation: no rebalance
    r = await conn.request(COMMIT, 8, commit_body(8, "durable", member, gen, [("t", 0, 7)]))
    assert r.topics[0].partitions[0].error_code == 0
    await conn.close()


async def test_deleted_group_stays_deleted(server):
    conn = await WireClient("c").connect("127.0.0.1", server.port)
    await conn.create_topics("t")
    await conn.request(COMMIT, 2, commit_body(2, "gone", "", -1, [("t", 0, 1)]))
    r = await conn.request(42, 2, cls(42, 2)(groups_names=("gone",)))
    assert r.results[0].error_code == 0
    await conn.close()
    server.restart(signal.SIGKILL)
    assert await fetch_all(server.port, "gone") == {}


async def test_torn_tail_is_cut_and_the_server_starts(server):
    """A crash mid-write leaves half a batch: the server drops it, keeps every whole batch."""
    conn = await WireClient("c").connect("127.0.0.1", server.port)
    await conn.create_topics("t")
    for offset in range(1, 6):
        await conn.request(COMMIT, 2, commit_body(2, "torn", "", -1, [("t", 0, offset)]))
    await conn.close()
    server.stop(signal.SIGKILL)
    from coordinator.log.offsets import partition_for

    segment = next((server.data_dir / f"__consumer_offsets-{partition_for('torn')}").glob("*.log"))
    data = segment.read_bytes()
    segment.write_bytes(data[:-7] + b"\xde\xad\xbe\xef" * 8)  # last batch torn, then garbage
    server.start()
    assert await fetch_all(server.port, "torn") == {("t", 0): (4, -1, "m")}
    assert "recovery cut the log" in server.log_text()
    # And the log keeps working after the cut.
    conn = await WireClient("c").connect("127.0.0.1", server.port)
    await conn.request(COMMIT, 2, commit_body(2, "torn", "", -1, [("t", 0, 99)]))
    await conn.close()
    server.restart(signal.SIGKILL)
    assert await fetch_all(server.port, "torn") == {("t", 0): (99, -1, "m")}
