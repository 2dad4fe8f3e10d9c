"""A write refused by the disk (ENOSPC), for each group type and for offsets: the request
gets Kafka's error, and memory is what a restart rebuilds from the log. Operations run as
the wire layer runs them (the runtime writes their CoordinatorResult and answers), over a
log whose appends the test refuses at will."""

from __future__ import annotations

from kio.schema.errors import ErrorCode as E

from coordinator.groups.classic.classic_group import ClassicGroup, JoinRequest, JoinResult
from coordinator.groups.classic.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.modern.consumer.consumer_group import ConsumerGroup, records_of
from coordinator.groups.modern.consumer.consumer_manager import ConsumerGroupConfig, HeartbeatRequest
from coordinator.groups.modern.modern_manager import ModernGroupManager
from coordinator.groups.modern.share import share_group
from coordinator.groups.records import GroupMetadataKey
from coordinator.groups.modern.share.share_group import ShareGroup
from coordinator.groups.modern.share.share_manager import ShareHeartbeatRequest
from coordinator.groups.runtime import CoordinatorRuntime
from coordinator.groups.shard import OffsetConfig
from coordinator.groups.streams import streams_group
from coordinator.groups.streams.streams_group import StreamsGroup, TasksTuple
from coordinator.groups.streams.streams_manager import StreamsGroupConfig, StreamsHeartbeatRequest
from coordinator.groups.topic_image import TopicImage
from protocol.offset_commit import PartitionCommit
from tests.support.consumer_shard import owned
from tests.support.group_harness import ControlledLog, Operations, answered, commit_failed, settle
from tests.support.streams_harness import StreamsCatalog, word_count

SESSION = 10_000


class Node:
    """One coordinator over a ControlledLog; `restarted()` is a fresh one that loads what is
    durable, as after kill -9."""

    def __init__(self, log: ControlledLog | None = None, catalog: StreamsCatalog | None = None) -> None:
        self.log = log or ControlledLog()
        self.catalog = catalog or StreamsCatalog()  # (a streams group's coordinator creates topics in it)
        self.clock = ManualClock()
        self.runtime = CoordinatorRuntime(
            self.log,
            self.clock,
            GroupConfig(),
            OffsetConfig(),
            ConsumerGroupConfig(assignment_interval_ms=0),
            TopicImage(self.catalog),
        )
        self.runtime.streams_config = StreamsGroupConfig(  # type: ignore[attr-defined]  # as components.py sets it
            assignment_interval_ms=0, initial_rebalance_delay_ms=0, num_warmup_replicas=0, num_standby_replicas=1
        )
        self.runtime.load(self.log.all_records())
        self.shard = self.runtime.shards[0]
        self.classic = Operations(self.shard)

    def restarted(self) -> Node:
        durable = ControlledLog(self.log.partitions)
        durable.records = [list(r) for r in self.log.records]
        return Node(durable, self.catalog)

    async def durable(self) -> None:
        """Every append in flight becomes durable and its answers leave."""
        await settle()
        self.log.sync()
        await settle()

    def rebuilt_alike(self) -> Node:
        """Memory is what a restart rebuilds: the same durable view (classic groups' stored
        records, consumer groups' records, offsets, pending transactional offsets) and each
        consumer group live as its records say."""
        fresh = self.restarted()
        assert fresh.shard.durable_view() == self.shard.durable_view()
        for group_id, group in self.shard.groups.items():
            if type(group) is ConsumerGroup:
                again = fresh.shard.groups[group_id]
                assert type(again) is ConsumerGroup and records_of(again) == records_of(group)
            elif type(group) is ShareGroup:
                again = fresh.shard.groups[group_id]
                assert type(again) is ShareGroup
                assert share_group.records_of(again) == share_group.records_of(group)
            elif type(group) is StreamsGroup:
                again = fresh.shard.groups[group_id]
                assert type(again) is StreamsGroup
                assert streams_group.records_of(again) == streams_group.records_of(group)
        return fresh

    async def hb(self, member_id: str, epoch: int, topics=None, owned_=()) -> object:
        r = HeartbeatRequest(
            "cg",
            member_id,
            epoch,
            rebalance_timeout_ms=60_000 if epoch == 0 else -1,
            subscribed_topic_names=topics,
            owned=None if owned_ is None else list(owned_),
        )
        return await self.settled(self.shard.consumer.heartbeat(r), ModernGroupManager.write_failed)

    async def shb(self, member_id: str, epoch: int, topics=("t",)) -> object:
        r = ShareHeartbeatRequest("sg", member_id, epoch, subscribed_topic_names=topics if epoch == 0 else None)
        return await self.settled(self.shard.share.heartbeat(r), ModernGroupManager.write_failed)

    async def streams_hb(self, member_id: str, epoch: int, owned: TasksTuple | None = None) -> object:
        joining = epoch == 0
        r = StreamsHeartbeatRequest(
            "app",
            member_id,
            epoch,
            rebalance_timeout_ms=60_000 if joining else -1,
            topology=word_count() if joining else None,
            process_id=f"p-{member_id}" if joining else None,
            active=TasksTuple() if joining else owned,
            owned_given=(joining or owned is not None,) * 3,
        )
        return await self.settled(self.shard.streams.heartbeat(r), self.shard.streams.heartbeat_failed(member_id))

    async def settled(self, result, failed=lambda error: error):
        """The response of an operation's result, the log made durable meanwhile."""
        import asyncio

        task = asyncio.ensure_future(answered(self.shard, result, failed))
        await settle()
        if not task.done():
            await self.durable()
        return await task

    def join(self, member_id: str = "", instance: str | None = None):
        return self.classic.join(
            "g",
            member_id,
            instance,
            "client",
            "/127.0.0.1",
            SESSION,
            30_000,
            "consumer",
            [("range", b"")],
            require_known_member_id=False,
        )


