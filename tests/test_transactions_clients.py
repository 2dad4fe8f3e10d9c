"""Transactions with real clients: confluent-kafka (librdkafka) and kafka-python producers,
read_committed and read_uncommitted consumers, consume-transform-produce with
send_offsets_to_transaction across a SIGKILL of the server, and fencing."""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.support.process import create_topics

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles


def drain(bootstrap: str, topic: str, partitions: int, isolation: str, idle_s: float = 1.5) -> list[str]:
    """Every value a consumer with this isolation level reads from the start."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}-{time.monotonic()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, last = [], time.monotonic()
    while time.monotonic() - last < idle_s:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m.value().decode())
            last = time.monotonic()
    c.close()
    return sorted(out)


def producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    p.init_transactions(15)
    return p


def test_commit_and_abort_seen_by_isolation_level(server):
    create_topics(server.port, "txo", partitions=3)
    p = producer(server.bootstrap, "tx-visibility")
    p.begin_transaction()
    for i in range(6):
        p.produce("txo", f"committed-{i}".encode(), partition=i % 3)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(6):
        p.produce("txo", f"aborted-{i}".encode(), partition=i % 3)
    p.flush(15)  # on the broker, then aborted
    p.abort_transaction(15)
    committed = [f"committed-{i}" for i in range(6)]
    assert drain(server.bootstrap, "txo", 3, "read_committed") == sorted(committed)
    assert drain(server.bootstrap, "txo", 3, "read_uncommitted") == sorted(
        committed + [f"aborted-{i}" for i in range(6)]
    )


def test_second_producer_fences_the_first(server):
    create_topics(server.port, "txf", partitions=1)
    first = producer(server.bootstrap, "tx-fence")
    first.begin_transaction()
    first.produce("txf", b"from-first")
    first.flush(15)
    second = producer(server.bootstrap, "tx-fence")  # aborts the first one's transaction
    with pytest.raises(KafkaException) as raised:
        first.commit_transaction(15)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    second.begin_transaction()
    second.produce("txf", b"from-second")
    second.commit_transaction(15)
    assert drain(server.bootstrap, "txf", 1, "read_committed") == ["from-second"]


def test_kafka_python_transactional_producer(server):
    from kafka import KafkaProducer

    create_topics(server.port, "txk", partitions=2)
    p = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="tx-kafka-python")
    p.init_transactions()
    p.begin_transaction()
    for i in range(4):
        p.send("txk", f"kp-{i}".encode(), partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    p.send("txk", b"kp-aborted", partition=0)
    p.flush()
    p.abort_transaction()
    p.close()
    assert drain(server.bootstrap, "txk", 2, "read_committed") == [f"kp-{i}" for i in range(4)]


def test_consume_transform_produce_exactly_once_across_a_server_kill(server):
    """Inputs are upper-cased into an output topic, each batch of output committed with the
    consumer's offsets. The server is SIGKILLed inside a transaction; after the restart the
    application starts again (same transactional id, which aborts the open transaction) and
    goes on from the committed offsets: every input appears exactly once in the output."""
    create_topics(server.port, "eos-in", "eos-out", partitions=1)
    inputs = [f"m{i:03d}" for i in range(60)]
    p = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True})
    for v in inputs:
        p.produce("eos-in", v.encode())
    p.flush(15)

    def run(until_killed: bool) -> None:
        # (the crashed member comes back with the group at the restart, as in Kafka: a short
        # session lets the next run's rebalance go on without it sooner)
        c = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": "eos-app",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
        c.subscribe(["eos-in"])
        tx = producer(server.bootstrap, "eos-app-tx")
        done, batches = 0, 0
        while done < len(inputs):
            msgs = [m for m in c.consume(10, 1.0) if not m.error()]
            if not msgs:
                if not until_killed and c.position([TopicPartition("eos-in", 0)])[0].offset >= len(inputs):
                    break
                continue
            tx.begin_transaction()
            for m in msgs:
                tx.produce("eos-out", m.value().decode().upper().encode())
            tx.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 15)
            batches += 1
            if until_killed and batches == 3:
                tx.flush(15)  # the output is on the broker, uncommitted, when the server dies
                server.stop(signal.SIGKILL)
                return
            tx.commit_transaction(15)
            done += len(msgs)
        c.close()

    run(until_killed=True)
    server.start()
    run(until_killed=False)
    out = drain(server.bootstrap, "eos-out", 1, "read_committed")
    assert out == sorted(v.upper() for v in inputs)
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "eos-app"})
    assert c.committed([TopicPartition("eos-in", 0)], 10)[0].offset == len(inputs)
    c.close()
