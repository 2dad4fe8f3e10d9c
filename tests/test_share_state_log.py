"""`__share_group_state` in process: Kafka's ShareSnapshot / ShareUpdate bytes, a snapshot
once N updates followed the last, updates of a superseded snapshot ignored at replay, pruning below the
oldest snapshot still needed, and `python -m coordinator.log dump` decoding it; the
share-group records of `__consumer_offsets` round-trip too."""

from __future__ import annotations

import asyncio
import errno
import uuid

from kio.schema.errors import ErrorCode as E

from coordinator.log.__main__ import main as log_tool
from coordinator.share.state_log import ShareCoordinator, kafka_uuid
from protocol import share_records as R
from protocol.group_records import decode_record, encode_key, encode_value

TOPIC_ID = uuid.UUID("5b0e3a6c-8d3e-4a57-9a44-0c2b6b7e0f11")


def test_state_record_bytes():
    key = R.ShareStateKey(True, "g", TOPIC_ID, 3)
    raw = R.encode_state_key(key)
    assert raw[:2] == b"\x00\x00" and R.decode_state_key(raw) == key  # type 0: ShareSnapshot
    assert R.encode_state_key(R.ShareStateKey(False, "g", TOPIC_ID, 3))[:2] == b"\x00\x01"  # type 1: ShareUpdate
    snap = R.ShareSnapshotValue(
        2, 1, 0, 10, 1000, 2000, (R.StateBatch(10, 12, R.ACKNOWLEDGED, 1), R.StateBatch(13, 13, R.AVAILABLE, 3))
    )
    assert R.decode_state_value(key, R.encode_state_value(snap)) == snap
    counted = R.ShareUpdateValue(2, 0, -1, (R.StateBatch(14, 14, R.ARCHIVED, 5),), delivery_complete_count=4)
    raw = R.encode_state_value(counted)
    assert R.decode_state_value(R.ShareStateKey(False, "g", TOPIC_ID, 3), raw) == counted
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.toString


def test_share_group_records_round_trip():
    records = {
        R.ShareGroupMetadataKey("g"): R.ShareGroupMetadataValue(7, -123456789),
        R.ShareGroupMemberMetadataKey("g", "m"): R.ShareGroupMemberMetadataValue("rack", "cid", "/1.2.3.4", ("a", "b")),
        R.ShareGroupTargetAssignmentMetadataKey("g"): R.ShareGroupTargetAssignmentMetadataValue(7),
        R.ShareGroupTargetAssignmentMemberKey("g", "m"): R.ShareGroupTargetAssignmentMemberValue(((TOPIC_ID, (0, 2)),)),
        R.ShareGroupCurrentMemberAssignmentKey("g", "m"): R.ShareGroupCurrentMemberAssignmentValue(
            7, 6, 0, ((TOPIC_ID, (0, 2)),)
        ),
    }
    for key, value in records.items():
        raw_key, raw_value = encode_key(key), encode_value(value)
        assert decode_record(raw_key, raw_value) == (key, value)
        assert decode_record(raw_key, None) == (key, None)
    assert encode_key(R.ShareGroupMetadataKey("g"))[:2] == b"\x00\x0b"  # key type 11
    # Kafka 4.0 wrote the epoch without the metadata hash: still read.
    assert decode_record(encode_key(R.ShareGroupMetadataKey("g")), b"\x00\x00\x00\x00\x00\x05\x00") == (
        R.ShareGroupMetadataKey("g"),
        R.ShareGroupMetadataValue(5, 0),
    )


