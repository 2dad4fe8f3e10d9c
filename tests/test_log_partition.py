import asyncio
import os
import struct

import pytest

from coordinator.log import InvalidBatch, LogConfig, OffsetOutOfRange, PartitionLog
from coordinator.log.partition import StorageError
from protocol.record_batch import build_batch, iter_batches, iter_records, parse_header

TS = 1_700_000_000_000
CFG = LogConfig(segment_bytes=1000, index_interval_bytes=100, maintenance_interval_ms=None)


def open_log(path, cfg=CFG) -> PartitionLog:
    return PartitionLog.open_sync(path, cfg)


def fill(log, n, start=0, ts=TS, size=20):
    for i in range(start, start + n):
        log.append_records([(b"k%d" % i, b"v%d-" % i + b"x" * size)], timestamp_ms=ts + i)


def all_offsets(log, start=0):
    return [r.offset for r in log.records(start)]


def segment_files(path):
    return sorted(p.name for p in path.iterdir() if p.name.endswith(".log"))


def test_append_assigns_offsets_and_reopen(tmp_path):
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.append(build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=TS, base_offset=999)) == 0
    assert log.append_records([(b"c", b"3")], timestamp_ms=TS) == 2
    assert log.log_end_offset == log.high_watermark == 3
    log.close_sync()
    log = open_log(tmp_path)
    assert log.log_end_offset == 3
    assert [(r.offset, r.key) for r in log.records()] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert log.append_records([(b"d", b"4")], timestamp_ms=TS) == 3


def test_append_several_batches_at_once(tmp_path):
    log = open_log(tmp_path)
    buf = build_batch([(b"a", b"1")], timestamp_ms=TS) + build_batch([(b"b", b"2")] * 3, timestamp_ms=TS)
    assert log.append(buf) == 0
    assert [h.base_offset for _, h in iter_batches(log.read(0, 10_000))] == [0, 1]
    assert log.log_end_offset == 4


def test_append_rejects_corrupt(tmp_path):
    log = open_log(tmp_path)
    bad = bytearray(build_batch([(b"a", b"1")], timestamp_ms=TS))
    bad[-1] ^= 1
    with pytest.raises(InvalidBatch, match="CRC"):
        log.append(bad)
    with pytest.raises(InvalidBatch):
        log.append(build_batch([(b"a", b"1")], timestamp_ms=TS)[:-3])
    assert log.log_end_offset == 0 and log.active.size == 0


def test_segment_roll_and_names(tmp_path):
    log = open_log(tmp_path)
    fill(log, 40)
    assert len(log.segments) > 3
    names = segment_files(tmp_path)
    assert names[0] == "00000000000000000000.log"
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    assert all(s.size <= 1000 for s in log.segments)
    assert all_offsets(log) == list(range(40))
    log.close_sync()
    log = open_log(tmp_path)
    assert all_offsets(log) == list(range(40)) and log.log_end_offset == 40


def test_read_boundaries(tmp_path):
    log = open_log(tmp_path)
    fill(log, 40)
    for off in range(40):
        data = log.read(off, 1)  # tiny max_bytes: still exactly one whole batch
        (h,) = [h for _, h in iter_batches(data)]
        assert h.base_offset == off
    data = log.read(5, 250)
    hs = [h for _, h in iter_batches(data)]
    assert hs[0].base_offset == 5 and len(data) <= 250 and len(hs) >= 2
    seg = log.segments[0]
    assert len(log.read(0, 10**9)) == seg.size  # a read stays within one segment
    assert log.read(40, 1000) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(41, 1000)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 1000)


def test_read_inside_multi_record_batch(tmp_path):
    log = open_log(tmp_path)
    log.append_records([(b"a", b"1")] * 5, timestamp_ms=TS)
    log.append_records([(b"b", b"2")] * 5, timestamp_ms=TS)
    assert parse_header(log.read(3, 1)).base_offset == 0
    assert parse_header(log.read(7, 1)).base_offset == 5
    assert all_offsets(log, 7) == [7, 8, 9]


