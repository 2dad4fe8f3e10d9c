"""Compare two checkouts side by side: run a bench script of each in turn (A, B, A, B, ...)
and print, per output line, the median and range of every number it printed.

This VM's speed drifts between runs and other work shares its 2 cores, so before/after
figures are only comparable from one interleaved run.

    python bench/ab.py --a /path/to/old/checkout --b . --runs 5 bench_groups.py --seconds 3
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def run(tree: Path, script: str, args: list[str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / script), *args], cwd=tree, capture_output=True, text=True, check=True
    )
    return [line for line in done.stdout.splitlines() if NUMBER.search(line)]


def summary(outputs: list[list[str]]) -> list[str]:
    """Per line: its text with each number replaced by 'median (min-max)'."""
    rows = []
    for lines in zip(*outputs):
        values = [[float(n.replace(",", "")) for n in NUMBER.findall(line)] for line in lines]
        if len({len(v) for v in values}) != 1:
            rows.append(lines[0])
            continue
        parts = NUMBER.split(lines[0])
        text = parts[0]
        for i, part in enumerate(parts[1:]):
            column = [v[i] for v in values]
            med = statistics.median(column)
            text += f"{med:,.4g} ({min(column):,.4g}-{max(column):,.4g})" + part
        rows.append(text)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", type=Path, required=True, help="checkout A (e.g. before)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (e.g. after)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("script", help="a script in bench/, e.g. bench_groups.py")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    outputs: dict[str, list[list[str]]] = {"A": [], "B": []}
    for i in range(args.runs):
        for name, tree in (("A", args.a), ("B", args.b)):
            outputs[name].append(run(tree.resolve(), args.script, args.args))
            print(f"run {i + 1}/{args.runs} of {name} done", file=sys.stderr, flush=True)
    for name, tree in (("A", args.a), ("B", args.b)):
        print(f"== {name}: {tree} (medians of {args.runs} runs, range in brackets)")
        for row in summary(outputs[name]):
            print("  " + row)


if __name__ == "__main__":
    main()
