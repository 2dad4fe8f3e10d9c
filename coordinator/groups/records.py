"""The events the coordinator persists: `__consumer_offsets` (key, value) pairs.

Keys and values are protocol.group_records' dataclasses (Kafka's OffsetCommitKey/Value
and GroupMetadataKey/Value); coordinator/storage.py turns them into bytes. A value of
None is a tombstone.
"""

from __future__ import annotations

from protocol.consumer_records import GroupKey, MemberKey
from protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    TxnMarkerKey,
    TxnOffsetCommitKey,
    group_metadata_value,
    member_metadata,
)

# (the consumer, share and streams groups' keys too: protocol.consumer_records' GroupKey / MemberKey)
Key = OffsetCommitKey | GroupMetadataKey | GroupKey | MemberKey
# (a value: OffsetCommitValue, GroupMetadataValue, a consumer, share or streams group record's value,
# or None, a tombstone; `object`, the one type they share, so that a compiled check holds)
Event = tuple[Key, object]

__all__ = [
    "Event",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "Key",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "TxnMarkerKey",
    "TxnOffsetCommitKey",
    "group_metadata_value",
    "member_metadata",
]
