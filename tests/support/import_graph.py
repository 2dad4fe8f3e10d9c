"""The import graph of protocol/, coordinator/ and pipeline/, read from the code (every import
statement, at module level or inside a function, TYPE_CHECKING blocks included).

    python -m tests.support.import_graph            # print the package graph and the module cycles
    python -m tests.support.import_graph --write    # regenerate its section of docs/architecture.md

tests/test_layout.py checks the layering and that no import cycle is added."""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "coordinator", "pipeline")
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- import-graph: begin -->", "<!-- import-graph: end -->"


def modules() -> dict[str, Path]:
    found = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def module_graph() -> dict[str, set[str]]:
    """module -> the modules of these packages it imports."""
    mods = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                # `from pkg import sub` of a submodule depends on pkg.sub, as `import pkg.sub` does;
                # any other name imported from pkg is pkg's own.
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs + ([base] if len(subs) < len(node.names) else [])
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    for name in mods:
        edges.setdefault(name, set())
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def package_of(module: str) -> str:
    """protocol, pipeline, coordinator's subpackages, and its top-level modules as one node."""
    parts = module.split(".")
    if parts[0] != "coordinator":
        return parts[0]
    if len(parts) > 1 and (ROOT / "coordinator" / parts[1]).is_dir():
        return f"coordinator.{parts[1]}"
    return "coordinator (top-level modules)"


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for a, targets in edges.items():
        out[package_of(a)]
        for b in targets:
            if package_of(a) != package_of(b):
                out[package_of(a)].add(package_of(b))
    return out


def render(edges: dict[str, set[str]]) -> str:
    packages = package_graph(edges)
    ids = {p: f"p{i}" for i, p in enumerate(sorted(packages))}
    lines = [BEGIN, "", "```mermaid", "graph LR"]
    lines += [f'  {ids[p]}["{p}"]' for p in sorted(packages)]
    lines += [f"  {ids[a]} --> {ids[b]}" for a in sorted(packages) for b in sorted(packages[a])]
    lines += [
        "```",
        "",
        "Import cycles between modules (each a group of modules that import one another, directly or through others):",
        "",
    ]
    lines += [f"- {', '.join(f'`{m}`' for m in c)}" for c in cycles(edges)] or ["- none"]
    lines += ["", END]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.support.import_graph", description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help=f"regenerate the section of {DOC.relative_to(ROOT)}")
    args = ap.parse_args()
    text = render(module_graph())
    if not args.write:
        print(text)
        return 0
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        print(f"{DOC}: no {BEGIN} ... {END} section", file=sys.stderr)
        return 2
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    DOC.write_text(doc[:start] + text + doc[end:])
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
