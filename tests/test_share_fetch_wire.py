"""ShareFetch / ShareAcknowledge over raw frames: the share-partition state machine
(Available, Acquired, Acknowledged, Archived), delivery counts, lock expiry, the delivery
limit, the in-flight limit, share sessions and their epochs, every error path (nothing
changes on a refused acknowledgement), read_committed, auto offset reset and a crash."""

from __future__ import annotations

import pytest

import asyncio
import signal
import uuid

from tests.support.data_plane import produce
from tests.support.share import (
    ACCEPT,
    GAP,
    DESCRIBE_CONFIGS,
    GROUP_RESOURCE,
    INCREMENTAL_ALTER_CONFIGS,
    MS,
    RELEASE,
    REJECT,
    RENEW,
    SACK,
    SFETCH,
    NO_BATCHING,
    SHB,
    acquired,
    build_batch,
    cls,
    offsets_in,
    part,
    sack,
    set_group_configs,
    sfetch,
    shb,
    start,
    until_assigned,
)
from tests.support.wire_client import WireClient, request_class


@pytest.fixture
def server(server_factory):
    """These cases follow each heartbeat's exact answer: a target at every change (assignment
    batching off, as Kafka runs its request tests; tests/test_share_assignment_batching.py
    has it on)."""
    return server_factory(*NO_BATCHING)


async def test_acquire_acknowledge_state_machine(server):
    conn, tid = await start(server)
    try:
        a = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert a.error_code == 0 and a.acquisition_lock_timeout.total_seconds() == 30
        assert acquired(a) == [(0, 9, 1)] and offsets_in(part(a).records) == list(range(10))
        # All ten are a's: another member gets nothing.
        b = await conn.request(SFETCH, 1, sfetch("g", "b", 0, tid, max_wait_ms=50))
        assert acquired(b) == [] and part(b).records in (b"", None)
        # accept 0-2, release 3, reject 4, accept 5 (one type per offset); 6-9 stay a's.
        r = await conn.request(
            SACK, 1, sack("g", "a", 1, tid, {0: [(0, 2, [ACCEPT]), (3, 5, [RELEASE, REJECT, ACCEPT])]})
        )
        assert r.error_code == 0 and part(r).error_code == 0
        b = await conn.request(SFETCH, 1, sfetch("g", "b", 1, tid))
        assert acquired(b) == [(3, 3, 2)]  # released: delivered again, its count one more
        assert offsets_in(part(b).records) == [3]  # the stored batch holding it

        # Refused acknowledgements change nothing (checked all before any is applied):
        cases = [
            ({0: [(3, 3, [ACCEPT])]}, 121),  # INVALID_RECORD_STATE: b holds it
            ({0: [(3, 3, [ACCEPT]), (6, 6, [ACCEPT])]}, 121),  # one bad batch refuses the others too
            ({0: [(4, 4, [ACCEPT])]}, 121),  # archived
            ({0: [(6, 12, [ACCEPT])]}, 42),  # INVALID_REQUEST: past what was acquired
            ({0: [(20, 21, [ACCEPT])]}, 42),
            ({0: [(6, 7, [9])]}, 42),  # no such acknowledge type
            ({0: [(6, 7, [RENEW])]}, 42),  # RENEW needs v2
            ({0: [(6, 8, [ACCEPT, ACCEPT])]}, 42),  # types neither one nor one per offset
            ({0: [(8, 6, [ACCEPT])]}, 42),
        ]
        epoch = 2
        for acks, error in cases:
            r = await conn.request(SACK, 1, sack("g", "a", epoch, tid, acks))
            epoch += 1
            assert (r.error_code, part(r).error_code) == (0, error), (acks, r)
        r = await conn.request(SACK, 1, sack("g", "b", 2, tid, {0: [(3, 3, [ACCEPT])]}))
        assert part(r).error_code == 0
        # Acknowledgements piggy-backed on a ShareFetch: the answer says how they went.
        more = await conn.request(SFETCH, 1, sfetch("g", "a", epoch, tid, acks={0: [(6, 7, [ACCEPT])]}, max_wait_ms=50))
        assert part(more).acknowledge_error_code == 0 and acquired(more) == []
        more = await conn.request(SFETCH, 1, sfetch("g", "b", 3, tid, acks={0: [(8, 8, [ACCEPT])]}, max_wait_ms=50))
        assert part(more).acknowledge_error_code == 121  # a's, not b's
        r = await conn.request(SACK, 1, sack("g", "a", epoch + 1, tid, {0: [(0, 2, [ACCEPT]), (8, 9, [ACCEPT])]}))
        assert part(r).error_code == 0  # (0-2 are below the start now: skipped, as Kafka does)
    finally:
        await conn.close()


