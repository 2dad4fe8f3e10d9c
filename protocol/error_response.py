"""The response a broker gives when it fails a whole request with one error: Kafka's
`AbstractRequest.getErrorResponse(throttleTimeMs, Throwable)`, for any API, from kio's
response schemas.

Kafka writes getErrorResponse by hand in each request class; they all do the same few
things, which this does generically:
- the error goes into the top-level `error_code` and into every per-topic, per-partition,
  per-group, per-member ... `error_code` of the response;
- the entries the request named are echoed, identified as the request named them (topic
  name or id, partition index, group id, coordinator key, transactional id, config
  resource), so a client can match each error to what it asked for;
- everything else is "nothing known": -1 for offsets, epochs, ids, node ids, ports and
  timestamps (Kafka's INVALID_OFFSET, UNKNOWN_GENERATION_ID, NO_PRODUCER_ID, ...), empty
  strings, bytes and lists, the schema's default where it has one;
- the error messages hold what that API's getErrorResponse writes there (`_MESSAGE_OF`).

Where a request class departs from that, the departure is in `_SPECIAL` below. Sans-IO.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import types
import typing
import uuid
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from .error_messages import default_message
from .messages import _strip_optional, codec, encode_body
from .wire import Raw
from .offset_commit import OffsetCommitRequest, write_response_to

PRODUCE, FETCH, OFFSET_COMMIT, API_VERSIONS = 0, 1, 8, 18
DESCRIBE_CLIENT_QUOTAS, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 48, 50, 51
DESCRIBE_QUORUM, ALTER_REPLICA_LOG_DIRS = 55, 34
DESCRIBE_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 90, 92

# What each request class's getErrorResponse(throttleTimeMs, Throwable e) writes into the
# response's error_message fields (all of them: top level and per entry, as that API has
# them); an API not named leaves them null.
# - "api_error": ApiError.fromThrowable(e).message(): the exception's own message, but null
#   when it is the error's default one (a bare Errors.X.exception()) or the error is
#   UNKNOWN_SERVER_ERROR (so as not to leak server internals).
# - "default": Errors.forException(e).message(): the error's default message, whatever the
#   exception said (FindCoordinatorResponse.prepareErrorResponse, DescribeConfigs, ...).
# - "exception": e.getMessage(), the default message for UNKNOWN_SERVER_ERROR
#   (DescribeShareGroupOffsetsResponse's all-groups constructor).
_MESSAGE_OF = {
    **dict.fromkeys(
        (
            0,  # Produce: each partition
            19,  # CreateTopics: each topic
            29,  # DescribeAcls: top level
            30,  # CreateAcls: each creation
            31,  # DeleteAcls: each filter
            33,  # AlterConfigs: each resource
            36,  # SaslAuthenticate: top level
            37,  # CreatePartitions: each topic
            43,  # ElectLeaders: each partition
            44,  # IncrementalAlterConfigs: each resource
            45,  # AlterPartitionReassignments: top level and each partition
            46,  # ListPartitionReassignments: top level
            48,  # DescribeClientQuotas: top level
            50,  # DescribeUserScramCredentials: top level and each user
            51,  # AlterUserScramCredentials: each user
            57,  # UpdateFeatures: top level
            60,  # DescribeCluster: top level
        ),
        "api_error",
    ),
    **dict.fromkeys(
        (
            10,  # FindCoordinator: top level (v1-3), each coordinator key (v4+)
            32,  # DescribeConfigs: each resource
            49,  # AlterClientQuotas: each entry
            55,  # DescribeQuorum: top level
            70,  # ControllerRegistration
            80,  # AddRaftVoter
            81,  # RemoveRaftVoter
            84,  # ReadShareGroupState: each partition
            85,  # WriteShareGroupState: each partition
            87,  # ReadShareGroupStateSummary: each partition
            92,  # DeleteShareGroupOffsets: top level
        ),
        "default",
    ),
    90: "exception",  # DescribeShareGroupOffsets: each group
}

# Response arrays and the request arrays they answer entry by entry, where the names differ
# (same-named arrays always pair up): response field -> request fields, first present wins.
_ECHOED_FROM = {
    "responses": ("topics", "topic_data", "topic_names", "resources"),  # Fetch, Produce, DeleteTopics, AlterConfigs
    "partition_responses": ("partition_data",),  # Produce
    "partitions": ("partition_data", "partitions", "partition_indexes"),
    "results": ("groups_names", "topics", "creations", "resources", "users", "deletions"),
    "coordinators": ("coordinator_keys",),  # FindCoordinator v4+
    "groups": ("groups", "group_ids"),  # DescribeGroups, ConsumerGroupDescribe, OffsetFetch v8+
    "filter_results": ("filters",),  # DeleteAcls
    "results_by_topic_v3_and_below": ("v3_and_below_topics",),  # AddPartitionsToTxn v0-3
    "results_by_transaction": ("transactions",),  # AddPartitionsToTxn v4+
    "results_by_partition": ("partitions",),
    "topic_results": ("topics",),
    "transaction_states": ("transactional_ids",),  # DescribeTransactions
    "replica_election_results": ("topic_partitions",),  # ElectLeaders
    "partition_result": ("partitions",),
}

# Fields that identify an entry, copied from the request's entry: response name -> the
# request's names for it.
_IDENTITY = {
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index"),
    "index": ("index", "partition_index"),
    "group_id": ("group_id",),
    "key": ("key",),
    "transactional_id": ("transactional_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "user": ("name", "user"),
    "topic_name": ("topic_name",),
    "session_id": ("session_id",),  # Fetch: the request's fetch session
    "entity_type": ("entity_type",),  # AlterClientQuotas: each entry's entity
    "entity_name": ("entity_name",),
}

# Integers that mean "none" at -1 when Kafka fails a request (Kafka's INVALID_OFFSET,
# UNKNOWN_GENERATION_ID, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, a node id of -1, ...).
_UNKNOWN_AS_MINUS_ONE = re.compile(
    r"offset|epoch|producer_id|node_id|port|generation_id|leader_id|controller_id|coordinator_id|timestamp"
    r"|high_watermark|low_watermark|num_partitions|replication_factor"
)

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def error_response(
    api_key: int, version: int, response_type: type, request: Any, error: int, message: str | None = None
) -> Any:
    """The response body that fails `request` with `error` everywhere it can carry one: a kio
    object, or the encoded body (Raw) for OffsetCommit, whose codec is hand-written, and
    ApiVersions. `message` is the message of the exception Kafka would fail the request with
    (None for a bare `Errors.X.exception()`); the error messages carry what the API's
    getErrorResponse makes of it (`_MESSAGE_OF`)."""
    error = ErrorCode(error)
    message = error_message(api_key, error, message)
    if api_key == OFFSET_COMMIT and type(request) is OffsetCommitRequest:
        # OffsetCommitRequest.getErrorResponse: every partition committed, with the error
        return write_response_to(request, version, [error] * len(request.partitions))
    if api_key == API_VERSIONS:
        # In the v0 layout whatever the version, as Kafka answers UNSUPPORTED_VERSION (KIP-511):
        # clients read an ApiVersions error that way (kafka-python always, Java when the
        # requested version does not parse, librdkafka stops at the error before the array).
        c = codec(API_VERSIONS, 0)
        return Raw(encode_body(c, _build(c.response_type, None, error, message)))
    special = _SPECIAL.get(api_key)
    if special is not None:
        request = special(version, request)
    body = _build(response_type, request, error, message)
    if api_key == DESCRIBE_CLIENT_QUOTAS:
        # DescribeClientQuotasRequest.getErrorResponse: no entries at all (null), not none
        body = dataclasses.replace(body, entries=None)
    return body


def _fetch(version: int, request: Any) -> Any:
    """FetchRequest.getErrorResponse: from v13 (topic ids) the top-level error alone, no
    partitions; before, the error in every partition as well (clients before v7 read only those)."""
    return dataclasses.replace(request, topics=()) if version >= 13 else request


def _alter_user_scram_credentials(version: int, request: Any) -> Any:
    """AlterUserScramCredentialsRequest.getErrorResponse: a result per user named, deleted
    or upserted, each once, in name order."""
    return types.SimpleNamespace(results=sorted({u.name for u in (*request.deletions, *request.upsertions)}))


def _describe_user_scram_credentials(version: int, request: Any) -> Any:
    """DescribeUserScramCredentialsRequest.getErrorResponse: a result per user asked for
    (none for a null list, all users), with the error but not the user's name."""
    return types.SimpleNamespace(results=[types.SimpleNamespace()] * len(request.users or ()))


