"""StreamsGroupHeartbeat (88) version 1 (KIP-1331), which kio 0.6.5 does not have: kio-style
entities written from Kafka 4.4's StreamsGroupHeartbeatRequest/Response.json, read and written
by kio's own serializers as its generated classes are.

The request is version 0's (bumped only so that the response version can be negotiated). The
response replaces version 0's int32 AcceptableRecoveryLagLegacy with an int64
AcceptableRecoveryLag after TaskOffsetIntervalMs, and adds TopologyDescriptionRequired after the
tasks. Its nested entities are version 0's, which this module names for RequestContext.nested.
"""

# (no `from __future__ import annotations`: kio reads the field types at runtime)

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.streams_group_heartbeat.v0.request import StreamsGroupHeartbeatRequest as _RequestV0
from kio.schema.streams_group_heartbeat.v0.response import (
    Endpoint,
    EndpointToPartitions,
    Status,
    TaskIds,
    TopicPartition,
)
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

__all__ = [
    "Endpoint",
    "EndpointToPartitions",
    "Status",
    "StreamsGroupHeartbeatRequest",
    "StreamsGroupHeartbeatResponse",
    "TaskIds",
    "TopicPartition",
]

# Version 1's request has version 0's fields: the same class reads it.
StreamsGroupHeartbeatRequest = _RequestV0


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    task_offset_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    acceptable_recovery_lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    status: tuple[Status, ...] | None
    active_tasks: tuple[TaskIds, ...] | None = None
    standby_tasks: tuple[TaskIds, ...] | None = None
    warmup_tasks: tuple[TaskIds, ...] | None = None
    topology_description_required: bool = field(metadata={"kafka_type": "bool"}, default=False)
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    partitions_by_user_endpoint: tuple[EndpointToPartitions, ...] | None = None
