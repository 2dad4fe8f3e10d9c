"""The pytest plugin as a project that installed this package meets it: a test file outside
this repository, run without naming the plugin, gets the kafka_cluster fixtures through the
`pytest11` entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROJECT_TEST = '''
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
'''


@pytest.mark.slow  # a pytest run in a subprocess
def test_the_fixtures_come_with_the_package(tmp_path):
    (tmp_path / "test_project.py").write_text(PROJECT_TEST)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_project.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