def test_timestamps(tmp_path):
    log = open_log(tmp_path)
    assert log.offset_for_timestamp(0) is None and log.max_timestamp() is None
    fill(log, 30)  # timestamps TS + i
    log.append_records([(b"x", b"y"), (b"z", b"w")], timestamp_ms=TS + 5)  # older, at 30-31
    assert log.offset_for_timestamp(TS + 10) == (10, TS + 10)
    assert log.offset_for_timestamp(0) == (0, TS)
    assert log.offset_for_timestamp(TS + 29) == (29, TS + 29)
    assert log.offset_for_timestamp(TS + 30) is None
    assert log.max_timestamp() == (29, TS + 29)


@pytest.mark.parametrize("extra", [b"", b"\x00" * 7, b"garbage!" * 20])
def test_torn_tail_every_cut(tmp_path, extra):
    base = tmp_path / "base"
    log = open_log(base)
    fill(log, 10)
    last = log.active
    last_pos = [p for p, _ in last.iter_headers()][-1]
    last_path, end = last.path, last.size
    log.close_sync()
    original = last_path.read_bytes()
    for cut in sorted(
        {last_pos, last_pos + 1, last_pos + 11, last_pos + 12, last_pos + 30, last_pos + 61, end - 1}
        | ({end} if extra else set())
    ):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        for p in base.iterdir():
            (d / p.name).write_bytes(p.read_bytes())
        torn = original[:cut] + extra
        (d / last_path.name).write_bytes(torn)
        whole = torn[:end] == original  # e.g. a cut final 0x00 byte "restored" by zeros
        log = open_log(d)
        kept = 10 if whole else 9
        assert all_offsets(log) == list(range(kept)), cut
        assert log.log_end_offset == kept
        assert os.path.getsize(d / last_path.name) == (end if whole else last_pos)
        assert log.append_records([(b"new", b"v")], timestamp_ms=TS) == kept
        log.close_sync()
        log = open_log(d)
        assert all_offsets(log) == list(range(kept + 1))
        log.close_sync()


def test_corruption_in_the_middle_takes_the_log_offline_and_repair_removes_just_it(tmp_path, caplog, capsys):
    """A torn tail is what a crash leaves, and is cut; damage that valid batches follow is
    not: nothing is cut, the log refuses service, and the repair tool removes the corrupt
    bytes only (keeping a copy): every valid batch after them stays, at its offsets."""
    log = open_log(tmp_path)
    fill(log, 40)
    assert len(log.segments) >= 3
    victim = log.segments[1]
    positions = [(p, h) for p, h in victim.iter_headers()]
    pos, h = positions[2]
    log.close_sync()
    data = bytearray(victim.path.read_bytes())
    data[pos + 70] ^= 0xFF  # inside the records: only the CRC can tell
    victim.path.write_bytes(data)
    files = {p.name: p.read_bytes() for p in tmp_path.glob("*.log")}
    with caplog.at_level("ERROR"):
        log = open_log(tmp_path)
    assert "CRC mismatch" in log.offline and victim.path.name in log.offline
    assert f"bytes {pos}-{pos + h.size}" in log.offline and "repair" in caplog.text
    with pytest.raises(StorageError):
        log.append_records([(b"n", b"v")], timestamp_ms=TS)
    with pytest.raises(StorageError):
        log.read(0)
    log.close_sync()
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.log")} == files  # nothing cut
    from coordinator.log.__main__ import main as log_tool

    assert log_tool(["repair", str(tmp_path)]) == 0
    assert "bytes cut" in capsys.readouterr().out
    kept = next((tmp_path.parent / ".corrupt").glob(f"{tmp_path.name}-*"))  # (the data dir holds other tests' too)
    assert {p.name: p.read_bytes() for p in kept.glob("*.log")} == files
    log = open_log(tmp_path)
    assert log.offline is None and all_offsets(log) == [o for o in range(40) if o != h.base_offset]
    assert log.append_records([(b"n", b"v")], timestamp_ms=TS) == 40


