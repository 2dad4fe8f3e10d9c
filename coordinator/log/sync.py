"""Group commit across logs: one sync, at the end of the event-loop iteration, for every log
written in it.

The fsync runs on the event loop itself, as Redis does with `appendfsync always`: handing
it to a worker thread costs two thread wake-ups per sync (expensive in a VM), and the worker
waits for the GIL, up to the interpreter's 5 ms switch interval, whenever the loop is busy.
Requests read in one iteration are appended, synced once, and answered; those that arrive
meanwhile wait in the socket buffers and share the next sync. When many files are dirty, one
syncfs(2) of their filesystem replaces their fsyncs (50 logs: 1.0 ms instead of 8.5 ms here,
bench/bench_log.py); it also writes out whatever else is dirty on that filesystem, so a data
dir on a disk other programs keep busy makes those syncs slower.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
from typing import TYPE_CHECKING

from .segment import fsync_dir

if TYPE_CHECKING:
    from .partition import PartitionLog

SYNCFS_FROM_FILES = 4  # below this many dirty files, fsyncing each is cheaper than one syncfs


def _load_syncfs():
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # not Linux
        return None
    fn.argtypes = [ctypes.c_int]
    return fn


_syncfs = _load_syncfs()


class Syncer:
    def __init__(self) -> None:
        self._logs: dict[PartitionLog, None] = {}  # an ordered set
        self._done: asyncio.Future[None] | None = None

    def request(self, plog: PartitionLog) -> asyncio.Future[None]:
        """A future resolved once everything appended to `plog` up to the end of this
        loop iteration is on disk (or failed with the OSError of the sync)."""
        done = self._done
        loop = asyncio.get_running_loop()
        if done is None or done.get_loop() is not loop:  # (tests run several loops)
            done = self._done = loop.create_future()
            self._logs = {}
            loop.call_soon(self._run)
        self._logs[plog] = None
        return done

    def _run(self) -> None:
        done, logs = self._done, list(self._logs)
        self._done, self._logs = None, {}
        try:
            sync_logs(logs)
        except OSError as e:
            if done is not None and not done.done():
                done.set_exception(e)
        else:
            if done is not None and not done.done():
                done.set_result(None)


def sync_logs(logs: list[PartitionLog]) -> None:
    """Make what the logs hold durable; on failure they keep it as still to be synced."""
    work = [(plog, *plog._take_unsynced()) for plog in logs]
    files = [seg for _, segs, _, _ in work for seg in segs if seg.fd >= 0]  # (dropped segments: closed)
    dirs = [plog.directory for plog, _, dir_dirty, _ in work if dir_dirty]
    try:
        if _syncfs is not None and len(files) + len(dirs) >= SYNCFS_FROM_FILES:
            # A segment's directory is on the segment's filesystem: syncing that covers both.
            by_device = {os.fstat(seg.fd).st_dev: seg.fd for seg in files}
            for fd in by_device.values():
                if _syncfs(fd) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"syncfs: {os.strerror(err)}")
            covered = {seg.path.parent for seg in files}
            for d in dirs:
                if d not in covered:
                    fsync_dir(d)
        else:
            for seg in files:
                seg.fsync()
            for d in dirs:
                fsync_dir(d)
    except OSError:
        for plog, segs, dir_dirty, _ in work:
            plog._restore_unsynced(segs, dir_dirty)
        raise
    for plog, _, _, target in work:
        plog._synced_to(target)


SYNCER = Syncer()  # one per process: every log's syncs are grouped
