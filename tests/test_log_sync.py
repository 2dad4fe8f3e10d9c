"""Group commit across logs: one sync round for every log written since the last round
began, beside the loop (a few files fsynced through Linux AIO, many by one syncfs in a
worker thread) or, without AIO, a few files on the loop."""

import asyncio
import ctypes
import errno
import os

import pytest

from coordinator.futures import future_and_callback
from coordinator.log import LogConfig, PartitionLog, partition, sync
from coordinator.log.partition import StorageError
from coordinator.log.segment import Segment

CFG = LogConfig(segment_bytes=10_000, maintenance_interval_ms=None, checkpoint_interval_ms=None)

AIO_AVAILABLE = sync.Syncer().uses_aio


@pytest.fixture(params=["aio", "loop"])
def syncer(request, monkeypatch):
    """A fresh Syncer for the logs of this test, with or without AIO."""
    if request.param == "aio" and not AIO_AVAILABLE:
        pytest.skip("no Linux AIO here")
    s = sync.Syncer(use_aio=request.param == "aio")
    monkeypatch.setattr(partition, "SYNCER", s)
    return s


def durable(plog):
    """A future of when everything appended to plog so far is on disk."""
    fut, done = future_and_callback()
    plog.when_durable(done)
    return fut


async def open_logs(tmp_path, n):
    return [await PartitionLog.open(tmp_path / f"p{i}", CFG, background=False) for i in range(n)]


@pytest.mark.parametrize("logs", [2, 8])
async def test_logs_written_in_one_iteration_share_one_round(tmp_path, monkeypatch, syncer, logs):
    plogs = await open_logs(tmp_path, logs)
    before = syncer.rounds
    syncfs = []
    if sync._syncfs is not None:
        real_syncfs = sync._syncfs
        monkeypatch.setattr(sync, "_syncfs", lambda fd: syncfs.append(fd) or real_syncfs(fd))
    for i, plog in enumerate(plogs):
        plog.append_records([(b"k", b"v%d" % i)])
    await asyncio.gather(*(plog.flush() for plog in plogs))
    assert syncer.rounds - before == 1
    assert all(plog.durable_offset == 1 for plog in plogs)
    if sync._syncfs is not None:  # many files: one syncfs (in the worker thread, with AIO); few: fsyncs
        assert bool(syncfs) == (logs >= sync.SYNCFS_FROM_FILES)
    await asyncio.gather(*(plog.close() for plog in plogs))


async def test_appends_during_a_round_wait_for_the_next(tmp_path, syncer):
    if not syncer.uses_aio:
        pytest.skip("on the loop, a round ends before anything else runs")
    (plog,) = await open_logs(tmp_path, 1)
    plog.append_records([(b"k", b"v1")])
    first = durable(plog)
    before = syncer.rounds
    await asyncio.sleep(0)  # the round has started: its fsync is with the kernel
    assert syncer.rounds == before + 1 and not first.done()
    plog.append_records([(b"k", b"v2")])
    second = durable(plog)
    assert second is not first  # not covered by the round in flight
    await first
    assert plog.durable_offset >= 1
    await second
    assert plog.durable_offset == 2 and syncer.rounds == before + 2
    await plog.close()


async def test_a_failed_sync_is_reported_and_retried(tmp_path, monkeypatch, syncer):
    (plog,) = await open_logs(tmp_path, 1)
    plog.append_records([(b"k", b"v")])
    eio = OSError(errno.EIO, "EIO")
    if syncer.uses_aio:
        target, name = sync.AioFsync, "fsync_all"
        failing = lambda self, fds, done, loop: loop.call_soon(done, eio)  # noqa: E731
    else:
        target, name = Segment, "fsync"
        failing = lambda self: (_ for _ in ()).throw(eio)  # noqa: E731
    real = getattr(target, name)
    monkeypatch.setattr(target, name, failing)
    with pytest.raises(StorageError):
        await plog.flush()
    # Nothing claimed durable, and what was not is cut: it was never acknowledged.
    assert plog.durable_offset == 0 and plog.log_end_offset == 0
    assert os.path.getsize(plog.active.path) == 0
    monkeypatch.setattr(target, name, real)
    plog.append_records([(b"k", b"v2")])
    await plog.flush()
    assert plog.durable_offset == 1 and [r.value for r in plog.records()] == [b"v2"]
    await plog.close()