async def test_share_sessions_and_request_errors(server):
    conn, tid = await start(server)
    try:

        async def fetch(*args, **kw):
            return await conn.request(SFETCH, 1, sfetch(*args, **kw))

        assert (await fetch("g", "a", 3, tid)).error_code == 122  # SHARE_SESSION_NOT_FOUND
        r = await fetch("g", "a", 0, tid, acks={0: [(0, 0, [ACCEPT])]})
        assert r.error_code == 42  # INVALID_REQUEST: no acknowledgements when a session opens
        assert (await fetch("g", "a", 0, tid, max_records=3)).error_code == 0  # batches of one record: 0-2
        assert (await fetch("g", "a", 5, tid)).error_code == 123  # INVALID_SHARE_SESSION_EPOCH
        r = await conn.request(SACK, 1, sack("g", "a", 0, tid, {0: [(0, 0, [ACCEPT])]}))
        assert r.error_code == 123  # ShareAcknowledge cannot open a session
        assert (await conn.request(SACK, 1, sack("g", "zz", 1, tid, {0: [(0, 0, [ACCEPT])]}))).error_code == 122
        assert (await fetch(None, "a", 0, tid)).error_code == 42  # INVALID_REQUEST ("" is a group id, as at Kafka)
        assert (await fetch("g", "", 0, tid)).error_code == 42
        unknown = await fetch("g", "a", 1, uuid.UUID(int=7))
        assert unknown.error_code == 0 and part(unknown).error_code == 100  # UNKNOWN_TOPIC_ID
        bad_partition = await fetch("g", "a", 2, tid, partitions=(9,))
        assert part(bad_partition, 9).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        # The final epoch (-1) acknowledges and closes the session: its other records are let go.
        r = await fetch("g", "a", -1, tid, partitions=(), acks={0: [(0, 0, [ACCEPT])]})
        assert r.error_code == 0 and part(r).acknowledge_error_code == 0
        assert (await fetch("g", "a", 3, tid)).error_code == 122
        b = await fetch("g", "b", 0, tid, max_records=2)
        assert acquired(b) == [(1, 2, 2)]  # a's, released when its session closed (count kept)
        # A new session (epoch 0) replaces the member's old one, letting its records go too.
        b = await fetch("g", "b", 0, tid, max_records=2)
        assert acquired(b) == [(1, 2, 3)]
        # Forgetting a partition lets its records go.
        r = await fetch("g", "b", 1, tid, partitions=(), forget=(0,))
        c = await fetch("g", "c", 0, tid, max_records=2)
        assert acquired(c) == [(1, 2, 4)]
        # Acknowledgements in the request that forgets their partition apply first: 1 stays
        # accepted, only 2 is let go.
        r = await fetch("g", "c", 1, tid, partitions=(), forget=(0,), acks={0: [(1, 1, [ACCEPT])]})
        assert r.error_code == 0 and part(r).acknowledge_error_code == 0
        d = await fetch("g", "d", 0, tid, max_records=1)
        assert acquired(d) == [(2, 2, 5)]
    finally:
        await conn.close()


async def test_overlapping_or_unordered_batches_are_invalid_request(server):
    """KafkaApis.validateAcknowledgementBatches: a partition's batches ascend without
    overlapping; otherwise its acknowledge error is INVALID_REQUEST and nothing changes."""
    conn, tid = await start(server)
    try:
        assert acquired(await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, max_records=3))) == [(0, 2, 1)]
        for epoch, batches in enumerate(
            ([(0, 1, [ACCEPT]), (1, 2, [REJECT])], [(2, 2, [ACCEPT]), (0, 0, [ACCEPT])]), start=1
        ):
            r = await conn.request(SACK, 1, sack("g", "a", epoch, tid, {0: batches}))
            assert r.error_code == 0 and part(r).error_code == 42
        r = await conn.request(SACK, 1, sack("g", "a", 3, tid, {0: [(0, 0, [ACCEPT]), (1, 2, [ACCEPT])]}))
        assert r.error_code == 0 and part(r).error_code == 0  # all three were still acquired
    finally:
        await conn.close()


