"""Hostile clients and bad input (issue 16): memory stays bounded by configuration, bad
input gets a Kafka error or a clean close with a WARNING (never a traceback), and faults
(no file descriptor left, racing admin requests) are answered, over real sockets.

Memory is read from /proc of the server process, against generous bounds; nothing here
asserts on time (socket timeouts only keep a broken server from hanging the suite).
"""

from __future__ import annotations

import pytest

import datetime
import resource
import socket
import struct
import time
import uuid
from pathlib import Path

from coordinator.apis import build
from protocol.framing import frame
from protocol.messages import codec
from tests.support.hardening import (
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_GROUPS,
    INT32_MAX,
    INT64_MAX,
    METADATA,
    MIB,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    _nested,
    fetch_frame,
    fill_partition,
    rss_bytes,
)
from tests.support.process import create_topics, wait_for
from tests.support.raw_wire import API_VERSIONS, Wire, api_ranges

pytestmark = [
    pytest.mark.slow,
    pytest.mark.process,
]  # server processes started, killed and restarted, or filled to their limits


def assert_serving(port: int) -> None:
    w = Wire(port)
    try:
        assert api_ranges(w.call(API_VERSIONS, 0, corr=5))[API_VERSIONS] == (0, 5)
    finally:
        w.close()


def assert_no_traceback(server) -> None:
    text = server.log_text()
    assert "Traceback" not in text and " ERROR " not in text, text[-3000:]


# --- memory bounded by configuration ------------------------------------------------------------


def test_client_that_never_reads_its_fetches(server_factory):
    """Issue 16 #2: 300 Fetches of 2 MiB each, never read. Without a budget the server built and
    queued every answer (~600 MiB); with it, it stops reading once 4 MiB are queued."""
    server = server_factory()
    create_topics(server.port, "big", partitions=1)
    fill_partition(server.port, "big", 3 * MIB)
    before = rss_bytes(server.proc.pid)
    hostile = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    hostile.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # read nothing, buffer little
    hostile.sendall(b"".join(fetch_frame(i, "big", max_wait_ms=0, min_bytes=0) for i in range(300)))
    assert_serving(server.port)  # the server read and handled what it could meanwhile
    time.sleep(1.0)  # let it handle whatever it will (not an assertion on time)
    grown = rss_bytes(server.proc.pid) - before
    assert grown < 64 * MIB, f"RSS grew {grown / MIB:.0f} MiB for an unread client"
    hostile.close()
    assert_serving(server.port)
    assert_no_traceback(server)


def test_abandoned_long_polls_are_cancelled_and_capped(server_factory):
    """Issue 16 #1: long polls of max_wait 2^31-1 and min_bytes 2^31-1, their connections then
    closed; appends go on. Waiting fetches hold no answer, and the connection's close cancels them."""
    server = server_factory("--fetch-max-wait-ms", "600000", "--log-level", "DEBUG")
    create_topics(server.port, "polled", partitions=1)
    fill_partition(server.port, "polled", 2 * MIB)
    before = rss_bytes(server.proc.pid)
    socks = []
    for i in range(200):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=20)
        s.sendall(fetch_frame(i, "polled", max_wait_ms=INT32_MAX, min_bytes=INT32_MAX))
        socks.append(s)
    assert_serving(server.port)
    for s in socks:
        s.close()
    wait_for(lambda: server.log_text().count("1 waiting requests cancelled") == 200, what="200 polls cancelled")
    fill_partition(server.port, "polled", 1 * MIB)  # each append would make every waiter re-read
    grown = rss_bytes(server.proc.pid) - before
    assert grown < 96 * MIB, f"RSS grew {grown / MIB:.0f} MiB"
    assert_serving(server.port)
    assert_no_traceback(server)


