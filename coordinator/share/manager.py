"""ShareFetch (78) and ShareAcknowledge (79): Kafka's SharePartitionManager, the share
sessions (ShareSessionCache) and the wire handlers.

A member's share session with a broker (broker, group id, member id: Kafka keeps a
ShareSessionCache per broker, and a share consumer one session with each broker it fetches
from) holds the partitions it fetches from there and an epoch: 0 opens one (replacing the
member's old one with that broker), -1 closes it (acknowledgements only),
any other epoch must be the session's (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH)
and moves it on by one. A request's acknowledgements are applied first, then records are
acquired from the session's partitions, long-polling up to max_wait for some. Every state
change of a share-partition is written to `__share_group_state` before the answer that
reports it (an acknowledgement, an acquisition with its delivery count), so after a crash
nothing acknowledged is delivered again, and what was acquired comes back Available with
the deliveries it has had.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, cast

from kio.schema.errors import ErrorCode as E

from protocol.error_messages import default_message

from .. import server_log
from ..futures import LongPolls
from ..apis import Registry, RequestContext, ms
from ..log.partition import PartitionLog, StorageError
from .dead_letters import BrokerProducer, DeadLetterError, DeadLetters
from .partition import ACKNOWLEDGED, ARCHIVED, DATA, SKIP, AckError, SharePartition, Undo
from .state_log import FENCED_MESSAGE, Key, ShareCoordinator

log = server_log.get(__name__)


def _by_topic_id(tp: tuple[uuid.UUID | None, int]) -> tuple[bytes, int]:
    """Sort order of (topic id, partition); the zero topic id reads as None (it is
    answered UNKNOWN_TOPIC_ID like any id no topic has)."""
    return (tp[0].bytes if tp[0] is not None else bytes(16), tp[1])


SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
RECORD_LIMIT = 1  # ShareFetch v2 share_acquire_mode: never more than max_records


@dataclass
class ShareSession:
    """Kafka's ShareSession: the partitions a member fetches from on one broker, and the next
    epoch."""

    node_id: int
    group_id: str
    member_id: str
    epoch: int = 1
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)

    @property
    def key(self) -> tuple[int, str, str]:
        return (self.node_id, self.group_id, self.member_id)


class RequestError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration_ms(text: str) -> int | None:
    """java.time.Duration.parse's ISO-8601 form (PnDTnHnMn.nS), as share.auto.offset.reset's
    by_duration takes it; None if it is not one."""
    m = _DURATION.match(text.upper())
    if m is None or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        return None
    days, hours, minutes, seconds = m.groups()
    return int(((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + float(seconds or 0) * 1000)


class PartitionTxnView(Protocol):
    """A partition's transactions as a read_committed share fetch reads them: the last stable
    offset, and the aborted transactions as (producer id, first offset, marker offset)."""

    aborted: list[tuple[int, int, int]]

    def last_stable_offset(self, high_watermark: int) -> int: ...


class PartitionLeader(BrokerProducer, Protocol):
    """What the share-partitions ask of the data plane (coordinator.broker.data.DataPlane):
    whether this broker leads a partition and who does (KIP-951's hints), the partition's
    transactions, Fetch's cap on a long poll, whether the broker is shutting down, and (for
    dead letters) a broker's own produce."""

    @property
    def topology(self) -> object: ...  # None with one broker

    @property
    def fetch_max_wait_ms(self) -> int: ...

    @property
    def draining(self) -> bool: ...

    def leader_error(self, ctx: RequestContext, topic: str, partition: int) -> int: ...

    def current_leader(self, ctx: RequestContext, topic: str, partition: int) -> Any: ...

    def node_endpoints(self, ctx: RequestContext, nodes: set[int]) -> tuple[Any, ...]: ...

    def txn_state(self, plog: PartitionLog) -> PartitionTxnView: ...