async def test_random_share_fetch_and_acknowledge_fields_get_kafka_errors(server):
    """Seeded random ShareFetch / ShareAcknowledge requests (any epoch, record limit,
    partition, acknowledgement batch, forgotten partition): each is answered with Kafka
    error codes, and the connection and the server keep serving."""
    import random

    conn, tid = await start(server, records=6)
    rnd = random.Random(932)
    top_level = {0, 24, 42, 122, 123}  # INVALID_GROUP_ID, INVALID_REQUEST, SHARE_SESSION_NOT_FOUND, ..._EPOCH
    per_partition = {0, 3, 42, 100, 121}  # UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, INVALID_RECORD_STATE

    def acks() -> dict:
        return {
            rnd.choice((0, 0, 1, -1)): [
                (first, first + rnd.randint(-1, 3), [rnd.randint(-1, 5) for _ in range(rnd.choice((0, 1, 1, 2)))])
                for first in sorted(rnd.randint(-2, 8) for _ in range(rnd.randint(1, 3)))
            ]
        }

    try:
        for _ in range(150):
            member, epoch = rnd.choice(("a", "b", "")), rnd.randint(-1, 3)
            topic_id = tid if rnd.random() < 0.9 else uuid.UUID(int=rnd.randint(0, 3))
            if rnd.random() < 0.6:
                r = await conn.request(
                    SFETCH,
                    1,
                    sfetch(
                        "g",
                        member,
                        epoch,
                        topic_id,
                        partitions=rnd.choice(((0,), (), (0, 5), (-1,))),
                        acks=acks() if rnd.random() < 0.5 else None,
                        max_records=rnd.randint(-2, 4),
                        forget=rnd.choice(((), (0,), (7,))),
                    ),
                )
                codes = [(p.error_code, p.acknowledge_error_code) for t in r.responses for p in t.partitions]
            else:
                r = await conn.request(SACK, 1, sack("g", member, epoch, topic_id, acks()))
                codes = [(p.error_code, 0) for t in r.responses for p in t.partitions]
            assert r.error_code in top_level, r
            assert all(a in per_partition and b in per_partition for a, b in codes), r
        r = await conn.request(SFETCH, 1, sfetch("g", "z", 0, tid))
        assert r.error_code == 0 and part(r).error_code == 0
    finally:
        await conn.close()


async def test_a_produce_wakes_a_waiting_share_fetch(server):
    """A long-polling ShareFetch (max_wait up to fetch.max.wait) answers once records
    are produced to its partition, with them."""
    conn, tid = await start(server, records=1)
    producer = await WireClient().connect("127.0.0.1", server.port)
    try:
        assert acquired(await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))) == [(0, 0, 1)]
        # (Sent first, the fetch finds nothing and waits; had the produce overtaken it, the
        # answer would be the same.)
        waiting = asyncio.ensure_future(conn.request(SFETCH, 1, sfetch("g", "a", 1, tid, max_wait_ms=30_000)))
        assert (await produce(producer, "t", build_batch([(None, b"late")])))[0] == 0
        assert acquired(await waiting) == [(1, 1, 1)]
    finally:
        await producer.close()
        await conn.close()


async def test_lock_expiry_and_the_delivery_limit(server_factory):
    server = server_factory(
        *NO_BATCHING, "--group-share-record-lock-duration-ms", "200", "--group-share-delivery-count-limit", "2"
    )
    conn, tid = await start(server, records=2)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 1, 1)] and r.acquisition_lock_timeout.total_seconds() == 0.2
        # Not acknowledged: the lock expires and the records are Available again (the long
        # poll wakes for them), their delivery count kept.
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 1, tid, max_wait_ms=5000))
        assert acquired(r) == [(0, 1, 2)]
        r = await conn.request(SACK, 1, sack("g", "a", 2, tid, {0: [(1, 1, [RELEASE])]}))
        assert part(r).error_code == 0
        # The second delivery was the last (group.share.delivery.count.limit=2): released or
        # expired, they are archived, never delivered again.
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 3, tid, max_wait_ms=1000))
        assert acquired(r) == []
        error, _ = await produce(conn, "t", build_batch([(None, b"new")]))
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 4, tid, max_wait_ms=1000))
        assert acquired(r) == [(2, 2, 1)]
    finally:
        await conn.close()


async def test_renew_and_record_limit_mode_v2(server_factory):
    server = server_factory(*NO_BATCHING, "--group-share-record-lock-duration-ms", "300")
    conn, tid = await start(server, records=6, per_batch=3)
    try:
        # Batch-optimized (v1, and v2 mode 0): whole batches, more than max_records.
        r = await conn.request(SFETCH, 2, sfetch("g", "a", 0, tid, max_records=1, v=2))
        assert acquired(r) == [(0, 2, 1)]
        # Record-limit mode: never more than max_records, even inside a batch.
        r = await conn.request(SFETCH, 2, sfetch("g", "b", 0, tid, max_records=1, v=2, share_acquire_mode=1))
        assert acquired(r) == [(3, 3, 1)]
        # RENEW keeps b's lock going (several times its duration), then ACCEPT.
        for epoch in range(1, 6):
            r = await conn.request(SACK, 2, sack("g", "b", epoch, tid, {0: [(3, 3, [RENEW])]}, v=2, is_renew_ack=True))
            assert part(r).error_code == 0
            await asyncio.sleep(0.1)  # a third of the lock: renewed before it would expire
        r = await conn.request(SACK, 2, sack("g", "b", 6, tid, {0: [(3, 3, [ACCEPT])]}, v=2))
        assert part(r).error_code == 0  # still b's: the renewals kept the lock
    finally:
        await conn.close()


