"""The runtime contract (Kafka's CoordinatorRuntime) in process, over a log whose appends
complete late, out of order or fail: answers wait for the log, a failed write undoes
exactly its own effect, and memory always matches what a restart rebuilds."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode as E

from coordinator.groups.classic.classic_group import JoinResult
from coordinator.groups.classic.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.modern.consumer.consumer_group import ConsumerGroup, records_of
from coordinator.groups.modern.consumer.consumer_manager import ConsumerGroupConfig, HeartbeatRequest
from coordinator.groups.runtime import CoordinatorRuntime
from coordinator.groups.shard import OffsetConfig
from coordinator.groups.topic_image import TopicImage
from protocol.offset_commit import PartitionCommit
from coordinator.groups.modern.modern_manager import ModernGroupManager
from tests.support.group_harness import ControlledLog, Operations, commit_failed, respond, settle
from tests.support.consumer_shard import Catalog, owned

GROUP = "cg"


class Runtime:
    def __init__(self, log: ControlledLog | None = None, catalog: Catalog | None = None) -> None:
        self.log = log or ControlledLog()
        self.catalog = catalog or Catalog()
        self.clock = ManualClock()
        # (a target at every change, assignment batching off: these cases count epochs)
        self.runtime = CoordinatorRuntime(
            self.log,
            self.clock,
            GroupConfig(),
            OffsetConfig(),
            ConsumerGroupConfig(assignment_interval_ms=0),
            TopicImage(self.catalog),
        )
        self.runtime.load(self.log.all_records())
        self.shard = self.runtime.shard_for(GROUP)

    def hb(self, member_id: str, epoch: int, topics=None, owned_=(), group: str = GROUP) -> list:
        """The heartbeat's answers so far (one once it is answered)."""
        r = HeartbeatRequest(
            group,
            member_id,
            epoch,
            rebalance_timeout_ms=60_000 if epoch == 0 else -1,
            subscribed_topic_names=topics,
            owned=None if owned_ is None else list(owned_),
        )
        got: list = []
        shard = self.runtime.shard_for(group)
        now = respond(shard, shard.consumer.heartbeat(r), got.append, ModernGroupManager.write_failed)
        if now is not None:
            got.append(now)
        return got

    def commit(self, group: str, partition: int, offset: int) -> list:
        got: list = []
        shard = self.runtime.shard_for(group)
        result = shard.offset_manager.commit(group, -1, "", None, [PartitionCommit("t", partition, offset, -1, "")])
        errors = respond(shard, result, got.append, commit_failed(result))
        if errors is not None:
            got.append(errors)
        return got

    @property
    def group(self) -> ConsumerGroup:
        return self.shard.groups[GROUP]  # type: ignore[return-value]  # the test's group is a ConsumerGroup; the shard's map holds every group type

    def restarted(self) -> "Runtime":
        return Runtime(_durable_copy(self.log), self.catalog)


def _durable_copy(log: ControlledLog) -> ControlledLog:
    fresh = ControlledLog(log.partitions)
    fresh.records = [list(r) for r in log.records]
    return fresh


def same_group(a: Runtime, b: Runtime) -> None:
    ga, gb = a.shard.groups.get(GROUP), b.shard.groups.get(GROUP)
    assert type(ga) is type(gb)
    if type(ga) is ConsumerGroup:
        assert records_of(ga) == records_of(gb)  # type: ignore[arg-type]  # gb is the same type as ga, checked above


async def test_a_failed_join_does_not_forget_a_member_whose_join_is_not_yet_durable():
    h = Runtime()
    h.catalog.add("t", 4)
    a = h.hb("a", 0, ["t"])
    h.log.sync()
    await settle()
    assert a[0].error == E.none
    b = h.hb("b", 0, ["t"])  # appended, not yet durable
    await settle()
    assert b == []
    h.log.refusing = True  # c's join cannot be appended (disk full)
    c = h.hb("c", 0, ["t"])
    await settle()
    assert [r.error for r in c] == [E.not_coordinator]
    assert b == []  # b's answer still waits for its write
    assert set(h.group.members) == {"a", "b"} and h.group.group_epoch == 3
    h.log.refusing = False
    h.log.sync()
    await settle()
    assert b[0].error == E.none and b[0].member_epoch == 3
    again = h.hb("b", 3, owned_=owned(b[0]))
    h.log.sync()
    await settle()
    assert again[0].error == E.none
    same_group(h, h.restarted())


async def test_a_retried_heartbeat_is_not_answered_ahead_of_the_log():
    h = Runtime()
    h.catalog.add("t", 2)
    h.catalog.add("u", 2)
    a = h.hb("a", 0, ["t"])
    h.log.sync()
    await settle()
    epoch = a[0].member_epoch
    changed = h.hb("a", epoch, ["t", "u"], owned_=owned(a[0]))  # the new subscription's records are in flight
    retried = h.hb("a", epoch, ["t", "u"], owned_=owned(a[0]))  # writes nothing, rests on the first
    await settle()
    assert changed == [] and retried == []
    h.log.fail_from(0)
    await settle()
    assert [r.error for r in changed] == [E.not_coordinator] and [r.error for r in retried] == [E.not_coordinator]
    assert h.group.group_epoch == epoch and h.group.members["a"].subscribed_topic_names == ("t",)
    same_group(h, h.restarted())


async def test_answers_leave_in_the_order_written_whatever_order_the_log_reports():
    h = Runtime()
    first, second = h.commit("x", 0, 10), h.commit("x", 0, 20)
    h.log.sync(order=[1, 0])
    await settle()
    assert first == [[E.none]] and second == [[E.none]]
    assert h.runtime.shard_for("x").offsets.of("x")[("t", 0)].offset == 20


