"""Share-partition state under the write contract: a state write to `__share_group_state` that
fails (ENOSPC, from an in-process writer made to fail) is undone, as Kafka's
SharePartition.rollbackOrProcessStateUpdates undoes it, and answered with Kafka's error: no
traceback, no closed connection, nothing left acquired, and what memory holds is what a
restart rebuilds. One test per operation: a fetch (it writes nothing, as in Kafka), an
acknowledgement (accept, release, reject), a lock that expires, AlterShareGroupOffsets and
DeleteShareGroupOffsets. And the delivery count limit across a restart."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode as E

from coordinator.share.partition import AVAILABLE, SharePartition
from tests.support.share import (
    ACCEPT,
    NO_BATCHING,
    REJECT,
    RELEASE,
    SACK,
    SFETCH,
    SHB,
    acquired,
    cls,
    part,
    sack,
    sfetch,
    share_join,
    shb,
    start,
)
from tests.support.share_state import FailingWrites, live, shares
from tests.support.wire_client import WireClient

ALTER, DELETE_OFFSETS = 91, 92


@pytest.fixture
def server(server_factory):
    return server_factory(*NO_BATCHING)


def rebuilt(server, group="g", partition=0):
    """What a restart rebuilds from `__share_group_state`."""
    server.restart()
    m = shares(server)
    key = next(k for k in m.state.states if k[0] == group and k[2] == partition)
    stored = m.state.states[key]
    sp = SharePartition.restored(stored.start, stored.records)
    return sp.start, {o: (r.state, r.count) for o, r in sp.records.items()}


async def test_a_fetch_writes_nothing_so_it_is_served_while_writes_fail(server):
    """An acquisition is not written, as Kafka's SharePartition.acquire writes nothing: a
    fetch is served whatever the state log does."""
    conn, tid = await start(server)
    try:
        with FailingWrites(server) as writes:
            r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
            assert acquired(r) == [(0, 9, 1)] and writes.failed == 0
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 1, tid, acks={0: [(0, 9, [RELEASE])]}, max_records=0))
        assert part(r).acknowledge_error_code == E.none
        with FailingWrites(server) as writes:
            r = await conn.request(SFETCH, 1, sfetch("g", "a", 2, tid))
            assert acquired(r) == [(0, 9, 2)] and writes.failed == 0
        memory = live(server)
        assert memory == (0, {o: (AVAILABLE, 1) for o in range(10)})
    finally:
        await conn.close()
    assert rebuilt(server) == memory
    assert "Traceback" not in server.log_text()


@pytest.mark.parametrize("kind", [ACCEPT, RELEASE, REJECT])
async def test_an_acknowledgement_not_written_is_undone(server, kind):
    conn, tid = await start(server)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 9, 1)]
        before = live(server)
        with FailingWrites(server) as writes:
            r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 2, [kind])]}))
            assert writes.failed == 1
        # Answered (the connection lives on) with Kafka's error, and nothing changed.
        assert r.error_code == E.none and part(r).error_code == E.coordinator_not_available
        sp = next(iter(shares(server).partitions.values()))
        assert live(server) == before and sp.start == 0
        assert [sp.records[o].member for o in range(3)] == ["a"] * 3 and sp.acquired == 10  # still a's
        # The client's retry applies it once.
        r = await conn.request(SACK, 1, sack("g", "a", 2, tid, {0: [(0, 2, [kind])]}))
        assert part(r).error_code == E.none
        assert sp.start == (0 if kind == RELEASE else 3)
        memory = live(server)
    finally:
        await conn.close()
    assert rebuilt(server) == memory
    assert "Traceback" not in server.log_text()


async def test_a_lock_that_expires_while_writes_fail(server):
    """Kafka keeps an expired lock's release when its write fails (it logs the failure): the
    records are Available, nothing is left acquired, and the next written change carries them."""
    conn, tid = await start(server)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 9, 1)]
        m = shares(server)
        key = next(iter(m.partitions))

        async def expire() -> None:
            for r in m.partitions[key].records.values():
                r.deadline = 0.0  # (the lock ran out)
            m._expire(key)
            await asyncio.sleep(0)  # (the failure is reported on the next turn)
            await asyncio.sleep(0)

        with FailingWrites(server) as writes:
            server._call(expire())
            assert writes.failed == 1
        sp = m.partitions[key]
        assert sp.acquired == 0 and {(r.state, r.count) for r in sp.records.values()} == {(AVAILABLE, 1)}
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 1, tid))
        assert acquired(r) == [(0, 9, 2)]
        r = await conn.request(SACK, 1, sack("g", "a", 2, tid, {0: [(0, 9, [ACCEPT])]}))
        assert part(r).error_code == E.none
        memory = live(server)
        assert memory == (10, {})
    finally:
        await conn.close()
    assert rebuilt(server) == memory
    assert "Traceback" not in server.log_text()


async def alter(conn, offset):
    T, P = cls(ALTER, 0, "AlterShareGroupOffsetsRequestTopic"), cls(ALTER, 0, "AlterShareGroupOffsetsRequestPartition")
    body = cls(ALTER, 0)(
        group_id="g", topics=(T(topic_name="t", partitions=(P(partition_index=0, start_offset=offset),)),)
    )
    return await conn.request(ALTER, 0, body)


async def test_offsets_altered_or_deleted_while_writes_fail_change_nothing(server):
    conn, tid = await start(server)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        r = await conn.request(SFETCH, 1, sfetch("g", "a", -1, tid, acks={0: [(0, 3, [ACCEPT])]}, partitions=()))
        assert part(r).acknowledge_error_code == E.none
        await conn.request(SHB, 1, cls(SHB, 1)(group_id="g", member_id="a", member_epoch=-1))
        m = shares(server)
        key = next(iter(m.partitions))
        before = live(server), m.state.states[key].state_epoch
        with FailingWrites(server):
            r = await alter(conn, 7)
            assert r.error_code == E.none and r.responses[0].partitions[0].error_code == E.kafka_storage_error
            D = cls(DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic")
            r = await conn.request(DELETE_OFFSETS, 0, cls(DELETE_OFFSETS, 0)(group_id="g", topics=(D(topic_name="t"),)))
            assert r.responses[0].error_code == E.kafka_storage_error
        assert (live(server), m.state.states[key].state_epoch) == before
        memory = live(server)
        # The connection lives on.
        assert (await alter(conn, 7)).responses[0].partitions[0].error_code == E.none
    finally:
        await conn.close()
    assert memory == (4, {o: (AVAILABLE, 1) for o in range(4, 10)})
    assert rebuilt(server) == (7, {})


async def test_a_record_in_flight_when_the_server_stops_is_delivered_with_the_count_it_had(server):
    """share.delivery.count.limit 2: records 0-4 released once (delivery 1, written), then
    acquired again (delivery 2, not written) when the server stops; 5-9 acquired once. As in
    Kafka, the restart rebuilds what was written: 0-4 come back as their second delivery (the
    one the stop interrupted) and 5-9 as their first, so no delivery count passes the limit;
    released at the limit, 0-4 are archived."""
    conn, tid = await start(server, share_delivery_count_limit="2")
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, max_records=5, v=2, share_acquire_mode=1))
        assert acquired(r) == [(0, 4, 1)]
        r = await conn.request(
            SFETCH, 1, sfetch("g", "a", 1, tid, acks={0: [(0, 4, [RELEASE])]}, max_records=5, v=2, share_acquire_mode=1)
        )
        assert acquired(r) == [(0, 4, 2)]
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 2, tid, max_records=5, v=2, share_acquire_mode=1))
        assert acquired(r) == [(5, 9, 1)]
    finally:
        await conn.close()
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.request(
            SHB, 1, cls(SHB, 1)(group_id="g", member_id="a", member_epoch=0, subscribed_topic_names=("t",))
        )
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 4, 2), (5, 9, 1)]
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 4, [RELEASE])]}))
        assert part(r).error_code == E.none
        memory = live(server)
        assert memory == (5, {})  # 0-4 archived at the limit
    finally:
        await conn.close()
    assert rebuilt(server) == memory


def initialization(server, group="g"):
    """The group's initializing and initialized share-partitions, and the share-partitions
    whose state `__share_group_state` holds."""
    m = shares(server)
    g = m.groups.group(group)
    return (
        {t: ps for t, (_, ps) in g.initializing.items()},
        {t: ps for t, (_, ps) in g.initialized.items()},
        sorted(k for k in m.state.states if k[0] == group),
    )


async def test_a_partition_whose_first_state_is_not_written_is_not_initialized(server):
    """As Kafka's GroupCoordinatorService.persisterInitialize: the heartbeat that subscribes
    the group to a topic is answered once the share-partitions' first state is written; if it
    could not be, the partitions leave the group's initializing set (uninitializeShareGroupState)
    and the heartbeat gets the write's error. Memory is then what a restart rebuilds, and the
    next heartbeat initializes them again."""
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=2)
        with FailingWrites(server) as writes:
            r = await conn.request(SHB, 1, shb("g", "a", 0, ("t",)))
            assert (r.error_code, r.error_message) == (E.not_coordinator, "This is not the correct coordinator.")
            assert writes.failed == 2
        memory = initialization(server)
        assert memory == ({}, {}, [])
    finally:
        await conn.close()
    server.restart()
    assert initialization(server) == memory
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        r = await share_join(conn, "g", "a", ("t",))
        assert r.error_code == E.none and len(r.assignment.topic_partitions[0].partitions) == 2
        _, initialized, stored = initialization(server)
        assert list(initialized.values()) == [frozenset({0, 1})] and len(stored) == 2
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_the_server_snapshots_cold_share_partitions_on_its_timer(server_factory):
    """--share-coordinator-cold-partition-snapshot-interval-ms (Kafka's
    share.coordinator.cold.partition.snapshot.interval.ms): a share-partition whose last
    snapshot is that old gets a new one by the server's timer, its state as it is."""
    server = server_factory(*NO_BATCHING, "--share-coordinator-cold-partition-snapshot-interval-ms", "100")
    conn, tid = await start(server)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 3, [ACCEPT])]}))
        assert part(r).error_code == E.none
        m = shares(server)
        key = next(iter(m.partitions))
        for _ in range(1000):  # (a cold snapshot: created as the one before it, written later)
            stored = m.state.states[key]
            if stored.write_timestamp > stored.create_timestamp:
                break
            await asyncio.sleep(0.01)
        assert stored.write_timestamp > stored.create_timestamp and stored.snapshot_epoch >= 1
        memory = live(server)
    finally:
        await conn.close()
    assert rebuilt(server) == memory