async def test_in_flight_limit(server_factory):
    server = server_factory(*NO_BATCHING, "--group-share-partition-max-record-locks", "4")
    conn, tid = await start(server, records=10)
    try:
        a = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(a) == [(0, 3, 1)]  # the window holds 4 records at most
        b = await conn.request(SFETCH, 1, sfetch("g", "b", 0, tid, max_wait_ms=50))
        assert acquired(b) == []
        await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 1, [ACCEPT])]}))
        b = await conn.request(SFETCH, 1, sfetch("g", "b", 1, tid))
        assert acquired(b) == [(4, 5, 1)]  # the start moved on by two: two more fit
    finally:
        await conn.close()


async def test_auto_offset_reset(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=1)
        for _ in range(3):
            await produce(conn, "t", build_batch([(None, b"old")]))
        for group, reset in (
            ("latest", "latest"),
            ("earliest", "earliest"),
            ("recent", "by_duration:PT1H"),
            ("future", "by_duration:PT0S"),
        ):
            assert (await set_group_configs(conn, group, share_auto_offset_reset=reset)).error_code == 0
        hb = await until_assigned(conn, "x", "a", await conn.request(SHB, 1, shb("x", "a", 0, ("t",))))
        tid = hb.assignment.topic_partitions[0].topic_id
        got = {
            g: acquired(await conn.request(SFETCH, 1, sfetch(g, "a", 0, tid)))
            for g in ("latest", "earliest", "recent", "future", "default")
        }
        assert got == {"latest": [], "earliest": [(0, 2, 1)], "recent": [(0, 2, 1)], "future": [], "default": []}
        await produce(conn, "t", build_batch([(None, b"new")]))
        r = await conn.request(SFETCH, 1, sfetch("latest", "a", 1, tid))
        assert acquired(r) == [(3, 3, 1)]  # latest: from where the log ended when it started
    finally:
        await conn.close()


async def test_group_configs_validation(server):
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        cases = [
            ({"nope": "1"}, 40, "Unknown group config name: nope"),  # INVALID_CONFIG
            (
                {"share.record.lock.duration.ms": "1000"},
                40,
                "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
            ),
            ({"share.record.lock.duration.ms": "999"}, 40, None),
            ({"share.session.timeout.ms": "70000"}, 40, None),
            ({"share.heartbeat.interval.ms": "abc"}, 40, None),
            ({"share.auto.offset.reset": "sometimes"}, 40, None),
            ({"share.auto.offset.reset": "by_duration:1h"}, 40, None),
            ({"share.isolation.level": "dirty"}, 40, None),
            ({"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "15000"}, 0, None),
            (
                {"share.delivery.count.limit": "1"},
                40,
                "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2",
            ),
            (
                {"share.delivery.count.limit": "11"},
                40,
                "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
            ),
            ({"share.delivery.count.limit": "three"}, 40, None),
            ({"share.delivery.count.limit": "3"}, 0, None),
        ]
        for configs, error, message in cases:
            R = cls(INCREMENTAL_ALTER_CONFIGS, 1, "AlterConfigsResource")
            C = cls(INCREMENTAL_ALTER_CONFIGS, 1, "AlterableConfig")
            r = await conn.request(
                INCREMENTAL_ALTER_CONFIGS,
                1,
                cls(INCREMENTAL_ALTER_CONFIGS, 1)(
                    resources=(
                        R(
                            resource_type=GROUP_RESOURCE,
                            resource_name="g",
                            configs=tuple(C(name=k, config_operation=0, value=v) for k, v in configs.items()),
                        ),
                    ),
                    validate_only=False,
                ),
            )
            assert r.responses[0].error_code == error, (configs, r)
            if message:
                assert r.responses[0].error_message == message
        D = cls(DESCRIBE_CONFIGS, 4, "DescribeConfigsResource")
        d = await conn.request(
            DESCRIBE_CONFIGS,
            4,
            cls(DESCRIBE_CONFIGS, 4)(
                resources=(D(resource_type=GROUP_RESOURCE, resource_name="g", configuration_keys=None),),
                include_synonyms=False,
                include_documentation=False,
            ),
        )
        values = {c.name: (c.value, c.config_source) for c in d.results[0].configs}
        assert values["consumer.session.timeout.ms"] == ("50000", 8)  # GROUP_CONFIG
        assert values["share.record.lock.duration.ms"] == ("30000", 5)  # DEFAULT_CONFIG
        assert values["share.auto.offset.reset"] == ("latest", 5)
        assert values["share.delivery.count.limit"] == ("3", 8)
        # In force at the next heartbeat: the consumer group's and the share group's intervals.
        await conn.create_topics("t", partitions=1)
        joined = await conn.request(
            68,
            1,
            cls(68, 1)(
                group_id="g",
                member_id="m",
                member_epoch=0,
                rebalance_timeout=MS * 1000,
                subscribed_topic_names=("t",),
                topic_partitions=(),
            ),
        )
        assert joined.heartbeat_interval.total_seconds() == 15
        assert (await set_group_configs(conn, "s", share_heartbeat_interval_ms="6000")).error_code == 0
        joined = await conn.request(
            SHB, 1, cls(SHB, 1)(group_id="s", member_id="m", member_epoch=0, subscribed_topic_names=("t",))
        )
        assert joined.heartbeat_interval.total_seconds() == 6
    finally:
        await conn.close()
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        d = await conn.request(
            DESCRIBE_CONFIGS,
            4,
            cls(DESCRIBE_CONFIGS, 4)(
                resources=(D(resource_type=GROUP_RESOURCE, resource_name="g", configuration_keys=None),),
                include_synonyms=False,
                include_documentation=False,
            ),
        )
        assert {c.name: c.value for c in d.results[0].configs}["consumer.session.timeout.ms"] == "50000"
    finally:
        await conn.close()


async def test_read_committed_skips_aborted_transactions(server):
    from confluent_kafka import Producer

    conn, tid = await start(server, records=0, share_isolation_level="read_committed")
    try:

        def transactions() -> None:
            p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "tx"})
            p.init_transactions(30)
            for commit in (False, True):
                p.begin_transaction()
                for _ in range(3):
                    p.produce("t", value=b"c" if commit else b"a", partition=0)
                p.flush(30)
                (p.commit_transaction if commit else p.abort_transaction)(30)

        await asyncio.get_running_loop().run_in_executor(None, transactions)
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        # 0-2 aborted and 3 their marker: archived, never delivered; 4-6 committed; 7 its marker.
        assert acquired(r) == [(4, 6, 1)]
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(4, 6, [ACCEPT])]}))
        assert part(r).error_code == 0
    finally:
        await conn.close()


