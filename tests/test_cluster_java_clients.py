"""The Java KafkaConsumer (tests/clients/java/, kafka-clients 4.x) through its life cycle on a
3-broker cluster, on the classic protocol (cooperative-sticky) and the consumer protocol, where
the lifecycle's server restart is a broker bounce instead: the broker coordinating the group
stops (the group's coordinator and its partitions' leaders move, the group is loaded from the
log by its new coordinator) and starts again. The Java consumer rediscovers its coordinator
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) and carries on, with nothing delivered again
after a commit covered it."""

from __future__ import annotations

import pytest

from tests.support.reference_clients import build, committed_offsets, end_offsets, java_command, run_program

pytestmark = pytest.mark.slow  # Go and Java client programs built and run against a 3-broker cluster


@pytest.fixture(scope="module", autouse=True)
def java_clients():
    build("java-clients", ("java", "mvn"))


class BrokerBounce:
    """Stands for the server the client program asks to restart."""

    def __init__(self, cluster, group: str) -> None:
        self.cluster, self.group, self.bounced = cluster, group, []

    def restart(self) -> None:
        node = self.cluster.coordinator_of(self.group)
        self.cluster.stop_broker(node)
        self.cluster.start_broker(node)
        self.bounced.append(node)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("mode", ("cooperative-sticky", "consumer"))
@pytest.mark.kafka_cluster(brokers=3, group_consumer_heartbeat_interval_ms=500)
def test_kafka_consumer_across_a_broker_bounce(kafka_cluster, mode, tmp_path):
    group = topic = f"java-{mode}"
    bounce = BrokerBounce(kafka_cluster, group)
    result = run_program(
        java_command("consumer", kafka_cluster.bootstrap, mode), bounce, log=tmp_path / f"java-{mode}.log"
    )
    assert bounce.bounced, "the program never asked for its restart"
    assert result["failures"] == [], result
    assert result["missing"] == [], "records never delivered"
    assert result["violations"] == {}, "records delivered again after a commit covered them"
    assert result["ok"], result
    committed = committed_offsets(kafka_cluster.bootstrap, group, topic, 6)
    assert committed == end_offsets(kafka_cluster.bootstrap, topic, 6)
