"""Group commit across logs: one sync round covers every log written since the last round
began; appends that arrive while a round is in flight wait for the next one.

A round runs beside the event loop, which goes on reading, handling and appending
requests meanwhile. How depends on the number of files it has to make durable (the
README's performance section has the measurements behind these choices):

- A few files (below SYNCFS_FROM_FILES): each fsynced through Linux native AIO (caio's
  linux_aio: io_submit of IOCB_CMD_FSYNC, done by kernel workers, completion signalled on
  an eventfd the loop watches), in parallel. No Python thread: a worker thread has to win
  the GIL from a busy loop to start and finish each fsync.
- Many files: one syncfs(2) of their filesystem in a worker thread, one GIL hand-over per
  round. N fsyncs cost N journal waits, and AIO runs them on kernel workers of the loop's
  own CPU. syncfs also writes out whatever else is dirty on that filesystem, so a data
  dir on a busy shared disk makes it slower.

Where AIO is missing or refused (not Linux, an old kernel, a filesystem without AIO
fsync), a round of a few files runs on the loop at the end of the iteration, as Redis
does with `appendfsync always`: requests read meanwhile wait in the socket buffers.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Callable, Protocol

from .segment import Segment, fsync_dir

log = logging.getLogger(__name__)

SYNCFS_FROM_FILES = 4  # below this many dirty files, fsyncing each is cheaper than one syncfs
SLOW_SYNC_S = 1.0  # a sync round this long is logged: the disk, not the server, is the bottleneck
AIO_MAX_IN_FLIGHT = 256  # fsyncs one round can hand to the kernel; more are done on the loop


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # not Linux
        return None
    fn.argtypes = [ctypes.c_int]
    return fn


_syncfs = _load_syncfs()


class SyncedLog(Protocol):
    """What a sync round needs of a log (PartitionLog): what to make durable, and where to
    report the outcome. The log asks for a round (Syncer.request); the syncer calls back."""

    @property
    def directory(self) -> Path: ...

    def take_unsynced(self) -> tuple[list[Segment], bool, int]:
        """The segments and directory entries to make durable, and the offset that will be
        durable once they are."""
        ...

    def sync_failed(self, segs: list[Segment], dir_dirty: bool, error: OSError) -> None: ...

    def synced_to(self, offset: int) -> None: ...


# (log, its segments to sync, whether its directory is to sync, the offset durable after)
Work = list[tuple[SyncedLog, list[Segment], bool, int]]


class Syncer:
    def __init__(self, use_aio: bool = True) -> None:
        self._logs: dict[SyncedLog, None] = {}  # an ordered set: written since the last round began
        # The loop of the round requested for them (None: none requested since the last began)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_flight: _Round | None = None  # the round running beside the loop now, if any
        self._aio: AioFsync | bool | None = None if use_aio else False  # None: not tried yet
        self._executor: ThreadPoolExecutor | None = None  # runs the syncfs of rounds of many files
        self.rounds = 0  # sync rounds run so far (tests and benchmarks count them)
        # Set by the metrics (--metrics-port): called with the seconds each round took.
        self.round_timer: Callable[[float], None] | None = None

    @property
    def uses_aio(self) -> bool:
        if self._aio is None:
            self._aio = AioFsync.create() or False
        return bool(self._aio)

    def request(self, plog: SyncedLog, schedule: bool = True, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Have the next round make everything appended to `plog` so far durable; the round
        reports to the log (SyncedLog.synced_to / sync_failed). schedule=False: the caller
        calls start_now() itself. `loop`: the running loop, if the caller knows it."""
        current = self._loop
        # The running loop is looked up only for a new round, and not when the caller
        # gives it: on Python 3.11 each lookup is a getpid() system call. (A round left by
        # a closed loop: tests run several loops.)
        if current is None or current.is_closed():
            loop = self._loop = loop or asyncio.get_running_loop()
            self._logs = {}
            in_flight = self._in_flight
            if schedule and (in_flight is None or in_flight.loop is not loop):
                loop.call_soon(self._run)  # else: started when the round in flight ends
        self._logs[plog] = None

    def start_now(self) -> None:
        """Start the requested round now rather than on the loop's next turn. For a
        caller that itself ran on a later turn than the I/O that made its appends (a
        deferred batch writer): waiting one more turn would gather nothing but cost a loop
        iteration per round."""
        if self._loop is not None and self._in_flight is None:
            self._run()

    def _run(self) -> None:
        loop, logs = self._loop, self._logs
        if loop is None:
            return
        self._loop, self._logs = None, {}
        self.rounds += 1
        work: Work = []
        files: list[Segment] = []
        fds: list[int] = []  # theirs
        dirs: list[Path] = []  # entries created or deleted
        for plog in logs:
            segs, dir_dirty, target = plog.take_unsynced()
            work.append((plog, segs, dir_dirty, target))
            for seg in segs:
                if seg.fd >= 0:  # (dropped segments: closed)
                    files.append(seg)
                    fds.append(seg.fd)
            if dir_dirty:
                dirs.append(plog.directory)
        sync_round = _Round(self, loop, work, len(files) + len(dirs))
        try:
            if _syncfs is not None and sync_round.files >= SYNCFS_FROM_FILES:
                self._syncfs_in_thread(files, dirs, sync_round.end)
            elif self._aio or (self._aio is None and self.uses_aio):  # (the property: the first round only)
                for d in dirs:  # (rare: a segment was created or deleted)
                    fsync_dir(d)
                try:
                    self._aio.fsync_all(fds, sync_round.end, loop)  # type: ignore[union-attr]  # true only once _aio holds an AioFsync
                except OSError:
                    raise
                except Exception as e:  # the kernel refused it: rounds of a few files on the loop from now on
                    log.warning("AIO fsync refused (%r): syncing on the event loop from now on", e)
                    self._aio = False
                    sync_files(files, dirs)
                    sync_round.end(None)
            else:
                sync_files(files, dirs)
                sync_round.end(None)
        except OSError as e:
            sync_round.end(e)
        if not sync_round.ended:  # beside the loop: the next round starts when this one ends
            self._in_flight = sync_round

    def _syncfs_in_thread(
        self, files: list[Segment], dirs: list[Path], finish: Callable[[OSError | None], None]
    ) -> None:
        by_device = {seg.device: seg.fd for seg in files}
        # The thread gets its own descriptors: a segment closed meanwhile (compaction,
        # retention) must not leave it an fd number reused for another file.
        fds = [os.dup(fd) for fd in by_device.values()]
        with_files = {seg.path.parent for seg in files}
        alone = [d for d in dirs if d not in with_files]  # the others are on a synced filesystem

        def in_thread() -> None:
            try:
                for fd in fds:
                    _checked_syncfs(fd)
                for d in alone:
                    fsync_dir(d)
            finally:
                for fd in fds:
                    os.close(fd)

        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-sync")
        ran = asyncio.get_running_loop().run_in_executor(self._executor, in_thread)
        ran.add_done_callback(
            lambda f: finish(
                OSError(errno.ECANCELED, "sync cancelled") if f.cancelled() else f.exception()  # type: ignore[arg-type]  # an Exception or None here, never a bare BaseException
            )
        )

    def _finished(self, sync_round: _Round, error: OSError | None) -> None:
        if self._in_flight is sync_round:
            self._in_flight = None
        loop = sync_round.loop
        if loop.is_closed():  # a round left behind by a loop that ended
            return
        if error is not None:
            _failed(sync_round.work, error)
        else:
            _mark_synced(sync_round.work)
        if self._loop is loop and self._in_flight is None:
            self._run()  # what was appended while this round ran


