"""StreamsGroupTopologyDescriptionUpdate (93, KIP-1331): a Kafka Streams member pushes its
topology's description for the broker's topology description plugin to keep. Like a Kafka 4.4
broker without that plugin (`group.streams.topology.description.plugin` unset, its default),
this server keeps none, and answers every push as Kafka does then: UNSUPPORTED_VERSION with
Kafka's message, whatever the group (the client then stops pushing)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as E

TOPOLOGY_DESCRIPTION_UPDATE = 93
NO_PLUGIN = "The broker has no streams group topology description plugin configured."


class TopologyDescriptionApis:
    def register(self, registry: Any) -> None:
        registry.add(TOPOLOGY_DESCRIPTION_UPDATE, range(0, 1), self.update)

    def update(self, ctx: Any, req: Any) -> Any:
        return ctx.response(throttle_time=0, error_code=E.unsupported_version, error_message=NO_PLUGIN)