def classic_view(group: ClassicGroup) -> tuple:
    return (
        group.state_name,
        group.generation_id,
        group.leader_id,
        group.protocol_name,
        {m.member_id: (m.group_instance_id, m.assignment) for m in group.members.values()},
    )


async def stable_classic_group(node: Node) -> tuple[str, str]:
    """Two members, the static one the leader, Stable at generation 2 and stored."""
    a = node.join(instance="static-a")
    await settle()
    a_id = a.result().member_id
    b = node.join()  # a rebalance: a rejoins
    a = node.join(a_id, instance="static-a")
    await node.durable()
    b_id = b.result().member_id
    assert a.result().leader_id == a_id and a.result().generation_id == 2
    synced = node.classic.sync("g", a_id, None, 2, None, None, {a_id: b"A", b_id: b"B"})
    node.classic.sync("g", b_id, None, 2, None, None, {})
    await node.durable()
    assert synced.result().error == E.none and node.shard.groups["g"].state_name == "Stable"
    return a_id, b_id


async def test_a_classic_group_is_what_a_restart_rebuilds_after_each_failed_write():
    node = Node()
    a_id, b_id = await stable_classic_group(node)
    group = node.shard.groups["g"]
    assert isinstance(group, ClassicGroup)
    before = classic_view(group)
    assert classic_view(node.rebuilt_alike().shard.groups["g"]) == before  # (the same fresh start)

    node.log.refusing = True  # the disk is full from here on
    # A static member's rejoin under a new id: the new id is kept only once stored.
    rejoined = node.join(instance="static-a")
    await settle()
    assert rejoined.result().error == E.not_coordinator
    assert classic_view(group) == before
    assert classic_view(node.rebuilt_alike().shard.groups["g"]) == before

    # The leave that empties the group: its empty generation cannot be stored, so nobody leaves.
    left = node.classic.leave("g", [(a_id, None), (b_id, None)])
    await settle()
    assert left.result() == (E.not_coordinator, [])
    assert classic_view(group) == before
    node.rebuilt_alike()

    # A rebalance whose assignment cannot be stored: the members are told, and rejoin.
    node.classic.leave("g", [(b_id, None)])  # a rebalance, nothing to store yet
    rejoin = node.join(a_id, instance="static-a")
    await settle()
    assert rejoin.result().generation_id == 3
    synced = node.classic.sync("g", a_id, None, 3, None, None, {a_id: b"A2"})
    await settle()
    assert synced.result().error == E.not_coordinator
    assert group.state_name == "PreparingRebalance" and group.stored is not None and group.stored.generation == 2
    node.rebuilt_alike()

    node.log.refusing = False  # room again: the group moves on and what it stores is what comes back
    again = node.join(a_id, instance="static-a")
    await node.durable()
    generation = again.result().generation_id
    synced = node.classic.sync("g", a_id, None, generation, None, None, {a_id: b"A3"})
    await node.durable()
    assert synced.result().error == E.none and group.state_name == "Stable"
    assert classic_view(node.rebuilt_alike().shard.groups["g"]) == classic_view(group)


