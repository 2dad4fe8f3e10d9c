"""report.html opened in a real browser: headless Chromium (Debian's package, which `make test`
installs) loads it from disk with no network, every chart renders, the page logs nothing to
the console, and a screenshot is saved."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

pytest.importorskip("pyspark")

from coordinator.log.offsets import OffsetsLog  # noqa: E402
from pipeline.run import run  # noqa: E402
from protocol.consumer_protocol import write_assignment  # noqa: E402
from protocol.group_records import GroupMetadataKey, GroupMetadataValue, MemberMetadata  # noqa: E402

from .test_lag import T0, write as write_lag_data  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark: a JVM and Python workers per session
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def member(mid: str, partitions: list[int]) -> MemberMetadata:
    return MemberMetadata(
        member_id=mid,
        client_id=f"client-{mid}",
        client_host="/127.0.0.1",
        session_timeout=10_000,
        subscription=b"",
        assignment=write_assignment(0, [("events", partitions)]),
        rebalance_timeout=30_000,
    )


async def add_generations(data) -> None:
    log = await OffsetsLog.open(data, partitions=3, background=False)
    for generation, owners in enumerate([{"a": [1, 2]}, {"a": [1], "b": [2]}], start=1):
        await log.append(
            "slow",
            [
                (
                    GroupMetadataKey("slow"),
                    GroupMetadataValue(
                        protocol_type="consumer",
                        generation=generation,
                        protocol="range",
                        leader="a",
                        members=tuple(member(m, ps) for m, ps in owners.items()),
                        current_state_timestamp=T0 + generation * 5000,
                    ),
                )
            ],
            timestamp_ms=T0 + generation * 5000,
        )
    await log.close()


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs Debian's package)")
def test_report_renders_in_headless_chromium(spark, tmp_path):
    data = tmp_path / "data"
    asyncio.run(write_lag_data(data))
    asyncio.run(add_generations(data))
    out = tmp_path / "out"
    run(spark, str(data), str(out), log=lambda *a: None)
    report = out / "report.html"
    charts = report.read_text().count('class="plotly-graph-div"')
    assert charts >= 3  # lag over time, membership, commit rate

    page = chromium("--dump-dom", report.as_uri())
    assert page.returncode == 0, page.stderr[-2000:]
    console = [line for line in page.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script error, no warning
    assert page.stdout.count('class="plotly-graph-div js-plotly-plot"') == charts  # each drawn by plotly.js, offline
    assert "slow: owners per partition" in page.stdout and "client-b" in page.stdout

    shot = tmp_path / "report.png"
    done = chromium("--window-size=1400,3000", f"--screenshot={shot}", report.as_uri())
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
