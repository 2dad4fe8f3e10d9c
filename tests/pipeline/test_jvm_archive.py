"""The job as a user runs it (`python -m pipeline.run`, its own JVM): the first run writes the
JVM's class archive for the next ones, and an archive the JVM cannot use costs nothing but speed."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.logs import write_data_dir

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.spark


def job(data: Path, out: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return subprocess.run([sys.executable, "-m", "pipeline.run", "--data-dir", str(data), "--out", str(out),
                           "--master", "local[2]"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_first_run_writes_the_archive_and_a_damaged_one_is_ignored(tmp_path):
    pytest.importorskip("pyspark")
    data = tmp_path / "data"
    asyncio.run(write_data_dir(data))
    cache = tmp_path / "cache"

    first = job(data, tmp_path / "out1", cache)
    assert first.returncode == 0, first.stderr[-3000:]
    archives = list((cache / "kafka-coordinator").glob("spark-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 1 << 20
    assert not list((cache / "kafka-coordinator").glob("*.tmp"))  # the dump was put in place whole

    archives[0].chmod(0o644)
    archives[0].write_bytes(b"not an archive")  # a damaged file: the JVM starts without it
    second = job(data, tmp_path / "out2", cache)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "cds" not in (second.stdout + second.stderr).lower()
    for out in ("out1", "out2"):
        assert (tmp_path / out / "report.html").exists()
        assert (tmp_path / out / "committed_offsets" / "_SUCCESS").exists()
    assert (tmp_path / "out1" / "committed_offsets" / "part-00000.parquet").read_bytes() == (
        tmp_path / "out2" / "committed_offsets" / "part-00000.parquet").read_bytes()
