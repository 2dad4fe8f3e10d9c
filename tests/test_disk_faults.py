"""A failing disk, end to end over real sockets: writes get Kafka's errors, reads keep
working, nothing half-applied shows, and writes succeed again once the disk recovers,
without a restart. What a client was told, what it reads and what a restart loads agree.

A full disk is a small tmpfs (we run as root); a failing sync is the file-descriptor
limit, lowered on the running server so that its sync round of many files cannot
duplicate their descriptors.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys

import pytest

from tests.support.wire_client import WireClient
from tests.support.process import ROOT, create_topics, wait_for
from protocol.consumer_protocol import write_assignment
from tests.support.consumer_groups import hb
from tests.support.data_plane import batch, produce
from tests.support.groups_wire import (
    COMMIT,
    DESCRIBE,
    FETCH,
    HEARTBEAT,
    JOIN,
    LEAVE,
    LIST,
    SYNC,
    cls,
    commit_body,
    form,
    hb_body,
    join_body,
    sync_body,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.process,
]  # server processes started, killed and restarted, or filled to their limits

NOT_COORDINATOR, KAFKA_STORAGE_ERROR, MEMBER_ID_REQUIRED = 16, 56, 79


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount) -> str:
    """Take every free byte of the filesystem; returns the file that holds them."""
    path = os.path.join(mount, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (1 << 16, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return path


async def fetch(conn, group, partitions=(0, 1)):
    r = await conn.request(
        FETCH,
        5,
        cls(FETCH, 5)(
            group_id=group, topics=(cls(FETCH, 5, "OffsetFetchRequestTopic")(name="t", partition_indexes=partitions),)
        ),
    )
    return [p.committed_offset for p in r.topics[0].partitions]


async def commit(conn, group, member, gen, offset):
    r = await conn.request(COMMIT, 8, commit_body(8, group, member, gen, [("t", 0, offset), ("t", 1, offset)]))
    return [p.error_code for p in r.topics[0].partitions]


async def describe(conn, group):
    r = await conn.request(DESCRIBE, 5, cls(DESCRIBE, 5)(groups=(group,), include_authorized_operations=False))
    g = r.groups[0]
    return g.group_state, [(m.member_id, m.member_assignment) for m in g.members]


async def leave(conn, group, member):
    M = cls(LEAVE, 5, "MemberIdentity")
    r = await conn.request(
        LEAVE, 5, cls(LEAVE, 5)(group_id=group, members=(M(member_id=member, group_instance_id=None, reason=None),))
    )
    return r.error_code


async def test_full_disk(server_factory, small_disk):
    server = server_factory("--offsets-partitions", "3", data_dir=small_disk)  # (its log beside, not on it)
    conn = await WireClient("disk").connect("127.0.0.1", server.port)
    await conn.create_topics("t", partitions=2)
    member, gen = await form(conn, "g1")
    assert await commit(conn, "g1", member, gen, 5) == [0, 0]
    static = await conn.request(JOIN, 5, join_body(5, "g3", instance="i-1"))
    await conn.request(SYNC, 3, sync_body(3, "g3", static.member_id, 1, [(static.member_id, b"s")]))
    classic = await conn.request(JOIN, 3, join_body(3, "g4"))  # a classic group a KIP-848 member will join
    await conn.request(
        SYNC, 3, sync_body(3, "g4", classic.member_id, 1, [(classic.member_id, write_assignment(0, [("t", [0, 1])]))])
    )
    # A JoinGroup that makes a group writes it (Kafka's empty GroupMetadata): g7 is made while
    # there is room. It lives in g1's __consumer_offsets partition (Java's hash), whose file
    # the commits below fill to its last byte, so that its assignment cannot be stored.
    assert (await conn.request(JOIN, 5, join_body(5, "g7"))).error_code == MEMBER_ID_REQUIRED
    filler = fill(small_disk)

    # Writes get Kafka's errors, and nothing of them shows. (A file's last page may still
    # take a few small appends.)
    committed = 5
    for offset in range(6, 200):
        errors = await commit(conn, "g1", member, gen, offset)
        if errors != [0, 0]:
            break
        committed = offset
    assert errors == [NOT_COORDINATOR, NOT_COORDINATOR]
    assert await fetch(conn, "g1") == [committed, committed]
    for _ in range(200):
        error, _ = await produce(conn, "t", batch(value=b"v" * 500), acks=1)
        if error:
            break
    assert error == KAFKA_STORAGE_ERROR
    assert await leave(conn, "g1", member) == NOT_COORDINATOR
    assert await describe(conn, "g1") == ("Stable", [(member, b"assignment")])  # the member is still in
    first = await conn.request(JOIN, 5, join_body(5, "g7"))
    joined = await conn.request(JOIN, 5, join_body(5, "g7", first.member_id))
    assert joined.error_code == 0  # a join phase of a group already made writes nothing
    synced = await conn.request(
        SYNC, 3, sync_body(3, "g7", joined.member_id, joined.generation_id, [(joined.member_id, b"a")])
    )
    assert synced.error_code == NOT_COORDINATOR  # the assignment could not be stored: rejoin
    assert (await describe(conn, "g7"))[0] == "PreparingRebalance"
    # A static member restarting cannot have its new member id stored: it keeps the old one.
    static_id = static.member_id
    for _ in range(100):  # (its partition's file may take a few more records in its last page)
        rejoin = await conn.request(JOIN, 5, join_body(5, "g3", instance="i-1"))
        if rejoin.error_code:
            break
        static_id = rejoin.member_id
    assert (rejoin.error_code, rejoin.member_id) == (NOT_COORDINATOR, "")
    assert await describe(conn, "g3") == ("Stable", [(static_id, b"s")])
    assert (await conn.request(HEARTBEAT, 3, hb_body(3, "g3", static_id, 1))).error_code == 0
    # A consumer-protocol member cannot have the upgrade of a classic group written: the
    # group stays the classic group it is on disk, its member carries on.
    upgrade = await conn.request(68, 1, hb("g4", "kip848", 0, ["t"]))
    assert upgrade.error_code == NOT_COORDINATOR
    assert (await conn.request(HEARTBEAT, 3, hb_body(3, "g4", classic.member_id, 1))).error_code == 0
    # Reads keep working.
    assert (await conn.request(HEARTBEAT, 3, hb_body(3, "g1", member, gen))).error_code == 0
    listed = await conn.request(LIST, 4, cls(LIST, 4)(states_filter=()))
    assert {g.group_id for g in listed.groups} == {"g1", "g3", "g4", "g7"}
    assert {g.group_id: g.protocol_type for g in listed.groups}["g4"] == "consumer"
    assert {g.group_id: g.group_state for g in listed.groups}["g4"] == "Stable"

    os.unlink(filler)  # space returns: writes work again, no restart
    assert await commit(conn, "g1", member, gen, 7) == [0, 0]
    assert (await produce(conn, "t", batch(), acks=-1))[0] == 0
    assert await leave(conn, "g1", member) == 0
    assert (await conn.request(68, 1, hb("g4", "kip848", 0, ["t"]))).error_code == 0  # now it upgrades
    await conn.close()
    server.restart(signal.SIGKILL)
    conn = await WireClient("disk").connect("127.0.0.1", server.port)
    assert await fetch(conn, "g1") == [7, 7]
    assert await describe(conn, "g1") == ("Empty", [])
    await conn.close()
    assert "Traceback" not in server.log_text()


async def test_failed_syncs_agree_with_answers_and_restart(server_factory):
    """Commits of many groups share one sync round (a syncfs in a worker thread, which
    duplicates the files' descriptors); at the descriptor limit that round fails. Each
    commit's answer, the live OffsetFetch and the OffsetFetch after a crash agree."""
    server = server_factory()
    conn = await WireClient("fd").connect("127.0.0.1", server.port)
    await conn.create_topics("t", partitions=2)
    groups = [f"group-{i}" for i in range(24)]  # spread over many partitions of __consumer_offsets
    for g in groups:
        assert await commit(conn, g, "", -1, 1) == [0, 0]
    pid = server.proc.pid
    limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    open_fds = len(os.listdir(f"/proc/{pid}/fd"))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_fds, limits[1]))
    try:
        answers = await _commit_all(conn, groups, 2)
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
    assert set(answers.values()) <= {0, NOT_COORDINATOR}
    assert NOT_COORDINATOR in answers.values(), "the round did not fail: nothing was tested"
    expected = {g: [2, 2] if answers[g] == 0 else [1, 1] for g in groups}
    assert {g: await fetch(conn, g) for g in groups} == expected
    await conn.close()
    server.restart(signal.SIGKILL)
    conn = await WireClient("fd").connect("127.0.0.1", server.port)
    assert {g: await fetch(conn, g) for g in groups} == expected
    # And the log takes commits again.
    assert await _commit_all(conn, groups, 3) == {g: 0 for g in groups}
    await conn.close()
    assert "Traceback" not in server.log_text()


