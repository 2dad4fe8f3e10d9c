"""Real clients on a 3-broker cluster while it changes under them (coordinator.testing,
through the kafka_cluster fixture): consumer groups of confluent-kafka (classic and
KIP-848) and kafka-python across a coordinator move and a broker stop, an idempotent
producer across leader moves, and transactions across a transaction-coordinator move.

A consumer commits each message synchronously after processing it; a message delivered
again after a commit that covered it succeeded is a committed message redelivered, which
must never happen."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.process import PolledMember, kafka_python_subscribe, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.process]  # real client libraries through whole group life cycles

TOPIC, PARTITIONS, PER_PHASE = "orders", 3, 60


def create_topic(bootstrap: str, name: str = TOPIC, partitions: int = PARTITIONS, rf: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # (kept until the results are in)
    for f in admin.create_topics([NewTopic(name, partitions, rf)]).values():
        f.result(30)


def produce(bootstrap: str, start: int, count: int, topic: str = TOPIC) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(start, start + count):
        p.produce(topic, str(i).encode(), key=str(i).encode())
    assert p.flush(60) == 0


class Ledger:
    """What the members of a group delivered and committed, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.delivered: list[tuple[int, int, str]] = []  # (partition, offset, value)
        self.committed: dict[int, int] = {}  # partition -> next offset, as acknowledged
        self.redelivered_committed: list[tuple[int, int]] = []

    def deliver(self, partition: int, offset: int, value: str) -> None:
        with self.lock:
            if self.committed.get(partition, 0) > offset:
                self.redelivered_committed.append((partition, offset))
            self.delivered.append((partition, offset, value))

    def commit(self, partition: int, next_offset: int) -> None:
        with self.lock:
            self.committed[partition] = max(self.committed.get(partition, 0), next_offset)

    def values(self) -> set[str]:
        with self.lock:
            return {v for _, _, v in self.delivered}


def confluent_member(bootstrap: str, group: str, name: str, ledger: Ledger, protocol: str) -> PolledMember:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    c = Consumer(config)
    c.subscribe([TOPIC])

    def poll() -> set[int]:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            ledger.deliver(m.partition(), m.offset(), m.value().decode())
            try:
                c.commit(offsets=[TopicPartition(TOPIC, m.partition(), m.offset() + 1)], asynchronous=False)
                ledger.commit(m.partition(), m.offset() + 1)
            except KafkaException:
                pass  # not committed (the coordinator moved meanwhile): it may come again
        return {tp.partition for tp in c.assignment()}

    return PolledMember(poll, c.close)


def kafka_python_member(bootstrap: str, group: str, name: str, ledger: Ledger) -> PolledMember:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import KafkaError

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name, session_timeout_ms=6000,
                      heartbeat_interval_ms=500, auto_offset_reset="earliest", enable_auto_commit=False)
    kafka_python_subscribe(c, TOPIC)

    def poll() -> set[int]:
        for messages in c.poll(timeout_ms=200, max_records=1).values():
            for m in messages:
                ledger.deliver(m.partition, m.offset, m.value.decode())
                try:
                    c.commit({TopicPartition(TOPIC, m.partition): OffsetAndMetadata(m.offset + 1, None, -1)})
                    ledger.commit(m.partition, m.offset + 1)
                except KafkaError:
                    pass
        return {tp.partition for tp in c.assignment()}

    return PolledMember(poll, c.close)


def run_group_through_moves(cluster, members, ledger: Ledger, group: str) -> None:
    """Three phases of messages: the group's coordinator moves after the first, and the
    broker coordinating it stops after the second. Every message is delivered, the group
    covers every partition again after each change, and no committed message comes again."""
    bootstrap = cluster.bootstrap
    try:
        def converged() -> bool:
            owned = [m.owned for m in members]
            return sorted(p for o in owned for p in o) == list(range(PARTITIONS)) and all(owned)

        wait_for(converged, timeout=60, what="the group's first assignment")
        produce(bootstrap, 0, PER_PHASE)
        wait_for(lambda: len(ledger.values()) >= PER_PHASE, timeout=60, what="phase 1 consumed")
        old = cluster.coordinator_of(group)
        new = cluster.move_coordinator(group)
        assert new != old and cluster.coordinator_of(group) == new
        produce(bootstrap, PER_PHASE, PER_PHASE)
        wait_for(lambda: len(ledger.values()) >= 2 * PER_PHASE, timeout=90, what="phase 2 consumed")
        stopped = cluster.coordinator_of(group)
        cluster.stop_broker(stopped)
        assert cluster.coordinator_of(group) != stopped
        produce(bootstrap, 2 * PER_PHASE, PER_PHASE)
        wait_for(lambda: len(ledger.values()) >= 3 * PER_PHASE, timeout=120, what="phase 3 consumed")
        wait_for(converged, timeout=60, what="the group converged after the broker stopped")
    finally:
        for m in members:
            m.close()
    assert ledger.values() == {str(i) for i in range(3 * PER_PHASE)}
    assert ledger.redelivered_committed == []


