"""pipeline.segments: end offsets from batch headers, and what a damaged file yields. No Spark."""

from __future__ import annotations

from coordinator.log.partition import PartitionLog
from pipeline.segments import BadBatch, SegmentFile, log_end_offset, read_segment, segment_files
from protocol.record_batch import build_batch


def test_end_offset_equals_the_writers_after_appends_a_torn_tail_and_a_roll(tmp_path):
    plog = PartitionLog.open_sync(tmp_path / "t-0")
    for i in range(20):
        plog.append_records([(None, b"x")] * (i + 1), 1_000)
    expected = plog.log_end_offset
    plog.close_sync()
    assert log_end_offset(tmp_path / "t-0") == (0, expected)
    segment = next((tmp_path / "t-0").glob("*.log"))
    half = build_batch([(None, b"y" * 100)], timestamp_ms=1_000, base_offset=expected)
    with open(segment, "ab") as f:
        f.write(half[: len(half) // 2])  # a torn write after the last whole batch
    assert log_end_offset(tmp_path / "t-0") == (0, expected)
    (tmp_path / "t-0" / f"{expected + 5:020d}.log").touch()  # an empty rolled segment: its name is the end
    (tmp_path / "t-0" / "log-start-offset").write_text("7\n")
    assert log_end_offset(tmp_path / "t-0") == (7, expected + 5)
    empty = tmp_path / "u-0"
    empty.mkdir()
    assert log_end_offset(empty) == (0, 0)


def test_a_torn_tail_is_one_bad_batch_after_every_whole_one(tmp_path):
    plog = PartitionLog.open_sync(tmp_path / "t-0")
    for _ in range(3):
        plog.append_records([(b"k", b"v")] * 2, 1_000)
    plog.close_sync()
    path = next((tmp_path / "t-0").glob("*.log"))
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00" * 30)
    [seg] = segment_files(tmp_path)
    assert seg == SegmentFile("t", 0, str(path), size + 30)
    items = list(read_segment(seg))
    assert [[r.offset for r in item[1]] for item in items[:-1]] == [[0, 1], [2, 3], [4, 5]]
    assert type(items[-1]) is BadBatch and items[-1].position == size and items[-1].base_offset == -1