class _Round:
    """One sync round: the logs it covers (what each is to be told), the loop it reports
    on, and whether it has ended (AIO and syncfs rounds end on a later loop turn)."""

    __slots__ = ("syncer", "loop", "work", "files", "started", "ended")

    def __init__(self, syncer: Syncer, loop: asyncio.AbstractEventLoop, work: Work, files: int) -> None:
        self.syncer, self.loop, self.work, self.files = syncer, loop, work, files
        self.started = time.perf_counter()
        self.ended = False

    def end(self, error: OSError | None) -> None:
        """The files are durable (error None) or the sync failed."""
        self.ended = True
        syncer = self.syncer
        took = time.perf_counter() - self.started
        if syncer.round_timer is not None:
            syncer.round_timer(took)
        if took >= SLOW_SYNC_S:
            log.warning("slow fsync: %d files of %d logs took %.2f s", self.files, len(self.work), took)
        syncer._finished(self, error)


class AioFsync:
    """fsync many files in parallel through Linux native AIO, completion on the event loop."""

    def __init__(self, context: Any, operation: Any) -> None:  # caio's Context and Operation class
        self._context = context
        self._fsync = operation.fsync
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def create(cls) -> AioFsync | None:
        try:
            from caio.linux_aio import Context, Operation

            return cls(Context(max_requests=AIO_MAX_IN_FLIGHT), Operation)
        except Exception:  # not Linux, no caio, or io_setup refused (aio-max-nr reached...)
            return None

    def fsync_all(
        self, fds: list[int], done: Callable[[OSError | None], None], loop: asyncio.AbstractEventLoop
    ) -> None:
        """done(None), or done(the first OSError), once every fd is fsynced. Raises if the
        kernel takes none of them (then nothing was started)."""
        if not fds:
            done(None)
            return
        if self._loop is not loop:
            loop.add_reader(self._context.fileno, self._on_events)
            self._loop = loop
        # The usual round is one log's active segment: its completion reports straight to
        # `done`; a round of several counts them down first.
        one = partial(_fsynced, done) if len(fds) == 1 else _Countdown(len(fds), done)
        ops = list(map(self._fsync, fds))
        for op in ops:
            op.set_callback(one)
        submitted = self._context.submit(*ops)
        for fd in fds[submitted:]:  # the kernel's queue is full: the rest here, on the loop
            try:
                os.fsync(fd)
            except OSError as e:
                one(-(e.errno or errno.EIO))
            else:
                one(0)

    def _on_events(self) -> None:
        # An eventfd counts finished operations; reading it may find 0 when completions
        # were collected already: process_events() is what matters.
        try:
            self._context.poll()  # read the eventfd's counter
        except BlockingIOError:
            pass
        while True:
            try:
                # Each call collects up to caio's default of 512 completions (calling
                # each one's callback); fewer means none are left, without asking again.
                if self._context.process_events() < 512:
                    return
            except SystemError as e:
                # io_getevents interrupted by a signal (or a debugger/profiler's stop): the
                # eventfd is drained already, so stopping here would strand the completions
                # until some later fsync finished.
                if e.args[:1] != (errno.EINTR,):
                    raise


