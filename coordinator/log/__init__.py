"""Segmented partition logs on local disk: `__consumer_offsets` and topic data."""

from .config import OFFSETS_TOPIC_CONFIG, LogConfig
from .offsets import OffsetsLog, OffsetsRecord, java_string_hashcode, partition_for
from .partition import InvalidBatch, OffsetOutOfRange, PartitionLog

__all__ = [
    "LogConfig",
    "OFFSETS_TOPIC_CONFIG",
    "PartitionLog",
    "OffsetsLog",
    "OffsetsRecord",
    "InvalidBatch",
    "OffsetOutOfRange",
    "partition_for",
    "java_string_hashcode",
]