def test_bad_length_header_in_tail(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    path, size = log.active.path, log.active.size
    log.close_sync()
    with open(path, "ab") as f:
        f.write(struct.pack(">qi", 3, 10**9) + b"\x00" * 60)  # claims a huge batch
    log = open_log(tmp_path)
    assert log.log_end_offset == 3 and os.path.getsize(path) == size


async def test_group_commit_concurrent_appenders(tmp_path):
    from coordinator.log import partition

    log = await PartitionLog.open(tmp_path, CFG)
    before = partition.SYNCER.rounds
    batch = build_batch([(b"k", b"v")], timestamp_ms=TS)
    offsets = await asyncio.gather(*(log.append_durable(batch) for _ in range(200)))
    assert sorted(offsets) == list(range(200))
    assert log.durable_offset == 200
    assert partition.SYNCER.rounds - before < 50  # shared: far fewer syncs than appends
    await log.close()
    log = await PartitionLog.open(tmp_path, CFG)
    assert log.log_end_offset == 200
    await log.close()


async def test_flush_policies(tmp_path):
    log = await PartitionLog.open(tmp_path / "n", LogConfig(fsync="never", maintenance_interval_ms=None))
    await log.append_durable(build_batch([(b"k", b"v")], timestamp_ms=TS))
    assert log.durable_offset == 0  # not synced by append under 'never'
    await log.flush()
    assert log.durable_offset == 1
    await log.close()
    log = await PartitionLog.open(
        tmp_path / "i", LogConfig(fsync="interval", fsync_interval_ms=10, maintenance_interval_ms=None)
    )
    log.append_records([(b"k", b"v")], timestamp_ms=TS)
    for _ in range(100):
        if log.durable_offset == 1:
            break
        await asyncio.sleep(0.01)
    assert log.durable_offset == 1
    await log.close()


async def test_retention_by_time_and_bytes(tmp_path):
    log = await PartitionLog.open(
        tmp_path, LogConfig(segment_bytes=1000, retention_ms=1000, maintenance_interval_ms=None)
    )
    fill(log, 40, ts=TS)
    n_before = len(log.segments)
    assert await log.apply_retention(now=TS + 39 + 500) == 0
    deleted = await log.apply_retention(now=TS + 10_000)
    assert deleted == n_before - 1 and len(log.segments) == 1  # the active one stays
    assert log.log_start_offset == log.segments[0].base_offset
    assert all_offsets(log) == list(range(log.log_start_offset, 40))
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    await log.close()

    log = await PartitionLog.open(
        tmp_path / "b",
        LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=None, maintenance_interval_ms=None),
    )
    fill(log, 40)
    await log.apply_retention()
    assert log.size_bytes - log.segments[0].size < 2500 <= log.size_bytes + 1000
    await log.close()
    log = await PartitionLog.open(tmp_path / "b", LogConfig(segment_bytes=1000, maintenance_interval_ms=None))
    assert all_offsets(log)[0] == log.log_start_offset > 0
    await log.close()


async def test_delete_records_before(tmp_path):
    log = await PartitionLog.open(tmp_path, CFG)
    fill(log, 40)
    await log.delete_records_before(17)
    assert log.log_start_offset == 17
    assert all_offsets(log, 0)[0] == 17
    assert log.segments[0].base_offset <= 17
    await log.close()
    log = await PartitionLog.open(tmp_path, CFG)
    assert log.log_start_offset == 17  # checkpointed
    await log.close()


