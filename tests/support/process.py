"""A real server process per test (`python -m coordinator` on a free port), and the waits and
client helpers the suites share."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repository root


def free_port(count: int = 1) -> int:
    """A port free now, and the count - 1 after it too (`--brokers N` listens on N
    consecutive ports from --port): all are bound at once to check, then released."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
            if base + count > 65536:
                continue
            held = []
            try:
                for port in range(base + 1, base + count):
                    t = socket.socket()
                    held.append(t)
                    t.bind(("127.0.0.1", port))
                return base
            except OSError:
                continue
            finally:
                for t in held:
                    t.close()


def _brokers(extra_args: list[str]) -> int:
    """How many consecutive ports the server's arguments ask for."""
    if "--brokers" in extra_args:
        i = extra_args.index("--brokers")
        if i + 1 < len(extra_args) and extra_args[i + 1].isdigit():
            return max(1, int(extra_args[i + 1]))
    return 1


class ServerProcess:
    """`python -m coordinator` in a subprocess; restartable on the same port and data dir."""

    def __init__(self, data_dir: Path, extra_args: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args or []
        self.port = free_port(_brokers(self.extra_args))
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"server-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [
            sys.executable,
            "-m",
            "coordinator",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *self.extra_args,
        ]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        line = self.proc.stdout.readline().decode()
        if not line.startswith("ready"):
            self.proc.wait(5)
            raise RuntimeError(f"server did not start: {line!r}\n{self.log_path.read_text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.proc = None
        return code

    def restart(self, sig: int = signal.SIGTERM) -> None:
        self.stop(sig)
        self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


class NeedsProcess(RuntimeError):
    """What an in-process server cannot do (be killed, report a pid): the test module asks
    for a real process with `pytestmark = pytest.mark.process`."""


class InProcessServer:
    """The server of `ServerProcess`, run in this process on its own thread and event loop
    (as coordinator.testing.Cluster runs one): the same port, data dir and graceful
    stop/restart, without starting an interpreter per test. Its log lines (every logger's,
    as the test process shares them) go to `log_path` while it runs."""

    def __init__(self, data_dir: Path, extra_args: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args or []
        self.port = free_port(_brokers(self.extra_args))
        self.log_path = data_dir.parent / f"server-{self.port}.log"
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._handler: logging.Handler | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def proc(self) -> Any:
        raise NeedsProcess("an in-process server has no process: mark the module pytest.mark.process")

    def start(self) -> None:
        import uvloop

        from coordinator.config import parse_args
        from coordinator.server import Server

        config = parse_args(
            ["--host", "127.0.0.1", "--port", str(self.port), "--data-dir", str(self.data_dir), *self.extra_args]
        )
        self._handler = logging.FileHandler(self.log_path)
        self._handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(self._handler)
        root.setLevel(min(root.level or logging.WARNING, logging.getLevelName(config.log_level.upper())))
        self._loop = loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name=f"server-{self.port}", daemon=True)
        self._thread.start()
        self._server = Server(config)
        try:
            self._call(self._server.start())
        except BaseException:
            self._server = None
            self._shut_loop()
            raise

    def _call(self, coro: Any, timeout: float = 60) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _shut_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(10)
            self._loop.close()
            self._loop = self._thread = None
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        """A graceful stop, as SIGTERM or SIGINT give a process; exit status 0."""
        if sig not in (signal.SIGTERM, signal.SIGINT):
            raise NeedsProcess(f"signal {sig} needs a real process: mark the module pytest.mark.process")
        assert self._server is not None
        try:
            self._call(self._server.stop(), timeout)
        finally:
            self._server = None
            self._shut_loop()
        return 0

    def restart(self, sig: int = signal.SIGTERM) -> None:
        self.stop(sig)
        self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def close(self) -> None:
        if self._server is not None:
            try:
                self._call(self._server.stop(grace_seconds=1.0))
            finally:
                self._server = None
        self._shut_loop()


def create_topics(port: int, *names: str, partitions: int = 4) -> None:
    """For tests without a loop of their own: commits to unknown topics are refused."""
    from tests.support.wire_client import WireClient

    async def create() -> None:
        conn = await WireClient("topic-maker").connect("127.0.0.1", port)
        try:
            await conn.create_topics(*names, partitions=partitions)
        finally:
            await conn.close()

    asyncio.run(create())


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"):
    """Poll until predicate() is truthy; return its value (tests never sleep blindly)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def kafka_python_subscribe(consumer, topic: str) -> None:
    """Subscribe a kafka-python 3.0 consumer so that its first assignment sees the topic.

    A kafka-python leader rejoins when the partitions it assigned from differ from its latest
    metadata, which it records only from a metadata answer that comes after subscribe(). If
    the join it starts for that reason finishes between two poll() calls, the next poll sees
    no reason to rejoin and never completes the join either: its heartbeats stay off and the
    broker expires it after the session timeout (Kafka does the same). topics() fetches
    metadata after subscribe(), so the first assignment is made from the real partitions and
    that rejoin never happens."""
    consumer.subscribe([topic])
    wait_for(lambda: topic in consumer.topics(), what=f"metadata of {topic}")


class PolledMember:
    """A group member polled continuously by its own thread, as applications do: `poll()`
    returns the partitions it owns now (`owned`); `close` runs in that thread when it stops.
    kafka-python completes a join only inside poll(): members polled in turn by one thread
    keep restarting each other's rebalances, as a join that finishes outside its own poll()
    is thrown away and sent again."""

    def __init__(self, poll, close) -> None:
        self.owned: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(poll, close), daemon=True)
        self.thread.start()

    def _run(self, poll, close) -> None:
        from kafka.errors import KafkaError

        while not self.stop.is_set():
            try:
                self.owned = poll()
            except KafkaError as e:
                # kafka-python raises a refused connection from poll() while a broker stops
                # or restarts; an application polls on (a member whose thread died would stop
                # heartbeating and be expired: a failure of the test, not of the server)
                if not e.retriable:
                    raise
        close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
