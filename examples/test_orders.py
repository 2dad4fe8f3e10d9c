"""A pytest test of your own code against a real server, started on a free port with its own
data dir for each test and stopped after it. Run: .venv/bin/python -m pytest examples/test_orders.py"""

import socket
import subprocess
import sys

import pytest
from kafka import KafkaConsumer, KafkaProducer


@pytest.fixture
def bootstrap(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "coordinator", "--port", str(port),
                               "--data-dir", str(tmp_path / "data")], stdout=subprocess.PIPE)
    assert server.stdout.readline().startswith(b"ready")  # printed once it listens
    yield f"127.0.0.1:{port}"
    server.terminate()
    server.wait()


def test_orders_round_trip(bootstrap):
    producer = KafkaProducer(bootstrap_servers=bootstrap)  # the topic is auto-created
    for i in range(3):
        producer.send("orders", value=f"order-{i}".encode())
    producer.flush()
    producer.close()

    consumer = KafkaConsumer("orders", bootstrap_servers=bootstrap, group_id="billing",
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    values = [m.value for _, m in zip(range(3), consumer)]
    consumer.commit()
    consumer.close()
    assert values == [b"order-0", b"order-1", b"order-2"]
