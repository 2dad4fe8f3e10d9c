"""The data dir's `.lock`: one server process per data dir (Kafka's LogManager.lockLogDirs).

Two processes appending to the same segment files would interleave batches and corrupt
both logs, so the first thing a server does in its data dir is take an exclusive
`flock` on `<data-dir>/.lock`, and a second process is refused. The kernel drops a flock
when its holder's last descriptor closes, so any exit frees the dir, SIGKILL included;
nothing stale is left to clean up.

The lock belongs to the process, not to a Server: several servers (brokers) in one
process may share one data dir, so it is taken once per process and directory, counted,
and closed when the last user releases it.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"

_held: dict[Path, list[int]] = {}  # resolved data dir -> [fd, users]


class DataDirInUse(Exception):
    """Another process holds the data dir's lock."""


def lock_data_dir(data_dir: Path) -> Path:
    """Take (or, within this process, share) the data dir's lock. Raises DataDirInUse if
    another process holds it, OSError if the lock file cannot be made. Returns the key to
    pass to unlock_data_dir."""
    key = Path(data_dir).resolve()
    held = _held.get(key)
    if held is not None:
        held[1] += 1
        return key
    fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = _read_pid(fd)
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
            by = f" by process {holder}" if holder else ""
            raise DataDirInUse(
                f"data dir {key} is in use{by} (lock {key / LOCK_FILE}): one server per data dir"
            ) from None
        raise
    # The holder's pid, for the refusal message of the next one (informative only: the
    # flock, not this content, is the lock).
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held[key] = [fd, 1]
    return key


def unlock_data_dir(key: Path) -> None:
    held = _held.get(key)
    if held is None:
        return
    held[1] -= 1
    if held[1] == 0:
        del _held[key]
        os.close(held[0])  # releases the flock


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""
