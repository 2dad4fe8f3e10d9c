"""The README's examples, run as a reader runs them, against a real server."""

from __future__ import annotations

import pytest

import ast
import os
import re
import subprocess
import sys

from tests.support.process import ROOT

pytestmark = pytest.mark.slow  # the examples run as programs of their own (the server: in this process)

EXAMPLES = ROOT / "examples"


def run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, **env})


def test_quickstart_and_the_readme_cli_lines_run_twice_in_a_row(server):
    """quickstart.py twice: the second run finds the topic there and the group past its first
    ten records. Then the README's kcoord lines, as written, after its quickstart.py, twice;
    `kcoord` is this checkout's (python -m coordinator.admin), pointed at the server by
    KCOORD_BOOTSTRAP_SERVER. (One test: each quickstart run waits out its consumer's 5 s idle
    timeout, and the README's lines need one before them.)"""
    first = run([sys.executable, str(EXAMPLES / "quickstart.py")], BOOTSTRAP=server.bootstrap)
    assert first.returncode == 0, first.stderr
    second = run([sys.executable, str(EXAMPLES / "quickstart.py")], BOOTSTRAP=server.bootstrap)
    assert second.returncode == 0, second.stderr
    records = [line.split() for line in first.stdout.splitlines()]
    again = [line.split() for line in second.stdout.splitlines()]
    assert len(records) == 10 and len(again) == 10
    assert not {(p, o) for p, o, _ in records} & {(p, o) for p, o, _ in again}

    readme = (ROOT / "README.md").read_text()
    block = next(b for b in re.findall(r"```sh\n(.*?)```", readme, re.S) if "kcoord topics create payments" in b)
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    script = "\n".join(
        [
            "set -e",
            f'kcoord() {{ "{sys.executable}" -m coordinator.admin "$@"; }}',
            *(line for line in lines if "kcoord" in line and not line.startswith(".")),
        ]
    )
    for _ in range(2):
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "KCOORD_BOOTSTRAP_SERVER": server.bootstrap},
        )
        assert result.returncode == 0, result.stderr


def test_pytest_example_passes():
    result = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "test_orders.py")])
    assert result.returncode == 0, result.stdout + result.stderr


def test_cluster_example_passes():
    result = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "test_cluster_example.py")]
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_shows_the_examples_as_shipped():
    """The README's pytest example is examples/test_orders.py without its docstring, and every
    file its quick start runs exists."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    for example in ("test_orders.py", "test_cluster_example.py"):
        source = (EXAMPLES / example).read_text()
        docstring = ast.get_docstring(ast.parse(source), clean=False)
        body = source.split('"""', 2)[2].lstrip("\n") if docstring else source
        assert body in blocks, example
    for path in re.findall(r"\.venv/bin/python (examples/\S+\.py)", readme):
        assert (ROOT / path).is_file(), path


def python_block(page: str, marker: str) -> str:
    text = (ROOT / "docs" / page).read_text()
    return next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if marker in b)


def test_cluster_page_python_sample_runs():
    """docs/cluster.md's `coordinator.testing` sample, as written: every control it shows works."""
    result = run([sys.executable, "-c", python_block("cluster.md", "from coordinator.testing import Cluster")])
    assert result.returncode == 0, result.stderr


def test_share_groups_page_sample_reads_and_accepts(server):
    """docs/share-groups.md's ShareConsumer sample, pointed at the test's server: it prints the
    records, and a second run prints none (the first accepted them)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(5):
        producer.produce("orders", f"order-{i}".encode())
    producer.flush()
    sample = python_block("share-groups.md", "ShareConsumer").replace("127.0.0.1:9092", server.bootstrap)
    first = run([sys.executable, "-c", sample])
    assert first.returncode == 0, first.stderr
    assert sorted(line.split()[2] for line in first.stdout.splitlines()) == [f"b'order-{i}'" for i in range(5)]
    second = run([sys.executable, "-c", sample])
    assert second.returncode == 0 and second.stdout == "", second.stdout + second.stderr
