"""A small JSON document in the data dir, replaced atomically and durably: the stores that
are not logs (topics, broker configs, ACLs, SCRAM credentials, producer id blocks, client
quotas, group configs).

Each write is the sequence Kafka's `Utils.atomicMoveWithFallback` callers use for their
checkpoint files: write `<name>.tmp`, fsync it, rename it over `<name>`, fsync the
directory (without that last step the rename itself may be lost in a crash, and an old
document come back: for producer id blocks, ids handed out again). A crash at any point
leaves the old document or the new one, never neither; a `.tmp` left by a crash is
ignored and removed at the next load.

The file work runs in a worker thread, never on the event loop; a store awaits it before
its change takes effect and before its answer leaves. Writes of one file run one at a
time in call order, so a later document never lands under an earlier one, and a
read-modify-write (update) sees every change before it.

For the crash tests, `COORDINATOR_TEST_CRASH_AT=<file name>:<step>:<n>` makes the process
SIGKILL itself at that step (one of STEPS) of that file's n-th write. Unset, it costs one
comparison per step.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .log.segment import fsync_dir

TMP_SUFFIX = ".tmp"
STEPS = ("partial", "written", "synced", "renamed", "dir-synced")
_CRASH_AT = os.environ.get("COORDINATOR_TEST_CRASH_AT", "")
_writes: dict[str, int] = {}  # file name -> writes started (counted only with the hook set)


def _reached(name: str, step: str) -> None:
    if _CRASH_AT:
        if step == STEPS[0]:
            _writes[name] = _writes.get(name, 0) + 1
        if _CRASH_AT == f"{name}:{step}:{_writes[name]}":
            os.kill(os.getpid(), signal.SIGKILL)


def replace_durably(path: Path, data: bytes) -> None:
    """Write data as `path`, atomically and durably (blocking: call it off the loop)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        half = len(data) // 2
        os.write(fd, data[:half])
        _reached(path.name, "partial")
        view = memoryview(data)[half:]
        while view:
            view = view[os.write(fd, view) :]
        _reached(path.name, "written")
        os.fsync(fd)
    finally:
        os.close(fd)
    _reached(path.name, "synced")
    os.replace(tmp, path)
    _reached(path.name, "renamed")
    fsync_dir(path.parent)
    _reached(path.name, "dir-synced")


class StoreError(ValueError):
    """A store's document cannot be read (one line for the operator)."""


class JsonFile:
    """One JSON document: load() at startup, `await save(doc)` for each change."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock: asyncio.Lock | None = None  # made on first save, inside the running loop

    def load(self, default: Any = None, parse: Callable[[Any], Any] | None = None) -> Any:
        """The document (through parse, which reads it into the store's shape), or default
        if there is none. A `.tmp` beside it is a write a crash cut short (the rename is the
        commit point): dropped. StoreError if the document cannot be read, is not JSON or is
        not of the shape parse expects (it was edited by hand, or written by something else)."""
        self.path.with_name(self.path.name + TMP_SUFFIX).unlink(missing_ok=True)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return default
        except OSError as e:  # (a directory in its place, no permission)
            raise StoreError(f"{self.path}: cannot read it ({e.strerror or e})") from None
        try:
            doc = json.loads(data)  # (bytes: not UTF-8 is a ValueError here too)
            return doc if parse is None else parse(doc)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StoreError(f"{self.path}: unreadable ({type(e).__name__}: {e}); fix or remove it") from None

    async def save(self, doc: Any, then: Callable[[], None] | None = None) -> None:
        """Write doc (serialised now) durably in a worker thread, then call `then`, which
        makes the change take effect. OSError if the disk refused: the old document is still
        in place and `then` is not called."""
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        await self.update(lambda: (data, then))

    async def update(self, change: Callable[[], tuple[Any, Callable[[], None] | None]]) -> None:
        """A read-modify-write: change() runs when every earlier write of this file has
        taken effect, and returns (the new document, or its bytes; the function that makes
        it take effect), so concurrent changes never lose one another. The write and its
        effect complete even if the awaiting request is cancelled (the server stopping):
        memory never goes without a change the disk has."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        await asyncio.shield(asyncio.ensure_future(self._write(change)))

    async def _write(self, change: Callable[[], tuple[Any, Callable[[], None] | None]]) -> None:
        assert self._lock is not None
        async with self._lock:
            doc, then = change()
            data = doc if isinstance(doc, bytes) else json.dumps(doc, indent=1, sort_keys=True).encode()
            await asyncio.to_thread(replace_durably, self.path, data)
            if then is not None:
                then()


class NamedConfigs:
    """The settings of named resources (groups, client-metrics subscriptions), kept in one JSON
    document: name -> {config name: value}; `parse` reads a stored document into that shape."""

    def __init__(self, path: Path | None, parse: Callable[[Any], dict[str, dict[str, str]]]) -> None:
        self.file = JsonFile(path) if path is not None else None
        self.configs: dict[str, dict[str, str]] = {} if self.file is None else self.file.load({}, parse=parse)

    def check(self, name: str, settings: dict[str, str | None]) -> None:
        """ConfigError unless the resource's settings, as they would be, are valid."""
        raise NotImplementedError

    def layer(self, name: str) -> dict[str, str]:
        """The resource's own settings (a copy)."""
        return dict(self.configs.get(name, {}))

    async def replace(self, name: str, settings: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """The resource's settings become settings(the ones in force), once durable. OSError if
        the disk refused, or what settings() raised (its validation): nothing changed."""

        def commit() -> tuple[Any, Callable[[], None]]:
            values = settings(self.layer(name))
            configs = {n: c for n, c in self.configs.items() if n != name}
            if values:
                configs[name] = dict(values)

            def install() -> None:
                self.configs = configs

            return configs, install

        if self.file is None:
            commit()[1]()
        else:
            await self.file.update(commit)