async def test_a_classic_group_a_join_creates_is_gone_if_its_first_record_fails():
    """A JoinGroup that creates a classic group writes its empty record (Kafka's
    classicGroupJoinToClassicGroup); if that write fails the group is gone, with what the
    joins that reached it meanwhile did, and each of them gets the error."""
    node = Node()

    def join(member_id: str = "", known: bool = True):
        request = JoinRequest(
            member_id, None, "client", "/127.0.0.1", SESSION, 30_000, "consumer", [("range", b"")], known, group_id="g"
        )
        return node.shard.classic.join(request)

    # KIP-394: the id handed out rides on the record; the disk refuses it.
    node.log.refusing = True
    assert (await node.settled(join(), lambda error: JoinResult(error))).error == E.not_coordinator
    assert "g" not in node.shard.groups and not node.log.all_records()
    # A join with no member id required (its join phase ends at once, answered as it ends),
    # then a second one that begins a rebalance and waits for the first member's rejoin.
    node.log.refusing = False
    first = node.shard.runtime.apply(node.shard, join(known=False))
    second = node.shard.runtime.apply(node.shard, join(known=False))
    await settle()
    assert first.result().generation_id == 1 and not second.done()
    assert len(node.log.in_flight[0]) == 1  # the record of the first: the second found the group
    node.log.fail_from(0)
    await settle()
    assert second.result().error == E.not_coordinator
    assert "g" not in node.shard.groups
    node.rebuilt_alike()

    # Stored: the record Kafka writes, whatever the join did to the group.
    answer = await node.settled(join(), lambda error: JoinResult(error))
    assert answer.error == E.member_id_required
    [(key, value)] = [(k, v) for _, k, v in node.log.all_records()]
    assert key == GroupMetadataKey("g")
    assert (value.protocol_type, value.generation, value.protocol, value.leader, value.members) == (
        "",
        0,
        None,
        None,
        (),
    )
    assert node.rebuilt_alike().shard.groups["g"].state_name == "Empty"