async def test_background_maintenance_runs(tmp_path):
    log = await PartitionLog.open(tmp_path, LogConfig(segment_bytes=1000, retention_ms=1, maintenance_interval_ms=20))
    fill(log, 40, ts=0)
    for _ in range(100):
        if len(log.segments) == 1:
            break
        await asyncio.sleep(0.02)
    assert len(log.segments) == 1
    await log.close()


def _seg_states(log):
    return [
        (
            s.base_offset,
            s.size,
            s.next_offset,
            s.batches,
            s.max_timestamp,
            s.max_timestamp_pos,
            list(s.idx_offsets),
            list(s.idx_positions),
            list(s.idx_max_ts_before),
        )
        for s in log.segments
    ]


def _spy_scans(monkeypatch) -> list:
    """(base offset, first byte scanned, file size) of every segment scan at open."""
    from coordinator.log.segment import Segment

    scanned = []
    real_scan = Segment._scan
    monkeypatch.setattr(
        Segment,
        "_scan",
        lambda self, buf, mo, crc, start=0, limit=None: (
            scanned.append((self.base_offset, start, len(buf))),
            real_scan(self, buf, mo, crc, start, limit),
        )[1],
    )
    return scanned


async def test_clean_shutdown_leaves_nothing_to_scan(tmp_path, monkeypatch):
    log = await PartitionLog.open(tmp_path, CFG, background=False)
    fill(log, 60)
    await log.close()
    assert (tmp_path / "recovery-point").exists()
    scanned = _spy_scans(monkeypatch)
    log = open_log(tmp_path)
    assert len(scanned) > 1 and all(start == end for _, start, end in scanned)
    restored = _seg_states(log)
    log.close_sync()
    # a full scan builds exactly the restored state
    (tmp_path / "recovery-point").unlink()
    log = open_log(tmp_path)
    assert _seg_states(log) == restored
    log.close_sync()


async def test_crash_rescans_only_what_follows_the_recovery_point(tmp_path, monkeypatch):
    log = await PartitionLog.open(tmp_path, CFG, background=False)
    fill(log, 60)
    await log.checkpoint()
    at_checkpoint = {s.base_offset: s.size for s in log.segments}
    fill(log, 30, start=60)  # appended (and fsynced) after the recovery point, then a crash
    await log.flush()
    log.close_sync()
    scanned = _spy_scans(monkeypatch)
    log = open_log(tmp_path)
    assert all_offsets(log) == list(range(90))
    for base, start, _ in scanned:
        assert start == at_checkpoint.get(base, 0)
    assert any(start < end for _, start, end in scanned)
    # the open verified the new tail and moved the recovery point past it
    scanned.clear()
    log.close_sync()
    log = open_log(tmp_path)
    assert all(start == end for _, start, end in scanned)
    log.close_sync()


async def test_compaction_moves_the_recovery_point(tmp_path, monkeypatch):
    cfg = LogConfig(
        segment_bytes=1000, index_interval_bytes=100, maintenance_interval_ms=None, cleanup_policy="compact"
    )
    log = await PartitionLog.open(tmp_path, cfg, background=False)
    for i in range(60):
        log.append_records([(b"k%d" % (i % 3), b"v%d" % i + b"x" * 20)], timestamp_ms=TS + i)
    await log.checkpoint()
    await log.compact(now=TS)
    states = _seg_states(log)
    log.close_sync()  # a crash right after compaction
    scanned = _spy_scans(monkeypatch)
    log = open_log(tmp_path)
    assert all(start == end for _, start, end in scanned)
    assert _seg_states(log) == states
    assert [r.value[:3] for r in log.records()][-3:] == [b"v57", b"v58", b"v59"]
    log.close_sync()


async def test_checkpoint_then_bytes_appended_are_verified(tmp_path):
    log = await PartitionLog.open(tmp_path, CFG, background=False)
    fill(log, 3)
    await log.close()
    seg = sorted(tmp_path.glob("*.log"))[-1]
    good = build_batch([(b"k", b"v")], timestamp_ms=TS, base_offset=3)
    with open(seg, "ab") as f:  # a whole batch written after the checkpoint, then a torn one
        f.write(good + good[:30])
    log = open_log(tmp_path)
    assert all_offsets(log) == [0, 1, 2, 3]
    log.close_sync()


