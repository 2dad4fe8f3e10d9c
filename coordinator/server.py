"""The server: listens, loads its parts, and hands each connection the request channel
(coordinator/connection.py) that dispatches its requests to the registered handlers."""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from kio.schema.errors import ErrorCode

from protocol.messages import (
    API_VERSIONS_KEY,
    codec,
    encode_body,
    encode_response,
    read_request_header,
)

from . import server_log
from .api_version_limits import ApiVersionLimits
from .apis import (
    LATER,
    Raw,
    Registry,
    RequestContext,
)
from .config import Config
from .connection import Connection, RequestChannel
from .data_dir import ClusterIdMismatch, DataDirInUse, cluster_id_of, lock_data_dir, unlock_data_dir
from .durable import StoreError
from .faults import Faults
from .listeners import Listener, listeners_of
from .releases import apply_release
from .log_limit import RateLimitedLog
from .metrics.stats import STATS
from .broker.quotas import ConnectionRateQuota, RequestQuota
from .tracking import RequestLog

if TYPE_CHECKING:
    from .security.scram import ScramCredential

GC_YOUNG_THRESHOLD = 10_000

log = server_log.get(__name__)


# KIP-511: client software name and version must look like this.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


FD_RESERVE = 32  # file descriptors kept for log segments and files, never for connections


def fd_soft_limit() -> int:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError, OSError):
        return 2**31 - 1
    return soft if soft != resource.RLIM_INFINITY else 2**31 - 1


