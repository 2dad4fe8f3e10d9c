"""Shared fixtures: a real server process on its own free port and data dir per test
(tests/support/process.py), for tests that need a process of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.process import ServerProcess


@pytest.fixture
def server_factory(tmp_path):
    started: list[ServerProcess] = []

    def make(*extra_args: str, data_dir: Path | None = None) -> ServerProcess:
        s = ServerProcess(data_dir or tmp_path / f"data{len(started)}", list(extra_args))
        s.start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.close()


@pytest.fixture
def server(server_factory) -> ServerProcess:
    return server_factory()


