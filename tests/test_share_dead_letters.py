"""Share-group dead-letter queues (KIP-1191, share.version 2), in process over the wire: a record
its client rejects, or one released at the delivery limit, goes to Archiving (written), its dead
letter is produced to the group's `errors.deadletterqueue.topic.name` with Kafka's `__dlq.*`
headers, and then it is Archived. A dead letter that cannot be written is logged and the record
archived regardless (as Kafka does); an Archiving state write that fails is undone and answered
COORDINATOR_NOT_AVAILABLE; a restart writes the dead letters left owing."""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest
from kio.schema.errors import ErrorCode as E

from protocol.record_batch import GZIP, Record, build_batch_from, iter_batch_records, iter_batches
from tests.support.data_plane import FETCH, create, fetch_body, produce
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
    start,
)
from tests.support.share_state import FailingWrites, live, shares
from tests.support.wire_client import WireClient
from coordinator.share.partition import ARCHIVED, ARCHIVING

DLQ = "dlq.t"
UPDATE_FEATURES = 57


@pytest.fixture
def server(server_factory):
    return server_factory(*NO_BATCHING)


def dlq_configs(copy: bool = True, **kw: str) -> dict[str, str]:
    return {
        "errors.deadletterqueue.topic.name": DLQ,
        "errors.deadletterqueue.copy.record.enable": str(copy).lower(),
        **kw,
    }


async def dlq_topic(conn, partitions: int = 1, enable: bool = True) -> None:
    configs = (("errors.deadletterqueue.group.enable", "true"),) if enable else ()
    assert await create(conn, DLQ, partitions=partitions, configs=configs) == E.none


async def dead_letters(conn, partition: int = 0, topic: str = DLQ) -> list:
    r = await conn.request(FETCH, 11, fetch_body(topic, 0, partition))
    p = r.responses[0].partitions[0]
    if p.error_code != E.none or not p.records:
        return []
    return [rec for pos, h in iter_batches(p.records) for rec in iter_batch_records(p.records[pos:], h)]


async def until(what: str, check, timeout: float = 10.0):
    """Poll `check` (async) until it is truthy: the dead letter is written after the answer."""
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got or time.monotonic() > deadline:
            assert got, what
            return got
        await asyncio.sleep(0.01)


def headers(rec) -> dict[str, str]:
    return {k: v.decode() for k, v in rec.headers}


async def test_a_rejected_record_becomes_a_dead_letter(server):
    conn, tid = await start(server, records=3, **dlq_configs())
    try:
        await dlq_topic(conn)
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 2, 1)]
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 2, [ACCEPT, REJECT, ACCEPT])]}))
        assert part(r).error_code == E.none
        letters = await until("a dead letter", lambda: dead_letters(conn))
        assert len(letters) == 1
        (rec,) = letters
        assert headers(rec) == {
            "__dlq.errors.topic": "t",
            "__dlq.errors.partition": "0",
            "__dlq.errors.offset": "1",
            "__dlq.errors.group": "g",
            "__dlq.errors.delivery.count": "1",
            "__dlq.errors.message": "Offset rejected by client.",
        }
        assert [k for k, _ in rec.headers][:4] == [
            "__dlq.errors.topic",
            "__dlq.errors.partition",
            "__dlq.errors.offset",
            "__dlq.errors.group",
        ]
        assert (rec.key, rec.value) == (None, b"v1")  # copied (copy.record.enable)
        m = shares(server)
        sp = next(iter(m.partitions.values()))

        async def archived():
            return sp.start == 3

        await until("archived", archived)
        stored = m.state.states[next(iter(m.state.states))]
        assert stored.records.get(1, (ARCHIVED, 1)) == (ARCHIVED, 1) and stored.start in (1, 3)
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_the_delivery_limit_dead_letters_into_an_auto_created_topic(server_factory):
    from tests.support.metrics_scrape import scrape, value
    from tests.support.process import free_port

    port = free_port()
    server = server_factory(
        *NO_BATCHING, "--errors-deadletterqueue-auto-create-topics-enable", "--metrics-port", str(port)
    )
    conn, tid = await start(server, records=2, share_delivery_count_limit="2", **dlq_configs(copy=False))
    try:
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 1, 1)]
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 1, tid, acks={0: [(0, 1, [RELEASE])]}))
        assert part(r).acknowledge_error_code == E.none and acquired(r) == [(0, 1, 2)]
        # At the limit: Archiving, not yet done (the start stays), until the dead letters are in.
        r = await conn.request(SACK, 1, sack("g", "a", 2, tid, {0: [(0, 1, [RELEASE])]}))
        assert part(r).error_code == E.none
        letters = await until("two dead letters", lambda: dead_letters(conn))
        assert [(headers(x)["__dlq.errors.offset"], x.key, x.value) for x in letters] == [
            ("0", None, None),
            ("1", None, None),
        ]
        assert {headers(x)["__dlq.errors.message"] for x in letters} == {
            "Offset delivery count exceeded the threshold."
        }
        assert {headers(x)["__dlq.errors.delivery.count"] for x in letters} == {"2"}
        topics = server._server.components
        info = next(c for c in topics if type(c).__name__ == "Topics").get(DLQ)
        assert info.configs == {"errors.deadletterqueue.group.enable": "true", "message.timestamp.type": "CreateTime"}
        sp = next(iter(shares(server).partitions.values()))

        async def done():
            return sp.start == 2

        await until("archived", done)
        assert value(scrape(port), "kcoord_share_group_dead_letters_total", group="g") == 2
    finally:
        await conn.close()


