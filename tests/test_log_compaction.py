import asyncio
import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.log import LogConfig, PartitionLog
from coordinator.log.compaction import finish_interrupted_swaps
from protocol.record_batch import GZIP, NONE

TS = 1_700_000_000_000
CFG = LogConfig(
    segment_bytes=400,
    index_interval_bytes=64,
    cleanup_policy="compact",
    delete_retention_ms=1000,
    maintenance_interval_ms=None,
)


def model_after(ops):
    """key -> (offset, value) of the latest record per key, tombstones included."""
    latest = {}
    offset = 0
    for batch in ops:
        for k, v in batch:
            latest[k] = (offset, v)
            offset += 1
    return latest


def live(log):
    return {r.key: (r.offset, r.value) for r in log.records()}


keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"])
values = st.none() | st.binary(min_size=1, max_size=30)
batches = st.lists(st.tuples(keys, values), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(st.lists(batches, min_size=1, max_size=40), st.sampled_from([NONE, GZIP]), st.booleans())
def test_compaction_keeps_latest_per_key(ops, codec, tombstones_expired):
    async def run(d: Path):
        log = await PartitionLog.open(d, CFG)
        for i, batch in enumerate(ops):
            log.append_records(batch, timestamp_ms=TS + i, compression=codec)
        end = log.log_end_offset
        before = list(log.records())
        now = TS + len(ops) + (10_000 if tombstones_expired else 0)
        active_base = log.active.base_offset
        await log.compact(now=now)
        latest = model_after(ops)
        after = list(log.records())
        got = {r.key: (r.offset, r.value) for r in after}
        for k, (off, v) in latest.items():
            if off >= active_base:
                assert got[k] == (off, v)  # the active segment is never touched
            elif v is None and tombstones_expired:
                assert k not in got
            else:
                assert got[k] == (off, v)
        # every survivor is an original record at its original offset, in order
        original = {r.offset: (r.key, r.value) for r in before}
        assert all(original[r.offset] == (r.key, r.value) for r in after)
        offsets = [r.offset for r in after]
        assert offsets == sorted(offsets)
        # below the active segment, at most one record per key remains
        closed_keys = [r.key for r in after if r.offset < active_base]
        assert len(closed_keys) == len(set(closed_keys))
        assert log.log_end_offset == end
        await log.compact(now=now)  # idempotent
        assert list(log.records()) == after
        assert log.append_records([(b"z", b"1")], timestamp_ms=now) == end
        await log.close()
        log = await PartitionLog.open(d, CFG)  # survives reopen
        assert [r.offset for r in log.records()] == offsets + [end]
        await log.close()
        assert not [p for p in os.listdir(d) if p.endswith((".swap", ".cleaned"))]

    with tempfile.TemporaryDirectory() as d:
        asyncio.run(run(Path(d)))


async def test_compaction_merges_small_segments_and_reads_across_gaps(tmp_path):
    log = await PartitionLog.open(tmp_path, CFG)
    for i in range(60):
        log.append_records([(b"k%d" % (i % 3), b"v%d" % i)], timestamp_ms=TS + i)
    n_before = len(log.segments)
    stats = await log.compact(now=TS)
    assert stats.segments_out < stats.segments_in and len(log.segments) < n_before
    survivors = [r.offset for r in log.records()]
    # reading at any offset (also inside gaps) gives the first batch at or after it
    for off in range(0, 60):
        data = log.read(off, 1)
        first = next(iter(__import__("protocol.record_batch", fromlist=["x"]).iter_records(data)))
        assert first.offset == min(o for o in survivors if o >= off)
    await log.close()


def test_interrupted_swap_is_completed(tmp_path):
    async def build():
        log = await PartitionLog.open(tmp_path, CFG)
        for i in range(30):
            log.append_records([(b"k%d" % (i % 2), b"v%d" % i)], timestamp_ms=TS + i)
        await log.close()

    asyncio.run(build())
    names = sorted(p.name for p in tmp_path.glob("*.log"))
    assert len(names) >= 3
    first, second, third = (int(n[:20]) for n in names[:3])
    # a committed swap that replaces the first two segments with the first one's content
    swap = tmp_path / f"{first:020d}-{third:020d}.swap"
    swap.write_bytes((tmp_path / names[0]).read_bytes())
    (tmp_path / f"{first:020d}-{third:020d}.cleaned").write_bytes(b"partial")
    finish_interrupted_swaps(tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert names[1] not in left and names[0] in left
    assert not [n for n in left if n.endswith((".swap", ".cleaned"))]
    log = PartitionLog.open_sync(tmp_path, CFG)
    assert log.log_end_offset == 30
    offsets = [r.offset for r in log.records()]
    assert offsets == sorted(offsets) and offsets[-1] == 29
    log.close_sync()
