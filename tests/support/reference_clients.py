"""Drive the Java, Go and JavaScript reference client programs (tests/clients/) against a real server.

`make clients` builds them (Maven, the Go toolchain and npm fetch what they need the first time);
the session fixture runs it, which is quick when nothing changed. A program prints one JSON
line {"result": {...}}; on {"event": NAME, "target": ...} the driver acts (restart-server
restarts the server; against a cluster, see cluster_actions) and answers one line on stdin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JAVA_DIR = ROOT / "tests" / "clients" / "java"
GO_BIN = ROOT / "tests" / "clients" / "go" / "build" / "kclients"
JS_MAIN = ROOT / "tests" / "clients" / "js" / "main.js"
# Fast JVM start for short programs: C1 only, the class-data archive, a small serial heap.
JVM_FLAGS = [
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:+UseSerialGC",
    "-Xms64m",
    "-Xmx384m",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
]

_build_lock = threading.Lock()
_built: dict[str, str | None] = {}


def build(target: str, tools: tuple[str, ...]) -> None:
    """`make <target>` once per session; skip the calling test when a tool is missing."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed: the {target} are not built")
    with _build_lock:
        if target not in _built:
            proc = subprocess.run(["make", "-s", target], cwd=ROOT, capture_output=True, text=True, timeout=900)
            _built[target] = None if proc.returncode == 0 else proc.stdout + proc.stderr
    if _built[target] is not None:
        pytest.fail(f"make {target} failed:\n{_built[target][-4000:]}")


def proxied_server(server_factory, *args: str):
    """A server advertised at a logging proxy in front of it (tests/support/proxy.py), so that
    every request of a program passes the proxy; it keeps its port across restarts."""
    from tests.support.process import free_port
    from tests.support.proxy import LoggingProxy

    port = free_port()
    server = server_factory(*args, "--advertised-host", "127.0.0.1", "--advertised-port", str(port))
    server.proxy = LoggingProxy(port, server.port)
    server.proxy_bootstrap = f"127.0.0.1:{port}"
    return server


def picked_versions(servers: dict, client_ids=None) -> dict[str, list[int]]:
    """The versions the programs picked through the servers' proxies (of the clients whose id
    passes `client_ids`), each checked against what the server advertises; the proxies close."""
    from tests.support.proxy import advertised_api_keys, assert_within_our_ranges

    picked: dict[str, set[int]] = {}
    for server in servers.values():
        seen = server.proxy.versions(client_ids)
        server.proxy.close()
        assert_within_our_ranges(seen, advertised_api_keys(server.port))
        for api, versions in seen.items():
            picked.setdefault(api, set()).update(versions)
    return {api: sorted(v) for api, v in sorted(picked.items())}


def java_command(scenario: str, bootstrap: str, *args: str) -> list[str]:
    classpath = (JAVA_DIR / "target" / "classpath.txt").read_text().strip()
    jar = JAVA_DIR / "target" / "kcoord-java-clients-1.jar"
    return [
        "java",
        *JVM_FLAGS,
        "-cp",
        f"{jar}{os.pathsep}{classpath}",
        "kcoord.clients.Main",
        scenario,
        bootstrap,
        *args,
    ]


def go_command(scenario: str, bootstrap: str, *args: str) -> list[str]:
    return [str(GO_BIN), scenario, bootstrap, *args]


def js_command(scenario: str, bootstrap: str, *args: str) -> list[str]:
    return ["node", str(JS_MAIN), scenario, bootstrap, *args]


def cluster_actions(cluster) -> dict:
    """What a program may ask of a `coordinator.testing.Cluster`, by event name."""
    return {
        "move-coordinator": lambda m: cluster.move_coordinator(m["target"]),
        "stop-coordinator": lambda m: cluster.stop_broker(cluster.coordinator_of(m["target"])),
        "move-leader": lambda m: cluster.move_leader(m["target"], 0),
    }


def run_program(
    command: list[str], server=None, timeout: float = 240, log: Path | None = None, actions: dict | None = None
) -> dict:
    """Run one scenario program to its result line, acting on its events: restart-server
    restarts `server`, the others are looked up in `actions`."""
    actions = {**({"restart-server": lambda m: server.restart()} if server is not None else {}), **(actions or {})}
    stderr = open(log, "wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
    timer = threading.Timer(timeout, proc.kill)  # a hung client fails its test, not the suite
    timer.start()
    result, lines = None, []
    try:
        for line in proc.stdout:
            lines.append(line)
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            if "event" in message:
                actions[message["event"]](message)
                proc.stdin.write("ok\n")
                proc.stdin.flush()
            elif "result" in message:
                result = message["result"]
        proc.wait(30)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if log:
            stderr.close()
    tail = "".join(lines[-20:])
    assert result is not None, f"{command[-3:]} exited {proc.returncode} without a result line:\n{tail}" + (
        f"\n--- stderr ---\n{log.read_text(errors='replace')[-6000:]}" if log else ""
    )
    return result


def run_parallel(jobs: dict[str, tuple]) -> dict[str, dict]:
    """Run scenarios that share no group at once: {name: (command, server, log[, actions])} -> results."""
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {
            name: pool.submit(run_program, job[0], job[1], log=job[2], actions=job[3] if len(job) > 3 else None)
            for name, job in jobs.items()
        }
        errors = {name: f.exception() for name, f in futures.items() if f.exception() is not None}
        assert not errors, "\n\n".join(f"{name}: {e}" for name, e in errors.items())
        return {name: f.result() for name, f in futures.items()}


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets, read back with another client (confluent-kafka's admin)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    answer = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets-reader"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    finally:
        c.close()
