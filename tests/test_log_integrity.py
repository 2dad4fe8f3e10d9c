"""A batch's base offset lies outside its CRC: a bit flipped there leaves a valid-looking
batch at the wrong offsets. The log blames that batch (not the valid one after it), with or
without a recovery point sparing it from the scan at open, never serves it, and repair
removes it and keeps every other batch."""

from __future__ import annotations

import pytest

import signal
import subprocess
import sys

from coordinator.log.__main__ import main as log_tool
from coordinator.log.config import LogConfig
from coordinator.log.offsets import partition_for
from coordinator.log.partition import CHECKPOINT_FILE, PartitionLog, StorageError
from protocol.record_batch import iter_batches
from tests.support.data_plane import FETCH, LIST_OFFSETS, batch, cls, create, fetch_body, produce
from tests.support.groups_wire import COMMIT, FETCH as OFFSET_FETCH, cls as group_cls, commit_body
from tests.support.process import ROOT
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.slow, pytest.mark.process]  # servers killed (SIGKILL) mid-write

UP, DOWN = "up", "down"
TS = 1_700_000_000_000
CFG = LogConfig(segment_bytes=1000, index_interval_bytes=100, maintenance_interval_ms=None)
NOT_COORDINATOR, KAFKA_STORAGE_ERROR = 16, 56


def open_log(path) -> PartitionLog:
    return PartitionLog.open_sync(path, CFG)


def fill(log, n) -> None:
    for i in range(n):
        log.append_records([(b"k%d" % i, b"v%d-" % i + b"x" * 20)], timestamp_ms=TS + i)


def all_offsets(log) -> list[int]:
    return [r.offset for r in log.records(0)]