async def test_aio_refused_by_the_kernel_falls_back_to_the_loop(tmp_path, monkeypatch, syncer):
    if not syncer.uses_aio:
        pytest.skip("AIO only")

    def refuse(self, fds, done, loop):
        raise ValueError("io_submit: EINVAL")

    monkeypatch.setattr(sync.AioFsync, "fsync_all", refuse)
    (plog,) = await open_logs(tmp_path, 1)
    plog.append_records([(b"k", b"v")])
    await plog.flush()
    assert plog.durable_offset == 1 and not syncer.uses_aio
    await plog.close()


async def test_aio_completions_interrupted_by_a_signal_are_collected(tmp_path, monkeypatch):
    """io_getevents answers EINTR when a signal or a profiler's stop lands in it; the
    finished fsyncs must still be collected, not wait for the next completion."""
    s = sync.Syncer()
    if not s.uses_aio:
        pytest.skip("no Linux AIO here")
    monkeypatch.setattr(partition, "SYNCER", s)

    class Interrupted:
        def __init__(self, context):
            self.context, self.interrupted = context, 0

        def __getattr__(self, name):
            return getattr(self.context, name)

        def process_events(self):
            if not self.interrupted:
                self.interrupted += 1
                raise SystemError(errno.EINTR, "Interrupted system call")
            return self.context.process_events()

    s._aio._context = Interrupted(s._aio._context)
    (plog,) = await open_logs(tmp_path, 1)
    plog.append_records([(b"k", b"v")])
    await asyncio.wait_for(plog.flush(), 10)
    assert plog.durable_offset == 1 and s._aio._context.interrupted == 1
    await plog.close()


async def test_more_files_than_the_aio_queue_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(sync, "AIO_MAX_IN_FLIGHT", 2)
    s = sync.Syncer()
    if not s.uses_aio:
        pytest.skip("no Linux AIO here")
    monkeypatch.setattr(partition, "SYNCER", s)
    plogs = await open_logs(tmp_path, 5)
    for plog in plogs:
        plog.append_records([(b"k", b"v")])
    await asyncio.gather(*(plog.flush() for plog in plogs))  # 2 by the kernel, 3 on the loop
    assert all(plog.durable_offset == 1 for plog in plogs)
    await asyncio.gather(*(plog.close() for plog in plogs))


async def test_a_round_of_many_files_runs_in_the_worker_thread_and_appends_meanwhile_wait(tmp_path, syncer):
    if sync._syncfs is None:
        pytest.skip("no syncfs here")
    plogs = await open_logs(tmp_path, sync.SYNCFS_FROM_FILES)
    for plog in plogs:
        plog.append_records([(b"k", b"v1")])
    first = asyncio.gather(*(durable(plog) for plog in plogs))
    before = syncer.rounds
    await asyncio.sleep(0)  # the round has started: its syncfs is with the thread
    assert syncer.rounds == before + 1 and not first.done()
    plogs[0].append_records([(b"k", b"v2")])
    second = plogs[0].flush()
    await first
    assert all(plog.durable_offset >= 1 for plog in plogs)
    await second
    assert plogs[0].durable_offset == 2 and syncer.rounds == before + 2
    await asyncio.gather(*(plog.close() for plog in plogs))


