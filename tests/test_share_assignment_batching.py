"""Kafka 4.3's assignment batching of share groups (KIP-1263): the target assignment computed
at most once per `group.share.assignment.interval.ms`, members keeping the last target
meanwhile, the computation's time in ShareGroupTargetAssignmentMetadata's tagged field and
replayed, the group config `share.assignment.interval.ms` and the broker's bounds."""

from __future__ import annotations

import asyncio
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E

from coordinator.groups.share_group import ShareGroup
from coordinator.groups.share_manager import ShareGroupConfig, ShareHeartbeatRequest, ShareHeartbeatResult
from protocol import share_records as R
from tests.support.consumer_harness import Harness
from tests.support.group_harness import MemoryLog, settle
from tests.support.process import ROOT
from tests.support.share import SHB, set_group_configs
from tests.support.wire_client import WireClient, request_class

GROUP = "sg"
INTERVAL = 1000


class ShareHarness(Harness):
    """The consumer-group harness's runtime, driving the share group `sg` in process."""

    def __init__(self, interval: int, log: MemoryLog | None = None, catalog=None) -> None:
        super().__init__(log, catalog)
        self.interval = interval
        self.runtime.share_config = ShareGroupConfig(  # type: ignore[attr-defined]  # Harness's runtime type
            assignment_interval_ms=interval
        )
        self.shard = self.runtime.shard_for(GROUP)

    async def shb(self, member_id: str, epoch: int, topics=None) -> ShareHeartbeatResult:
        got: list[ShareHeartbeatResult] = []
        result = self.shard.share.heartbeat(ShareHeartbeatRequest(GROUP, member_id, epoch, None, topics), got.append)
        if result is None:
            await settle()
            result = got[0]
        return result

    @property
    def sgroup(self) -> ShareGroup:
        return self.shard.groups[GROUP]  # type: ignore[return-value]  # the shard's map holds every group type


def partitions_of(assignment) -> int:
    return sum(len(ps) for ps in (assignment or {}).values())


# op: (kind, member index, subscription choice or clock advance)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "leave", "hb", "hb", "hb", "wait"]),
        st.integers(0, 7),
        st.sampled_from([0, 1, 300, 999, 1000, 1500]),
    ),
    min_size=1,
    max_size=60,
)


@pytest.mark.parametrize("interval", [0, INTERVAL])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_batching_loses_no_partition_and_every_member_converges(interval, ops):
    async def run() -> None:
        h = ShareHarness(interval)
        h.catalog.add("t", 12)
        h.catalog.add("u", 5)
        alive: set[str] = set()
        computed: list[int] = []  # wall times of the target computations
        for kind, i, arg in ops:
            m = f"m{i}"
            if kind == "join" and m not in alive:
                assert (await h.shb(m, 0, ["t"] if arg % 2 else ["t", "u"])).error == E.none
                alive.add(m)
            elif kind == "leave" and m in alive:
                assert (await h.shb(m, -1)).error == E.none
                alive.discard(m)
            elif kind == "hb" and m in alive:
                assert (await h.shb(m, h.sgroup.members[m].member_epoch)).error == E.none
            elif kind == "wait":
                h.clock.advance(arg)
            if GROUP not in h.shard.groups:
                continue
            g = h.sgroup
            assert g.assignment_epoch <= g.group_epoch
            assert all(x.member_epoch <= g.assignment_epoch for x in g.members.values())
            if g.assignment_timestamp and (not computed or computed[-1] != g.assignment_timestamp):
                computed.append(g.assignment_timestamp)
        # At most one computation per interval.
        assert all(b - a >= interval for a, b in zip(computed, computed[1:])), computed
        if not alive:
            return
        # Once the interval has passed, one heartbeat each brings every member to the target.
        h.clock.advance(interval + 1)
        for m in sorted(alive):
            assert (await h.shb(m, h.sgroup.members[m].member_epoch)).error == E.none
        g = h.sgroup
        assert g.assignment_epoch == g.group_epoch
        assert all(g.members[m].member_epoch == g.assignment_epoch for m in alive)
        assert all(g.members[m].assigned == g.target.get(m, {}) for m in alive)
        # No partition lost: every partition of a subscribed topic is with some member.
        held: set = set()
        for m in alive:
            held.update((t, p) for t, ps in g.members[m].assigned.items() for p in ps)
        subscribed_u = any("u" in g.members[m].subscribed_topic_names for m in alive)
        assert len(held) == (17 if subscribed_u else 12)

    asyncio.run(run())


