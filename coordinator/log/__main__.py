"""`python -m coordinator.log dump PATH [--group G] [--offsets-decoder] [--no-records]`
and `python -m coordinator.log repair PARTITION_DIR`.

dump prints batches and records like kafka-dump-log; PATH is a data dir, a partition dir or
a segment file. `__consumer_offsets` keys and values are decoded (automatically for
directories named `__consumer_offsets-*`), `__transaction_state` and `__share_group_state`
records too (their directories: transaction metadata, ShareSnapshot / ShareUpdate), and
transaction markers everywhere; --group G reads only the partition that holds
G's records and shows only those. Read-only: a torn or corrupt tail is reported, never
repaired (that is what repair does, keeping a copy).
"""

from __future__ import annotations

import argparse
import mmap
import sys
from pathlib import Path
from typing import TextIO

from protocol.group_records import RecordDecodeError, decode_record
from protocol.share_records import decode_state_key, decode_state_value
from protocol.transaction_records import STATE_NAMES, decode_key as decode_txn_key, decode_value as decode_txn_value

from .offsets import partition_for
from protocol.record_batch import (
    COMMIT_MARKER,
    BatchHeader,
    CorruptBatch,
    iter_batch_records,
    marker_type,
    parse_header,
)

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _show(b: bytes | None, limit: int = 80) -> str:
    if b is None:
        return "null"
    text = b.decode("utf-8", "backslashreplace")
    return text if len(text) <= limit else text[:limit] + "..."


def _describe(key: bytes | None, value: bytes | None, control: bool, decoder: str | None) -> str:
    """A record as kafka-dump-log prints it with the matching decoder."""
    if control:
        kind = marker_type(key)
        if kind is None:
            return f" key: {_show(key)} payload: {_show(value)}"
        epoch = int.from_bytes(value[2:6], "big", signed=True) if value and len(value) >= 6 else -1
        return f" endTxnMarker: {'COMMIT' if kind == COMMIT_MARKER else 'ABORT'} coordinatorEpoch: {epoch}"
    if decoder is None or key is None:
        return f" key: {_show(key)} payload: {_show(value)}"
    try:
        if decoder == "transactions":
            k, v = decode_txn_key(key), decode_txn_value(value)
            payload = (
                "<DELETE>"
                if v is None
                else (
                    f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},state={STATE_NAMES[v.status]},"
                    f"partitions={v.partitions},txnLastUpdateTimestamp={v.last_update_ms},"
                    f"txnTimeoutMs={v.timeout_ms}"
                )
            )
            return f" key: transaction_metadata::transactionalId={k} payload: {payload}"
        if decoder == "share-state":
            sk = decode_state_key(key)
            sv = None if value is None else decode_state_value(sk, value)
            return f" key: {sk} payload: {'<DELETE>' if sv is None else sv}"
        record_key, record_value = decode_record(key, value)
        return f" key: {record_key} payload: {'<DELETE>' if record_value is None else record_value}"
    except (RecordDecodeError, IndexError) as e:
        return f" undecodable: {e} key: {_show(key)}"


def dump_file(path: Path, out: TextIO, decoder: str | None, records: bool, group: str | None = None) -> bool:
    """decoder: "offsets", "transactions", "share-state" or None (keys and values as text)."""
    print(f"Dumping {path}", file=out)
    size = path.stat().st_size
    if size == 0:
        return True
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            pos = 0
            while pos < size:
                try:
                    h = parse_header(view, pos)
                except CorruptBatch as e:
                    print(f"ERROR: {e} ({size - pos} bytes not shown)", file=out)
                    return False
                kind = "LogAppendTime" if h.is_log_append_time else "CreateTime"
                if group is not None:  # only the group's records, without the batches around them
                    _print_group_records(view[pos : pos + h.size], h, kind, group, out)
                    pos += h.size
                    continue
                print(
                    f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count}"
                    f" baseSequence: {h.base_sequence} producerId: {h.producer_id}"
                    f" producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch}"
                    f" isTransactional: {str(h.is_transactional).lower()}"
                    f" isControl: {str(h.is_control).lower()} position: {pos}"
                    f" {kind}: {h.max_timestamp} size: {h.size} magic: {h.magic}"
                    f" compresscodec: {CODECS.get(h.compression, h.compression)}"
                    f" crc: {h.crc} isvalid: true",
                    file=out,
                )
                if records:
                    for r in iter_batch_records(view[pos : pos + h.size], h):
                        line = f"| offset: {r.offset} {kind}: {r.timestamp}"
                        line += _describe(r.key, r.value, h.is_control, decoder)
                        if r.headers:
                            line += f" headers: {r.headers}"
                        print(line, file=out)
                pos += h.size
            return True
        finally:
            view.release()


