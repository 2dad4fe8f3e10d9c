"""What the share and streams groups' own APIs start from.

(Not in api.py: the optional mypyc build compiles that module, and a compiled class cannot
have interpreted subclasses such as ShareGroupApis and StreamsGroupApis.)
"""

from __future__ import annotations

from typing import Any, Callable

from kio.schema.errors import ErrorCode as E

from ..apis import RequestContext
from .api import owning_shard
from .runtime import CoordinatorRuntime


class ShardRoutedApis:
    """Each request goes to its group's shard, if this broker coordinates it."""

    def __init__(
        self,
        runtime: CoordinatorRuntime,
        owner: Callable[[RequestContext, int], int] = lambda ctx, partition: E.none,
    ) -> None:
        self.runtime = runtime
        self.owner = owner  # the topology's coordinator check (GroupApis.owner)

    def _route(self, ctx: RequestContext, group_id: str) -> tuple[Any, int]:
        """The group's shard and NONE, or None and the error to answer (owning_shard)."""
        return owning_shard(ctx, self.runtime.shard_for(group_id), self.owner)
