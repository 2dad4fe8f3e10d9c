"""The compiled build (setup.py, protocol/compiled.py): its modules are used, all of them, when
they were built from the sources as they are; KCOORD_PURE=1, a source edited since the build or a
build that could not compile runs pure Python."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys

import pytest

from protocol import compiled
from tests.support.process import ROOT

PURE = os.environ.get("KCOORD_PURE", "") not in ("", "0")

SHOW = (
    "import coordinator.server, protocol.compiled as c, sys; "
    "print(c.state); print(*(sys.modules[c.module_name(p)].__file__ for p in c.HOT), sep='\\n')"
)


def imported(root=ROOT, **env: str) -> tuple[str, list[str]]:
    """protocol.compiled's state in a fresh interpreter run in `root`, and the files its compiled
    modules came from."""
    env = {**os.environ, **env}
    env.pop("PYTHONPATH", None)  # (root's own packages, not the tree running the tests)
    done = subprocess.run([sys.executable, "-c", SHOW], cwd=root, env=env, capture_output=True, text=True, check=True)
    out = done.stdout.splitlines()
    return out[0], out[1:]


def test_kcoord_pure_runs_the_python_sources():
    state, files = imported(KCOORD_PURE="1")
    assert state == "pure: KCOORD_PURE is set"
    assert all(f.endswith(".py") for f in files)


@pytest.mark.skipif(PURE, reason="KCOORD_PURE is set")
def test_the_build_is_used_whole_when_there_is_one():
    """Where CI runs on a machine that can compile, the install compiled: a build that fell
    back to Python fails here."""
    usable = compiled.compiled_files()
    if isinstance(usable, str) and not (os.environ.get("CI") and compiled.cannot_compile() is None):
        pytest.skip(f"no compiled build to use ({usable}): make compiled")
    state, files = imported()
    assert state == "compiled"
    assert all(f.startswith(str(ROOT / compiled.COMPILED_DIR)) for f in files)


def tree(tmp_path):
    """A copy of the packages, with their compiled build if there is one, and their bytecode
    (`make test` writes it first; copied with the sources' times, it stays valid): an
    interpreter importing the copy where PYTHONDONTWRITEBYTECODE is set would otherwise compile
    every module again, a few seconds of CPU an import."""
    for package in ("protocol", "coordinator"):
        shutil.copytree(ROOT / package, tmp_path / package)
    return tmp_path


@pytest.mark.skipif(PURE, reason="KCOORD_PURE is set")
def test_a_build_whose_source_was_edited_since_is_not_used(tmp_path):
    if isinstance(compiled.compiled_files(), str):
        pytest.skip("no compiled build: make compiled")
    root = tree(tmp_path)
    assert imported(root)[0] == "compiled"  # (the build goes with its sources)
    with open(root / "coordinator" / "log" / "offsets.py", "a") as source:
        source.write("# edited\n")
    state, files = imported(root)
    assert state == "pure: stale: coordinator/log/offsets.py changed since the build"
    assert all(f.startswith(str(root)) and f.endswith(".py") for f in files)


def test_a_build_that_cannot_compile_installs_pure_python_and_says_why(tmp_path):
    """No C compiler (here: an empty PATH and no CC): setup.py's build is pure Python, and says so."""
    root = tree(tmp_path)
    shutil.rmtree(root / compiled.COMPILED_DIR, ignore_errors=True)
    shutil.copy(ROOT / "setup.py", root)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, root)
    env = {**os.environ, "PATH": str(tmp_path / "bin"), "CC": ""}
    env.pop("KCOORD_PURE", None)
    build = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    done = subprocess.run(build, cwd=root, env=env, capture_output=True, text=True, check=True)
    assert "kafka-group-coordinator: pure Python: no C compiler" in done.stderr
    assert (root / compiled.COMPILED_DIR / compiled.FALLBACK).read_text() == "no C compiler"
    assert imported(root, KCOORD_PURE="")[0] == "pure: no compiled build (no C compiler)"


def manifest(root, modules: dict[str, str], suffix: str = importlib.machinery.EXTENSION_SUFFIXES[0]) -> None:
    place = root / compiled.COMPILED_DIR
    place.mkdir(parents=True)
    (place / compiled.MANIFEST).write_text(json.dumps({"group": "g", "suffix": suffix, "modules": modules}))


def test_a_source_edited_since_the_build_leaves_the_build_unused(tmp_path):
    (tmp_path / "protocol").mkdir()
    (tmp_path / "protocol" / "framing.py").write_text("edited = True\n")
    manifest(tmp_path, {"protocol/framing.py": "0" * 64})
    assert compiled.compiled_files(tmp_path) == "stale: protocol/framing.py changed since the build"


def test_a_build_for_another_python_or_with_a_file_missing_is_unused(tmp_path):
    (tmp_path / "protocol").mkdir()
    source = tmp_path / "protocol" / "framing.py"
    source.write_text("x = 1\n")
    manifest(tmp_path / "a", {}, suffix=".cpython-27.so")
    assert compiled.compiled_files(tmp_path / "a") == "built for another Python (.cpython-27.so)"
    manifest(tmp_path, {"protocol/framing.py": compiled.source_digest(source)})
    assert compiled.compiled_files(tmp_path).startswith("incomplete build")
    assert compiled.compiled_files(tmp_path / "none") == "no compiled build"
