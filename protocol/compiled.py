"""The optional compiled build: which modules it compiles, and the import hook that loads them.

setup.py compiles HOT with mypyc into protocol/_compiled/ (one shared library, GROUP, and a
small extension per module), with a manifest of the sources' digests. `use()`, run by
protocol/__init__.py and coordinator/__init__.py (whichever is imported first), puts a finder
first on sys.meta_path that answers those modules with their extensions, all of them or none:
compiled modules call each other directly in C, so one left as Python beside the others would
be a second copy. None are used when KCOORD_PURE=1 is set, when there is no build, or when any
compiled source changed since the build (then the edited Python runs, and the server logs so).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# Chosen by profile (cProfile and callgrind of bench/bench_churn.py's join-sync-leave cycle and
# 10-partition commit): the modules where the server spends its own time on those paths.
HOT = (
    "protocol/framing.py",
    "protocol/messages.py",
    "protocol/group_records.py",
    "protocol/offset_commit.py",
    "protocol/record_batch.py",
    "coordinator/connection.py",
    "coordinator/apis.py",
    "coordinator/runtime.py",
    "coordinator/server_log.py",  # (its Log; the sink, logging's subclasses, is log_sink.py)
    "coordinator/groups/api.py",
    "coordinator/groups/clock.py",
    "coordinator/groups/runtime.py",
    "coordinator/groups/shard.py",
    "coordinator/groups/classic/classic_group.py",
    "coordinator/groups/classic/classic_manager.py",
    "coordinator/groups/offset_manager.py",
    "coordinator/groups/offset_store.py",
    "coordinator/log/offsets.py",
    "coordinator/metrics/stats.py",
    # (not hot: its shards subclass coordinator/runtime.py's CoordinatorShard, and a compiled
    # class takes no subclass written in Python)
    "coordinator/share/state_log.py",
)
# Not coordinator/log/partition.py, hot as it is: the broker and share groups hold its logs by
# weak reference, which a compiled class does not take.
GROUP = "kcoord"  # the shared library's module: kcoord__mypyc
COMPILED_DIR = "protocol/_compiled"  # relative to the directory holding protocol/ and coordinator/
MANIFEST = "manifest.json"
FALLBACK = "fallback.txt"  # why the last build installed pure Python, where there is no manifest
ROOT = Path(__file__).resolve().parent.parent

state = "pure"  # "compiled" once the finder is in place, else why not (tests and kcoord report it)


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cannot_compile() -> str | None:
    """Why a build here installs pure Python, from what is seen before anything is fetched, or None."""
    import shutil  # (here: every start of the server imports this module)
    import sysconfig

    if os.environ.get("KCOORD_PURE", "") not in ("", "0"):
        return "KCOORD_PURE is set"
    cc = (os.environ.get("CC") or "cc").split()
    if not (cc and shutil.which(cc[0])) and shutil.which("gcc") is None:
        return "no C compiler"
    if not Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        return "no Python headers (Python.h: the python3-dev package)"
    return None


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


class CompiledFinder:
    """A meta path finder answering exactly the compiled modules (and their shared library)."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def compiled_files(root: Path = ROOT) -> dict[str, Path] | str:
    """The extension of each compiled module and of the shared library under `root` (the
    directory of protocol/ and coordinator/), or why they cannot be used."""
    place = root / COMPILED_DIR
    try:
        manifest = json.loads((place / MANIFEST).read_text())
    except FileNotFoundError:
        try:
            return f"no compiled build ({(place / FALLBACK).read_text().strip()})"
        except OSError:
            return "no compiled build"
    except (OSError, ValueError) as e:
        return f"unreadable manifest ({e})"
    suffix = manifest.get("suffix")
    if suffix not in importlib.machinery.EXTENSION_SUFFIXES:
        return f"built for another Python ({suffix})"
    modules = manifest.get("modules", {})
    changed = [p for p, digest in modules.items() if not (root / p).is_file() or source_digest(root / p) != digest]
    if changed:
        return f"stale: {', '.join(changed)} changed since the build"
    files = {
        module_name(p): place.joinpath(*module_name(p).split(".")).with_name(Path(p).stem + suffix) for p in modules
    }
    files[f"{manifest['group']}__mypyc"] = place / f"{manifest['group']}__mypyc{suffix}"
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        return f"incomplete build ({missing[0]} missing)"
    return files


def use() -> None:
    """Install the finder for the compiled modules, once, unless KCOORD_PURE=1 or they cannot be used."""
    global state
    if state != "pure" or any(isinstance(f, CompiledFinder) for f in sys.meta_path):
        return
    if os.environ.get("KCOORD_PURE", "") not in ("", "0"):
        state = "pure: KCOORD_PURE is set"
        return
    found = compiled_files()
    if isinstance(found, str):
        state = f"pure: {found}"  # (a stale build: the server logs it at start)
        return
    already = [m for m in found if m in sys.modules]
    if already:  # (imported as Python before this ran: compiling the rest would make two copies)
        state = f"pure: {already[0]} was imported before the compiled build could be used"
        return
    sys.meta_path.insert(0, CompiledFinder(found))
    state = "compiled"


def notice() -> str:
    """The one line `make install` prints: what the server will run."""
    if state == "compiled":
        return f"kafka-group-coordinator: the compiled build is in use ({len(HOT)} modules; KCOORD_PURE=1 runs pure Python)"
    return f"kafka-group-coordinator: pure Python ({state.removeprefix('pure: ')})"
