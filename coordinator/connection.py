"""One client connection: frames in, handlers run, responses out in request order.

Clients pipeline requests, and Kafka answers them in order. Handlers that wait
(JoinGroup, Fetch long-poll, durable commits) run as tasks while later requests are
already being processed; a response is written only when every earlier one on this
connection has been written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, Callable, cast

from protocol.framing import Frame, FrameDecoder, FrameError
from protocol.messages import API_VERSIONS_KEY, UnknownApi, decode_body, encode_response, read_request_header
from protocol.wire import MalformedRequest, skip_tagged_fields

from . import server_log
from .apis import LATER, UNANSWERED, BuiltWhenSent, CloseConnection, Registry, RequestContext, is_coroutine, new_context
from .broker.quotas import TimedCoroutine
from .config import Config
from .listeners import Listener
from .log_limit import RateLimitedLog
from .security.sasl import BEFORE_AUTHENTICATION, SaslSession

log = server_log.get(__name__)

MAX_IN_FLIGHT = 512  # requests per connection before we stop reading (back-pressure)

_NO_RESPONSE = object()


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Take the outcome of a request whose connection is gone (else asyncio logs
    "exception was never retrieved" with a traceback for each)."""
    if not fut.cancelled():
        fut.exception()


class RequestChannel:
    """What a connection needs of the process that accepted it (Kafka's SocketServer and its
    request channel), built once by the server before it listens: the limits, the set of open
    connections, the API registry, and the request path every frame takes from the socket to
    its handler and back (here, in a compiled module: each request pays it)."""

    def __init__(
        self,
        config: Config,
        connections: set[Connection],
        registry: Registry,
        refuse: Callable[[Connection, asyncio.BaseTransport], bool | float],
        logger: logging.Logger,
        *,
        sasl: Any,
        tracking: Any,
        intercept: Any,
        acl_gate: Any,
        request_quota: Any,
        metrics: Any,
        unsupported_api_versions: Callable[[Frame], bytes],
    ) -> None:
        self.config = config
        self.connections = connections
        self.registry = registry
        self.routes = registry.routes  # (the registry clears it, never replaces it)
        # a new connection over a limit: True (close it now), or the seconds to hold it
        # unread before closing it (its address's connection_creation_rate)
        self.refuse = refuse
        self.sasl = sasl  # coordinator.security.sasl.SaslApis: a bare token after SaslHandshake v0
        self.tracking = tracking  # coordinator.tracking.RequestLog: unsupported requests, while tracking
        # The request-path hook: the request log while it tracks, else the fault rules while any
        # exists, else None (the server sets it when that changes: one attribute checked per request)
        self.intercept = intercept
        self.acl_gate = acl_gate  # coordinator.security.acl_gate.AclGate with --authorizer, else None
        self.request_quota = request_quota  # coordinator.broker.quotas.RequestQuota: request_percentage
        # coordinator.metrics.requests.RequestMetrics with --metrics-port (each request timed from
        # its dispatch to its answer's encoding), else None: a server without metrics times nothing
        self.metrics = metrics
        self.unsupported_api_versions = unsupported_api_versions  # a frame of ApiVersions we do not serve
        # What clients can make us log is rate-limited (a hostile client must not flood the log).
        self.warn_closing = RateLimitedLog(logger, logging.WARNING, burst=50)
        self._log_failure = RateLimitedLog(logger, logging.ERROR)

    def log_failure(self, msg: str, *args: Any, exc_info: Any = True) -> None:
        """A request that broke a handler: a bug to fix, logged with its traceback, but
        rate-limited so that a client repeating it cannot flood the log."""
        self._log_failure(msg, *args, exc_info=exc_info)

    def cancel_on_close(self, ctx: RequestContext) -> bool:
        """Whether the request only waits (a long poll): cancelled when its client goes."""
        api = self.registry.apis.get(ctx.header.api_key)
        return api is not None and api.cancel_on_close

    def dispatch(self, conn: Connection, frame: Frame) -> bytes | RequestContext | None:
        """Handle one request frame: the response bytes, None (no response), or the
        request's context whose `waiting` future (a handler's Future, or the Task running
        its coroutine) gives the response body later."""
        started = 0.0 if self.metrics is None else time.perf_counter()
        sasl = conn.sasl
        if sasl is not None and sasl.raw:  # a bare SASL token after SaslHandshake v0
            return cast(bytes, self.sasl.raw_token(conn, frame))
        # The header up to the client id, which every version has (MalformedRequest: too short,
        # a bad client id); a flexible version's tagged fields are skipped once it is known.
        header, pos = read_request_header(frame)
        api_key, version = header[0], header[1]
        route = self.routes.get((api_key, version)) or self.registry.route(api_key, version)
        if route is None:
            if self.tracking.active:
                self.tracking.record_unsupported(conn, frame)
            if api_key == API_VERSIONS_KEY:
                return self.unsupported_api_versions(frame)
            raise CloseConnection(f"unsupported api key {api_key} version {version}")
        api, c = route
        if sasl is not None and sasl.user is None and api_key not in BEFORE_AUTHENTICATION:
            raise CloseConnection(f"api key {api_key} before SASL authentication")  # as Kafka
        if c.flexible_request:
            # (no tagged fields: what clients send)
            pos = pos + 1 if pos < len(frame) and frame[pos] == 0 else skip_tagged_fields(frame, pos)
        body = decode_body(c, frame, pos)
        ctx = new_context(header, c, conn.client_host, conn, len(frame))
        if started:
            ctx.started = started
        quota = self.request_quota  # request_percentage: the handler's time on the loop counts
        # (quota.enabled() without its call: most brokers set no quota)
        measured = quota is not None and quota.key in quota.store.keys and api_key not in BEFORE_AUTHENTICATION
        if measured:
            ctx.loop_time = 0.0
            started = time.perf_counter()
        hook = self.intercept  # None unless requests are tracked or a fault rule exists
        result = None if hook is None else hook.intercept(ctx, body, api.handler)
        if result is None:
            gate = self.acl_gate
            result = None if gate is None else gate.check(ctx, body, api.handler)
        if result is None:
            result = api.handler(ctx, body)
        if measured:
            ctx.loop_time += time.perf_counter() - started
            if is_coroutine(result):
                result = TimedCoroutine(result, ctx)
        if result is LATER:
            if ctx.body is not UNANSWERED:  # answered before the handler returned
                return self.encode(ctx, ctx.body)
        elif is_coroutine(result):
            result = asyncio.get_running_loop().create_task(result)
        elif not isinstance(result, asyncio.Future):
            return self.encode(ctx, result)
        # Answered later: the connection keeps its place in the response order.
        ctx.waiting = result
        return ctx

    def encode(self, ctx: RequestContext, result: Any) -> bytes | None:
        """The response frame of a request's answer (None: it gets none)."""
        metrics = self.metrics
        if metrics is not None:
            metrics.record(ctx, result, time.perf_counter() - ctx.started)
        if type(result) is BuiltWhenSent:
            result = result.build()
        if ctx.loop_time >= 0 and self.request_quota is not None:
            result = self.request_quota.throttle_answer(ctx, result)
        if result is None:
            return None
        return encode_response(ctx.codec, ctx.header.correlation_id, result)


