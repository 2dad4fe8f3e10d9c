"""docs/benchmarks.md is generated from bench/results by `python -m bench.report`."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.process import ROOT


def report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.report", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_benchmarks_doc_is_generated_from_the_results():
    result = report("--check")
    assert result.returncode == 0, result.stderr


def test_newest_figure_shown_with_its_machine_date_and_peer(tmp_path):
    machine = {"cpu": "Test CPU", "cores": 2, "python": "3.11.7", "system": "Linux"}
    rows = [
        {
            "script": "bench/bench_groups.py",
            "figure": "rebalance",
            "value": 50.0,
            "unit": "ms",
            "params": {},
            "machine": machine,
            "date": "2026-01-01T00:00:00+00:00",
            "run": "a",
        },
        {
            "script": "bench/bench_groups.py",
            "figure": "rebalance",
            "value": 25.0,
            "unit": "ms",
            "params": {},
            "machine": machine,
            "date": "2026-02-01T00:00:00+00:00",
            "run": "b",
            "peer": {"name": "Kafka", "value": 3000.0},
        },
    ]
    (tmp_path / "bench_groups.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "benchmarks.md"
    assert report("--results", str(tmp_path), "--out", str(out)).returncode == 0
    text = out.read_text()
    assert "| rebalance | 25 ms | Kafka: 3,000 ms | M1 | 2026-02-01 |" in text
    assert "50 ms" not in text
    assert "| M1 | Test CPU | 2 | 3.11.7 |" in text
    assert report("--results", str(tmp_path), "--out", str(out), "--check").returncode == 0


def test_a_bad_results_line_is_one_error_line(tmp_path):
    (tmp_path / "x.jsonl").write_text("{not json\n")
    result = report("--results", str(tmp_path), "--out", str(tmp_path / "b.md"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "x.jsonl" in result.stderr
