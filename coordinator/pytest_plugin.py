"""pytest fixtures for a Kafka cluster, registered through the `pytest11` entry point: a
project that installs this package has them without importing anything.

    def test_orders(kafka_bootstrap):             # a fresh 3-broker cluster for this test
        ...

    @pytest.mark.kafka_cluster(brokers=1, group_initial_rebalance_delay_ms=0)
    def test_one(kafka_cluster):                  # its own settings
        kafka_cluster.move_coordinator("g")

    def test_shared(kafka_cluster_session): ...   # one cluster for the whole session

`kafka_cluster` is a `coordinator.testing.Cluster` (started, in-process, with the `test`
profile's settings: no rebalance delays, short heartbeat intervals); the marker's arguments
are Cluster's and override the profile's. `--kafka-brokers N` sets the default number of brokers,
`--kafka-subprocess` runs every cluster as a child process.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from .testing import Cluster


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafka-coordinator", "Kafka cluster fixtures (coordinator.testing)")
    group.addoption("--kafka-brokers", type=int, default=3, help="brokers of the kafka_cluster fixtures (default 3)")
    group.addoption("--kafka-subprocess", action="store_true", help="run the fixtures' clusters as child processes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_cluster(brokers=3, **settings): the kafka_cluster fixture's brokers and server settings for this test",
    )
    if config.getoption("kafka_brokers") < 1:  # one usage error, not an error in every test that asks for a cluster
        raise pytest.UsageError(f"--kafka-brokers: {config.getoption('kafka_brokers')}; at least 1")


def _cluster(config: pytest.Config, kwargs: dict[str, Any]) -> Cluster:
    kwargs = dict(kwargs)
    kwargs.setdefault("brokers", config.getoption("kafka_brokers"))
    kwargs.setdefault("subprocess", config.getoption("kafka_subprocess"))
    return Cluster(**kwargs)


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A cluster of its own for one test, stopped after it."""
    marker = request.node.get_closest_marker("kafka_cluster")
    with _cluster(request.config, marker.kwargs if marker else {}) as cluster:
        yield cluster


@pytest.fixture
def kafka_bootstrap(kafka_cluster: Cluster) -> str:
    """The bootstrap servers (`host:port,...`) of the test's own cluster."""
    return kafka_cluster.bootstrap


@pytest.fixture(scope="session")
def kafka_cluster_session(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """One cluster for the whole session (faster; tests share its topics and groups)."""
    with _cluster(request.config, {}) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_bootstrap_session(kafka_cluster_session: Cluster) -> str:
    return kafka_cluster_session.bootstrap
