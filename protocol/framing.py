"""Kafka's TCP framing: every request and response is an int32 size followed by that many bytes.

Sans-IO: feed bytes in, get whole frames out. No sockets here.
"""

from __future__ import annotations

import struct
from typing import Any, Final, TypeAlias

_SIZE = struct.Struct(">i")
_read_size: Final = _SIZE.unpack_from  # (Final: compiled, no dict lookup per frame)

# A request frame as FrameDecoder hands it out: bytes, or a large Produce frame's bytearray
# (read into place). Compiled code checks argument types, so readers of a frame take either.
Frame: TypeAlias = bytes | bytearray

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
LARGE_FRAME_BYTES = 1 << 20  # a Produce frame this large arriving in parts is read into place
PRODUCE_KEY = b"\x00\x00"  # the api key opening a Produce request


class FrameError(Exception):
    """The peer sent a frame that can never be valid; the connection must be closed."""


class FrameDecoder:
    """Splits a byte stream into frames, refusing negative or oversized lengths early.

    The size is checked before the body arrives, so a hostile 2 GiB length never
    makes us buffer 2 GiB.
    """

    __slots__ = ("_buf", "_max", "_wanted", "_large", "_filled")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()  # the start of a frame that is not complete yet
        self._wanted = 0  # bytes _buf must hold before anything can be cut from it
        self._max = max_frame_bytes
        # A large Produce frame being read: filled in place and handed out as it is (a
        # bytearray), so that its bytes exist once (its record batches are read as views).
        self._large: bytearray | None = None
        self._filled = 0

    def feed(self, data: bytes) -> list[bytes]:
        """The frames `data` completes, in order."""
        if self._large is not None:
            return self._fill(data)
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < self._wanted:
                return []  # a large frame arriving in chunks: each byte is copied once here
            data = bytes(buf)
            buf.clear()
        # Usually `data` holds whole frames (one read, one or more requests): cut them
        # straight from it.
        frames: list[bytes] = []
        pos, end = 0, len(data)
        size = 0
        while end - pos >= 4:
            (size,) = _read_size(data, pos)
            if size < 0:
                raise FrameError(f"negative frame size {size}")
            if size > self._max:
                raise FrameError(f"frame size {size} exceeds the limit of {self._max} bytes")
            if end - pos - 4 < size:
                break
            frames.append(data[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if pos < end:
            if end - pos >= 6 and size >= LARGE_FRAME_BYTES and data[pos + 4 : pos + 6] == PRODUCE_KEY:
                self._large = bytearray(size)
                self._large[: end - pos - 4] = memoryview(data)[pos + 4 : end]
                self._filled = end - pos - 4
                return frames
            buf += memoryview(data)[pos:]
            self._wanted = 4 + size if end - pos >= 4 else 4
        return frames

    def _fill(self, data: bytes) -> list[bytes]:
        """Bytes of the large Produce frame being read, and the frames after it."""
        large = self._large
        assert large is not None
        filled = self._filled
        n = min(len(data), len(large) - filled)
        large[filled : filled + n] = memoryview(data)[:n]
        self._filled = filled + n
        if self._filled < len(large):
            return []
        self._large = None
        frames: list[Any] = [large]  # (a bytearray, handed out as it is)
        if n < len(data):
            frames += self.feed(bytes(memoryview(data)[n:]))
        return frames

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame still waiting for the rest."""
        return len(self._buf) + self._filled if self._large is not None else len(self._buf)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
