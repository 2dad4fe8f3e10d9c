"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92):
a share group's share-partition start offsets, as Kafka's GroupCoordinatorService serves them
with the share coordinator's state (kafka-share-groups.sh --describe / --reset-offsets /
--delete-offsets).

- Describe: each share-partition's start offset and (v1, KIP-1226) its lag: the records
  from the start to the high watermark not yet Acknowledged or Archived (offsets compacted
  away inside the in-flight window are complete, as Kafka holds them). A partition whose
  state was never started has start offset -1; all partitions (topics null) are those with
  state. Another type's group id: GROUP_ID_NOT_FOUND "Group X is not a share group.".
- Alter: only while the group has no members (NON_EMPTY_GROUP); the share-partition starts
  over at the offset (a new state epoch, a snapshot with nothing in flight).
- Delete: likewise; the state of every partition of the topics goes (tombstones), so the
  next fetch starts them where share.auto.offset.reset says, and the topics leave the group's
  ShareGroupStatePartitionMetadata record.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode as E

from protocol.error_messages import default_message

from ..apis import LATER, Registry, RequestContext
from ..groups.modern.share.share_group import ShareGroup
from .manager import SharePartitionManager
from .partition import SharePartition

DESCRIBE, ALTER, DELETE = 90, 91, 92


def deleted_offsets_row(ctx: RequestContext, t: Any, topic_id: uuid.UUID, error: int, message: str | None) -> Any:
    """A topic's row in a DeleteShareGroupOffsets answer (the ACL gate's too, for a topic it denies)."""
    return ctx.nested(
        "DeleteShareGroupOffsetsResponseTopic",
        topic_name=t.topic_name,
        topic_id=topic_id,
        error_code=error,
        error_message=message,
    )


