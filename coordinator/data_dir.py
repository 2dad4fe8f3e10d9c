"""The data dir's `.lock`: one server process per data dir (Kafka's LogManager.lockLogDirs),
and its `meta.properties`: the cluster id it belongs to.

Two processes appending to the same segment files would interleave batches and corrupt
both logs, so the first thing a server does in its data dir is take an exclusive
`flock` on `<data-dir>/.lock`, and a second process is refused. The kernel drops a flock
when its holder's last descriptor closes, so any exit frees the dir, SIGKILL included;
nothing stale is left to clean up.

The lock belongs to the process, not to a Server: several servers (brokers) in one
process may share one data dir, so it is taken once per process and directory, counted,
and closed when the last user releases it.

Kafka gives a cluster its id once, when its storage is formatted (`kafka-storage.sh
random-uuid` / `format`), and keeps it in each log dir's meta.properties; a broker whose dir
names another cluster refuses to start. A data dir here gets its id the same way at its first
start: the one --cluster-id gives, or a new one in Kafka's format.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import os
import uuid
from pathlib import Path

LOCK_FILE = ".lock"
META_FILE = "meta.properties"

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


def random_cluster_id() -> str:
    """A new id as Kafka's Uuid.randomUuid().toString() makes one: 16 random bytes (a version 4
    UUID) in url-safe base64 without padding, 22 characters, never starting with "-" (which a
    command line would take for an option; Kafka draws again)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class ClusterIdMismatch(Exception):
    """The data dir belongs to another cluster than the one --cluster-id names."""


def cluster_id_of(data_dir: Path, wanted: str) -> str:
    """The data dir's cluster id: the one its meta.properties holds, else `wanted` (or, if
    empty, a new random one) written there. Raises ClusterIdMismatch if `wanted` is given and
    differs from the stored one, OSError if the file cannot be read or written."""
    path = Path(data_dir) / META_FILE
    stored = stored_cluster_id(data_dir)
    if stored:
        if wanted and wanted != stored:
            raise ClusterIdMismatch(
                f"data dir {data_dir} belongs to cluster {stored} ({path}), not to --cluster-id {wanted}"
            )
        return stored
    cluster_id = wanted or random_cluster_id()
    tmp = path.with_name(META_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(f"#\n# written by the coordinator's first start in this data dir\nversion=1\ncluster.id={cluster_id}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return cluster_id


def stored_cluster_id(data_dir: Path) -> str | None:
    """The cluster id the data dir's meta.properties holds, if it has one."""
    path = Path(data_dir) / META_FILE
    return _read_properties(path).get("cluster.id") or None if path.exists() else None


def _read_properties(path: Path) -> dict[str, str]:
    """key=value lines of a Java properties file (comments and blank lines skipped)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values
