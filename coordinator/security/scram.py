"""SCRAM-SHA-256 and SCRAM-SHA-512, the server's side (RFC 5802, RFC 7677; Kafka's
ScramSaslServer): no channel binding, Kafka's 4096 iterations by default.

A credential keeps only the salt, the iteration count and the two keys derived from the
password (StoredKey, ServerKey): the password itself is not kept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
ITERATIONS = 4096  # Kafka's default (and minimum) for SCRAM credentials


class AuthenticationFailed(Exception):
    """Said to the client as SASL_AUTHENTICATION_FAILED (with this message)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    hash_name: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def derive(password: str, hash_name: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    return from_salted(hash_name, salt, iterations, hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations))


def from_salted(hash_name: str, salt: bytes, iterations: int, salted: bytes) -> ScramCredential:
    """The credential of a salted password (RFC 5802's SaltedPassword, as AlterUserScramCredentials sends it)."""
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    return ScramCredential(
        hash_name,
        salt,
        iterations,
        hashlib.new(hash_name, client_key).digest(),
        hmac.digest(salted, b"Server Key", hash_name),
    )


def matches(credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one the credential was derived from (for SASL PLAIN)."""
    again = derive(password, credential.hash_name, credential.salt, credential.iterations)
    return hmac.compare_digest(again.stored_key, credential.stored_key)


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise AuthenticationFailed(f"malformed SCRAM message attribute {part[:20]!r}")
        out.setdefault(key, value)
    return out


def _username(saslname: str) -> str:
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationFailed("malformed SCRAM user name")
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """One authentication: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup: Callable[[str], dict[str, ScramCredential] | None]) -> None:
        self.hash_name = HASHES[mechanism]
        self.lookup = lookup  # user name -> {mechanism: ScramCredential} or None
        self.mechanism = mechanism
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._first_bare = self._server_first = self._nonce = ""

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """The server's next message and whether authentication is complete."""
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM message is not UTF-8") from None
        if self._credential is None:
            return self._first(message), False
        return self._final(message), True

    def _first(self, message: str) -> bytes:
        gs2, sep, bare = message.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise AuthenticationFailed(
                "SCRAM channel binding is not supported"
                if gs2.startswith("p")
                else "malformed SCRAM client-first message"
            )
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise AuthenticationFailed("malformed SCRAM client-first message")
        user = _username(attrs["n"])
        if authzid and _username(authzid.removeprefix("a=")) != user:
            raise AuthenticationFailed("authorization id differs from the user name")
        credential = (self.lookup(user) or {}).get(self.mechanism)
        if credential is None:
            raise AuthenticationFailed(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism}"
            )
        self.user, self._credential = user, credential
        self._first_bare = bare
        self._nonce = attrs["r"] + base64.b64encode(os.urandom(24)).decode()
        self._server_first = f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        without_proof, sep, proof_attr = message.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("malformed SCRAM client-final message")
        attrs = _attributes(without_proof)
        if attrs.get("r") != self._nonce:
            raise AuthenticationFailed("SCRAM nonce mismatch")
        if attrs.get("c") not in ("biws", "eSws"):  # base64 of "n,," / "y,,": no channel binding
            raise AuthenticationFailed("SCRAM channel binding is not supported")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise AuthenticationFailed("malformed SCRAM client proof") from None
        signature = hmac.digest(credential.stored_key, auth_message, self.hash_name)
        if len(proof) != len(signature):
            raise AuthenticationFailed("malformed SCRAM client proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), credential.stored_key):
            raise AuthenticationFailed(
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism}"
            )
        server_signature = hmac.digest(credential.server_key, auth_message, self.hash_name)
        return b"v=" + base64.b64encode(server_signature)