def test_fetch_max_wait_is_capped(server_factory):
    server = server_factory("--fetch-max-wait-ms", "100")
    create_topics(server.port, "quiet", partitions=1)
    w = Wire(server.port)
    try:
        w.send(fetch_frame(7, "quiet", max_wait_ms=INT32_MAX, min_bytes=INT32_MAX))
        data = w.read_frame()  # would wait 24 days without the cap (the socket timeout is 20 s)
        assert data is not None and struct.unpack_from(">i", data)[0] == 7
    finally:
        w.close()


def test_idle_and_slowloris_connections_are_closed(server_factory):
    server = server_factory("--connections-max-idle-ms", "200")
    idle = Wire(server.port)
    slow = Wire(server.port)
    try:
        slow.send(struct.pack(">i", 100) + b"\x00\x12")  # a frame begun, never finished
        assert idle.read_frame() is None
        assert slow.read_frame() is None
        wait_for(lambda: "connections.max.idle.ms" in server.log_text(), what="the idle close logged")
    finally:
        idle.close()
        slow.close()


def test_a_client_that_never_reads_is_closed_when_idle(server_factory):
    server = server_factory("--connections-max-idle-ms", "300", "--connection-max-queued-bytes", "65536")
    create_topics(server.port, "unread", partitions=1)
    fill_partition(server.port, "unread", 1 * MIB)
    hostile = socket.create_connection(("127.0.0.1", server.port), timeout=20)
    hostile.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        hostile.sendall(b"".join(fetch_frame(i, "unread", max_wait_ms=0, min_bytes=0) for i in range(50)))
        wait_for(lambda: "connections.max.idle.ms" in server.log_text(), what="the stuck connection closed")
    finally:
        hostile.close()
    assert_serving(server.port)


def test_max_connections_refused_cleanly_and_logged(server_factory):
    server = server_factory("--max-connections", "3")
    held = [Wire(server.port) for _ in range(3)]
    try:
        for w in held:
            assert api_ranges(w.call(API_VERSIONS, 0, corr=1))[API_VERSIONS] == (0, 5)
        extra = Wire(server.port)
        assert extra.read_frame() is None  # closed at once, no answer
        extra.close()
        wait_for(lambda: "max.connections=3" in server.log_text(), what="the refusal logged")
        held.pop().close()

        def accepted_again() -> bool:
            w = Wire(server.port)
            try:
                w.send(w.request_bytes(API_VERSIONS, 0, 3))
                return w.read_frame() is not None
            finally:
                w.close()

        wait_for(accepted_again, what="a connection accepted once one closed")
    finally:
        for w in held:
            w.close()
    assert_no_traceback(server)


# --- bad input ------------------------------------------------------------------------------------


def test_null_array_where_the_schema_forbids_it(server):
    w = Wire(server.port)
    try:
        w.send(frame(struct.pack(">hhih", DESCRIBE_GROUPS, 0, 1, -1) + struct.pack(">i", -1)))
        w.assert_closed()
    finally:
        w.close()
    wait_for(lambda: "null where the schema forbids it" in server.log_text(), what="the WARNING")
    assert_serving(server.port)
    assert_no_traceback(server)


def test_offset_commit_retention_of_int64_max(server):
    create_topics(server.port, "kept", partitions=1)
    w = Wire(server.port)
    try:

        def string(v: str) -> bytes:
            return struct.pack(">h", len(v)) + v.encode()

        # By hand: kio holds retention_time as a timedelta, which cannot reach 2^63-1 ms.
        body = (
            string("g-ret")
            + struct.pack(">i", -1)
            + string("")
            + struct.pack(">q", INT64_MAX)
            + struct.pack(">i", 1)
            + string("kept")
            + struct.pack(">iiq", 1, 0, 42)
            + string("")
        )
        from protocol.messages import decode_response

        w.send(frame(struct.pack(">hhih", OFFSET_COMMIT, 2, 3, 1) + b"c" + body))
        _, resp = decode_response(OFFSET_COMMIT, 2, w.read_frame())
        assert resp.topics[0].partitions[0].error_code == 0
    finally:
        w.close()
    server.restart()
    w = Wire(server.port)
    try:
        resp = w.call(
            OFFSET_FETCH,
            1,
            corr=4,
            group_id="g-ret",
            topics=(
                build(
                    _nested(codec(OFFSET_FETCH, 1), "OffsetFetchRequestTopic"),
                    dict(name="kept", partition_indexes=(0,)),
                ),
            ),
        )
        assert resp.topics[0].partitions[0].committed_offset == 42
    finally:
        w.close()
    assert_no_traceback(server)


