"""Segmented partition logs on local disk: `__consumer_offsets` and topic data."""

from ..java_order import java_string_hashcode
from .config import OFFSETS_TOPIC_CONFIG, LogConfig
from .offsets import OffsetsLog, OffsetsRecord, partition_for
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
