"""The optional compiled build (setup.py, protocol/compiled.py): its modules are used only when
they were built from the sources as they are, and KCOORD_PURE=1 runs pure Python."""

from __future__ import annotations

import importlib.machinery
import json
import os
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


def imported(**env: str) -> tuple[str, list[str]]:
    """protocol.compiled's state in a fresh interpreter and the files its compiled modules came from."""
    out = subprocess.run(
        [sys.executable, "-c", SHOW], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return out[0], out[1:]


def test_kcoord_pure_runs_the_python_sources():
    state, files = imported(KCOORD_PURE="1")
    assert state == "pure: KCOORD_PURE is set"
    assert all(f.endswith(".py") for f in files)


@pytest.mark.skipif(PURE, reason="KCOORD_PURE is set")
def test_the_build_is_used_whole_when_there_is_one():
    """Where CI asks for the compiled build (CI and KCOORD_COMPILE=1 set), a compiler is there: a
    build that fell back to Python fails here."""
    usable = compiled.compiled_files()
    if isinstance(usable, str) and not (os.environ.get("CI") and os.environ.get("KCOORD_COMPILE", "") not in ("", "0")):
        pytest.skip(f"no compiled build to use ({usable}): make compiled")
    state, files = imported()
    assert state == "compiled"
    assert all(f.startswith(str(ROOT / compiled.COMPILED_DIR)) for f in files)


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
