"""A Spark session as the job starts it (its own JVM, in a new process): the first one writes the
JVM's class archive for the next ones, and an archive the JVM cannot use costs nothing but speed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark: a JVM and Python workers per session

# A session that answers through its JVM and stops: no job, whose classes would add a third to
# the dump's size and to the test's time without changing what is checked.
SESSION = """
from pipeline.run import spark_session, stop_session
spark = spark_session("local[1]", progress=False)
print("spark", spark.version)
stop_session(spark)
"""


def session(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    return subprocess.run(
        [sys.executable, "-c", SESSION], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.timeout(400)  # a JVM that starts Spark and dumps its classes (110 MB) as it exits
def test_first_session_writes_the_archive_and_a_damaged_one_is_ignored(tmp_path, monkeypatch):
    pyspark = pytest.importorskip("pyspark")
    from pipeline.jvm_archive import Archive, java_binary
    from pipeline.run import LEAN_JVM_OPTIONS

    first = session(tmp_path)
    assert first.returncode == 0 and f"spark {pyspark.__version__}" in first.stdout, first.stderr[-3000:]
    archives = list((tmp_path / "kafka-coordinator").glob("spark-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 1 << 20
    assert not list((tmp_path / "kafka-coordinator").glob("*.tmp"))  # the dump was put in place whole

    archives[0].chmod(0o644)
    archives[0].write_bytes(b"not an archive")  # a damaged file: the JVM starts without it, silently
    # The next session's driver JVM gets these options; a JVM started with them is that JVM
    # as far as the archive goes (mapping it is the first thing a JVM does, before any class).
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    archive = Archive(LEAN_JVM_OPTIONS)
    assert archive.path == archives[0] and archive.dumping is None
    second = subprocess.run(
        [str(java_binary()), *LEAN_JVM_OPTIONS.split(), *archive.options.split(), "-version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 0 and "version" in second.stderr, second.stderr[-3000:]
    assert "cds" not in (second.stdout + second.stderr).lower()
    shutil.rmtree(tmp_path / "kafka-coordinator")  # 200 MB: not left for pytest's kept tmp dirs