async def test_the_dead_letter_goes_to_the_source_partition_modulo_the_dlq_partitions(server):
    conn, tid = await start(server, records=0, partitions=3, **dlq_configs())
    try:
        await dlq_topic(conn, partitions=2)
        from tests.support.data_plane import produce
        from tests.support.share import build_batch

        assert (await produce(conn, "t", build_batch([(b"k", b"x")]), partition=2))[0] == E.none
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid, partitions=(0, 1, 2)))
        assert acquired(r, 2) == [(0, 0, 1)]
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {2: [(0, 0, [REJECT])]}))
        assert part(r, 2).error_code == E.none
        (rec,) = await until("a dead letter in partition 0", lambda: dead_letters(conn, 0))
        assert (headers(rec)["__dlq.errors.partition"], rec.key, rec.value) == ("2", b"k", b"x")
        assert await dead_letters(conn, 1) == []
    finally:
        await conn.close()


@pytest.mark.parametrize("problem", ["missing", "not-enabled", "prefix"])
async def test_a_dead_letter_that_cannot_be_written_is_logged_and_the_record_archived(server, problem):
    """As Kafka's SharePartition: "Failed to write to DLQ, proceeding to ARCHIVED regardless"."""
    name = "other.t" if problem == "prefix" else DLQ
    conn, tid = await start(server, records=2, **{**dlq_configs(), "errors.deadletterqueue.topic.name": name})
    try:
        if problem != "missing":
            configs = (("errors.deadletterqueue.group.enable", "true"),) if problem == "prefix" else ()
            assert await create(conn, name, partitions=1, configs=configs) == E.none
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 1, [REJECT])]}))
        assert part(r).error_code == E.none
        sp = next(iter(shares(server).partitions.values()))

        async def archived():
            return sp.start == 2

        await until("archived regardless", archived)
        assert await dead_letters(conn, topic=name) == []
        why = {
            "missing": "DLQ topic does not exist and auto create is disabled on cluster for share group: g, topic: dlq.t.",
            "not-enabled": "DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.t.",
            "prefix": "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, "
            "topic: other.t, prefix: dlq.",
        }[problem]
        assert why in server.log_text()
        assert shares(server).dead_letter_failures == {"g": 1}
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_an_archiving_write_that_fails_is_undone_and_no_dead_letter_is_written(server):
    conn, tid = await start(server, records=3, **dlq_configs())
    try:
        await dlq_topic(conn)
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        before = live(server)
        with FailingWrites(server) as writes:
            r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 2, [REJECT])]}))
            assert writes.failed == 1
        assert part(r).error_code == E.coordinator_not_available
        sp = next(iter(shares(server).partitions.values()))
        assert live(server) == before and [sp.records[o].member for o in range(3)] == ["a"] * 3
        assert sp.causes == {}
        assert await dead_letters(conn) == []
        # The client's retry is written, then dead-lettered once.
        r = await conn.request(SACK, 1, sack("g", "a", 2, tid, {0: [(0, 2, [REJECT])]}))
        assert part(r).error_code == E.none
        letters = await until("three dead letters", lambda: dead_letters(conn))
        assert [headers(x)["__dlq.errors.offset"] for x in letters] == ["0", "1", "2"]
    finally:
        await conn.close()