@pytest.mark.kafka_cluster(brokers=3)
def test_confluent_classic_group_across_a_coordinator_move_and_a_broker_stop(kafka_cluster):
    create_topic(kafka_cluster.bootstrap)
    ledger = Ledger()
    members = [confluent_member(kafka_cluster.bootstrap, "ck", f"ck-{i}", ledger, "classic") for i in range(2)]
    run_group_through_moves(kafka_cluster, members, ledger, "ck")


@pytest.mark.kafka_cluster(brokers=3)
def test_confluent_kip848_group_across_a_coordinator_move_and_a_broker_stop(kafka_cluster):
    create_topic(kafka_cluster.bootstrap)
    ledger = Ledger()
    members = [confluent_member(kafka_cluster.bootstrap, "ck848", f"ck848-{i}", ledger, "consumer")
               for i in range(2)]
    run_group_through_moves(kafka_cluster, members, ledger, "ck848")


@pytest.mark.kafka_cluster(brokers=3)
def test_kafka_python_group_across_a_coordinator_move_and_a_broker_stop(kafka_cluster):
    create_topic(kafka_cluster.bootstrap)
    ledger = Ledger()
    members = [kafka_python_member(kafka_cluster.bootstrap, "kp", f"kp-{i}", ledger) for i in range(2)]
    run_group_through_moves(kafka_cluster, members, ledger, "kp")


@pytest.mark.kafka_cluster(brokers=3)
def test_idempotent_producer_across_leader_moves_has_no_duplicates_and_no_gaps(kafka_cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = kafka_cluster.bootstrap
    create_topic(bootstrap, "seq", 1)
    count, errors = 3000, []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
                         "batch.num.messages": 50})
    sent = threading.Event()

    def send() -> None:
        for i in range(count):
            while True:
                try:
                    producer.produce("seq", str(i).encode(), partition=0,
                                     on_delivery=lambda err, _m: err and errors.append(err))
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            if i % 500 == 0:
                time.sleep(0.01)  # (spread the sends over the moves)
        assert producer.flush(60) == 0
        sent.set()

    thread = threading.Thread(target=send)
    thread.start()
    epochs = []
    while not sent.is_set() and len(epochs) < 6:
        epochs.append(kafka_cluster.move_leader("seq", 0))
    thread.join(90)
    assert sent.is_set() and errors == []
    assert epochs, "the producer finished before any move"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "seq-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition("seq", 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < count and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            values.append(int(m.value()))
    consumer.close()
    assert values == list(range(count))  # no duplicate, no gap, in order


@pytest.mark.kafka_cluster(brokers=3)
def test_transactions_across_a_transaction_coordinator_move(kafka_cluster):
    from confluent_kafka import Consumer, Producer

    bootstrap = kafka_cluster.bootstrap
    create_topic(bootstrap, "tx", 2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-mover", "linger.ms": 0})
    producer.init_transactions(30)
    for round_ in range(3):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("tx", f"{round_}-{i}".encode())
        moved = kafka_cluster.move_transaction_coordinator("tx-mover")
        assert kafka_cluster.transaction_coordinator_of("tx-mover") == moved
        producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce("tx", b"aborted")
    # Delivered first: librdkafka aborting while its AddPartitionsToTxn is unanswered sends an
    # EndTxn the coordinator (Kafka's too) refuses as INVALID_TXN_STATE (librdkafka#4849).
    assert producer.flush(30) == 0
    kafka_cluster.move_transaction_coordinator("tx-mover")
    producer.abort_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tx-check", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe(["tx"])
    values = set()
    deadline = time.monotonic() + 60
    while len(values) < 30 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            values.add(m.value().decode())
    consumer.close()
    assert values == {f"{r}-{i}" for r in range(3) for i in range(10)}