def errno_of(res: int) -> int:
    """The errno of an AIO result: caio passes the kernel's negative errno as unsigned."""
    if res >= 1 << 63:
        res -= 1 << 64
    return -res if res < 0 else 0


def _fsync_error(res: int) -> OSError | None:
    err = errno_of(res)
    return OSError(err, f"fsync: {os.strerror(err)}") if err else None


def _fsynced(done: Callable[[OSError | None], None], res: int) -> None:
    """The AIO completion of a round's only fsync."""
    done(_fsync_error(res) if res else None)


class _Countdown:
    """The AIO completions of a round's fsyncs: done(the first error or None) after the last."""

    __slots__ = ("left", "error", "done")

    def __init__(self, left: int, done: Callable[[OSError | None], None]) -> None:
        self.left, self.done = left, done
        self.error: OSError | None = None

    def __call__(self, res: int) -> None:
        self.left -= 1
        if res and self.error is None:
            self.error = _fsync_error(res)
        if self.left == 0:
            self.done(self.error)


def sync_logs(logs: list[SyncedLog]) -> None:
    """Make what the logs hold durable, on the calling thread."""
    work: Work = [(plog, *plog.take_unsynced()) for plog in logs]
    try:
        sync_files(
            [seg for _, segs, _, _ in work for seg in segs if seg.fd >= 0],
            [plog.directory for plog, _, dir_dirty, _ in work if dir_dirty],
        )
    except OSError as e:
        _failed(work, e)
        raise
    _mark_synced(work)


def sync_files(files: list[Segment], dirs: list[Path]) -> None:
    """fsync each file and directory, or, from SYNCFS_FROM_FILES of them, syncfs their
    filesystems (a segment's directory is on the segment's filesystem)."""
    if _syncfs is not None and len(files) + len(dirs) >= SYNCFS_FROM_FILES:
        for fd in {seg.device: seg.fd for seg in files}.values():
            _checked_syncfs(fd)
        with_files = {seg.path.parent for seg in files}
        dirs = [d for d in dirs if d not in with_files]
    else:
        for seg in files:
            seg.fsync()
    for d in dirs:
        fsync_dir(d)


def _checked_syncfs(fd: int) -> None:
    assert _syncfs is not None  # (chosen only where syncfs exists)
    if _syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"syncfs: {os.strerror(err)}")


def _failed(work: Work, error: OSError) -> None:
    for plog, segs, dir_dirty, _ in work:
        plog.sync_failed(segs, dir_dirty, error)


def _mark_synced(work: Work) -> None:
    for plog, _, _, target in work:
        plog.synced_to(target)


SYNCER = Syncer()  # one per process: every log's syncs are grouped
