"""The suite's own layering: a test module imports shared helpers from tests/support (or a
suite's helper module), never another test module, conftest or bench/, so that each test
file can be read, run and moved alone."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.process import ROOT


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def forbidden(module: str) -> bool:
    parts = module.split(".")
    return (parts[0] == "bench" or module.startswith("tests.conftest")
            or (parts[0] == "tests" and any(p.startswith("test_") for p in parts[1:])))


def test_no_test_module_imports_another_or_bench():
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in imported_modules(p) if forbidden(m))
                 for p in sorted((ROOT / "tests").rglob("*.py"))}
    assert {p: ms for p, ms in offenders.items() if ms} == {}
