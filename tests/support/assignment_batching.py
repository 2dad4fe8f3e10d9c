"""What the assignment-batching tests of consumer and share groups share (Kafka 4.3, KIP-1263):
random operations on a group under an assignment interval with the invariants that hold after
each, the check that a computation's time is recorded and replayed, and the server's refusal
of an interval outside its bounds. A group type is driven through a `Batching` harness."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Callable

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as E

from coordinator.groups.modern.consumer.consumer_group import ConsumerGroup
from coordinator.groups.modern.share.share_group import ShareGroup
from coordinator.groups.modern.share.share_manager import ShareGroupConfig, ShareHeartbeatRequest, ShareHeartbeatResult
from protocol.consumer_records import TargetAssignmentMetadata
from tests.support.consumer_harness import GROUP, Harness
from tests.support.consumer_shard import owned
from coordinator.groups.modern.modern_manager import ModernGroupManager
from tests.support.group_harness import MemoryLog, respond, settle
from tests.support.process import ROOT

INTERVAL = 1000
SHARE_GROUP = "sg"

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


class ConsumerBatching(Harness):
    """The consumer group `cg` in process, assignment interval `interval`: a member joins,
    leaves, or heartbeats with what it holds (revoking at once, as librdkafka does)."""

    def __init__(self, interval: int, log: MemoryLog | None = None, catalog: Any = None) -> None:
        super().__init__(log, catalog, assignment_interval_ms=interval)

    async def join(self, member_id: str, topics: list[str]) -> Any:
        return await self.hb(member_id, 0, topics)

    async def leave(self, member_id: str) -> Any:
        return await self.hb(member_id, -1, owned=None)

    async def beat(self, member_id: str) -> Any:
        member = self.group.members[member_id]
        return await self.hb(member_id, member.member_epoch, owned=owned(member.assigned))

    def batched(self) -> Any:
        """The group, if it is a consumer group now."""
        group = self.shard.groups.get(GROUP)
        return group if type(group) is ConsumerGroup else None


class ShareBatching(Harness):
    """The consumer-group harness's runtime, driving the share group `sg` in process."""

    def __init__(self, interval: int, log: MemoryLog | None = None, catalog: Any = None) -> None:
        super().__init__(log, catalog)
        self.runtime.share_config = ShareGroupConfig(assignment_interval_ms=interval)
        self.shard = self.runtime.shard_for(SHARE_GROUP)

    async def shb(self, member_id: str, epoch: int, topics: list[str] | None = None) -> ShareHeartbeatResult:
        got: list[ShareHeartbeatResult] = []
        request = ShareHeartbeatRequest(SHARE_GROUP, member_id, epoch, None, topics)
        result = respond(self.shard, self.shard.share.heartbeat(request), got.append, ModernGroupManager.write_failed)
        if result is None:
            await settle()
            result = got[0]
        # What follows the heartbeat at once: the share-partition state of partitions it set
        # initializing is initialized (Kafka's persister call, then its write).
        self.clock.advance(0)
        await settle()
        return result

    async def join(self, member_id: str, topics: list[str]) -> Any:
        return await self.shb(member_id, 0, topics)

    async def leave(self, member_id: str) -> Any:
        return await self.shb(member_id, -1)

    async def beat(self, member_id: str) -> Any:
        return await self.shb(member_id, self.sgroup.members[member_id].member_epoch)

    @property
    def sgroup(self) -> ShareGroup:
        return self.shard.groups[SHARE_GROUP]  # type: ignore[return-value]  # the shard's map holds every group type

    def batched(self) -> Any:
        return self.shard.groups.get(SHARE_GROUP)


async def run_ops(h: Any, interval: int, ops: list[tuple[str, int, int]], check: Callable[[Any], None]) -> set[str]:
    """Apply `ops` to h's group (topics "t" and "u" subscribed to in turn); after each, the
    assignment epoch is not ahead of the group epoch nor a member's ahead of it, `check(group)`
    holds, and the target is computed at most once per interval (the group emptied, its
    target's time is reset, as Kafka's: the next member's target comes at once). The members left."""
    alive: set[str] = set()
    computed: list[int] = []  # wall times of the target computations since the group was last empty
    runs = [computed]
    for kind, i, arg in ops:
        m = f"m{i}"
        if kind == "join" and m not in alive:
            assert (await h.join(m, ["t"] if arg % 2 else ["t", "u"])).error == E.none
            alive.add(m)
        elif kind == "leave" and m in alive:
            assert (await h.leave(m)).error == E.none
            alive.discard(m)
        elif kind == "hb" and m in alive:
            assert (await h.beat(m)).error == E.none
        elif kind == "wait":
            h.clock.advance(arg)
        g = h.batched()
        if g is None:
            continue
        check(g)
        assert g.assignment_epoch <= g.group_epoch
        assert all(x.member_epoch <= g.assignment_epoch for x in g.members.values())
        if not g.assignment_timestamp and computed:
            computed = []
            runs.append(computed)
        if g.assignment_timestamp and (not computed or computed[-1] != g.assignment_timestamp):
            computed.append(g.assignment_timestamp)
    assert all(b - a >= interval for run in runs for a, b in zip(run, run[1:])), runs
    return alive


async def check_computation_time_replayed(make: Callable[..., Any], value_type: type) -> None:
    """The time of a target computation is in the group's TargetAssignmentMetadata record
    (`value_type`), and a new coordinator that replays it runs the interval from then."""
    h = make(INTERVAL)
    h.catalog.add("t", 4)
    await h.join("a", ["t"])
    computed_at = h.clock.wall()
    metas = [v for _, _, v in h.log.all_records() if isinstance(v, TargetAssignmentMetadata)]
    assert metas[-1] == value_type(2, computed_at)
    fresh = make(INTERVAL, MemoryLog(), h.catalog)
    fresh.log.records = h.log.records
    fresh.runtime.load(h.log.all_records())
    assert fresh.batched().assignment_timestamp == computed_at
    await fresh.join("b", ["t"])
    group = fresh.batched()
    assert (group.group_epoch, group.assignment_epoch) == (3, 2)
    fresh.clock.advance(INTERVAL)
    await fresh.beat("b")
    assert group.assignment_epoch == 3 and group.assignment_timestamp == fresh.clock.wall()


def check_startup_refuses_an_interval_beyond_the_max(tmp_path: Any, kind: str) -> None:
    """--group-<kind>-assignment-interval-ms above its max (15 s by default) stops the server
    at startup with a usage error naming the bound, not a traceback."""
    args = ["--port", "0", "--data-dir", str(tmp_path / "d"), f"--group-{kind}-assignment-interval-ms", "20000"]
    command = [sys.executable, "-m", "coordinator", *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"--group-{kind}-max-assignment-interval-ms" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
