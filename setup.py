"""The optional compiled build: the hot modules compiled by mypyc, next to their Python sources.

Everything else is in pyproject.toml. With KCOORD_COMPILE=1, `setup.py build_ext --inplace`
(`make compiled`) compiles the modules in protocol/compiled.py's HOT when mypyc and a C compiler
are there, and leaves pure Python, saying why, when either is missing, the build fails, or
KCOORD_PURE=1 is set. Without KCOORD_COMPILE=1 nothing is compiled (the compiled build does not
pass the whole suite yet). In pip's isolated build environment mypy lacks the dependencies'
types and finds type errors, so there the build falls back to pure Python. The extensions go
to protocol/_compiled/ (never beside the .py files, where an old build would shadow edited
sources); protocol.compiled loads them only while every compiled source is unchanged since the
build.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from protocol.compiled import COMPILED_DIR, GROUP, HOT, MANIFEST, compiled_files, source_digest  # noqa: E402

# mypyc's C at -O1: the same instruction counts as -O3 here (bench/bench_churn.py --callgrind)
# in half the compiler's time.
OPT_LEVEL = os.environ.get("KCOORD_OPT_LEVEL", "1")


def say(message: str) -> None:
    print(f"kafka-group-coordinator: {message}", file=sys.stderr, flush=True)


def parallel_compile(compiler: Any) -> None:
    """Compile one extension's C files on every core: the default compiles them one by one."""
    one_by_one = compiler.compile

    def compile(sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
        if len(sources) < 2:
            return one_by_one(sources, *args, **kwargs)
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            parts = pool.map(lambda source: one_by_one([source], *args, **kwargs), sources)
            return [obj for part in parts for obj in part]

    compiler.compile = compile


class BuildCompiled(build_ext):
    """mypyc's extensions in place of the placeholder, or none: pure Python is always installable."""

    why_not: str | None = None  # why this build installs pure Python, once decided
    digests: dict[str, str] = {}  # the compiled sources' digests, as mypyc read them

    def in_place(self) -> bool:
        return bool(self.inplace or getattr(self, "editable_mode", False))

    def finalize_options(self) -> None:
        # (decided before setuptools prepares the extensions it was given)
        if self.distribution.ext_modules and self.distribution.ext_modules[0].name.endswith(".placeholder"):
            if self.in_place() and self.up_to_date():
                say("the compiled modules in place are up to date")
                BuildCompiled.why_not, self.distribution.ext_modules = "", []
            else:
                BuildCompiled.why_not = self.compiled_extensions()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1  # (the small per-module extensions, side by side)
        super().finalize_options()

    def run(self) -> None:
        why = self.why_not
        # (an earlier build's extensions left in build/ would be installed with this one's)
        shutil.rmtree(Path(self.build_lib) / COMPILED_DIR, ignore_errors=True)
        if why is None:
            try:
                if self.in_place():  # (setuptools copies each extension beside its package, made or not)
                    for ext in self.extensions:
                        ROOT.joinpath(*ext.name.split(".")[:-1]).mkdir(parents=True, exist_ok=True)
                super().run()
                self.write_manifest()
                return
            except Exception as e:  # any compiler failure: the pure-Python package is complete without it
                why = f"the C build failed ({type(e).__name__}: {e})"
                if self.in_place():  # (half a build in place: none of it is to be loaded)
                    shutil.rmtree(ROOT / COMPILED_DIR, ignore_errors=True)
        if why:
            say(f"{why}: pure Python")

    def up_to_date(self) -> bool:
        """An earlier build in place of exactly these sources, at this optimization level."""
        if os.environ.get("KCOORD_PURE", "") not in ("", "0"):
            return False
        try:
            manifest = json.loads((ROOT / COMPILED_DIR / MANIFEST).read_text())
        except (OSError, ValueError):
            return False
        same = list(manifest.get("modules", {})) == list(HOT) and manifest.get("opt_level") == OPT_LEVEL
        return same and not isinstance(compiled_files(), str)

    def build_extensions(self) -> None:
        parallel_compile(self.compiler)
        super().build_extensions()

    def compiled_extensions(self) -> str | None:
        """Put mypyc's extensions in the distribution; the reason why not, when not."""
        self.distribution.ext_modules = []
        if os.environ.get("KCOORD_PURE", "") not in ("", "0"):
            return "KCOORD_PURE is set"
        if os.environ.get("KCOORD_COMPILE", "") in ("", "0"):
            return "KCOORD_COMPILE=1 compiles the hot modules"
        try:
            from mypyc.build import mypycify
        except ImportError:
            return "mypyc is not installed"
        if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
            return "no C compiler"
        say(f"compiling {len(HOT)} modules with mypyc (KCOORD_PURE=1 to skip)")
        # (read before mypyc reads them: a source edited during the build is then seen as changed)
        BuildCompiled.digests = {path: source_digest(ROOT / path) for path in HOT}
        try:
            extensions = mypycify(
                [*HOT, "--ignore-missing-imports", "--follow-imports=silent"],
                opt_level=OPT_LEVEL,
                debug_level="0",
                multi_file=True,
                group_name=GROUP,
                target_dir="build/mypyc",
            )
        except BaseException as e:  # mypyc exits through SystemExit on a type error
            return f"mypyc failed ({type(e).__name__}: {e})"
        for ext in extensions:
            # Named into protocol/_compiled/: the file's place, not the module it defines
            # (its PyInit_ symbol comes from the last part of the name, which is unchanged).
            ext.name = f"{COMPILED_DIR.replace('/', '.')}.{ext.name}"
        self.distribution.ext_modules = extensions
        return None

    def write_manifest(self) -> None:
        """The sources' digests beside the extensions, so that an edited source is never shadowed."""
        manifest = json.dumps(
            {
                "group": GROUP,
                "opt_level": OPT_LEVEL,
                "suffix": self.get_ext_filename("x")[1:],
                "modules": self.digests,
            },
            indent=1,
        )
        places = [Path(self.build_lib) / COMPILED_DIR]
        if self.in_place():
            places.append(ROOT / COMPILED_DIR)
        for place in places:
            place.mkdir(parents=True, exist_ok=True)
            (place / MANIFEST).write_text(manifest)


setup(
    # A placeholder, replaced by BuildCompiled.run: mypyc runs only when something is built,
    # not each time pip asks setup.py for metadata.
    ext_modules=[Extension(f"{COMPILED_DIR.replace('/', '.')}.placeholder", sources=[])],
    cmdclass={"build_ext": BuildCompiled},
)
