"""Incremental fetch sessions (KIP-227), as Kafka's FetchManager / FetchSessionCache keep them.

A Fetch with epoch 0 is a full fetch that asks for a session: once answered, the broker
remembers its partitions (fetch offset, max bytes, and the high watermark and log start
offset it last answered) under a new id, epoch 1. An incremental fetch (epoch > 0) names
the session and its epoch; it only lists partitions whose fetch state changed and those to
forget, and is answered with just the partitions that have news: records, a new high
watermark or log start offset, or an error. Epoch -1 is a full fetch outside any session.
A session id in a full fetch closes that session.

The cache holds at most max.incremental.fetch.session.cache.slots sessions. When full, a
new session may evict one unused for 2 minutes, else one created over 2 minutes ago with
fewer partitions than the new one (Kafka's EvictableKey order); otherwise the fetch is
answered without a session (id 0), which clients accept.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Hashable

INVALID_SESSION_ID = 0
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS


@dataclass(slots=True)
class CachedPartition:
    topic: str | None  # None in a v13+ session whose topic id is unknown
    topic_id: Any
    partition: int
    fetch_offset: int
    max_bytes: int
    high_watermark: int = -1  # as last answered; -1 after an error, so the partition is re-sent
    log_start_offset: int = -1
    # The client's current_leader_epoch (Fetch v9+, KIP-320; -1: none), as in Kafka's
    # CachedPartition: the latest request that lists the partition sets it.
    leader_epoch: int = -1

    def must_respond(self, records: bytes, error: int, high_watermark: int, log_start_offset: int) -> bool:
        """Whether an incremental answer includes this partition (Kafka's
        CachedPartition.maybeUpdateResponseData); remembers what it answers."""
        respond = bool(records)
        if high_watermark != self.high_watermark:
            respond = True
            self.high_watermark = high_watermark
        if log_start_offset != self.log_start_offset:
            respond = True
            self.log_start_offset = log_start_offset
        if error:
            self.high_watermark = -1
            respond = True
        return respond


@dataclass
class FetchSession:
    id: int
    uses_topic_ids: bool
    partitions: OrderedDict[tuple[Hashable, int], CachedPartition]
    created_ms: int
    last_used_ms: int
    epoch: int = 1

    def evictable_key(self) -> tuple[int, int]:
        return len(self.partitions), self.id


@dataclass
class FetchSessionCache:
    max_slots: int = 1000
    eviction_ms: int = EVICTION_MS
    clock: Any = field(default=lambda: int(time.monotonic() * 1000))
    sessions: dict[int, FetchSession] = field(default_factory=dict)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession) -> None:
        session.last_used_ms = self.clock()

    def create(self, uses_topic_ids: bool, partitions: OrderedDict[tuple[Hashable, int], CachedPartition]) -> int:
        """A new session's id, or INVALID_SESSION_ID when the cache is full and nothing may
        be evicted for it."""
        now = self.clock()
        if len(self.sessions) >= self.max_slots and not self._evict_for(len(partitions), now):
            return INVALID_SESSION_ID
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = random.randint(1, 2**31 - 1)
        self.sessions[session_id] = FetchSession(session_id, uses_topic_ids, partitions, now, now)
        return session_id

    def _evict_for(self, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now - stalest.last_used_ms > self.eviction_ms:
            del self.sessions[stalest.id]
            return True
        old = [s for s in self.sessions.values() if now - s.created_ms > self.eviction_ms]
        if not old:
            return False
        victim = min(old, key=FetchSession.evictable_key)
        if (size, 0) < victim.evictable_key():  # the new session is worth less than every candidate
            return False
        del self.sessions[victim.id]
        return True
