"""Consumer lag from the server's own state, and Burrow's verdict on it.

The coordinator holds every committed offset and the topics' logs every log end offset, so
lag needs no extra consumer: per group and partition, lag in messages is the log end offset
minus the committed offset, and lag in seconds is the age of the first record not yet
committed (read from the log: its timestamp).

Burrow (github.com/linkedin/Burrow, its evaluator's calculatePartitionStatus) judges a
partition over a sliding window of the group's last commits, each noted with the lag when it
was seen. In Burrow's order:
- OK when there is no lag now, or the lag was 0 at some commit in the window;
- REWIND: an offset in the window went backwards;
- STOP: the last commit is older than the window is long (the consumer stopped committing);
- STALL: the offset never moved over the window (commits go on, consumption does not);
- WARN: the lag never decreased from one commit to the next;
- OK otherwise. A group is the worst of its partitions, where STOP, STALL and REWIND count
  as ERR (Burrow's group statuses: OK, WARN, ERR).

`partition_status` is the one implementation of these rules in Python: the metrics and
`kcoord groups status` (which reads the metrics) show its verdict. The analytics pipeline
states the same rules as Spark expressions (`pipeline.analytics.lag_status`). The two see
different inputs: here, the commits the sampler saw, judged as of now; there, every commit in
the log, judged as of the log's latest record. So a group that stopped committing when its
whole cluster went quiet is STOP here and may be OK in the report.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

from kio.serial import entity_reader
from kio.serial.readers import Reader

from protocol.record_batch import iter_batch_records, parse_header

if TYPE_CHECKING:  # (what the monitor reads; imported only to type it)
    from ..broker.topics import Topics
    from ..groups.group import Group
    from ..groups.records import OffsetCommitValue
    from ..groups.runtime import CoordinatorRuntime
    from ..log.partition import PartitionLog

WINDOW = 10  # commits per partition, as Burrow's default `intervals`
PARTITION_STATUSES = ("OK", "WARN", "STOP", "STALL", "REWIND")
GROUP_STATUSES = ("OK", "WARN", "ERR")


class Commit(NamedTuple):
    timestamp_ms: int
    offset: int
    lag: int  # log end offset minus this offset when the commit was first seen


@dataclass(slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int
    log_end: int
    lag: int
    lag_seconds: float
    consumer_id: str
    host: str
    client_id: str
    status: str


def partition_status(window: deque[Commit] | list[Commit], lag_now: int, now_ms: int) -> str:
    """Burrow's rules (module docstring), in its order: its evaluator's calculatePartitionStatus."""
    if lag_now <= 0 or not window or any(c.lag == 0 for c in window):
        return "OK"
    commits = list(window)
    pairs = list(zip(commits, commits[1:]))
    first, last = commits[0], commits[-1]
    if any(b.offset < a.offset for a, b in pairs):
        return "REWIND"
    if now_ms - last.timestamp_ms > last.timestamp_ms - first.timestamp_ms:
        return "STOP"
    if all(b.offset == a.offset for a, b in pairs):  # one commit alone counts as stalled, as in Burrow
        return "STALL"
    if all(b.lag >= a.lag for a, b in pairs):
        return "WARN"
    return "OK"


def group_status(statuses: list[str]) -> str:
    worst = "OK"
    for s in statuses:
        if s in ("STOP", "STALL", "REWIND"):
            return "ERR"
        if s == "WARN":
            worst = "WARN"
    return worst


@lru_cache(maxsize=None)
def _assignment_reader(version: int) -> Reader[Any]:
    module = __import__(f"kio.schema.consumer_protocol_assignment.v{version}.data", fromlist=["x"])
    return entity_reader(module.ConsumerProtocolAssignment)


@lru_cache(maxsize=4096)
def assigned_partitions(assignment: bytes) -> tuple[tuple[str, int], ...]:
    """(topic, partition) pairs of a 'consumer' protocol assignment; () if it does not parse."""
    if len(assignment) < 2:
        return ()
    version = int.from_bytes(assignment[:2], "big", signed=True)
    try:
        decoded, _ = _assignment_reader(min(max(version, 0), 3))(assignment, 2)
    except Exception:  # a client's own protocol bytes: no owners to show, not an error
        return ()
    return tuple((tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions)


def owners(group: Group) -> dict[tuple[str, int], Any]:
    """(topic, partition) -> the member assigned it, for classic 'consumer' groups."""
    if getattr(group, "protocol_type", None) != "consumer":
        return {}
    out = {}
    for member in getattr(group, "members", {}).values():
        for tp in assigned_partitions(member.assignment):
            out[tp] = member
    return out


def first_uncommitted_timestamp(plog: PartitionLog, offset: int) -> int | None:
    """The timestamp (ms) of the record at `offset` (or the first after it, in a compacted
    log); None if there is none or it cannot be read."""
    try:
        data = plog.read(offset, 1)
    except Exception:  # out of range, offline: no age to give
        return None
    pos = 0
    while pos < len(data):
        h = parse_header(data, pos)
        if h.base_offset + h.last_offset_delta >= offset:
            if h.attributes & 0x08:  # LogAppendTime: every record has the batch's time
                return h.max_timestamp
            for record in iter_batch_records(memoryview(data)[pos : pos + h.size], h):
                if record.offset >= offset:
                    return record.timestamp
        pos += h.size
    return None


class LagMonitor:
    """Lag rows on demand, and each partition's window of commits for Burrow's rules.
    sample() notes new commits; call it often enough to see each one (the metrics server
    runs it on a timer and at every scrape)."""

    def __init__(self, runtime: CoordinatorRuntime, topics: Topics, window: int = WINDOW) -> None:
        self.runtime = runtime
        self.topics = topics
        self.window = window
        self.windows: dict[tuple[str, str, int], deque[Commit]] = {}

    def _committed(self) -> Iterator[tuple[str, str, int, OffsetCommitValue]]:
        for shard in self.runtime.shards:
            store = shard.offsets
            for group_id in store.groups():
                for (topic, partition), value in store.of(group_id).items():
                    yield group_id, topic, partition, value

    def sample(self) -> None:
        seen = set()
        windows = self.windows
        for group_id, topic, partition, value in self._committed():
            plog = self.topics.partition_log(topic, partition)
            if plog is None:
                continue
            key = (group_id, topic, partition)
            seen.add(key)
            window = windows.get(key)
            if window is None:
                window = windows[key] = deque(maxlen=self.window)
            if not window or window[-1].timestamp_ms != value.commit_timestamp or window[-1].offset != value.offset:
                window.append(Commit(value.commit_timestamp, value.offset, max(plog.log_end_offset - value.offset, 0)))
        for key in windows.keys() - seen:  # deleted offsets, groups or topics
            del windows[key]

    def rows(self, now_ms: int | None = None) -> list[PartitionLag]:
        self.sample()
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        out = []
        owner_cache: dict[str, dict[tuple[str, int], Any]] = {}
        for group_id, topic, partition, value in self._committed():
            plog = self.topics.partition_log(topic, partition)
            if plog is None:
                continue
            log_end = plog.log_end_offset
            lag = max(log_end - value.offset, 0)
            age = 0.0
            if lag:
                ts = first_uncommitted_timestamp(plog, max(value.offset, plog.log_start_offset))
                age = max(now_ms - ts, 0) / 1000 if ts is not None else 0.0
            owned = owner_cache.get(group_id)
            if owned is None:
                group = self.runtime.group(group_id)
                owned = owner_cache[group_id] = owners(group) if group is not None else {}
            member = owned.get((topic, partition))
            out.append(
                PartitionLag(
                    group_id,
                    topic,
                    partition,
                    value.offset,
                    log_end,
                    lag,
                    age,
                    member.member_id if member else "",
                    member.client_host if member else "",
                    member.client_id if member else "",
                    partition_status(self.windows.get((group_id, topic, partition)) or [], lag, now_ms),
                )
            )
        return out
