"""StreamsGroupTopologyDescriptionUpdate (93) version 0 (KIP-1331), new in Kafka 4.4 and absent
from kio 0.6.5: kio-style entities written from Kafka 4.4's
StreamsGroupTopologyDescriptionUpdateRequest/Response.json, read and written by kio's own
serializers as its generated classes are.

A Kafka Streams member pushes its topology's description for a broker-side plugin to keep
(StreamsGroupDescribe v1 then returns it). The description's structs are the ones
StreamsGroupDescribe v1 carries, field for field (protocol/streams_describe_v1.py).
"""

# (no `from __future__ import annotations`: kio reads the field types at runtime)

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import GroupId
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta

from protocol.streams_describe_v1 import (
    TopologyDescription,
    TopologyDescriptionGlobalStore,
    TopologyDescriptionNode,
    TopologyDescriptionSubtopology,
)

__all__ = [
    "StreamsGroupTopologyDescriptionUpdateRequest",
    "StreamsGroupTopologyDescriptionUpdateResponse",
    "TopologyDescription",
    "TopologyDescriptionGlobalStore",
    "TopologyDescriptionNode",
    "TopologyDescriptionSubtopology",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    topology_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topology_description: TopologyDescription


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
