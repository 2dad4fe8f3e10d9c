"""Layering. The suite's: a test module imports shared helpers from tests/support (or a
suite's own helper module, such as tests/pipeline/logs.py), never another test module,
conftest or bench/, so that each test
file can be read, run and moved alone. The code's: protocol/ at the bottom, pipeline/ on
protocol/ only, and no new import cycle (tests/support/import_graph.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import import_graph
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
    return (
        parts[0] == "bench"
        or module.startswith("tests.conftest")
        or (parts[0] == "tests" and any(p.startswith("test_") for p in parts[1:]))
    )


def test_no_test_module_imports_another_or_bench():
    offenders = {
        str(p.relative_to(ROOT)): sorted(m for m in imported_modules(p) if forbidden(m))
        for p in sorted((ROOT / "tests").rglob("*.py"))
    }
    assert {p: ms for p, ms in offenders.items() if ms} == {}


# Import cycles accepted (docs/architecture.md, "Dependencies"): none. A new one, or a module
# joining one, fails the test below.
KNOWN_CYCLES: list[set[str]] = []


def test_protocol_imports_nothing_above_it_and_pipeline_only_protocol():
    edges = import_graph.module_graph()
    above = {
        m: sorted(t for t in ts if not t.startswith("protocol")) for m, ts in edges.items() if m.startswith("protocol")
    }
    assert {m: ts for m, ts in above.items() if ts} == {}
    outside = {
        m: sorted(t for t in ts if not t.startswith(("protocol", "pipeline")))
        for m, ts in edges.items()
        if m.startswith("pipeline")
    }
    assert {m: ts for m, ts in outside.items() if ts} == {}


def test_no_import_cycle_is_added():
    new = [
        c
        for c in import_graph.cycles(import_graph.module_graph())
        if not any(set(c) <= known for known in KNOWN_CYCLES)
    ]
    assert new == []


def test_the_architecture_doc_shows_the_current_graph():
    doc = import_graph.DOC.read_text()
    assert import_graph.render(import_graph.module_graph()) in doc, (
        "docs/architecture.md is out of date: python -m tests.support.import_graph --write"
    )


def test_every_type_ignore_says_why():
    """`# type: ignore[code]  # why`: an ignore without its reason hides what was waived."""
    bare = [
        f"{p.relative_to(ROOT)}:{n}"
        for top in ("protocol", "coordinator", "pipeline", "bench", "tests", "examples")
        for p in sorted((ROOT / top).rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"#\s*type:\s*ignore(\[[^\]]*\])?\s*$", line)
    ]
    assert bare == []


# The group managers (one package per group type, and the offsets') only compute: an
# operation returns a CoordinatorResult and the runtime (groups/runtime.py, shard.py) is the
# only code that appends, replays, answers and undoes. These names are the write path.
WRITE_PATH = {
    "write",
    "write_txn",
    "write_marker",
    "after_pending",
    "append_to",
    "append_txn_to",
    "append_marker_to",
    "apply",
    "respond",
    "answer",
}
LOG_MODULES = (
    "coordinator.log",
    "coordinator.groups.runtime",
    "coordinator.groups.shard",
    "coordinator.share.state_log",
)


def test_no_group_manager_touches_the_log():
    groups = ROOT / "coordinator" / "groups"
    managers = [
        *(p for top in ("classic", "modern", "streams") for p in sorted((groups / top).rglob("*.py"))),
        groups / "offset_manager.py",
    ]
    edges = import_graph.module_graph()
    found = []
    for path in managers:
        if path.name.endswith("_api.py"):
            continue  # (a group type's wire mapping: it answers through the runtime, as api.py does)
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_PATH:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} calls .{node.func.attr}()")
        for target in edges.get(module, ()):
            if any(target == m or target.startswith(m + ".") for m in LOG_MODULES):
                found.append(f"{path.relative_to(ROOT)} imports {target}")
    assert found == []