def test_metadata_by_topic_id_only(server):
    create_topics(server.port, "named", partitions=2)
    w = Wire(server.port)
    try:
        c = codec(METADATA, 12)
        topic = _nested(c, "MetadataRequestTopic")
        known = w.call(
            METADATA,
            12,
            corr=1,
            topics=(topic(name="named", topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        topic_id = known.topics[0].topic_id
        unknown_id = uuid.uuid4()
        resp = w.call(
            METADATA,
            12,
            corr=2,
            topics=(topic(name=None, topic_id=topic_id), topic(name=None, topic_id=unknown_id)),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        by_id = {t.topic_id: t for t in resp.topics}
        assert by_id[topic_id].name == "named" and by_id[topic_id].error_code == 0
        assert by_id[unknown_id].error_code == 100  # UNKNOWN_TOPIC_ID
    finally:
        w.close()
    assert_no_traceback(server)


# --- faults ---------------------------------------------------------------------------------------


def _create_topic_request(w: Wire, corr: int, name: str, partitions: int):
    c = codec(CREATE_TOPICS, 4)
    t = _nested(c, "CreatableTopic")(
        name=name, num_partitions=partitions, replication_factor=-1, assignments=(), configs=()
    )
    return w.call(CREATE_TOPICS, 4, corr=corr, topics=(t,), timeout=datetime.timedelta(seconds=5), validate_only=False)


def test_create_topics_at_the_file_descriptor_limit(server):
    w = Wire(server.port)
    try:
        assert api_ranges(w.call(API_VERSIONS, 0, corr=9))  # accepted before the limit is lowered
        open_fds = len(list(Path(f"/proc/{server.proc.pid}/fd").iterdir()))
        soft, hard = resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE, (open_fds + 8, hard))
        resp = _create_topic_request(w, 1, "too-many", 64)  # each partition opens files
        assert resp.topics[0].error_code == 56, resp  # KAFKA_STORAGE_ERROR, the connection kept
        assert "Too many open files" in resp.topics[0].error_message
        resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE, (soft, hard))
        resp = _create_topic_request(w, 2, "too-many", 4)  # nothing of the failed attempt is left
        assert resp.topics[0].error_code == 0, resp
    finally:
        w.close()
    assert_no_traceback(server)


def test_create_topics_of_too_many_partitions_is_a_policy_violation(server):
    """A mutated count (2^31-1 partitions) once blocked the server creating directories."""
    w = Wire(server.port)
    try:
        resp = _create_topic_request(w, 1, "huge", INT32_MAX)
        assert resp.topics[0].error_code == 44, resp  # POLICY_VIOLATION, as Kafka's controller
        assert _create_topic_request(w, 2, "fine", 3).topics[0].error_code == 0
    finally:
        w.close()
    assert_no_traceback(server)


def test_connections_near_the_fd_limit_are_refused_and_logged(server):
    """Connections that would leave too few file descriptors for log files are closed at once,
    and said: at the limit itself libuv would drop them without a word."""
    soft, hard = resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE)
    open_fds = len(list(Path(f"/proc/{server.proc.pid}/fd").iterdir()))
    resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE, (open_fds + 20, hard))
    try:
        w = Wire(server.port)
        assert w.read_frame() is None  # refused: closed at once
        w.close()
        wait_for(lambda: "open-file limit" in server.log_text(), what="the refusal logged")
    finally:
        resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE, (soft, hard))
    assert_serving(server.port)
    assert_no_traceback(server)