def _top_level_only(version: int, request: Any) -> Any:
    """DescribeQuorumRequest.getErrorResponse (getTopLevelErrorResponse) and
    DeleteShareGroupOffsetsRequest's: the top-level error alone, none of the topics named."""
    return dataclasses.replace(request, topics=())


def _describe_share_group_offsets(version: int, request: Any) -> Any:
    """DescribeShareGroupOffsetsRequest.getErrorResponse: each group named, with no topics."""
    return dataclasses.replace(request, groups=tuple(dataclasses.replace(g, topics=()) for g in request.groups))


def _alter_replica_log_dirs(version: int, request: Any) -> Any:
    """AlterReplicaLogDirsRequest.getErrorResponse: each dir's topics, one result each, with
    every partition named."""
    return types.SimpleNamespace(
        results=[
            types.SimpleNamespace(topic_name=t.name, partitions=t.partitions) for d in request.dirs for t in d.topics
        ]
    )


_SPECIAL = {
    ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    FETCH: _fetch,
    DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_user_scram_credentials,
    ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
    DESCRIBE_QUORUM: _top_level_only,
    DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    DELETE_SHARE_GROUP_OFFSETS: _top_level_only,
}


def error_message(api_key: int, error: int, message: str | None = None) -> str | None:
    """What getErrorResponse of API `api_key` writes into its error_message fields when it
    fails a request with an exception of error `error` and message `message` (None: the
    error's default message, as `Errors.X.exception()` carries)."""
    how = _MESSAGE_OF.get(api_key)
    if how is None:
        return None
    default = default_message(error)
    if how == "default":
        return default
    if error == ErrorCode.unknown_server_error:
        # ApiError.fromThrowable hides the message of an unexpected error; the all-groups
        # DescribeShareGroupOffsetsResponse writes the default one instead
        return default if how == "exception" else None
    if how == "exception":
        return default if message is None else message
    return None if message == default else message  # ApiError.fromThrowable


