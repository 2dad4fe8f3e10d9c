"""pipeline.decode against the project's codec (protocol.group_records) and its log replay. No Spark."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pyarrow")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from coordinator.log.offsets import OffsetsLog  # noqa: E402
from protocol.group_records import OffsetCommitKey, OffsetCommitValue, decode_value, encode_value  # noqa: E402
from pipeline.decode import commit_value_fields, decode_segments  # noqa: E402
from pipeline.segments import OFFSETS_TOPIC, segment_files  # noqa: E402

from .logs import write_data_dir  # noqa: E402

KEY = OffsetCommitKey("g", "t", 0)


@given(
    offset=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
    metadata=st.text(max_size=40),
    commit_ts=st.integers(-1, 2**62),
    expire_ts=st.integers(-1, 2**62),
    version=st.sampled_from([0, 1, 2, 3, 4]),
)
def test_commit_value_fast_path_equals_the_codec(offset, epoch, metadata, commit_ts, expire_ts, version):
    value = OffsetCommitValue(
        offset=offset,
        metadata=metadata,
        commit_timestamp=commit_ts,
        leader_epoch=epoch if version >= 3 else -1,
        expire_timestamp=expire_ts if version == 1 else -1,
    )
    data = encode_value(value, version)
    v = decode_value(KEY, data)
    assert commit_value_fields(KEY, data) == (
        v.offset,
        v.leader_epoch,
        v.metadata,
        v.commit_timestamp,
        v.expire_timestamp,
    )


def test_undecodable_v3_value_still_raises_through_the_codec():
    data = bytearray(encode_value(OffsetCommitValue(offset=1, metadata="é", commit_timestamp=2), 3))
    data[16] = 0xFF  # invalid UTF-8 in the metadata
    with pytest.raises(ValueError):
        commit_value_fields(KEY, bytes(data))


def test_decoded_rows_equal_the_coordinators_replay(tmp_path):
    data = tmp_path / "data"
    asyncio.run(write_data_dir(data))
    rows = [r for b in decode_segments(segment_files(data, {OFFSETS_TOPIC}), batch_rows=7) for r in b.to_pylist()]
    assert {r["kind"] for r in rows} == {"commit", "group"}

    async def replay():
        log = await OffsetsLog.open(data, background=False)
        out = list(log.replay_all())
        await log.close()
        return out

    expected = []
    for r in asyncio.run(replay()):
        if type(r.key) is OffsetCommitKey:
            v = r.value
            expected.append(
                (
                    "commit",
                    r.key.group,
                    r.key.topic,
                    r.key.partition,
                    v and v.offset,
                    v and v.commit_timestamp,
                    v is None,
                    r.partition,
                    r.offset,
                )
            )
        else:
            expected.append(("group", r.key.group, None, None, None, None, r.value is None, r.partition, r.offset))
    got = [
        (
            r["kind"],
            r["group"],
            r["topic"],
            r["partition"],
            r["offset"],
            r["commit_timestamp"],
            r["tombstone"],
            r["log_partition"],
            r["log_offset"],
        )
        for r in rows
    ]
    order = lambda t: (t[7], t[8])  # noqa: E731
    assert sorted(got, key=order) == sorted(expected, key=order)


def test_transactional_commits_count_once_their_marker_commits(tmp_path):
    """Producer 7 commits its transaction, 8 aborts, 9 has no marker yet: only 7's offsets
    are commits, in the pipeline as in the coordinator's loading."""
    data = tmp_path / "data"

    async def write():
        log = await OffsetsLog.open(data, partitions=1, background=False)
        loop = asyncio.get_running_loop()

        async def done_of(append):
            fut = loop.create_future()
            append(lambda error, first: fut.set_result(error))
            assert await fut is None

        def value(offset):
            return OffsetCommitValue(offset=offset, metadata="", commit_timestamp=1)

        await done_of(lambda d: log.append_to(0, [(OffsetCommitKey("g", "t", 0), value(1))], d))
        for pid, offset in ((7, 70), (8, 80), (9, 90)):
            await done_of(
                lambda d, pid=pid, offset=offset: log.append_txn_to(
                    0, [(OffsetCommitKey("g", "t", pid), value(offset))], pid, 0, d
                )
            )
        await done_of(lambda d: log.append_marker_to(0, 7, 0, True, d))
        await done_of(lambda d: log.append_marker_to(0, 8, 0, False, d))
        loaded = {(k.topic, k.partition): v.offset for _, k, v in log.latest_records() if type(k) is OffsetCommitKey}
        await log.close()
        return loaded

    loaded = asyncio.run(write())
    rows = [r for b in decode_segments(segment_files(data, {OFFSETS_TOPIC})) for r in b.to_pylist()]
    commits = {(r["topic"], r["partition"]): r["offset"] for r in rows if r["kind"] == "commit"}
    assert commits == loaded == {("t", 0): 1, ("t", 7): 70}


async def test_consumer_group_epochs_are_group_rows_with_their_members(server):
    """A KIP-848 group run by a real server over its wire: each group epoch is one `group`
    row (group_type consumer) whose members are those ConsumerGroupDescribe showed at that
    epoch; deleting the group is a tombstone row."""
    from tests.support.wire_client import WireClient, request_class
    from tests.support.consumer_groups import HB, describe, hb

    conn = await WireClient("decode-test").connect("127.0.0.1", server.port)
    seen = []  # (epoch, members, client ids) as described after each step
    try:
        await conn.create_topics("t", partitions=4)
        steps = [
            hb("cg", "a", 0, ["t"]),
            hb("cg", "b", 0, ["t"]),
            hb("cg", "a", -1, owned=None),
            hb("cg", "b", -1, owned=None),
        ]
        for body in steps:
            assert (await conn.request(HB, 1, body)).error_code == 0
            (d,) = await describe(conn, "cg")
            seen.append((d.group_epoch, {m.member_id for m in d.members}, {m.client_id for m in d.members}))
        deleted = await conn.request(42, 2, request_class(42, 2)(groups_names=("cg",)))
        assert deleted.results[0].error_code == 0
    finally:
        await conn.close()
    server.stop()
    rows = [
        r
        for b in decode_segments(segment_files(server.data_dir, {OFFSETS_TOPIC}))
        for r in b.to_pylist()
        if r["kind"] == "group" and r["group"] == "cg"
    ]
    got = [
        (r["generation"], {m["member_id"] for m in r["members"]}, {m["client_id"] for m in r["members"]})
        for r in rows
        if not r["tombstone"]
    ]
    # A new group is at epoch 1 without a record, as Kafka's; each of the four steps bumps it.
    assert got == seen and [e for e, *_ in seen] == [2, 3, 4, 5]
    assert {r["group_type"] for r in rows} == {"consumer"} and rows[-1]["tombstone"]
    assert all(r["member_count"] == len(r["members"]) and r["leader"] is None for r in rows)