def test_racing_create_and_delete_of_one_name(server):
    a, b = Wire(server.port), Wire(server.port)
    try:
        c = codec(DELETE_TOPICS, 4)
        for i in range(15):
            a.send(
                a.request_bytes(
                    CREATE_TOPICS,
                    4,
                    100 + i,
                    topics=(
                        _nested(codec(CREATE_TOPICS, 4), "CreatableTopic")(
                            name="flip", num_partitions=3, replication_factor=-1, assignments=(), configs=()
                        ),
                    ),
                    timeout=datetime.timedelta(seconds=5),
                    validate_only=False,
                )
            )
            b.send(
                b.request_bytes(DELETE_TOPICS, 4, 200 + i, topic_names=("flip",), timeout=datetime.timedelta(seconds=5))
            )
        for _ in range(15):
            assert a.read_frame() is not None
            assert b.read_frame() is not None
        del c
    finally:
        a.close()
        b.close()
    server.restart()
    assert "missing" not in server.log_text()
    assert_serving(server.port)
    assert_no_traceback(server)


def test_a_large_request_is_not_held_more_than_twice(server_factory):
    """socket.request.max.bytes: a 40 MiB Produce peaks at about twice its size in the server
    (the frame and kio's decoded copy, briefly), never more."""
    from protocol.messages import encode_request
    from tests.support.wire_client import request_class

    size = 40 * MIB
    server = server_factory("--socket-request-max-bytes", str(64 * MIB))
    create_topics(server.port, "large", partitions=1)
    r, t, p = (request_class(0, 9, n) for n in ("ProduceRequest", "TopicProduceData", "PartitionProduceData"))
    data = encode_request(
        0,
        9,
        1,
        "big",
        r(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(t(name="large", partition_data=(p(index=0, records=b"\0" * size),)),),
        ),
    )
    Path(f"/proc/{server.proc.pid}/clear_refs").write_text("5")  # reset the peak (VmHWM)
    start = rss_bytes(server.proc.pid)
    w = Wire(server.port)
    try:
        w.send(data)
        del data
        assert w.read_frame() is not None  # answered (the bytes are no valid batch: an error code)
    finally:
        w.close()
    peak = next(
        int(line.split()[1]) * 1024
        for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines()
        if line.startswith("VmHWM:")
    )
    assert peak - start < 2.6 * size, f"peak {(peak - start) / size:.2f}x the request"
    assert_serving(server.port)


def peak_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))


def test_a_large_produce_frame_is_held_once(server):
    """A 48 MiB Produce arriving in 64 KiB reads: read into one buffer and its record batch
    used in place, so the server's peak RSS grows by about the frame, not twice it."""
    from protocol.messages import encode_request
    from protocol.record_batch import build_batch
    from tests.support.wire_client import request_class

    size = 48 << 20
    R, T, P = (request_class(0, 9, n) for n in (None, "TopicProduceData", "PartitionProduceData"))
    request = encode_request(
        0,
        9,
        1,
        "big",
        R(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(
                T(
                    name="big",
                    partition_data=(
                        P(index=0, records=build_batch([(b"k", b"x" * size)], timestamp_ms=int(time.time() * 1000))),
                    ),
                ),
            ),
        ),
    )
    before = peak_rss_bytes(server.proc.pid)
    with socket.create_connection(("127.0.0.1", server.port)) as c:
        for i in range(0, len(request), 1 << 16):
            c.sendall(request[i : i + (1 << 16)])
        c.settimeout(30)
        assert c.recv(100)  # answered (MESSAGE_TOO_LARGE: the topic's max.message.bytes is 1 MiB)
    grown = peak_rss_bytes(server.proc.pid) - before
    assert grown < 1.4 * size, f"peak RSS grew by {grown >> 20} MiB for a {size >> 20} MiB frame"
    assert_serving(server.port)