def flip_base(path, pos: int, direction: str, base: int) -> None:
    """Flip one bit of the base offset of the batch at `pos`: bit 34 (upwards, the
    17,179,869,184 jump), or the lowest bit that is set (downwards)."""
    bit = 34 if direction == UP else (base & -base).bit_length() - 1
    data = bytearray(path.read_bytes())
    data[pos + 7 - bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(data)


def batches_of(path):
    return [(pos, h) for pos, h in iter_batches(path.read_bytes(), verify_crc=False)]


def build(tmp_path, n=40):
    """A log of n one-record batches over several segments, closed cleanly (recovery point)."""
    log = open_log(tmp_path)
    fill(log, n)
    assert len(log.segments) >= 3
    log.close_sync()
    log = open_log(tmp_path)  # (a clean open writes the recovery point)
    log.close_sync()
    assert (tmp_path / CHECKPOINT_FILE).exists()
    return sorted(tmp_path.glob("*.log"))


def victim(segments, which: str):
    """(segment, position, header) of the batch to damage: one in the middle of the second
    segment, or its last one (whose offsets the third segment's name bounds)."""
    seg = segments[1]
    found = batches_of(seg)
    pos, h = found[len(found) // 2] if which == "middle" else found[-1]
    return seg, pos, h


@pytest.mark.parametrize("recovery_point", [False, True], ids=["scanned", "under-recovery-point"])
@pytest.mark.parametrize("which", ["middle", "last-of-segment"])
@pytest.mark.parametrize("direction", [UP, DOWN])
def test_the_flipped_batch_is_blamed_and_repair_keeps_every_other(
    tmp_path, caplog, capsys, direction, which, recovery_point
):
    segments = build(tmp_path)
    seg, pos, h = victim(segments, which)
    if not h.base_offset and direction == DOWN:
        pytest.skip("base offset 0 has no bit to clear")
    flip_base(seg, pos, direction, h.base_offset)
    if not recovery_point:
        (tmp_path / CHECKPOINT_FILE).unlink()
    with caplog.at_level("ERROR"):
        log = open_log(tmp_path)
        if recovery_point and log.offline is None:
            # The scan at open trusted the bytes the recovery point covers: the reader
            # that reaches the batch finds it does not fit, and nothing of it is served.
            served = []
            with pytest.raises(StorageError):
                for offset in range(40):
                    data = log.read(offset, 1 << 20)
                    served += [b.base_offset for _, b in iter_batches(data)]
            assert all(0 <= o < 40 for o in served)
    assert log.offline is not None, "the damage went unnoticed"
    assert f"{seg.name}" in log.offline and f"bytes {pos}-{pos + h.size}" in log.offline, log.offline
    assert f"python -m coordinator.log repair {tmp_path}" in caplog.text
    with pytest.raises(StorageError):
        log.read(h.base_offset)
    log.close_sync()
    assert log_tool(["repair", str(tmp_path)]) == 0
    capsys.readouterr()
    log = open_log(tmp_path)
    assert log.offline is None
    assert all_offsets(log) == [o for o in range(40) if o != h.base_offset]
    assert log.log_end_offset == 40
    log.close_sync()


def test_a_lookup_by_timestamp_never_answers_a_bogus_offset(tmp_path):
    segments = build(tmp_path)
    seg, pos, h = victim(segments, "middle")
    flip_base(seg, pos, UP, h.base_offset)
    log = open_log(tmp_path)
    assert log.offline is None  # (under the recovery point: not scanned)
    with pytest.raises(StorageError):
        log.offset_for_timestamp(h.max_timestamp)
    assert log.offline is not None and not (tmp_path / CHECKPOINT_FILE).exists()
    with pytest.raises(StorageError):
        log.read(0)
    log.close_sync()
    again = open_log(tmp_path)  # scanned whole now: named at open
    assert again.offline is not None and f"bytes {pos}-{pos + h.size}" in again.offline
    again.close_sync()


# end to end: a data topic and __consumer_offsets, over the wire --------------------------


def _damage(server, directory, index: int, recovery_point: bool):
    """Stop the server (SIGTERM leaves a recovery point; SIGKILL and no recovery point
    leave every byte to the scan) and flip bit 34 of the base offset of batch `index`."""
    server.stop(signal.SIGTERM if recovery_point else signal.SIGKILL)
    if not recovery_point:
        (directory / CHECKPOINT_FILE).unlink(missing_ok=True)
    segment = next(directory.glob("*.log"))
    pos, h = batches_of(segment)[index]
    flip_base(segment, pos, UP, h.base_offset)
    return segment, pos, h


def _kcoord(server, *args):
    return subprocess.run(
        [sys.executable, "-m", "coordinator.admin", "--bootstrap-server", server.bootstrap, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _repair(directory):
    done = subprocess.run(
        [sys.executable, "-m", "coordinator.log", "repair", str(directory)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _says_how_to_repair(server, directory, segment, pos, h):
    lines = [line for line in server.log_text().splitlines() if "partition offline" in line]
    assert len(lines) == 1, lines
    assert f"{segment} bytes {pos}-{pos + h.size}" in lines[0]
    assert f"`python -m coordinator.log repair {directory}`" in lines[0]
    assert "Traceback" not in server.log_text()


@pytest.mark.parametrize("recovery_point", [False, True], ids=["scanned", "under-recovery-point"])
async def test_a_data_topic_with_a_flipped_base_offset(server, recovery_point):
    conn = await WireClient("flip").connect("127.0.0.1", server.port)
    assert await create(conn, "t", partitions=1) == 0
    for _ in range(10):
        assert (await produce(conn, "t", batch(3)))[0] == 0
    await conn.close()
    directory = server.data_dir / "t-0"
    segment, pos, h = _damage(server, directory, 5, recovery_point)
    server.start()

    async def fetch(offset):
        r = await conn.request(FETCH, 11, fetch_body("t", offset))
        p = r.responses[0].partitions[0]
        return p.error_code, [b.base_offset for _, b in iter_batches(bytes(p.records or b""))]

    async def latest():
        P, T = cls(LIST_OFFSETS, 7, "ListOffsetsPartition"), cls(LIST_OFFSETS, 7, "ListOffsetsTopic")
        r = await conn.request(
            LIST_OFFSETS,
            7,
            cls(LIST_OFFSETS, 7)(
                replica_id=-1,
                isolation_level=0,
                topics=(T(name="t", partitions=(P(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),),
            ),
        )
        p = r.topics[0].partitions[0]
        return p.error_code, p.offset

    conn = await WireClient("flip").connect("127.0.0.1", server.port)
    assert await fetch(0) == (KAFKA_STORAGE_ERROR, [])  # and not a batch of it served
    assert await latest() == (KAFKA_STORAGE_ERROR, -1)
    await conn.close()
    _says_how_to_repair(server, directory, segment, pos, h)
    described = _kcoord(server, "topics", "describe", "t", "--output", "json")
    assert described.returncode == 0, described.stderr
    assert '"OFFLINE": "1"' in described.stdout
    assert f"python -m coordinator.log repair {directory.resolve()}" in described.stderr

    server.stop()
    _repair(directory)
    server.start()
    conn = await WireClient("flip").connect("127.0.0.1", server.port)
    served, offset = [], 0
    while offset < 30:
        error, bases = await fetch(offset)
        assert error == 0 and bases
        served += bases
        offset = bases[-1] + 3
    assert served == [b for b in range(0, 30, 3) if b != h.base_offset]  # every other batch kept
    assert await latest() == (0, 30)
    await conn.close()


@pytest.mark.parametrize("recovery_point", [False, True], ids=["scanned", "under-recovery-point"])
async def test_consumer_offsets_with_a_flipped_base_offset(server, recovery_point):
    async def commit(offset):
        r = await conn.request(COMMIT, 8, commit_body(8, "victim", "", -1, [("t", 0, offset), ("t", 1, offset)]))
        return [p.error_code for p in r.topics[0].partitions]

    async def fetch():
        r = await conn.request(
            OFFSET_FETCH,
            5,
            group_cls(OFFSET_FETCH, 5)(
                group_id="victim",
                topics=(group_cls(OFFSET_FETCH, 5, "OffsetFetchRequestTopic")(name="t", partition_indexes=(0, 1)),),
            ),
        )
        return r.error_code, [p.committed_offset for p in r.topics[0].partitions]

    conn = await WireClient("flip").connect("127.0.0.1", server.port)
    await conn.create_topics("t", partitions=2)
    for offset in range(1, 6):  # one batch each
        assert await commit(offset) == [0, 0]
    await conn.close()
    directory = server.data_dir / f"__consumer_offsets-{partition_for('victim')}"
    segment, pos, h = _damage(server, directory, 2, recovery_point)
    server.start()
    conn = await WireClient("flip").connect("127.0.0.1", server.port)
    r = await conn.request(OFFSET_FETCH, 5, group_cls(OFFSET_FETCH, 5)(group_id="victim", topics=None))
    assert r.error_code == NOT_COORDINATOR  # never a committed offset made up
    await conn.close()
    _says_how_to_repair(server, directory, segment, pos, h)
    described = _kcoord(server, "topics", "describe", "__consumer_offsets", "--output", "json")
    assert f"python -m coordinator.log repair {directory.resolve()}" in described.stderr, described.stderr

    server.stop()
    _repair(directory)
    server.start()
    conn = await WireClient("flip").connect("127.0.0.1", server.port)
    assert await fetch() == (0, [5, 5])  # the commits after the bad batch are all kept
    await conn.close()
