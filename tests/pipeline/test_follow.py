"""`--follow`: the streaming job picks up new commits in one trigger and, restarted from its
checkpoint, carries on without counting anything twice."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pyspark")

from coordinator.log.offsets import OffsetsLog  # noqa: E402
from pipeline.run import follow  # noqa: E402
from protocol.group_records import OffsetCommitKey, OffsetCommitValue  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark: a JVM and Python workers per session
T0 = 1_700_000_000_000


async def commit(data, offset: int, at_ms: int) -> None:
    log = await OffsetsLog.open(data, partitions=3, background=False)
    await log.append(
        "g",
        [(OffsetCommitKey("g", "t", p), OffsetCommitValue(offset=offset, commit_timestamp=at_ms)) for p in (0, 1)],
        timestamp_ms=at_ms,
    )
    await log.close()


def test_follow_picks_up_commits_and_resumes_from_its_checkpoint(spark, tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    asyncio.run(commit(data, 1, T0))

    def outputs():
        committed = {
            (r.group, r.topic, r.partition): r.offset
            for r in spark.read.parquet(str(out / "committed_offsets")).collect()
        }
        commits = sum(r.commits for r in spark.read.parquet(str(out / "commit_rate")).collect())
        return committed, commits

    def batches_with_data(query) -> int:
        return sum(1 for p in query.recentProgress if p["numInputRows"] > 0)

    query = follow(spark, str(data), str(out), interval_seconds=0.5, log=lambda *a: None)
    try:
        query.processAllAvailable()
        assert outputs() == ({("g", "t", 0): 1, ("g", "t", 1): 1}, 2)
        before = batches_with_data(query)
        asyncio.run(commit(data, 2, T0 + 60_000))
        query.processAllAvailable()
        assert outputs() == ({("g", "t", 0): 2, ("g", "t", 1): 2}, 4)
        assert batches_with_data(query) == before + 1  # the new commits, in one trigger
    finally:
        query.stop()

    query = follow(spark, str(data), str(out), interval_seconds=0.5, log=lambda *a: None)  # a restart
    try:
        query.processAllAvailable()
        assert outputs() == ({("g", "t", 0): 2, ("g", "t", 1): 2}, 4)  # nothing read twice
        asyncio.run(commit(data, 3, T0 + 120_000))
        query.processAllAvailable()
        assert outputs() == ({("g", "t", 0): 3, ("g", "t", 1): 3}, 6)
    finally:
        query.stop()