async def test_members_keep_the_last_target_until_the_interval_has_passed():
    h = ShareHarness(INTERVAL)
    h.catalog.add("t", 6)
    a = await h.shb("a", 0, ["t"])
    assert a.member_epoch == 1 and partitions_of(a.assignment) == 6  # the first target: at once
    b = await h.shb("b", 0, ["t"])
    g = h.sgroup
    assert (g.group_epoch, g.assignment_epoch) == (2, 1)
    assert b.member_epoch == 1 and partitions_of(b.assignment) == 0
    a2 = await h.shb("a", 1)
    assert a2.member_epoch == 1 and a2.assignment is None  # nothing new for a either
    h.clock.advance(INTERVAL)
    a3 = await h.shb("a", 1)  # the heartbeat after the interval computes it
    assert (g.group_epoch, g.assignment_epoch) == (2, 2)
    assert a3.member_epoch == 2 and partitions_of(a3.assignment) == 3
    b2 = await h.shb("b", 1)
    assert b2.member_epoch == 2 and partitions_of(b2.assignment) == 3
    # A leave moves the group epoch; the leaver's partitions wait for the next computation.
    await h.shb("b", -1)
    assert (g.group_epoch, g.assignment_epoch) == (3, 2)
    h.clock.advance(INTERVAL)
    assert partitions_of((await h.shb("a", 2)).assignment) == 6


async def test_the_computation_time_is_recorded_and_replayed():
    h = ShareHarness(INTERVAL)
    h.catalog.add("t", 4)
    await h.shb("a", 0, ["t"])
    computed_at = h.clock.wall()
    metas = [v for _, k, v in h.log.all_records() if type(k) is R.ShareGroupTargetAssignmentMetadataKey]
    assert metas[-1] == R.ShareGroupTargetAssignmentMetadataValue(1, computed_at)
    # A new coordinator replays it: the interval still runs from the recorded time.
    fresh = ShareHarness(INTERVAL, MemoryLog(), h.catalog)
    fresh.log.records = h.log.records
    fresh.runtime.load(h.log.all_records())
    assert fresh.sgroup.assignment_timestamp == computed_at
    await fresh.shb("b", 0, ["t"])
    assert (fresh.sgroup.group_epoch, fresh.sgroup.assignment_epoch) == (2, 1)
    fresh.clock.advance(INTERVAL)
    await fresh.shb("b", 1)
    assert fresh.sgroup.assignment_epoch == 2 and fresh.sgroup.assignment_timestamp == fresh.clock.wall()


def test_assignment_timestamp_is_kafkas_tagged_field():
    key = R.ShareGroupTargetAssignmentMetadataKey("g")
    value = R.ShareGroupTargetAssignmentMetadataValue(7, 1_764_150_000_123)
    raw = R.encode_value(value)
    # version 0, AssignmentEpoch, one tagged field: tag 0, 8 bytes, the int64
    assert raw == struct.pack(">hi", 0, 7) + bytes([1, 0, 8]) + struct.pack(">q", 1_764_150_000_123)
    assert R.decode_value(key, raw) == value
    # At its default (0, an older Kafka's record) no tag is written, and such a record reads as 0.
    assert R.encode_value(R.ShareGroupTargetAssignmentMetadataValue(7)) == struct.pack(">hi", 0, 7) + b"\0"
    assert R.decode_value(key, struct.pack(">hi", 0, 7) + b"\0").assignment_timestamp == 0
    # An unknown tag beside it is skipped; a timestamp of the wrong size is refused.
    assert R.decode_value(key, raw[:6] + bytes([2]) + raw[7:] + bytes([5, 1, 9])) == value
    with pytest.raises(R.RecordDecodeError):
        R.decode_value(key, struct.pack(">hi", 0, 7) + bytes([1, 0, 4]) + b"\0\0\0\1")


def shb(group, member_id, epoch, topics=None):
    return request_class(SHB, 1)(group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics)


async def test_the_group_config_sets_the_interval_within_the_brokers_bounds(server_factory):
    server = server_factory(
        "--group-share-assignment-interval-ms", "0", "--group-share-max-assignment-interval-ms", "60000"
    )
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=4)
        # Refused: not a number, negative (Kafka: at least 0).
        assert (await set_group_configs(conn, "g", share_assignment_interval_ms="soon")).error_code == E.invalid_config
        assert (await set_group_configs(conn, "g", share_assignment_interval_ms="-1")).error_code == E.invalid_config
        assert (await set_group_configs(conn, "g", share_assignment_interval_ms="60000")).error_code == 0
        a = await conn.request(SHB, 1, shb("g", "a" * 22, 0, ["t"]))
        b = await conn.request(SHB, 1, shb("g", "b" * 22, 0, ["t"]))
        assert a.member_epoch == 1 and b.member_epoch == 1 and not b.assignment.topic_partitions
        # Back to the broker's 0: the next heartbeat computes the target.
        assert (await set_group_configs(conn, "g", share_assignment_interval_ms="0")).error_code == 0
        a2 = await conn.request(SHB, 1, shb("g", "a" * 22, 1))
        assert a2.member_epoch == 2 and len(a2.assignment.topic_partitions[0].partitions) == 2
        # The other group is at the broker's interval, 0: a target at every change.
        assert (await conn.request(SHB, 1, shb("other", "a" * 22, 0, ["t"]))).member_epoch == 1
        assert (await conn.request(SHB, 1, shb("other", "b" * 22, 0, ["t"]))).member_epoch == 2
    finally:
        await conn.close()


@pytest.mark.process
def test_bounds_that_exclude_the_interval_stop_the_server_at_startup(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "d"),
            "--group-share-assignment-interval-ms",
            "20000",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--group-share-max-assignment-interval-ms" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
