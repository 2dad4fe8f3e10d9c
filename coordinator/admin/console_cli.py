"""`kcoord produce` and `kcoord consume`: lines in and records out, as kcat -P / -C and
kafka-console-producer.sh / kafka-console-consumer.sh do."""

from __future__ import annotations

import datetime
import sys
import time
from typing import Any

import click

from .common import (
    EARLIEST,
    Failure,
    LATEST,
    cluster_of,
    emit,
    error_name,
    list_offsets,
    topic_partitions,
)


# produce / consume (kcat -P / -C) -------------------------------------------------------------

PRODUCE, FETCH = 0, 1


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2: the hash its default partitioner puts keyed records by."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail, rest = length % 4, length - length % 4
    if tail == 3:
        h ^= data[rest + 2] << 16
    if tail >= 2:
        h ^= data[rest + 1] << 8
    if tail >= 1:
        h ^= data[rest]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


@click.command("produce")
@click.argument("topic")
@click.option("--partition", type=int, help="default: by key as Kafka's default partitioner, else round robin")
@click.option("--key-separator", help="split each line into KEY<sep>VALUE")
@click.pass_context
def produce_cmd(ctx: click.Context, topic: str, partition: int | None, key_separator: str | None) -> None:
    """Each line of standard input becomes a record (like kcat -P); acks=all."""
    from protocol.record_batch import build_batch

    cluster = cluster_of(ctx)
    leaders = topic_partitions(cluster, [topic])[topic]
    if partition is not None and partition not in leaders:
        raise Failure(f"topic {topic!r} has no partition {partition}")
    by_partition: dict[int, list[tuple[bytes | None, bytes]]] = {}
    for n, line in enumerate(sys.stdin.buffer):
        line = line.rstrip(b"\n")
        key = None
        if key_separator is not None:
            key, sep, line = line.partition(key_separator.encode())
            if not sep:
                raise Failure(f"line {n + 1}: no key separator {key_separator!r}")
        p = (
            partition
            if partition is not None
            else ((murmur2(key) & 0x7FFFFFFF) % len(leaders) if key is not None else n % len(leaders))
        )
        by_partition.setdefault(p, []).append((key, line))
    now = int(time.time() * 1000)
    count = 0
    for p, records in sorted(by_partition.items()):
        conn = cluster.node(leaders[p])
        r = conn.request(
            PRODUCE,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=30),
            topic_data=(
                conn.nested(
                    PRODUCE,
                    "TopicProduceData",
                    name=topic,
                    partition_data=(
                        conn.nested(
                            PRODUCE, "PartitionProduceData", index=p, records=build_batch(records, timestamp_ms=now)
                        ),
                    ),
                ),
            ),
        )
        result = r.responses[0].partition_responses[0]
        if result.error_code:
            raise Failure(f"producing to {topic}-{p}: {error_name(result.error_code)}")
        count += len(records)
    click.echo(f"produced {count} records to {topic}", err=True)


@click.command("consume")
@click.argument("topic")
@click.option("--partition", "partitions", type=int, multiple=True, help="default: every partition")
@click.option("--offset", "start", default="beginning", show_default=True, help="beginning, end, or an offset")
@click.option("--max-messages", type=click.IntRange(min=1), help="stop after this many")
@click.option("--timeout", type=float, default=2.0, show_default=True, help="stop after this long without records")
@click.pass_context
def consume_cmd(
    ctx: click.Context, topic: str, partitions: tuple[int, ...], start: str, max_messages: int | None, timeout: float
) -> None:
    """Print records (like kcat -C, no group): values one per line, or --output json/csv rows."""
    from protocol.record_batch import CONTROL_MASK, LOG_OVERHEAD, TruncatedBatch, iter_batch_records, parse_header

    if start not in ("beginning", "end") and not start.lstrip("-").isdigit():
        raise click.BadParameter(f"{start!r}: expected beginning, end or an offset", param_hint="--offset")
    cluster = cluster_of(ctx)
    leaders = topic_partitions(cluster, [topic])[topic]
    wanted = list(partitions) or sorted(leaders)
    for p in wanted:
        if p not in leaders:
            raise Failure(f"topic {topic!r} has no partition {p}")
    if start in ("beginning", "end"):
        spec = EARLIEST if start == "beginning" else LATEST
        found = list_offsets(cluster, {(topic, p): spec for p in wanted}, {topic: leaders})
        position = {p: o for (_, p), o in found.items()}
    else:
        position = {p: int(start) for p in wanted}
    fmt, shown = ctx.obj["output"], 0
    rows: list[list[Any]] = []
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < timeout and (max_messages is None or shown < max_messages):
        got = 0
        for p in wanted:
            conn = cluster.node(leaders[p])
            r = conn.request(
                FETCH,
                replica_id=-1,
                max_wait=datetime.timedelta(milliseconds=200),
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=(
                    conn.nested(
                        FETCH,
                        "FetchTopic",
                        topic=topic,
                        topic_id=None,
                        partitions=(
                            conn.nested(
                                FETCH,
                                "FetchPartition",
                                partition=p,
                                current_leader_epoch=-1,
                                fetch_offset=position[p],
                                log_start_offset=-1,
                                partition_max_bytes=1 << 20,
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
                rack_id="",
            )
            data = r.responses[0].partitions[0]
            if data.error_code:
                raise Failure(f"fetching {topic}-{p}: {error_name(data.error_code)}")
            buf, pos = data.records or b"", 0
            while pos < len(buf):
                try:
                    h = parse_header(buf, pos)
                except TruncatedBatch:  # a partial batch at the size limit: fetched again next time
                    break
                end = pos + h.batch_length + LOG_OVERHEAD
                if not h.attributes & CONTROL_MASK:
                    for rec in iter_batch_records(memoryview(buf)[pos:end], h):
                        if rec.offset < position[p] or (max_messages is not None and shown >= max_messages):
                            continue
                        shown += 1
                        got += 1
                        value = bytes(rec.value).decode(errors="replace") if rec.value is not None else None
                        if fmt == "table":
                            click.echo(value if value is not None else "")
                        else:
                            key = bytes(rec.key).decode(errors="replace") if rec.key is not None else None
                            rows.append([topic, p, rec.offset, rec.timestamp, key, value])
                position[p] = max(position[p], h.base_offset + h.last_offset_delta + 1)
                pos = end
        if got:
            idle_since = time.monotonic()
    if fmt != "table":
        emit(ctx, ["TOPIC", "PARTITION", "OFFSET", "TIMESTAMP", "KEY", "VALUE"], rows)