class SharePartitionManager:
    def __init__(
        self,
        topics: Any,
        data_plane: PartitionLeader,
        groups: Any,
        state: ShareCoordinator,
        config: Any,
        node_id: int,
        advertised: Any = None,
        share_version: Any = None,
    ) -> None:
        self.topics = topics
        self.data_plane = data_plane
        self.groups = groups  # the CoordinatorRuntime: group configs and membership
        self.state = state  # the share coordinator: the share-partitions' durable state
        self.config = config  # ShareGroupConfig
        self.node_id = node_id
        self.partitions: dict[Key, SharePartition] = {}
        # (broker, group id, member id): each broker has its own sessions, as each Kafka broker
        # its own ShareSessionCache; a member fetching from three brokers has three.
        self.sessions: dict[tuple[int, str, str], ShareSession] = {}
        self.waiters: LongPolls[Key] = LongPolls()
        self.timers: dict[Key, tuple[float, asyncio.TimerHandle]] = {}
        self.watched: weakref.WeakSet[PartitionLog] = weakref.WeakSet()
        self.loading: dict[Key, asyncio.Future[Any]] = {}
        # Per share-partition, the undo of each operation whose write is not durable yet, in
        # write order: a failed write undoes its own and every later one (they fail with it).
        self.unwritten: dict[Key, list[Undo]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        # The finalized share.version (its level 2 turns the groups' dead-letter queues on)
        self.share_version = share_version or (lambda: 1)
        self.dead_letters = DeadLetters(topics, data_plane, groups)
        self._dead_letter_tasks: set[asyncio.Task[None]] = set()
        # Per group: dead letters written, and dead-letter writes that failed (Kafka's
        # ShareGroupMetrics DeadLetterQueueRecordCount, DeadLetterQueueFailedProduceRequestsPerSec)
        self.dead_letters_written: Counter[str] = Counter()
        self.dead_letter_failures: Counter[str] = Counter()
        # Kafka's ShareCoordinatorService.setupSnapshotColdPartitions: every
        # share.coordinator.cold.partition.snapshot.interval.ms, the share-partitions whose last
        # snapshot is that old get a new one (the next round is set once its writes are done)
        self._cold_timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._schedule_cold_snapshots()
        for shard in groups.shards:
            shard.share.member_fenced.append(self.member_fenced)
            shard.share.group_deleted.append(self.group_deleted)
            shard.share.initialize_state = self.initialize_state

    def _schedule_cold_snapshots(self) -> None:
        if self._closed:
            return
        interval = self.config.cold_partition_snapshot_interval_ms / 1000
        self._cold_timer = asyncio.get_running_loop().call_later(interval, self._snapshot_cold)

    def _snapshot_cold(self) -> None:
        self._cold_timer = None
        self.state.snapshot_cold(
            int(time.time() * 1000), self.config.cold_partition_snapshot_interval_ms, self._schedule_cold_snapshots
        )

    def register(self, registry: Registry) -> None:
        registry.add(SHARE_FETCH, range(1, 3), self.share_fetch, cancel_on_close=True)
        registry.add(SHARE_ACKNOWLEDGE, range(1, 3), self.share_acknowledge)

    # settings ---------------------------------------------------------------------------

    def _setting(self, group_id: str, name: str) -> str | None:
        configs = self.groups.group_configs
        return configs.get(group_id, name) if configs is not None else None

    def lock_duration_ms(self, group_id: str) -> int:
        value = self._setting(group_id, "share.record.lock.duration.ms")
        return self.config.record_lock_duration_ms if value is None else int(value)

    def delivery_count_limit(self, group_id: str) -> int:
        """The group's share.delivery.count.limit, else the broker's (GroupConfigManager's
        value within the broker's min and max)."""
        configs = self.groups.group_configs
        return cast(
            int, configs.delivery_count_limit(group_id) if configs is not None else self.config.delivery_count_limit
        )

    def _limited(self, key: Key, sp: SharePartition) -> SharePartition:
        """The share-partition under its group's delivery count limit and dead-letter queue as
        they are now: Kafka's SharePartition reads maxDeliveryCount and whether the group has a
        DLQ topic (with share.version 2) at each state change."""
        sp.max_delivery = self.delivery_count_limit(key[0])
        sp.dlq = self.share_version() >= 2 and self.dead_letters.topic_for(key[0]) is not None
        return sp

    # share-partitions -------------------------------------------------------------------

    def _plog(self, topic_id: uuid.UUID, partition: int) -> tuple[int, PartitionLog | None]:
        info = self.topics.by_id.get(topic_id)
        if info is None:
            return E.unknown_topic_id, None
        if not 0 <= partition < info.partitions:
            return E.unknown_topic_or_partition, None
        return E.none, info.logs[partition]

    def _served(self, ctx: RequestContext, tp: tuple[uuid.UUID, int]) -> tuple[int, PartitionLog | None]:
        """_plog, and with several brokers NOT_LEADER_OR_FOLLOWER where the broker the request
        reached does not lead the partition (share-partitions live on the leader, as Kafka's)."""
        error, plog = self._plog(*tp)
        if plog is not None:
            info = self.topics.by_id[tp[0]]
            error = self.data_plane.leader_error(ctx, info.name, tp[1])
            if error != E.none:
                return error, None
        return error, plog

    def _current_leader(self, ctx: RequestContext, tp: tuple[uuid.UUID, int]) -> Any:
        info = self.topics.by_id.get(tp[0])
        if info is not None and self.data_plane.topology is not None and 0 <= tp[1] < info.partitions:
            return self.data_plane.current_leader(ctx, info.name, tp[1])
        return ctx.nested("LeaderIdAndEpoch", leader_id=self.node_id, leader_epoch=0)

    def _endpoints(self, ctx: RequestContext, errors: list[tuple[tuple[uuid.UUID, int], int]]) -> tuple[Any, ...]:
        """KIP-951: the leaders' addresses for the partitions answered NOT_LEADER_OR_FOLLOWER."""
        leaders = {self._current_leader(ctx, tp).leader_id for tp, error in errors if error == E.not_leader_or_follower}
        return self.data_plane.node_endpoints(ctx, leaders) if leaders else ()

    async def share_partition(self, key: Key, plog: PartitionLog) -> SharePartition:
        """The share-partition, loaded from `__share_group_state` or, the first time,
        started where share.auto.offset.reset says (its first snapshot written first)."""
        sp = self.partitions.get(key)
        if sp is not None:
            if sp.start < plog.log_start_offset:  # records deleted (retention, DeleteRecords) under it
                sp.reset(plog.log_start_offset)
            return sp
        pending = self.loading.get(key)
        if pending is not None:
            await asyncio.shield(pending)
            return self.partitions[key]
        fut = self.loading[key] = asyncio.get_running_loop().create_future()
        try:
            kw = {
                "max_delivery": self.delivery_count_limit(key[0]),
                "max_in_flight": self.config.partition_max_record_locks,
            }
            stored = self.state.stored(key)
            if stored is not None and stored.start >= 0:  # (-1: initialized, never started)
                sp = SharePartition.restored(stored.start, stored.records, **kw)
                sp.state_epoch = stored.state_epoch
                if sp.start < plog.log_start_offset:
                    sp.reset(plog.log_start_offset)
            else:
                # Nothing is written until a record's state changes, as Kafka writes nothing when
                # it starts a share-partition: its stored start stays unknown (-1) until then.
                sp = SharePartition(self._reset_offset(key[0], plog), **kw)
                if stored is not None:  # (initialized: under the state epoch it was given)
                    sp.state_epoch = stored.state_epoch
            self.partitions[key] = sp
            fut.set_result(None)
            # Records left Archiving (their dead letters not written when the server stopped)
            # get them now, as Kafka's SharePartition.maybeResumeDlqArchiving.
            self._dead_letter(key, sp, sp.dead_letters(list(sp.causes)))
            return sp
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # (retrieved: the waiters get it through shield)
            raise
        finally:
            del self.loading[key]

    def _reset_offset(self, group_id: str, plog: PartitionLog) -> int:
        """share.auto.offset.reset: latest (Kafka's default), earliest, or by_duration:<ISO-8601>."""
        reset = self._setting(group_id, "share.auto.offset.reset") or "latest"
        if reset == "earliest":
            return plog.log_start_offset
        if reset.startswith("by_duration:"):
            duration = parse_duration_ms(reset.split(":", 1)[1]) or 0
            found = plog.offset_for_timestamp(int(time.time() * 1000) - duration)
            return found[0] if found is not None else plog.high_watermark
        return plog.high_watermark

    def _persist(
        self, key: Key, sp: SharePartition, changed: list[int], op: Undo, undoable: bool = False
    ) -> asyncio.Future[int]:
        """Write an operation's change: the changed offsets' state batches (those it finished
        included) and the start as it was before the operation, as Kafka's SharePartition
        writes its state before it moves its start offset. The future is the write's error
        code (NONE once durable; FENCED_STATE_EPOCH; the failed write's). `undoable`: a write
        that fails first undoes the change (and any later one still on its way), so that
        memory is again what a restart rebuilds (Kafka's rollbackOrProcessStateUpdates)."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        runs = sp.changed_runs(changed, op.finished)
        if undoable:
            self.unwritten.setdefault(key, []).append(op)

        def done(error: int) -> None:
            if undoable:
                self._written(key, sp, op, error)
            if not fut.done():
                fut.set_result(error)

        self.state.write(
            key,
            op.start,
            runs,
            int(time.time() * 1000),
            done,
            state_epoch=sp.state_epoch,
            whole=lambda: sp.whole_runs(op.finished),
        )
        return fut

    def _written(self, key: Key, sp: SharePartition, undo: Undo, error: int) -> None:
        pending = self.unwritten.get(key)
        if pending is None or undo not in pending:
            return  # (undone already, with an earlier write that failed)
        i = pending.index(undo)
        if error == E.none:
            del pending[i]
        else:
            # The log keeps none of the writes after a failed one that were queued before its
            # failure was known: each of them is undone, the last first.
            for later in reversed(pending[i:]):
                sp.undo(later)
            del pending[i:]
            self._wake(key)  # (records Available again)
        if not pending:
            del self.unwritten[key]

    # views (DescribeShareGroupOffsets, metrics) -----------------------------------------

    def start_of(self, key: Key) -> int | None:
        """The share-partition's start offset, None if it was never started."""
        sp = self.partitions.get(key)
        if sp is not None:
            return sp.start
        stored = self.state.stored(key)
        return None if stored is None or stored.start < 0 else stored.start

    def lag(self, key: Key, start: int) -> int:
        """Kafka's share-partition lag (KIP-1226): the high watermark less the start offset less
        the delivery-complete count, where an offset of the in-flight window that the log no
        longer holds (compacted away between the batches read) counts as complete, as in
        Kafka's SharePartition, which holds such a gap inside a fetched range (acknowledged
        as GAP, so Archived) or archives the batches a fetch finds gone. So the lag is the
        window's records not yet Acknowledged or Archived, plus the offsets past the window
        up to the high watermark (not read yet, so not known to be missing). -1 if the
        partition is gone."""
        _, plog = self._plog(key[1], key[2])
        if plog is None:
            return -1
        hw = plog.high_watermark
        sp = self.partitions.get(key)
        if sp is not None:
            end = sp.end
            states = ((o, r.state) for o, r in sp.records.items())
        else:
            stored = self.state.stored(key)
            records = stored.records if stored is not None else {}
            end = max(records, default=start - 1) + 1
            states = ((o, s) for o, (s, _) in records.items())
        pending = sum(1 for o, s in states if start <= o < hw and s not in (ACKNOWLEDGED, ARCHIVED))
        return pending + max(hw - max(end, start), 0)

    def stored_offsets(self, key: Key) -> tuple[int, int]:
        """(start offset, lag) as the share coordinator holds them, which is what Kafka's
        DescribeShareGroupOffsets reports (ReadShareGroupStateSummary): the start as last
        written (Kafka writes a change before it moves its start) and the high watermark less
        that start less the records written Acknowledged or Archived past it (KIP-1226). (-1, -1)
        while nothing was written (Kafka initializes a partition's state at -1)."""
        stored = self.state.stored(key)
        _, plog = self._plog(key[1], key[2])
        if stored is None or stored.start < 0 or plog is None:
            return -1, -1
        hw = plog.high_watermark
        done = sum(
            1 for o, (s, _) in stored.records.items() if stored.start <= o < hw and s in (ACKNOWLEDGED, ARCHIVED)
        )
        return stored.start, max(hw - stored.start - done, 0)

    def keys(self) -> list[Key]:
        """Every share-partition started, loaded or not."""
        return sorted({*self.partitions, *self.state.states}, key=lambda k: (k[0], k[1].bytes, k[2]))

    # locks and waiting ------------------------------------------------------------------

    def _schedule_expiry(self, key: Key, sp: SharePartition) -> None:
        deadline = sp.next_deadline()
        if deadline is None:
            return
        current = self.timers.get(key)
        if current is not None and current[0] <= deadline:
            return
        if current is not None:
            current[1].cancel()
        loop = asyncio.get_running_loop()
        self.timers[key] = (deadline, loop.call_at(deadline, self._expire, key))

    def _expire(self, key: Key) -> None:
        """Acquisition locks that ran out: the records are Available again (or Archived at
        the delivery limit), as Kafka's AcquisitionLockTimerTask."""
        self.timers.pop(key, None)
        sp = self.partitions.get(key)
        if sp is None:
            return
        sp.track()
        changed = self._limited(key, sp).release(now=asyncio.get_running_loop().time())
        op = sp.tracked()
        if changed:
            log.debug("share-partition %s: %d acquisition locks expired", key, len(changed))
            self._persist_quietly(key, sp, changed, op)
            self._wake(key)
        self._schedule_expiry(key, sp)

    def _persist_quietly(self, key: Key, sp: SharePartition, changed: list[int], op: Undo) -> None:
        """An expired lock or an archived dead letter: kept if its write fails, since a restart
        rebuilds the same (Acquired is never written: the records are Available there too)."""

        dead = sp.dead_letters(changed)

        def written(f: asyncio.Future[int]) -> None:
            if f.result() == E.fenced_state_epoch:
                self._fenced(key)
            elif f.result() != E.none:
                log.warning("share-partition %s: its state could not be written: %s", key, default_message(f.result()))
            # (written or not, as Kafka goes on to the DLQ after an expired lock's write)
            self._dead_letter(key, sp, dead)

        self._persist(key, sp, changed, op).add_done_callback(written)

    # dead letters (KIP-1191) ------------------------------------------------------------

    def _dead_letter(self, key: Key, sp: SharePartition, runs: list[tuple[int, int, int, int]]) -> None:
        """Write the dead letters of the Archiving records `runs`, then archive them."""
        if runs:
            task = asyncio.get_running_loop().create_task(self._write_dead_letters(key, sp, runs))
            self._dead_letter_tasks.add(task)
            task.add_done_callback(self._dead_letter_tasks.discard)

    async def _write_dead_letters(self, key: Key, sp: SharePartition, runs: list[tuple[int, int, int, int]]) -> None:
        group_id, topic_id, partition = key
        info = self.topics.by_id.get(topic_id)
        try:
            if info is None:
                raise DeadLetterError(f"topic {topic_id} is gone")
            plog = info.logs[partition] if partition < info.partitions else None
            await self.dead_letters.write(group_id, info.name, partition, plog, runs)
            self.dead_letters_written[group_id] += sum(last - first + 1 for first, last, _, _ in runs)
        except Exception as e:  # (DeadLetterError, a storage error, anything a write can raise)
            self.dead_letter_failures[group_id] += 1
            # As Kafka's SharePartition.initiateDLQAndArchive: logged, and archived regardless.
            log.warning("share-partition %s: failed to write to DLQ, proceeding to ARCHIVED regardless: %s", key, e)
        if self.partitions.get(key) is not sp:
            return  # (moved or fenced: its next load finds them Archiving and writes them again)
        sp.track()
        changed = [o for first, last, _, _ in runs for o in sp.archive(first, last)]
        op = sp.tracked()
        if changed:
            self._persist_quietly(key, sp, changed, op)
            self._wake(key)

    def _wake(self, key: Key) -> None:
        self.waiters.wake(key)

    def _watch(self, plog: PartitionLog, tp: tuple[uuid.UUID, int]) -> None:
        """Produced records wake the share fetches (of any group) waiting on the partition;
        the listener names the partition by id, so it holds no reference to the log."""
        if plog not in self.watched:
            self.watched.add(plog)
            plog.append_listeners.append(lambda: self._wake_partition(tp))

    def _wake_partition(self, tp: tuple[uuid.UUID, int]) -> None:
        for key in [k for k in self.waiters.by_key if k[1:] == tp]:
            self._wake(key)

    def partition_moved(self, topic: str, partition: int) -> int:
        """The partition's leadership moved (Kafka's SharePartitionManager listener,
        onBecomingFollower): its share-partitions leave the old leader's cache, their
        acquisition locks with them. The new leader loads them from `__share_group_state`
        on its first ShareFetch: the records acquired and not acknowledged are Available
        again there, with the delivery counts written; what was accepted stays accepted."""
        info = self.topics.get(topic)
        if info is None:
            return 0
        keys = [k for k in self.partitions if k[1] == info.topic_id and k[2] == partition]
        for key in keys:
            del self.partitions[key]
            timer = self.timers.pop(key, None)
            if timer is not None:
                timer[1].cancel()
            self._wake(key)  # (a ShareFetch waiting on the old leader answers now)
        return len(keys)

    def member_fenced(self, group_id: str, member_id: str) -> None:
        """The member's group session expired (Kafka's ShareGroupListener, on every broker):
        its share sessions go and its acquired records are released."""
        for key in [k for k in self.sessions if k[1] == group_id and k[2] == member_id]:
            session = self.sessions.pop(key)
            self._release(session, session.partitions)

    def broker_stopped(self, node_id: int) -> None:
        """A stopped broker's share sessions go with it (its share-partitions moved to their
        new leaders, which load them from `__share_group_state`)."""
        for key in [k for k in self.sessions if k[0] == node_id]:
            del self.sessions[key]

    async def forget(self, group_id: str, topic_id: uuid.UUID) -> tuple[int, str | None]:
        """The group's state of every partition of the topic goes (DeleteShareGroupOffsets):
        tombstones in `__share_group_state`, then the share-partitions start afresh."""
        keys = {k for k in (*self.partitions, *self.state.states) if k[0] == group_id and k[1] == topic_id}
        for key in keys:
            error = await self._delete_state(key)
            if error != E.none:
                return E.kafka_storage_error, default_message(error)
            self.partitions.pop(key, None)
            timer = self.timers.pop(key, None)
            if timer is not None:
                timer[1].cancel()
        return E.none, None

    def _delete_state(self, key: Key) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.state.delete(key, fut.set_result)
        return fut

    def initialize_state(
        self,
        group_id: str,
        partitions: dict[uuid.UUID, frozenset[int]],
        state_epoch: int,
        done: Callable[[int], None],
    ) -> None:
        """Kafka's persister initializing a share group's new partitions after the heartbeat
        that subscribed them: a first ShareSnapshot each, at start offset -1 (where
        share.auto.offset.reset says, once first fetched); then done(NONE) once all are
        durable, or done(the error) if one could not be written (what failed is not kept: the
        group coordinator takes the partitions back out of its initializing set, and its next
        heartbeat initializes them again)."""
        keys = [
            (group_id, topic_id, p)
            for topic_id, ps in partitions.items()
            for p in sorted(ps)
            if self.state.stored((group_id, topic_id, p)) is None and (group_id, topic_id, p) not in self.partitions
        ]
        left = [len(keys)]
        failure: list[int] = []

        def written(error: int) -> None:
            if error != E.none and not failure:
                failure.append(error)
                log.warning(
                    "share group %s: share-partition state not initialized: %s", group_id, default_message(error)
                )
            left[0] -= 1
            if left[0] == 0:
                done(failure[0] if failure else E.none)

        if not keys:
            done(E.none)
            return
        now = int(time.time() * 1000)
        for key in keys:
            self.state.initialize(key, state_epoch, now, written)

    def group_deleted(self, group_id: str) -> None:
        """DeleteGroups removed the share group: its share-partitions' state goes too."""
        topics = {k[1] for k in (*self.partitions, *self.state.states) if k[0] == group_id}
        for topic_id in topics:
            task = asyncio.get_running_loop().create_task(self.forget(group_id, topic_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _release(self, session: ShareSession, partitions: set[tuple[uuid.UUID, int]]) -> None:
        for topic_id, partition in partitions:
            key = (session.group_id, topic_id, partition)
            sp = self.partitions.get(key)
            if sp is None:
                continue
            sp.track()
            changed = self._limited(key, sp).release(member=session.member_id)
            op = sp.tracked()
            if changed:
                self._persist_release(key, sp, changed, op)
                self._wake(key)

    def _persist_release(self, key: Key, sp: SharePartition, changed: list[int], op: Undo) -> None:
        """Kafka's SharePartition.releaseAcquiredRecords for a member that let its records go
        (its share session closed, replaced or fenced, or a partition forgotten): undone if its
        write fails (the records are the member's again until their locks expire), and its dead
        letters written only once it is durable (rollbackOrProcessStateUpdates)."""
        dead = sp.dead_letters(changed)

        def written(f: asyncio.Future[int]) -> None:
            error = f.result()
            if error == E.none:
                self._dead_letter(key, sp, dead)
                return
            if error == E.fenced_state_epoch:
                self._fenced(key)
            else:
                log.warning("share-partition %s: release not written, undone: %s", key, default_message(error))
            if self.partitions.get(key) is sp:
                self._schedule_expiry(key, sp)

        self._persist(key, sp, changed, op, undoable=True).add_done_callback(written)

    # requests ---------------------------------------------------------------------------

    @staticmethod
    def _merged(topics: Any) -> dict[tuple[uuid.UUID, int], list[tuple[int, int, tuple[int, ...]]]]:
        """(topic id, partition) -> acknowledgement batches; a topic or partition listed
        twice (librdkafka lists partitions to add and to acknowledge apart) is one."""
        out: dict[tuple[uuid.UUID, int], list[tuple[int, int, tuple[int, ...]]]] = {}
        for t in topics:
            for p in t.partitions:
                acks = out.setdefault((t.topic_id, p.partition_index), [])
                acks.extend(
                    (b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in p.acknowledgement_batches
                )
        return out

    def _session(
        self, ctx: RequestContext, group_id: str | None, member_id: str | None, epoch: int, has_acks: bool
    ) -> ShareSession:
        """Kafka's ShareSessionCache / SharePartitionManager.newContext checks, in the cache of
        the broker the request reached."""
        if group_id is None or not member_id:  # (an empty group id is a group id, as at Kafka)
            raise RequestError(E.invalid_request, "The group and member ids are mandatory.")
        node_id = ctx.connection.listener.node_id
        key = (node_id, group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise RequestError(E.invalid_request, "Acknowledge data present on initial share session request.")
            old = self.sessions.pop(key, None)
            if old is not None:
                self._release(old, old.partitions)
            elif sum(1 for k in self.sessions if k[0] == node_id) >= self.config.max_share_sessions:
                raise RequestError(E.share_session_limit_reached, "The limit of share sessions has been reached.")
            new = self.sessions[key] = ShareSession(node_id, group_id, member_id)
            return new
        session = self.sessions.get(key)
        if session is None:
            raise RequestError(E.share_session_not_found, f"Share session not found for member {member_id}.")
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            raise RequestError(
                E.invalid_share_session_epoch,
                f"Share session epoch {epoch} does not match the expected {session.epoch}.",
            )
        session.epoch += 1
        return session

    async def _acknowledge(
        self, ctx: RequestContext, session: ShareSession, acks: dict[tuple[uuid.UUID, int], list[Any]], renew: bool
    ) -> dict[tuple[uuid.UUID, int], tuple[int, str | None]]:
        """Apply each partition's acknowledgements (all or nothing per partition) and make
        them durable; (error, message) per partition."""
        results: dict[tuple[uuid.UUID, int], tuple[int, str | None]] = {}
        writes = []
        group_id = session.group_id
        for tp, batches in acks.items():
            if not batches:
                continue
            error, plog = self._served(ctx, tp)
            if plog is None:
                results[tp] = (error, None)
                continue
            key = (group_id, *tp)
            sp = self.partitions.get(key)
            if sp is None:
                results[tp] = (E.invalid_record_state, "The share-partition has no acquired records.")
                continue
            sp.track()
            try:
                deadline = asyncio.get_running_loop().time() + self.lock_duration_ms(group_id) / 1000
                changed = self._limited(key, sp).acknowledge(
                    session.member_id, batches, renew_allowed=renew, renew_deadline=deadline
                )
            except AckError as e:
                results[tp] = (e.code, e.message)
                continue
            finally:
                undo = sp.tracked()
            results[tp] = (E.none, None)
            if changed:
                dead = sp.dead_letters(changed)
                writes.append((tp, self._persist(key, sp, changed, undo, undoable=True), sp, dead))
                self._wake(key)
            self._schedule_expiry(key, sp)
        for tp, fut, written, dead in writes:
            error = await fut
            if error == E.none:
                # Archiving is written: the dead letters follow, and the answer does not wait
                # for them (Kafka's SharePartition starts them once its state write succeeds).
                self._dead_letter((group_id, *tp), written, dead)
            elif error == E.fenced_state_epoch:
                self._fenced((group_id, *tp))
                results[tp] = (E.fenced_state_epoch, FENCED_MESSAGE)
            else:
                # Undone (the records are the member's again, under their locks): Kafka's
                # answer when its share coordinator cannot write the state.
                message = default_message(error)
                log.warning("share-partition %s-%s: acknowledgement not written, undone: %s", group_id, tp, message)
                results[tp] = (E.coordinator_not_available, f"Unable to write share group state: {message}")
                sp = self.partitions.get((group_id, *tp))
                if sp is not None:
                    self._schedule_expiry((group_id, *tp), sp)
        return results

    def _fenced(self, key: Key) -> None:
        """A write of this share-partition was refused for its old state epoch (its offsets
        were altered meanwhile): it leaves the cache, and the next request loads the state as
        stored, as Kafka's SharePartitionManager drops a fenced share-partition."""
        log.info("share-partition %s: state epoch fenced; it is loaded again", key)
        stale, stored = self.partitions.get(key), self.state.stored(key)
        if stale is not None and (stored is None or stale.state_epoch < stored.state_epoch):
            del self.partitions[key]

    def _log_batches(self, plog: PartitionLog, start: int, read_committed: bool) -> Iterator[tuple[int, int, int]]:
        """(base, last, DATA or SKIP) of the log's batches from `start`, up to the high
        watermark (read_uncommitted) or the last stable offset (read_committed, with the
        batches of aborted transactions skipped, as Kafka 4.1+ archives them)."""
        if read_committed:
            txns = self.data_plane.txn_state(plog)
            limit = txns.last_stable_offset(plog.high_watermark)
            aborted = txns.aborted
        else:
            limit, aborted = plog.high_watermark, []
        for h, _ in plog.batches(start):
            if h.base_offset >= limit:
                return
            last = min(h.last_offset, limit - 1)
            skip = h.is_control or (
                h.is_transactional
                and any(pid == h.producer_id and first <= h.base_offset <= end for pid, first, end in aborted)
            )
            yield h.base_offset, last, SKIP if skip else DATA

    @staticmethod
    def _records(plog: PartitionLog, ranges: list[tuple[int, int, int]]) -> bytes:
        """The stored batches holding the acquired offsets (served as they are stored)."""
        if not ranges:
            return b""
        out = []
        last = ranges[-1][1]
        i = 0
        for h, data in plog.batches(ranges[0][0]):
            if h.base_offset > last:
                break
            while i < len(ranges) and ranges[i][1] < h.base_offset:
                i += 1
            if i < len(ranges) and ranges[i][0] <= h.last_offset:
                out.append(data)
        return b"".join(out)

    @staticmethod
    def _read_limit(plog: PartitionLog, sp: SharePartition, limit: int, min_one: bool) -> int | None:
        """The last offset a log read from the share-partition's next fetch offset returns
        within `limit` bytes, whole batches, as Kafka's ReplicaManager.readFromLog reads for a
        share fetch: the first batch even past the limit when nothing was read yet (min_one),
        so that a batch larger than the limits is still delivered. Not past the in-flight
        window's reach. None: the whole log is within the limit (no need to read it here)."""
        if plog.size_bytes <= limit:
            return None
        first = sp.next_fetch_offset()
        upto, used, reach = first - 1, 0, sp.start + sp.max_in_flight
        for h, data in plog.batches(first):
            used += len(data)
            if used > limit and not (min_one and upto < first):
                break
            upto = h.last_offset
            if used >= limit or upto >= reach:
                break
        return upto

    async def _acquire(
        self, ctx: RequestContext, session: ShareSession, max_records: int, strict: bool, max_bytes: int
    ) -> dict[tuple[uuid.UUID, int], tuple[int, list[Any], bytes]]:
        """Acquire from the session's partitions, up to max_records and max_bytes in all;
        (error, ranges, records) per partition that has records or an error. As Kafka's
        DelayedShareFetch: each partition reads at most max_bytes shared uniformly among the
        session's partitions (PartitionMaxBytesStrategy UNIFORM), the whole read at most
        max_bytes, and only the first partition with records gets a batch over those limits."""
        out: dict[tuple[uuid.UUID, int], tuple[int, list[Any], bytes]] = {}
        bytes_left = max_bytes
        partition_max_bytes = max_bytes // max(len(session.partitions), 1)
        group_id = session.group_id
        read_committed = self._setting(group_id, "share.isolation.level") == "read_committed"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lock_duration_ms(group_id) / 1000
        left = max_records
        # Share-partitions this broker has loaded come first, then those it loads now, in order,
        # each taken only while nothing was acquired before it: Kafka's SharePartitionManager
        # starts loading a new share-partition's state and its DelayedShareFetch acquires only
        # from loaded ones, completing once one yields records, so a consumer's first fetch
        # over new share-partitions gets the first that has records, the next fetch the others
        # (librdkafka's 0179 expects its first poll to hold one partition's records).
        loaded = self.partitions
        for tp in sorted(session.partitions, key=lambda tp: ((group_id, *tp) not in loaded, _by_topic_id(tp))):
            error, plog = self._served(ctx, tp)
            if plog is None:
                out[tp] = (error, [], b"")
                continue
            if left <= 0:
                continue
            key = (group_id, *tp)
            fresh = key not in loaded
            try:
                sp = await self.share_partition(key, plog)
            except (OSError, StorageError) as e:
                log.warning("share-partition %s: its state could not be initialized: %s", key, e)
                out[tp] = (E.kafka_storage_error, [], b"")
                continue
            if plog.offline is not None:
                out[tp] = (E.kafka_storage_error, [], b"")
                continue
            if fresh and left < max_records:
                continue  # (loaded: the next fetch acquires from it)
            upto = self._read_limit(plog, sp, min(partition_max_bytes, bytes_left), min_one=bytes_left == max_bytes)
            # An acquisition is not written, as Kafka's SharePartition.acquire writes nothing:
            # after a restart, a record acquired then is Available with the delivery count its
            # last written change gave it.
            ranges, _ = self._limited(key, sp).acquire(
                session.member_id,
                deadline,
                left,
                self._log_batches(plog, sp.end, read_committed),
                strict=strict,
                upto=upto,
            )
            if ranges:
                left -= sum(last - first + 1 for first, last, _ in ranges)
                records = self._records(plog, ranges)
                bytes_left = max(bytes_left - len(records), 0)
                out[tp] = (E.none, ranges, records)
                self._schedule_expiry(key, sp)
        return out

    async def _wait(self, session: ShareSession, timeout: float) -> None:
        keys = []
        for tp in session.partitions:
            error, plog = self._plog(*tp)
            if plog is None:
                continue
            self._watch(plog, tp)
            keys.append((session.group_id, *tp))
        await self.waiters.wait(keys, timeout)

    @staticmethod
    def _refused(ctx: RequestContext, e: RequestError) -> Any:
        """A ShareFetch or ShareAcknowledge refused as a whole, as Kafka's getErrorResponse
        answers it: the error alone, no message, the other fields at their defaults (the lock
        timeout 0). (e.message is for this server's log and tests, not the wire.)"""
        return ctx.response(
            throttle_time=0, error_code=e.code, acquisition_lock_timeout=0, responses=(), node_endpoints=()
        )

    # ShareFetch -------------------------------------------------------------------------

    async def share_fetch(self, ctx: RequestContext, req: Any) -> Any:
        lock_ms = self.lock_duration_ms(req.group_id or "")
        acks = self._merged(req.topics)
        renew = bool(getattr(req, "is_renew_ack", False))
        try:
            session = self._session(ctx, req.group_id, req.member_id, req.share_session_epoch, any(acks.values()))
        except RequestError as e:
            return self._refused(ctx, e)
        final = req.share_session_epoch == FINAL_EPOCH
        if not final:
            session.partitions.update(acks)
        ack_results = await self._acknowledge(ctx, session, acks, renew)
        if not final:
            # After the acknowledgements: a client that stops fetching a partition (its
            # assignment moved) acknowledges what it had of it in the same request.
            forgotten = {(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions}
            if forgotten:
                session.partitions.difference_update(forgotten)
                self._release(session, forgotten)
        fetched: dict[tuple[uuid.UUID, int], tuple[int, list[Any], bytes]] = {}
        if final:
            self.sessions.pop(session.key, None)
            self._release(session, session.partitions)
        elif req.max_records > 0 and not renew:
            strict = getattr(req, "share_acquire_mode", 0) == RECORD_LIMIT
            fetched = await self._acquire(ctx, session, req.max_records, strict, req.max_bytes)
            wait = min(ms(req.max_wait), self.data_plane.fetch_max_wait_ms) / 1000
            end = asyncio.get_running_loop().time() + wait
            while not any(ranges for _, ranges, _ in fetched.values()) and not self.data_plane.draining:
                left = end - asyncio.get_running_loop().time()
                if left <= 0 or self.sessions.get(session.key) is not session:
                    break
                await self._wait(session, left)
                fetched = await self._acquire(ctx, session, req.max_records, strict, req.max_bytes)
        listed = set(acks) if req.share_session_epoch != INITIAL_EPOCH else set(acks) | session.partitions
        rows: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
        errors: list[tuple[tuple[uuid.UUID, int], int]] = []
        for tp in sorted(listed | set(fetched) | set(ack_results), key=_by_topic_id):
            error, ranges, records = fetched.get(tp, (E.none, [], b""))
            ack_error, ack_message = ack_results.get(tp, (E.none, None))
            errors += [(tp, error), (tp, ack_error)]
            rows[tp] = dict(
                error_code=error,
                acknowledge_error_code=ack_error,
                acknowledge_error_message=ack_message,
                records=records,
                acquired_records=tuple(
                    ctx.nested("AcquiredRecords", first_offset=first, last_offset=last, delivery_count=count)
                    for first, last, count in ranges
                ),
            )
        return self._answer(ctx, lock_ms, "ShareFetchableTopicResponse", rows, errors)

    # ShareAcknowledge -------------------------------------------------------------------

    async def share_acknowledge(self, ctx: RequestContext, req: Any) -> Any:
        lock_ms = self.lock_duration_ms(req.group_id or "")
        acks = self._merged(req.topics)
        try:
            if req.share_session_epoch == INITIAL_EPOCH and req.group_id is not None and req.member_id:
                # Kafka: a ShareAcknowledge cannot open a session.
                raise RequestError(
                    E.invalid_share_session_epoch, "Share session epoch 0 is not allowed for ShareAcknowledge."
                )
            session = self._session(ctx, req.group_id, req.member_id, req.share_session_epoch, False)
        except RequestError as e:
            return self._refused(ctx, e)
        results = await self._acknowledge(ctx, session, acks, bool(getattr(req, "is_renew_ack", False)))
        if req.share_session_epoch == FINAL_EPOCH:
            self.sessions.pop(session.key, None)
            self._release(session, session.partitions)
        rows: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
        errors: list[tuple[tuple[uuid.UUID, int], int]] = []
        for tp in sorted(acks, key=_by_topic_id):
            error, message = results.get(tp, (E.none, None))
            errors.append((tp, error))
            rows[tp] = dict(error_code=error, error_message=message)
        return self._answer(ctx, lock_ms, "ShareAcknowledgeTopicResponse", rows, errors)

    def _answer(
        self,
        ctx: RequestContext,
        lock_ms: int,
        topic_entity: str,
        rows: dict[tuple[uuid.UUID, int], dict[str, Any]],
        errors: list[tuple[tuple[uuid.UUID, int], int]],
    ) -> Any:
        """A ShareFetch or ShareAcknowledge answer: each partition's PartitionData (its values in
        `rows`, in topic order; its leader as KIP-951 says it) under its topic as a `topic_entity`,
        with the endpoints of the leaders of the partitions in error."""
        by_topic: dict[uuid.UUID, list[Any]] = {}
        for tp, values in rows.items():
            by_topic.setdefault(tp[0], []).append(
                ctx.nested(
                    "PartitionData", partition_index=tp[1], current_leader=self._current_leader(ctx, tp), **values
                )
            )
        return ctx.response(
            throttle_time=0,
            error_code=E.none,
            acquisition_lock_timeout=lock_ms,
            responses=tuple(ctx.nested(topic_entity, topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            node_endpoints=self._endpoints(ctx, errors),
        )

    def drain(self) -> None:
        """The server is stopping: long-polling share fetches answer now with what they have."""
        self.waiters.wake_all()

    async def close(self) -> None:
        # Dead letters under way stop here: their records stay Archiving in
        # `__share_group_state`, and the next start writes them again.
        tasks = list(self._dead_letter_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for _, handle in self.timers.values():
            handle.cancel()
        self.timers.clear()
        self._closed = True
        if self._cold_timer is not None:
            self._cold_timer.cancel()
            self._cold_timer = None
        await self.state.close()