async def test_a_restart_writes_the_dead_letters_left_owing(server):
    """The server stops with records Archiving (their dead letters not yet written): the state
    log holds them Archiving, and the share-partition's next load writes them (Kafka's
    maybeResumeDlqArchiving), then archives them; nothing is delivered again."""
    conn, tid = await start(server, records=3, **dlq_configs())
    try:
        await dlq_topic(conn)
        m = shares(server)
        stuck = asyncio.Event()

        async def never(*args, **kw):
            await stuck.wait()  # (set on the server's loop by nobody: held until the stop)

        m.dead_letters.write = never
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 0, [ACCEPT]), (1, 2, [REJECT])]}))
        assert part(r).error_code == E.none
        key = next(iter(m.state.states))
        assert {o: s for o, (s, _) in m.state.states[key].records.items()} == {0: 2, 1: ARCHIVING, 2: ARCHIVING}
    finally:
        await conn.close()
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        assert await dead_letters(conn) == []
        await conn.request(
            SHB, 1, cls(SHB, 1)(group_id="g", member_id="a", member_epoch=0, subscribed_topic_names=("t",))
        )
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == []  # nothing delivered again
        letters = await until("two dead letters", lambda: dead_letters(conn))
        assert [(headers(x)["__dlq.errors.offset"], headers(x)["__dlq.errors.message"]) for x in letters] == [
            ("1", "Offset rejected by client."),
            ("2", "Offset rejected by client."),
        ]
        sp = next(iter(shares(server).partitions.values()))

        async def archived():
            return sp.start == 3

        await until("archived", archived)
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_share_version_1_archives_without_a_dead_letter(server):
    conn, tid = await start(server, records=2, **dlq_configs())
    try:
        await dlq_topic(conn)
        F = cls(UPDATE_FEATURES, 1, "FeatureUpdateKey")
        body = cls(UPDATE_FEATURES, 1)(
            timeout=datetime.timedelta(seconds=5),
            feature_updates=(F(feature="share.version", max_version_level=1, upgrade_type=2),),
            validate_only=False,
        )
        assert (await conn.request(UPDATE_FEATURES, 1, body)).error_code == E.none
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 1, [REJECT])]}))
        assert part(r).error_code == E.none
        sp = next(iter(shares(server).partitions.values()))
        assert sp.start == 2 and not shares(server)._dead_letter_tasks  # archived at once
        assert await dead_letters(conn) == []
    finally:
        await conn.close()


async def test_dead_letters_are_batched_within_the_dlq_topics_max_message_bytes(server):
    conn, tid = await start(server, records=4, **dlq_configs())
    try:
        configs = (("errors.deadletterqueue.group.enable", "true"), ("max.message.bytes", "450"))
        assert await create(conn, DLQ, partitions=1, configs=configs) == E.none
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 3, 1)]
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 3, [REJECT])]}))
        assert part(r).error_code == E.none

        async def four():
            letters = await dead_letters(conn)
            return letters if len(letters) == 4 else None

        letters = await until("four dead letters", four)
        assert [headers(x)["__dlq.errors.offset"] for x in letters] == ["0", "1", "2", "3"]
        r = await conn.request(FETCH, 11, fetch_body(DLQ, 0))
        sizes = [h.size for _, h in iter_batches(r.responses[0].partitions[0].records)]
        assert len(sizes) > 1 and max(sizes) <= 450
    finally:
        await conn.close()


async def test_a_release_at_session_close_that_is_not_written_is_undone_without_dead_letters(server):
    """As Kafka's SharePartition.releaseAcquiredRecords: the release of a member's records when
    its share session closes is undone if its state write fails (the records stay the
    member's, under their locks), and the dead letters of those it moved to Archiving (at the
    delivery limit) are not written."""
    conn, tid = await start(server, records=2, share_delivery_count_limit="2", **dlq_configs())
    try:
        await dlq_topic(conn)
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 1, tid, acks={0: [(0, 1, [RELEASE])]}))
        assert acquired(r) == [(0, 1, 2)]
        before = live(server)
        with FailingWrites(server) as writes:
            r = await conn.request(SACK, 1, sack("g", "a", -1, tid, {}))
            assert r.error_code == E.none
            m = shares(server)
            while m.unwritten:  # (the release's write, failing after the answer)
                await asyncio.sleep(0.01)
            assert writes.failed == 1
        sp = next(iter(m.partitions.values()))
        assert live(server) == before and [sp.records[o].member for o in range(2)] == ["a"] * 2
        assert sp.causes == {} and not m._dead_letter_tasks
        assert await dead_letters(conn) == []
    finally:
        await conn.close()
    assert "Traceback" not in server.log_text()


async def test_originals_over_kafkas_copy_budget_are_not_copied(server):
    """Kafka's ShareGroupDLQRecordFetcher copies at most DLQ_MAX_FETCH_BYTES (1 MiB) of
    decompressed original data at a time: a compressed batch whose records are larger than
    that together is never copied (its dead letters are headers only), the records around it
    are."""
    conn, tid = await start(server, records=1, **dlq_configs())
    try:
        await dlq_topic(conn)
        now = int(time.time() * 1000)
        big = [Record(i, now, None, bytes(600_000), []) for i in range(2)]
        assert (await produce(conn, "t", build_batch_from(big, base_offset=0, relative=True, compression=GZIP)))[0] == 0
        assert (await produce(conn, "t", build_batch_from([Record(0, now, None, b"v3", [])], base_offset=0)))[0] == 0
        r = await conn.request(SFETCH, 1, sfetch("g", "a", 0, tid))
        assert acquired(r) == [(0, 3, 1)]
        r = await conn.request(SACK, 1, sack("g", "a", 1, tid, {0: [(0, 3, [REJECT])]}))
        assert part(r).error_code == E.none
        letters = await until("four dead letters", lambda: dead_letters(conn))
        assert [(headers(x)["__dlq.errors.offset"], x.value) for x in letters] == [
            ("0", b"v0"),
            ("1", None),
            ("2", None),
            ("3", b"v3"),
        ]
    finally:
        await conn.close()
