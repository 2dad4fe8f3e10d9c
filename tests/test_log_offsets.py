import asyncio

from coordinator.log import OffsetsLog, java_string_hashcode, partition_for
from coordinator.log.__main__ import main as dump_main
from protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)


def test_java_string_hashcode():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hashcode("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair
    assert java_string_hashcode("zzzzzzzzzz") < 0  # wraps at 32 bits


def test_partition_for_matches_kafka_utils_abs():
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    h = java_string_hashcode("zzzzzzzzzz")
    assert partition_for("zzzzzzzzzz", 50) == (-h) % 50  # Math.abs, not a 0x7fffffff mask
    assert partition_for("hello", 50) == 99162322 % 50


async def test_offsets_log_append_replay_reopen(tmp_path):
    olog = await OffsetsLog.open(tmp_path, partitions=5)
    member = MemberMetadata("m-1", "client", "/127.0.0.1", 10_000, b"sub", b"asg", 30_000, None)
    gm = GroupMetadataValue("consumer", 3, "range", "m-1", (member,), 1234)
    for g in ("g1", "g2", "polygenelubricants"):
        await olog.append(g, [(GroupMetadataKey(g), gm)])
        await olog.append(g, [(OffsetCommitKey(g, "t", p), OffsetCommitValue(10 + p, "", 99, 4)) for p in range(3)])
    await olog.append("g1", [(OffsetCommitKey("g1", "t", 0), None)])
    assert all(plog.durable_offset == plog.log_end_offset for plog in olog.logs)
    p1 = olog.partition_for("g1")
    recs = [r for r in olog.replay(p1) if r.key.group == "g1"]
    assert [r.offset for r in recs] == sorted(r.offset for r in recs)
    assert recs[0].value == gm and recs[-1].value is None
    assert recs[1].value == OffsetCommitValue(10, "", 99, 4)
    await olog.close()
    assert (tmp_path / "__consumer_offsets-0").is_dir()
    assert (tmp_path / "__consumer_offsets-4").is_dir()

    olog = await OffsetsLog.open(tmp_path, partitions=5)
    all_recs = list(olog.replay_all())
    assert len(all_recs) == 3 * 4 + 1
    assert {r.partition for r in all_recs} == {olog.partition_for(g) for g in ("g1", "g2", "polygenelubricants")}
    await olog.close()


async def test_concurrent_commits_are_durable(tmp_path):
    olog = await OffsetsLog.open(tmp_path, partitions=3)
    await asyncio.gather(
        *(
            olog.append(f"g{i % 7}", [(OffsetCommitKey(f"g{i % 7}", "t", 0), OffsetCommitValue(i, "", 0))])
            for i in range(100)
        )
    )
    assert sum(plog.log_end_offset for plog in olog.logs) == 100
    await olog.close()


async def test_dump_cli(tmp_path, capsys):
    olog = await OffsetsLog.open(tmp_path, partitions=1)
    await olog.append("grp", [(OffsetCommitKey("grp", "topic", 2), OffsetCommitValue(42, "md", 7))])
    await olog.close()
    assert dump_main(["dump", str(tmp_path / "__consumer_offsets-0")]) == 0
    out = capsys.readouterr().out
    assert "baseOffset: 0 lastOffset: 0 count: 1" in out
    assert "OffsetCommitKey(group='grp', topic='topic', partition=2)" in out
    assert "OffsetCommitValue(offset=42" in out
    seg = next((tmp_path / "__consumer_offsets-0").glob("*.log"))
    with open(seg, "ab") as f:
        f.write(b"\x00" * 20)
    assert dump_main(["dump", str(seg), "--no-records"]) == 1
    assert "ERROR" in capsys.readouterr().out


async def test_latest_matches_replay(tmp_path):
    olog = await OffsetsLog.open(tmp_path, partitions=1)
    for i in range(30):
        g = f"g{i % 3}"
        await olog.append(g, [(OffsetCommitKey(g, "t", i % 2), OffsetCommitValue(i, "", i))])
    await olog.append("g0", [(OffsetCommitKey("g0", "t", 0), None)])
    model = {}
    for r in olog.replay(0):
        model[r.key] = r
    assert olog.latest(0) == model
    assert olog.latest(0)[OffsetCommitKey("g0", "t", 0)].value is None
    await olog.close()


async def test_appends_in_one_iteration_share_a_batch(tmp_path):
    olog = await OffsetsLog.open(tmp_path, partitions=1)
    firsts = await asyncio.gather(
        olog.append("a", [(OffsetCommitKey("a", "t", p), OffsetCommitValue(p, "", 5)) for p in range(3)]),
        olog.append("b", [(OffsetCommitKey("b", "t", 0), OffsetCommitValue(9, "", 7))], timestamp_ms=123),
        olog.append("c", [(OffsetCommitKey("c", "t", 0), None)]),
    )
    assert firsts == [0, 3, 4]
    batches = list(olog.logs[0].batches())
    assert len(batches) == 1 and batches[0][0].record_count == 5
    recs = list(olog.replay(0))
    assert [(r.offset, r.key.group) for r in recs] == [(0, "a"), (1, "a"), (2, "a"), (3, "b"), (4, "c")]
    assert recs[3].timestamp == 123 and recs[4].value is None
    assert olog.logs[0].durable_offset == 5
    await olog.close()


async def test_append_to_a_closed_log_fails_every_caller(tmp_path):
    olog = await OffsetsLog.open(tmp_path, partitions=1)
    await olog.close()
    results = await asyncio.gather(
        *(olog.append("g", [(OffsetCommitKey("g", "t", i), None)]) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_dump_cli_finds_a_groups_partition_in_a_data_dir(tmp_path, capsys):
    olog = await OffsetsLog.open(tmp_path, partitions=5)
    for group in ("demo", "other", "third"):
        await olog.append(group, [(OffsetCommitKey(group, "orders", 0), OffsetCommitValue(7, "", 1))])
    await olog.close()
    assert dump_main(["dump", str(tmp_path), "--group", "demo"]) == 0
    out = capsys.readouterr().out
    assert f"__consumer_offsets-{partition_for('demo', 5)}" in out
    assert "OffsetCommitKey(group='demo', topic='orders', partition=0)" in out and "other" not in out
    assert dump_main(["dump", str(tmp_path)]) == 0  # the whole data dir
    out = capsys.readouterr().out
    assert all(f"group='{g}'" in out for g in ("demo", "other", "third"))
    assert dump_main(["dump", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'missing'}: no such file or directory"


async def test_merged_batches_are_the_bytes_aiokafkas_builder_makes(tmp_path):
    """The log encodes appended records itself (compiled): the same bytes as aiokafka's
    DefaultRecordBatchBuilder, whatever the lengths (one- to three-byte varints), tombstones,
    timestamps going back, and the cut into several batches past MAX_MERGED_BATCH_BYTES."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    from coordinator.log.offsets import MAX_MERGED_BATCH_BYTES, _build_merged, _encode_merged

    olog = await OffsetsLog.open(tmp_path, partitions=1, background=False)
    big = b"v" * (MAX_MERGED_BATCH_BYTES // 2 + 1)
    appends = [
        ([(b"k", b"v"), (b"k" * 64, None), (b"", b"x" * 8200)], 1_700_000_000_000),
        ([(b"k%d" % i, b"%d" % i * 30) for i in range(130)], 1_699_999_999_000),  # earlier: a negative delta
        ([(b"big", big)], 1_700_000_000_500),
        ([(b"big", big)], 1_700_000_000_400),  # the batch is past the limit now ...
        ([(b"z", None)], 1_700_000_000_600),  # ... so this starts a second one
    ]
    futures = [olog.append_to(0, records, timestamp_ms=ts) for records, ts in appends]
    firsts = await asyncio.gather(*futures)
    assert firsts == [0, 3, 133, 134, 135]

    def built(span):
        builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
        offset = 0
        for records, ts in span:
            for k, v in records:
                builder.append(offset, ts, k, v, [])
                offset += 1
        return bytes(builder.build())

    expected = [built(appends[:4]), built(appends[4:])]
    written = [bytearray(data) for _, data in olog.logs[0].batches()]
    for batch in written:
        batch[:8] = bytes(8)  # the base offset and the leader epoch the log assigned
        batch[12:16] = b"\xff" * 4
    assert [bytes(b) for b in written] == expected
    # (the log uses one of the two, compiled or not: each is checked against the other)
    queue = [(records, ts, None) for records, ts in appends]
    assert _encode_merged(queue) == _build_merged(queue)
    await olog.close()
