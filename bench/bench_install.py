"""What the compiled build adds to an install: `pip install .` of this tree into a fresh venv,
pure Python (KCOORD_PURE=1) against compiled, wall time and CPU time (the build's processes,
all cores). pip's cache is warmed first (one pure install), so that downloads are not timed.

    python bench/bench_install.py
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.results import record  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def install(pure: bool) -> tuple[float, float]:
    """Wall and CPU seconds of `python -m venv` + `pip install .` from a clean copy of the tree."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "src"
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        for name in files.decode().split("\0"):
            if name and (ROOT / name).is_file():
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, tree / name)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KCOORD_PURE")}  # (the venv's own)
        venv = Path(tmp) / "venv"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [venv / "bin" / "pip", "install", "-q", str(tree)]
        subprocess.run(pip, env={**env, "KCOORD_PURE": "1" if pure else ""}, check=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        state = subprocess.run(
            [venv / "bin" / "python", "-c", "import protocol.compiled as c; print(c.state)"],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if (state == "compiled") == pure:
            sys.exit(f"the {'pure' if pure else 'compiled'} install runs {state}")
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        return wall, cpu


def main() -> None:
    install(pure=True)  # (pip's cache: the dependencies' wheels)
    pure_wall, pure_cpu = install(pure=True)
    wall, cpu = install(pure=False)
    load = os.getloadavg()[0]
    print(f"pure: {pure_wall:.1f} s wall, {pure_cpu:.1f} s CPU; compiled: {wall:.1f} s wall, {cpu:.1f} s CPU")
    print(f"(load average {load:.1f} on {os.cpu_count()} cores: wall time is the machine's, CPU time the build's)")
    peer = "pure Python (KCOORD_PURE=1)"
    shape = {"cores": os.cpu_count()}
    record(
        "pip install . into a fresh venv, compiled build: wall time",
        wall,
        "s",
        params=shape,
        peer=peer,
        peer_value=pure_wall,
    )
    record(
        "pip install . into a fresh venv, compiled build: CPU time",
        cpu,
        "s",
        params=shape,
        peer=peer,
        peer_value=pure_cpu,
    )


if __name__ == "__main__":
    main()
