"""Hostile-client scenarios: big partitions, raw Fetch frames, and the server's resident memory."""

from __future__ import annotations

import datetime
from pathlib import Path

from coordinator.apis import build
from protocol.messages import codec

FETCH, METADATA, OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, CREATE_TOPICS, DELETE_TOPICS = 1, 3, 8, 9, 15, 19, 20


INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1


MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def fill_partition(port: int, topic: str, total_bytes: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 5, "compression.type": "none"})
    value = b"v" * 100_000
    for _ in range(total_bytes // len(value)):
        p.produce(topic, value, partition=0)
        p.poll(0)
    assert p.flush(30) == 0


def fetch_frame(
    corr: int,
    topic: str,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int = INT32_MAX,
    partition_max_bytes: int = 2 * MIB,
) -> bytes:
    c = codec(FETCH, 12)
    part = build(
        _nested(c, "FetchPartition"),
        dict(
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=partition_max_bytes,
        ),
    )
    body = build(
        c.request_type,
        dict(
            cluster_id=None,
            replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=max_wait_ms),
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(build(_nested(c, "FetchTopic"), dict(topic=topic, partitions=(part,))),),
            forgotten_topics_data=(),
            rack_id="",
        ),
    )
    from protocol.messages import encode_request

    return encode_request(FETCH, 12, corr, "hostile", body)


def _nested(c, name):
    import sys

    return getattr(sys.modules[c.request_type.__module__], name)
