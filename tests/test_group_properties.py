"""A stateful property test of the group coordinator: random joins, syncs, heartbeats,
leaves, commits, static rejoins, session expiries, restarts and failing appends over a
manual clock and an in-memory log. After every step Kafka's invariants hold, every
acknowledged commit is readable and no failed one is, and replaying the log written so
far rebuilds exactly what the live shards hold as durable."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from kio.schema.errors import ErrorCode as E

from coordinator.groups.classic.classic_group import ClassicGroup, JoinResult, SyncResult
from coordinator.groups.classic.classic_manager import GroupConfig
from coordinator.groups.clock import ManualClock
from coordinator.groups.shard import OffsetConfig
from coordinator.groups.state import VALID_PREVIOUS, GroupState as S
from protocol.offset_commit import PartitionCommit
from tests.support.group_harness import MemoryLog, Operations, commit_failed, new_runtime, respond

GROUPS = ["alpha", "beta", "gamma"]
CLIENTS = range(4)
SESSION, REBALANCE = 10_000, 20_000
PROTOCOLS = [("range", b"r"), ("roundrobin", b"rr")]


class Client:
    def __init__(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.leader = False
        self.members: list[str] = []
        self.join: asyncio.Future | None = None
        self.sync: asyncio.Future | None = None


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.memory = MemoryLog(2)
        self.config = GroupConfig(min_session_timeout_ms=1000)
        self.offsets = OffsetConfig(retention_ms=30_000)
        self.runtime = new_runtime(self.memory, self.clock, self.config, self.offsets)
        self.clients = {(g, c): Client() for g in GROUPS for c in CLIENTS}
        self.acked: dict[tuple[str, str, int], int] = {}  # (group, topic, partition) -> last acknowledged offset
        self.generations: dict[str, int] = {}

    def teardown(self) -> None:
        self.loop.close()

    def run(self, fn, *args):
        async def step():
            out = fn(*args)
            for _ in range(4):
                await asyncio.sleep(0)
            self.collect()
            return out

        return self.loop.run_until_complete(step())

    def manager(self, group_id: str):
        return Operations(self.runtime.shard_for(group_id))

    def collect(self) -> None:
        """Take in the answers that arrived."""
        for client in self.clients.values():
            if client.join is not None and client.join.done():
                self.joined(client, client.join.result())
                client.join = None
            if client.sync is not None and client.sync.done():
                client.sync = None

    def joined(self, client: Client, r: JoinResult) -> None:
        if r.error == E.none:
            client.member_id, client.generation = r.member_id, r.generation_id
            client.leader = r.leader_id == r.member_id
            client.members = [m for m, _, _ in r.members]
        elif r.error == E.member_id_required:
            client.member_id = r.member_id
        elif r.error in (E.unknown_member_id, E.fenced_instance_id):
            client.member_id, client.generation = "", -1

    # rules ------------------------------------------------------------------------------

    @rule(
        group=st.sampled_from(GROUPS),
        c=st.sampled_from(CLIENTS),
        static=st.booleans(),
        protocols=st.sampled_from([PROTOCOLS, PROTOCOLS[::-1], PROTOCOLS[:1]]),
    )
    def join(self, group, c, static, protocols):
        client = self.clients[(group, c)]
        instance = f"instance-{c}" if static else None
        member_id = "" if static else client.member_id

        def go():
            r = self.manager(group).join(
                group,
                member_id,
                instance,
                f"client-{c}",
                "/127.0.0.1",
                SESSION,
                REBALANCE,
                "consumer",
                list(protocols),
                require_known_member_id=True,
            )
            if isinstance(r, JoinResult):
                self.joined(client, r)
            else:
                client.join = r

        self.run(go)

    @rule(group=st.sampled_from(GROUPS), c=st.sampled_from(CLIENTS))
    def sync(self, group, c):
        client = self.clients[(group, c)]
        assignments = {m: m.encode() for m in client.members} if client.leader else {}

        def go():
            r = self.manager(group).sync(
                group, client.member_id, None, client.generation, "consumer", None, assignments
            )
            if not isinstance(r, SyncResult):
                client.sync = r

        self.run(go)

    @rule(group=st.sampled_from(GROUPS), c=st.sampled_from(CLIENTS))
    def heartbeat(self, group, c):
        client = self.clients[(group, c)]
        self.run(self.manager(group).heartbeat, group, client.member_id, None, client.generation)

    @rule(group=st.sampled_from(GROUPS), c=st.sampled_from(CLIENTS), static=st.booleans())
    def leave(self, group, c, static):
        client = self.clients[(group, c)]
        member = (client.member_id, f"instance-{c}" if static else None)
        self.run(self.manager(group).leave, group, [member])

    @rule(
        group=st.sampled_from(GROUPS),
        c=st.sampled_from([*CLIENTS, None]),
        partition=st.integers(0, 2),
        offset=st.integers(0, 1000),
    )
    def commit(self, group, c, partition, offset):
        client = self.clients[(group, c)] if c is not None else Client()
        key = (group, "t", partition)

        def done(errors):
            if errors == [E.none]:
                self.acked[key] = offset

        def go():
            shard = self.runtime.shard_for(group)
            result = shard.offset_manager.commit(
                group, client.generation, client.member_id, None, [PartitionCommit("t", partition, offset, -1, "")]
            )
            errors = respond(shard, result, done, commit_failed(result))
            if errors is not None:
                done(errors)

        self.run(go)

    @rule(ms=st.sampled_from([100, 1_000, 4_000, SESSION + 1, REBALANCE + 1]))
    def advance(self, ms):
        self.run(self.clock.advance, ms)

    @rule()
    def expire_offsets(self):
        """Retention (short here): offsets and empty groups may go, nothing else changes."""
        before = dict(self.acked)
        self.run(self.runtime.expire_offsets)
        live = self.live_offsets()
        assert all(before.get(k) == v for k, v in live.items())  # only removals
        self.acked = {k: v for k, v in before.items() if k in live}
        # An expired group is gone, as in Kafka: one formed again counts from 0.
        self.generations = {g: n for g, n in self.generations.items() if self.runtime.group(g) is not None}

    @rule()
    def toggle_disk(self):
        self.memory.failing = not self.memory.failing

    @rule()
    def restart(self):
        """A new coordinator loads the log; the clients keep their ids (their requests in
        flight are gone with their connections)."""

        def go():
            self.clock = ManualClock(start_ms=self.clock.now())  # the old process's timers die with it
            self.runtime = new_runtime(self.memory, self.clock, self.config, self.offsets)
            self.runtime.load(self.memory.all_records())

        self.run(go)
        for client in self.clients.values():
            client.join = client.sync = None
        # What was never stored is forgotten, as in Kafka: generations go on from the stored ones.
        self.generations = {g.group_id: g.generation_id for g in self.runtime.all_groups()}

    # invariants -------------------------------------------------------------------------

    @invariant()
    def groups_are_legal(self):
        for group in self.runtime.all_groups():
            assert isinstance(group, ClassicGroup)
            assert group.state in VALID_PREVIOUS
            assert group.leader_id is None or group.leader_id in group.members
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                assert group.members and group.leader_id is not None
            assert group.awaiting_join_count == sum(m.join_waiter is not None for m in group.members.values())
            for instance, member_id in group.static_members.items():
                assert group.members[member_id].group_instance_id == instance
            assert group.generation_id >= self.generations.get(group.group_id, 0), "generation went back"
            self.generations[group.group_id] = group.generation_id
            if group.stored is not None:
                assert group.stored.generation <= group.generation_id

    def live_offsets(self) -> dict:
        return {
            (g, t, p): v.offset
            for shard in self.runtime.shards
            for g, offsets in shard.offsets.snapshot().items()
            for (t, p), v in offsets.items()
        }

    @invariant()
    def acknowledged_commits_are_readable_and_nothing_else(self):
        assert self.live_offsets() == self.acked

    @invariant()
    def replay_rebuilds_the_durable_state(self):
        fresh = new_runtime(self.memory, ManualClock(), self.config, self.offsets)
        for partition, key, value in self.memory.all_records():
            fresh.shards[partition].replay(key, value)
        assert [s.durable_view() for s in fresh.shards] == [s.durable_view() for s in self.runtime.shards]


GroupMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_group_state_machine_properties = GroupMachine.TestCase
