"""Share groups with a real client: confluent-kafka's ShareConsumer (librdkafka), implicit
and explicit acknowledgement, lock expiry after a consumer dies, and a server crash."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer (2.16+)", allow_module_level=True)

from confluent_kafka import AcknowledgeType, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    NewTopic,
    ResourceType,
)

from tests.support.process import ROOT, wait_for  # noqa: E402
from tests.support.share import setup  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

SHORT_LOCKS = ("--group-share-min-record-lock-duration-ms", "1000")
# The test profile (docs/operations.md): members heartbeat every 250 ms, so they get their
# partitions and records within a fraction of a second rather than at the next 5 s heartbeat;
# a flag a test gives (an assignment interval, the authorizer) still wins.
TEST = ("--profile", "test")


@pytest.fixture
def server(server_factory):
    return server_factory(*TEST)


def share_consumer(bootstrap: str, group: str, topic: str, **conf: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def poll_records(consumer: ShareConsumer, timeout: float = 1.0) -> list:
    out = []
    for m in consumer.poll(timeout):
        assert m.error() is None, m.error()
        out.append(m)
    return out


def test_three_consumers_share_one_partition(server):
    offsets = three_consumers_read(server, partitions=1)
    # Every record went to one consumer only (no lock expired: each was accepted in time).
    assert sorted(offsets) == [(0, i) for i in range(300)]


@pytest.mark.parametrize("assignment_interval_ms", ["0", "1000"])  # batching off, and on at Kafka's default
def test_consumers_joining_with_assignment_batching(server_factory, assignment_interval_ms):
    """The later joiners get partitions only at the next target computation (batching on).
    A member whose assignment shrinks acknowledges what it had of the partitions it forgets
    in the same ShareFetch: every record is still delivered once."""
    server = server_factory(*TEST, "--group-share-assignment-interval-ms", assignment_interval_ms)
    offsets = three_consumers_read(server, partitions=4)
    assert sorted(offsets) == sorted((i % 4, i // 4) for i in range(300))


def three_consumers_read(server, partitions: int) -> list[tuple[int, int]]:
    """300 records over `partitions` partitions read by three ShareConsumers of one group
    until each has been delivered; the (partition, offset) of every delivery."""
    setup(server.bootstrap, "jobs", "workers", 300, partitions=partitions)
    got: dict[int, list[tuple[int, int]]] = {0: [], 1: [], 2: []}
    done = threading.Event()

    def run(n: int) -> None:
        c = share_consumer(server.bootstrap, "workers", "jobs")
        try:
            while not done.is_set():
                # (implicitly accepted at the next poll)
                got[n].extend((m.partition(), m.offset()) for m in poll_records(c, 0.5))
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len({o for v in got.values() for o in list(v)}) >= 300, timeout=60, what="all 300 records")
    finally:
        done.set()
        for t in threads:
            t.join(60)
    return [o for v in got.values() for o in v]


def test_release_comes_back_reject_never(server):
    setup(server.bootstrap, "t", "g", 10)
    c = share_consumer(server.bootstrap, "g", "t", **{"share.acknowledgement.mode": "explicit"})
    try:
        seen: dict[int, list[int]] = {}
        rejected, released = {3}, {5}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(seen) == 10 and len(seen[5]) >= 2):
            for m in poll_records(c):
                seen.setdefault(m.offset(), []).append(m.delivery_count())
                if m.offset() in rejected:
                    c.acknowledge(m, AcknowledgeType.REJECT)
                elif m.offset() in released and m.delivery_count() == 1:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    c.acknowledge(m)
            c.commit_sync()
        assert sorted(seen) == list(range(10))
        assert seen[5] == [1, 2]  # released: delivered again, its delivery count one more
        assert seen[3] == [1]  # rejected: archived, never again
        assert all(seen[o] == [1] for o in seen if o != 5)
        assert poll_records(c, 1.0) == []
    finally:
        c.close()


KILLED_CONSUMER = textwrap.dedent("""
    import sys
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    while True:
        msgs = [m for m in c.poll(1.0) if m.error() is None]
        if msgs:
            print(" ".join(str(m.offset()) for m in msgs), flush=True)
            break
    sys.stdin.read()  # holds its records, never acknowledging, until killed
