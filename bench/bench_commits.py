"""Durable offset commits and startup recovery of the __consumer_offsets log.

1. Commits/s with 1, 10, 100 concurrent committing members (fsync=always by default),
   each member in its own group, each waiting for its commit before the next.
2. Startup: write a log of N offset-commit records with the project's log writer, start
   the server on it, time until it is ready, and read its peak RSS.

    python bench/bench_commits.py [--seconds 5] [--records 1000000] [--fsync always]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_groups import SYNC, V_SYNC, form_group  # noqa: E402
from bench.wire_client import WireClient, request_class  # noqa: E402
from coordinator.log.offsets import OffsetsLog  # noqa: E402
from protocol.group_records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value  # noqa: E402
from protocol.messages import decode_response, encode_request  # noqa: E402

COMMIT, V_COMMIT = 8, 8
CommitReq = request_class(COMMIT, V_COMMIT)
CommitTopic = request_class(COMMIT, V_COMMIT, "OffsetCommitRequestTopic")
CommitPartition = request_class(COMMIT, V_COMMIT, "OffsetCommitRequestPartition")

_SENTINEL = (0x0123456789ABCDEF).to_bytes(8, "big")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
CORRELATION_POS = 8  # in a request frame: size, api key, api version, correlation id


def commit_frame(group: str, member: str, gen: int) -> tuple[bytearray, int]:
    """An OffsetCommit frame for partition t-0, and where its committed offset sits."""
    frame = bytearray(encode_request(COMMIT, V_COMMIT, 0, "committer", CommitReq(
        group_id=group, generation_id_or_member_epoch=gen, member_id=member, group_instance_id=None,
        topics=(CommitTopic(name="t", partitions=(CommitPartition(
            partition_index=0, committed_offset=int.from_bytes(_SENTINEL, "big"), committed_leader_epoch=-1,
            committed_metadata=""),)),))))
    pos = frame.find(_SENTINEL)
    assert pos > 0 and frame.find(_SENTINEL, pos + 1) < 0
    return frame, pos


class FastCommitter(asyncio.Protocol):
    """One member committing offsets 1, 2, 3... each after the previous one is answered.

    So that the benchmark measures the server, not this client: the request frame is
    encoded once and only its correlation id and offset are patched; of each answer only
    the correlation id and the error code are read (the first one is fully decoded to check
    where the error code sits)."""

    def __init__(self, frame: bytearray, offset_pos: int, deadline: float, done: asyncio.Future) -> None:
        self.frame, self.offset_pos, self.deadline, self.done = frame, offset_pos, deadline, done
        self.inbuf = bytearray()
        self.sent = self.count = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._send()

    def _send(self) -> None:
        if time.perf_counter() >= self.deadline:
            if not self.done.done():
                self.done.set_result(self.count)
            return
        self.sent += 1
        _INT32.pack_into(self.frame, CORRELATION_POS, self.sent)
        _INT64.pack_into(self.frame, self.offset_pos, self.sent)
        self.transport.write(bytes(self.frame))

    def data_received(self, data: bytes) -> None:
        buf = self.inbuf
        buf += data
        while len(buf) >= 4:
            end = 4 + int.from_bytes(buf[:4], "big")
            if len(buf) < end:
                break
            frame = bytes(buf[4:end])
            del buf[:end]
            # v8 response ends: error_code int16, then partition, topic and body tagged fields
            error = int.from_bytes(frame[-5:-3], "big", signed=True)
            if self.count == 0:
                _, body = decode_response(COMMIT, V_COMMIT, frame)
                assert body.topics[0].partitions[0].error_code == error
            assert int.from_bytes(frame[:4], "big") == self.sent and error == 0, (self.sent, error)
            self.count += 1
            self._send()

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"committer connection lost: {exc!r}"))


def start_server(data: str, extra: list[str]) -> tuple[subprocess.Popen, int, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "coordinator", "--port", "0", "--data-dir", data,
                             "--log-level", "WARNING", *extra], cwd=ROOT, stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    return proc, int(line.strip().rsplit(":", 1)[1]), time.perf_counter() - t0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def bench_commits(server_pid: int, port: int, members: int, seconds: float, one_group: bool) -> None:
    """members commit concurrently, all in one group (one partition: fsyncs are shared
    by group commit) or each in its own group (spread over the 50 partitions)."""
    conns = [await WireClient(f"committer-{i}").connect("127.0.0.1", port) for i in range(members)]
    identities = []
    if one_group:
        group = f"commit-group-{members}"
        identities = [(group, m, gen) for m, gen in await form_group(conns, group)]
    else:
        for i, c in enumerate(conns):
            (member, gen), = await form_group([c], f"commit-group-{members}-{i}")
            identities.append((f"commit-group-{members}-{i}", member, gen))
    deadline = time.perf_counter() + seconds
    loop = asyncio.get_running_loop()
    committers = [FastCommitter(*commit_frame(*ident), deadline, loop.create_future()) for ident in identities]
    start, cpu = time.perf_counter(), cpu_seconds(server_pid)
    for c in committers:
        await loop.create_connection(lambda c=c: c, "127.0.0.1", port)
    count = sum(await asyncio.gather(*(c.done for c in committers)))
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(server_pid) - cpu
    layout = "in one group " if one_group else "in own groups"
    print(f"durable commits: {members:>3} concurrent members {layout}: {count / elapsed:>8,.0f} commits/s"
          f"  (server CPU {cpu / max(count, 1) * 1e6:4.0f} us/commit)")
    for c in committers:
        c.transport.close()
    for c in conns:
        await c.close()


async def write_log(data: str, records: int, groups: int = 1000, partitions_per_topic: int = 100) -> int:
    """N offset commits spread over groups x (10 topics x partitions), like a busy cluster.
    Returns how many distinct (group, topic, partition) keys were committed."""
    keys = set()
    log = await OffsetsLog.open(data, background=False)
    now = int(time.time() * 1000)
    batch = 500
    written = 0
    while written < records:
        g = f"group-{(written // batch) % groups}"
        pairs = [(OffsetCommitKey(g, f"topic-{(written + i) % 10}", (written + i) % partitions_per_topic),
                  OffsetCommitValue(offset=written + i, metadata="", commit_timestamp=now, leader_epoch=-1))
                 for i in range(min(batch, records - written))]
        keys.update(k for k, _ in pairs)
        log.log_for(g).append_records([(encode_key(k), encode_value(v)) for k, v in pairs], now)
        written += len(pairs)
    await log.close()
    return len(keys)


async def bench_recovery(records: int) -> None:
    data = tempfile.mkdtemp(prefix="bench-recovery-")
    try:
        t0 = time.perf_counter()
        keys = await write_log(data, records)
        size = sum(f.stat().st_size for f in Path(data).rglob("*.log")) / 2**20
        print(f"recovery: wrote {records:,} offset records ({size:.0f} MiB, {keys:,} distinct committed "
              f"partitions) in {time.perf_counter() - t0:.1f} s")
        proc, _, ready = start_server(data, [])
        rss = peak_rss_mb(proc.pid)
        print(f"recovery: server ready after {ready:.2f} s on {records:,} records; peak RSS {rss:.0f} MiB "
              f"({rss / keys * 100_000:.0f} MiB per 100k committed partitions, interpreter included)")
        proc.terminate()
        proc.wait()
    finally:
        shutil.rmtree(data, ignore_errors=True)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--fsync", default="always")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="bench-commits-")
    proc, port, ready = start_server(data, ["--fsync", args.fsync])
    print(f"empty server ready in {ready * 1000:.0f} ms (fsync={args.fsync})")
    try:
        for one_group in (True, False):
            for n in (1, 10, 100):
                await bench_commits(proc.pid, port, n, args.seconds, one_group)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    if args.records:
        await bench_recovery(args.records)


if __name__ == "__main__":
    import uvloop

    uvloop.run(main())
