"""SASL users from a file of `user:password` lines (dev use, as the README says): each
password is turned into salted SCRAM credentials when the file is loaded and not kept."""

from __future__ import annotations

from pathlib import Path

from .scram import HASHES, ScramCredential, derive


class UsersFileError(ValueError):
    pass


def load_users(path: Path) -> dict[str, dict[str, ScramCredential]]:
    """user -> {SCRAM mechanism: credential}. Raises UsersFileError (one line, no password)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise UsersFileError(f"SASL users file {path}: {e.strerror or e}") from None
    users: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise UsersFileError(f"SASL users file {path} line {n}: expected user:password")
        users[user] = password
    if not users:
        raise UsersFileError(f"SASL users file {path}: no users")
    return credentials_of(users)


def credentials_of(passwords: dict[str, str]) -> dict[str, dict[str, ScramCredential]]:
    """user -> {SCRAM mechanism: credential} for user -> password."""
    return {
        user: {mechanism: derive(password, hash_name) for mechanism, hash_name in HASHES.items()}
        for user, password in passwords.items()
    }
