"""Benchmark figures in one machine-readable form, so that docs/benchmarks.md is generated
from what the scripts measured (`python -m bench.report`), never written by hand.

Each figure is one JSON object on its own line in `bench/results/<script>.jsonl`:
script, figure (what was measured, with its parameters in words), value, unit, params,
the machine (CPU model, cores), its load average, the UTC date, the run it belongs to (one id per script
invocation) and, where a peer was measured beside it in the same run, the peer's name and
value. `BENCH_RESULTS_DIR` writes elsewhere; `BENCH_RESULTS_DIR=` (empty) records nothing.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import uuid
from functools import cache
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(__file__).resolve().parent / "results"
RUN_ID = uuid.uuid4().hex[:12]  # one per script invocation: figures of one run share it


def results_dir() -> Path | None:
    value = os.environ.get("BENCH_RESULTS_DIR")
    if value is None:
        return DEFAULT_DIR
    return Path(value) if value else None


@cache
def machine() -> dict[str, Any]:
    """The CPU model and core count (from /proc/cpuinfo where there is one) and the Python."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(), "system": platform.system()}


def record(
    figure: str,
    value: float,
    unit: str,
    *,
    params: dict[str, Any] | None = None,
    peer: str | None = None,
    peer_value: float | None = None,
    script: str | None = None,
) -> None:
    """Append one figure to its script's results file (`script` defaults to the running one)."""
    directory = results_dir()
    if directory is None:
        return
    name = script or Path(sys.argv[0]).stem
    line = {
        "script": f"bench/{name}.py",
        "figure": figure,
        "value": value,
        "unit": unit,
        "params": params or {},
        "machine": machine(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "run": RUN_ID,
        "load": round(os.getloadavg()[0], 2),
    }  # other work on the machine, which skews every figure
    if peer is not None:
        line["peer"] = {"name": peer, "value": peer_value}
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{name}.jsonl", "a") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
