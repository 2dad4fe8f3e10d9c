"""A pytest test of your own code against a real server: `kafka_bootstrap` (this package's
pytest plugin) starts a cluster of its own for the test, on free ports with its own data dir,
and stops it after. Run: .venv/bin/python -m pytest examples/test_orders.py"""

from kafka import KafkaConsumer, KafkaProducer


def test_orders_round_trip(kafka_bootstrap):
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)  # the topic is auto-created
    for i in range(3):
        producer.send("orders", value=f"order-{i}".encode())
    producer.flush()
    producer.close()

    consumer = KafkaConsumer("orders", bootstrap_servers=kafka_bootstrap, group_id="billing",
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    values = [m.value for _, m in zip(range(3), consumer)]
    consumer.commit()
    consumer.close()
    assert values == [b"order-0", b"order-1", b"order-2"]
