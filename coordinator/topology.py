"""The cluster's topology: which brokers there are, which one leads each partition, and
so which one coordinates each group and transactional id.

Kafka's controller gives every partition a replica list, an ISR and a leader, and bumps
the partition's leader epoch each time the leader changes; the group coordinator of a
group is the leader of its `__consumer_offsets` partition, the transaction coordinator of
a transactional id the leader of its `__transaction_state` partition. `Topology` keeps
that for the brokers this process serves (`--brokers N`). The data is stored once, in
this process: replicas and ISR are what Metadata reports and what elections choose from,
no bytes are copied between brokers.

Placement is deterministic (Kafka picks a random start broker): partition p of a topic
has its replicas on the brokers from (crc32(topic) + p) on, in node-id order;
`__consumer_offsets` and `__transaction_state` partition p from broker p on, with
replication factor min(3, N) (offsets.topic.replication.factor,
transaction.state.log.replication.factor).

The placement (replicas, leader, leader epoch and any reassignment in progress of every
partition that left its default placement) is kept in `partition-placement.json` in the data
dir, as Kafka's controller keeps PartitionRegistration records in its metadata log: a
restarted server comes back with the leaders and replicas it had, every broker running.

`ClusterControl` is the operator's side (Kafka's controller actions, librdkafka's
mock-cluster and kfake's controls): stop and start brokers, move a partition's
leadership or a group's coordinator. The HTTP test control (coordinator/control.py),
`kcoord cluster` and `coordinator.testing` drive it.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from . import server_log
from .durable import JsonFile
from .errors import E
from .listeners import Listener
from .log.offsets import TOPIC as OFFSETS_TOPIC, partition_for

log = server_log.get(__name__)

TRANSACTION_TOPIC = "__transaction_state"
PLACEMENT_FILE = "partition-placement.json"
INTERNAL_REPLICATION_FACTOR = 3  # offsets.topic.replication.factor, transaction.state.log.replication.factor


class ControlError(ValueError):
    """A control request that cannot be done (unknown broker, the last broker, no such
    partition); nothing was changed."""


@dataclass
class PartitionState:
    """One partition's entry in the controller's metadata (Kafka's PartitionRegistration),
    with its leader-epoch history (Kafka's LeaderEpochFileCache: epoch -> start offset)."""

    replicas: list[int]
    isr: list[int]
    leader: int
    epoch: int = 0
    epochs: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    log: Any = field(default=None, repr=False)  # the partition's log (a re-created topic has a new one)

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) of the requested epoch: Kafka's LeaderEpochFileCache.endOffsetFor.
        The current epoch ends at the log end; an older one where the next one starts (and is
        answered with the newest epoch not above it); a newer or undefined one is unknown."""
        if requested < 0:
            return -1, -1
        if requested == self.epoch:
            return self.epoch, log_end_offset
        higher = next(((e, start) for e, start in self.epochs if e > requested), None)
        if higher is None:
            return -1, -1
        floor = [e for e, _ in self.epochs if e <= requested]
        return (floor[-1] if floor else requested), higher[1]


@dataclass
class Reassignment:
    """One in progress (Kafka's PartitionRegistration adding/removing replicas)."""

    original: list[int]
    target: list[int]

    @property
    def adding(self) -> list[int]:
        return [n for n in self.target if n not in self.original]

    @property
    def removing(self) -> list[int]:
        return [n for n in self.original if n not in self.target]

    @property
    def merged(self) -> list[int]:
        """The replicas while it is in progress: the target's, then those leaving."""
        return self.target + self.removing


@dataclass
class Broker:
    node_id: int
    listeners: list[Listener]
    alive: bool = True

    def endpoint(self, protocol: str) -> tuple[str, int] | None:
        """The address advertised to clients of one listener protocol (None: no such listener)."""
        for listener in self.listeners:
            if listener.protocol == protocol:
                return listener.advertised
        return None


class Topology:
    def __init__(
        self,
        listeners: list[Listener],
        topics: Any,
        offsets_partitions: int,
        txn_logs: list[Any],
        data_dir: Path | None = None,
    ) -> None:
        self.brokers: dict[int, Broker] = {}
        for listener in listeners:
            self.brokers.setdefault(listener.node_id, Broker(listener.node_id, [])).listeners.append(listener)
        self.node_ids = sorted(self.brokers)
        # One broker leads everything: the routing checks answer at once.
        self.single = len(self.node_ids) == 1
        self.topics = topics  # coordinator.broker.topics.Topics (partition logs and replication factors)
        self.offsets_partitions = offsets_partitions
        self.txn_logs = txn_logs
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        # __consumer_offsets partitions whose new coordinator is loading them
        # (COORDINATOR_LOAD_IN_PROGRESS until done); the same for __transaction_state.
        self.loading: set[int] = set()
        self.txn_loading: set[int] = set()
        self.version = 0  # bumped on every change (Metadata answers are cached by it)
        # Reassignments in progress (coordinator.broker.partition_admin drives them).
        self.reassignments: dict[tuple[str, int], Reassignment] = {}
        self.placement = JsonFile(Path(data_dir) / PLACEMENT_FILE) if data_dir is not None else None
        # Leader epochs of the partitions whose leader changed, by log directory, until
        # save_placement keeps them (Kafka's leader-epoch-checkpoint).
        self.epochs_to_save: dict[Path, list[tuple[int, int]]] = {}
        self._epoch_files: dict[Path, JsonFile] = {}
        if self.placement is not None:
            self.placement.load(parse=self._restore)
        # The leader of each __consumer_offsets partition: every group request checks it.
        self.coordinators = [self.state(OFFSETS_TOPIC, p).leader for p in range(offsets_partitions)]
        for p in range(len(txn_logs)):
            self.state(TRANSACTION_TOPIC, p)

    # reading ----------------------------------------------------------------------------

    def live(self) -> list[int]:
        return [n for n in self.node_ids if self.brokers[n].alive]

    def controller(self) -> int:
        """The node reported as controller: the first live broker (KRaft brokers report a
        random broker; clients only send it admin requests, which every broker serves)."""
        return self.live()[0]

    def _log_of(self, topic: str, partition: int) -> Any:
        if topic == TRANSACTION_TOPIC:
            return self.txn_logs[partition] if 0 <= partition < len(self.txn_logs) else None
        found = self.topics.partition_log(topic, partition)
        if found is None:  # an internal topic not used yet: not listed, but its partitions lead all the same
            info = getattr(self.topics, "internal_pending", {}).get(topic)
            if info is not None and 0 <= partition < info.partitions:
                return info.logs[partition]
        return found

    def exists(self, topic: str, partition: int) -> bool:
        return self._log_of(topic, partition) is not None

    def _replication_factor(self, topic: str) -> int:
        if topic in (OFFSETS_TOPIC, TRANSACTION_TOPIC):
            return min(INTERNAL_REPLICATION_FACTOR, len(self.node_ids))
        info = self.topics.get(topic)
        return max(1, min(getattr(info, "replication_factor", 1), len(self.node_ids)))

    def state(self, topic: str, partition: int) -> PartitionState:
        """The partition's state, placed on first use (a topic's partitions are placed when
        they are first looked up, which is before any client can use them), and again if
        its topic was deleted and created anew."""
        st = self.partitions.get((topic, partition))
        plog = self._log_of(topic, partition)
        if st is None or st.log is not plog:
            st = self.partitions[(topic, partition)] = self._place(topic, partition, plog)
        return st

    def _place(self, topic: str, partition: int, plog: Any) -> PartitionState:
        replicas = self._default_replicas(topic, partition)
        live = [n for n in replicas if self.brokers[n].alive]
        if not live:  # every replica is stopped: placed on live brokers instead
            replicas = self._live_from(self._start(topic, partition), len(replicas))
            live = replicas
        st = PartitionState(replicas, live, live[0], log=plog)
        epochs = read_epochs(plog.directory) if plog is not None else None
        if epochs:  # the epochs of an earlier run: its batches carry them
            st.epochs, st.epoch = epochs, epochs[-1][0]
            plog.leader_epoch = st.epoch
        return st

    @staticmethod
    def _start(topic: str, partition: int) -> int:
        return partition if topic in (OFFSETS_TOPIC, TRANSACTION_TOPIC) else zlib.crc32(topic.encode()) + partition

    def _default_replicas(self, topic: str, partition: int) -> list[int]:
        ids, start = self.node_ids, self._start(topic, partition)
        return [ids[(start + i) % len(ids)] for i in range(self._replication_factor(topic))]

    def _topic_id(self, topic: str) -> str | None:
        info = self.topics.get(topic)
        return str(info.topic_id) if info is not None else None

    def _restore(self, doc: dict[str, Any]) -> None:
        """The placement an earlier run kept (Kafka's controller replaying its metadata log).
        An entry is dropped if its topic is gone or was created anew (another topic id), or if
        it names a broker this run does not have (a restart with fewer brokers): that partition
        is placed by default. Every broker runs after a restart, so the ISR is the replicas."""
        for entry in doc["partitions"]:  # (a bad shape raises here: JsonFile.load names the file)
            topic, partition = entry["topic"], entry["partition"]
            replicas, leader, epoch = list(entry["replicas"]), entry["leader"], entry["leader_epoch"]
            ongoing = entry.get("reassigning")
            reassignment = Reassignment(list(ongoing["original"]), list(ongoing["target"])) if ongoing else None
            plog = self._log_of(topic, partition) if type(topic) is str and type(partition) is int else None
            known = set(self.node_ids)
            named = set(replicas) | {leader} | (set(reassignment.merged) if reassignment else set())
            if plog is None or entry.get("topic_id") != self._topic_id(topic) or not named <= known or not replicas:
                continue
            if leader not in replicas or type(epoch) is not int or epoch < 0:
                continue
            st = PartitionState(replicas, list(replicas), leader, log=plog)
            st.epochs = read_epochs(plog.directory) or [(0, 0)]
            if epoch > st.epochs[-1][0]:  # (the checkpoint is written first; this only guards a lost one)
                st.epochs.append((epoch, plog.log_end_offset))
            st.epoch = st.epochs[-1][0]
            plog.leader_epoch = st.epoch
            self.partitions[(topic, partition)] = st
            if reassignment is not None:
                self.reassignments[(topic, partition)] = reassignment

    def placement_document(self) -> dict[str, Any]:
        """The partitions that left their default placement, with their reassignments."""
        rows = []
        for (topic, partition), st in sorted(self.partitions.items()):
            if st.log is None or st.log is not self._log_of(topic, partition):
                continue  # (a deleted topic's partition)
            ongoing = self.reassignments.get((topic, partition))
            if st.epoch == 0 and ongoing is None and st.replicas == self._default_replicas(topic, partition):
                continue
            row: dict[str, Any] = {
                "topic": topic,
                "topic_id": self._topic_id(topic),
                "partition": partition,
                "replicas": st.replicas,
                "leader": st.leader,
                "leader_epoch": st.epoch,
            }
            if ongoing is not None:
                row["reassigning"] = {"original": ongoing.original, "target": ongoing.target}
            rows.append(row)
        return {"version": 1, "partitions": rows}

    async def save_placement(self) -> None:
        """Keep the placement as it is now (after every leader or replica change, which are
        rare): the document is built when its write starts, so it has every change before it."""
        # Each moved partition's leader epochs first (what a restarted leader answers
        # OffsetForLeaderEpoch from), through the durable helper, off the loop.
        while self.epochs_to_save:
            directory, epochs = self.epochs_to_save.popitem()
            store = self._epoch_files.setdefault(directory, JsonFile(directory / EPOCHS_FILE))
            try:
                await store.update(epochs_change(epochs))
            except OSError as e:
                log.warning("%s: cannot keep the leader epochs: %s", directory, e.strerror or e)
        if self.placement is not None:
            await self.placement.update(lambda: (self.placement_document(), None))

    def check_manual_assignment(self, replicas: list[int], replication_factor: int | None = None) -> str | None:
        """Why Kafka's controller refuses a manual assignment of one partition
        (ReplicationControlManager.validateManualPartitionAssignment, its message), or None."""
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        previous = None
        for node_id in sorted(replicas):
            if node_id not in self.brokers:
                return f"The manual partition assignment includes broker {node_id}, but no such broker is registered."
            if node_id == previous:
                return f"The manual partition assignment includes the broker {node_id} more than once."
            previous = node_id
        if replication_factor is not None and len(replicas) != replication_factor:
            return (
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is"
                f" not consistent with previous partitions, which have {replication_factor} replica(s)."
            )
        return None

    def any_alive(self, replicas: list[int]) -> bool:
        return any(self.brokers[n].alive for n in replicas if n in self.brokers)

    async def assign(self, topic: str, first: int, assignments: list[list[int]]) -> None:
        """Place new partitions `first`, `first + 1`, ... of a topic on the replicas given (a
        CreateTopics or CreatePartitions with a manual assignment): the live ones in the ISR,
        the first live one leading, as Kafka's buildPartitionRegistration; kept durably."""
        for i, replicas in enumerate(assignments):
            live = [n for n in replicas if self.brokers[n].alive]
            plog = self._log_of(topic, first + i)
            self.partitions[(topic, first + i)] = PartitionState(list(replicas), live, live[0], log=plog)
        self.version += 1
        await self.save_placement()

    def _live_from(self, start: int, count: int) -> list[int]:
        ids = self.node_ids
        order = [ids[(start + i) % len(ids)] for i in range(len(ids))]
        return [n for n in order if self.brokers[n].alive][:count]

    def leader_of(self, topic: str, partition: int) -> int:
        return self.state(topic, partition).leader

    def group_partition(self, group_id: str) -> int:
        return partition_for(group_id, self.offsets_partitions)

    def coordinator_of(self, group_id: str) -> int:
        return self.leader_of(OFFSETS_TOPIC, self.group_partition(group_id))

    def txn_partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, len(self.txn_logs))

    def transaction_coordinator_of(self, transactional_id: str) -> int:
        return self.leader_of(TRANSACTION_TOPIC, self.txn_partition(transactional_id))

    def endpoint(self, node_id: int, protocol: str) -> tuple[str, int]:
        broker = self.brokers.get(node_id)
        found = broker.endpoint(protocol) if broker is not None else None
        return found or ("", -1)

    # the checks every request for a partition or a group passes -------------------------

    def leader_error(self, node_id: int, topic: str, partition: int, current_epoch: int = -1) -> E:
        """Kafka's ReplicaManager checks for a partition request that reached broker node_id:
        NOT_LEADER_OR_FOLLOWER if it does not lead the partition; with a current leader epoch
        (KIP-320), FENCED_LEADER_EPOCH if the client's is older, UNKNOWN_LEADER_EPOCH if newer."""
        if self.single and current_epoch < 0:
            return E.none
        st = self.state(topic, partition)
        if st.leader != node_id:
            return E.not_leader_or_follower
        if current_epoch >= 0 and current_epoch != st.epoch:
            return E.fenced_leader_epoch if current_epoch < st.epoch else E.unknown_leader_epoch
        return E.none

    def coordinator_error(self, node_id: int, offsets_partition: int) -> int:
        """Kafka's isCoordinatorForGroup / isGroupLoading: NOT_COORDINATOR on a broker that does
        not lead the group's partition, COORDINATOR_LOAD_IN_PROGRESS while it loads it."""
        if self.coordinators[offsets_partition] != node_id:
            return E.not_coordinator
        return E.coordinator_load_in_progress if self.loading and offsets_partition in self.loading else E.none

    def txn_coordinator_error(self, node_id: int, transactional_id: str) -> int:
        """Kafka's TransactionStateManager.getTransactionState checks: NOT_COORDINATOR on a
        broker that does not lead the id's __transaction_state partition,
        COORDINATOR_LOAD_IN_PROGRESS while its new leader loads it."""
        if self.single:
            return E.none
        p = self.txn_partition(transactional_id)
        if self.state(TRANSACTION_TOPIC, p).leader != node_id:
            return E.not_coordinator
        return E.coordinator_load_in_progress if self.txn_loading and p in self.txn_loading else E.none

    # changes ----------------------------------------------------------------------------

    def set_leader(self, topic: str, partition: int, leader: int) -> PartitionState:
        """Make `leader` (a live broker) the partition's leader under a new epoch. A broker
        outside the replicas takes the old leader's place among them (a reassignment)."""
        st = self.state(topic, partition)
        if leader == st.leader:
            return st
        if leader not in st.replicas:
            st.replicas[st.replicas.index(st.leader) if st.leader in st.replicas else 0] = leader
        st.leader = leader
        st.epoch += 1
        if topic == OFFSETS_TOPIC:
            self.coordinators[partition] = leader
        plog = self._log_of(topic, partition)
        st.epochs.append((st.epoch, plog.log_end_offset if plog is not None else 0))
        if plog is not None:
            self.epochs_to_save[plog.directory] = list(st.epochs)  # kept by save_placement
            plog.leader_epoch = st.epoch  # stamped on the batches it appends from now on
            plog.wake_listeners()  # (fetches waiting on the old leader answer NOT_LEADER_OR_FOLLOWER now)
        st.isr = [n for n in st.replicas if self.brokers[n].alive]
        self.version += 1
        return st

    def next_leader(self, topic: str, partition: int) -> int:
        """Where leadership goes when it must leave the current leader: the next live replica
        in replica order, else the next live broker."""
        st = self.state(topic, partition)
        i = st.replicas.index(st.leader) if st.leader in st.replicas else -1
        rotated = st.replicas[i + 1 :] + st.replicas[: i + 1]
        others = [n for n in rotated if n != st.leader and self.brokers[n].alive]
        if others:
            return others[0]
        spare = [n for n in self.live() if n != st.leader]
        if not spare:
            raise ControlError(f"{topic}-{partition}: no other live broker to lead it")
        return next((n for n in spare if n > st.leader), spare[0])

    def broker_stopped(self, node_id: int) -> list[tuple[str, int]]:
        """Broker node_id is gone: it leaves every ISR, and each partition it led gets a new
        leader. Returns the partitions whose leader changed."""
        self.brokers[node_id].alive = False
        moved = []
        for (topic, partition), st in list(self.partitions.items()):
            if node_id in st.isr:
                st.isr = [n for n in st.isr if n != node_id]
            if st.leader == node_id:
                self.set_leader(topic, partition, self.next_leader(topic, partition))
                moved.append((topic, partition))
        self.version += 1
        return moved

    def broker_started(self, node_id: int) -> None:
        """Broker node_id is back: it rejoins the ISR of every partition it is a replica of
        (its copy is the one stored copy, so it is caught up at once)."""
        self.brokers[node_id].alive = True
        for st in self.partitions.values():
            if node_id in st.replicas and node_id not in st.isr:
                st.isr = [n for n in st.replicas if self.brokers[n].alive]
        self.version += 1

    def preferred_leaders(self, node_id: int) -> list[tuple[str, int]]:
        """Partitions whose preferred (first) replica is node_id but that another broker leads
        (Kafka's preferred leader election brings them back)."""
        return [key for key, st in self.partitions.items() if st.replicas[0] == node_id and st.leader != node_id]


EPOCHS_FILE = "leader-epoch-checkpoint"  # Kafka's name and format: version, count, "epoch start-offset" lines


def read_epochs(directory: Path) -> list[tuple[int, int]] | None:
    """A partition's leader epochs as a previous run left them (None: never moved, or unreadable)."""
    try:
        lines = (directory / EPOCHS_FILE).read_text().split("\n")
        count = int(lines[1])
        epochs = [(int(e), int(o)) for e, o in (line.split() for line in lines[2 : 2 + count])]
    except (OSError, ValueError, IndexError):
        return None
    return epochs or None


def epochs_change(epochs: list[tuple[int, int]]) -> Callable[[], tuple[bytes, None]]:
    """The leader-epoch-checkpoint document of epochs, as a JsonFile.update change."""
    data = (f"0\n{len(epochs)}\n" + "".join(f"{e} {o}\n" for e, o in epochs)).encode()
    return lambda: (data, None)


class ShardMover(Protocol):
    """The group coordinator's side of a `__consumer_offsets` leadership change
    (coordinator.groups.runtime.CoordinatorRuntime)."""

    async def unload(self, partition: int) -> None: ...

    async def load_partition(self, partition: int) -> object: ...  # (the runtime's: the records replayed)


class ClusterControl:
    """Stop and start brokers, move leaders and coordinators, while clients run. Every
    operation is checked before anything changes (ControlError says why) and runs alone."""

    def __init__(
        self,
        topology: Topology,
        groups: ShardMover,
        close_broker: Callable[[int], None],
        open_broker: Callable[[int], Awaitable[None]],
        transactions: Any = None,
        shares: Any = None,
    ) -> None:
        self.topology = topology
        self.groups = groups
        # a broker's listeners and connections closed; its listeners opened again (OSError: a
        # port taken meanwhile)
        self.close_broker, self.open_broker = close_broker, open_broker
        self.transactions = transactions
        # coordinator.share.manager.SharePartitionManager: share-partitions follow their leader
        self.shares = shares
        self._lock = asyncio.Lock()

    # reading ----------------------------------------------------------------------------

    def brokers(self) -> list[dict[str, Any]]:
        t = self.topology
        out = []
        for node_id in t.node_ids:
            broker = t.brokers[node_id]
            host, port = broker.listeners[0].advertised
            led = sum(1 for st in t.partitions.values() if st.leader == node_id)
            out.append(
                {
                    "node_id": node_id,
                    "host": host,
                    "port": port,
                    "alive": broker.alive,
                    "listeners": [f"{x.protocol}://{x.advertised[0]}:{x.advertised[1]}" for x in broker.listeners],
                    "leader_of": led,
                }
            )
        return out

    def coordinator_of(self, group_id: str) -> int:
        return self.topology.coordinator_of(group_id)

    def transaction_coordinator_of(self, transactional_id: str) -> int:
        return self.topology.transaction_coordinator_of(transactional_id)

    def leader_of(self, topic: str, partition: int) -> int:
        self._check_partition(topic, partition)
        return self.topology.leader_of(topic, partition)

    # checks -----------------------------------------------------------------------------

    def _check_broker(self, node_id: Any, *, live: bool = False) -> int:
        if type(node_id) is not int or node_id not in self.topology.brokers:
            raise ControlError(f"no broker {node_id!r}; brokers: {', '.join(map(str, self.topology.node_ids))}")
        if live and not self.topology.brokers[node_id].alive:
            raise ControlError(f"broker {node_id} is stopped")
        return node_id

    def _check_partition(self, topic: Any, partition: Any) -> None:
        if type(topic) is not str or type(partition) is not int or not self.topology.exists(topic, partition):
            raise ControlError(f"no partition {topic!r} {partition!r}")

    # changes ----------------------------------------------------------------------------

    async def stop_broker(self, node_id: int) -> list[dict[str, Any]]:
        """Kafka's controlled shutdown, from the clients' view: the broker's listeners and
        connections close, it leaves every ISR, its partitions get new leaders (epochs bumped),
        and the group coordinators it held are loaded from the log by their new brokers."""
        async with self._lock:
            self._check_broker(node_id)
            t = self.topology
            if not t.brokers[node_id].alive:
                return self.brokers()  # already stopped: nothing to do
            if t.live() == [node_id]:
                raise ControlError(f"broker {node_id} is the last one running; it cannot be stopped")
            self.close_broker(node_id)
            if self.shares is not None:
                self.shares.broker_stopped(node_id)
            moved = t.broker_stopped(node_id)
            log.info("broker %d stopped: %d partition leaders moved", node_id, len(moved))
            await self._coordinators_moved(moved)
            return self.brokers()

    async def start_broker(self, node_id: int, *, preferred: bool = False) -> list[dict[str, Any]]:
        """The broker listens again and rejoins the ISRs; with `preferred`, it leads again the
        partitions it is the preferred replica of (Kafka's preferred leader election)."""
        async with self._lock:
            self._check_broker(node_id)
            t = self.topology
            if not t.brokers[node_id].alive:
                try:
                    await self.open_broker(node_id)
                except OSError as e:  # its port was taken meanwhile: it stays stopped
                    raise ControlError(f"broker {node_id} cannot listen again: {e}") from None
                t.broker_started(node_id)
                log.info("broker %d started", node_id)
            if preferred:
                moved = t.preferred_leaders(node_id)
                for topic, p in moved:
                    t.set_leader(topic, p, node_id)
                await self._coordinators_moved(moved)
            return self.brokers()

    async def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        """Make `to` (default: the next live replica) the partition's leader; returns it.
        For `__consumer_offsets` this moves the coordinator of every group of the partition."""
        async with self._lock:
            self._check_partition(topic, partition)
            if to is not None:
                self._check_broker(to, live=True)
            t = self.topology
            if to is None:
                to = t.next_leader(topic, partition)
            if to != t.leader_of(topic, partition):
                t.set_leader(topic, partition, to)
                log.info(
                    "%s-%d: leader now broker %d (epoch %d)", topic, partition, to, t.state(topic, partition).epoch
                )
                await self._coordinators_moved([(topic, partition)])
            return to

    async def move_coordinator(self, group_id: str, to: int | None = None) -> int:
        """Move the group's coordinator: its `__consumer_offsets` partition's leadership, with
        every group of that partition (the partition is the unit Kafka moves)."""
        if type(group_id) is not str or not group_id:
            raise ControlError(f"group id {group_id!r}: a non-empty string is needed")
        return await self.move_leader(OFFSETS_TOPIC, self.topology.group_partition(group_id), to)

    async def move_transaction_coordinator(self, transactional_id: str, to: int | None = None) -> int:
        if type(transactional_id) is not str or not transactional_id:
            raise ControlError(f"transactional id {transactional_id!r}: a non-empty string is needed")
        return await self.move_leader(TRANSACTION_TOPIC, self.topology.txn_partition(transactional_id), to)

    async def _coordinators_moved(self, moved: list[tuple[str, int]]) -> None:
        """Share-partitions of moved topic partitions leave the old leader's cache (the new
        leader loads them from `__share_group_state`). The new leaders of `__consumer_offsets`
        partitions load their groups from the log (Kafka's group immigration), those of
        `__transaction_state` partitions their transactional ids (the TransactionStateManager's);
        until each is loaded, its broker answers COORDINATOR_LOAD_IN_PROGRESS and the old one
        NOT_COORDINATOR. The new placement is written first (`partition-placement.json`)."""
        if self.shares is not None:
            for topic, p in moved:
                if topic not in (OFFSETS_TOPIC, TRANSACTION_TOPIC):
                    self.shares.partition_moved(topic, p)
        shards = [p for topic, p in moved if topic == OFFSETS_TOPIC]
        txn_shards = [p for topic, p in moved if topic == TRANSACTION_TOPIC] if self.transactions is not None else []
        t = self.topology
        t.loading.update(shards)
        t.txn_loading.update(txn_shards)
        try:
            # The new placement is kept first (the controller's record before the brokers act
            # on it), while the moved coordinators already answer COORDINATOR_LOAD_IN_PROGRESS.
            await t.save_placement()
            for p in txn_shards:
                await self.transactions.unload(p)
            for p in shards:
                await self.groups.unload(p)
            for p in shards:
                await self.groups.load_partition(p)
                t.loading.discard(p)
            for p in txn_shards:
                self.transactions.load_partition(p)
                t.txn_loading.discard(p)
        finally:
            t.loading.difference_update(shards)
            t.txn_loading.difference_update(txn_shards)
            t.version += 1