@pytest.mark.process  # killed (SIGKILL) or read by pid: needs a real process
async def test_crash_keeps_acknowledgements(server):
    conn, tid = await start(server)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 9, 1)]
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 4, [ACCEPT]), (5, 5, [REJECT])]}))
        assert part(r).error_code == 0
    finally:
        await conn.close()
    server.stop(signal.SIGKILL)
    server.start()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "b", 0, tid))
        # Nothing acknowledged comes back; what a held is Available again. As in Kafka, an
        # acquisition is not written: the delivery the crash interrupted is not counted.
        assert acquired(r) == [(6, 9, 1)]
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_describe_alter_delete_share_group_offsets(server):
    DESCRIBE, ALTER, DELETE_OFFSETS = 90, 91, 92
    conn, tid = await start(server, records=10)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, max_records=4))
        await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 1, [ACCEPT]), (3, 3, [ACCEPT])]}))

        async def describe(group, topics=None, v=1):
            G = cls(DESCRIBE, v, "DescribeShareGroupOffsetsRequestGroup")
            T = cls(DESCRIBE, v, "DescribeShareGroupOffsetsRequestTopic")
            body = cls(DESCRIBE, v)(
                groups=(
                    G(
                        group_id=group,
                        topics=None
                        if topics is None
                        else tuple(T(topic_name=n, partitions=tuple(ps)) for n, ps in topics.items()),
                    ),
                )
            )
            return (await conn.request(DESCRIBE, v, body)).groups[0]

        d = await describe("g")
        assert d.error_code == 0 and [(t.topic_name, t.topic_id) for t in d.topics] == [("t", tid)]
        p = d.topics[0].partitions[0]
        # As Kafka's share coordinator holds it: start 0 (the acknowledgement was written before
        # the start moved past 0-1), 10 records from it, 3 of them done: lag 7.
        assert (p.partition_index, p.start_offset, p.lag, p.error_code) == (0, 0, 7, 0)
        d = await describe("g", {"t": [0], "nope": [0]}, v=0)
        assert [(t.topic_name, [(x.start_offset, x.error_code) for x in t.partitions]) for t in d.topics] == [
            ("t", [(0, 0)]),
            ("nope", [(-1, 3)]),
        ]
        assert (await describe("other", {"t": [0]})).topics[0].partitions[0].start_offset == -1  # never started
        await conn.create_topics("c-topic", partitions=1)
        await conn.request(
            68,
            1,
            request_class(68, 1)(
                group_id="cg",
                member_id="m",
                member_epoch=0,
                rebalance_timeout=MS * 1000,
                subscribed_topic_names=("t",),
                topic_partitions=(),
            ),
        )
        assert (await describe("cg")).error_code == 69  # not a share group
        assert (await describe("")).error_code == 0  # as at Kafka: a group that does not exist
        assert [x.error_code for x in (await describe("g", {"t": [-1, 1]})).topics[0].partitions] == [3, 3]

        def alter_body(group, offset):
            T, P = (
                cls(ALTER, 0, "AlterShareGroupOffsetsRequestTopic"),
                cls(ALTER, 0, "AlterShareGroupOffsetsRequestPartition"),
            )
            return cls(ALTER, 0)(
                group_id=group,
                topics=(
                    T(
                        topic_name="t",
                        partitions=(P(partition_index=0, start_offset=offset), P(partition_index=5, start_offset=0)),
                    ),
                ),
            )

        assert (await conn.request(ALTER, 0, alter_body("", 6))).error_code == 24
        r = await conn.request(ALTER, 0, alter_body("g", 6))
        assert r.error_code == 68  # NON_EMPTY_GROUP: member a is in the group
        await conn.request(SHB, 1, cls(SHB, 1)(group_id="g", member_id="a", member_epoch=-1))
        r = await conn.request(ALTER, 0, alter_body("g", -5))
        assert r.responses[0].partitions[0].error_code == 42
        r = await conn.request(ALTER, 0, alter_body("g", 6))
        assert r.error_code == 0 and [(x.partition_index, x.error_code) for x in r.responses[0].partitions] == [
            (0, 0),
            (5, 3),
        ]
        assert (await describe("g")).topics[0].partitions[0].start_offset == 6
        b = await conn.request(SFETCH, 1, sfetch("g", "b", 0, tid))
        assert acquired(b) == [(6, 9, 1)]  # from the new start, a fresh window
        await conn.request(SFETCH, 1, sfetch("g", "b", -1, tid, partitions=()))

        D = cls(DELETE_OFFSETS, 0, "DeleteShareGroupOffsetsRequestTopic")
        r = await conn.request(DELETE_OFFSETS, 0, cls(DELETE_OFFSETS, 0)(group_id="", topics=(D(topic_name="t"),)))
        assert r.error_code == 24
        r = await conn.request(
            DELETE_OFFSETS, 0, cls(DELETE_OFFSETS, 0)(group_id="g", topics=(D(topic_name="t"), D(topic_name="nope")))
        )
        assert r.error_code == 0 and [(t.topic_name, t.error_code) for t in r.responses] == [("t", 0), ("nope", 3)]
        assert (await describe("g", {"t": [0]})).topics[0].partitions[0].start_offset == -1
        c = await conn.request(SFETCH, 1, sfetch("g", "c", 0, tid))
        assert acquired(c) == [(0, 9, 1)]  # started again where share.auto.offset.reset says (earliest)
        # DeleteGroups of the (empty) share group takes its share-partitions' state with it.
        deleted = await conn.request(42, 2, cls(42, 2)(groups_names=("g",)))
        assert deleted.results[0].error_code == 0
        for _ in range(100):
            if (await describe("g", {"t": [0]})).topics[0].partitions[0].start_offset == -1:
                break
            await asyncio.sleep(0.01)  # (the state's tombstones are written after the group's)
        assert (await describe("g", {"t": [0]})).topics[0].partitions[0].start_offset == -1
    finally:
        await conn.close()


