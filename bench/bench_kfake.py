"""Per core against kfake (franz-go's fake Kafka, a Go program): server CPU per join-sync-leave
cycle of a 1-member classic group and per 10-partition OffsetCommit, for this server and kfake,
interleaved in one run.

Servers, all started at once and measured in turn, round after round (each round visits every
server in a rotated order, so that a drift of the machine's speed spreads over all of them):
- this server with --fsync never and with --fsync always, initial rebalance delay 0, at its
  default log level (INFO) with its log in a file, as a deployment writes it;
- kfake in memory (its only mode without a data dir), with a data dir and no fsync, and with a
  data dir and an fsync per write (kfake's SyncWrites): this server's fsync never is set against
  kfake in memory (the harder peer), fsync always against kfake's fsync per write.

kfake is built by `go build` from bench/kfake (our own main.go on franz-go's pkg/kfake, from
the Go module proxy) into a cache directory outside the repository; without Go the script
stops and says so.

CPU is each server process's own (the scheduler's nanosecond counters of all its threads),
so a figure means the same on a loaded machine; the load average is printed and recorded
beside it all the same. The kernel's share of a server's cycle CPU is printed too: it is what
no compiled user space cuts. With fsync always, this server's fsyncs run as Linux native AIO
(caio), whose kernel work runs in kernel workers and is not charged to the process, while
kfake's fsync calls are charged to kfake: those two figures understate this server's cost.
The cycle: JoinGroup v5 without a member id (MEMBER_ID_REQUIRED), JoinGroup with it,
SyncGroup with the leader's assignment, LeaveGroup. The commit: OffsetCommit v8 of 10
partitions by a standalone committer (generation -1, no member).

    python bench/bench_kfake.py [--rounds 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_churn import cpu_seconds, cycle  # noqa: E402
from bench.bench_commits import committer, topic_for  # noqa: E402
from bench.results import record  # noqa: E402
from protocol import compiled  # noqa: E402
from tests.support.wire_client import WireClient  # noqa: E402

KFAKE_SRC = ROOT / "bench" / "kfake"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kcoord-bench"


def kfake_version() -> str:
    for line in (KFAKE_SRC / "go.mod").read_text().splitlines():
        if "pkg/kfake " in line:
            return line.split()[-1]
    return "?"


def build_kfake() -> Path:
    """The kfake binary, built once per go.mod/main.go content."""
    if shutil.which("go") is None:
        sys.exit("bench_kfake: Go is needed to build kfake (https://go.dev/dl)")
    stamp = hashlib.sha256(b"".join((KFAKE_SRC / name).read_bytes() for name in ("go.mod", "go.sum", "main.go")))
    binary = CACHE / f"kfake-{stamp.hexdigest()[:12]}"
    if not binary.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        print(f"building kfake {kfake_version()} into {binary}", file=sys.stderr, flush=True)
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=KFAKE_SRC, check=True)
    return binary


@dataclass
class Server:
    name: str  # as the figures name it
    args: list[str]
    cwd: Path = ROOT  # the checkout whose server runs
    proc: subprocess.Popen | None = None
    port: int = 0
    cycle_us: list[float] = field(default_factory=list)
    commit_us: list[float] = field(default_factory=list)
    system: list[float] = field(default_factory=list)  # the kernel's share of each window's CPU

    def start(self, data: Path) -> None:
        data.mkdir(parents=True)
        log = open(data / "server.log", "wb")  # noqa: SIM115  # (the child holds it)
        self.proc = subprocess.Popen(self.args, cwd=self.cwd, stdout=subprocess.PIPE, stderr=log)
        log.close()
        line = self.proc.stdout.readline().decode()  # type: ignore[union-attr]  # stdout is a pipe: Popen was given stdout=PIPE
        if not line.startswith("ready"):
            raise RuntimeError(f"{self.name} did not start: {line!r} (log: {data / 'server.log'})")
        self.port = int(line.strip().rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()


async def window(server: Server, seconds: float, connections: int, tag: str) -> None:
    """One measurement of both workloads on one server: `seconds` of cycles, then of commits,
    from `connections` connections at once, each waiting for its answer before the next."""
    assert server.proc is not None
    pid = server.proc.pid
    conns = [await WireClient("kfake-bench").connect("127.0.0.1", server.port) for _ in range(connections)]
    await asyncio.gather(*(cycle(c, f"warm-{tag}-{k}") for k, c in enumerate(conns)))  # warm-up
    deadline = time.perf_counter() + seconds

    async def cycles(k: int, conn: WireClient) -> int:
        n = 0
        while time.perf_counter() < deadline:
            await cycle(conn, f"cycle-{k}-{n % 20}")
            n += 1
        return n

    cpu, ticks = cpu_seconds(pid), user_system(pid)
    n = sum(await asyncio.gather(*(cycles(k, c) for k, c in enumerate(conns))))
    server.cycle_us.append((cpu_seconds(pid) - cpu) / n * 1e6)
    user, system = (after - before for after, before in zip(user_system(pid), ticks))
    server.system.append(system / max(user + system, 1))
    for c in conns:
        await c.close()
    # Commits: pre-encoded frames, so that the client keeps up (its answers checked for errors).
    loop = asyncio.get_running_loop()
    deadline = time.perf_counter() + seconds
    pumps = [committer(f"committer-{k}", "", -1, deadline, loop.create_future(), 1, 10) for k in range(connections)]
    cpu = cpu_seconds(pid)
    for p in pumps:
        await loop.create_connection(lambda p=p: p, "127.0.0.1", server.port)
    n = sum(await asyncio.gather(*(p.done for p in pumps)))
    server.commit_us.append((cpu_seconds(pid) - cpu) / n * 1e6)
    for p in pumps:
        assert p.transport is not None
        p.transport.close()


def user_system(pid: int) -> tuple[int, int]:
    """The process's user and system clock ticks (/proc/<pid>/stat): what a compiled user
    space could cut is the user part only."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} us ({min(values):,.0f}-{max(values):,.0f})"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2, help="per workload, server and round")
    ap.add_argument("--connections", type=int, default=4, help="driving each workload at once")
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="also this checkout's server (e.g. a compiled build), fsync never and always, labelled LABEL",
    )
    args = ap.parse_args()
    kfake = str(build_kfake())
    ours = [sys.executable, "-m", "coordinator", "--port", "0", "--group-initial-rebalance-delay-ms", "0"]
    data = Path(tempfile.mkdtemp(prefix="bench-kfake-"))
    servers = {
        "ours never": Server("this server, fsync never", [*ours, "--fsync", "never", "--data-dir", str(data / "a")]),
        "ours always": Server("this server, fsync always", [*ours, "--fsync", "always", "--data-dir", str(data / "b")]),
        "kfake memory": Server("kfake in memory", [kfake]),
        "kfake dir": Server("kfake with a data dir, no fsync", [kfake, "-data-dir", str(data / "d")]),
        "kfake sync": Server("kfake with a data dir, fsync per write", [kfake, "-data-dir", str(data / "e"), "-sync"]),
    }
    for spec in args.tree:
        label, path = spec.split("=", 1)
        for fsync in ("never", "always"):
            servers[f"{label} {fsync}"] = Server(
                f"this server, {label}, fsync {fsync}",
                [*ours, "--fsync", fsync, "--data-dir", str(data / f"{label}-{fsync}")],
                Path(path).resolve(),
            )
    load = [os.getloadavg()[0]]
    try:
        for key, server in servers.items():
            server.start(data / f"log-{key.replace(' ', '-')}")
            conn = await WireClient("kfake-bench").connect("127.0.0.1", server.port)
            await conn.create_topics("t", partitions=1)
            await conn.create_topics(topic_for(10), partitions=10)
            await conn.close()
        order = list(servers.values())
        for r in range(args.rounds):
            for server in order[r % len(order) :] + order[: r % len(order)]:
                await window(server, args.seconds, args.connections, str(r))
            load.append(os.getloadavg()[0])
            print(f"round {r + 1}/{args.rounds} done, load {load[-1]:.1f}", file=sys.stderr, flush=True)
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(data, ignore_errors=True)
    print(f"kfake {kfake_version()}; load average {min(load):.1f}-{max(load):.1f}; medians of {args.rounds} rounds")
    for server in servers.values():
        print(
            f"{server.name}: cycle {spread(server.cycle_us)} (system {statistics.median(server.system):.0%}), "
            f"10-partition commit {spread(server.commit_us)}"
        )
    kname = f"kfake {kfake_version()}"
    # which build the servers ran (they run this checkout's, as `python -m coordinator` loads it)
    build = "pure Python" if isinstance(compiled.compiled_files(), str) else "compiled build"
    for workload, what in (
        (
            "cycle_us",
            f"join-sync-leave cycle of a 1-member classic group, initial delay 0, {args.connections} connections",
        ),
        ("commit_us", f"OffsetCommit of 10 partitions by standalone committers, {args.connections} connections"),
    ):
        for fsync, mine, peer, peer_name, label in [
            ("never", "ours never", "kfake memory", f"{kname} in memory", ""),
            ("always", "ours always", "kfake sync", f"{kname}, data dir, fsync per write", ""),
        ] + [
            (fsync, f"{label} {fsync}", peer, peer_name, f" ({label})")
            for label in (spec.split("=", 1)[0] for spec in args.tree)
            for fsync, peer, peer_name in (
                ("never", "kfake memory", f"{kname} in memory"),
                ("always", "kfake sync", f"{kname}, data dir, fsync per write"),
            )
        ]:
            values, peer_values = getattr(servers[mine], workload), getattr(servers[peer], workload)
            ratio = statistics.median(values) / statistics.median(peer_values)
            print(f"{what}, fsync {fsync}{label}: {ratio:.2f}x {peer_name}'s CPU")
            record(
                f"{what}, fsync {fsync}, log level INFO, {build}{label}: server CPU per operation",
                statistics.median(values),
                "us",
                params={
                    "fsync": fsync,
                    "rounds": args.rounds,
                    "connections": args.connections,
                    "seconds": args.seconds,
                    "range": [min(values), max(values)],
                    "peer_range": [min(peer_values), max(peer_values)],
                    "load": [min(load), max(load)],
                },
                peer=peer_name,
                peer_value=statistics.median(peer_values),
            )
        values = getattr(servers["kfake dir"], workload)
        record(
            f"{what}: kfake with a data dir and no fsync, server CPU per operation",
            statistics.median(values),
            "us",
            params={"rounds": args.rounds, "range": [min(values), max(values)], "load": [min(load), max(load)]},
        )


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
