"""One segment file `<20-digit base offset>.log` plus its sparse in-memory indexes.

The file is a plain concatenation of magic-2 batches (kafka-dump-log reads it). Indexes are
rebuilt by scanning at open, never stored: every `index_interval` bytes we remember
(batch base offset, file position, max timestamp of all batches *before* that one), which
bounds any lookup to a short forward scan from the nearest entry.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from protocol.record_batch import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptBatch,
    next_valid_batch,
)

SUFFIX = ".log"
NO_TIMESTAMP = -(2**63)
_SCAN = struct.Struct(">qiibIhiqq")  # header up to maxTimestamp
_CHUNK = 256 * 1024


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (created, renamed, deleted files) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def splice_out(path: Path, start: int, end: int) -> None:
    """Remove bytes [start, end) of a segment file (corrupt bytes, by the repair tool): the
    batches after them keep their offsets (a gap, as compaction leaves). Written to a new
    file, made durable, then renamed over the old one."""
    data = path.read_bytes()
    tmp = path.with_name(path.name + ".splice")
    with open(tmp, "wb") as f:
        f.write(data[:start])
        f.write(data[end:])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _misfit(
    buf: bytes | mmap.mmap | memoryview,
    before: tuple[int, int, int, int],
    pos: int,
    stop: int,
    base: int,
    lod: int,
    ceiling: int,
) -> tuple[int, int, int, str]:
    """(position, end, base offset, why) of the batch to blame when the batch at `pos`
    (base, lod; whole, CRC right) does not fit after the one taken before it: itself, or
    that one, whichever does not fit between its own neighbours. Where removing either
    would leave the others in order, the one that breaks a contiguous run is blamed (a
    log that was never compacted has no gaps)."""
    prev_pos, prev_floor, prev_base, prev_lod = before
    last = base + lod
    if last >= ceiling:  # (the next segment's name says where this one's offsets end)
        return pos, stop, base, f"offsets {base}-{last} reach past {ceiling - 1}, where the next segment starts"
    if prev_pos < 0:
        return pos, stop, base, f"base offset {base} below {prev_floor}, where the batch before it ends"
    after = ceiling
    if stop + HEADER_SIZE <= len(buf) and buf[stop + 16] == MAGIC:
        after = int.from_bytes(buf[stop : stop + 8], "big", signed=True)
    prev_last = prev_base + prev_lod
    this_fits_alone = prev_floor <= base and last < after  # without the one before
    prev_fits_alone = prev_last < after  # without this one
    if this_fits_alone != prev_fits_alone:
        blame_prev = this_fits_alone
    else:
        blame_prev = prev_base != prev_floor and last + 1 == after
    if blame_prev:
        return (
            prev_pos,
            pos,
            prev_base,
            (
                f"offsets {prev_base}-{prev_last} do not fit between the batches around "
                f"it (the one before ends at {prev_floor}, the next starts at {base})"
            ),
        )
    return (
        pos,
        stop,
        base,
        (f"offsets {base}-{last} do not fit between the batches around it (the one before ends at {prev_last + 1})"),
    )


def segment_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{SUFFIX}"


class StorageError(OSError):
    """The disk refused a write or a sync (Kafka: KafkaStorageException). Nothing of the
    append it reports is left in the log: the bytes were cut back before this is raised
    or reported. (Defined here, not in partition.py, which mypyc compiles: a compiled class
    cannot subclass OSError.)"""


@dataclass
class ScanResult:
    valid_bytes: int  # length of the prefix made of good batches
    batches: int
    next_offset: int | None  # after the last good batch; None if none
    problem: str | None  # why the scan stopped before the end, if it did
    problem_offset: int | None  # base offset of the first rejected batch, when readable
    scanned_bytes: int = 0  # read and verified by this scan (not taken from a checkpoint)
    # A valid batch follows the problem at this position: the damage is in the middle
    # (a flipped bit, a bad length), not a torn tail, and nothing was cut.
    resumes_at: int | None = None


@dataclass
class SegmentState:
    """What a scan of a segment builds: saved in the recovery-point checkpoint so the next
    open need not read (and CRC-check) the bytes it covers again."""

    base_offset: int
    size: int
    next_offset: int
    batches: int
    max_timestamp: int
    max_timestamp_pos: int
    interval: int
    last_indexed: int
    idx_offsets: array[int]
    idx_positions: array[int]
    idx_max_ts_before: array[int]


_STATE = struct.Struct(">qqqqqqqqq")  # the ints of a SegmentState, then the index length
CHECKPOINT_MAGIC = b"KCOORD-SEGMENTS-1" + (b"L" if sys.byteorder == "little" else b"B")  # arrays: native order


def encode_checkpoint(states: list[SegmentState]) -> bytes:
    out = [CHECKPOINT_MAGIC, struct.pack(">i", len(states))]
    for st in states:
        out.append(
            _STATE.pack(
                st.base_offset,
                st.size,
                st.next_offset,
                st.batches,
                st.max_timestamp,
                st.max_timestamp_pos,
                st.interval,
                st.last_indexed,
                len(st.idx_offsets),
            )
        )
        out += [st.idx_offsets.tobytes(), st.idx_positions.tobytes(), st.idx_max_ts_before.tobytes()]
    body = b"".join(out)
    return body + struct.pack(">I", crc32c(body))


def decode_checkpoint(data: bytes) -> dict[int, SegmentState]:
    """Segment states by base offset; raises ValueError if the bytes are not a whole checkpoint."""
    if len(data) < len(CHECKPOINT_MAGIC) + 8 or not data.startswith(CHECKPOINT_MAGIC):
        raise ValueError("not a segment checkpoint of this format and byte order")
    if struct.unpack_from(">I", data, len(data) - 4)[0] != crc32c(memoryview(data)[:-4]):
        raise ValueError("checkpoint CRC mismatch")
    pos = len(CHECKPOINT_MAGIC)
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    states = {}
    for _ in range(count):
        *ints, n = _STATE.unpack_from(data, pos)
        pos += _STATE.size
        arrays = []
        for _ in range(3):
            a = array("q")
            a.frombytes(data[pos : pos + 8 * n])
            pos += 8 * n
            arrays.append(a)
        st = SegmentState(*ints, *arrays)
        states[st.base_offset] = st
    if pos != len(data) - 4:
        raise ValueError("checkpoint length mismatch")
    return states


class Segment:
    __slots__ = (
        "base_offset",
        "path",
        "fd",
        "device",
        "size",
        "next_offset",
        "batches",
        "max_timestamp",
        "max_timestamp_pos",
        "first_append_ms",
        "interval",
        "idx_offsets",
        "idx_positions",
        "idx_max_ts_before",
        "_last_indexed",
        "unchecked_end",
    )

    def __init__(self, path: Path, base_offset: int, fd: int, interval: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd
        self.device = os.fstat(fd).st_dev  # (a sync round groups its files by filesystem)
        self.interval = interval
        self.size = 0
        self.batches = 0
        self.next_offset = base_offset  # offset after the last batch written here
        self.max_timestamp = NO_TIMESTAMP
        self.max_timestamp_pos = -1
        self.first_append_ms: int | None = None
        self.idx_offsets = array("q")
        self.idx_positions = array("q")
        self.idx_max_ts_before = array("q")
        self._last_indexed = -interval
        # Bytes below this were taken from the recovery point, not scanned at open: what is
        # read from them is checked as it is served (check_run).
        self.unchecked_end = 0

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def create(cls, directory: Path, base_offset: int, interval: int) -> Segment:
        path = segment_path(directory, base_offset)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        return cls(path, base_offset, fd, interval)

    @classmethod
    def recover(
        cls,
        path: Path,
        base_offset: int,
        min_offset: int,
        interval: int,
        verify_crc: bool = True,
        state: SegmentState | None = None,
        limit: int | None = None,
    ) -> tuple[Segment, ScanResult]:
        """Open an existing file, index it, and cut a torn tail after the last good batch.

        Damage followed by a valid batch is not a torn write but corruption: the file is
        left as it is (result.resumes_at says where the valid batch starts; the repair
        tool removes just those bytes, splice_out). So is a whole batch whose offsets do
        not fit between its neighbours (`limit`: the next segment's base offset, which no
        offset here may reach). With `state` (from the recovery-point checkpoint) the
        bytes it covers are taken as verified and only what follows them is scanned."""
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        seg, result = cls._examine(path, base_offset, fd, min_offset, interval, verify_crc, state, limit)
        size = os.fstat(fd).st_size
        if result.resumes_at is not None or result.valid_bytes == size:
            return seg, result
        os.ftruncate(fd, result.valid_bytes)
        result.problem = f"{result.problem}; cut {size - result.valid_bytes} bytes"
        return seg, result

    @classmethod
    def examine(cls, path: Path, base_offset: int, min_offset: int, limit: int | None) -> ScanResult:
        """Scan a whole segment file read-only (CRCs and offsets), as recover() would, to
        name its first bad batch: for a reader that found one and must say which."""
        fd = os.open(path, os.O_RDONLY)
        try:
            return cls._examine(path, base_offset, fd, min_offset, 1 << 62, True, None, limit)[1]
        finally:
            os.close(fd)

    @classmethod
    def _examine(
        cls,
        path: Path,
        base_offset: int,
        fd: int,
        min_offset: int,
        interval: int,
        verify_crc: bool,
        state: SegmentState | None,
        limit: int | None,
    ) -> tuple[Segment, ScanResult]:
        seg = cls(path, base_offset, fd, interval)
        size = os.fstat(fd).st_size
        start = 0
        if state is not None and state.size <= size and state.interval == interval:
            seg._restore(state)
            start = seg.unchecked_end = state.size
        if size == 0:
            return seg, ScanResult(0, 0, None, None, None)
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mm:
            floor = max(min_offset, base_offset, seg.next_offset)
            result = seg._scan(mm, floor, verify_crc, start, limit)
            if result.resumes_at is not None and result.valid_bytes < seg.size:
                # The batch blamed is one this scan had already taken: count again without it.
                seg = cls(path, base_offset, fd, interval)
                if start:
                    seg._restore(state)  # type: ignore[arg-type]  # start is set only together with a recovery-point state
                    seg.unchecked_end = start
                view = memoryview(mm)
                head = view[: result.valid_bytes]
                try:
                    seg._scan(head, floor, verify_crc, start, limit)
                finally:
                    head.release()
                    view.release()
            elif result.valid_bytes < size and result.resumes_at is None:
                result.resumes_at = next_valid_batch(mm, result.valid_bytes + 1)
        result.scanned_bytes = result.valid_bytes - start
        return seg, result

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def fsync(self) -> None:
        os.fsync(self.fd)

    # ------------------------------------------------------------ writing

    def _note(self, pos: int, base: int, next_offset: int, max_ts: int, size: int) -> None:
        """Account for a batch now at `pos`; add a sparse index entry when due."""
        if pos - self._last_indexed >= self.interval:
            self.idx_offsets.append(base)
            self.idx_positions.append(pos)
            self.idx_max_ts_before.append(self.max_timestamp)
            self._last_indexed = pos
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.max_timestamp_pos = pos
        self.next_offset = next_offset
        self.size = pos + size
        self.batches += 1

    def write(
        self,
        data: bytes | bytearray | memoryview,
        base_offset: int,
        max_timestamp: int,
        now_ms: int,
        size: int,
        next_offset: int,
    ) -> None:
        """Append one whole batch (already offset-assigned) at the end of the file: `size`
        bytes, offsets from `base_offset` up to `next_offset`."""
        pos = self.size
        n = os.write(self.fd, data)
        if n != size:  # a short write leaves a torn tail that recovery will cut
            raise OSError(f"short write to {self.path}: {n} of {size} bytes")
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        self._note(pos, base_offset, next_offset, max_timestamp, size)

    def truncate(self, pos: int) -> None:
        """Cut the file at `pos` (a batch start, or the end of the last whole batch) and
        forget what followed: counters and indexes are rebuilt from the headers that stay.
        For a failed write or sync only, so reading the headers again costs nothing that
        matters."""
        os.ftruncate(self.fd, pos)
        kept = list(self.iter_headers(0, pos))
        self.size = self.batches = 0
        self.next_offset = self.base_offset
        self.max_timestamp, self.max_timestamp_pos = NO_TIMESTAMP, -1
        self.idx_offsets, self.idx_positions, self.idx_max_ts_before = array("q"), array("q"), array("q")
        self._last_indexed = -self.interval
        for at, h in kept:
            self._note(at, h.base_offset, h.next_offset, h.max_timestamp, h.size)

    def _scan(
        self,
        buf: mmap.mmap | bytes | memoryview,
        min_offset: int,
        verify_crc: bool,
        start: int = 0,
        limit: int | None = None,
    ) -> ScanResult:
        # One tight loop: recovery of millions of batches is bound by this.
        view = memoryview(buf)
        try:
            end = len(buf)
            pos = start
            expected = min_offset
            ceiling = (1 << 63) - 1 if limit is None else limit  # no offset here reaches the next segment's base
            unpack = _SCAN.unpack_from
            note = self._note
            problem = None
            bad_offset = None
            resumes_at = None
            before = (-1, expected, 0, 0)  # the batch taken last: (position, offset expected before it, base, lod)
            while pos < end:
                if end - pos < HEADER_SIZE:
                    problem = f"{end - pos} trailing bytes, less than a batch header"
                    break
                base, length, _, magic, crc, _, lod, _, max_ts = unpack(buf, pos)
                stop = pos + LOG_OVERHEAD + length
                if magic != MAGIC or length < MIN_BATCH_LENGTH or lod < 0:
                    problem = f"no valid batch header (magic {magic}, length {length})"
                    break
                bad_offset = base
                if stop > end:
                    problem = f"batch needs {stop - pos} bytes, only {end - pos} present"
                    break
                if verify_crc and crc32c(view[pos + 21 : stop]) != crc:
                    problem = "CRC mismatch"
                    break
                if base < expected or base + lod >= ceiling:
                    # The base offset lies outside the CRC: a flipped bit there leaves a valid
                    # batch at the wrong offsets. Blame the batch that does not fit between
                    # its neighbours, which may be the one before (a base flipped upwards).
                    pos, stop, bad_offset, problem = _misfit(buf, before, pos, stop, base, lod, ceiling)
                    resumes_at = stop
                    break
                before = (pos, expected, base, lod)
                next_offset = base + lod + 1
                note(pos, base, next_offset, max_ts, stop - pos)
                expected = next_offset
                pos = stop
                bad_offset = None
            if self.first_append_ms is None and self.max_timestamp != NO_TIMESTAMP:
                self.first_append_ms = self.max_timestamp  # for segment_ms rolling after restart
            next_off = expected if self.batches else None
            if problem:
                problem = f"{self.path.name} at byte {pos}: {problem}"
            return ScanResult(pos, self.batches, next_off, problem, bad_offset, resumes_at=resumes_at)
        finally:
            view.release()

    # ------------------------------------------------------------ recovery-point checkpoint

    def state(self) -> SegmentState:
        return SegmentState(
            self.base_offset,
            self.size,
            self.next_offset,
            self.batches,
            self.max_timestamp,
            self.max_timestamp_pos,
            self.interval,
            self._last_indexed,
            self.idx_offsets,
            self.idx_positions,
            self.idx_max_ts_before,
        )

    def _restore(self, st: SegmentState) -> None:
        self.size, self.next_offset, self.batches = st.size, st.next_offset, st.batches
        self.max_timestamp, self.max_timestamp_pos, self._last_indexed = (
            st.max_timestamp,
            st.max_timestamp_pos,
            st.last_indexed,
        )
        self.idx_offsets, self.idx_positions, self.idx_max_ts_before = (
            st.idx_offsets,
            st.idx_positions,
            st.idx_max_ts_before,
        )

    # ------------------------------------------------------------ reading

    def pread(self, n: int, pos: int) -> bytes:
        return os.pread(self.fd, n, pos)

    def iter_headers(self, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `pos` (a batch start) to `end`; no CRC check."""
        end = self.size if end is None else end
        while pos < end:
            chunk = os.pread(self.fd, min(_CHUNK, end - pos), pos)
            cpos = 0
            clen = len(chunk)
            if clen < HEADER_SIZE:
                raise CorruptBatch(f"{self.path.name}: truncated header at byte {pos}")
            while clen - cpos >= HEADER_SIZE:
                h = BatchHeader._make(HEADER.unpack_from(chunk, cpos))
                yield pos + cpos, h
                cpos += h.batch_length + LOG_OVERHEAD
            pos += cpos

    def iter_batches(
        self, pos: int = 0, end: int | None = None, *, chunk_bytes: int = 4 * 1024 * 1024
    ) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, bytes) of each whole batch from `pos` (a batch start) to `end`.

        Reads big chunks: one syscall for many small batches. Safe from a worker thread
        for bytes below `end` (they are never rewritten in place)."""
        end = self.size if end is None else end
        while pos < end:
            chunk = os.pread(self.fd, min(chunk_bytes, end - pos), pos)
            n = len(chunk)
            cpos = 0
            while cpos + HEADER_SIZE <= n:
                h = BatchHeader._make(HEADER.unpack_from(chunk, cpos))
                size = h.batch_length + LOG_OVERHEAD
                if cpos + size > n:
                    break
                yield h, chunk[cpos : cpos + size]
                cpos += size
            if cpos == 0:  # a single batch larger than the chunk
                if n < HEADER_SIZE:
                    raise CorruptBatch(f"{self.path.name}: truncated batch at byte {pos}")
                h = BatchHeader._make(HEADER.unpack_from(chunk, 0))
                data = os.pread(self.fd, h.batch_length + LOG_OVERHEAD, pos)
                yield h, data
                cpos = len(data)
            pos += cpos

    def locate(self, offset: int) -> int | None:
        """File position of the first batch that ends after `offset` (None: past the end).
        CorruptBatch if a batch on the way does not fit where the index and its neighbours
        say it must (see _walk)."""
        if offset >= self.next_offset:
            return None
        for pos, h in self._headers_from(bisect_right(self.idx_offsets, offset) - 1):
            if h.base_offset + h.last_offset_delta >= offset:
                return pos
        return None

    def locate_timestamp(self, ts: int) -> tuple[int, BatchHeader] | None:
        """First batch whose max timestamp is >= ts."""
        if self.max_timestamp < ts:
            return None
        for pos, h in self._headers_from(bisect_left(self.idx_max_ts_before, ts) - 1):
            if h.max_timestamp >= ts:
                return pos, h
        return None

    def check_run(self, pos: int, data: bytes) -> None:
        """Whole batches read from `pos` (the first found by locate): CorruptBatch unless
        their offsets grow from batch to batch, each batch at an index position has the
        index's offset, and none reaches the next index entry's or the segment's end."""
        j = bisect_left(self.idx_positions, pos)
        expected = -1
        at = 0
        while at + LOG_OVERHEAD <= len(data):
            base, length = (
                int.from_bytes(data[at : at + 8], "big", signed=True),
                int.from_bytes(data[at + 8 : at + 12], "big"),
            )
            last = base + int.from_bytes(data[at + 23 : at + 27], "big", signed=True)
            size = length + LOG_OVERHEAD
            if j < len(self.idx_positions) and self.idx_positions[j] == pos + at:
                if base != self.idx_offsets[j]:
                    raise self.misplaced(
                        pos + at, size, f"base offset {base}, where the offset index says {self.idx_offsets[j]}"
                    )
                j += 1
            bound = self.idx_offsets[j] if j < len(self.idx_offsets) else self.next_offset
            if base < expected or last >= bound:
                raise self.misplaced(
                    pos + at,
                    size,
                    f"offsets {base}-{last} do not fit between {max(expected, self.base_offset)} and {bound - 1}",
                )
            expected = last + 1
            at += size

    def misplaced(self, pos: int, size: int, why: str) -> CorruptBatch:
        return CorruptBatch(f"{self.path} bytes {pos}-{pos + size} are corrupt ({why})")

    def _headers_from(self, i: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batches from index entry i (-1: the file start), checked
        as _walk does where they begin in bytes the recovery point spared (unchecked_end);
        bytes scanned at open or appended since were checked then, and every Fetch and
        waiting Fetch locates its offset here."""
        start = self.idx_positions[i] if i >= 0 else 0
        return self.iter_headers(start) if start >= self.unchecked_end else self._walk(i)

    def _walk(self, i: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batches from index entry i (-1: the file start). The
        recovery point spares a restart from reading bytes it covers, so a base offset (which
        the CRC does not cover) flipped on disk since is caught here, before a reader is
        given it: a batch at an index position has the offset the index says, offsets grow
        from batch to batch, and none reaches the next index entry's or the segment's end."""
        idx_offsets, idx_positions = self.idx_offsets, self.idx_positions
        start = idx_positions[i] if i >= 0 else 0
        expected = idx_offsets[i] if i >= 0 else self.base_offset
        j = i + 1
        mark = idx_positions[j] if j < len(idx_positions) else -1
        bound = idx_offsets[j] if j < len(idx_offsets) else self.next_offset
        for pos, h in self.iter_headers(start):
            base = h.base_offset
            if pos == mark:
                if base != idx_offsets[j]:
                    raise self.misplaced(
                        pos, h.size, f"base offset {base}, where the offset index says {idx_offsets[j]}"
                    )
                j += 1
                mark = idx_positions[j] if j < len(idx_positions) else -1
                bound = idx_offsets[j] if j < len(idx_offsets) else self.next_offset
            if base < expected or base + h.last_offset_delta >= bound or (pos == start and i >= 0 and base != expected):
                raise self.misplaced(
                    pos,
                    h.size,
                    f"offsets {base}-{base + h.last_offset_delta} do not fit between {expected} and {bound - 1}",
                )
            expected = base + h.last_offset_delta + 1
            yield pos, h

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, offsets {self.base_offset}..{self.next_offset}, {self.size} B)"