async def test_a_consumer_group_is_what_a_restart_rebuilds_after_each_failed_write():
    node = Node()
    node.catalog.add("t", 4)
    a = await node.hb("a", 0, ["t"])
    assert a.error == E.none
    node.rebuilt_alike()

    node.log.refusing = True
    joined = await node.hb("b", 0, ["t"])  # a join that cannot be written
    assert joined.error == E.not_coordinator
    group = node.shard.groups["cg"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == {"a"}
    node.rebuilt_alike()

    left = await node.hb("a", -1, owned_=None)  # a leave that cannot be written: the member stays
    assert left.error == E.not_coordinator
    assert set(node.shard.groups["cg"].members) == {"a"}  # (rebuilt from its records: a new object)
    node.rebuilt_alike()

    # A session that expires while the disk is full: the fencing cannot be written, so the
    # group stays what its records say (the member back, with a fresh session).
    node.clock.advance(60_000)
    await settle()
    group = node.shard.groups["cg"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == {"a"}
    node.rebuilt_alike()

    node.log.refusing = False
    beat = await node.hb("a", a.member_epoch, owned_=owned(a))
    assert beat.error == E.none
    node.rebuilt_alike()


async def test_a_share_group_is_what_a_restart_rebuilds_after_each_failed_write():
    node = Node()
    node.catalog.add("t", 2)
    a_id = "a" * 22
    a = await node.shb(a_id, 0)
    assert a.error == E.none
    node.rebuilt_alike()

    node.log.refusing = True
    joined = await node.shb("b" * 22, 0)  # a join that cannot be written
    assert joined.error == E.not_coordinator
    assert set(node.shard.groups["sg"].members) == {a_id}
    node.rebuilt_alike()

    left = await node.shb(a_id, -1)  # a leave that cannot be written: the member stays
    assert left.error == E.not_coordinator
    assert set(node.shard.groups["sg"].members) == {a_id}
    node.rebuilt_alike()

    node.clock.advance(60_000)  # its session expires, the fencing cannot be written
    await settle()
    assert set(node.shard.groups["sg"].members) == {a_id}
    node.rebuilt_alike()

    node.log.refusing = False
    beat = await node.shb(a_id, a.member_epoch)
    assert beat.error == E.none
    node.rebuilt_alike()


async def test_a_streams_group_is_what_a_restart_rebuilds_after_each_failed_write():
    node = Node()
    node.catalog.add("words", 2)
    a = await node.streams_hb("a", 0)  # the coordinator creates the internal topics meanwhile
    assert a.error == E.none
    await node.durable()
    a = await node.streams_hb("a", a.member_epoch, TasksTuple())
    assert a.error == E.none and not a.status and a.assignment.active  # ready: a runs every task
    a = await node.streams_hb("a", a.member_epoch, a.assignment)
    node.rebuilt_alike()
    group = node.shard.groups["app"]
    assert isinstance(group, StreamsGroup)
    before = streams_group.records_of(group)

    node.log.refusing = True
    joined = await node.streams_hb("b", 0)  # a join (a new target, standbys moving) that cannot be written
    assert joined.error == E.not_coordinator
    group = node.shard.groups["app"]
    assert isinstance(group, StreamsGroup) and set(group.members) == {"a"}
    assert streams_group.records_of(group) == before
    node.rebuilt_alike()

    left = await node.streams_hb("a", -1)  # a leave that cannot be written: the member stays
    assert left.error == E.not_coordinator
    assert streams_group.records_of(node.shard.groups["app"]) == before
    node.rebuilt_alike()

    node.clock.advance(60_000)  # its session expires, the fencing cannot be written
    await settle()
    assert streams_group.records_of(node.shard.groups["app"]) == before
    node.rebuilt_alike()

    node.log.refusing = False
    beat = await node.streams_hb("a", a.member_epoch, a.assignment)
    assert beat.error == E.none
    b = await node.streams_hb("b", 0)  # the join again, written this time
    assert b.error == E.none and set(node.shard.groups["app"].members) == {"a", "b"}
    node.rebuilt_alike()


async def test_offsets_and_transactional_offsets_are_what_a_restart_rebuilds_after_a_failed_write():
    node = Node()
    commit = [PartitionCommit("t", 0, 5, -1, "")]
    result = node.shard.offset_manager.commit("x", -1, "", None, commit)
    assert await node.settled(result, commit_failed(result)) == [E.none]

    node.log.refusing = True
    result = node.shard.offset_manager.commit("x", -1, "", None, [PartitionCommit("t", 0, 9, -1, "")])
    assert await node.settled(result, commit_failed(result)) == [E.not_coordinator]
    assert node.shard.offsets.of("x")[("t", 0)].offset == 5
    node.rebuilt_alike()

    result = node.shard.offset_manager.txn_commit("x", 7, 0, -1, "", None, [("t", 1, 3, -1, "")])
    assert await node.settled(result, commit_failed(result)) == [E.not_coordinator]
    assert not node.shard.offsets.pending.get(7)
    node.rebuilt_alike()

    node.log.refusing = False
    result = node.shard.offset_manager.txn_commit("x", 7, 0, -1, "", None, [("t", 1, 3, -1, "")])
    assert await node.settled(result, commit_failed(result)) == [E.none]
    assert node.shard.offsets.pending.get(7)
    node.rebuilt_alike()
