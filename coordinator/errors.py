"""Kafka's error codes (kio's ErrorCode) as the group paths read them, `E.none`.

On Python 3.11 every attribute read on an Enum class (`ErrorCode.none`) passes through
EnumType.__getattr__, a Python-level hook that costs several times a plain attribute read,
and a JoinGroup, SyncGroup or LeaveGroup reads dozens of them. `E` here is a namespace
holding the same members (`E.none is ErrorCode.none`); type checkers see ErrorCode itself.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    E = ErrorCode
else:
    E = SimpleNamespace(**ErrorCode.__members__)
