"""Faults injected on demand (coordinator/faults.py) against real clients: commits retried
after coordinator errors, an idempotent producer across a lost reply, latency, stalls,
seeded probabilities, and bad specs refused with nothing changed.

The server runs in process on a thread of its own; the test adds and clears rules on the
server's loop, as the HTTP control and the Cluster helper do.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Callable

import pytest
import uvloop

from coordinator.config import parse_args
from coordinator.server import Server
from tests.conftest import wait_for

TOPIC = "orders"


class InProcessServer:
    """A Server on its own event loop thread; `call(fn)` runs fn on that loop."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.server = Server(parse_args(["--port", "0", "--data-dir", str(data_dir), *args]))
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self.server.start())

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.config.port}"

    def run(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable, *args: Any, **kw: Any) -> Any:
        async def on_loop() -> Any:
            return fn(*args, **kw)
        return self.run(on_loop())

    def close(self) -> None:
        try:
            self.run(self.server.stop(grace_seconds=1))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def broker(tmp_path):
    s = InProcessServer(tmp_path / "data", "--fault-seed", "7")
    yield s
    s.close()


def make_topic(bootstrap: str, name: str = TOPIC, partitions: int = 1) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()


def committed_offset(broker: InProcessServer, group: str, partition: int = 0) -> int | None:
    """The group's committed offset, read from the coordinator's own state."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return c.committed(TopicPartition(TOPIC, partition))
    finally:
        c.close()


# commits retried after coordinator errors --------------------------------------------------

@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "REBALANCE_IN_PROGRESS"])
def test_kafka_python_commit_retried_after_injected_error(broker, error):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import CommitFailedError
    from kafka.structs import OffsetAndMetadata

    make_topic(broker.bootstrap)
    group = f"kp-{error.lower()}"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                             retry_backoff_ms=10)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    try:
        rule = broker.call(broker.server.faults.add, "OffsetCommit", error, group=group)
        offsets = {tp: OffsetAndMetadata(42, "", -1)}
        if error == "REBALANCE_IN_PROGRESS":
            # kafka-python, as the Java consumer, reports this one to the application
            # (CommitFailedError) after asking to rejoin; the application commits again
            with pytest.raises(CommitFailedError):
                consumer.commit(offsets)
            consumer.commit(offsets)
        else:
            consumer.commit(offsets)  # retried inside commit(), after finding the coordinator again
        rules = broker.call(broker.server.faults.list)
        assert rules == [], rules  # fired once, then gone
        assert rule["error_code"] == {"NOT_COORDINATOR": 16, "COORDINATOR_LOAD_IN_PROGRESS": 14,
                                      "REBALANCE_IN_PROGRESS": 27}[error]
    finally:
        consumer.close()
    assert committed_offset(broker, group) == 42