async def test_share_group_metrics(server_factory):
    from tests.support.process import free_port
    from tests.support.metrics_scrape import scrape, value

    port = free_port()
    server = server_factory(*NO_BATCHING, "--metrics-port", str(port))
    conn, tid = await start(server, records=10)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, max_records=4))
        assert acquired(r) == [(0, 3, 1)]
        await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 1, [ACCEPT])]}))
        samples = scrape(port)
        labels = {"group": "g", "topic": "t", "partition": "0"}
        assert value(samples, "kcoord_share_partition_start_offset", **labels) == 2
        assert value(samples, "kcoord_share_group_lag", **labels) == 8
        assert value(samples, "kcoord_share_group_in_flight", **labels) == 2  # 2-3 still held by a
        assert value(samples, "kcoord_share_group_sum_lag", group="g") == 8
        assert value(samples, "kcoord_share_sessions") == 1
        assert value(samples, "kcoord_group_state", group="g", type="share", state="Stable") == 1
    finally:
        await conn.close()


async def test_share_session_limit(server_factory):
    server = server_factory(*NO_BATCHING, "--group-share-max-share-sessions", "2")
    conn, tid = await start(server, records=1)
    try:
        for member in ("a", "b"):
            assert (await conn.request(SFETCH, 1, sfetch("g", member, 0, tid, max_records=0))).error_code == 0
        r = await conn.request(SFETCH, 1, sfetch("g", "c", 0, tid, max_records=0))
        assert r.error_code == 133  # SHARE_SESSION_LIMIT_REACHED
        assert (await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, max_records=0))).error_code == 0  # a's own, anew
        await conn.request(SFETCH, 1, sfetch("g", "b", -1, tid, partitions=()))  # b closes its session
        assert (await conn.request(SFETCH, 1, sfetch("g", "c", 0, tid, max_records=0))).error_code == 0
    finally:
        await conn.close()


