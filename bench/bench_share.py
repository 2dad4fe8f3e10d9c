"""Share groups (KIP-932): records/s delivered and acknowledged, server CPU per acknowledged
record, and memory per in-flight record.

For each partition count (1, 6) the topic gets --records records (batches of 100); then a
share group of C consumers (1, 3, 10; each its own connection, ShareFetch with its previous
batch's ACCEPT piggy-backed, as a consumer in implicit mode does) reads all of them, timed
from the first fetch to the last acknowledgement, with the server process's CPU time over the
same span (the share consumers' joins included). Beside it, in the same run, a classic group of
C consumers (JoinGroup / SyncGroup over the wire, each fetching its assigned partitions with
Fetch and committing what it read) reads the same records, its join included (the server's
initial rebalance delay is 300 ms here, so that the C members form one generation). Memory
per in-flight record is measured in process (tracemalloc) over a share-partition holding
group.share.partition.max.record.locks Acquired records. CPU time is read from /proc in clock
ticks (10 ms): a run of R records resolves 10 ms / R per record.

    python -m bench.bench_share --records 30000 --consumers 1,3,10 --partitions 1,6
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import struct
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # (run as a script too)

from bench.results import record  # noqa: E402
from coordinator.share.partition import DATA, SharePartition  # noqa: E402
from protocol.consumer_protocol import read_assignment, write_assignment  # noqa: E402
from protocol.record_batch import build_batch, iter_batches  # noqa: E402
from tests.support.process import ServerProcess  # noqa: E402
from tests.support.wire_client import WireClient, cpu_seconds, request_class  # noqa: E402

PRODUCE, FETCH, JOIN, SYNC, COMMIT, SHB, SFETCH, CONFIGS = 0, 1, 11, 14, 8, 76, 78, 44
MS = datetime.timedelta(milliseconds=1)


async def produce(conn: WireClient, topic: str, partitions: int, records: int) -> None:
    P, T = request_class(PRODUCE, 9, "PartitionProduceData"), request_class(PRODUCE, 9, "TopicProduceData")
    now = int(time.time() * 1000)
    futures = []
    for i in range(0, records, 100):
        batch = build_batch([(None, b"x" * 100) for _ in range(100)], timestamp_ms=now)
        futures.append(
            conn.send(
                PRODUCE,
                9,
                request_class(PRODUCE, 9)(
                    transactional_id=None,
                    acks=-1,
                    timeout=5000 * MS,
                    topic_data=(T(name=topic, partition_data=(P(index=(i // 100) % partitions, records=batch),)),),
                ),
            )
        )
    for f in futures:
        r = await f
        assert r.responses[0].partition_responses[0].error_code == 0


async def share_consumer(port: int, group: str, member: str, topic_id, partitions: int, done: dict) -> None:
    conn = await WireClient(member).connect("127.0.0.1", port)
    await conn.request(
        SHB,
        1,
        request_class(SHB, 1)(
            group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=(done["topic"],)
        ),
    )
    FP, FT = request_class(SFETCH, 1, "FetchPartition"), request_class(SFETCH, 1, "FetchTopic")
    B = request_class(SFETCH, 1, "AcknowledgementBatch")
    epoch, acks = 0, {}
    try:
        while done["acked"] < done["total"]:
            parts = tuple(
                FP(
                    partition_index=p,
                    acknowledgement_batches=tuple(
                        B(first_offset=f, last_offset=last, acknowledge_types=(1,)) for f, last in acks.get(p, ())
                    ),
                )
                for p in range(partitions)
            )
            r = await conn.request(
                SFETCH,
                1,
                request_class(SFETCH, 1)(
                    group_id=group,
                    member_id=member,
                    share_session_epoch=epoch,
                    max_wait=100 * MS,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    max_records=500,
                    batch_size=500,
                    topics=(
                        FT(
                            topic_id=topic_id,
                            partitions=parts
                            if epoch
                            else tuple(FP(partition_index=p, acknowledgement_batches=()) for p in range(partitions)),
                        ),
                    ),
                    forgotten_topics_data=(),
                ),
            )
            assert r.error_code == 0, r
            done["acked"] += sum(last - f + 1 for ranges in acks.values() for f, last in ranges)
            epoch += 1
            acks = {}
            for t in r.responses:
                for p in t.partitions:
                    if p.acquired_records:
                        acks[p.partition_index] = [(a.first_offset, a.last_offset) for a in p.acquired_records]
        await conn.request(
            SFETCH,
            1,
            request_class(SFETCH, 1)(
                group_id=group,
                member_id=member,
                share_session_epoch=-1,
                max_wait=0 * MS,
                min_bytes=1,
                max_bytes=1,
                max_records=0,
                batch_size=0,
                topics=(),
                forgotten_topics_data=(),
            ),
        )
    finally:
        await conn.close()


async def share_run(
    port: int, topic: str, topic_id, partitions: int, consumers: int, records: int, pid: int
) -> tuple[float, float]:
    group = f"share-{topic}-{consumers}"
    admin = await WireClient("admin").connect("127.0.0.1", port)
    R, C = request_class(CONFIGS, 1, "AlterConfigsResource"), request_class(CONFIGS, 1, "AlterableConfig")
    await admin.request(
        CONFIGS,
        1,
        request_class(CONFIGS, 1)(
            resources=(
                R(
                    resource_type=32,
                    resource_name=group,
                    configs=(C(name="share.auto.offset.reset", config_operation=0, value="earliest"),),
                ),
            ),
            validate_only=False,
        ),
    )
    await admin.close()
    done = {"acked": 0, "total": records, "topic": topic}
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    await asyncio.gather(*(share_consumer(port, group, f"m{i}", topic_id, partitions, done) for i in range(consumers)))
    return time.perf_counter() - t0, cpu_seconds(pid) - cpu0


async def classic_consumer(port: int, group: str, topic: str, partitions: int, consumers: int, done: dict) -> None:
    conn = await WireClient("classic").connect("127.0.0.1", port)
    name = topic.encode()
    meta = struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)  # subscription v0, no user data
    Pr = request_class(JOIN, 5, "JoinGroupRequestProtocol")

    def join_body(member_id: str):
        return request_class(JOIN, 5)(
            group_id=group,
            session_timeout=30000 * MS,
            rebalance_timeout=60000 * MS,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(Pr(name="range", metadata=meta),),
        )

    j = await conn.request(JOIN, 5, join_body(""))
    if j.error_code == 79:  # MEMBER_ID_REQUIRED
        j = await conn.request(JOIN, 5, join_body(j.member_id))
    assert j.error_code == 0, j
    A = request_class(SYNC, 3, "SyncGroupRequestAssignment")
    assignments = ()
    if j.leader == j.member_id:
        members = sorted(m.member_id for m in j.members)
        assignments = tuple(
            A(
                member_id=m,
                assignment=write_assignment(0, [(topic, [p for p in range(partitions) if p % len(members) == i])]),
            )
            for i, m in enumerate(members)
        )
    s = await conn.request(
        SYNC,
        3,
        request_class(SYNC, 3)(
            group_id=group,
            generation_id=j.generation_id,
            member_id=j.member_id,
            group_instance_id=None,
            assignments=assignments,
        ),
    )
    mine = [p for _, ps in read_assignment(s.assignment) for p in ps]
    positions = {p: 0 for p in mine}
    F, T = request_class(FETCH, 11, "FetchPartition"), request_class(FETCH, 11, "FetchTopic")
    CP, CT = (
        request_class(COMMIT, 7, "OffsetCommitRequestPartition"),
        request_class(COMMIT, 7, "OffsetCommitRequestTopic"),
    )
    try:
        while done["read"] < done["total"]:
            r = await conn.request(
                FETCH,
                11,
                request_class(FETCH, 11)(
                    replica_id=-1,
                    max_wait=100 * MS,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=(
                        T(
                            topic=topic,
                            partitions=tuple(
                                F(
                                    partition=p,
                                    current_leader_epoch=-1,
                                    fetch_offset=o,
                                    log_start_offset=-1,
                                    partition_max_bytes=1 << 20,
                                )
                                for p, o in positions.items()
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                    rack_id="",
                ),
            )
            for t in r.responses:
                for p in t.partitions:
                    for _, h in iter_batches(p.records or b""):
                        if h.last_offset >= positions[p.partition_index]:
                            done["read"] += h.last_offset + 1 - max(h.base_offset, positions[p.partition_index])
                            positions[p.partition_index] = h.last_offset + 1
            await conn.request(
                COMMIT,
                7,
                request_class(COMMIT, 7)(
                    group_id=group,
                    generation_id_or_member_epoch=j.generation_id,
                    member_id=j.member_id,
                    group_instance_id=None,
                    topics=(
                        CT(
                            name=topic,
                            partitions=tuple(
                                CP(
                                    partition_index=p,
                                    committed_offset=o,
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                )
                                for p, o in positions.items()
                            ),
                        ),
                    ),
                ),
            )
    finally:
        await conn.close()


async def classic_run(port: int, topic: str, partitions: int, consumers: int, records: int) -> float:
    done = {"read": 0, "total": records}
    t0 = time.perf_counter()
    await asyncio.gather(
        *(
            classic_consumer(port, f"classic-{topic}-{consumers}", topic, partitions, consumers, done)
            for _ in range(consumers)
        )
    )
    return time.perf_counter() - t0


def memory_per_in_flight(records: int = 2000) -> float:
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    sp = SharePartition(0, max_in_flight=records)
    ranges, _ = sp.acquire("member", 0.0, records, [(o, o + 99, DATA) for o in range(0, records, 100)])
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert sum(last - first + 1 for first, last, _ in ranges) == records
    return sum(s.size_diff for s in after.compare_to(before, "filename")) / records


async def main(args) -> None:
    data = Path(tempfile.mkdtemp())
    server = ServerProcess(data / "data", ["--group-initial-rebalance-delay-ms", "300"])
    server.start()
    try:
        conn = await WireClient("bench").connect("127.0.0.1", server.port)
        print(f"{'partitions':>10} {'consumers':>9} {'share rec/s':>12} {'classic rec/s':>14} {'CPU us/ack':>11}")
        for partitions in args.partitions:
            for consumers in args.consumers:
                topic = f"bench-{partitions}-{consumers}"
                await conn.create_topics(topic, partitions=partitions)
                await produce(conn, topic, partitions, args.records)
                md = await conn.request(
                    3,
                    12,
                    request_class(3, 12)(
                        topics=(request_class(3, 12, "MetadataRequestTopic")(name=topic, topic_id=None),),
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    ),
                )
                topic_id = md.topics[0].topic_id
                elapsed, cpu = await share_run(
                    server.port, topic, topic_id, partitions, consumers, args.records, server.proc.pid
                )
                classic = await classic_run(server.port, topic, partitions, consumers, args.records)
                rate, classic_rate = args.records / elapsed, args.records / classic
                print(
                    f"{partitions:>10} {consumers:>9} {rate:>12.0f} {classic_rate:>14.0f} "
                    f"{cpu / args.records * 1e6:>11.1f}"
                )
                params = {"partitions": partitions, "consumers": consumers, "records": args.records}
                record(
                    f"share group of {consumers} consumers on {partitions} partition(s): records delivered and "
                    "acknowledged per second (ShareFetch with piggy-backed ACCEPT)",
                    rate,
                    "records/s",
                    params=params,
                    peer=f"classic group of {consumers} (Fetch and OffsetCommit)",
                    peer_value=classic_rate,
                )
                record(
                    f"share group of {consumers} consumers on {partitions} partition(s): server CPU per "
                    "acknowledged record",
                    cpu / args.records * 1e6,
                    "us",
                    params=params,
                )
        await conn.close()
    finally:
        server.stop()
    per_record = memory_per_in_flight()
    print(f"memory per in-flight record: {per_record:.0f} bytes")
    record("share-partition memory per in-flight (Acquired) record, 2000 in flight", per_record, "bytes")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=30_000)
    p.add_argument("--consumers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 3, 10])
    p.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 6])
    asyncio.run(main(p.parse_args()))
