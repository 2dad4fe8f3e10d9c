"""A Kafka cluster for tests: several brokers, coordinators and leaders that move, faults
on demand.

    from coordinator.testing import Cluster

    with Cluster(brokers=3) as cluster:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g", ...})
        ...
        cluster.move_coordinator("g")                       # the group's coordinator moves
        cluster.stop_broker(cluster.leader_of("orders", 0))  # its partitions get new leaders
        cluster.inject("OffsetCommit", "NOT_COORDINATOR", times=2)

The server runs with `--profile test` (docs/operations.md, "The test profile"): nothing
waits on a production default, and every setting can be overridden by keyword.

In-process by default: the server runs on its own thread and event loop, on free ports,
with a temporary data dir, so a cluster starts in a fraction of a second. With
`subprocess=True` it is `python -m coordinator` in a child process, driven through its
HTTP test control (--enable-test-control). Also an async context manager (`async with`),
whose methods then have awaitable twins (`await cluster.amove_coordinator("g")`).

Like librdkafka's mock cluster (`rd_kafka_mock_cluster_new`, `..._broker_set_down`,
`..._coordinator_set`, `..._push_request_errors`) and franz-go's kfake (`NumBrokers`,
`MoveTopicPartition`, `ControlKey`), for every client language, with the real group
coordinator behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import subprocess as _subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack, cast

if TYPE_CHECKING:  # the server side is imported only when run in process
    from .tracking import RequestFilters

__all__ = ["Cluster", "ClusterError"]


class ClusterError(RuntimeError):
    """A control request the cluster refused (unknown broker, the last broker, no such
    partition, a bad fault spec); nothing was changed."""


def _flags(config: dict[str, Any]) -> list[str]:
    """Server settings given as keyword arguments (`group_initial_rebalance_delay_ms=0`)
    as the command-line flags they stand for."""
    out = []
    for name, value in config.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is False:
            out.append("--no-" + name.replace("_", "-"))
        elif value is not None:
            out += [flag, str(value)]
    return out


class Cluster:
    """`brokers` brokers in one server; `config`: server settings by their flag names
    (`group_consumer_heartbeat_interval_ms=1000`, `fsync="always"`, ...), each over the
    `test` profile's (`profile=None`: the server's own defaults, `profile="client-suite"`:
    that one's)."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        subprocess: bool = False,
        data_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        **config: Any,
    ) -> None:
        if type(brokers) is not int or brokers < 1:
            raise ValueError(f"brokers: {brokers!r}; at least 1")
        self.brokers_count = brokers
        self.subprocess = subprocess
        self.host = host
        # The test profile (docs/operations.md): no rebalance or assignment delays, short KIP-848
        # and share heartbeat intervals, fsync never; each of its settings overridable here.
        self.config = {"profile": "test", **config}
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._proc: _subprocess.Popen[bytes] | None = None
        self._control_url: str | None = None
        self.bootstrap = ""

    # life cycle -------------------------------------------------------------------------

    def start(self) -> Cluster:
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="kcoord-cluster-"))
        args = [
            "--host",
            self.host,
            "--port",
            "0",
            "--brokers",
            str(self.brokers_count),
            "--data-dir",
            str(self.data_dir),
            *_flags(self.config),
        ]
        try:
            config = self._parse(args)  # a bad setting fails here, before anything is started
            if self.subprocess:
                self._start_process(args)
            else:
                self._start_in_process(config)
        except BaseException:
            self.close()
            raise
        return self

    @staticmethod
    def _parse(args: list[str]) -> Any:
        """The server's Config for these flags. parse_args reports a bad one as a line on
        stderr and exit 2, right for the command; a library raises: ValueError with that line."""
        from .config import parse_args

        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                return parse_args(args)
        except SystemExit:
            raise ValueError(err.getvalue().strip().removeprefix("python -m coordinator: error: ")) from None

    def _start_in_process(self, config: Any) -> None:
        import uvloop

        from .server import Server

        self._loop = loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="kcoord-cluster", daemon=True)
        self._thread.start()
        self._server = Server(config, own_process=False)  # (the test's garbage collector stays the test's)
        self._call(self._server.start())
        first: dict[int, Any] = {}
        for listener in self._server.listeners:
            first.setdefault(listener.node_id, listener)
        self.bootstrap = ",".join(f"{x.advertised[0]}:{x.advertised[1]}" for x in first.values())

    def _start_process(self, args: list[str]) -> None:
        args += ["--enable-test-control", "--metrics-port", "0"]
        assert self.data_dir is not None  # (start() made it)
        self._log = open(self.data_dir.parent / f"{self.data_dir.name}.log", "ab")
        self._proc = _subprocess.Popen(
            [sys.executable, "-m", "coordinator", *args],
            stdout=_subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        line = self._proc.stdout.readline().decode()  # type: ignore[union-attr]  # Popen with stdout=PIPE always has stdout
        if not line.startswith("ready"):
            self._proc.wait(5)
            raise RuntimeError(f"the cluster did not start: {line!r} (log: {self._log.name})")
        words = line.split()
        self.bootstrap = words[1]
        port = next(w.removeprefix("control=") for w in words if w.startswith("control="))  # the metrics port
        self._control_url = f"http://{self.host}:{port}"

    def close(self) -> None:
        """Stop the brokers (and remove the data dir if it was made for this cluster)."""
        if self._server is not None and self._loop is not None:
            try:
                self._call(self._server.stop(grace_seconds=1.0))
            finally:
                self._server = None
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(10)
            self._loop.close()
            self._loop = self._thread = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(15)
            except _subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
            self._proc.stdout.close()  # type: ignore[union-attr]  # Popen with stdout=PIPE always has stdout
            self._log.close()
            self._proc = None
        if self._own_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            log = self.data_dir.parent / f"{self.data_dir.name}.log"
            if log.exists():
                log.unlink()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> Cluster:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.to_thread(self.close)

    # running a control on the server's loop, or over HTTP ------------------------------

    def _call(self, coro: Any) -> Any:
        """Run a coroutine on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)  # type: ignore[arg-type]  # an in-process cluster's loop is set once its thread runs

    def _run(self, fn: Any, *args: Any, **kw: Any) -> Any:
        """Call fn (plain or async) on the server's loop, translating a refused control."""
        from .topology import ControlError

        async def call() -> Any:
            result = fn(*args, **kw)
            return await result if asyncio.iscoroutine(result) else result

        try:
            return self._call(call())
        except (ControlError, ValueError) as e:
            raise ClusterError(str(e)) from None

    def _http(self, method: str, path: str, body: Any = None) -> Any:
        """One request to an out-of-process cluster's control API (the one kcoord control speaks)."""
        from .admin.common import Failure
        from .admin.control_cli import call

        try:
            return call(
                self._control_url.removeprefix("http://"),  # type: ignore[union-attr]  # set once the process reported its control port
                method,
                path,
                body,
                timeout=60,
            )
        except Failure as e:
            raise ClusterError(str(e)) from None

    def _require_started(self) -> None:
        if self._server is None and self._proc is None:
            raise RuntimeError("the cluster is not started (use it in a with block, or call start())")

    # topology ---------------------------------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return [b["node_id"] for b in self.brokers()]

    def brokers(self) -> list[dict[str, Any]]:
        """Each broker: node_id, host, port, alive, listeners, and how many partitions it leads."""
        self._require_started()
        if self._proc is not None:
            if self.brokers_count == 1:  # (the test control serves /cluster with several brokers only)
                host, port = self.bootstrap.split(",")[0].rsplit(":", 1)
                return [{"node_id": 1, "host": host, "port": int(port), "alive": True}]
            return cast("list[dict[str, Any]]", self._http("GET", "/cluster")["brokers"])
        return cast("list[dict[str, Any]]", self._run(self._server.control.brokers))

    def coordinator_of(self, group_id: str) -> int:
        """The node id of the group's coordinator."""
        self._require_started()
        if self._proc is not None:
            return cast(int, self._http("GET", f"/cluster/coordinators/{_q(group_id)}")["coordinator"])
        return cast(int, self._run(self._server.control.coordinator_of, group_id))

    def transaction_coordinator_of(self, transactional_id: str) -> int:
        self._require_started()
        if self._proc is not None:
            return cast(
                int, self._http("GET", f"/cluster/transaction-coordinators/{_q(transactional_id)}")["coordinator"]
            )
        return cast(int, self._run(self._server.control.transaction_coordinator_of, transactional_id))

    def leader_of(self, topic: str, partition: int) -> int:
        """The node id of the partition's leader."""
        self._require_started()
        if self._proc is not None:
            return cast(int, self._http("GET", f"/cluster/leaders/{_q(topic)}/{int(partition)}")["leader"])
        return cast(int, self._run(self._server.control.leader_of, topic, partition))

    def stop_broker(self, node_id: int) -> None:
        """The broker goes away: listeners and connections closed, its partitions and
        coordinators moved to the live brokers (returns once they are loaded)."""
        self._require_started()
        if self._proc is not None:
            self._http("POST", f"/cluster/brokers/{int(node_id)}/stop", {})
        else:
            self._run(self._server.control.stop_broker, node_id)

    def start_broker(self, node_id: int, *, preferred: bool = False) -> None:
        """The broker comes back into the ISRs; `preferred`: and leads again the partitions
        it is the preferred replica of."""
        self._require_started()
        if self._proc is not None:
            self._http("POST", f"/cluster/brokers/{int(node_id)}/start", {"preferred": preferred})
        else:
            self._run(self._server.control.start_broker, node_id, preferred=preferred)

    def move_coordinator(self, group_id: str, to: int | None = None) -> int:
        """Move the group's coordinator (its __consumer_offsets partition) to broker `to`
        (default: the next live replica); returns the new coordinator once it has loaded."""
        return self._move("move_coordinator", "/cluster/coordinators/move", "coordinator", group_id=group_id, to=to)

    def move_transaction_coordinator(self, transactional_id: str, to: int | None = None) -> int:
        return self._move(
            "move_transaction_coordinator",
            "/cluster/transaction-coordinators/move",
            "coordinator",
            transactional_id=transactional_id,
            to=to,
        )

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        """Move the partition's leadership to broker `to` (default: the next live replica),
        under a new leader epoch; returns the new leader."""
        return self._move("move_leader", "/cluster/leaders/move", "leader", topic=topic, partition=partition, to=to)

    def _move(self, operation: str, path: str, answer: str, **args: Any) -> int:
        self._require_started()
        if self._proc is not None:
            return cast(int, self._http("POST", path, args)[answer])
        return cast(int, self._run(getattr(self._server.control, operation), **args))

    # faults -----------------------------------------------------------------------------

    def inject(
        self, api: str | int, error: str | int, times: int | None = 1, probability: float | None = None, **match: Any
    ) -> dict[str, Any]:
        """The next `times` requests of `api` (a name, "OffsetCommit", or a key, 8) matching
        `match` (client_id, group, topic, broker) are answered with `error` (a name,
        "NOT_COORDINATOR", or a code, 16), as Kafka answers them with that error; or each with
        `probability`. Returns the rule."""
        return self._fault(api=api, error=error, times=times, probability=probability, **match)

    def delay(self, api: str | int, ms: int, times: int | None = None, **match: Any) -> dict[str, Any]:
        """Matching requests are answered `ms` later (until cleared, or `times` of them)."""
        return self._fault(api=api, delay_ms=ms, times=times, **match)

    def drop_connections(
        self, api: str | int = "Produce", *, after: bool = False, times: int | None = 1, **match: Any
    ) -> dict[str, Any]:
        """The connection of a matching request is closed: before it is handled, or with
        `after` once it was handled and its answer is lost (the idempotent-producer case)."""
        return self._fault(api=api, drop="after" if after else "before", times=times, **match)

    def clear_faults(self, rule_id: int | None = None) -> int:
        """Remove every fault (or one); returns how many were removed."""
        self._require_started()
        if self._proc is not None:
            path = "/faults" if rule_id is None else f"/faults/{int(rule_id)}"
            return cast(int, self._http("DELETE", path)["cleared"])
        return cast(int, self._run(self._server.faults.clear, rule_id))

    def faults(self) -> list[dict[str, Any]]:
        self._require_started()
        if self._proc is not None:
            return cast("list[dict[str, Any]]", self._http("GET", "/faults"))
        return cast("list[dict[str, Any]]", self._run(self._server.faults.list))

    def _fault(self, **spec: Any) -> dict[str, Any]:
        self._require_started()
        spec = {k: v for k, v in spec.items() if v is not None or k == "times"}
        if self._proc is not None:
            return cast("dict[str, Any]", self._http("POST", "/faults", spec))
        return cast("dict[str, Any]", self._run(self._server.faults.add_specs, spec)[0])

    # request tracking ---------------------------------------------------------------------

    def start_tracking(self, limit: int | None = None) -> dict[str, Any]:
        """Record every request the brokers receive from now on, at most `limit` (default
        10,000; past it the oldest are dropped and counted). Returns the tracking status."""
        self._require_started()
        if self._proc is not None:
            return cast(
                "dict[str, Any]", self._http("POST", "/requests/tracking", {} if limit is None else {"limit": limit})
            )
        return cast("dict[str, Any]", self._run(self._server.tracking.start, limit))

    def stop_tracking(self) -> dict[str, Any]:
        """Record no more; what was recorded stays readable (requests()) until cleared."""
        self._require_started()
        if self._proc is not None:
            return cast("dict[str, Any]", self._http("DELETE", "/requests/tracking"))
        return cast("dict[str, Any]", self._run(self._server.tracking.stop))

    def clear_requests(self) -> int:
        """Forget the recorded requests (tracking goes on if started); how many there were."""
        self._require_started()
        if self._proc is not None:
            return cast(int, self._http("DELETE", "/requests")["cleared"])
        return cast(int, self._run(self._server.tracking.clear))

    def tracking(self) -> dict[str, Any]:
        """{"tracking": bool, "limit": n, "recorded": n, "dropped": n}"""
        self._require_started()
        if self._proc is not None:
            return cast("dict[str, Any]", self._http("GET", "/requests/tracking"))
        return cast("dict[str, Any]", self._run(self._server.tracking.status))

    def requests(self, api: str | int | None = None, **filters: Unpack[RequestFilters]) -> list[dict[str, Any]]:
        """The recorded requests, oldest first, that match every filter given (api, client_id,
        broker, group, topic, transactional_id): each with its broker, api_key, api,
        api_version, client_id, correlation_id, time_ms, supported (False: a version or API not
        served), and the groups, transactional_ids and topics it names."""
        self._require_started()
        given = {k: v for k, v in {"api": api, **filters}.items() if v is not None}
        if self._proc is not None:
            query = "&".join(f"{k}={_q(str(v))}" for k, v in given.items())
            return cast(
                "list[dict[str, Any]]", self._http("GET", "/requests" + (f"?{query}" if query else ""))["requests"]
            )
        return cast("list[dict[str, Any]]", self._run(self._server.tracking.requests, **given))

    # narrowed API versions --------------------------------------------------------------

    def set_api_version(
        self, api: str | int, min_version: int | None = None, max_version: int | None = None
    ) -> dict[str, Any]:
        """The brokers advertise in ApiVersions and accept only min_version..max_version of
        `api` (a name, "Fetch", or a key, 1; a bound left out: the one served), so that a client
        falls back to older versions. Returns the API's ranges."""
        self._require_started()
        spec = {"api": api, "min_version": min_version, "max_version": max_version}
        if self._proc is not None:
            return cast("dict[str, Any]", self._http("POST", "/api-versions", spec))
        return cast("dict[str, Any]", self._run(self._server.api_version_limits.set_specs, spec)[0])

    def api_versions(self, narrowed: bool = False) -> list[dict[str, Any]]:
        """Every served API (or only the narrowed ones): api, api_key, min_version and
        max_version advertised, served_min_version and served_max_version, narrowed."""
        self._require_started()
        if self._proc is not None:
            found = self._http("GET", "/api-versions")
            return [e for e in found if e["narrowed"]] if narrowed else found
        return cast("list[dict[str, Any]]", self._run(self._server.api_version_limits.ranges, narrowed))

    def reset_api_versions(self, api: str | int | None = None) -> int:
        """The full served ranges again (of one API, or all); how many were narrowed."""
        self._require_started()
        if self._proc is not None:
            return cast(
                int, self._http("DELETE", "/api-versions" if api is None else f"/api-versions/{_q(str(api))}")["reset"]
            )
        return cast(int, self._run(self._server.api_version_limits.reset, api))

    # async twins, for tests running an event loop of their own ---------------------------

    async def astop_broker(self, node_id: int) -> None:
        await asyncio.to_thread(self.stop_broker, node_id)

    async def astart_broker(self, node_id: int, *, preferred: bool = False) -> None:
        await asyncio.to_thread(self.start_broker, node_id, preferred=preferred)

    async def amove_coordinator(self, group_id: str, to: int | None = None) -> int:
        return await asyncio.to_thread(self.move_coordinator, group_id, to)

    async def amove_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        return await asyncio.to_thread(self.move_leader, topic, partition, to)

    async def amove_transaction_coordinator(self, transactional_id: str, to: int | None = None) -> int:
        return await asyncio.to_thread(self.move_transaction_coordinator, transactional_id, to)


def _q(value: str) -> str:
    from urllib.parse import quote

    return quote(str(value), safe="")
