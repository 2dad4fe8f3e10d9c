"""One server process per data dir (Kafka's `.lock`): a second one is refused with one line
and exit status 2, and the lock goes with its holder, however it exits. The data dir's cluster
id (Kafka's meta.properties)."""

from __future__ import annotations

import pytest

import re
import signal
import socket
import subprocess
import sys

from coordinator.data_dir import cluster_id_of, lock_data_dir, stored_cluster_id, unlock_data_dir
from tests.support.process import ROOT, InProcessServer, ServerProcess, free_port
from tests.support.raw_wire import Wire
from tests.support.cli import one_error_line, start

pytestmark = [
    pytest.mark.slow,
    pytest.mark.process,
]  # server processes started, killed and restarted, or filled to their limits


def test_a_second_server_on_the_same_data_dir_is_refused(server):
    line = one_error_line(start("--port", str(free_port()), "--data-dir", str(server.data_dir)))
    assert "in use" in line and str(server.data_dir.resolve()) in line and str(server.proc.pid) in line
    repair = subprocess.run(
        [sys.executable, "-m", "coordinator.log", "repair", str(server.data_dir / "__consumer_offsets-0")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert repair.returncode == 2 and "stop the server first" in repair.stderr, repair.stderr
    assert server.proc.poll() is None  # the first one runs on, undisturbed
    second = ServerProcess(server.data_dir)
    server.stop(signal.SIGKILL)  # the kernel drops a flock with its holder, SIGKILL included
    second.start()
    try:
        assert second.proc.poll() is None
    finally:
        second.close()


def test_port_in_use_is_still_said_before_the_data_dir_lock(server):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        line = one_error_line(start("--port", str(taken.getsockname()[1]), "--data-dir", str(server.data_dir)))
    assert "in use" in line and "cannot listen" in line


def test_the_lock_is_per_process_and_counted(tmp_path):
    """Brokers sharing one process share its lock; another process waits for the last to let go."""
    a = lock_data_dir(tmp_path)
    b = lock_data_dir(tmp_path)
    try:
        unlock_data_dir(a)
        assert "in use" in one_error_line(start("--port", "0", "--data-dir", str(tmp_path)))
    finally:
        unlock_data_dir(b)
    s = ServerProcess(tmp_path)
    s.start()
    s.close()


def test_the_cluster_id_is_the_data_dirs(tmp_path):
    """As Kafka's meta.properties: a new data dir gets a cluster id in Kafka's format (22
    characters of url-safe base64) at its first start and keeps it; a --cluster-id naming
    another cluster is refused, the one it holds accepted."""
    data = tmp_path / "data"
    ids = []
    for _ in range(2):
        server = InProcessServer(data)
        server.start()
        try:
            w = Wire(server.port)
            ids.append(
                w.call(
                    3, 12, topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
                ).cluster_id
            )
            w.close()
        finally:
            server.close()
    assert ids[0] == ids[1] == stored_cluster_id(data) and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", ids[0])
    line = one_error_line(start("--port", "0", "--data-dir", str(data), "--cluster-id", "another"))
    assert f"belongs to cluster {ids[0]}" in line and "--cluster-id another" in line
    given = tmp_path / "given"
    given.mkdir()
    assert cluster_id_of(given, "MkU3OEVBNTcwNTJENDM2Qk") == "MkU3OEVBNTcwNTJENDM2Qk" == stored_cluster_id(given)
    assert cluster_id_of(given, "") == cluster_id_of(given, "MkU3OEVBNTcwNTJENDM2Qk") == "MkU3OEVBNTcwNTJENDM2Qk"
