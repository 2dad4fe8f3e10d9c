"""franz-go's group consumers (tests/clients/go/, the classic cooperative-sticky protocol and
KIP-848) through their whole life cycle on a 3-broker cluster, where the lifecycle's server
restart is a broker bounce instead: the broker coordinating the group stops (its partitions'
leaders and the group's coordinator move, the group is loaded from the log by its new
coordinator) and starts again. The program checks that the group carries on, that nothing is
delivered again after a commit covered it, and that the committed offsets end at the log end."""

from __future__ import annotations

import pytest

from tests.support.reference_clients import build, committed_offsets, end_offsets, go_command, run_program

pytestmark = pytest.mark.slow  # Go and Java client programs built and run against a 3-broker cluster

SCENARIOS = ("franz-cooperative", "franz-consumer")


@pytest.fixture(scope="module", autouse=True)
def go_clients():
    build("go-clients", ("go",))


class BrokerBounce:
    """Stands for the server the client program asks to restart."""

    def __init__(self, cluster, group: str) -> None:
        self.cluster, self.group, self.bounced = cluster, group, []

    def restart(self) -> None:
        node = self.cluster.coordinator_of(self.group)
        self.cluster.stop_broker(node)
        assert self.cluster.coordinator_of(self.group) != node
        self.cluster.start_broker(node)
        self.bounced.append(node)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.kafka_cluster(brokers=3, group_consumer_heartbeat_interval_ms=500)
def test_franz_go_group_across_a_broker_bounce(kafka_cluster, scenario, tmp_path):
    group = topic = f"go-{scenario}"
    bounce = BrokerBounce(kafka_cluster, group)
    seed = kafka_cluster.bootstrap.split(",")[0]  # (one seed broker: the client finds the others)
    result = run_program(go_command(scenario, seed), bounce, log=tmp_path / f"{scenario}.log")
    assert bounce.bounced, "the program never asked for its restart"
    assert result["failures"] == [], result
    assert result["ok"], result
    assert result["missing"] == [], "records never delivered"
    assert result["violations"] == {}, "records delivered again after a commit covered them"
    committed = committed_offsets(kafka_cluster.bootstrap, group, topic, 6)
    assert committed == end_offsets(kafka_cluster.bootstrap, topic, 6)
