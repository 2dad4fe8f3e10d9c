"""What injected faults (coordinator/faults.py) cost the requests they do not fire for.

Heartbeats/s and commits/s, with the server's CPU per request, against one broker in three
states, interleaved in one run:
- no rule: dispatch checks one attribute;
- a rule on another API (Produce): every request walks the rule list and skips it by API key;
- a rule on the same APIs for another group (Heartbeat and OffsetCommit, group "elsewhere"):
  every request is matched against it by group id as well.

--repeat N runs every state N times and prints the median and the range.

    python bench/bench_faults.py [--repeat 3] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_cluster import spread, start_process, stop_process, traffic  # noqa: E402
from bench.results import record  # noqa: E402

STATES = {
    "no rule": [],
    "a rule on another API": [{"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "times": None}],
    "rules on the same APIs, another group": [
        {"api": "Heartbeat", "error": "REBALANCE_IN_PROGRESS", "times": None, "group": "elsewhere"},
        {"api": "OffsetCommit", "error": "NOT_COORDINATOR", "times": None, "group": "elsewhere"},
    ],
}


def add_rules(control: str, rules: list[dict]) -> None:
    if rules:
        request = urllib.request.Request(f"http://{control}/faults", data=json.dumps(rules).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 201


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float, float, float]]] = {state: [] for state in STATES}
    for _ in range(args.repeat):
        for state, rules in STATES.items():
            control = free_port()
            proc, ports, _, data = start_process(
                1, ["--fsync", "never", "--metrics-port", str(control), "--enable-test-control"]
            )
            try:
                add_rules(f"127.0.0.1:{control}", rules)
                runs[state].append(asyncio.run(traffic(proc.pid, ports, args.seconds)))
            finally:
                stop_process(proc, data)
    for state, values in runs.items():
        hb, hb_cpu, commits, c_cpu = zip(*values)
        print(
            f"{state}: heartbeats/s {spread(list(hb))}, server CPU/heartbeat {spread(list(hb_cpu))} us; "
            f"commits/s {spread(list(commits))}, server CPU/commit {spread(list(c_cpu))} us"
        )
        shape = {"state": state, "repeat": args.repeat, "fsync": "never"}
        record(f"heartbeats/s, 300 members in 30 groups, {state}", statistics.median(hb), "req/s", params=shape)
        record(f"server CPU per heartbeat, {state}", statistics.median(hb_cpu), "us", params=shape)
        record(f"commits/s, 60 committers x 4 in flight, {state}", statistics.median(commits), "req/s", params=shape)
        record(f"server CPU per commit, {state}", statistics.median(c_cpu), "us", params=shape)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    main()