async def test_a_fenced_member_loses_its_session_and_records(server_factory):
    server = server_factory(
        *NO_BATCHING, "--group-share-session-timeout-ms", "300", "--group-share-heartbeat-interval-ms", "100"
    )
    conn, tid = await start(server, records=3)  # member a joined (and stops heartbeating now)
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 2, 1)]
        # b's long poll wakes when a's group session expires and its records are released
        # (long before their 30 s locks would).
        b = await conn.request(SFETCH, 1, sfetch("g", "b", 0, tid, max_wait_ms=10_000))
        assert acquired(b) == [(0, 2, 2)]
        assert (await conn.request(SFETCH, 1, sfetch("g", "a", 1, tid))).error_code == 122  # its session went
    finally:
        await conn.close()


async def test_compacted_gaps_are_acquired_and_acknowledged_as_gap(server_factory):
    """Offsets the log cleaner removed between two batches are acquired with them, as Kafka's
    SharePartition.acquireNewBatchRecords takes one range from the first batch read to the last;
    the member acknowledges them as GAP (archived). DescribeShareGroupOffsets' lag (KIP-1226)
    then counts only the window's records not yet Acknowledged or Archived, and what lies past it."""
    from tests.support.data_plane import FETCH, create, fetch_body

    server = server_factory(*NO_BATCHING, "--log-cleaner-backoff-ms", "10")
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        assert (
            await create(
                conn,
                "cmp",
                partitions=1,
                configs=[("cleanup.policy", "compact"), ("segment.bytes", "100"), ("min.cleanable.dirty.ratio", "0")],
            )
            == 0
        )
        assert (await set_group_configs(conn, "g", share_auto_offset_reset="earliest")).error_code == 0
        for key in (b"x", b"a", b"a", b"a", b"a", b"b", b"c"):  # one batch (and segment) each
            assert (await produce(conn, "cmp", build_batch([(key, b"v")])))[0] == 0

        async def in_log() -> list[int]:
            offsets: list[int] = []
            while True:  # (a fetch reads one segment)
                f = await conn.request(FETCH, 11, fetch_body("cmp", offsets[-1] + 1 if offsets else 0))
                more = offsets_in(f.responses[0].partitions[0].records or b"")
                if not more:
                    return offsets
                offsets += more

        for _ in range(400):  # the cleaner keeps the latest `a` (4) of the closed segments
            present = await in_log()
            if not {1, 2, 3} & set(present):
                break
            await asyncio.sleep(0.05)
        assert present[:3] == [0, 4, 5], present
        hb = await until_assigned(conn, "g", "a", await conn.request(SHB, 1, shb("g", "a", 0, ("cmp",))))
        tid = hb.assignment.topic_partitions[0].topic_id
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, present[-1], 1)]  # one range, the gaps 1-3 in it
        assert offsets_in(part(r).records) == present
        # the gaps acknowledged as GAP and all records but offset 0 accepted: the start stays at
        # 0, and 1-3 (gone) are not lag
        gaps = [(o, o, [GAP]) for o in range(1, present[-1] + 1) if o not in present]
        accepted = [(o, o, [ACCEPT]) for o in present[1:]]
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: sorted(gaps + accepted)}))
        assert part(r).error_code == 0
        D, G = 90, cls(90, 1, "DescribeShareGroupOffsetsRequestGroup")
        d = (await conn.request(D, 1, cls(D, 1)(groups=(G(group_id="g", topics=None),)))).groups[0]
        p = d.topics[0].partitions[0]
        assert (p.start_offset, p.lag) == (0, 1)
    finally:
        await conn.close()