class ShareOffsetsApis:
    def __init__(self, shares: SharePartitionManager) -> None:
        self.shares = shares
        self.runtime = shares.groups

    def register(self, registry: Registry) -> None:
        registry.add(DESCRIBE, range(0, 2), self.describe)
        registry.add(ALTER, range(0, 1), self.alter)
        registry.add(DELETE, range(0, 1), self.delete)

    def _group_error(self, group_id: str, must_be_empty: bool) -> tuple[int, str | None]:
        """Kafka refuses an empty group id where offsets would change (Alter, Delete); a
        Describe of it describes a group that does not exist."""
        if not group_id and must_be_empty:
            return E.invalid_group_id, "The group id is invalid."
        shard = self.runtime.shard_for(group_id)
        if shard.offline is not None:
            return E.not_coordinator, None
        group = shard.groups.get(group_id)
        if group is not None and type(group) is not ShareGroup:
            return E.group_id_not_found, f"Group {group_id} is not a share group."
        if must_be_empty and group is not None and not group.is_empty():
            return E.non_empty_group, "The group is not empty."
        return E.none, None

    # DescribeShareGroupOffsets ----------------------------------------------------------

    def describe(self, ctx: RequestContext, req: Any) -> Any:
        topics = self.shares.topics
        out = []
        for g in req.groups:
            error, message = self._group_error(g.group_id, False)
            if error != E.none:
                out.append(
                    ctx.nested(
                        "DescribeShareGroupOffsetsResponseGroup",
                        group_id=g.group_id,
                        topics=(),
                        error_code=error,
                        error_message=message,
                    )
                )
                continue
            if g.topics is None:
                # Every partition whose state is initialized in the group (Kafka initializes
                # each partition of a subscribed topic at -1), and every one with state.
                group = self.runtime.shard_for(g.group_id).groups.get(g.group_id)
                initialized = getattr(group, "initialized", {})
                keys = sorted(
                    {k for k in self.shares.state.states if k[0] == g.group_id}
                    | {(g.group_id, t, p) for t, (_, ps) in initialized.items() for p in ps},
                    key=lambda k: (k[1].bytes, k[2]),
                )
                wanted: dict[str, list[int]] = {}
                for _, topic_id, partition in keys:
                    info = topics.by_id.get(topic_id)
                    if info is not None:
                        wanted.setdefault(info.name, []).append(partition)
            else:
                wanted = {t.topic_name: list(t.partitions) for t in g.topics}
            rows = []
            for name, partitions in wanted.items():
                info = topics.get(name)
                parts = []
                for p in partitions:
                    if info is None or not 0 <= p < info.partitions:
                        parts.append(
                            ctx.nested(
                                "DescribeShareGroupOffsetsResponsePartition",
                                partition_index=p,
                                start_offset=-1,
                                leader_epoch=-1,
                                lag=-1,
                                error_code=E.unknown_topic_or_partition,
                                error_message="This server does not host this topic-partition.",
                            )
                        )
                        continue
                    start, lag = self.shares.stored_offsets((g.group_id, info.topic_id, p))
                    parts.append(
                        ctx.nested(
                            "DescribeShareGroupOffsetsResponsePartition",
                            partition_index=p,
                            start_offset=start,
                            leader_epoch=0,
                            lag=lag,
                            error_code=E.none,
                        )
                    )
                rows.append(
                    ctx.nested(
                        "DescribeShareGroupOffsetsResponseTopic",
                        topic_name=name,
                        topic_id=info.topic_id if info is not None else uuid.UUID(int=0),
                        partitions=tuple(parts),
                    )
                )
            out.append(
                ctx.nested(
                    "DescribeShareGroupOffsetsResponseGroup", group_id=g.group_id, topics=tuple(rows), error_code=E.none
                )
            )
        return ctx.response(throttle_time=0, groups=tuple(out))

    # AlterShareGroupOffsets -------------------------------------------------------------

    async def alter(self, ctx: RequestContext, req: Any) -> Any:
        error, message = self._group_error(req.group_id, True)
        if error != E.none:
            return ctx.response(throttle_time=0, error_code=error, error_message=message, responses=())
        topics = self.shares.topics
        rows = []
        altered: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        for t in req.topics:
            info = topics.get(t.topic_name)
            parts: list[tuple[int, int, str | None]] = []
            for p in t.partitions:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    parts.append(
                        (
                            p.partition_index,
                            E.unknown_topic_or_partition,
                            "This server does not host this topic-partition.",
                        )
                    )
                elif p.start_offset < 0:
                    parts.append((p.partition_index, E.invalid_request, "The start offset must not be negative."))
                else:
                    key = (req.group_id, info.topic_id, p.partition_index)
                    parts.append((p.partition_index, *await self._reset(key, p.start_offset)))
                    if parts[-1][1] == E.none:
                        name, done = altered.get(info.topic_id, (t.topic_name, frozenset()))
                        altered[info.topic_id] = (name, done | {p.partition_index})
            rows.append(
                ctx.nested(
                    "AlterShareGroupOffsetsResponseTopic",
                    topic_name=t.topic_name,
                    topic_id=info.topic_id if info is not None else uuid.UUID(int=0),
                    partitions=tuple(
                        ctx.nested(
                            "AlterShareGroupOffsetsResponsePartition", partition_index=i, error_code=e, error_message=m
                        )
                        for i, e, m in parts
                    ),
                )
            )
        if altered:  # the partitions are initialized in the group's ShareGroupStatePartitionMetadata
            shard = self.runtime.shard_for(req.group_id)
            error = await self._group_write(shard, shard.share.initialize_partitions(req.group_id, altered))
            if error != E.none:
                return ctx.response(throttle_time=0, error_code=error, error_message=None, responses=())
        return ctx.response(throttle_time=0, error_code=E.none, responses=tuple(rows))

    async def _group_write(self, shard: Any, result: Any) -> int:
        """Have the runtime write a share group's records (a CoordinatorResult whose response
        is NONE) and wait until they are durable: NONE, or the write's error code."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        now = self.runtime.respond(shard, result, int, fut.set_result)
        return now if now is not LATER else await fut

    async def _reset(self, key: Any, offset: int) -> tuple[int, str | None]:
        """The share-partition starts over at `offset` under a new state epoch."""
        stored = self.shares.state.stored(key)
        live = self.shares.partitions.get(key)
        # A new state epoch, past the stored one and the one the share-partition in memory was
        # started under (nothing may be stored yet: nothing is written before a state change).
        epoch = max(
            stored.state_epoch + 1 if stored is not None else 0, live.state_epoch + 1 if live is not None else 0
        )
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.shares.state.write(key, offset, [], int(time.time() * 1000), fut.set_result, full=True, state_epoch=epoch)
        error = await fut
        if error != E.none:
            return E.kafka_storage_error, default_message(error)
        sp = self.shares.partitions[key] = SharePartition(
            offset,
            max_delivery=self.shares.delivery_count_limit(key[0]),
            max_in_flight=self.shares.config.partition_max_record_locks,
        )
        sp.state_epoch = epoch
        return E.none, None

    # DeleteShareGroupOffsets ------------------------------------------------------------

    async def delete(self, ctx: RequestContext, req: Any) -> Any:
        error, message = self._group_error(req.group_id, True)
        if error != E.none:
            return ctx.response(throttle_time=0, error_code=error, error_message=message, responses=())
        rows = []
        forgotten: set[uuid.UUID] = set()
        for t in req.topics:
            info = self.shares.topics.get(t.topic_name)
            if info is None:
                missing = "This server does not host this topic-partition."
                rows.append(deleted_offsets_row(ctx, t, uuid.UUID(int=0), E.unknown_topic_or_partition, missing))
                continue
            error, message = await self.shares.forget(req.group_id, info.topic_id)
            if error == E.none:
                forgotten.add(info.topic_id)
            rows.append(deleted_offsets_row(ctx, t, info.topic_id, error, message))
        if forgotten:  # the topics leave the group's ShareGroupStatePartitionMetadata
            shard = self.runtime.shard_for(req.group_id)
            error = await self._group_write(shard, shard.share.forget_topics(req.group_id, forgotten))
            if error != E.none:
                return ctx.response(throttle_time=0, error_code=error, error_message=None, responses=())
        return ctx.response(throttle_time=0, error_code=E.none, responses=tuple(rows))