async def _commit_all(conn, groups, offset) -> dict[str, int]:
    """One commit per group, sent in one write (one event-loop iteration, one sync round)."""
    futures = conn.send_many(
        [(COMMIT, 8, commit_body(8, g, "", -1, [("t", 0, offset), ("t", 1, offset)])) for g in groups]
    )
    answers = {}
    for g, fut in zip(groups, futures):
        errors = {p.error_code for p in (await fut).topics[0].partitions}
        assert len(errors) == 1, errors  # a commit is all or nothing
        answers[g] = errors.pop()
    return answers


def test_full_disk_with_kafka_python(server_factory, small_disk):
    """A real consumer on a full disk: its commits fail with NOT_COORDINATOR (which Kafka's
    clients take as 'look the coordinator up again'), what it reads back is its last
    stored commit, and once space returns it commits again, without a restart."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import NotCoordinatorError
    from kafka.structs import OffsetAndMetadata

    server = server_factory("--offsets-partitions", "3", data_dir=small_disk)
    create_topics(server.port, "t", partitions=1)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    for i in range(5):
        producer.send("t", b"m%d" % i, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        group_id="kp",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10_000,
    )
    tp = TopicPartition("t", 0)
    # Assigned by hand: a subscribed kafka-python 3.0 rejoins once soon after its first
    # generation, and a commit sent while it does fails in the client (RebalanceInProgress)
    # before the server is asked. The group protocol on a full disk is tested over raw frames.
    consumer.assign([tp])
    try:
        wait_for(lambda: consumer.poll(timeout_ms=100) or True, what="a first poll")
        consumer.commit({tp: OffsetAndMetadata(1, "", -1)})
        filler = fill(small_disk)
        outcomes, stored = [], 1
        for offset in range(2, 100):  # (a file's last page may take a few more)
            consumer.commit_async({tp: OffsetAndMetadata(offset, "", -1)}, lambda _, result: outcomes.append(result))
            wait_for(
                lambda offset=offset: consumer.poll(timeout_ms=10) is not None and len(outcomes) == offset - 1,
                what="the commit's answer",
            )
            if isinstance(outcomes[-1], Exception):
                break
            stored = offset
        assert isinstance(outcomes[-1], NotCoordinatorError)
        assert consumer.committed(tp) == stored
        os.unlink(filler)
        consumer.commit({tp: OffsetAndMetadata(42, "", -1)})
        assert consumer.committed(tp) == 42
    finally:
        consumer.close()


# corruption: only the damaged partition stops -------------------------------------------


def _flip(path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x10
    path.write_bytes(data)


def _offsets_segment(server, group: str):
    from coordinator.log.offsets import partition_for

    directory = server.data_dir / f"__consumer_offsets-{partition_for(group)}"
    return directory, next(directory.glob("*.log"))


@pytest.mark.parametrize("where", ["before the recovery point", "after it", "in a length field before it"])
async def test_a_flipped_bit_takes_only_its_partition_offline(server, where):
    """Every batch is CRC-checked at startup, those the recovery point covers too: a bad
    one takes its partition offline (its groups answered NOT_COORDINATOR, FindCoordinator
    COORDINATOR_NOT_AVAILABLE), with one log line saying where and how to repair it; the
    other groups are served, and never an offset nobody committed. The repair tool removes
    the bad batch and the partition comes back with every other one."""
    from tests.support.groups_wire import cls as req

    conn = await WireClient("bits").connect("127.0.0.1", server.port)
    await conn.create_topics("t", partitions=2)
    for offset in range(1, 6):
        assert await commit(conn, "victim", "", -1, offset) == [0, 0]
    assert await commit(conn, "bystander", "", -1, 7) == [0, 0]
    await conn.close()
    directory, segment = _offsets_segment(server, "victim")
    assert _offsets_segment(server, "bystander")[0] != directory
    server.stop(signal.SIGKILL if where == "after it" else signal.SIGTERM)
    if where == "after it":
        (directory / "recovery-point").unlink(missing_ok=True)
    size = segment.stat().st_size
    if where == "in a length field before it":  # outside the CRC: only the framing can tell
        from protocol.record_batch import iter_batches

        batches = list(iter_batches(segment.read_bytes()))
        _flip(segment, batches[len(batches) // 2][0] + 10)
    else:
        _flip(segment, size // 2)  # inside a batch in the middle: valid batches follow
    server.start()
    conn = await WireClient("bits").connect("127.0.0.1", server.port)
    assert await fetch(conn, "bystander") == [7, 7]
    r = await conn.request(FETCH, 5, cls(FETCH, 5)(group_id="victim", topics=None))
    assert r.error_code == NOT_COORDINATOR
    assert await commit(conn, "victim", "", -1, 9) == [NOT_COORDINATOR, NOT_COORDINATOR]
    found = await conn.request(10, 1, req(10, 1)(key="victim", key_type=0))
    assert found.error_code == 15  # COORDINATOR_NOT_AVAILABLE
    await conn.close()
    log = server.log_text()
    assert "partition offline" in log and segment.name in log and "Traceback" not in log
    server.stop()
    assert segment.stat().st_size == size  # nothing was cut while offline

    done = subprocess.run(
        [sys.executable, "-m", "coordinator.log", "repair", str(directory)], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0 and "bytes cut" in done.stdout, done.stderr
    server.start()
    conn = await WireClient("bits").connect("127.0.0.1", server.port)
    victim = await fetch(conn, "victim")
    assert victim[0] == victim[1] and 1 <= victim[0] <= 5  # a committed offset, cut back, never garbage
    assert await commit(conn, "victim", "", -1, 9) == [0, 0]
    await conn.close()
