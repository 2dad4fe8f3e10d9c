"""The Java reference clients (kafka-clients and kafka-streams 4.x, tests/clients/java/) through
their life cycles against the server: KafkaConsumer on the classic protocol (eager range,
cooperative-sticky) and the consumer protocol, with members leaving and joining, a static
member restarting, a server restart and a resume from committed offsets."""

from __future__ import annotations

import pytest

from tests.client_programs import build, committed_offsets, end_offsets, java_command, run_parallel

# Consumer-protocol members heartbeat at the broker's interval: short, so steps end quickly.
SERVER_ARGS = ("--group-consumer-heartbeat-interval-ms", "500")


@pytest.fixture(scope="module", autouse=True)
def java_clients():
    build("java-clients", ("java", "mvn"))


def assert_exact(result: dict) -> None:
    assert result["failures"] == [], result
    assert result["missing"] == [], "records never delivered"
    assert result["violations"] == {}, "records delivered again after a commit covered them"
    assert result["ok"], result


@pytest.mark.timeout(400)
def test_kafka_consumer_life_cycle(server_factory, tmp_path):
    modes = ("eager-range", "cooperative-sticky", "consumer")
    servers = {mode: server_factory(*SERVER_ARGS) for mode in modes}
    results = run_parallel({mode: (java_command("consumer", servers[mode].bootstrap, mode), servers[mode],
                                   tmp_path / f"java-{mode}.log") for mode in modes})
    for mode, result in results.items():
        assert_exact(result)
        assert result["produced"] == 6 * 60
        # The committed offsets read back by another client: the whole log, nothing left over.
        topic = result["topic"]
        committed = committed_offsets(servers[mode].bootstrap, result["group"], topic, 6)
        assert committed == end_offsets(servers[mode].bootstrap, topic, 6)
        assert {str(p): o for p, o in committed.items()} == result["committed"]
