"""Raw-wire share groups (KIP-932): ShareFetch / ShareAcknowledge bodies, their answers read
back, group configs, a topic with records and a share group reading it from the earliest,
and kcoord run in process (tests/support/cli.py)."""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import time

from protocol.record_batch import build_batch as _build_batch, iter_batches
from tests.support.data_plane import produce
from tests.support.wire_client import WireClient, request_class

SFETCH, SACK, SHB, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS = 78, 79, 76, 44, 32
MS = datetime.timedelta(milliseconds=1)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
# A share group's target computed at every change (assignment batching off), for tests that
# follow each heartbeat's exact answer, as Kafka runs its request tests.
NO_BATCHING = ("--group-share-assignment-interval-ms", "0")


def shb(group, member_id, epoch, topics=None, **kw):
    """ShareGroupHeartbeat v1's body."""
    return request_class(SHB, 1)(
        group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics, **kw
    )


async def share_join(conn, group, member_id, topics, **kw):
    """A member's join, then its heartbeats until it is assigned partitions (until_assigned)."""
    return await until_assigned(
        conn, group, member_id, await conn.request(SHB, 1, shb(group, member_id, 0, topics, **kw))
    )


async def until_assigned(conn, group, member_id, r, timeout=10.0):
    """The member's heartbeats after answer `r` until it is assigned partitions (or `timeout`
    seconds have passed): Kafka 4.4 assigns a share-partition only once its state is
    initialized, which follows the heartbeat that first subscribed to it, and a heartbeat
    after that assigns it at a new group epoch (once the group's assignment interval has
    passed since its last target). The last answer."""
    deadline = time.monotonic() + timeout
    while not r.error_code and not (r.assignment is not None and r.assignment.topic_partitions):
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.02)
        r = await conn.request(SHB, 1, shb(group, member_id, r.member_epoch))
    return r


GROUP_RESOURCE = 32


def build_batch(records):
    return _build_batch(records, timestamp_ms=int(time.time() * 1000))


def cls(api, v, name=None):
    return request_class(api, v, name)


def acks_of(batches, v):
    B = cls(SFETCH, v, "AcknowledgementBatch")
    return tuple(B(first_offset=f, last_offset=last, acknowledge_types=tuple(t)) for f, last, t in batches)


def sfetch(
    group,
    member,
    epoch,
    topic_id,
    partitions=(0,),
    acks=None,
    max_records=500,
    max_wait_ms=0,
    v=1,
    forget=(),
    max_bytes=1 << 20,
    **kw,
):
    """acks: {partition: [(first, last, [types])]}"""
    acks = acks or {}
    P, T = cls(SFETCH, v, "FetchPartition"), cls(SFETCH, v, "FetchTopic")
    parts = tuple(
        P(partition_index=p, acknowledgement_batches=acks_of(acks.get(p, ()), v))
        for p in sorted(set(partitions) | set(acks))
    )
    F = cls(SFETCH, v, "ForgottenTopic")
    return cls(SFETCH, v)(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=max_wait_ms * MS,
        min_bytes=1,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=500,
        topics=(T(topic_id=topic_id, partitions=parts),) if parts else (),
        forgotten_topics_data=(F(topic_id=topic_id, partitions=tuple(forget)),) if forget else (),
        **kw,
    )


def sack(group, member, epoch, topic_id, acks, v=1, **kw):
    P, T = cls(SACK, v, "AcknowledgePartition"), cls(SACK, v, "AcknowledgeTopic")
    B = cls(SACK, v, "AcknowledgementBatch")
    parts = tuple(
        P(
            partition_index=p,
            acknowledgement_batches=tuple(
                B(first_offset=f, last_offset=last, acknowledge_types=tuple(t)) for f, last, t in bs
            ),
        )
        for p, bs in acks.items()
    )
    return cls(SACK, v)(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        topics=(T(topic_id=topic_id, partitions=parts),),
        **kw,
    )


def acquired(resp, partition=0):
    for t in resp.responses:
        for p in t.partitions:
            if p.partition_index == partition:
                return [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
    return []


def part(resp, partition=0):
    return next(p for t in resp.responses for p in t.partitions if p.partition_index == partition)


def offsets_in(records: bytes) -> list[int]:
    out = []
    for _, h in iter_batches(records):
        out.extend(range(h.base_offset, h.last_offset + 1))
    return out


async def set_group_configs(conn, group, **configs):
    R = cls(INCREMENTAL_ALTER_CONFIGS, 1, "AlterConfigsResource")
    C = cls(INCREMENTAL_ALTER_CONFIGS, 1, "AlterableConfig")
    r = await conn.request(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        cls(INCREMENTAL_ALTER_CONFIGS, 1)(
            resources=(
                R(
                    resource_type=GROUP_RESOURCE,
                    resource_name=group,
                    configs=tuple(C(name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items()),
                ),
            ),
            validate_only=False,
        ),
    )
    return r.responses[0]


async def start(server, topic="t", group="g", records=10, per_batch=1, partitions=1, **configs):
    """A topic with `records` records (batches of per_batch), the group reading from the
    earliest, and the topic's id."""
    conn = await WireClient().connect("127.0.0.1", server.port)
    await conn.create_topics(topic, partitions=partitions)
    assert (await set_group_configs(conn, group, share_auto_offset_reset="earliest", **configs)).error_code == 0
    for i in range(0, records, per_batch):
        error, _ = await produce(conn, topic, build_batch([(None, b"v%d" % j) for j in range(i, i + per_batch)]))
        assert error == 0
    hb = await share_join(conn, group, "a", (topic,))
    return conn, hb.assignment.topic_partitions[0].topic_id


def kcoord(server, *args: str, output: str | None = "json") -> subprocess.CompletedProcess:
    from tests.support import cli

    return cli.kcoord("--bootstrap-server", server.bootstrap, *(("--output", output) if output else ()), *args)


def kcoord_ok(server, *args: str):
    r = kcoord(server, *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if r.stdout.strip() else r.stdout


def kcoord_fails(server, *args: str) -> str:
    """The one line on stderr of a kcoord that fails (exit 1, no traceback)."""
    r = kcoord(server, *args)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    return r.stderr


def setup(
    bootstrap: str,
    topic: str,
    group: str,
    records: int,
    partitions: int = 1,
    replication_factor: int = 1,
    **group_configs: str,
) -> None:
    """The topic, the group's configs (earliest: the records produced before the group
    started are its), and the records v0..v{n-1}."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication_factor)])[topic].result(30)
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in {"share_auto_offset_reset": "earliest", **group_configs}.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    producer.flush(30)