async def test_an_acknowledgement_under_the_old_state_epoch_is_fenced(server):
    """A member that left its group keeps its share session and may still acknowledge. Its
    ShareAcknowledge read together with an AlterShareGroupOffsets (pipelined on one connection)
    reaches the share-partition while the reset's state is being written: its write carries the
    old state epoch and is refused as Kafka's share coordinator refuses it (FENCED_STATE_EPOCH),
    nothing of it is kept, and the share-partition is loaded again at the new epoch."""
    ALTER = 91
    conn, tid = await start(server, records=3)
    try:
        assert acquired(await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))) == [(0, 2, 1)]
        await conn.request(SHB, 1, cls(SHB, 1)(group_id="g", member_id="a", member_epoch=-1))  # the group is empty
        T, P = (
            cls(ALTER, 0, "AlterShareGroupOffsetsRequestTopic"),
            cls(ALTER, 0, "AlterShareGroupOffsetsRequestPartition"),
        )
        alter = cls(ALTER, 0)(
            group_id="g", topics=(T(topic_name="t", partitions=(P(partition_index=0, start_offset=0),)),)
        )
        altered, acked = conn.send_many([(ALTER, 0, alter), (SACK, 1, sack("g", "a", 1, tid, {0: [(0, 2, [ACCEPT])]}))])
        assert (await altered).responses[0].partitions[0].error_code == 0
        ack = part(await acked)
        assert (ack.error_code, ack.error_message) == (
            124,
            "The share coordinator rejected the request because the share-group state epoch did not match.",
        )
        # Nothing accepted: the records come again from the new start, first deliveries.
        assert acquired(await conn.request(SFETCH, 1, sfetch("g", "b", 0, tid))) == [(0, 2, 1)]
    finally:
        await conn.close()
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:  # nor on disk: the reset's state (b's delivery was not written: an acquisition is not)
        assert acquired(await conn.request(SFETCH, 1, sfetch("g", "c", 0, tid))) == [(0, 2, 1)]
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_share_fetch_honours_max_bytes(server):
    """As Kafka's share fetch reads the log: at most max_bytes in all, shared uniformly among
    the session's partitions, whole batches; the first batch of the first partition with
    records even when it alone is over the limits (a client never gets an answer it cannot
    take, and a large batch is still delivered)."""
    conn, tid = await start(server, records=10, per_batch=1, partitions=2)
    try:
        for i in range(10):
            assert (await produce(conn, "t", build_batch([(None, b"w%d" % i)]), partition=1))[0] == 0
        one = len(part((await conn.request(SFETCH, 1, sfetch("g", "z", 0, tid, max_records=1))), 0).records)
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, partitions=(0, 1), max_bytes=1))
        assert acquired(r, 0) == [(1, 1, 1)] and acquired(r, 1) == []  # one batch, over the limit
        # Four batches' worth: two per partition.
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 1, tid, partitions=(0, 1), max_bytes=4 * one))
        assert acquired(r, 0) == [(2, 3, 1)] and acquired(r, 1) == [(0, 1, 1)]
        assert len(part(r, 0).records) + len(part(r, 1).records) <= 4 * one
        # Records released back into the window are read within the limit too.
        r = await conn.request(
            SFETCH, 1, sfetch("g", "a", 2, tid, partitions=(0, 1), acks={1: [(0, 1, [RELEASE])]}, max_bytes=2 * one)
        )
        assert acquired(r, 0) == [(4, 4, 1)] and acquired(r, 1) == [(0, 0, 2)]
    finally:
        await conn.close()


async def test_a_first_fetch_takes_the_first_new_share_partition_with_records(server):
    """As Kafka 4.4 answered librdkafka's 0179 (50 records on each of two partitions): a
    share-partition the broker loads for a fetch is acquired from only while nothing was
    acquired before it, loaded ones first; the next fetch takes the others."""
    conn, tid = await start(server, records=3, partitions=3)
    try:
        for p in (1, 2):
            assert (await produce(conn, "t", build_batch([(None, b"p%d" % p)]), partition=p))[0] == 0
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, partitions=(1, 2)))
        assert (acquired(r, 1), acquired(r, 2)) == ([(0, 0, 1)], [])
        # Partition 1 loaded, 2 loaded since, 0 new: 1 and 2 both, then 0 alone.
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 1, tid, partitions=(0,), acks={1: [(0, 0, [RELEASE])]}))
        assert [acquired(r, p) for p in (0, 1, 2)] == [[], [(0, 0, 2)], [(0, 0, 1)]]
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 2, tid, partitions=()))
        assert acquired(r, 0) == [(0, 2, 1)]
    finally:
        await conn.close()


async def test_describe_share_group_offsets_reports_the_stored_state_as_kafka(server):
    """The answers a real Kafka 4.4 gave for the same steps (a topic of two partitions, 100
    records on partition 0, one member): every partition of the subscribed topic at start -1
    (`-` in kafka-share-groups) until a record's state is written, a fetch writing nothing, and
    each acknowledgement written with the start it had before it."""
    DESCRIBE = 90
    conn, tid = await start(server, records=100, per_batch=100, partitions=2)

    async def offsets():
        G = cls(DESCRIBE, 1, "DescribeShareGroupOffsetsRequestGroup")
        r = await conn.request(DESCRIBE, 1, cls(DESCRIBE, 1)(groups=(G(group_id="g", topics=None),)))
        return [
            (p.partition_index, p.start_offset, p.lag, p.leader_epoch) for t in r.groups[0].topics for p in t.partitions
        ]

    try:
        assert await offsets() == [(0, -1, -1, 0), (1, -1, -1, 0)]
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, partitions=(0, 1)))
        assert acquired(r, 0) == [(0, 99, 1)] and acquired(r, 1) == []
        assert await offsets() == [(0, -1, -1, 0), (1, -1, -1, 0)]
        await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 49, [ACCEPT])]}))
        assert await offsets() == [(0, 0, 50, 0), (1, -1, -1, 0)]
        await conn.request(SACK, 1, sack("g", "a", 2, tid, {0: [(50, 99, [ACCEPT])]}))
        assert await offsets() == [(0, 50, 0, 0), (1, -1, -1, 0)]
    finally:
        await conn.close()