async def test_the_worker_thread_syncs_its_own_descriptors(tmp_path, monkeypatch, syncer):
    """A segment closed during the round (compaction, retention) can't leave the thread an
    fd number that now names another file: it gets duplicates, closed when done."""
    if sync._syncfs is None:
        pytest.skip("no syncfs here")
    plogs = await open_logs(tmp_path, sync.SYNCFS_FROM_FILES)
    seen = []
    real_syncfs = sync._syncfs
    monkeypatch.setattr(sync, "_syncfs", lambda fd: seen.append((fd, os.fstat(fd).st_ino)) or real_syncfs(fd))
    for plog in plogs:
        plog.append_records([(b"k", b"v")])
    await asyncio.gather(*(plog.flush() for plog in plogs))
    ((fd, ino),) = seen  # one filesystem: one syncfs
    segments = {plog.active.fd: os.fstat(plog.active.fd).st_ino for plog in plogs}
    assert fd not in segments and ino in segments.values()
    with pytest.raises(OSError):
        os.fstat(fd)  # closed again
    await asyncio.gather(*(plog.close() for plog in plogs))


async def test_a_failed_syncfs_in_the_worker_thread_is_reported_and_retried(tmp_path, monkeypatch, syncer):
    if sync._syncfs is None:
        pytest.skip("no syncfs here")
    plogs = await open_logs(tmp_path, sync.SYNCFS_FROM_FILES)

    def failing(fd):
        ctypes.set_errno(errno.EIO)
        return -1

    real_syncfs = sync._syncfs
    monkeypatch.setattr(sync, "_syncfs", failing)
    for plog in plogs:
        plog.append_records([(b"k", b"v")])
    with pytest.raises(StorageError) as raised:
        await asyncio.gather(*(plog.flush() for plog in plogs))
    assert raised.value.errno == errno.EIO
    assert all(plog.durable_offset == 0 == plog.log_end_offset for plog in plogs)  # nothing claimed, all cut
    monkeypatch.setattr(sync, "_syncfs", real_syncfs)
    for plog in plogs:
        plog.append_records([(b"k", b"v2")])
    await asyncio.gather(*(plog.flush() for plog in plogs))
    assert all(plog.durable_offset == 1 for plog in plogs)
    await asyncio.gather(*(plog.close() for plog in plogs))


def test_aio_results_carry_negative_errnos_as_unsigned():
    assert sync.errno_of(0) == 0
    assert sync.errno_of((1 << 64) - errno.EIO) == errno.EIO
    assert sync.errno_of(-errno.ENOSPC) == errno.ENOSPC


async def test_a_cancelled_waiter_does_not_cancel_the_shared_sync(tmp_path, syncer):
    a, b = await open_logs(tmp_path, 2)
    a.append_records([(b"k", b"v")])
    b.append_records([(b"k", b"v")])
    first, second = asyncio.ensure_future(a.flush()), asyncio.ensure_future(b.flush())
    await asyncio.sleep(0)  # both now wait for the same sync
    first.cancel()
    await second  # still completes
    assert b.durable_offset == 1
    await a.flush()
    assert a.durable_offset == 1
    await asyncio.gather(a.close(), b.close())


@pytest.mark.parametrize("logs", [1, sync.SYNCFS_FROM_FILES])  # by AIO; by the worker thread
def test_a_round_left_in_flight_by_an_ended_loop_does_not_stall_the_next_loop(tmp_path, monkeypatch, logs):
    s = sync.Syncer()
    if not s.uses_aio or sync._syncfs is None:
        pytest.skip("no Linux AIO here")
    monkeypatch.setattr(partition, "SYNCER", s)

    async def leave_a_round_in_flight():
        plogs = await open_logs(tmp_path, logs)
        for plog in plogs:
            plog.append_records([(b"k", b"v1")])
            durable(plog)
        await asyncio.sleep(0)  # handed to the kernel or the thread; this loop ends before it is reaped
        assert s._in_flight is not None
        return plogs

    first = asyncio.new_event_loop()
    plogs = first.run_until_complete(leave_a_round_in_flight())
    first.close()

    async def go_on():
        for plog in plogs:
            plog.append_records([(b"k", b"v2")])
        await asyncio.wait_for(asyncio.gather(*(plog.flush() for plog in plogs)), 10)  # the stale round is ignored
        assert all(plog.durable_offset == 2 for plog in plogs)
        await asyncio.gather(*(plog.close() for plog in plogs))

    asyncio.run(go_on())
