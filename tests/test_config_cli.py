"""Starting the server wrong gets one clear line and exit status 2, never a traceback,
and nothing is created on the way."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.support.cli import one_error_line, refused, start
from tests.support.process import ROOT, free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.process,
]  # server processes started, killed and restarted, or filled to their limits


def test_port_in_use_fails_before_the_data_dir_is_made(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_error_line(start("--port", str(port), "--data-dir", str(tmp_path / "data")))
    assert f"127.0.0.1:{port}" in line and "in use" in line
    assert not (tmp_path / "data").exists()


def test_data_dir_under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    line = one_error_line(start("--port", "0", "--data-dir", str(tmp_path / "file" / "data")))
    assert "data dir" in line and "Not a directory" in line


@pytest.mark.parametrize(
    "name, value, says",
    [
        ("KCOORD_PORT", "abc", "not a valid int"),
        ("KCOORD_FSYNC", "sometimes", "not one of always, interval, never"),
        ("KCOORD_AUTO_CREATE_TOPICS", "flase", "not one of 1, true, yes, on, 0, false, no, off"),
    ],
)
def test_bad_environment_values(tmp_path, name, value, says):
    line = one_error_line(start("--data-dir", str(tmp_path), env={name: value}))
    assert name in line and says in line
    helped = start("--help", env={name: value})
    assert helped.returncode == 0 and "--port" in helped.stdout  # --help works all the same


def test_misspelled_variable_is_named(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "--port", str(free_port()), "--data-dir", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # KCOORD_PURE (the compiled build's switch) is read by the import, not a setting: no warning
        env={**os.environ, "KCOORD_PROT": "9093", "KCOORD_PURE": "1"},
    )
    try:
        assert proc.stdout.readline().startswith("ready")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert "KCOORD_PROT is not a setting of this server, ignored (did you mean KCOORD_PORT?)" in err
    assert "KCOORD_PURE" not in err


def test_help_reads_cleanly():
    helped = start("--help")
    assert helped.returncode == 0 and "(default: None)" not in helped.stdout


def test_json_logs(tmp_path):
    import json

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator",
            "--port",
            str(free_port()),
            "--data-dir",
            str(tmp_path),
            "--log-format",
            "json",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().startswith("ready")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert lines and all(set(line) >= {"time", "level", "logger", "message"} for line in lines)
    assert any(line["message"].startswith("listening on") for line in lines)


@pytest.mark.parametrize(
    "flag, value",
    [("--quota-window-num", "0"), ("--quota-window-size-seconds", "-1"), ("--log-cleaner-backoff-ms", "-5")],
)
async def test_out_of_range_settings(tmp_path, flag, value):
    line = await refused(flag, value, "--port", "0", "--data-dir", str(tmp_path / "data"))  # (in process)
    assert flag in line and "at least" in line
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--group-share-delivery-count-limit", "1"),
            "--group-share-delivery-count-limit: 1; must be between 2 and 10",
        ),
        (("--group-share-max-delivery-count-limit", "26"), "must be between 5 and 25"),
        (("--group-share-min-delivery-count-limit", "6"), "must be between 2 and 5"),
        (
            ("--group-share-min-delivery-count-limit", "4", "--group-share-delivery-count-limit", "3"),
            "--group-share-delivery-count-limit: 3; must be between --group-share-min-delivery-count-limit (4)",
        ),
    ],
)
async def test_share_delivery_count_limits_are_checked_as_kafka(tmp_path, args, message):
    """ShareGroupConfig's ranges for group.share.{,min.,max.}delivery.count.limit and its check
    that max >= limit >= min: one line, exit 2, nothing started (found in process: cli.refused)."""
    line = await refused(*args, "--port", "0", "--data-dir", str(tmp_path / "data"))
    assert message in line
    assert not (tmp_path / "data").exists()