async def test_a_write_that_fails_fails_every_write_after_it_and_nothing_before():
    h = Runtime()
    one, two, three = h.commit("x", 0, 1), h.commit("x", 1, 2), h.commit("x", 2, 3)
    h.log.fail_from(0, 1, order=[1, 0])  # two and three are cut; three's failure is reported first
    await settle()
    assert one == [] and two == [[E.not_coordinator]] and three == [[E.not_coordinator]]
    h.log.sync()
    await settle()
    assert one == [[E.none]]
    offsets = h.runtime.shard_for("x").offsets.of("x")
    assert set(offsets) == {("t", 0)}
    assert h.restarted().runtime.shard_for("x").durable_view() == h.runtime.shard_for("x").durable_view()


async def test_an_answer_that_writes_nothing_waits_for_the_pending_writes():
    h = Runtime()
    h.catalog.add("t", 1)
    a = h.hb("a", 0, ["t"])
    h.log.sync()
    await settle()
    pending = h.commit("other", 0, 5)  # another group's write on the shard, in flight
    beat = h.hb("a", a[0].member_epoch, owned_=owned(a[0]))  # changes nothing
    await settle()
    assert beat == [] and pending == []
    h.log.sync()
    await settle()
    assert beat[0].error == E.none and pending == [[E.none]]
    # With nothing pending it is answered at once.
    assert h.hb("a", a[0].member_epoch, owned_=owned(a[0]))[0].error == E.none


async def test_a_consumer_group_stays_until_its_conversion_to_classic_is_durable():
    h = Runtime()
    h.catalog.add("t", 1)
    a = h.hb("a", 0, ["t"])
    h.log.sync()
    await settle()
    left = h.hb("a", -1, owned_=None)
    h.log.sync()
    await settle()
    assert left[0].error == E.none and a[0].error == E.none and h.group.state_name == "Empty"

    def classic_join():
        return Operations(h.shard).join(
            GROUP,
            "",
            None,
            "client",
            "/127.0.0.1",
            10_000,
            20_000,
            "consumer",
            [("range", b"")],
            require_known_member_id=True,
        )

    joined = classic_join()
    assert isinstance(joined, asyncio.Future)
    await settle()
    assert type(h.shard.groups[GROUP]) is ConsumerGroup  # its tombstones are not durable yet
    h.log.fail_from(0)
    await settle()
    assert joined.result().error == E.not_coordinator
    group = h.shard.groups[GROUP]
    assert type(group) is ConsumerGroup and not group.dead
    same_group(h, h.restarted())
    joined = classic_join()
    await settle()
    h.log.sync()
    await settle()
    result = joined.result()
    assert isinstance(result, JoinResult) and result.error == E.member_id_required
    assert GROUP not in h.shard.consumer.stored
    assert h.restarted().shard.groups.get(GROUP) is None


async def test_a_failed_share_group_join_does_not_forget_a_member_whose_join_is_not_yet_durable():
    from coordinator.groups.modern.share.share_manager import ShareHeartbeatRequest

    h = Runtime()
    h.catalog.add("t", 2)
    share = h.shard.share

    def hb(member_id: str) -> list:
        got: list = []
        request = ShareHeartbeatRequest("sg", member_id, 0, subscribed_topic_names=("t",))
        now = respond(h.shard, share.heartbeat(request), got.append, ModernGroupManager.write_failed)
        return got if now is None else [now]

    a = hb("a" * 22)  # in flight
    h.log.refusing = True
    b = hb("b" * 22)
    await settle()
    assert [r.error for r in b] == [E.not_coordinator] and a == []
    h.log.refusing = False
    h.log.sync()
    await settle()
    assert a[0].error == E.none and set(h.shard.groups["sg"].members) == {"a" * 22}
    assert h.restarted().shard.durable_view() == h.shard.durable_view()


class _Connection:
    """What a handler that answers later needs of its connection: somewhere to flush to."""

    def flush_answers(self) -> None:
        pass


async def test_a_share_group_description_waits_for_the_pending_writes():
    """ShareGroupDescribe, like ConsumerGroupDescribe, writes nothing but describes what the
    writes in flight on its shard did: it leaves once they are durable, and is read again if
    one of them fails."""
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest

    from coordinator.apis import LATER, RequestContext
    from coordinator.groups.modern.share.share_api import ShareGroupApis
    from coordinator.groups.modern.share.share_manager import ShareHeartbeatRequest
    from protocol.messages import RequestHeader, codec

    h = Runtime()
    h.catalog.add("t", 2)
    apis = ShareGroupApis(h.runtime)

    def describe() -> RequestContext:
        ctx = RequestContext(RequestHeader(77, 1, 1, "c"), codec(77, 1), "127.0.0.1", _Connection())
        ctx.body = apis.share_group_describe(
            ctx, ShareGroupDescribeRequest(group_ids=("sg",), include_authorized_operations=False)
        )
        return ctx

    def join(member_id: str) -> list:
        got: list = []
        request = ShareHeartbeatRequest("sg", member_id, 0, subscribed_topic_names=("t",))
        now = respond(h.shard, h.shard.share.heartbeat(request), got.append, ModernGroupManager.write_failed)
        return got if now is None else [now]

    join("a" * 22)  # in flight
    described = describe()
    assert described.body is LATER
    h.log.sync()
    await settle()
    assert [m.member_id for m in described.body.groups[0].members] == ["a" * 22]

    join("b" * 22)  # in flight, then cut
    described = describe()
    assert described.body is LATER
    h.log.fail_from(0)
    await settle()
    assert [m.member_id for m in described.body.groups[0].members] == ["a" * 22]  # read again
    assert describe().body.groups[0].members[0].member_id == "a" * 22  # nothing pending: at once