""")


def test_killed_consumer_records_come_back_after_the_lock(server_factory):
    server = server_factory(*TEST, *SHORT_LOCKS)
    setup(server.bootstrap, "t", "g", 20, share_record_lock_duration_ms="1000")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_CONSUMER, server.bootstrap, "g", "t"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        held = [int(o) for o in proc.stdout.readline().split()]
        assert held
    finally:
        proc.kill()
        proc.wait(10)
    c = share_consumer(server.bootstrap, "g", "t")
    try:
        counts: dict[int, int] = {}

        def all_seen() -> bool:
            for m in poll_records(c, 0.5):
                counts.setdefault(m.offset(), m.delivery_count())
            return len(counts) == 20

        wait_for(all_seen, timeout=60, what="the dead consumer's records")
        assert all(counts[o] == 2 for o in held)  # its lock expired: delivered again, the count kept
        assert all(counts[o] == 1 for o in counts if o not in held)
    finally:
        c.close()


def test_server_crash_never_redelivers_accepted_records(server):
    setup(server.bootstrap, "t", "g", 40)
    c = share_consumer(server.bootstrap, "g", "t", **{"share.acknowledgement.mode": "explicit"})
    accepted: set[int] = set()
    try:
        while len(accepted) < 20:
            for m in poll_records(c):
                if len(accepted) < 20:
                    c.acknowledge(m)
                    accepted.add(m.offset())
                else:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync()
    finally:
        c.close()
    server.stop(signal.SIGKILL)
    server.start()
    c = share_consumer(server.bootstrap, "g", "t")
    try:
        after: list[int] = []

        def rest_seen() -> bool:
            after.extend(m.offset() for m in poll_records(c, 0.5))
            return len(after) >= 20

        wait_for(rest_seen, timeout=60, what="the records not accepted")
        assert sorted(after) == sorted(set(range(40)) - accepted)
    finally:
        c.close()


def test_share_consumer_refused_a_topic_it_may_not_describe(server_factory):
    """With --authorizer, a topic the ACLs give to someone else: the ShareConsumer's heartbeat
    fails with TOPIC_AUTHORIZATION_FAILED (Kafka's DESCRIBE check on the subscribed topics),
    which confluent-kafka raises from poll."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType

    server = server_factory(*TEST, "--authorizer")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("secret", 1, 1)])["secret"].result(30)
    acl = AclBinding(
        ResourceType.TOPIC,
        "secret",
        ResourcePatternType.LITERAL,
        "User:other",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    admin.create_acls([acl])[acl].result(30)
    c = share_consumer(server.bootstrap, "g", "secret")
    try:
        error = None
        deadline = time.monotonic() + 30
        while error is None and time.monotonic() < deadline:
            try:
                assert all(m.error() is None for m in c.poll(1.0))
            except KafkaException as e:
                error = e.args[0]
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        c.close()


def test_share_consumer_reads_a_compacted_topic(server_factory):
    """A ShareConsumer over a compacted topic: the offsets the cleaner removed between batches
    are acquired with them (Kafka's SharePartition takes one range), the client acknowledges
    them as GAP, and every offset is done, gaps included (lag 0), long before any lock could
    expire."""
    import asyncio

    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.support.wire_client import WireClient, request_class

    server = server_factory(*TEST, "--log-cleaner-backoff-ms", "10")
    setup(server.bootstrap, "warmup", "g", 0)  # (the group's share.auto.offset.reset: earliest)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    compacted = {"cleanup.policy": "compact", "segment.bytes": "100", "min.cleanable.dirty.ratio": "0"}
    admin.create_topics([NewTopic("cmp", 1, 1, config=compacted)])["cmp"].result(30)
    producer = Producer({"bootstrap.servers": server.bootstrap})
    for key in (b"x", b"a", b"a", b"a", b"a", b"b", b"c"):  # one batch (and segment) each
        producer.produce("cmp", key=key, value=b"v", partition=0)
        producer.flush(30)

    def in_log() -> list[int]:
        c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "reader", "enable.partition.eof": True})
        c.assign([TopicPartition("cmp", 0, 0)])
        offsets = []
        try:
            while True:
                m = c.poll(10)
                if m is None or m.error() is not None:
                    return offsets
                offsets.append(m.offset())
        finally:
            c.close()

    present = wait_for(lambda: (lambda o: o if not {1, 2, 3} & set(o) else None)(in_log()), what="compaction")
    assert present[:3] == [0, 4, 5], present

    def lag() -> int:
        async def describe() -> int:
            conn = await WireClient().connect("127.0.0.1", server.port)
            try:
                G = request_class(90, 1, "DescribeShareGroupOffsetsRequestGroup")
                r = await conn.request(90, 1, request_class(90, 1)(groups=(G(group_id="g", topics=None),)))
                return next((p.lag for t in r.groups[0].topics for p in t.partitions), -1)
            finally:
                await conn.close()

        return asyncio.run(describe())

    c = share_consumer(server.bootstrap, "g", "cmp")
    try:
        got: list[int] = []
        wait_for(lambda: got.extend(m.offset() for m in poll_records(c, 0.5)) or set(present) <= set(got))
        assert sorted(got) == present  # each record once; a gap is no record
        # (implicitly accepted, the gaps acknowledged as GAP, at the next poll)
        # Every offset done, gaps included, as the share coordinator holds it: lag 0.
        wait_for(lambda: poll_records(c, 0.2) == [] and lag() == 0, timeout=20)
    finally:
        c.close()
    assert "Traceback" not in server.log_text()


def test_group_delivery_count_limit(server):
    """share.delivery.count.limit set on the group by confluent-kafka's admin (Kafka 4.2's group
    config, within group.share.min/max.delivery.count.limit): a record released at every
    delivery is delivered that many times, then archived, never again."""
    setup(server.bootstrap, "t", "g", 3, share_delivery_count_limit="2")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ResourceType.GROUP, "g")
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["share.delivery.count.limit"].value == "2"
    c = share_consumer(server.bootstrap, "g", "t", **{"share.acknowledgement.mode": "explicit"})
    try:
        seen: dict[int, list[int]] = {}

        def step() -> bool:
            for m in poll_records(c, 0.5):
                seen.setdefault(m.offset(), []).append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.RELEASE if m.offset() == 1 else AcknowledgeType.ACCEPT)
            c.commit_sync()
            return sorted(seen) == [0, 1, 2] and len(seen[1]) >= 2

        wait_for(step, what="offset 1 delivered twice")
        assert poll_records(c, 1.0) == []  # released at the limit: archived
        assert seen == {0: [1], 1: [1, 2], 2: [1]}
    finally:
        c.close()
