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

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "group.protocol": protocol,
    }
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

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=name,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
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
    members = [confluent_member(kafka_cluster.bootstrap, "ck848", f"ck848-{i}", ledger, "consumer") for i in range(2)]
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
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 50}
    )
    sent = threading.Event()

    def send() -> None:
        for i in range(count):
            while True:
                try:
                    producer.produce(
                        "seq", str(i).encode(), partition=0, on_delivery=lambda err, _m: err and errors.append(err)
                    )
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
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tx-check",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["tx"])
    values = set()
    deadline = time.monotonic() + 60
    while len(values) < 30 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            values.add(m.value().decode())
    consumer.close()
    assert values == {f"{r}-{i}" for r in range(3) for i in range(10)}


def read_committed_values(bootstrap: str, topic: str, expected: int) -> list[str]:
    """Every value a read_committed consumer gets from the topic's beginning, once at least
    `expected` are in and the consumer has reached the end."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-check",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while (len(values) < expected or len(at_end) < 2) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error() is None:
            values.append(m.value().decode())
            at_end.discard(m.partition())
        elif m.error().code() == m.error()._PARTITION_EOF:
            at_end.add(m.partition())
    consumer.close()
    return values


@pytest.mark.kafka_cluster(brokers=3)
def test_confluent_transactions_across_a_stop_of_the_transaction_coordinator(kafka_cluster):
    """Each round is in flight (records sent, not yet committed) when the coordinator's broker
    stops or its partition moves; the new coordinator loads the transaction from the log and
    commits it. Committed rounds are read once, the aborted one never."""
    from confluent_kafka import Producer

    bootstrap = kafka_cluster.bootstrap
    create_topic(bootstrap, "txs", 2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-stopper", "linger.ms": 0})
    producer.init_transactions(30)
    for round_ in range(3):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("txs", f"{round_}-{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        stopped = kafka_cluster.transaction_coordinator_of("tx-stopper")
        if round_ == 1:
            kafka_cluster.move_transaction_coordinator("tx-stopper")
        else:
            kafka_cluster.stop_broker(stopped)
        assert kafka_cluster.transaction_coordinator_of("tx-stopper") != stopped
        producer.commit_transaction(60)
        kafka_cluster.start_broker(stopped)
    producer.begin_transaction()
    producer.produce("txs", b"aborted")
    assert producer.flush(30) == 0
    kafka_cluster.stop_broker(kafka_cluster.transaction_coordinator_of("tx-stopper"))
    producer.abort_transaction(60)
    values = read_committed_values(bootstrap, "txs", 30)
    assert sorted(values) == sorted(f"{r}-{i}" for r in range(3) for i in range(10))  # once each, no abort


@pytest.mark.kafka_cluster(brokers=3)
def test_kafka_python_transactions_across_coordinator_moves(kafka_cluster):
    """(Not across a stop: kafka-python's transaction manager keeps waiting for the stopped
    coordinator's connection instead of looking the coordinator up again, as Java's Sender does.)"""
    from kafka import KafkaProducer

    bootstrap = kafka_cluster.bootstrap
    create_topic(bootstrap, "txk", 2)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-kafka-python")
    producer.init_transactions()
    for round_ in range(2):
        producer.begin_transaction()
        for i in range(10):
            producer.send("txk", f"{round_}-{i}".encode(), partition=i % 2)
        producer.flush()
        kafka_cluster.move_transaction_coordinator("tx-kafka-python")
        producer.commit_transaction()
    producer.begin_transaction()
    producer.send("txk", b"aborted", partition=0)
    producer.flush()
    kafka_cluster.move_transaction_coordinator("tx-kafka-python")
    producer.abort_transaction()
    producer.close()
    values = read_committed_values(bootstrap, "txk", 20)
    assert sorted(values) == sorted(f"{r}-{i}" for r in range(2) for i in range(10))


@pytest.mark.kafka_cluster(brokers=3)
def test_confluent_consumer_across_leader_moves_has_no_gap_and_no_duplicate(kafka_cluster):
    """The consumer fetches with the leader epoch Metadata gave it: after each move the old
    leader answers NOT_LEADER_OR_FOLLOWER, the new one fences a stale epoch, and the consumer
    goes on from its position after validating it (OffsetForLeaderEpoch)."""
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = kafka_cluster.bootstrap
    create_topic(bootstrap, "lm", 1)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "lm-reader", "enable.auto.commit": False, "fetch.wait.max.ms": 100}
    )
    consumer.assign([TopicPartition("lm", 0, 0)])
    offsets: list[int] = []
    total = 0
    try:
        for _ in range(5):
            produce(bootstrap, total, 40, topic="lm")
            total += 40
            deadline = time.monotonic() + 60
            while len(offsets) < total - 20 and time.monotonic() < deadline:  # moved mid-way through the batch
                m = consumer.poll(0.2)
                if m is not None and m.error() is None:
                    offsets.append(m.offset())
            kafka_cluster.move_leader("lm", 0)
        deadline = time.monotonic() + 60
        while len(offsets) < total and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                offsets.append(m.offset())
    finally:
        consumer.close()
    assert offsets == list(range(total))  # no gap, no duplicate
