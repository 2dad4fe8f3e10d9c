"""Shared fixtures: a server per test on its own free port and data dir. In this process on
its own thread (tests/support/process.py InProcessServer) unless the test is marked
`process`, for what needs a real process of its own: kill -9, signals, a pid to measure,
startup errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.process import InProcessServer, ServerProcess

# Property tests check behaviour, never speed: on two cores shared by three test workers an
# example may take far longer than hypothesis' default 200 ms deadline without being wrong.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


# Modules that run long on their own, started first, longest first, so that the other workers
# share out the short rest meanwhile and no worker is left with a long module at the end
# (pytest-xdist --dist loadfile hands out modules in collection order): the differential suite
# runs one Kafka node for its whole module; Spark's and the client programs' modules start JVMs.
FIRST = (
    "test_kafka_oracle.py",
    "test_pipeline.py",
    "test_follow.py",
    "test_jvm_archive.py",
    "test_go_clients.py",
    "test_java_clients.py",
    "test_lag.py",
    "test_restart_clients.py",
    "test_admin_cli.py",
    "test_report.py",
    "test_js_clients.py",
)
_ORDER = {name: i for i, name in enumerate(FIRST)}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: _ORDER.get(item.path.name, len(FIRST)))


@pytest.fixture
def server_factory(tmp_path, request):
    kind = ServerProcess if request.node.get_closest_marker("process") else InProcessServer
    started: list[ServerProcess | InProcessServer] = []

    def make(*extra_args: str, data_dir: Path | None = None) -> ServerProcess | InProcessServer:
        s = kind(data_dir or tmp_path / f"data{len(started)}", list(extra_args))
        s.start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.close()


@pytest.fixture
def server(server_factory) -> ServerProcess | InProcessServer:
    return server_factory()
