"""Wire handlers of ShareGroupHeartbeat (76) and ShareGroupDescribe (77), KIP-932.

Each request goes to its group's shard; the logic lives in share_manager.py, and this
module only maps fields. Kafka 4.2 serves version 1 of both (version 0 was the early
access protocol, never served by a released broker with share groups on).
"""

from __future__ import annotations

from typing import Any, Callable

from kio.schema.errors import ErrorCode as E

from ....apis import Registry, RequestContext
from ...api import (
    described_group,
    described_member,
    describe_modern_groups,
    heartbeat_response,
    run_heartbeat,
)
from ..modern_manager import ApiError
from ...routed_apis import ShardRoutedApis
from ...runtime import CoordinatorRuntime
from .share_manager import ASSIGNOR, ShareHeartbeatRequest, ShareHeartbeatResult, validate_request

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77


class ShareGroupApis(ShardRoutedApis):
    def __init__(
        self,
        runtime: CoordinatorRuntime,
        owner: Callable[[RequestContext, int], int] = lambda ctx, partition: E.none,
        subscribed: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(runtime, owner)
        # called when a member subscribes to topics: Kafka's group coordinator then initializes
        # the share-partitions' state, which creates __share_group_state at its first use
        self.subscribed = subscribed

    def register(self, registry: Registry) -> None:
        registry.add(SHARE_GROUP_HEARTBEAT, range(1, 2), self.share_group_heartbeat)
        registry.add(SHARE_GROUP_DESCRIBE, range(1, 2), self.share_group_describe)

    def share_group_heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        names = req.subscribed_topic_names
        r = ShareHeartbeatRequest(
            req.group_id,
            req.member_id,
            req.member_epoch,
            req.rack_id,
            None if names is None else tuple(names),
            ctx.header.client_id or "",
            ctx.client_address,
        )
        try:
            validate_request(r)
        except ApiError as e:
            return heartbeat_response(ctx, ShareHeartbeatResult(e.code, e.message), drop_empty=True)
        if names:
            self.subscribed()
        return run_heartbeat(
            ctx,
            self.runtime,
            self._route(ctx, req.group_id),
            lambda shard: shard.share.heartbeat(r),
            lambda result: heartbeat_response(ctx, result, drop_empty=True),
        )

    def share_group_describe(self, ctx: RequestContext, req: Any) -> Any:
        def entry(shard: Any, group: Any, ops: int) -> Any:
            image = shard.share.image
            members = tuple(described_member(ctx, m, image, drop_empty=True) for m in group.members.values())
            return described_group(ctx, group.group_id, ops, group, ASSIGNOR, members)

        return describe_modern_groups(
            ctx,
            req.group_ids,
            req.include_authorized_operations,
            self._route,
            lambda shard: shard.share,
            entry,
            lambda group_id: self.runtime.shard_for(group_id).partition,
        )
