"""Layering. The suite's: a test module imports shared helpers from tests/support (or a
suite's own helper module, such as tests/pipeline/logs.py), never another test module,
conftest or bench/, so that each test
file can be read, run and moved alone. The code's: protocol/ at the bottom, pipeline/ on
protocol/ only, and no new import cycle (tests/support/import_graph.py)."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    """The import graph (import_graph.module_graph), read once for the checks below: reading it
    parses every module of the three packages. (They only read it.)"""
    return import_graph.module_graph()


def test_protocol_imports_nothing_above_it_and_pipeline_only_protocol(edges):
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


def test_no_import_cycle_is_added(edges):
    new = [c for c in import_graph.cycles(edges) if not any(set(c) <= known for known in KNOWN_CYCLES)]
    assert new == []


def test_the_architecture_doc_shows_the_current_graph(edges):
    doc = import_graph.DOC.read_text()
    assert import_graph.render(edges) in doc, (
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
    "coordinator.runtime",
    "coordinator.groups.runtime",
    "coordinator.groups.shard",
    "coordinator.share.state_log",
)


def test_no_group_manager_touches_the_log(edges):
    groups = ROOT / "coordinator" / "groups"
    managers = [
        *(p for top in ("classic", "modern", "streams") for p in sorted((groups / top).rglob("*.py"))),
        groups / "offset_manager.py",
    ]
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


# The appends of the group and share coordinators' logs: made by the one runtime
# (coordinator/runtime.py, and groups/runtime.py's transactional ones) and nowhere else in
# their packages; the share coordinator's shards (share/state_log.py) return records as the
# group shards do.
APPENDS = {"append_to", "append_txn_to", "append_marker_to"}
RUNTIMES = {"coordinator/runtime.py", "coordinator/groups/runtime.py"}


def appends(path: Path) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} calls .{node.func.attr}()"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in APPENDS
    ]


def test_only_the_runtime_appends_to_the_coordinators_logs():
    paths = [ROOT / "coordinator" / "runtime.py"]
    paths += [p for top in ("groups", "share") for p in sorted((ROOT / "coordinator" / top).rglob("*.py"))]
    found = [f for p in paths if str(p.relative_to(ROOT)) not in RUNTIMES for f in appends(p)]
    assert found == []
    assert all(appends(ROOT / p) for p in RUNTIMES)  # (the check sees the runtime's own appends)


# What runs a server (the command, the test cluster): the only modules that may import it.
SERVER_USERS = {"coordinator.__main__", "coordinator.testing"}


def test_no_part_imports_the_server_or_its_composition_root(edges):
    assert sorted(m for m, ts in edges.items() if "coordinator.server" in ts and m not in SERVER_USERS) == []
    assert sorted(m for m, ts in edges.items() if "coordinator.components" in ts) == ["coordinator.server"]


# A collaborator list a part was built with may only be added to by the part itself.
_REGISTERING = {"append", "extend", "insert", "add", "update", "setdefault"}


def late_wiring(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Where `function` wires a part after building it: an attribute of another object
    assigned (`data_plane.transactions = ...`), a setter or setattr, a collaborator looked
    up by getattr, or a callback added to a part's own list (`configs.listeners.append`)."""
    found = []
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store):
                    found.append(f"{node.lineno}: assigns {ast.unparse(t)}")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("getattr", "setattr"):
                found.append(f"{node.lineno}: {func.id}()")
            elif isinstance(func, ast.Attribute) and func.attr.startswith("set_"):
                found.append(f"{node.lineno}: calls .{func.attr}()")
            elif (
                isinstance(func, ast.Attribute) and func.attr in _REGISTERING and isinstance(func.value, ast.Attribute)
            ):
                found.append(f"{node.lineno}: {ast.unparse(func)}()")
    return found


def test_the_composition_root_gives_each_part_what_it_needs_when_it_is_built():
    tree = ast.parse((ROOT / "coordinator" / "components.py").read_text())
    build = next(n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "build_components")
    assert late_wiring(build) == []


def test_the_late_wiring_check_sees_each_kind():
    source = """
async def build():
    runtime.transactions = coordinator
    plane.set_transactions(coordinator)
    configs.listeners.append(lambda: topics.reconfigure())
    topology = getattr(plane, "topology", None)
    a.b = c.d = None
"""
    (build,) = ast.parse(source).body
    assert isinstance(build, ast.AsyncFunctionDef)
    assert sorted(f.split(": ", 1)[1] for f in late_wiring(build)) == [
        "assigns a.b",
        "assigns c.d",
        "assigns runtime.transactions",
        "calls .set_transactions()",
        "configs.listeners.append()",
        "getattr()",
    ]


def passes_self(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The calls in `function` that pass `self` (as an argument, or returned by a lambda)."""
    found = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            args = [*node.args, *(k.value for k in node.keywords)]
            args += [a.body for a in args if isinstance(a, ast.Lambda)]
            if any(isinstance(a, ast.Name) and a.id == "self" for a in args):
                found.append(ast.unparse(node.func))
    return found


def test_the_server_gives_each_part_what_it_needs_not_itself():
    """The connections, the cluster control, the faults, request tracking, metrics and test
    control get values, callables and the parts they drive when built, never the server."""
    tree = ast.parse((ROOT / "coordinator" / "server.py").read_text())
    server = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Server")
    given = sorted(
        {call for f in server.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for call in passes_self(f)}
    )
    assert given == []
    # ... and no part has a parameter for a server (or a view of one, as a protocol would be)
    taking = []
    for path in sorted((ROOT / "coordinator").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module in SERVER_USERS or module == "coordinator.server":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
                    if a.arg in ("server", "switch", "host") and (
                        a.annotation is None or ast.unparse(a.annotation) != "str"
                    ):
                        taking.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({a.arg})")
    assert taking == []


async def test_no_part_of_a_running_server_holds_it(tmp_path):
    """What the static checks above cannot see (a server passed under another name, or
    reached through another part): once a server runs with every optional part (several
    brokers, ACLs, metrics, test control) and has a client connection, only its own bound
    methods, the closures of its callbacks, and its own frames and tasks refer to it."""
    import gc
    import types

    from coordinator.config import parse_args
    from coordinator.server import Server

    args = ["--port", "0", "--metrics-port", "0", "--enable-test-control", "--brokers", "3", "--authorizer"]
    server = Server(parse_args([*args, "--data-dir", str(tmp_path / "d")]), own_process=False)
    await server.start()
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", server.config.port)
        while not server.connections:  # (accepted on the loop's next turns)
            await asyncio.sleep(0.001)
        allowed = (types.MethodType, types.CellType, types.FrameType, types.CoroutineType)
        holders = [type(r).__qualname__ for r in gc.get_referrers(server) if not isinstance(r, allowed)]
        assert holders == []
        writer.close()
    finally:
        await server.stop()


def test_the_server_check_sees_self_given():
    source = """
def start(self):
    Metrics(self)
    TestControl(faults, lambda: self)
    Faults(seed, changed=self._choose)
"""
    (start,) = ast.parse(source).body
    assert isinstance(start, ast.FunctionDef)
    assert passes_self(start) == ["Metrics", "TestControl"]
