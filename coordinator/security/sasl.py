"""SASL authentication of a connection (Kafka's SaslServerAuthenticator): SaslHandshake v1
picks the mechanism, SaslAuthenticate v0-2 carries its tokens. Until it succeeds a
connection may send only ApiVersions, SaslHandshake and SaslAuthenticate; anything else
closes it, as Kafka does. A failed authentication is answered SASL_AUTHENTICATION_FAILED
and the connection is closed.

After SaslHandshake v0 (old clients; Kafka 4 removed it) the tokens come as bare
size-prefixed frames instead, answered the same way, and a failure just closes the
connection, as Kafka 3 did.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, cast

from kio.schema.errors import ErrorCode as E

from .. import server_log
from ..apis import CloseConnection
from .scram import HASHES, AuthenticationFailed, ScramCredential, ScramExchange, derive, matches

log = server_log.get(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
BEFORE_AUTHENTICATION = frozenset((API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))
MECHANISMS = ("PLAIN", *HASHES)

_NOBODY = derive("", "sha512", b"\0" * 32)
Users = Callable[[str], "dict[str, ScramCredential] | None"]


class PlainExchange:
    """SASL PLAIN (RFC 4616): one message, authzid NUL user NUL password."""

    def __init__(self, lookup: Users) -> None:
        self.lookup = lookup
        self.user: str | None = None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("malformed SASL PLAIN message")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("SASL PLAIN message is not UTF-8") from None
        if authzid and authzid != user:
            raise AuthenticationFailed("authorization id differs from the user name")
        credential = (self.lookup(user) or {}).get("SCRAM-SHA-512")
        if not matches(credential or _NOBODY, password) or credential is None:
            # (an unknown user costs the same derivation: no telling users apart by time)
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.user = user
        return b"", True


class SaslSession:
    """One connection's authentication state."""

    __slots__ = ("mechanism", "exchange", "user", "raw")

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.exchange: Any = None
        self.user: str | None = None  # set once authenticated
        self.raw = False  # SaslHandshake v0: the next frames are bare tokens until authenticated

    @property
    def authenticated(self) -> bool:
        return self.user is not None


class SaslApis:
    def __init__(self, mechanisms: list[str], users: Users) -> None:
        self.mechanisms = mechanisms
        self.users = users

    def register(self, registry: Any) -> None:
        registry.add(SASL_HANDSHAKE, range(0, 2), self.handshake)
        registry.add(SASL_AUTHENTICATE, range(0, 3), self.authenticate)

    def handshake(self, ctx: Any, req: Any) -> Any:
        session: SaslSession = ctx.connection.sasl
        if session is None or session.authenticated:
            # Kafka's KafkaApis answers it (a listener without SASL, or a connection already
            # authenticated): the error alone, no mechanisms.
            return ctx.response(error_code=E.illegal_sasl_state, mechanisms=())
        if session.mechanism is not None:
            error = E.illegal_sasl_state
        elif req.mechanism not in self.mechanisms:
            error = E.unsupported_sasl_mechanism
        else:
            error = E.none
            session.mechanism = req.mechanism
            session.exchange = (
                PlainExchange(self.users) if req.mechanism == "PLAIN" else ScramExchange(req.mechanism, self.users)
            )
            session.raw = ctx.version == 0
        return ctx.response(error_code=error, mechanisms=tuple(self.mechanisms))

    def raw_token(self, conn: Any, token: bytes) -> bytes:
        """One bare token after SaslHandshake v0: the framed answer, or CloseConnection."""
        session: SaslSession = conn.sasl
        try:
            answer, done = session.exchange.step(bytes(token))
        except AuthenticationFailed as e:
            raise CloseConnection(f"SASL authentication failed: {e}") from None
        if done:
            session.user, session.exchange, session.raw = session.exchange.user, None, False
            log.info("%s: authenticated as %s (%s, SaslHandshake v0)", conn.peer, session.user, session.mechanism)
        return cast(bytes, len(answer).to_bytes(4, "big") + answer)

    def authenticate(self, ctx: Any, req: Any) -> Any:
        conn = ctx.connection
        session: SaslSession = conn.sasl
        if session is None or session.authenticated:
            # As Kafka's KafkaApis, which only sees it there: answered, the connection kept.
            return ctx.response(
                error_code=E.illegal_sasl_state,
                error_message="SaslAuthenticate request received after successful authentication",
                auth_bytes=b"",
                session_lifetime=0,
            )
        if session.exchange is None:
            return self._fail(ctx, E.illegal_sasl_state, "SaslAuthenticate outside a SASL handshake")
        try:
            token, done = session.exchange.step(bytes(req.auth_bytes))
        except AuthenticationFailed as e:
            return self._fail(ctx, E.sasl_authentication_failed, str(e))
        if done:
            session.user = session.exchange.user
            session.exchange = None
            log.info("%s: authenticated as %s (%s)", conn.peer, session.user, session.mechanism)
        return ctx.response(error_code=E.none, error_message=None, auth_bytes=token, session_lifetime=0)

    @staticmethod
    def _fail(ctx: Any, error: E, message: str) -> Any:
        conn = ctx.connection
        # Answer, then close (the answer is written before the loop runs this).
        asyncio.get_running_loop().call_soon(conn.abort, f"SASL authentication failed: {message}")
        return ctx.response(error_code=error, error_message=message, auth_bytes=b"", session_lifetime=0)