def _build(cls: type, source: Any, error: ErrorCode, message: str | None) -> Any:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        value = _value(f, source, error, message)
        if value is not _DEFAULT:
            values[f.name] = value
    return cls(**values)


_DEFAULT = object()  # the schema's default


def _value(f: dataclasses.Field[Any], source: Any, error: ErrorCode, message: str | None) -> Any:
    kind = f.metadata.get("kafka_type")
    if kind == "error_code":
        return error
    if f.name == "error_message" and message is not None:
        return message  # (None: as any other field, null where allowed, else empty)
    tp = _strip_optional(f.type)
    nullable = tp is not f.type
    if typing.get_origin(tp) is tuple:
        inner = _strip_optional(typing.get_args(tp)[0])
        if not _is_entity(inner):
            return ()
        return tuple(_entry(inner, item, error, message) for item in _echoed(f.name, source))
    if kind == "records":
        return b""  # (an empty record set, as Kafka's MemoryRecords.EMPTY, not null)
    if _is_entity(tp):
        # a nested struct: the schema's default (Fetch's tagged diverging_epoch, ...), else
        # none where allowed (ConsumerGroupHeartbeat's assignment), else one of unknowns
        if _has_default(f):
            return _DEFAULT
        return None if nullable else _build(tp, None, error, message)
    for name in _IDENTITY.get(f.name, ()):
        if source is not None and not isinstance(source, (str, int, uuid.UUID)):
            found = getattr(source, name, None)
            if found is not None:
                return found
    if _has_default(f):
        return _DEFAULT
    if nullable:
        return None
    return _zero(kind, f.name)


def _is_entity(tp: Any) -> bool:
    """A kio entity class (a struct of the schema), not a value type."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _entry(cls: type, item: Any, error: ErrorCode, message: str | None) -> Any:
    """One echoed entry. A request that names its entries by a bare value (a group id, a
    partition index, a coordinator key) gives that value to the entry's identifying field."""
    if isinstance(item, (str, int, uuid.UUID)):
        key = _key_field(cls)
        entry = _build(cls, None, error, message)
        return dataclasses.replace(entry, **{key: item}) if key is not None else entry
    return _build(cls, item, error, message)


@cache
def _key_field(cls: type) -> str | None:
    """The field that names an entry: its first string or integer field that is not an error."""
    for f in dataclasses.fields(cls):
        if f.metadata.get("kafka_type") in (
            "string",
            "int32",
            "int16",
            "int8",
            "int64",
            "uuid",
        ) and not f.name.startswith("error"):
            return f.name
    return None


def _echoed(name: str, source: Any) -> Any:
    """The request's entries a response array answers (none if the request has no such array)."""
    if source is None or isinstance(source, (str, int, uuid.UUID)):
        return ()
    for candidate in (name, *_ECHOED_FROM.get(name, ())):
        found = getattr(source, candidate, None)
        if isinstance(found, (tuple, list)):
            return found
    return ()


def _zero(kind: str | None, name: str) -> Any:
    if kind in ("int8", "int16", "int32", "int64"):
        return -1 if _UNKNOWN_AS_MINUS_ONE.search(name) else 0
    if kind == "uint16":
        return 0
    if kind == "float64":
        return 0.0
    if kind == "bool":
        return False
    if kind == "string":
        return ""
    if kind in ("bytes", "records"):
        return b""
    if kind == "uuid":
        return uuid.UUID(int=0)
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kind == "datetime_i64":
        return _EPOCH
    raise TypeError(f"no empty value for a {kind} field ({name})")
