"""Create a topic, produce ten records, consume them in group "demo" and commit.

Run it against `make run` (127.0.0.1:9092) or set BOOTSTRAP=host:port. Safe to run again:
the topic is created only if missing, and the group resumes after its committed offsets."""

import os
import socket
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

BOOTSTRAP = os.environ.get("BOOTSTRAP", "127.0.0.1:9092")

# `make run &` may still be starting: wait up to 60 s for the port to accept connections.
host, port = BOOTSTRAP.rsplit(":", 1)
deadline = time.monotonic() + 60
while True:
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            raise SystemExit(f"no server at {BOOTSTRAP}: start it with `make run &`") from None
        time.sleep(0.2)

admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
try:
    admin.create_topics([NewTopic("orders", 3, 1)])
except TopicAlreadyExistsError:
    pass  # a second run
admin.close()

producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)
for i in range(10):
    producer.send("orders", key=str(i).encode(), value=b"hello")
producer.flush()
producer.close()

consumer = KafkaConsumer("orders", bootstrap_servers=BOOTSTRAP, group_id="demo",
                         auto_offset_reset="earliest", consumer_timeout_ms=5000)  # stop when idle 5 s
for message in consumer:
    print(message.partition, message.offset, message.value)
    consumer.commit()
consumer.close()
