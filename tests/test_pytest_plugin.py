"""The pytest plugin as a project that installed this package meets it: a test file outside
this repository, run without naming the plugin, gets the kafka_cluster fixtures through the
`pytest11` entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# The entry point names the module; this checkout's copy of it is the one under test.
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")])),
}

PROJECT_TEST = """
import pytest
from confluent_kafka.admin import AdminClient


def test_three_brokers(kafka_cluster, kafka_bootstrap):
    assert kafka_bootstrap == kafka_cluster.bootstrap
    assert sorted(AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).brokers) == [1, 2, 3]


@pytest.mark.kafka_cluster(brokers=2)
def test_marker(kafka_cluster):
    assert kafka_cluster.node_ids == [1, 2]
    assert kafka_cluster.move_coordinator("g") == kafka_cluster.coordinator_of("g")


def test_session_scope(kafka_cluster_session, kafka_bootstrap_session):
    assert kafka_bootstrap_session == kafka_cluster_session.bootstrap
"""


@pytest.mark.slow  # a pytest run in a subprocess
def test_the_fixtures_come_with_the_package(tmp_path):
    (tmp_path / "test_project.py").write_text(PROJECT_TEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_project.py"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


@pytest.mark.parametrize(
    "value, message", [("0", "--kafka-brokers: 0; at least 1"), ("three", "--kafka-brokers: invalid int value")]
)
def test_a_bad_kafka_brokers_option_is_one_usage_error(tmp_path, value, message):
    (tmp_path / "test_project.py").write_text(PROJECT_TEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kafka-brokers", value, "test_project.py"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4 and message in done.stderr, done.stdout + done.stderr  # pytest's usage-error status
