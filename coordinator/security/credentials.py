"""SCRAM credentials that admin clients manage (DescribeUserScramCredentials v0,
AlterUserScramCredentials v0, as Kafka's ScramControlManager): clients send the salted
password, the server keeps only the derived keys, in `scram-credentials.json` in the data
dir (written atomically). They overlay the --sasl-users file: an upsert replaces a
mechanism's credential, a deletion removes it even if the file defines it.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as E

from ..durable import JsonFile
from .scram import ScramCredential, from_salted

DESCRIBE, ALTER = 50, 51
FILE = "scram-credentials.json"
BY_CODE = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}  # Kafka's ScramMechanism
CODE_OF = {name: code for code, (name, _) in BY_CODE.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's ScramMechanism bounds


def _encode(c: ScramCredential | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "hash": c.hash_name,
        "salt": base64.b64encode(c.salt).decode(),
        "iterations": c.iterations,
        "stored_key": base64.b64encode(c.stored_key).decode(),
        "server_key": base64.b64encode(c.server_key).decode(),
    }


def _decode(d: dict[str, Any] | None) -> ScramCredential | None:
    if d is None:
        return None
    b = base64.b64decode
    return ScramCredential(d["hash"], b(d["salt"]), d["iterations"], b(d["stored_key"]), b(d["server_key"]))


class CredentialStore:
    def __init__(self, data_dir: Path, from_file: dict[str, dict[str, ScramCredential]] | None = None) -> None:
        self.file = JsonFile(Path(data_dir) / FILE)
        self.from_file = from_file or {}
        # user -> mechanism -> credential, or None: deleted (hides the users file's)
        self.changes: dict[str, dict[str, ScramCredential | None]] = self.file.load(
            {}, parse=lambda doc: {u: {m: _decode(c) for m, c in mechs.items()} for u, mechs in doc.items()}
        )

    def lookup(self, user: str) -> dict[str, ScramCredential] | None:
        merged = {**self.from_file.get(user, {}), **self.changes.get(user, {})}
        found = {m: c for m, c in merged.items() if c is not None}
        return found or None

    def users(self) -> list[str]:
        return sorted(u for u in {*self.from_file, *self.changes} if self.lookup(u))

    def register(self, registry: Any) -> None:
        registry.add(DESCRIBE, range(0, 1), self.describe)
        registry.add(ALTER, range(0, 1), self.alter)

    def describe(self, ctx: Any, req: Any) -> Any:
        names = [u.name for u in req.users] if req.users else self.users()
        if len(set(names)) != len(names):
            return ctx.response(
                throttle_time=0,
                error_code=E.duplicate_resource,
                results=(),
                error_message=("Cannot describe SCRAM credentials for the same user twice in a single request"),
            )
        results = []
        for name in names:
            found = self.lookup(name)
            infos = tuple(
                ctx.nested("CredentialInfo", mechanism=CODE_OF[m], iterations=c.iterations)
                for m, c in sorted((found or {}).items())
            )
            results.append(
                ctx.nested(
                    "DescribeUserScramCredentialsResult",
                    user=name,
                    credential_infos=infos,
                    error_code=E.none if found else E.resource_not_found,
                    error_message=None
                    if found
                    else f"Attempt to describe a user credential that does not exist: {name}",
                )
            )
        return ctx.response(throttle_time=0, error_code=E.none, error_message="", results=tuple(results))

    async def alter(self, ctx: Any, req: Any) -> Any:
        errors: dict[str, tuple[E, str]] = {}  # the first error per user
        seen: set[tuple[str, int]] = set()
        accepted: list[tuple[str, str, ScramCredential | None]] = []
        for kind, items in (("delete", req.deletions), ("upsert", req.upsertions)):
            for a in items:
                error = self._check(a, kind, seen)
                if error is not None:
                    errors.setdefault(a.name, error)
                    continue
                mechanism, hash_name = BY_CODE[a.mechanism]
                accepted.append(
                    (
                        a.name,
                        mechanism,
                        None
                        if kind == "delete"
                        else from_salted(hash_name, bytes(a.salt), a.iterations, bytes(a.salted_password)),
                    )
                )
        accepted = [a for a in accepted if a[0] not in errors]  # a user's alterations apply together or not at all
        if accepted:
            try:
                await self.file.update(lambda: self._with(accepted))
            except OSError as e:
                for name, _, _ in accepted:
                    errors.setdefault(name, (E.kafka_storage_error, f"cannot store the credentials: {e}"))
        users = list(dict.fromkeys([a.name for a in req.deletions] + [a.name for a in req.upsertions]))
        return ctx.response(
            throttle_time=0,
            results=tuple(
                ctx.nested(
                    "AlterUserScramCredentialsResult",
                    user=u,
                    error_code=errors.get(u, (E.none, None))[0],
                    error_message=errors.get(u, (E.none, None))[1],
                )
                for u in users
            ),
        )

    def _with(self, accepted: list[tuple[str, str, ScramCredential | None]]) -> tuple[Any, Any]:
        """(the document with these alterations, the function that makes them take effect)."""
        changes = {u: dict(mechs) for u, mechs in self.changes.items()}
        for name, mechanism, credential in accepted:
            changes.setdefault(name, {})[mechanism] = credential

        def install() -> None:
            self.changes = changes

        return {u: {m: _encode(c) for m, c in mechs.items()} for u, mechs in changes.items()}, install

    def _check(self, a: Any, kind: str, seen: set[tuple[str, int]]) -> tuple[E, str] | None:
        if not a.name:
            return E.unacceptable_credential, "Username must not be empty"
        if a.mechanism not in BY_CODE:
            return E.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
        if (a.name, a.mechanism) in seen:
            return E.duplicate_resource, "A user credential cannot be altered twice in the same request"
        seen.add((a.name, a.mechanism))
        if kind == "delete":
            if BY_CODE[a.mechanism][0] not in (self.lookup(a.name) or {}):
                return E.resource_not_found, "Attempt to delete a user credential that does not exist"
            return None
        if a.iterations < MIN_ITERATIONS:
            return E.unacceptable_credential, "Too few iterations"
        if a.iterations > MAX_ITERATIONS:
            return E.unacceptable_credential, "Too many iterations"
        return None
