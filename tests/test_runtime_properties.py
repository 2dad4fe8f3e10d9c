"""A stateful property test of the runtime contract: classic and KIP-848 consumer groups
driven through joins, heartbeats, commits, leaves, expiries and restarts over a log that
completes appends late, in any order, or with errors (tests/support/group_harness.ControlledLog).

Checked after every step, and at every answer:
- an answer that reports success describes durable state: a consumer member's epoch and
  assignment, a commit's offset and a classic generation are what replaying the log so far
  gives, when the answer leaves;
- memory is what the records written so far say (a consumer group is its written records),
  and what replay has built is what a fresh coordinator replaying the durable log builds;
- a restart rebuilds from the durable log exactly what the old coordinator held as durable.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from kio.schema.errors import ErrorCode as E

from coordinator.groups.classic.classic_group import ClassicGroup, JoinResult, SyncResult
from coordinator.groups.classic.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.modern.consumer.consumer_group import ConsumerGroup, group_from_records, records_of
from coordinator.groups.modern.consumer.consumer_manager import ConsumerGroupConfig, HeartbeatRequest
from coordinator.groups.runtime import CoordinatorRuntime
from coordinator.groups.shard import OffsetConfig
from coordinator.groups.topic_image import TopicImage
from protocol import consumer_records as R
from protocol.offset_commit import PartitionCommit
from coordinator.groups.modern.modern_manager import ModernGroupManager
from tests.support.group_harness import ControlledLog, Operations, commit_failed, respond
from tests.support.consumer_shard import Catalog

CG, CLASSIC = "cg", "classic"
MEMBERS = ["m0", "m1", "m2"]
CLASSIC_CLIENTS = range(2)
SESSION = 10_000


class Member:
    """A consumer-protocol client: what it was last told."""

    def __init__(self) -> None:
        self.epoch = 0
        self.owned: list = []


class Classic:
    def __init__(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.leader = False
        self.members: list[str] = []


class RuntimeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.log = ControlledLog(1)
        self.catalog = Catalog()
        self.catalog.add("t", 4)
        self.start()
        self.members = {m: Member() for m in MEMBERS}
        self.classics = {c: Classic() for c in CLASSIC_CLIENTS}

    def start(self) -> None:
        self.clock = ManualClock(start_ms=getattr(self, "clock", ManualClock()).now())
        self.runtime = CoordinatorRuntime(
            self.log,
            self.clock,
            GroupConfig(min_session_timeout_ms=1000),
            OffsetConfig(),
            ConsumerGroupConfig(session_timeout_ms=SESSION),
            TopicImage(self.catalog),
        )
        self.runtime.load(self.log.all_records())
        self.shard = self.runtime.shards[0]

    def teardown(self) -> None:
        self.loop.close()

    def run(self, fn, *args):
        async def step():
            out = fn(*args)
            for _ in range(4):
                await asyncio.sleep(0)
            return out

        return self.loop.run_until_complete(step())

    # what an answer may say: only durable state -----------------------------------------

    def durable_member(self, member_id: str):
        return self.shard.consumer.stored.get(CG, {}).get(R.ConsumerGroupCurrentMemberAssignmentKey(CG, member_id))

    def told(self, member_id: str, epoch: int, result) -> None:
        client = self.members[member_id]
        if result.error != E.none:
            if result.error in (E.unknown_member_id, E.fenced_member_epoch):
                client.epoch, client.owned = 0, []
            return
        durable = self.durable_member(member_id)
        if result.member_epoch < 0:  # it left: gone from the durable records
            assert durable is None, "a leave answered before its tombstone is durable"
            client.epoch, client.owned = 0, []
            return
        assert durable is not None and durable.member_epoch == result.member_epoch, "an answer ahead of the log"
        client.epoch = result.member_epoch
        if result.assignment is not None:
            assigned = {t: set(ps) for t, ps in durable.assigned_partitions}
            assert assigned == {t: set(ps) for t, ps in result.assignment.items() if ps}, (
                "an assignment ahead of the log"
            )
            client.owned = [(t, sorted(ps)) for t, ps in result.assignment.items()]

    # consumer-protocol members -------------------------------------------------------------

    @rule(m=st.sampled_from(MEMBERS), leave=st.booleans())
    def heartbeat(self, m, leave):
        client = self.members[m]
        epoch = -1 if leave and client.epoch > 0 else client.epoch
        r = HeartbeatRequest(
            CG,
            m,
            epoch,
            rebalance_timeout_ms=60_000 if epoch == 0 else -1,
            subscribed_topic_names=["t"] if epoch == 0 else None,
            owned=[] if epoch == 0 else (None if epoch < 0 else list(client.owned)),
        )

        def go():
            now = respond(
                self.shard,
                self.shard.consumer.heartbeat(r),
                lambda result: self.told(m, epoch, result),
                ModernGroupManager.write_failed,
            )
            if now is not None:
                self.told(m, epoch, now)

        self.run(go)

    # classic members -----------------------------------------------------------------------

    def classic_answer(self, c: int, r, generation: int = -1) -> None:
        """`generation`: the one the client sent (a sync's answer is about it)."""
        client = self.classics[c]
        if isinstance(r, JoinResult):
            if r.error == E.none:
                client.member_id, client.generation = r.member_id, r.generation_id
                client.leader = r.leader_id == r.member_id
                client.members = [m for m, _, _ in r.members]
            elif r.error == E.unknown_member_id:
                client.member_id, client.generation = "", -1
        elif isinstance(r, SyncResult) and r.error == E.none:
            group = self.shard.groups.get(CLASSIC)
            assert isinstance(group, ClassicGroup) and group.stored is not None
            assert group.stored.generation == generation, "a sync answered ahead of the log"

    def classic_later(self, c: int, r, generation: int = -1) -> None:
        """Answer now, or once the future resolves; an answer given at once waits for the
        shard's pending writes, as api.py does."""
        if isinstance(r, asyncio.Future):
            r.add_done_callback(lambda f: self.classic_answer(c, f.result(), generation))
        elif self.shard.pending:
            self.shard.after_pending(lambda error: self.classic_answer(c, r, generation) if error == E.none else None)
        else:
            self.classic_answer(c, r, generation)

    @rule(c=st.sampled_from(list(CLASSIC_CLIENTS)))
    def classic_join(self, c):
        client = self.classics[c]
        self.run(
            lambda: self.classic_later(
                c,
                Operations(self.shard).join(
                    CLASSIC,
                    client.member_id,
                    None,
                    f"client-{c}",
                    "/127.0.0.1",
                    SESSION,
                    20_000,
                    "consumer",
                    [("range", b"")],
                    require_known_member_id=False,
                ),
            )
        )

    @rule(c=st.sampled_from(list(CLASSIC_CLIENTS)))
    def classic_sync(self, c):
        client = self.classics[c]
        assignments = {m: m.encode() for m in client.members} if client.leader else {}
        generation = client.generation
        self.run(
            lambda: self.classic_later(
                c,
                Operations(self.shard).sync(CLASSIC, client.member_id, None, generation, "consumer", None, assignments),
                generation,
            )
        )

    @rule(c=st.sampled_from(list(CLASSIC_CLIENTS)))
    def classic_leave(self, c):
        client = self.classics[c]
        self.run(Operations(self.shard).leave, CLASSIC, [(client.member_id, None)])
        client.member_id, client.generation = "", -1

    # commits -------------------------------------------------------------------------------

    @rule(group=st.sampled_from([CG, CLASSIC, "simple"]), partition=st.integers(0, 3), offset=st.integers(0, 99))
    def commit(self, group, partition, offset):
        if group == CG:
            m = next((m for m, c in self.members.items() if c.epoch > 0), None)
            member_id, epoch = (m, self.members[m].epoch) if m else ("", -1)
        elif group == CLASSIC:
            member_id, epoch = self.classics[0].member_id, self.classics[0].generation
        else:
            member_id, epoch = "", -1

        def done(errors):
            if errors == [E.none]:
                value = self.shard.offsets.of(group).get(("t", partition))
                assert value is not None and value.offset == offset, "a commit answered ahead of the log"

        def go():
            result = self.shard.offset_manager.commit(
                group, epoch, member_id, None, [PartitionCommit("t", partition, offset, -1, "")]
            )
            errors = respond(self.shard, result, done, commit_failed(result))
            if errors is not None:
                done(errors)

        self.run(go)

    # the log -------------------------------------------------------------------------------

    @rule(data=st.data())
    def sync(self, data):
        n = len(self.log.in_flight[0])
        if not n:
            return
        count = data.draw(st.integers(1, n))
        order = data.draw(st.permutations(list(range(count))))
        self.run(self.log.sync, 0, count, order)

    @rule(data=st.data())
    def fail(self, data):
        n = len(self.log.in_flight[0])
        if not n:
            return
        index = data.draw(st.integers(0, n - 1))
        order = data.draw(st.permutations(list(range(n - index))))
        self.run(self.log.fail_from, 0, index, order)

    @rule()
    def toggle_refusing(self):
        self.log.refusing = not self.log.refusing

    @rule(ms=st.sampled_from([1_000, SESSION + 1]))
    def advance(self, ms):
        self.run(self.clock.advance, ms)

    @rule()
    def restart(self):
        """A crash: appends in flight are lost with the process; a new coordinator loads
        the durable log. Clients keep what they were told."""
        before = self.shard.durable_view()
        self.log.in_flight = [[]]
        self.run(self.start)
        assert self.shard.durable_view() == before

    # invariants ----------------------------------------------------------------------------

    @invariant()
    def memory_is_its_written_records(self):
        consumer = self.shard.consumer
        live = self.shard.groups.get(CG)
        if type(live) is ConsumerGroup and not live.dead:
            assert not live.dirty
            assert records_of(live) == consumer.written.get(CG), "memory differs from the records written"
        rebuilt = group_from_records(CG, consumer.written.get(CG, {}))
        if rebuilt is not None and type(live) is ConsumerGroup:
            assert records_of(rebuilt) == records_of(live)

    @invariant()
    def replay_of_the_durable_log_is_what_replay_built(self):
        fresh = CoordinatorRuntime(
            ControlledLog(1),
            ManualClock(),
            GroupConfig(),
            OffsetConfig(),
            ConsumerGroupConfig(),
            TopicImage(self.catalog),
        )
        for _, key, value in self.log.all_records():
            fresh.shards[0].replay(key, value)
        assert fresh.shards[0].durable_view() == self.shard.durable_view()

    @invariant()
    def nothing_pending_means_written_is_durable(self):
        if not self.shard.pending:
            assert self.shard.consumer.written == self.shard.consumer.stored


RuntimeMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_runtime_contract_properties = RuntimeMachine.TestCase