def raise_fd_limit(max_connections: int) -> None:
    """Raise the soft limit on open files to the hard one: each connection and each log
    segment holds one. Say at startup if max.connections cannot be reached."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    except (ImportError, ValueError, OSError):
        return
    if soft != resource.RLIM_INFINITY and max_connections > soft - 256:
        log.warning(
            "max.connections=%d but only %d files may be open (ulimit -n): connections will be "
            "refused before that many",
            max_connections,
            soft,
        )


class StartupError(Exception):
    """The server cannot start for a reason the operator must fix (said in one line)."""


class Server:
    def __init__(self, config: Config, *, own_process: bool = True) -> None:
        self.config = config
        # False: embedded in another program (coordinator.testing's in-process cluster), whose
        # garbage collector is its own: the process-wide tuning below is left out.
        self.own_process = own_process
        self.registry = Registry()
        self.connections: set[Connection] = set()
        self._servers: dict[int, list[asyncio.base_events.Server]] = {}  # by broker node id
        self.listeners: list[Listener] = []
        self.components: list[Any] = []
        self.topics: Any = None
        self.groups: Any = None
        self.offsets_log: Any = None
        self.topology: Any = None  # coordinator.topology.Topology
        self.control: Any = None  # coordinator.topology.ClusterControl: stop / start brokers, moves
        self.cluster_control: Any = None  # the same, with several brokers (coordinator/control.py's /cluster)
        self.metrics: Any = None  # coordinator.metrics.Metrics with --metrics-port
        self.sasl: Any = None  # coordinator.security.sasl.SaslApis with SASL_PLAINTEXT / SASL_SSL
        self._tls: Any = None  # the ssl.SSLContext of SSL / SASL_SSL
        self._sasl_users: dict[str, dict[str, ScramCredential]] = {}  # from --sasl-users
        self.credentials: Any = None  # coordinator.security.credentials.CredentialStore
        self.acl_gate: Any = None  # coordinator.security.acl_gate.AclGate with --authorizer
        self.request_quota: RequestQuota | None = None  # request_percentage (coordinator.broker.quotas)
        self.connection_quota: ConnectionRateQuota | None = None  # connection_creation_rate
        self.ready_since = 0.0  # unix time the port started listening (0: not yet)
        # Injected faults (coordinator/faults.py) and request tracking (coordinator/tracking.py):
        # `intercept` is the RequestLog while it tracks, else the Faults while a rule exists
        # (_choose_intercept, which both call when that changes)
        self.intercept: Faults | RequestLog | None = None
        self.channel: RequestChannel | None = None  # what each connection is given, once listening
        self.faults = Faults(
            config.fault_seed, handle=self._checked, topic_name=self._topic_name, changed=self._choose_intercept
        )
        self.tracking = RequestLog(self.faults, self._choose_intercept)
        self.api_version_limits = ApiVersionLimits(self.registry)  # narrowed ranges (tests)
        self.registry.add(API_VERSIONS_KEY, range(0, 6), self.api_versions)
        self.features: Any = None  # coordinator.features.Features, once loaded
        self.shares: Any = None  # coordinator.share.manager.SharePartitionManager, once loaded
        # What clients can make us log is rate-limited (a hostile client must not flood the log).
        self._warn_refused = RateLimitedLog(log.logger, logging.WARNING, burst=1)
        self._idle_sweeper: asyncio.Task[None] | None = None
        self._data_dir_lock: Any = None  # the key of this process's lock on the data dir, once taken

    # life cycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Claim the port, load, then listen. Raises StartupError (one line for the
        operator) if the port or the data dir cannot be had."""
        from .components import build_components  # late: the parts load only once the ports are had

        try:
            self.listeners = listeners_of(self.config)
        except ValueError as e:
            raise StartupError(str(e)) from None
        if self.config.enable_test_control and self.config.metrics_port is None:
            raise StartupError(
                "--enable-test-control serves on the metrics port: give --metrics-port too (0 = any free port)"
            )
        # The ports first: a port in use must fail before the data dir is created or loaded.
        socks: list[socket.socket] = []
        try:
            for listener in self.listeners:
                socks.append(self._bind(listener.host, listener.port))
        except StartupError:
            _close_all(socks)
            raise
        sock = _Sockets(socks)
        raise_fd_limit(self.config.max_connections)
        try:
            self._configure_security()
        except StartupError:
            sock.close()
            raise
        if self.config.metrics_port is not None:
            await self._start_metrics(sock)
        try:
            self.config.data_dir.mkdir(parents=True, exist_ok=True)
            # Before anything else in the dir is read or written: a second process on it
            # would append to the same segments.
            self._data_dir_lock = lock_data_dir(self.config.data_dir)
        except DataDirInUse as e:
            sock.close()
            raise StartupError(str(e)) from None
        except OSError as e:
            sock.close()
            raise StartupError(f"data dir {self.config.data_dir}: {e.strerror or e}") from e
        try:
            probe = self.config.data_dir / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
            self.config.cluster_id = cluster_id_of(self.config.data_dir, self.config.cluster_id)
            self._load_credentials()
            acls = self._load_acls()
        except OSError as e:
            sock.close()
            self._release_data_dir()
            raise StartupError(f"data dir {self.config.data_dir}: {e.strerror or e}") from e
        except ClusterIdMismatch as e:
            sock.close()
            self._release_data_dir()
            raise StartupError(str(e)) from None
        except StartupError:
            sock.close()
            self._release_data_dir()
            raise
        # Loading creates millions of long-lived objects: collecting while it runs finds
        # no garbage, and afterwards they need not be traversed again (gc.freeze).
        if self.own_process:
            gc.disable()
        loading = time.perf_counter()
        try:
            parts = await build_components(
                self.config,
                self.registry,
                self.listeners,
                acls,
                close_broker=self.close_broker,
                open_broker=self.open_broker,
            )
        except StoreError as e:  # a store file edited by hand, or written by something else
            sock.close()
            self._release_data_dir()
            raise StartupError(str(e)) from None
        except BaseException:
            self._release_data_dir()
            raise
        finally:
            if self.own_process:
                gc.enable()
        apply_release(self.registry, self.config.kafka_version)  # (every API is registered by now)
        self.components = parts.components
        self.topics, self.groups, self.offsets_log = parts.topics, parts.groups, parts.offsets_log
        self.topology, self.control = parts.topology, parts.control
        self.request_quota, self.connection_quota = parts.request_quota, parts.connection_quota
        self.features = parts.features
        self.shares = parts.shares
        if self.config.brokers > 1:  # what the HTTP test control's /cluster routes drive
            self.cluster_control = parts.control
        self.acl_gate = parts.acl_gate
        STATS.recovery_seconds = time.perf_counter() - loading
        if self.own_process:
            gc.freeze()
            # Requests allocate many short-lived containers, nearly all freed by reference
            # counting: a young collection every 700 allocations (the default) mostly
            # traverses objects that are about to be freed anyway.
            gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        loop = asyncio.get_running_loop()
        # (after the metrics' start: they time each request the channel handles)
        self.channel = RequestChannel(
            self.config,
            self.connections,
            self.registry,
            self.refuse_connection,
            log.logger,
            sasl=self.sasl,
            tracking=self.tracking,
            intercept=self.intercept,
            acl_gate=self.acl_gate,
            request_quota=self.request_quota,
            metrics=None if self.metrics is None else self.metrics.requests,
            unsupported_api_versions=self._unsupported_api_versions,
        )
        for listener, listening in zip(self.listeners, socks):
            await self._listen(listener, listening)
        self.config.host, self.config.port = self.listeners[0].host, self.listeners[0].port
        if len(self.listeners) > 1:
            log.info("listeners: %s", ", ".join(f"{x.protocol}://{x.host}:{x.port}" for x in self.listeners))
        self._idle_sweeper = loop.create_task(self._close_idle_connections())
        if self.config.brokers > 1:
            log.info("brokers: %s", ", ".join(f"{x.node_id}={x.host}:{x.port}" for x in self.listeners))
        log.info(
            "listening on %s:%d (node %d, data dir %s)",
            self.config.host,
            self.config.port,
            self.config.node_id,
            self.config.data_dir,
        )
        if self.metrics is not None:
            from .metrics.collector import Observed

            observed = Observed(
                self.config.cluster_id,
                self.groups,
                self.topics,
                self.shares,
                lambda: len(self.connections),
                lambda: self.ready_since,
            )
            self.metrics.loaded(self.config.metrics_lag_sample_ms, observed)
        self.ready_since = time.time()

    async def _listen(self, listener: Listener, sock: socket.socket) -> None:
        channel = self.channel
        assert channel is not None  # (built before the first listener)
        server = await asyncio.get_running_loop().create_server(
            lambda: Connection(channel, listener), sock=sock, backlog=1024, ssl=self._tls if listener.tls else None
        )
        self._servers.setdefault(listener.node_id, []).append(server)
        listener.port = server.sockets[0].getsockname()[1]  # (port 0: the one bound)

    # stopping and starting one broker (what coordinator.topology.ClusterControl is given) ----

    def close_broker(self, node_id: int) -> None:
        """Broker node_id goes away: its listeners close, and so do its connections (their
        requests in flight are dropped, as a broker that dies drops them)."""
        for server in self._servers.pop(node_id, []):
            server.close()
        for conn in list(self.connections):
            if conn.listener.node_id == node_id and conn.transport is not None:
                conn.closed = True
                conn.transport.abort()

    async def open_broker(self, node_id: int) -> None:
        """Broker node_id listens again, on the ports it had. OSError if one is taken."""
        if node_id in self._servers:
            return
        mine = [x for x in self.listeners if x.node_id == node_id]
        socks: list[socket.socket] = []
        try:
            for listener in mine:
                socks.append(self._bind(listener.host, listener.port))
        except StartupError as e:
            _close_all(socks)
            raise OSError(str(e)) from None
        for listener, sock in zip(mine, socks):
            await self._listen(listener, sock)

    def _configure_security(self) -> None:
        """TLS context and SASL users, before anything is loaded: a bad file is one line."""
        protocols = {listener.protocol for listener in self.listeners}
        if protocols & {"SSL", "SASL_SSL"}:
            from .security.tls import TlsConfigError, server_context

            try:
                self._tls = server_context(self.config)
            except TlsConfigError as e:
                raise StartupError(str(e)) from None
        sasl = sorted(p for p in protocols if p.startswith("SASL_"))
        if not sasl:
            # Kafka lists SaslHandshake and SaslAuthenticate on every listener, and answers them
            # on one without SASL (as after authentication) with ILLEGAL_SASL_STATE.
            from .security.sasl import SaslApis

            self.sasl = SaslApis([], lambda user: None)
            self.sasl.register(self.registry)
        else:
            protocol = sasl[0]
            from .security.sasl import MECHANISMS, SaslApis
            from .profiles import profile_users
            from .security.users import UsersFileError, credentials_of, load_users

            mechanisms = [m.strip().upper() for m in self.config.sasl_mechanisms.split(",") if m.strip()]
            unknown = [m for m in mechanisms if m not in MECHANISMS]
            if unknown or not mechanisms:
                raise StartupError(
                    f"--sasl-mechanisms: {', '.join(unknown) or 'none given'}; supported: {', '.join(MECHANISMS)}"
                )
            passwords = profile_users(self.config.profile) if self.config.sasl_users is None else None
            if self.config.sasl_users is None and passwords is None:
                raise StartupError(f"--security-protocol {protocol} needs --sasl-users FILE (user:password lines)")
            try:
                # (no passwords: --sasl-users was given, or the check above refused to start)
                users = (
                    credentials_of(passwords)
                    if passwords is not None
                    else load_users(cast("Path", self.config.sasl_users))
                )
            except UsersFileError as e:
                raise StartupError(str(e)) from None
            self._sasl_users = users
            # (the credentials admin clients manage are in the data dir: read once it is checked)
            self.sasl = SaslApis(mechanisms, lambda user: self.credentials.lookup(user))
            self.sasl.register(self.registry)

    def _load_acls(self) -> Any:
        """The ACL store with --authorizer (else None: the ACL APIs answer SECURITY_DISABLED)."""
        from .security.acls import AclApis, AclStore
        from .groups.streams.topology_descriptions import TopologyDescriptionApis
        from .security.delegation_tokens import DelegationTokenApis

        store = None
        if self.config.authorizer:
            try:
                store = AclStore(self.config.data_dir)
            except StoreError as e:
                raise StartupError(str(e)) from None
        AclApis(store).register(self.registry)
        DelegationTokenApis().register(self.registry)  # (refused, as Kafka without tokens: see there)
        TopologyDescriptionApis().register(self.registry)  # (refused, as Kafka without the plugin)
        return store

    def _load_credentials(self) -> None:
        from .security.credentials import CredentialStore

        try:
            self.credentials = CredentialStore(self.config.data_dir, self._sasl_users)
        except StoreError as e:  # (OSError: the caller's one line)
            raise StartupError(str(e)) from None
        self.credentials.register(self.registry)

    async def _start_metrics(self, sock: _Sockets) -> None:
        from .metrics.endpoint import Metrics  # late: prometheus-client only when asked for

        from .control import TestControl

        control = (
            TestControl(self.faults, self.tracking, self.api_version_limits, lambda: self.cluster_control)
            if self.config.enable_test_control
            else None
        )
        self.metrics = Metrics(lambda: bool(self.ready_since), control)
        try:
            self.config.metrics_port = await self.metrics.start(self.config.host, self.config.metrics_port)
        except OSError as e:
            sock.close()
            raise StartupError(
                f"cannot serve metrics on {self.config.host}:{self.config.metrics_port}: {e.strerror or e}"
            ) from e
        log.info("metrics on http://%s:%d/metrics", self.config.host, self.config.metrics_port)

    def _bind(self, host: str, port: int) -> socket.socket:
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError as e:
            raise StartupError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError as e:
            sock.close()
            raise StartupError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
        return sock

    async def stop(self, grace_seconds: float = 5.0) -> None:
        """Stop accepting and reading, let in-flight requests finish (long polls end at
        once), close components (fsync), close. Clients that keep sending would otherwise
        keep a request in flight for the whole grace period."""
        for servers in self._servers.values():
            for server in servers:
                server.close()
        if self._idle_sweeper is not None:
            self._idle_sweeper.cancel()
        for conn in self.connections:
            conn.drain()
        for component in self.components:
            drain = getattr(component, "drain", None)
            if drain is not None:
                drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_seconds
        while any(conn.pending for conn in self.connections) and loop.time() < deadline:
            await asyncio.sleep(0.005)
        for conn in self.connections:
            for ctx in conn.pending:
                if type(ctx) is RequestContext and ctx.waiting is not LATER:
                    ctx.waiting.cancel()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for component in reversed(self.components):
            close = getattr(component, "close", None)
            if close is not None:
                await close()
        for servers in self._servers.values():
            for server in servers:
                await server.wait_closed()
        if self.metrics is not None:
            await self.metrics.close()
        self._release_data_dir()
        log.info("stopped")

    def _release_data_dir(self) -> None:
        if self._data_dir_lock is not None:
            unlock_data_dir(self._data_dir_lock)
            self._data_dir_lock = None

    # connection limits ----------------------------------------------------------------

    def refuse_connection(self, conn: Connection, transport: asyncio.BaseTransport) -> bool | float:
        """A connection past max.connections, or one that would leave fewer than
        FD_RESERVE file descriptors for log segments (libuv itself would drop connections
        silently at the limit), is closed at once and said (rate-limited). One over its
        address's connection_creation_rate: the seconds to hold it unread before closing it."""
        limit = self.config.max_connections
        if len(self.connections) >= limit:
            self._warn_refused(
                "refused a connection from %s: %d connections open (max.connections=%d)",
                conn.peer,
                len(self.connections),
                limit,
            )
            return True
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.fileno() >= fd_soft_limit() - FD_RESERVE:
            self._warn_refused(
                "refused a connection from %s: %d connections open and the open-file "
                "limit (%d, ulimit -n) nearly reached",
                conn.peer,
                len(self.connections),
                fd_soft_limit(),
            )
            return True
        if self.connection_quota is not None:
            throttle = self.connection_quota.throttle_time(conn.client_host, int(time.time() * 1000))
            if throttle:
                return throttle / 1000
        return False

    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: connections that neither sent nor were answered for that
        long are closed (Kafka's idle-connection reaper), so abandoned or slowloris
        connections do not accumulate."""
        idle_s = self.config.connections_max_idle_ms / 1000
        period = min(max(idle_s / 4, 0.01), 30.0)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for conn in list(self.connections):
                since = conn.idle_since()
                if since is not None and now - since > idle_s and not conn.closed:
                    log.info(
                        "%s: closing connection idle for more than %d ms (connections.max.idle.ms)",
                        conn.peer,
                        self.config.connections_max_idle_ms,
                    )
                    conn.closed = True
                    if conn.transport is not None:
                        conn.transport.close()

    # dispatch -------------------------------------------------------------------------

    def _checked(self, ctx: RequestContext, body: Any, handler: Callable[..., Any]) -> Any:
        """The request handled as dispatch handles it past the request-path hook: the ACL
        gate first (the fault rules' way to handle a request they delay or stall)."""
        gate = self.acl_gate
        result = None if gate is None else gate.check(ctx, body, handler)
        return handler(ctx, body) if result is None else result

    def _topic_name(self, topic_id: Any) -> str | None:
        """A topic id's name (None: unknown, or the topics are not loaded yet)."""
        info = None if self.topics is None else self.topics.by_id.get(topic_id)
        return None if info is None else str(info.name)

    def _choose_intercept(self) -> None:
        """The request-path hook: the request log while it tracks (it hands each request on
        to the fault rules), else the fault rules while any exists, else None (dispatch then
        checks that one attribute)."""
        tracking, faults = self.tracking, self.faults
        self.intercept = tracking if tracking.active else faults if faults.rules else None
        if self.channel is not None:
            self.channel.intercept = self.intercept

    # ApiVersions ----------------------------------------------------------------------

    def api_versions(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.version
        if version >= 3 and not (
            _SOFTWARE.fullmatch(request.client_software_name or "")
            and _SOFTWARE.fullmatch(request.client_software_version or "")
        ):
            return ctx.response(error_code=ErrorCode.invalid_request, api_keys=(), throttle_time=0)
        if version >= 5:
            # KIP-1242: a client names the cluster and node it meant to reach, both or neither
            # (ApiVersionsRequest.isValid); the wrong ones get REBOOTSTRAP_REQUIRED, so that the
            # client looks its brokers up again (KafkaApis.clusterIdOrNodeIdIsInvalid).
            if (request.cluster_id is None) != (request.node_id == -1):
                return ctx.response(error_code=ErrorCode.invalid_request, api_keys=(), throttle_time=0)
            if request.cluster_id is not None and (
                request.cluster_id != self.config.cluster_id or request.node_id != ctx.connection.listener.node_id
            ):
                return ctx.response(error_code=ErrorCode.rebootstrap_required, api_keys=(), throttle_time=0)
        body = self.registry.answers.get(version)
        if body is None:
            body = Raw(encode_body(ctx.codec, self._api_versions_response(ctx)))
            self.registry.answers[version] = body
        return body

    def _api_versions_response(self, ctx: RequestContext, error: ErrorCode = ErrorCode.none) -> Any:
        keys = tuple(
            ctx.nested(
                "ApiVersion",
                api_key=a.key,
                min_version=self.registry.advertised_min_version(a),
                max_version=a.max_version,
            )
            for a in sorted(self.registry.apis.values(), key=lambda a: a.key)
        )
        features = self.features
        if features is None or ctx.version < 3:  # (features are tagged fields: v3+)
            return ctx.response(error_code=error, api_keys=keys, throttle_time=0)
        # As Kafka's ApiVersionsResponse: before v4, a supported range starting at 0 is left out
        # (older clients refuse it, KAFKA-17011); the finalized levels and their epoch always.
        supported = tuple(
            ctx.nested("SupportedFeatureKey", name=name, min_version=low, max_version=high)
            for name, low, high in features.supported(without_level_0=ctx.version < 4)
        )
        finalized = tuple(
            ctx.nested("FinalizedFeatureKey", name=name, max_version_level=level, min_version_level=level)
            for name, level in features.finalized()
        )
        return ctx.response(
            error_code=error,
            api_keys=keys,
            throttle_time=0,
            supported_features=supported,
            finalized_features_epoch=features.epoch,
            finalized_features=finalized,
        )

    def _unsupported_api_versions(self, frame: bytes | bytearray) -> bytes:
        """A version of ApiVersions we do not serve (or a test narrowed away): answer v0 so
        the client can downgrade.

        As Kafka does (KIP-511), the v0 body carries UNSUPPORTED_VERSION and our
        ApiVersions range, and the response header is v0.
        """
        header, _ = read_request_header(frame)
        c = codec(API_VERSIONS_KEY, 0)
        api = self.registry.apis[API_VERSIONS_KEY]
        from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
        from kio.static.primitive import i16

        body = ApiVersionsResponse(
            error_code=ErrorCode.unsupported_version,
            api_keys=(
                ApiVersion(api_key=i16(api.key), min_version=i16(api.min_version), max_version=i16(api.max_version)),
            ),
        )
        return encode_response(c, header.correlation_id, body)


def _close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


class _Sockets:
    """The listening sockets, closed together when startup fails."""

    def __init__(self, socks: list[socket.socket]) -> None:
        self.socks = socks

    def close(self) -> None:
        _close_all(self.socks)
