"""Shared fixtures: a server per test on its own free port and data dir. In this process on
its own thread (tests/support/process.py InProcessServer) unless the test is marked
`process`, for what needs a real process of its own: kill -9, signals, a pid to measure,
startup errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.process import InProcessServer, ServerProcess

# Property tests check behaviour, never speed: on two cores shared by four test workers an
# example may take far longer than hypothesis' default 200 ms deadline without being wrong.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


# The modules that share one local Spark session (tests/pipeline/conftest.py `spark`): one
# work unit, so that one worker pays for the Spark JVM's start and warm-up, not each worker
# that happens to get one of them. Its JVM uses a core of its own while it plans, which is
# what a worker running other modules would contend with anyway.
SPARK_MODULES = (
    "tests/pipeline/test_pipeline.py",
    "tests/pipeline/test_lag.py",
    "tests/pipeline/test_follow.py",
    "tests/pipeline/test_report.py",
    "tests/pipeline/test_share_progress.py",
)
# Modules that run long on their own, handed out first, longest first, so that the other
# workers share out the short rest meanwhile and no worker is left with a long module at the
# end: Spark's (one unit, above), the differential suite (one Kafka node for its whole
# module), the modules that start JVMs or client programs.
FIRST = (
    *(Path(m).name for m in SPARK_MODULES),
    "test_kafka_oracle.py",
    "test_jvm_archive.py",
    "test_go_clients.py",
    "test_java_clients.py",
    "test_restart_clients.py",
    "test_admin_cli.py",
    "test_js_clients.py",
)
_ORDER = {name: i for i, name in enumerate(FIRST)}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: _ORDER.get(item.path.name, len(FIRST)))
    for item in items:
        module = item.path.relative_to(Path(__file__).parent.parent).as_posix()
        if "spark" in getattr(item, "fixturenames", ()) and module not in SPARK_MODULES:
            raise pytest.UsageError(f"{module} uses the spark fixture: list it in tests/conftest.py SPARK_MODULES")


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` as pytest-xdist does it, with two changes: modules are handed out in
    collection order (FIRST above), where xdist would hand out the modules with the most tests
    first (and the long one-test modules last, to finish alone), and SPARK_MODULES are one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return "spark" if module in SPARK_MODULES else module

    config.option.loadscopereorder = False  # (read by schedule(): keep the collection's order)
    return Scheduling(config, log)


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
