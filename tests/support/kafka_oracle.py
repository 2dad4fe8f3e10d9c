"""A real Apache Kafka 4.4 node and Kafka's own command-line tools, the oracle of the
differential suite (tests/test_kafka_oracle.py, docs/kafka-differences.md).

`make oracle` resolves Kafka's jars with tests/oracle/pom.xml into tests/oracle/target/lib
(the first run downloads them from Maven Central, later runs are offline) and builds our tool
launcher (tests/oracle/src): one JVM that runs many tool invocations, since a JVM start per
tool costs seconds of CPU. Without java or the jars, `unavailable()` says why and the suite
skips with that reason."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import NamedTuple

from coordinator import data_dir
from tests.support.process import ROOT, free_port

ORACLE = ROOT / "tests" / "oracle"
LIB = ORACLE / "target" / "lib"
LAUNCHER_JAR = ORACLE / "target" / "kcoord-kafka-oracle-1.jar"
KAFKA_VERSION = "4.4.0"

# What a single combined node needs (replication factors of one), and what tests want: a
# classic group's first rebalance at once (Kafka's default waits 3 s).
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def unavailable() -> str | None:
    """Why the oracle cannot run here, or None when it can."""
    if shutil.which("java") is None:
        return "java is not installed: the Kafka 4.4 differential suite needs Java 17 (and mvn for `make oracle`)"
    if not (LIB / f"kafka_2.13-{KAFKA_VERSION}.jar").exists() or not LAUNCHER_JAR.exists():
        why = "mvn is not installed" if shutil.which("mvn") is None else "run `make oracle`"
        return f"Kafka {KAFKA_VERSION}'s jars are not in tests/oracle/target ({why}): the differential suite is skipped"
    return None


def classpath() -> str:
    return f"{LAUNCHER_JAR}{os.pathsep}{LIB}/*"


def _java(*args: str, heap: str) -> list[str]:
    # -Xshare:auto and a small code cache keep the JVM's start cheap; one GC thread: 2 cores.
    return [
        "java",
        f"-Xmx{heap}",
        f"-Xms{heap}",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        "-Djava.security.manager=allow",  # (the tool launcher keeps tools from calling System.exit)
        "--add-opens=java.base/java.lang=ALL-UNNAMED",  # (and runs the shutdown hooks they leave)
        "-cp",
        classpath(),
        *args,
    ]


def random_cluster_id() -> str:
    """A cluster id as Kafka's StorageTool random-uuid makes one (never starting with "-", which
    the storage tool's command line would take for an option)."""
    return data_dir.random_cluster_id()


class KafkaNode:
    """One KRaft node, broker and controller, on free ports, its data in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.controller_port = free_port()
        self.log_dir = directory / "data"
        self.log_path = directory / "kafka.log"
        self.cluster_id = random_cluster_id()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            **SINGLE_NODE,
        }

    def start(self, timeout: float = 120) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        props = self.directory / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log = open(self.log_path, "ab")
        fmt = subprocess.run(
            _java("kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(props), heap="256m"),
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka storage format exited with {fmt.returncode}:\n{self.log_text()}")
        self.proc = subprocess.Popen(
            _java("kafka.Kafka", str(props), heap="768m"), stdout=log, stderr=subprocess.STDOUT, cwd=self.directory
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafka exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"kafka did not start in {timeout}s:\n{self.log_text()[-4000:]}")
            time.sleep(0.2)

    def _answers(self) -> bool:
        """The broker answers Metadata with itself as a broker (it registered with its controller)."""
        from tests.support.raw_wire import Wire

        try:
            w = Wire(self.port)
        except OSError:
            return False
        try:
            body = w.call(3, 12, topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            return len(body.brokers) == 1
        except (OSError, AssertionError):
            return False
        finally:
            w.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def start_node(base: Path, attempts: int = 3) -> KafkaNode:
    """A started node in a new directory under `base`. The ports free_port found can be taken
    by another process before Kafka binds them (a busy CI machine runs many servers): a start
    that fails is retried on new ports."""
    failures = []
    for attempt in range(attempts):
        node = KafkaNode(base / f"kafka-{attempt}")
        try:
            node.start()
            return node
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            node.close()
            failures.append(f"attempt {attempt + 1}: {str(e)[-2000:]}")
        except BaseException:
            node.close()  # (no JVM outlives a start that failed otherwise)
            raise
    raise RuntimeError("Kafka 4.4 did not start:\n" + "\n".join(failures))


class ToolResult(NamedTuple):
    code: int
    out: str
    err: str


class Tools:
    """Kafka's command-line tools run by our launcher (kcoord.oracle.ToolRunner), one JVM for
    the whole suite: `run("org.apache.kafka.tools.TopicCommand", "--list", ...)`. One call
    at a time (the launcher redirects the JVM's System.out per call)."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            _java("kcoord.oracle.ToolRunner", heap="384m"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line != b"@@ready\n":
            raise RuntimeError(f"tool launcher did not start: {line!r}")

    def run(self, main_class: str, *args: str, timeout_ms: int = 60_000) -> ToolResult:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if any(c in a for a in args for c in "\t\n"):
            raise ValueError("tool arguments cannot hold a tab or newline")
        with self._lock:
            call = next(self._ids)
            self.proc.stdin.write("\t".join([str(call), str(timeout_ms), main_class, *args]).encode() + b"\n")
            self.proc.stdin.flush()
            header = self.proc.stdout.readline().decode()
            parts = header.split()
            if len(parts) != 5 or parts[0] != "@@result" or parts[1] != str(call):
                raise RuntimeError(f"tool launcher answered {header!r} (log: {self.log_path})")
            code, n_out, n_err = int(parts[2]), int(parts[3]), int(parts[4])
            out = self.proc.stdout.read(n_out).decode(errors="replace")
            err = self.proc.stdout.read(n_err).decode(errors="replace")
        return ToolResult(code, out, err)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.close()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
