"""ElectLeaders (43), AlterPartitionReassignments (45) and ListPartitionReassignments (46),
answered as Kafka's controller (ReplicationControlManager) answers them, on the topology of
the brokers this process serves (coordinator.topology).

The data is stored once, so a replica is caught up the moment it is alive: a reassignment
whose new replicas are all running completes at once (Kafka's stages 1-3 in one step), and
one that adds a stopped broker stays in progress, its replicas the old and new together, until
that broker runs again. Leaders move through ClusterControl, so a moved
`__consumer_offsets` partition takes its groups' coordinators with it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol.error_messages import default_message

from ..apis import Registry, RequestContext, errors_by_topic
from ..topology import Reassignment

ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 43, 45, 46
PREFERRED, UNCLEAN = 0, 1


class PartitionError(Exception):
    def __init__(self, code: E, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class PartitionAdminApis:
    def __init__(self, topics: Any, topology: Any, control: Any) -> None:
        self.topics = topics  # coordinator.broker.topics.Topics
        self.topology = topology  # coordinator.topology.Topology
        self.control = control  # coordinator.topology.ClusterControl
        # (kept with the placement, so a restart resumes them as Kafka's controller does)
        self.ongoing: dict[tuple[str, int], Reassignment] = topology.reassignments

    def register(self, registry: Registry) -> None:
        registry.add(ELECT_LEADERS, range(0, 3), self.elect_leaders)
        registry.add(ALTER_PARTITION_REASSIGNMENTS, range(0, 2), self.alter_partition_reassignments)
        registry.add(LIST_PARTITION_REASSIGNMENTS, range(0, 1), self.list_partition_reassignments)

    def _check(self, topic: str, partition: int, *, reassigning: bool = False) -> None:
        info = self.topics.get(topic)
        if info is None:
            raise PartitionError(
                E.unknown_topic_or_partition,
                f"Unable to find a topic named {topic}." if reassigning else f"No such topic as {topic}",
            )
        if not 0 <= partition < info.partitions:
            raise PartitionError(
                E.unknown_topic_or_partition,
                f"Unable to find partition {topic}:{partition}."
                if reassigning
                else f"No such partition as {topic}-{partition}",
            )

    def _alive(self, node_id: int) -> bool:
        broker = self.topology.brokers.get(node_id)
        return broker is not None and broker.alive

    # ElectLeaders -----------------------------------------------------------------------

    async def elect_leaders(self, ctx: RequestContext, req: Any) -> Any:
        """Kafka's ReplicationControlManager.electLeaders: PREFERRED makes each partition's
        first replica its leader (ELECTION_NOT_NEEDED if it is; PREFERRED_LEADER_NOT_AVAILABLE
        if it is not in the ISR); UNCLEAN gives a leaderless partition a live replica
        (ELECTION_NOT_NEEDED while it has a leader). No partitions named: every partition,
        answering only those that needed an election."""
        await self._complete_reassignments()
        election = getattr(req, "election_type", PREFERRED)
        if election not in (PREFERRED, UNCLEAN):
            # ReplicationControlManager.electionType's InvalidRequestException fails the whole
            # request; ElectLeadersRequest.getErrorResponse gives it to each partition named
            invalid = E.invalid_request
            refused = errors_by_topic(
                ctx,
                "ReplicaElectionResult",
                "PartitionResult",
                ((t.topic, [(p, invalid) for p in t.partitions]) for t in req.topic_partitions or ()),
                name="topic",
                partitions="partition_result",
                index="partition_id",
                error_message=f"Unknown election type {election}",
            )
            return ctx.response(throttle_time=0, error_code=invalid, replica_election_results=refused)
        every = req.topic_partitions is None
        wanted = (
            [(name, list(range(info.partitions))) for name, info in sorted(self.topics.topics.items())]
            if every
            else [(t.topic, list(t.partitions)) for t in req.topic_partitions]
        )
        results = []
        for topic, partitions in wanted:
            rows = []
            for p in partitions:
                code, message = E.none, None
                try:
                    await self._elect(topic, p, election)
                except PartitionError as e:
                    # (the controller's ApiError(error): the error's default message when none is given)
                    code, message = e.code, e.message or default_message(e.code)
                if every and code == E.election_not_needed:
                    continue  # (all partitions: only those that needed one are answered)
                rows.append((p, code, {"error_message": message}))
            results.append((topic, rows))
        elected = errors_by_topic(
            ctx,
            "ReplicaElectionResult",
            "PartitionResult",
            results,
            name="topic",
            partitions="partition_result",
            index="partition_id",
        )
        return ctx.response(throttle_time=0, error_code=E.none, replica_election_results=elected)

    async def _elect(self, topic: str, partition: int, election: int) -> None:
        self._check(topic, partition)
        st = self.topology.state(topic, partition)
        leader_alive = self._alive(st.leader)
        if election == PREFERRED:
            if st.leader == st.replicas[0] and leader_alive:
                raise PartitionError(E.election_not_needed)
            if st.replicas[0] not in st.isr or not self._alive(st.replicas[0]):
                raise PartitionError(E.preferred_leader_not_available)
            await self.control.move_leader(topic, partition, st.replicas[0])
        else:
            if leader_alive:
                raise PartitionError(E.election_not_needed)
            live = [n for n in st.isr if self._alive(n)] or [n for n in st.replicas if self._alive(n)]
            if not live:
                raise PartitionError(E.eligible_leaders_not_available)
            await self.control.move_leader(topic, partition, live[0])

    # AlterPartitionReassignments --------------------------------------------------------

    async def alter_partition_reassignments(self, ctx: RequestContext, req: Any) -> Any:
        """Kafka's ReplicationControlManager.alterPartitionReassignments: each partition on its
        own; null replicas cancel one in progress (NO_REASSIGNMENT_IN_PROGRESS if none)."""
        await self._complete_reassignments()
        allow_rf_change = getattr(req, "allow_replication_factor_change", True)
        topics = []
        for t in req.topics:
            rows = []
            for p in t.partitions:
                code, message = E.none, None
                try:
                    self._check(t.name, p.partition_index, reassigning=True)
                    if p.replicas is None:
                        await self._cancel(t.name, p.partition_index)
                    else:
                        await self._reassign(t.name, p.partition_index, list(p.replicas), allow_rf_change)
                except PartitionError as e:
                    code, message = e.code, e.message
                rows.append((p.partition_index, code, {"error_message": message}))
            topics.append((t.name, rows))
        return ctx.response(
            throttle_time=0,
            allow_replication_factor_change=allow_rf_change,
            error_code=E.none,
            error_message=None if req.topics else "",  # (as Kafka's: "" only when nothing was asked)
            responses=errors_by_topic(ctx, "ReassignableTopicResponse", "ReassignablePartitionResponse", topics),
        )

    async def _reassign(self, topic: str, partition: int, target: list[int], allow_rf_change: bool) -> None:
        refused = self.topology.check_manual_assignment(target)
        if refused is not None:
            raise PartitionError(E.invalid_replica_assignment, refused)
        st = self.topology.state(topic, partition)
        key = (topic, partition)
        current = self.ongoing[key].original if key in self.ongoing else list(st.replicas)
        if not allow_rf_change and len(target) != len(current):
            raise PartitionError(
                E.invalid_replication_factor,
                f"The replication factor is changed from "
                f"{len(current)} to {len(target)} but allowReplicationFactorChange is false",
            )
        self.ongoing[key] = Reassignment(current, target)
        await self._progress(topic, partition)

    async def _cancel(self, topic: str, partition: int) -> None:
        ongoing = self.ongoing.pop((topic, partition), None)
        if ongoing is None:
            raise PartitionError(E.no_reassignment_in_progress, None)  # (Kafka's answer has no message)
        await self._install(topic, partition, ongoing.original)

    async def _progress(self, topic: str, partition: int) -> None:
        """Complete the reassignment if every replica it adds is running (caught up at once:
        the data is shared), else show the old and new replicas together while it waits."""
        ongoing = self.ongoing[(topic, partition)]
        if all(self._alive(n) for n in ongoing.adding):
            del self.ongoing[(topic, partition)]
            await self._install(topic, partition, ongoing.target)
        else:
            await self._install(topic, partition, ongoing.merged)

    async def _install(self, topic: str, partition: int, replicas: list[int]) -> None:
        """The partition's replicas become `replicas`; the ISR their running ones; a leader
        outside them or stopped gives way to the first running one (Kafka's
        PartitionChangeBuilder), its leader epoch bumped."""
        t = self.topology
        st = t.state(topic, partition)
        live = [n for n in replicas if self._alive(n)]
        st.replicas = list(replicas)
        st.isr = live
        t.version += 1
        if live and (st.leader not in replicas or not self._alive(st.leader)):
            await self.control.move_leader(topic, partition, live[0])  # (which keeps the placement)
        else:
            await t.save_placement()

    async def _complete_reassignments(self) -> None:
        """Reassignments waiting for a broker that runs again complete now."""
        for topic, partition in list(self.ongoing):
            if all(self._alive(n) for n in self.ongoing[(topic, partition)].adding):
                await self._progress(topic, partition)

    # ListPartitionReassignments ---------------------------------------------------------

    async def list_partition_reassignments(self, ctx: RequestContext, req: Any) -> Any:
        """The reassignments in progress (all, or those of the partitions named; names that
        are no topic are left out, as Kafka's controller does)."""
        await self._complete_reassignments()
        if req.topics is None:
            wanted: dict[str, set[int] | None] = {topic: None for topic, _ in self.ongoing}
        else:
            wanted = {t.name: set(t.partition_indexes) for t in req.topics}
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), r in sorted(self.ongoing.items()):
            if topic in wanted and (wanted[topic] is None or partition in wanted[topic]):  # type: ignore[operator]  # the `is None` test before `or` excludes None; mypy does not narrow a dict item
                by_topic.setdefault(topic, []).append(
                    ctx.nested(
                        "OngoingPartitionReassignment",
                        partition_index=partition,
                        replicas=tuple(r.merged),
                        adding_replicas=tuple(r.adding),
                        removing_replicas=tuple(r.removing),
                    )
                )
        return ctx.response(
            throttle_time=0,
            error_code=E.none,
            error_message=None,
            topics=tuple(
                ctx.nested("OngoingTopicReassignment", name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )
