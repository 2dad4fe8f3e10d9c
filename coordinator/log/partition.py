"""PartitionLog: one partition's append-only, segmented log on local disk.

Writes go straight to the active segment with os.write (page cache, microseconds) from the
event loop; durability is a separate step. flush() waits for a sync round (sync.py) that
covers the append: appends to any log made while a round is in flight share the next one.
"""

from __future__ import annotations

import asyncio
import errno
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from .. import server_log
from ..futures import Done, future_and_callback

from protocol.record_batch import (
    LOG_OVERHEAD,
    BatchHeader,
    CorruptBatch,
    Record,
    TruncatedBatch,
    build_batch,
    iter_batch_records,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
)

from . import compaction
from .config import LogConfig
from .loader import (
    CHECKPOINT_FILE,
    LOG_START_FILE,
    load,
    remove_recovery_point,
    replace_file,
    say_offline,
)
from .sync import SYNCER as SYNCER  # (coordinator.log.offsets shares it)
from .segment import (
    NO_TIMESTAMP,
    Segment,
    encode_checkpoint,
)
from .segment import StorageError as StorageError  # (raised here; its importers name it from here)

log = server_log.get(__name__)

# A partition's leader epoch until its leadership first moves (coordinator.topology): every
# appended batch is stamped with the log's current one, as Kafka's leader does (the field
# is outside the CRC). Consumers check it against the epoch they fetched at.
LEADER_EPOCH = 0
# Set by the metrics (--metrics-port): called with the seconds each append took to write.
APPEND_TIMER: Callable[[float], None] | None = None


class OffsetOutOfRange(ValueError):
    pass


class InvalidBatch(ValueError):
    """A batch offered to append() is corrupt or inconsistent (Kafka: CORRUPT_MESSAGE)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    # Bumped whenever a log goes offline while serving (Metadata answers depend on it).
    offline_events: ClassVar[int] = 0

    def __init__(self, directory: Path, config: LogConfig, segments: list[Segment], log_start_offset: int) -> None:
        self.directory = directory
        self.config = config
        self.segments = segments  # ordered by base offset; the last one is active
        self._bases = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self._next_offset = segments[-1].next_offset
        self._durable_offset = self._next_offset  # recovered data counts as on disk
        self._unsynced: dict[int, Segment] = {}  # fd -> segment written since last fsync
        # (log end offset when asked, done) of when_durable() callers, in offset order
        self._durable_waiters: deque[tuple[int, Done]] = deque()
        self._cut_pending: int | None = None  # a cut-back that failed: retried before any append
        self.cuts = 0  # how many times batches were cut from the end (state derived from them is stale)
        # Why the log may not be used (corrupt data found), or None. Like Kafka's offline
        # log dir: appends and reads are refused until it is repaired.
        self.offline: str | None = None
        self.leader_epoch = LEADER_EPOCH  # set by the topology when leadership moves
        self._dir_dirty = False
        self._maintenance_lock = asyncio.Lock()
        self._background: list[asyncio.Task[None]] = []
        self._maintainer_wake: asyncio.Future[None] | None = None  # the maintainer's sleep, to cut short
        self._clean_now = False
        self._dirty_from = log_start_offset  # compaction has not looked at offsets >= this
        self._checkpointed_offset = self._next_offset  # the recovery point (see open_sync)
        self.closed = False
        # Called after every append, whoever the writer is, and when the log's topic is
        # deleted (wakes long-polling fetches).
        self.append_listeners: list[Callable[[], None]] = []

    # ------------------------------------------------------------ open / recovery

    @classmethod
    async def open(
        cls, directory: str | Path, config: LogConfig | None = None, *, background: bool = True
    ) -> PartitionLog:
        """Recover (in a worker thread) and return the log; starts interval fsync and
        retention/compaction tasks unless background=False."""
        loop = asyncio.get_running_loop()
        plog = await loop.run_in_executor(None, cls.open_sync, directory, config)
        if background:
            plog.start_background()
        return plog

    @classmethod
    def open_sync(cls, directory: str | Path, config: LogConfig | None = None, *, repair: bool = False) -> PartitionLog:
        """Recover the log. A torn tail (what a crash mid-write leaves) is cut; damage
        that valid batches follow is corruption: nothing is cut, and the log comes back
        offline (every append and read refused) with one error line saying where and how
        to repair it, unless `repair` (the repair tool), which removes just the corrupt
        bytes (protocol.record_batch.next_valid_batch finds where valid batches resume, the
        range the analytics pipeline skips too) and keeps every valid batch after them."""
        config = config or LogConfig()
        directory = Path(directory)
        loaded = load(directory, config, repair=repair)
        plog = cls(directory, config, loaded.segments, loaded.log_start_offset)
        plog.offline = loaded.offline
        if loaded.scanned and loaded.offline is None:
            # What was just verified may still sit in the page cache (the process died,
            # not the machine): make it durable, then record it, so that a crash from now
            # on re-reads only what is appended later.
            try:
                for seg in loaded.scanned:
                    seg.fsync()
                plog._write_checkpoint(plog._checkpoint_bytes())
            except OSError as e:
                log.warning("%s: no recovery point written (%s): the next open scans again", directory, e)
        return plog

    def _checkpoint_bytes(self) -> bytes:
        """The segments' states now (encoding copies them: later appends do not leak in)."""
        return encode_checkpoint([seg.state() for seg in self.segments])

    def _write_checkpoint(self, data: bytes) -> None:
        replace_file(self.directory, CHECKPOINT_FILE, data)

    async def checkpoint(self) -> None:
        """Advance the recovery point to everything appended so far."""
        async with self._maintenance_lock:
            await self._checkpoint_locked()

    async def _checkpoint_locked(self) -> None:
        # States taken before the flush: all they describe is on disk once it returns.
        data = self._checkpoint_bytes()
        await self.flush()
        await asyncio.get_running_loop().run_in_executor(None, self._write_checkpoint, data)
        self._checkpointed_offset = self._next_offset

    def start_background(self) -> None:
        if self.config.fsync == "interval":
            self._background.append(asyncio.ensure_future(self._interval_flusher()))
        if self.config.maintenance_interval_ms:
            self._background.append(asyncio.ensure_future(self._maintainer()))
        if self.config.checkpoint_interval_ms:
            self._background.append(asyncio.ensure_future(self._checkpointer()))

    # ------------------------------------------------------------ properties

    @property
    def log_end_offset(self) -> int:
        """The next offset to be written."""
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._next_offset  # single replica: everything written is committed

    @property
    def durable_offset(self) -> int:
        """Offsets below this are known to be fsynced."""
        return self._durable_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    # ------------------------------------------------------------ appending

    def append(self, batches: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> int:
        """Validate one or more whole batches, assign their offsets, write them.
        verify_crc=False: batches this process just built (their CRC was just computed).

        Returns the base offset assigned to the first batch. Not yet durable: see flush().
        """
        self._writable()
        buf = bytearray(batches)
        # (position, size, base offset, max timestamp, next offset) per batch
        headers: list[tuple[int, int, int, int, int]] = []
        pos, end = 0, len(buf)
        next_offset = self._next_offset
        epoch = self.leader_epoch
        try:
            while pos < end:
                h = parse_header(buf, pos, verify_crc=verify_crc)
                count = h.record_count
                if count != h.last_offset_delta + 1:
                    raise InvalidBatch(f"record count {count} does not match offset delta {h.last_offset_delta}")
                set_base_offset(buf, pos, next_offset)
                set_partition_leader_epoch(buf, pos, epoch)
                size = h.batch_length + LOG_OVERHEAD
                headers.append((pos, size, next_offset, h.max_timestamp, next_offset + count))
                next_offset += count
                pos += size
        except (TruncatedBatch, ValueError) as bad:  # (its own name: a compiled function gives a name one type)
            raise InvalidBatch(str(bad)) from bad
        if not headers:
            raise InvalidBatch("no batch to append")
        return self._write(buf, headers)

    def append_built(self, batch: bytearray, count: int, max_timestamp: int) -> int:
        """append() of one batch this process just built (offsets.py's bytes, its base offset
        0, `count` records, the greatest timestamp `max_timestamp`): written as it is,
        without the copy and the header read append() makes of a batch from elsewhere.
        Returns its base offset."""
        if self.closed or self.offline is not None or self._cut_pending is not None:
            self._writable()  # (its checks inline first: every commit comes here)
        first = self._next_offset
        set_base_offset(batch, 0, first)
        set_partition_leader_epoch(batch, 0, self.leader_epoch)
        return self._write(batch, ((0, len(batch), first, max_timestamp, first + count),))

    def _writable(self) -> None:
        if self.closed:
            raise RuntimeError("log is closed")
        if self.offline is not None:
            raise StorageError(errno.EIO, f"offline: {self.offline}")
        if self._cut_pending is not None:
            self._cut_back(self._cut_pending)

    def _write(self, buf: bytearray, headers: Sequence[tuple[int, int, int, int, int]]) -> int:
        """Write the batches of `buf` (offsets assigned): (position, size, base offset, max
        timestamp, next offset) each. All or nothing. Returns the first's base offset."""
        first = self._next_offset
        t = time.time_ns() // 1_000_000  # (now_ms(), inline: every append)
        timer = APPEND_TIMER
        started = time.perf_counter() if timer is not None else 0.0
        # (the usual: buf is one whole batch, written without a view)
        view = memoryview(buf) if len(headers) > 1 else None
        config = self.config
        try:
            for pos, size, base, max_ts, after in headers:
                seg = self.segments[-1]
                # A new segment (starting at self._next_offset) once the active one is full or old.
                if seg.size and (
                    seg.size + size > config.segment_bytes
                    or (
                        config.segment_ms is not None
                        and seg.first_append_ms is not None
                        and t - seg.first_append_ms >= config.segment_ms
                    )
                ):
                    seg = self._roll()
                seg.write(buf if view is None else view[pos : pos + size], base, max_ts, t, size, after)
                self._unsynced[seg.fd] = seg
                self._next_offset = after
        except OSError as e:
            # All or nothing: batches of this call already written, and a torn tail, go.
            self._cut_back(first)
            raise StorageError(e.errno or errno.EIO, f"{self.directory}: append failed: {e.strerror or e}") from e
        if timer is not None:
            timer(time.perf_counter() - started)
        if self.append_listeners:
            self.wake_listeners()
        return first

    def wake_listeners(self) -> None:
        """Tell the append listeners to look again (after an append; when the topic is deleted)."""
        for listener in self.append_listeners:
            listener()

    def append_records(
        self,
        records: Iterable[tuple[bytes | None, bytes | None]],
        timestamp_ms: int | None = None,
        **batch_options: Any,
    ) -> int:
        """Build one batch from (key, value) pairs and append it."""
        ts = now_ms() if timestamp_ms is None else timestamp_ms
        return self.append(build_batch(list(records), timestamp_ms=ts, **batch_options))

    async def append_durable(self, batches: bytes | bytearray | memoryview) -> int:
        """append(), then wait for fsync if the policy is 'always'."""
        base = self.append(batches)
        if self.config.fsync == "always":
            await self.flush()
        return base

    async def append_durable_records(
        self,
        records: Iterable[tuple[bytes | None, bytes | None]],
        timestamp_ms: int | None = None,
        **batch_options: Any,
    ) -> int:
        base = self.append_records(records, timestamp_ms, **batch_options)
        if self.config.fsync == "always":
            await self.flush()
        return base

    def _roll(self) -> Segment:
        seg = Segment.create(self.directory, self._next_offset, self.config.index_interval_bytes)
        self.segments.append(seg)
        self._bases.append(seg.base_offset)
        self._dir_dirty = True
        return seg

    # ------------------------------------------------------------ durability

    async def flush(self) -> None:
        """Return once everything appended before this call is fsynced (group commit
        across logs, see sync.py); raise StorageError if it never will be."""
        fut, done = future_and_callback()
        self.when_durable(done)
        await fut

    def when_durable(
        self, done: Done, schedule_sync: bool = True, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        """done(None, None) once everything appended so far is on disk, or
        done(StorageError, None) if a sync failed first (with fsync=always the bytes it
        covered are then cut from the log: none of them was ever acknowledged).
        schedule_sync=False: the caller starts the sync round (SYNCER.start_now()).
        `loop`: the running loop, if the caller knows it (Syncer.request)."""
        target = self._next_offset
        if self._durable_offset >= target and not (self._dir_dirty and not self.closed):
            done(None, None)
            return
        self._durable_waiters.append((target, done))
        SYNCER.request(self, schedule_sync, loop)

    def take_unsynced(self) -> tuple[list[Segment], bool, int]:
        """For the syncer (sync.SyncedLog): the segments and directory entries to make durable, and the
        offset that will be durable once they are."""
        segs = list(self._unsynced.values())
        self._unsynced.clear()
        dir_dirty, self._dir_dirty = self._dir_dirty, False
        return segs, dir_dirty, self._next_offset

    def sync_failed(self, segs: list[Segment], dir_dirty: bool, error: OSError) -> None:
        """A sync round covering this log failed. With fsync=always nothing past the
        durable offset was acknowledged (answers wait for durability), so it is cut: what
        clients were told, what memory holds and what a restart replays stay the same.
        Otherwise the next round retries the same bytes (a crash may lose them anyway)."""
        for s in segs:
            if s.fd >= 0:
                self._unsynced[s.fd] = s
        self._dir_dirty |= dir_dirty
        if self.config.fsync == "always" and not self.closed:
            log.error(
                "%s: sync failed (%s): cutting offsets %d..%d, which were never acknowledged",
                self.directory,
                error.strerror or error,
                self._durable_offset,
                self._next_offset,
            )
            try:
                self._cut_back(self._durable_offset)
            except StorageError:
                pass  # logged; appends stay refused until the cut succeeds
        waiters, self._durable_waiters = self._durable_waiters, deque()
        failure = StorageError(error.errno or errno.EIO, f"{self.directory}: sync failed: {error.strerror or error}")
        for _, done in waiters:
            done(failure, None)

    def synced_to(self, offset: int) -> None:
        durable = self._durable_offset
        if offset > durable:
            durable = self._durable_offset = offset
        waiters = self._durable_waiters
        while waiters and waiters[0][0] <= durable:
            waiters.popleft()[1](None, None)

    def _cut_back(self, offset: int) -> None:
        """Remove every batch at or after `offset` (a batch boundary) from the files.

        If the disk refuses even that, the log refuses appends until a retry succeeds:
        nothing may follow bytes that are not meant to be there."""
        try:
            while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
                seg = self.segments.pop()
                self._bases.pop()
                self._unsynced.pop(seg.fd, None)
                seg.delete()
                self._dir_dirty = True
            seg = self.segments[-1]
            try:
                pos = seg.locate(offset) if offset < seg.next_offset else None
            except CorruptBatch as corrupt:  # (in bytes the recovery point spared: nothing may follow them)
                raise self._corrupt(corrupt) from None
            seg.truncate(seg.size if pos is None else pos)
            self._unsynced[seg.fd] = seg
            try:
                seg.fsync()  # the cut itself on disk now, not at the next append's sync
            except OSError as e:
                log.warning(
                    "%s: the cut at offset %d is not yet on disk (%s): the next sync covers it",
                    self.directory,
                    offset,
                    e.strerror or e,
                )
        except OSError as e:
            self._cut_pending = offset
            log.error(
                "%s: cutting the log back to offset %d failed (%s): appends refused until it succeeds",
                self.directory,
                offset,
                e.strerror or e,
            )
            raise StorageError(e.errno or errno.EIO, f"{self.directory}: offline: {e.strerror or e}") from e
        self._cut_pending = None
        self._next_offset = min(self._next_offset, offset)
        self.cuts += 1

    async def _interval_flusher(self) -> None:
        while True:
            await asyncio.sleep(self.config.fsync_interval_ms / 1000)
            try:
                await self.flush()
            except OSError as e:  # (a full or failing disk: said once a period, no traceback)
                log.warning("%s: background fsync failed: %s", self.directory, e)

    # ------------------------------------------------------------ reading

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def _corrupt(self, e: CorruptBatch) -> StorageError:
        """A reader met a batch whose offsets do not fit (a base offset flipped on disk in
        bytes the recovery point spared from the scan at open): nothing of it is served, and
        the log goes offline as if the open had found it. The recovery point goes, so the
        next open scans the file and names the batch."""
        if self.offline is None:
            self.offline = str(e)
            PartitionLog.offline_events += 1
            say_offline(self.directory, self.offline)
            try:
                remove_recovery_point(self.directory)
            except OSError as removing:
                log.warning("%s: cannot remove the recovery point: %s", self.directory, removing)
        return StorageError(errno.EIO, f"offline: {self.offline}")

    def bytes_after(self, offset: int) -> int:
        """Bytes stored from the batch holding `offset` to the log end, without reading them
        (a waiting Fetch checks its min_bytes with this on every append)."""
        total = 0
        found = False
        for seg in self.segments[self._segment_index(offset) :]:
            if found:
                total += seg.size
                continue
            try:
                pos = seg.locate(offset)
            except CorruptBatch as e:
                self._corrupt(e)
                return 0  # (offline now: the reader is answered its error)
            if pos is not None:
                found = True
                total += seg.size - pos
        return total

    def read(self, offset: int, max_bytes: int = 1024 * 1024) -> bytes:
        """Whole batches from the one holding `offset`, up to max_bytes (always at least one
        batch, as Kafka does, so a consumer can make progress past a large batch).
        Reads stay within one segment. b"" at the log end."""
        if self.offline is not None:
            raise StorageError(errno.EIO, f"offline: {self.offline}")
        if offset < self.log_start_offset or offset > self._next_offset:
            raise OffsetOutOfRange(f"offset {offset} outside [{self.log_start_offset}, {self._next_offset}]")
        i = self._segment_index(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            try:
                pos = seg.locate(offset)
            except CorruptBatch as e:
                raise self._corrupt(e) from None
            if pos is not None:
                data = self._read_from(seg, pos, max_bytes)
                if pos < seg.unchecked_end:
                    try:
                        seg.check_run(pos, data)
                    except CorruptBatch as e:
                        raise self._corrupt(e) from None
                return data
            i += 1  # offset falls in a gap after a compacted segment's last batch
        return b""

    def _read_from(self, seg: Segment, pos: int, max_bytes: int) -> bytes:
        want = min(max(max_bytes, 0), seg.size - pos)
        data = seg.pread(max(want, LOG_OVERHEAD), pos)
        first = int.from_bytes(data[8:12], "big") + LOG_OVERHEAD
        if first >= len(data):
            return data if first == len(data) else seg.pread(first, pos)
        # cut back to the last whole batch
        end = 0
        while end + LOG_OVERHEAD <= len(data):
            size = int.from_bytes(data[end + 8 : end + 12], "big") + LOG_OVERHEAD
            if end + size > len(data):
                break
            end += size
        return data[:end]

    def batches(
        self, from_offset: int = 0, *, chunk_bytes: int = 4 * 1024 * 1024
    ) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, batch bytes) of every batch holding offsets >= from_offset, in order.

        Snapshot of the end at call time; for replay at startup and for tools."""
        from_offset = max(from_offset, self.log_start_offset)
        i = self._segment_index(from_offset)
        for seg in self.segments[i:]:
            pos = seg.locate(from_offset) if seg.base_offset < from_offset else 0
            if pos is not None:
                yield from seg.iter_batches(pos, chunk_bytes=chunk_bytes)

    def chunks(self, from_offset: int = 0, *, chunk_bytes: int = 8 * 1024 * 1024) -> Iterator[bytes]:
        """Like batches(), as big runs of whole batches (cut at positions of the sparse index,
        which are batch starts): bulk readers parse these without a Python step per batch."""
        for _, _, chunk in self.located_chunks(from_offset, chunk_bytes=chunk_bytes):
            yield chunk

    def located_chunks(
        self, from_offset: int = 0, *, chunk_bytes: int = 8 * 1024 * 1024
    ) -> Iterator[tuple[Path, int, bytes]]:
        """chunks(), each with its segment file and the position it starts at."""
        from_offset = max(from_offset, self.log_start_offset)
        i = self._segment_index(from_offset)
        for seg in self.segments[i:]:
            pos = seg.locate(from_offset) if seg.base_offset < from_offset else 0
            if pos is None:
                continue
            end, cuts = seg.size, seg.idx_positions
            while pos < end:
                stop = end
                if end - pos > chunk_bytes:
                    j = bisect_right(cuts, pos + chunk_bytes) - 1
                    if j >= 0 and cuts[j] > pos:
                        stop = cuts[j]
                    elif j + 1 < len(cuts):  # one batch bigger than a chunk
                        stop = cuts[j + 1]
                yield seg.path, pos, seg.pread(stop - pos, pos)
                pos = stop

    def records(self, from_offset: int = 0) -> Iterator[Record]:
        from_offset = max(from_offset, self.log_start_offset)
        for h, data in self.batches(from_offset):
            for r in iter_batch_records(data, h):
                if r.offset >= from_offset:
                    yield r

    # ------------------------------------------------------------ timestamps

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ts (ListOffsets);
        None if there is none. StorageError if the log is (or, finding a batch that does
        not fit, goes) offline."""
        if self.offline is not None:
            raise StorageError(errno.EIO, f"offline: {self.offline}")
        for seg in self.segments:
            try:
                found = seg.locate_timestamp(ts)
            except CorruptBatch as e:
                raise self._corrupt(e) from None
            if found is None:
                continue
            pos, h = found
            for r in iter_batch_records(seg.pread(h.size, pos), h):
                if r.timestamp >= ts and r.offset >= self.log_start_offset:
                    return r.offset, r.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp.
        StorageError as offset_for_timestamp()."""
        if self.offline is not None:
            raise StorageError(errno.EIO, f"offline: {self.offline}")
        best = None
        for seg in self.segments:
            if seg.max_timestamp != NO_TIMESTAMP and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        data = best.pread(LOG_OVERHEAD, best.max_timestamp_pos)
        size = int.from_bytes(data[8:12], "big") + LOG_OVERHEAD
        data = best.pread(size, best.max_timestamp_pos)
        h = parse_header(data, verify_crc=False)
        if not best.base_offset <= h.base_offset <= h.last_offset < best.next_offset:
            raise self._corrupt(
                best.misplaced(
                    best.max_timestamp_pos,
                    h.size,
                    (
                        f"offsets {h.base_offset}-{h.last_offset} outside the segment's {best.base_offset}-"
                        f"{best.next_offset - 1}"
                    ),
                )
            )
        for r in iter_batch_records(data, h):
            if r.timestamp == h.max_timestamp:
                return r.offset, r.timestamp
        return h.last_offset, h.max_timestamp

    # ------------------------------------------------------------ retention

    async def apply_retention(self, now: int | None = None) -> int:
        """Delete whole old segments by retention_ms / retention_bytes; returns how many."""
        now = now_ms() if now is None else now
        cfg = self.config
        async with self._maintenance_lock:
            doomed = []
            total = self.size_bytes
            for seg in self.segments[:-1]:  # never the active segment
                old = (
                    cfg.retention_ms is not None
                    and seg.max_timestamp != NO_TIMESTAMP
                    and now - seg.max_timestamp > cfg.retention_ms
                ) or seg.size == 0  # (compacted away)
                big = cfg.retention_bytes is not None and total - seg.size >= cfg.retention_bytes
                if not (old or big):
                    break
                doomed.append(seg)
                total -= seg.size
            if doomed:
                await self._drop_segments(len(doomed), "retention")
            return len(doomed)

    async def delete_records_before(self, offset: int) -> None:
        """Advance the log start offset (DeleteRecords); whole segments below it go."""
        async with self._maintenance_lock:
            if offset > self._next_offset:
                raise OffsetOutOfRange(f"offset {offset} is past the log end {self._next_offset}")
            if offset <= self.log_start_offset:
                return
            await self._write_log_start(offset)  # (answered once durable: a crash must not bring them back)
            self.log_start_offset = offset
            n = 0
            while n < len(self.segments) - 1 and self.segments[n + 1].base_offset <= offset:
                n += 1
            if n:
                await self._drop_segments(n, "delete_records")

    async def _drop_segments(self, n: int, why: str) -> None:
        doomed, self.segments = self.segments[:n], self.segments[n:]
        self._bases = self._bases[n:]
        new_start = max(self.log_start_offset, self.segments[0].base_offset)
        for seg in doomed:
            self._unsynced.pop(seg.fd, None)
            seg.delete()
        log.info(
            "%s: %s deleted %d segment(s), log start %d -> %d",
            self.directory,
            why,
            len(doomed),
            self.log_start_offset,
            new_start,
        )
        self.log_start_offset = new_start
        await self._write_log_start(new_start)  # (its directory fsync covers the deletions too)

    async def _write_log_start(self, offset: int) -> None:
        await asyncio.get_running_loop().run_in_executor(
            None, replace_file, self.directory, LOG_START_FILE, f"{offset}\n".encode()
        )

    # ------------------------------------------------------------ compaction

    def dirty_ratio(self) -> float:
        closed = self.segments[:-1]
        total = sum(s.size for s in closed)
        if not total:
            return 0.0
        dirty = sum(s.size for s in closed if s.next_offset > self._dirty_from)
        return dirty / total

    def _cleanable(self, now: int) -> list[Segment]:
        """The closed segments compaction may rewrite: those before the first holding a
        record younger than min.compaction.lag.ms (Kafka's first uncleanable offset)."""
        lag = self.config.min_compaction_lag_ms
        closed = self.segments[:-1]
        if lag <= 0:
            return closed
        n = 0
        while n < len(closed) and closed[n].max_timestamp != NO_TIMESTAMP and now - closed[n].max_timestamp >= lag:
            n += 1
        return closed[:n]

    def needs_compaction(self, now: int | None = None) -> bool:
        """min.cleanable.dirty.ratio reached, or a dirty record older than max.compaction.lag.ms."""
        if self.dirty_ratio() >= self.config.min_cleanable_dirty_ratio:
            return True
        lag = self.config.max_compaction_lag_ms
        if lag is None:
            return False
        now = now_ms() if now is None else now
        return any(
            s.next_offset > self._dirty_from and s.max_timestamp != NO_TIMESTAMP and now - s.max_timestamp >= lag
            for s in self.segments[:-1]
        )

    async def compact(self, now: int | None = None) -> compaction.Stats | None:
        """Keep only the latest record per key in the closed segments (offsets preserved).

        The rewrite runs in a worker thread; only the final swap runs on the loop."""
        now = now_ms() if now is None else now
        async with self._maintenance_lock:
            await self.flush()  # the closed segments must be on disk before we replace them
            closed = self._cleanable(now)
            if not closed:
                return None
            newer = [(s, s.size) for s in self.segments[len(closed) :]]
            loop = asyncio.get_running_loop()
            # The rewritten segments keep their names: the recovery point would describe
            # bytes that are no longer there. It goes before the swap, and comes back after.
            await loop.run_in_executor(None, remove_recovery_point, self.directory)
            plan = await loop.run_in_executor(
                None,
                compaction.rewrite,
                self.directory,
                closed,
                newer,
                now - self.config.delete_retention_ms,
                self.config.segment_bytes,
                self.config.index_interval_bytes,
            )
            n = len(closed)
            assert self.segments[:n] == closed
            self.segments[:n] = plan.segments
            self._bases = [s.base_offset for s in self.segments]
            compaction.install(self.directory, closed, plan)
            self._dirty_from = newer[0][0].base_offset
            log.info("%s: compaction %s", self.directory, plan.stats)
            await self._checkpoint_locked()
            return plan.stats

    async def _checkpointer(self) -> None:
        interval = self.config.checkpoint_interval_ms
        assert interval is not None  # (started only with one)
        while True:
            await asyncio.sleep(interval / 1000)
            if self._checkpointed_offset == self._next_offset:
                continue
            try:
                await self.checkpoint()
            except OSError as e:
                log.warning("%s: writing the recovery point failed (the next open scans more): %s", self.directory, e)

    async def _maintainer(self) -> None:
        """Kafka's two schedules: the log cleaner looks at a compacted log again every
        log.cleaner.backoff.ms (LogCleaner's backoff when there is nothing to clean), and
        retention runs every log.retention.check.interval.ms (compact,delete: both). A new
        backoff (cleaner_reconfigured) has the cleaner look at once, then at the new period."""
        loop = asyncio.get_running_loop()
        next_clean = loop.time() + self.config.cleaner_backoff_ms / 1000
        next_retention = loop.time() + (self.config.maintenance_interval_ms or 30_000) / 1000
        while True:
            self._maintainer_wake = wake = loop.create_future()
            await asyncio.wait((wake,), timeout=max(0.0, min(next_clean, next_retention) - loop.time()))
            now = loop.time()
            if self._clean_now:
                self._clean_now, next_clean = False, now
            clean, retain = now >= next_clean, now >= next_retention
            if clean:  # (at least 1 ms: a backoff of 0 would not let the loop sleep at all)
                next_clean = now + max(self.config.cleaner_backoff_ms, 1) / 1000
            if retain:
                next_retention = now + (self.config.maintenance_interval_ms or 30_000) / 1000
            if self.offline is not None:
                continue  # nothing is rewritten before a repair has looked at it
            try:
                if clean and self.config.compact and self.needs_compaction():
                    await self.compact()
                if retain and self.config.delete:
                    await self.apply_retention()
            except OSError as e:
                log.warning("%s: log maintenance failed: %s", self.directory, e)
            except Exception:
                log.exception("%s: log maintenance failed", self.directory)

    def cleaner_reconfigured(self) -> None:
        """log.cleaner.backoff.ms changed: look at the log now, then at the new period (Kafka
        restarts its cleaner threads on a reconfiguration)."""
        self._clean_now = True
        if self._maintainer_wake is not None and not self._maintainer_wake.done():
            self._maintainer_wake.set_result(None)

    # ------------------------------------------------------------ closing

    async def close(self) -> None:
        if self.closed:
            return
        for t in self._background:
            t.cancel()
        for t in self._background:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        async with self._maintenance_lock:
            await self.flush()
            self.closed = True
            try:
                if self.offline is not None:
                    raise OSError("offline: the next open scans it again")
                await asyncio.get_running_loop().run_in_executor(None, self._write_checkpoint, self._checkpoint_bytes())
            except OSError as e:
                log.warning("%s: no recovery point written (%r): the next open scans more", self.directory, e)
            for seg in self.segments:
                seg.close()

    def discard_sync(self) -> None:
        """Close at once a log nothing will be kept of (a topic whose creation failed)."""
        for t in self._background:
            t.cancel()
        self.close_sync()

    def close_sync(self) -> None:
        """Close without fsync (tools, tests, and simulating a crash)."""
        self.closed = True
        for seg in self.segments:
            seg.close()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.directory}, [{self.log_start_offset}, {self._next_offset}),"
            f" {len(self.segments)} segments)"
        )
