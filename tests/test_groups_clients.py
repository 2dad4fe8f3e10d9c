"""Real clients form consumer groups against the server: kafka-python, aiokafka, confluent-kafka.

Each reaches Stable with disjoint assignments covering every partition; a killed member
(no LeaveGroup) is expelled after its session timeout; a clean close rebalances at once.
"""

from __future__ import annotations

import pytest

import asyncio
import signal
import subprocess
import sys
import time

from tests.support.clients import (
    PARTITIONS,
    TOPIC,
    create_topic,
)
from tests.support.process import PolledMember, kafka_python_subscribe, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

SESSION_MS = 6000  # the broker's minimum: the fastest expiry a test can observe


def covers_all(assignments: list[set[int]]) -> bool:
    flat = [p for a in assignments for p in a]
    return sorted(flat) == list(range(PARTITIONS)) and all(assignments)


# kafka-python ---------------------------------------------------------------------------


class PollingConsumer:
    """A kafka-python consumer polled continuously by its own thread, as applications do
    (kafka-python makes group progress only inside poll())."""

    def __init__(self, bootstrap: str, group: str, client_id: str) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        kafka_python_subscribe(consumer, TOPIC)

        def poll() -> set[int]:
            consumer.poll(timeout_ms=100)
            return {tp.partition for tp in consumer.assignment()}

        self.member = PolledMember(poll, consumer.close)  # close: LeaveGroup

    @property
    def assignment(self) -> set[int]:
        return self.member.owned

    def close(self) -> None:
        self.member.close()


def disjoint_cover(consumers: list[PollingConsumer]) -> bool:
    assignments = [c.assignment for c in consumers]
    return covers_all(assignments) and len(set(map(frozenset, assignments))) == len(assignments)


def test_kafka_python_group_life_cycle(server):
    create_topic(server.bootstrap)
    consumers = [PollingConsumer(server.bootstrap, "kp-group", f"kp-{i}") for i in range(3)]
    try:
        wait_for(lambda: disjoint_cover(consumers), what="3 kafka-python members with disjoint assignments")
        # A clean close sends LeaveGroup: the others take over at once, well before a session timeout.
        started = time.monotonic()
        consumers.pop().close()
        wait_for(lambda: disjoint_cover(consumers), timeout=SESSION_MS / 1000, what="rebalance after a clean close")
        assert time.monotonic() - started < SESSION_MS / 1000
    finally:
        for c in consumers:
            c.close()


KILLABLE = """
import sys, time
from kafka import KafkaConsumer
c = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], client_id="doomed",
                  session_timeout_ms=6000, heartbeat_interval_ms=500, enable_auto_commit=False)
c.subscribe(["orders"])
while "orders" not in c.topics():  # (see tests.support.process.kafka_python_subscribe)
    time.sleep(0.05)
while True:
    c.poll(timeout_ms=100)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_killed_member_is_expelled_after_session_timeout(server):
    create_topic(server.bootstrap)
    survivor = PollingConsumer(server.bootstrap, "kill-group", "survivor")
    wait_for(lambda: len(survivor.assignment) == PARTITIONS, what="survivor alone")
    doomed = subprocess.Popen([sys.executable, "-c", KILLABLE, server.bootstrap, "kill-group"], stdout=subprocess.PIPE)
    try:
        wait_for(lambda: 0 < len(survivor.assignment) < PARTITIONS, what="partitions shared with doomed")
        doomed.send_signal(signal.SIGKILL)  # no LeaveGroup
        doomed.wait()
        killed = time.monotonic()
        wait_for(
            lambda: len(survivor.assignment) == PARTITIONS,
            timeout=30,
            what="survivor owns everything after the session timeout",
        )
        assert time.monotonic() - killed >= SESSION_MS / 1000 - 1  # expelled by expiry, not by a leave
        wait_for(lambda: "session expired" in server.log_text(), what="the expiry logged")  # (INFO: written in batches)
    finally:
        doomed.kill()
        survivor.close()


# aiokafka -------------------------------------------------------------------------------


async def test_aiokafka_group(server):
    from aiokafka import AIOKafkaConsumer

    create_topic(server.bootstrap)
    consumers = [
        AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=server.bootstrap,
            group_id="aio-group",
            client_id=f"aio-{i}",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        for i in range(3)
    ]
    for c in consumers:
        await c.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            assignments = [{tp.partition for tp in c.assignment()} for c in consumers]
            if covers_all(assignments) and len(set(map(frozenset, assignments))) == 3:
                break
            assert time.monotonic() < deadline, assignments
            await asyncio.sleep(0.05)
        await consumers.pop().stop()  # LeaveGroup
        deadline = time.monotonic() + SESSION_MS / 1000
        while not covers_all([{tp.partition for tp in c.assignment()} for c in consumers]):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    finally:
        for c in consumers:
            await c.stop()


# confluent-kafka (librdkafka, classic protocol) ----------------------------------------


def test_confluent_group(server):
    from confluent_kafka import Consumer

    create_topic(server.bootstrap)
    assigned: dict[int, set[int]] = {}

    def on_assign_for(i):
        def cb(consumer, partitions):
            assigned[i] = {p.partition for p in partitions}

        return cb

    consumers = []
    for i in range(3):
        c = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": "rdk-group",
                "client.id": f"rdk-{i}",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "range",
            }
        )
        c.subscribe([TOPIC], on_assign=on_assign_for(i))
        consumers.append(c)

    def poll_all():
        for c in consumers:
            c.poll(0.02)
        return [{p.partition for p in c.assignment()} for c in consumers]

    wait_for(
        lambda: covers_all(poll_all()) and len(set(map(frozenset, poll_all()))) == 3,
        what="3 librdkafka members with disjoint assignments",
    )
    consumers.pop().close()
    wait_for(lambda: covers_all(poll_all()), timeout=SESSION_MS / 1000, what="rebalance after close")
    for c in consumers:
        c.close()