async def test_damaged_checkpoint_is_ignored(tmp_path, monkeypatch):
    log = await PartitionLog.open(tmp_path, CFG, background=False)
    fill(log, 30)
    await log.close()
    path = tmp_path / "recovery-point"
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF
    path.write_bytes(bytes(data))
    scanned = _spy_scans(monkeypatch)
    log = open_log(tmp_path)
    assert all_offsets(log) == list(range(30))
    assert all(start == 0 for _, start, _ in scanned)
    log.close_sync()


def test_chunks_are_whole_batches(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=5000, index_interval_bytes=100, maintenance_interval_ms=None))
    fill(log, 200)
    log.append_records([(b"big", b"x" * 3000)], timestamp_ms=TS)  # bigger than a chunk
    fill(log, 20, start=201)
    for start in (0, 57, 200, 220):
        chunks = list(log.chunks(start, chunk_bytes=512))
        assert all(len(c) <= 512 or len(list(iter_batches(c))) == 1 for c in chunks)
        got = [r.offset for c in chunks for r in iter_records(c)]
        want = [r.offset for h, b in log.batches(start) for r in iter_records(b)]
        assert got == want and got[-1] == 220
    log.close_sync()


async def test_checkpoint_longer_than_the_segment_is_not_trusted(tmp_path, monkeypatch):
    log = await PartitionLog.open(tmp_path, CFG, background=False)
    fill(log, 5)
    await log.close()
    seg = sorted(tmp_path.glob("*.log"))[-1]
    with open(seg, "r+b") as f:  # the file lost its tail behind the checkpoint's back
        f.truncate(seg.stat().st_size - 10)
    scanned = _spy_scans(monkeypatch)
    log = open_log(tmp_path)
    assert all_offsets(log) == [0, 1, 2, 3]  # the torn last batch is cut, the rest kept
    assert scanned and all(start == 0 for _, start, _ in scanned)
    log.close_sync()


async def test_a_missing_segment_is_logged(tmp_path, caplog):
    log = await PartitionLog.open(
        tmp_path,
        LogConfig(segment_bytes=1000, maintenance_interval_ms=None, checkpoint_interval_ms=None),
        background=False,
    )
    fill(log, 40)
    assert len(log.segments) >= 3
    lost = log.segments[1].path
    await log.close()  # writes the recovery point, which lists every segment
    lost.unlink()
    with caplog.at_level("ERROR"):
        log = open_log(tmp_path)
    assert "segment files missing" in caplog.text and lost.name in caplog.text
    log.close_sync()


@pytest.mark.parametrize("text", ["abc", "-5", str(2**63), "99999999999999999999999"])
def test_a_log_start_offset_file_that_is_no_offset_is_ignored(tmp_path, text, caplog):
    log = open_log(tmp_path)
    fill(log, 3)
    log.close_sync()
    (tmp_path / "log-start-offset").write_text(text + "\n")
    with caplog.at_level("WARNING"):
        log = open_log(tmp_path)
    assert log.log_start_offset == 0 and all_offsets(log) == [0, 1, 2] and "unreadable log-start-offset" in caplog.text
    log.close_sync()  # (the recovery point it writes holds the offsets: no overflow)


def test_a_file_named_like_a_segment_past_int64_is_ignored(tmp_path, caplog):
    log = open_log(tmp_path)
    fill(log, 3)
    log.close_sync()
    (tmp_path / ("9" * 23 + ".log")).write_bytes(b"xx")
    with caplog.at_level("WARNING"):
        log = open_log(tmp_path)
    assert all_offsets(log) == [0, 1, 2] and "is not a segment" in caplog.text
    log.close_sync()
