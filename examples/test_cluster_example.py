"""A consumer group carrying on while its coordinator moves, with the kafka_cluster fixture
that `pip install` brings (coordinator/pytest_plugin.py: a 3-broker cluster in-process)."""

from confluent_kafka import Consumer, Producer


def test_billing_carries_on_when_its_coordinator_moves(kafka_cluster):
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap})
    for i in range(6):
        producer.produce("orders", f"order-{i}".encode())
    producer.flush()
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap, "group.id": "billing",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    seen = []
    while len(seen) < 6:
        message = consumer.poll(1.0)
        if message is not None and not message.error():
            seen.append(message.value())
            consumer.commit(message, asynchronous=False)
            if len(seen) == 3:
                kafka_cluster.move_coordinator("billing")  # NOT_COORDINATOR, then a reload from the log
    consumer.close()
    assert seen == [f"order-{i}".encode() for i in range(6)]
