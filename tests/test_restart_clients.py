"""A server restart is invisible to a Stable group of real consumers, as a coordinator
failover is in Kafka: the group is loaded back with its members, assignments and
generation, so the members go on heartbeating and committing in their generation. One
kafka-python and one confluent-kafka consumer share a group through 4 restarts (SIGTERM
and SIGKILL in turn) while messages keep coming: no message is delivered again after
its offset was committed, and no partition has two owners."""

from __future__ import annotations

import pytest

import asyncio
import signal
import struct
import threading
import time

from kafka.errors import KafkaError

from tests.support.wire_client import WireClient
from tests.support.process import kafka_python_subscribe, wait_for
from tests.support.groups_wire import DESCRIBE, cls

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

TOPIC, PARTITIONS, GROUP = "events", 4, "restarted"
# Each kind of stop twice, each after the other kind: every load then reads a log that a
# loaded-back group wrote, after a graceful stop and after a kill. More rounds repeat the same
# steps (3 s of the suite's wall time each: an interpreter's start, the clients' reconnects).
RESTARTS = 4
# Nothing here waits on a session to expire; a long one keeps a member whose heartbeats a
# loaded machine delays (a restart's interpreter start, a starved client thread) in the group,
# where a short one would expire it and the rebalance would be the test's failure, not the server's.
SESSION_TIMEOUT_MS = 30_000


class Ledger:
    """What both consumers saw and committed, in time order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: list[tuple[float, str, int, int]] = []  # (time, who, partition, offset)
        self.commits: list[tuple[float, int, int]] = []  # (time it was acknowledged, partition, next offset)

    def delivered(self, who: str, records: list[tuple[int, int]]) -> None:
        now = time.monotonic()
        with self.lock:
            self.deliveries += [(now, who, p, o) for p, o in records]

    def committed(self, started: float, offsets: dict[int, int]) -> None:
        with self.lock:
            self.commits += [(started, p, o) for p, o in offsets.items()]

    def unique(self) -> set[tuple[int, int]]:
        with self.lock:
            return {(p, o) for _, _, p, o in self.deliveries}

    def redelivered_after_commit(self) -> list:
        """Deliveries of an offset below one already committed for its partition when the
        delivery happened (the commit was acknowledged before the delivery began)."""
        bad = []
        with self.lock:
            for t, who, p, o in self.deliveries:
                if any(ct < t and cp == p and co > o for ct, cp, co in self.commits):
                    bad.append((who, p, o))
        return bad


def consume(ledger: Ledger, stop: threading.Event, who: str, poll, commit) -> None:
    """Poll, note what came, commit past it (synchronously), note the commit if it held."""
    while not stop.is_set():
        try:
            records = poll()
        except KafkaError as e:
            # kafka-python raises a refused connection from poll() while the server restarts;
            # an application polls on (else its member stops heartbeating, its session expires
            # and the group rebalances without it: a failure of the test, not of the server)
            if not e.retriable:
                raise
            continue
        if not records:
            continue
        ledger.delivered(who, records)
        ends: dict[int, int] = {}
        for p, o in records:
            ends[p] = max(ends.get(p, 0), o + 1)
        started = time.monotonic()
        try:
            commit(ends)
        except Exception:  # a restart in the middle: not committed, may come again
            continue
        ledger.committed(started, ends)


def kafka_python_consumer(bootstrap, ledger, stop):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        client_id="kafka-python",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=500,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        reconnect_backoff_max_ms=500,
        partition_assignment_strategy=[
            __import__("kafka.coordinator.assignors.range", fromlist=["x"]).RangePartitionAssignor
        ],
    )
    kafka_python_subscribe(c, TOPIC)
    try:
        consume(
            ledger,
            stop,
            "kafka-python",
            lambda: [(r.partition, r.offset) for rs in c.poll(timeout_ms=100).values() for r in rs],
            lambda ends: c.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in ends.items()}),
        )
    finally:
        c.close()


def confluent_consumer(bootstrap, ledger, stop):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": "confluent",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "reconnect.backoff.max.ms": 500,
            "log_level": 0,
        }
    )
    c.subscribe([TOPIC])
    try:
        consume(
            ledger,
            stop,
            "confluent",
            lambda: [(m.partition(), m.offset()) for m in c.consume(100, 0.1) if m.error() is None],
            lambda ends: c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in ends.items()], asynchronous=False),
        )
    finally:
        c.close()


def assignment_partitions(data: bytes) -> list[int]:
    """Partitions of a ConsumerProtocolAssignment (any version: the head is the same)."""
    if not data:  # (not Stable: no assignment yet)
        return []
    pos = 2
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(topics):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2 + n
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += struct.unpack_from(f">{count}i", data, pos)
        pos += 4 * count
    return out


async def describe(port):
    conn = await WireClient("describer").connect("127.0.0.1", port)
    try:
        r = await conn.request(DESCRIBE, 5, cls(DESCRIBE, 5)(groups=(GROUP,), include_authorized_operations=False))
    finally:
        await conn.close()
    g = r.groups[0]
    return g.group_state, {m.client_id: assignment_partitions(m.member_assignment) for m in g.members}


async def test_restarts_are_invisible_to_a_stable_group(server):
    from confluent_kafka import Producer

    from tests.support.clients import create_topic

    create_topic(server.bootstrap, TOPIC, PARTITIONS)
    producer = Producer(
        {"bootstrap.servers": server.bootstrap, "linger.ms": 0, "reconnect.backoff.max.ms": 500, "log_level": 0}
    )
    produced = 0

    def produce(n):
        nonlocal produced
        for i in range(n):
            producer.produce(TOPIC, value=b"m%d" % (produced + i), partition=(produced + i) % PARTITIONS)
        assert producer.flush(30) == 0
        produced += n

    ledger, stop = Ledger(), threading.Event()
    threads = [
        threading.Thread(target=f, args=(server.bootstrap, ledger, stop), daemon=True)
        for f in (kafka_python_consumer, confluent_consumer)
    ]
    for t in threads:
        t.start()
    try:
        produce(40)
        wait_for(lambda: len(ledger.unique()) == produced, what="the first messages consumed")
        loaded_owners = None
        for _ in range(300):  # both members in, one generation settled
            state, owners = await describe(server.port)
            if (
                state == "Stable"
                and len(owners) == 2
                and sorted(p for ps in owners.values() for p in ps) == list(range(PARTITIONS))
            ):
                loaded_owners = owners
                break
            await asyncio.sleep(0.1)
        assert loaded_owners is not None, (state, owners)
        for i in range(RESTARTS):
            server.restart(signal.SIGKILL if i % 2 else signal.SIGTERM)
            state, owners = await describe(server.port)
            assert state == "Stable" and owners == loaded_owners  # loaded back as it was
            produce(40)
            wait_for(lambda: len(ledger.unique()) == produced, what=f"messages consumed after restart {i + 1}")
        state, owners = await describe(server.port)
        assert state == "Stable" and owners == loaded_owners  # no rebalance through it all
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert ledger.redelivered_after_commit() == []
    assert len(ledger.unique()) == produced
