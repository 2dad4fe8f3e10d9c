"""A topic created through kafka-python's admin client, for the client-library group tests."""

from __future__ import annotations

TOPIC, PARTITIONS = "orders", 6


def create_topic(bootstrap: str, name: str = TOPIC, partitions: int = PARTITIONS) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()
