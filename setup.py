"""The compiled build: the hot modules compiled by mypyc, next to their Python sources.

Everything else is in pyproject.toml. Every build of the package (`pip install .`, and
`pip install -e .` as `make install` runs it, `setup.py build_ext --inplace` as `make compiled`
runs it) compiles the modules in protocol/compiled.py's HOT when a C compiler and Python's
headers are there, and installs pure Python, saying why, when they are not, when mypyc or the C
build fails, or when KCOORD_PURE=1 is set. Under pip's isolated build, the build asks pip for
mypyc (the dev extra's pinned mypy) and for the package's own dependencies, whose types mypyc
compiles against as in a development venv, only when it is going to compile.

The extensions go to protocol/_compiled/ (never beside the .py files, where an old build would
shadow edited sources) with a manifest of the sources' digests; protocol.compiled loads them
only while every compiled source is unchanged since the build. A build that installs pure
Python leaves its reason there instead (FALLBACK), which `make install` prints.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from protocol.compiled import (  # noqa: E402
    COMPILED_DIR,
    FALLBACK,
    GROUP,
    HOT,
    MANIFEST,
    cannot_compile,
    compiled_files,
    source_digest,
)

# mypyc's C at -O1: the same instruction counts as -O3 here (bench/bench_churn.py --callgrind)
# in half the compiler's time.
OPT_LEVEL = os.environ.get("KCOORD_OPT_LEVEL", "1")


def say(message: str) -> None:
    print(f"kafka-group-coordinator: {message}", file=sys.stderr, flush=True)


def mypyc_requires() -> list[str]:
    """What mypyc needs in pip's isolated build environment: mypy as the dev extra pins it, and
    the package's dependencies, so that it compiles against their types as `make compiled` does."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    mypy = [r for r in project["optional-dependencies"]["dev"] if r.partition("=")[0].strip() == "mypy"]
    return [*mypy, *project["dependencies"]]


def built_in_place() -> bool:
    """A build in place of exactly these sources, at this optimization level, for this Python."""
    try:
        manifest = json.loads((ROOT / COMPILED_DIR / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    same = list(manifest.get("modules", {})) == list(HOT) and manifest.get("opt_level") == OPT_LEVEL
    return same and not isinstance(compiled_files(ROOT), str)


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
    """mypyc's extensions in place of the placeholder, or none: pure Python is always installable.
    Decided in run(), not in finalize_options(), which setuptools also runs to write metadata."""

    digests: dict[str, str] = {}  # the compiled sources' digests, as mypyc read them

    def in_place(self) -> bool:
        return bool(self.inplace or getattr(self, "editable_mode", False))

    def finalize_options(self) -> None:
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1  # (the small per-module extensions, side by side)
        super().finalize_options()

    def run(self) -> None:
        # (an earlier build's extensions left in build/ would be installed with this one's)
        shutil.rmtree(Path(self.build_lib) / COMPILED_DIR, ignore_errors=True)
        why = cannot_compile()
        if why is None and built_in_place():
            self.extensions = []
            if self.in_place():
                say("the compiled modules in place are up to date")
            else:  # (built from these very sources, for this Python: a wheel of this tree takes them)
                shutil.copytree(ROOT / COMPILED_DIR, Path(self.build_lib) / COMPILED_DIR)
                say("the compiled modules in place are up to date: taken into the build")
            return
        if why is None:
            why = self.mypyc_extensions()
        if why is None:
            try:
                if self.in_place():  # (setuptools copies each extension beside its package, made or not)
                    for ext in self.extensions:
                        ROOT.joinpath(*ext.name.split(".")[:-1]).mkdir(parents=True, exist_ok=True)
                super().run()
                self.write(MANIFEST, self.manifest())
                return
            except Exception as e:  # any compiler failure: the pure-Python package is complete without it
                why = f"the C build failed ({type(e).__name__}: {e})"
        self.extensions = []  # (none to install, nor to list among the outputs)
        shutil.rmtree(Path(self.build_lib) / COMPILED_DIR, ignore_errors=True)
        if self.in_place():  # (an earlier or half-made build in place: none of it is to be loaded)
            shutil.rmtree(ROOT / COMPILED_DIR, ignore_errors=True)
        self.write(FALLBACK, why)
        say(f"pure Python: {why}")

    def build_extensions(self) -> None:
        parallel_compile(self.compiler)
        super().build_extensions()

    def mypyc_extensions(self) -> str | None:
        """mypyc's extensions in place of the placeholder; the reason why not, when not."""
        try:
            from mypyc.build import mypycify
        except ImportError:
            return "mypyc is not installed (the dev extra's mypy)"
        say(f"compiling {len(HOT)} modules with mypyc, a minute or so (KCOORD_PURE=1 to skip)")
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
        except (Exception, SystemExit) as e:  # mypyc exits through SystemExit on a type error
            return f"mypyc failed ({type(e).__name__}: {e})"
        self.check_extensions_list(extensions)
        self.distribution.ext_modules = self.extensions = extensions
        for ext in extensions:
            # Named into protocol/_compiled/: the file's place, not the module it defines
            # (its PyInit_ symbol comes from the last part of the name, which is unchanged).
            ext.name = f"{COMPILED_DIR.replace('/', '.')}.{ext.name}"
            # What setuptools' finalize_options derives for each extension it was given.
            ext._full_name = fullname = self.get_ext_fullname(ext.name)
            self.ext_map[fullname] = self.ext_map[fullname.split(".")[-1]] = ext
            ext._links_to_dynamic = ext._needs_stub = False
            ext._file_name = self.get_ext_filename(fullname)
        return None

    def manifest(self) -> str:
        """The sources' digests beside the extensions, so that an edited source is never shadowed."""
        return json.dumps(
            {
                "group": GROUP,
                "opt_level": OPT_LEVEL,
                "suffix": self.get_ext_filename("x")[1:],
                "modules": self.digests,
            },
            indent=1,
        )

    def write(self, name: str, text: str) -> None:
        """A file of protocol/_compiled/ into the build (so into a wheel), and in place too."""
        places = [Path(self.build_lib) / COMPILED_DIR]
        if self.in_place():
            places.append(ROOT / COMPILED_DIR)
        for place in places:
            place.mkdir(parents=True, exist_ok=True)
            (place / name).write_text(text)


# Under pip (PEP 517), mypyc and the dependencies' types are build requirements, asked for only
# when this build is going to compile and they are not already importable (--no-build-isolation).
requires: list[str] = []
if "setuptools.build_meta" in sys.modules and cannot_compile() is None and not built_in_place():
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        requires = mypyc_requires()

setup(
    # A placeholder, replaced by BuildCompiled.run: mypyc runs only when something is built,
    # not each time pip asks setup.py for metadata.
    ext_modules=[Extension(f"{COMPILED_DIR.replace('/', '.')}.placeholder", sources=[])],
    cmdclass={"build_ext": BuildCompiled},
    setup_requires=requires,
)
