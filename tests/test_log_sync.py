"""Group commit across logs: one sync at the end of the loop iteration for all of them."""

import asyncio

import pytest

from coordinator.log import LogConfig, PartitionLog, sync
from coordinator.log.segment import Segment

CFG = LogConfig(segment_bytes=10_000, maintenance_interval_ms=None, checkpoint_interval_ms=None)


async def open_logs(tmp_path, n):
    return [await PartitionLog.open(tmp_path / f"p{i}", CFG, background=False) for i in range(n)]


def spy(monkeypatch, name):
    calls = []
    real = getattr(sync, name)

    def counting(*a):
        calls.append(a)
        return real(*a)

    monkeypatch.setattr(sync, name, counting)
    return calls


@pytest.mark.parametrize("logs, via_syncfs", [(2, False), (8, True)])
async def test_logs_written_in_one_iteration_share_one_sync(tmp_path, monkeypatch, logs, via_syncfs):
    plogs = await open_logs(tmp_path, logs)
    rounds = spy(monkeypatch, "sync_logs")
    syncfs = []
    if sync._syncfs is not None:
        real_syncfs = sync._syncfs
        monkeypatch.setattr(sync, "_syncfs", lambda fd: syncfs.append(fd) or real_syncfs(fd))
    for i, plog in enumerate(plogs):
        plog.append_records([(b"k", b"v%d" % i)])
    await asyncio.gather(*(plog.flush() for plog in plogs))
    assert len(rounds) == 1 and len(rounds[0][0]) == logs
    assert all(plog.durable_offset == 1 for plog in plogs)
    if sync._syncfs is not None:
        assert bool(syncfs) == via_syncfs
    await asyncio.gather(*(plog.close() for plog in plogs))


async def test_a_failed_sync_is_reported_and_retried(tmp_path, monkeypatch):
    plog, = await open_logs(tmp_path, 1)
    plog.append_records([(b"k", b"v")])
    real = Segment.fsync
    monkeypatch.setattr(Segment, "fsync", lambda self: (_ for _ in ()).throw(OSError(5, "EIO")))
    with pytest.raises(OSError):
        await plog.flush()
    assert plog.durable_offset == 0  # nothing claimed durable
    monkeypatch.setattr(Segment, "fsync", real)
    await plog.flush()  # the segment is still due: synced now
    assert plog.durable_offset == 1
    await plog.close()


async def test_a_cancelled_waiter_does_not_cancel_the_shared_sync(tmp_path):
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
