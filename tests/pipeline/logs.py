"""A data dir written with the project's own log writer, and a pure-Python reference of what
the pipeline should compute from it (from the records we appended, not from the files)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.log.offsets import OffsetsLog
from coordinator.log.partition import PartitionLog
from protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)
from protocol.record_batch import GZIP, LZ4, NONE, SNAPPY, ZSTD

NOW = 1_700_000_040_000  # 22:14:00 UTC, on a minute boundary
CODECS = {"plain": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
TOPIC_RECORDS = {("orders", 0): 50, ("orders", 1): 7, ("orders", 2): 0}  # orders-3 has no log
STORM_GENERATIONS = 12  # all within a minute: a storm with the default threshold (>10 in 5 min)


@dataclass
class Written:
    """Every `__consumer_offsets` batch appended: (group, log partition, base offset, records)."""

    batches: list[tuple[str, int, int, list]] = field(default_factory=list)
    topic_records: dict[tuple[str, int], int] = field(default_factory=dict)


def member(mid: str, assignment: bytes = b"xyz") -> MemberMetadata:
    return MemberMetadata(
        member_id=mid,
        client_id=f"client-{mid}",
        client_host="/127.0.0.1",
        session_timeout=10_000,
        subscription=b"sub",
        assignment=assignment,
        rebalance_timeout=30_000,
    )


def generation(group: str, gen: int, members: list[str], ts: int) -> tuple:
    return (
        GroupMetadataKey(group),
        GroupMetadataValue(
            protocol_type="consumer",
            generation=gen,
            protocol="range",
            leader=members[0] if members else None,
            members=tuple(member(m) for m in members),
            current_state_timestamp=ts,
        ),
    )


async def write_data_dir(data_dir: Path) -> Written:
    """Groups with generations, commits over three minutes, overwrites, a deleted offset,
    a rebalance storm, a deleted group; topic logs in every compression codec."""
    w = Written()
    log = await OffsetsLog.open(data_dir, background=False)

    async def append(group: str, records: list, ts: int = NOW) -> None:
        base = await log.append(group, records, timestamp_ms=ts)
        w.batches.append((group, log.partition_for(group), base, records))

    for g in range(5):
        group = f"group-{g}"
        for gen, members in enumerate([["a"], ["a", "b"], ["b"]], start=1):
            await append(group, [generation(group, gen, members, NOW + gen * 1000)])
        for minute in range(3):
            commits = [
                (
                    OffsetCommitKey(group, "orders", p),
                    OffsetCommitValue(
                        offset=minute * 10 + p,
                        metadata="m",
                        commit_timestamp=NOW + minute * 60_000,
                        leader_epoch=minute,
                    ),
                )
                for p in range(4)
            ]
            await append(group, commits)
        await append(group, [(OffsetCommitKey(group, "orders", 3), None)])  # offset deleted
    await append(
        "stormy",
        [
            generation("stormy", gen, ["a", "b"][: 1 + gen % 2], NOW + gen * 2000)
            for gen in range(1, STORM_GENERATIONS + 1)
        ],
    )
    await append(
        "stormy",
        [
            (
                OffsetCommitKey("stormy", "orders", 1),
                OffsetCommitValue(offset=3, commit_timestamp=NOW, expire_timestamp=NOW + 86_400_000),
            )
        ],
    )
    await append(
        "gone",
        [
            generation("gone", 1, ["x"], NOW),
            (OffsetCommitKey("gone", "orders", 0), OffsetCommitValue(offset=1, commit_timestamp=NOW)),
        ],
    )
    await append("gone", [(OffsetCommitKey("gone", "orders", 0), None), (GroupMetadataKey("gone"), None)])
    await log.close()

    codecs = list(CODECS.values())
    for (topic, p), n in TOPIC_RECORDS.items():
        plog = PartitionLog.open_sync(data_dir / f"{topic}-{p}")
        for i in range(n):  # one record per batch, cycling through the codecs
            plog.append_records(
                [(b"k%d" % i, b"v%d" % i)], NOW, compression=codecs[i % len(codecs)], headers=[("h", b"%d" % i)]
            )
        await plog.close()
        w.topic_records[(topic, p)] = n
    return w


def reference(w: Written, skip: set[tuple[int, int]] = frozenset()) -> dict:
    """The expected outputs, replaying the appended records (minus `skip`ped batches:
    (log partition, base offset))."""
    committed: dict[tuple, int] = {}
    generations: dict[str, dict[int, GroupMetadataValue]] = defaultdict(dict)
    rate: Counter = Counter()
    for _group, lp, base, records in w.batches:
        if (lp, base) in skip:
            continue
        for key, value in records:
            if type(key) is OffsetCommitKey:
                k = (key.group, key.topic, key.partition)
                if value is None:
                    committed.pop(k, None)
                else:
                    committed[k] = value.offset
                    rate[(key.group, value.commit_timestamp // 60_000 * 60_000)] += 1
            elif value is not None:
                generations[key.group][value.generation] = value
    ends = w.topic_records
    lag = {k: max(ends[k[1:]] - off, 0) if k[1:] in ends else None for k, off in committed.items()}
    timeline = {}
    for group, gens in generations.items():
        previous: set[str] = set()
        for gen in sorted(gens):
            ids = [m.member_id for m in gens[gen].members]
            timeline[(group, gen)] = (len(ids), sorted(set(ids) - previous), sorted(previous - set(ids)))
            previous = set(ids)
    return {"committed": committed, "lag": lag, "timeline": timeline, "rate": dict(rate)}
