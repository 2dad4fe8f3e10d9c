"""Share-group progress in the pipeline: `__share_group_state` replayed off the server
(pipeline/share.py) gives each share-partition's start offset and lag as the live server's
DescribeShareGroupOffsets does, and the job writes share_progress and its report section."""

from __future__ import annotations

import pytest

from pipeline.run import run
from pipeline.share import share_state_table
from tests.support.share import ACCEPT, REJECT, SACK, SFETCH, acquired, cls, sack, sfetch, start

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark: a JVM and Python workers per session


async def test_share_progress_equals_the_servers_offsets(spark, server, tmp_path):
    conn, tid = await start(server, topic="jobs", group="workers", records=20)
    try:
        r = await conn.request(SFETCH, 1, sfetch("workers", "a", 0, tid, max_records=10))
        assert acquired(r) == [(0, 9, 1)]
        await conn.request(
            SACK, 1, sack("workers", "a", 1, tid, {0: [(0, 4, [ACCEPT]), (5, 5, [REJECT]), (7, 7, [ACCEPT])]})
        )
        G = cls(90, 1, "DescribeShareGroupOffsetsRequestGroup")
        described = (await conn.request(90, 1, cls(90, 1)(groups=(G(group_id="workers", topics=None),)))).groups[0]
        live = described.topics[0].partitions[0]
    finally:
        await conn.close()
    server.stop()

    (row,) = share_state_table(server.data_dir).to_pylist()
    assert (row["group"], row["topic"], row["partition"], row["start_offset"]) == (
        "workers",
        "jobs",
        0,
        live.start_offset,
    )
    # As Kafka writes it: the acknowledgement with the start it had (0), the acquisitions of
    # 6, 8 and 9 not at all.
    assert (row["start_offset"], row["acknowledged"], row["archived"], row["in_flight"]) == (0, 6, 1, 0)

    out = tmp_path / "out"
    summary = run(spark, str(server.data_dir), str(out), log=lambda *a: None)
    assert summary["share-partitions"] == 1
    (progress,) = spark.read.parquet(str(out / "share_progress")).collect()
    assert (progress.group, progress.topic, progress.start_offset, progress.log_end_offset, progress.lag) == (
        "workers",
        "jobs",
        0,
        20,
        live.lag,
    )
    assert "Share groups (KIP-932)" in (out / "report.html").read_text()