class Connection(asyncio.Protocol):
    def __init__(self, channel: RequestChannel, listener: Listener) -> None:
        self.channel = channel
        # the port it came in by: its protocol, and the address clients are told (Metadata)
        self.listener = listener
        self.decoder = FrameDecoder(channel.config.socket_request_max_bytes)
        self.budget = channel.config.connection_max_queued_bytes  # of answers queued unsent
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = ""
        # Responses not yet written, oldest first: bytes, _NO_RESPONSE, or the context of a
        # request still being handled (its `waiting` future gives the response body).
        self.pending: deque[Any] = deque()
        # Frames read but not handled yet: a chunk read can hold hundreds of requests, and
        # handling them all at once would queue every answer past the budget.
        self.backlog: deque[Any] = deque()  # frames: bytes, or a large frame's bytearray
        self.reading_paused = False
        self.writing_paused = False  # the transport holds more than the budget of unsent answers
        self.draining = False  # the server is stopping: answer what was read, read no more
        self.closed = False
        self.eof = False
        self.last_active = time.monotonic()  # for connections.max.idle.ms
        # SASL: this connection's authentication (None when the port needs none)
        self.sasl = SaslSession() if self.listener.sasl else None
        self._handling = False
        # A client over its quota: no request of it is read or handled until then
        # (monotonic time; Kafka's channel muted for the throttle time, KIP-219)
        self.throttled_until = 0.0

    # asyncio.Protocol callbacks -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # asyncio types the argument as BaseTransport; a stream server's is a Transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.client_host = str(peer[0])
        self.peer = f"{peer[0]}:{peer[1]}"
        refused = self.channel.refuse(self, transport)
        if refused:
            self.closed = True
            if refused is True:
                transport.close()
            else:  # Kafka's Acceptor holds a connection over its rate quota unread, then closes it
                transport.pause_reading()  # type: ignore[attr-defined]  # a stream server's transport is a Transport
                asyncio.get_running_loop().call_later(refused, transport.close)
            return
        # The budget of queued answers: past it the transport calls pause_writing, and
        # this connection builds no more answers and reads no more requests.
        transport.set_write_buffer_limits(high=self.budget)  # type: ignore[attr-defined]  # set_write_buffer_limits is on Transport, which a stream server's transport is
        self.channel.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.channel.connections.discard(self)
        self.cancel_abandoned_requests()
        self.pending.clear()
        self.backlog.clear()

    def cancel_abandoned_requests(self, detach: bool = True) -> None:
        """The client closed: requests that only wait (a long-polling Fetch) are cancelled
        rather than held until their timeout; the others (a group's join, a durable commit)
        finish, as in Kafka. `detach`: the connection is gone, their answers go nowhere."""
        cancelled = 0
        for item in self.pending:
            if type(item) is RequestContext and item.waiting is not LATER:
                if detach:
                    item.waiting.remove_done_callback(self._on_done)
                    item.waiting.add_done_callback(_retrieve)  # its error has nobody to go to
                if self.channel.cancel_on_close(item) and item.waiting.cancel():
                    cancelled += 1
        if cancelled:
            log.debug("%s: connection closed, %d waiting requests cancelled", self.peer, cancelled)

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        try:
            self.backlog.extend(self.decoder.feed(data))  # (no local list: see handle_backlog)
        except FrameError as e:
            self.abort(str(e))
            return
        if self.backlog:
            self.handle_backlog()

    def handle_backlog(self) -> None:
        """Handle the frames read, in order, while the budget of queued answers and the
        in-flight limit allow; the rest wait (and reading pauses) until answers leave."""
        if self._handling:  # (an answer flushed from inside a handler)
            return
        self._handling = True
        backlog = self.backlog
        # Responses that are ready at once leave in one write per chunk read, not one
        # send() each: pipelining clients put dozens of requests in a chunk.
        ready: list[bytes] = []
        ready_bytes = 0
        budget = self.budget
        pending, popleft, channel = self.pending, backlog.popleft, self.channel  # (per frame: locals)
        try:
            while backlog:
                if self.closed:
                    return
                if self.writing_paused or len(pending) >= MAX_IN_FLIGHT or self.throttled_until:
                    break
                try:
                    # (no local keeps the frame: once decoded it is freed before the handler's task runs)
                    result = channel.dispatch(self, popleft())
                except (CloseConnection, MalformedRequest, UnknownApi) as e:
                    self._write_ready(ready)
                    self.abort(str(e))
                    return
                except Exception:
                    self.channel.log_failure("%s: handler failed; closing the connection", self.peer)
                    self._write_ready(ready)
                    self.abort("internal error")
                    return
                if pending or type(result) is RequestContext:
                    if ready:
                        self._write_ready(ready)  # everything earlier goes out before a queued response
                        ready_bytes = 0
                    self._queue(result)
                elif result is not None:
                    ready.append(result)  # type: ignore[arg-type]  # bytes: the branch above takes a RequestContext
                    ready_bytes += len(result)  # type: ignore[arg-type]  # (the same)
                    if ready_bytes >= budget:
                        self._write_ready(ready)  # (may pause writing: the loop then stops)
                        ready_bytes = 0
            if ready and not self.closed:  # (_write_ready, inline)
                self.transport.write(ready[0] if len(ready) == 1 else b"".join(ready))  # type: ignore[union-attr]  # set in connection_made, before any data arrives
        finally:
            self._handling = False
        if self.eof:
            self.cancel_abandoned_requests(detach=False)  # (long polls read after the EOF)
        if self.eof and not self.pending and not backlog and not self.closed:
            self.transport.close()  # type: ignore[union-attr]  # set in connection_made, before any data arrives
            return
        # Reading pauses while frames wait, and resumes once they are handled; the other
        # reasons to pause (writing paused, in-flight limit, throttling, draining) update
        # it where they arise.
        if backlog or self.reading_paused:
            self._update_reading()

    def _write_ready(self, ready: list[bytes]) -> None:
        if ready and not self.closed:
            self.transport.write(ready[0] if len(ready) == 1 else b"".join(ready))  # type: ignore[union-attr]  # set in connection_made, before any data arrives
        ready.clear()

    def eof_received(self) -> bool | None:
        if self.decoder.buffered:
            log.info("%s: connection closed mid-frame (%d bytes unread)", self.peer, self.decoder.buffered)
        # Keep our half open until the in-flight responses have been written (Kafka closes at
        # once; a client that half-closes still gets its answers here), except that requests
        # that only wait, long polls, end now unanswered rather than hold it up to max_wait.
        if self.pending or self.backlog:
            self.eof = True
            self.cancel_abandoned_requests(detach=False)
            return True
        return None

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.flush_answers()  # (then handles the backlog and resumes reading)

    # ordering -------------------------------------------------------------------------

    def _queue(self, result: Any) -> None:
        if type(result) is RequestContext:
            if result.waiting is not LATER:
                result.waiting.add_done_callback(self._on_done)
            self.pending.append(result)
            if len(self.pending) >= MAX_IN_FLIGHT:  # (only a longer queue can pause reading)
                self._update_reading()
        elif self.pending:
            self.pending.append(_NO_RESPONSE if result is None else result)
        elif result is not None:
            self.transport.write(result)  # type: ignore[union-attr]  # set in connection_made, before any data arrives

    def _on_done(self, _: asyncio.Future[Any]) -> None:
        self.flush_answers()

    def flush_answers(self) -> None:
        """Write the responses at the head of the queue that are ready, in order."""
        if self.closed:
            return
        pending = self.pending
        transport = self.transport
        wrote = False
        while pending:
            if self.writing_paused:
                break  # the budget is spent: no answer is built until the client reads
            head = pending[0]
            if type(head) is RequestContext:
                waiting = head.waiting
                if waiting is LATER:
                    body = head.body
                    if body is UNANSWERED:
                        break
                else:
                    if not waiting.done():
                        break
                    if waiting.cancelled():
                        if self.eof:  # a long poll the client gave up (see eof_received): no answer
                            pending.popleft()
                            continue
                        self.abort("request cancelled (server shutting down)")
                        return
                    exc = waiting.exception()
                    if exc is not None:
                        if isinstance(exc, (CloseConnection, MalformedRequest)):
                            self.abort(str(exc))
                        else:
                            self.channel.log_failure(
                                "%s: handler failed; closing the connection", self.peer, exc_info=exc
                            )
                            self.abort("internal error")
                        return
                    body = waiting.result()
                try:
                    head = self.channel.encode(head, body)
                except Exception:
                    self.channel.log_failure("%s: encoding a response failed; closing the connection", self.peer)
                    self.abort("internal error")
                    return
            pending.popleft()
            if head is not _NO_RESPONSE and head is not None and not self.closed:
                transport.write(head)  # type: ignore[union-attr]  # set in connection_made, before any data arrives
                wrote = True
        if wrote:
            self.last_active = time.monotonic()
        if self.backlog:
            self.handle_backlog()
        elif self.eof and not pending:
            transport.close()  # type: ignore[union-attr]  # set in connection_made, before any data arrives
        elif self.reading_paused:  # (only a shorter queue can resume it)
            self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed or self.eof:  # (nothing more to read after EOF)
            return
        should_pause = (
            self.writing_paused
            or self.draining
            or len(self.pending) >= MAX_IN_FLIGHT
            or bool(self.backlog)
            or bool(self.throttled_until)
        )
        if should_pause is self.reading_paused:  # the usual case: nothing changes
            return
        if should_pause and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()

    def throttle(self, ms: int) -> None:
        """Mute the channel for `ms` (Kafka's RequestChannel.startThrottling for a client over
        its quota): answers already due still go out; nothing more is read until it ends."""
        if ms <= 0 or self.closed:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        if until <= self.throttled_until:
            return
        self.throttled_until = until
        self._update_reading()
        loop.call_at(until, self._end_throttling, until)

    def _end_throttling(self, until: float) -> None:
        if self.throttled_until != until:  # a longer throttle came after this one
            return
        self.throttled_until = 0.0
        if self.backlog:
            self.handle_backlog()
        else:
            self._update_reading()

    def drain(self) -> None:
        """Read no more requests; the ones read are still answered."""
        self.draining = True
        self._update_reading()

    def idle_since(self) -> float | None:
        """When this connection last read a request or wrote an answer; None while requests
        are in the server's hands (a long poll, a join). A client that sends half a frame
        (slowloris) or does not read its answers (writing paused) is idle."""
        if (self.pending or self.backlog) and not self.writing_paused:
            return None
        return self.last_active

    def abort(self, reason: str) -> None:
        """Close the connection the way Kafka does for requests it cannot serve."""
        if self.closed:
            return
        self.channel.warn_closing("%s: closing connection: %s", self.peer, reason)
        self.closed = True
        if self.transport is not None:
            self.transport.close()