def _print_group_records(batch: memoryview, h: BatchHeader, kind: str, group: str, out: TextIO) -> None:
    if h.is_control:
        return
    for r in iter_batch_records(batch, h):
        try:
            k, v = decode_record(r.key, r.value) if r.key is not None else (None, None)
        except RecordDecodeError:
            continue
        if getattr(k, "group", None) == group:
            print(
                f"| offset: {r.offset} {kind}: {r.timestamp} key: {k} payload: {'<DELETE>' if v is None else v}",
                file=out,
            )


def _files(path: Path, group: str | None) -> list[Path] | str:
    """The segment files to dump, or why there are none."""
    if not path.exists():
        return f"{path}: no such file or directory"
    if path.is_file():
        return [path]
    if group is not None and not path.name.startswith("__consumer_offsets-"):
        partitions = sorted(path.glob("__consumer_offsets-*"))
        if not partitions:
            return f"{path}: no __consumer_offsets partitions here"
        path = path / f"__consumer_offsets-{partition_for(group, len(partitions))}"
    files = sorted(path.glob("*.log"))
    if not files:  # a data dir: every partition in it
        files = sorted(path.glob("*-*/*.log"))
    return files or f"{path}: no segment files here"


def repair(directory: Path) -> int:
    """Remove the corrupt bytes of a partition log and nothing else: every valid batch after
    them stays, at its offsets (a torn tail with no valid batch after it is cut, as a start
    cuts it). A copy of the partition as it was is kept under <data dir>/.corrupt/. Run with
    the server stopped."""
    from ..data_dir import DataDirInUse, lock_data_dir, unlock_data_dir

    if not directory.is_dir() or not any(directory.glob("*.log")):
        print(f"{directory}: not a partition directory (no *.log segments)", file=sys.stderr)
        return 2
    try:  # the server holds it while it runs; cutting a log under it would race its appends
        lock = lock_data_dir(directory.parent)
    except DataDirInUse as e:
        print(f"error: {e}; stop the server first", file=sys.stderr)
        return 2
    try:
        return _repair(directory)
    finally:
        unlock_data_dir(lock)


def _repair(directory: Path) -> int:
    import shutil
    import time as _time

    from .loader import CHECKPOINT_FILE
    from .partition import PartitionLog

    copy = directory.parent / ".corrupt" / f"{directory.name}-{_time.strftime('%Y%m%dT%H%M%S')}"
    shutil.copytree(directory, copy)
    (directory / CHECKPOINT_FILE).unlink(missing_ok=True)  # every byte is read and CRC-checked again
    before = {p.name: p.stat().st_size for p in directory.glob("*.log")}
    plog = PartitionLog.open_sync(directory, repair=True)
    after = {p.name: p.stat().st_size for p in directory.glob("*.log")}
    plog.close_sync()
    cut = {n: size - after.get(n, 0) for n, size in before.items() if size != after.get(n, 0)}
    print(
        f"{directory}: offsets [{plog.log_start_offset}, {plog.log_end_offset}) kept; "
        + (", ".join(f"{n}: {c} bytes cut" for n, c in sorted(cut.items())) or "nothing to cut")
        + f"; the log as it was is in {copy}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m coordinator.log")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="print the batches and records of a segment or log directory")
    d.add_argument("path", type=Path)
    d.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode __consumer_offsets keys/values (default for such directories)",
    )
    d.add_argument("--no-records", action="store_true", help="batch headers only")
    d.add_argument("--group", help="only this group's records (finds its __consumer_offsets partition)")
    r = sub.add_parser(
        "repair", help="remove the corrupt bytes of a partition log, keeping every valid batch after them (and a copy)"
    )
    r.add_argument("path", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "repair":
        return repair(args.path)
    files = _files(args.path, args.group)
    if isinstance(files, str):
        print(f"error: {files}", file=sys.stderr)
        return 2
    ok = True
    try:
        for f in files:
            decoder = (
                "transactions"
                if f.parent.name.startswith("__transaction_state-")
                else "share-state"
                if f.parent.name.startswith("__share_group_state-")
                else "offsets"
                if args.offsets_decoder or f.parent.name.startswith("__consumer_offsets-")
                else None
            )
            ok &= dump_file(f, sys.stdout, decoder, not args.no_records, args.group)
    except BrokenPipeError:
        return 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