async def test_snapshots_updates_replay_and_pruning(tmp_path, capsys):
    state = await ShareCoordinator.open(tmp_path, 1, "always", 1000, snapshot_every=3)
    key = ("g", TOPIC_ID, 0)

    async def write(start, runs, **kw):
        fut = asyncio.get_running_loop().create_future()
        state.write(key, start, runs, 1000, fut.set_result, **kw)
        assert await fut == 0

    await write(0, [], full=True)  # the first snapshot (epoch 0): the share-partition initialized
    await write(0, [(0, 4, R.AVAILABLE, 1)])  # acquired 0-4 (written as Available, counted): 1 update
    await write(2, [(0, 1, R.ACKNOWLEDGED, 1)])  # 0-1 accepted, the start moves to 2: 2 updates
    await write(2, [(2, 2, R.ARCHIVED, 1)])  # 3 updates: the limit
    await write(3, [(3, 3, R.AVAILABLE, 2)])  # so a snapshot instead (epoch 1), the count reset
    assert state.states[key].snapshot_epoch == 1
    await write(3, [(3, 3, R.AVAILABLE, 3)])  # 1 update since
    expected = state.states[key]
    assert (expected.snapshot_epoch, expected.updates, expected.start) == (1, 1, 3)
    assert expected.records == {3: (R.AVAILABLE, 3), 4: (R.AVAILABLE, 1)}
    await asyncio.gather(*state._pruning)  # (pruning runs as a task)
    plog = state.log.logs[0]
    snapshot_offset = state.shards[0].durable[key].snapshot_offset
    assert plog.log_start_offset == snapshot_offset > 0  # the records before the snapshot went
    await state.close()

    again = await ShareCoordinator.open(tmp_path, 1, "always", 1000, snapshot_every=3)
    assert again.load() == 2  # the snapshot and the update after it
    loaded = again.states[key]
    assert (loaded.start, loaded.records, loaded.snapshot_epoch) == (3, expected.records, 1)
    await again.close()

    assert log_tool(["dump", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "key: ShareStateKey(snapshot=True, group='g'" in out and "ShareSnapshotValue(snapshot_epoch=1" in out
    assert "ShareUpdateValue(snapshot_epoch=1, leader_epoch=0, start_offset=3" in out


async def test_updates_of_a_superseded_snapshot_are_ignored(tmp_path):
    state = await ShareCoordinator.open(tmp_path, 1, "always", 1000)
    key = ("g", TOPIC_ID, 0)
    shard = state.shard_of(key)
    raw = R.encode_state_key(R.ShareStateKey(False, "g", TOPIC_ID, 0))
    shard.replay(shard.durable, R.ShareStateKey(True, "g", TOPIC_ID, 0), R.ShareSnapshotValue(4, 0, 0, 0), 0)
    update = R.ShareUpdateValue(3, 0, 5, (R.StateBatch(5, 6, R.ARCHIVED, 1),))
    shard.replay(shard.durable, R.decode_state_key(raw), update, 1)
    assert (shard.durable[key].start, shard.durable[key].records) == (0, {})
    await state.close()


async def test_a_snapshot_holds_the_updates_queued_before_it(tmp_path):
    """Two writes in one turn of the loop, the second a snapshot: the snapshot has the first's
    change, so replay (which drops updates of the older snapshot epoch) loses nothing."""
    state = await ShareCoordinator.open(tmp_path, 1, "always", 1000, snapshot_every=1)
    key = ("g", TOPIC_ID, 0)
    first = asyncio.get_running_loop().create_future()
    state.write(key, 0, [], 1000, first.set_result, full=True)
    await first
    done = [asyncio.get_running_loop().create_future() for _ in range(2)]
    state.write(key, 0, [(0, 0, R.ACKNOWLEDGED, 1)], 1000, done[0].set_result)  # an update...
    state.write(key, 0, [(1, 1, R.ARCHIVED, 1)], 1000, done[1].set_result)  # ... then a snapshot
    assert await asyncio.gather(*done) == [0, 0]
    await state.close()
    again = await ShareCoordinator.open(tmp_path, 1, "always", 1000)
    again.load()
    assert again.states[key].records == {0: (R.ACKNOWLEDGED, 1), 1: (R.ARCHIVED, 1)}
    await again.close()


async def test_cold_share_partitions_are_snapshotted_once_their_last_snapshot_is_old(tmp_path):
    """Kafka's ShareCoordinatorShard.snapshotColdPartitions: a share-partition whose last
    snapshot is at least the interval old gets a new one of its state as it is (create
    timestamp kept, written now), which lets the records before it be pruned; a partition of
    the topic whose share-partitions were all cold-snapshotted already is skipped."""
    state = await ShareCoordinator.open(tmp_path, 1, "always", 1000)
    hot, cold = ("g", TOPIC_ID, 0), ("g", TOPIC_ID, 1)

    async def write(key, start, runs, now, **kw):
        fut = asyncio.get_running_loop().create_future()
        state.write(key, start, runs, now, fut.set_result, **kw)
        assert await fut == 0

    async def snapshot_cold(now):
        fut = asyncio.get_running_loop().create_future()
        count = state.snapshot_cold(now, 1000, lambda: fut.set_result(None))
        await fut
        return count

    await write(cold, 0, [(0, 1, R.ACKNOWLEDGED, 1)], 1000)  # a first snapshot at 1000
    await write(cold, 2, [(2, 2, R.AVAILABLE, 1)], 1500)  # an update: the snapshot stays at 1000
    await write(hot, 0, [(0, 0, R.AVAILABLE, 1)], 1800)
    assert await snapshot_cold(1999) == 0  # (none is 1000 ms old)
    assert await snapshot_cold(2000) == 1
    s = state.states[cold]
    assert (s.snapshot_epoch, s.updates, s.create_timestamp, s.write_timestamp) == (1, 1, 1000, 2000)
    assert await snapshot_cold(2800) == 1  # hot's, whose snapshot is now 1000 ms old
    assert await snapshot_cold(9000) == 0  # every one was: skipped
    expected = {k: (v.start, v.records, v.snapshot_epoch) for k, v in state.states.items()}
    await asyncio.gather(*state._pruning)
    oldest_snapshot = min(v.snapshot_offset for v in state.shards[0].durable.values())
    assert state.log.logs[0].log_start_offset == oldest_snapshot > 0
    await state.close()
    again = await ShareCoordinator.open(tmp_path, 1, "always", 1000)
    again.load()
    assert {k: (v.start, v.records, v.snapshot_epoch) for k, v in again.states.items()} == expected
    await again.close()


class FailingAppends:
    """While on, every append to the state topic fails as a full disk makes it fail (reported
    on the loop's next turn), and nothing of it reaches the log (OffsetsLog's fault seam)."""

    def __init__(self, state: ShareCoordinator) -> None:
        self.log = state.log

    def __enter__(self) -> None:
        self.log.fault = lambda partition: OSError(errno.ENOSPC, "No space left on device")

    def __exit__(self, *exc) -> None:
        self.log.fault = None


def views(state: ShareCoordinator) -> tuple[dict, dict]:
    """What operations read (states) and what the log holds (durable), per share-partition:
    its state epoch, start, records and snapshot epoch."""

    def view(states):
        return {k: (s.state_epoch, s.start, s.records, s.snapshot_epoch) for k, s in states.items()}

    return view(state.states), view({k: s for shard in state.shards for k, s in shard.durable.items()})


async def test_a_failed_write_leaves_what_a_restart_rebuilds(tmp_path):
    """Each operation of the share coordinator's shards whose append fails (a write, an
    initialization, a deletion, a cold snapshot) is answered with the write's error and leaves
    memory as a replay of the log rebuilds it; the share-partition's next write is a snapshot,
    so that what its live state kept is in the log again."""
    state = await ShareCoordinator.open(tmp_path, 1, "always", 1000, snapshot_every=5)
    key, other = ("g", TOPIC_ID, 0), ("g", TOPIC_ID, 1)

    async def run(op, *args, **kw):
        fut = asyncio.get_running_loop().create_future()
        op(*args, fut.set_result, **kw)
        return await fut

    async def restarted() -> tuple[dict, dict]:
        again = await ShareCoordinator.open(tmp_path, 1, "always", 1000, snapshot_every=5)
        again.load()
        rebuilt = views(again)
        await again.close()
        return rebuilt

    assert await run(state.initialize, key, 3, 1000) == 0
    assert await run(state.write, key, 0, [(0, 4, R.AVAILABLE, 1)], 1000, state_epoch=3) == 0
    before = views(state)
    with FailingAppends(state):
        # two writes queued together: the second, computed on the first, fails with it
        first = asyncio.get_running_loop().create_future()
        state.write(key, 2, [(0, 1, R.ACKNOWLEDGED, 1)], 1100, first.set_result, state_epoch=3)
        assert state.states[key].start == 2  # (what the next operation computes on)
        assert await run(state.write, key, 3, [(2, 2, R.ARCHIVED, 1)], 1100, state_epoch=3) == E.not_coordinator
        assert await first == E.not_coordinator
        assert await run(state.initialize, other, 3, 1100) == E.not_coordinator
        assert await run(state.delete, key) == E.not_coordinator
        cold = asyncio.get_running_loop().create_future()
        assert state.snapshot_cold(999_999, 1000, lambda: cold.set_result(None)) == 1
        await cold
    assert views(state) == before == await restarted()
    # written again: a snapshot (epoch 1) of the share-partition as given, though one update follows the last
    assert await run(state.write, key, 2, [(0, 1, R.ACKNOWLEDGED, 1)], 1200, state_epoch=3) == 0
    assert state.states[key].snapshot_epoch == 1
    assert views(state) == await restarted()
    await state.close()
