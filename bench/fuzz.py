"""Fuzz the server with seeded random mutations of valid request frames, for every api key
and version it serves (as its ApiVersions says); after each batch it must still answer a
valid request, and its log must hold no traceback.

    python -m bench.fuzz --inputs 1000000 [--seed 1]      # a long run against a fresh server
    python -m bench.fuzz --port 9092 --inputs 10000       # against a running server
    python -m bench.fuzz --decode-only --inputs 1000000   # the request decoder alone, in-process

tests/test_fuzz.py runs the same generator on a small budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import random
import socket
import struct
import sys
import typing
import uuid
from typing import Any, Iterator

from protocol.messages import _strip_optional, codec, decode_response, encode_request

API_VERSIONS = 18


def sample_value(tp: Any, kind: str | None, rng: random.Random, depth: int = 0) -> Any:
    """A plausible value of a kio field type: small numbers, short names, one array element."""
    tp = _strip_optional(tp)
    if typing.get_origin(tp) is tuple:
        inner = typing.get_args(tp)[0]
        return () if depth > 3 or rng.random() < 0.3 else (sample_value(inner, kind, rng, depth + 1),)
    if dataclasses.is_dataclass(tp):
        return sample_entity(tp, rng, depth + 1)
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.choice([0, 1, 100]))
    if kind == "uuid":
        return rng.choice([uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))])
    if kind == "bool":
        return rng.random() < 0.5
    if kind in ("string",):
        return rng.choice(["", "t", "g", "fuzz-topic", "__consumer_offsets"])
    if kind in ("bytes", "records"):
        return rng.choice([b"", b"\x00" * 8])
    if kind and kind.startswith(("int", "uint")):
        return rng.choice([0, 1, -1, 2])
    if kind == "float64":
        return 0.0
    return None


def sample_entity(cls: type, rng: random.Random, depth: int = 0) -> Any:
    values = {}
    for f in dataclasses.fields(cls):
        values[f.name] = sample_value(f.type, f.metadata.get("kafka_type"), rng, depth)
    return cls(**values)


def valid_frame(api_key: int, version: int, rng: random.Random, corr: int) -> bytes | None:
    try:
        body = sample_entity(codec(api_key, version).request_type, rng)
        return encode_request(api_key, version, corr, "fuzz", body)
    except Exception:  # a sample the encoder refuses (a value out of a field's range): skip it
        return None


def mutate(data: bytes, rng: random.Random) -> bytes:
    """Mutate the body (the 4-byte size is fixed up after, so the frame itself is whole)."""
    body = bytearray(data[4:])
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        at = rng.randrange(8, max(len(body), 9)) if len(body) > 8 else len(body)
        if choice < 0.35 and body:
            at = min(at, len(body) - 1)
            body[at] = rng.randrange(256)
        elif choice < 0.5 and body:  # a length or count of -1 / huge
            body[at:at] = rng.choice([b"\xff\xff\xff\xff", b"\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00"])
        elif choice < 0.65:
            del body[at:]
        elif choice < 0.8:
            body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            body[at:at + 8] = struct.pack(">q", rng.choice([2**63 - 1, -(2**63), 2**31 - 1, -1]))
    return struct.pack(">i", len(body)) + bytes(body)


def served(port: int) -> list[tuple[int, int]]:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(encode_request(API_VERSIONS, 0, 1, "fuzz", codec(API_VERSIONS, 0).request_type()))
        data = _read_frame(s)
    _, body = decode_response(API_VERSIONS, 0, data)
    return [(k.api_key, v) for k in body.api_keys for v in range(k.min_version, k.max_version + 1)]


def _read_frame(s: socket.socket) -> bytes:
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf[4:4 + struct.unpack_from(">i", buf)[0]]


def inputs(apis: list[tuple[int, int]], count: int, seed: int) -> Iterator[tuple[int, int, bytes]]:
    rng = random.Random(seed)
    produced = 0
    while produced < count:
        for api_key, version in apis:
            base = valid_frame(api_key, version, rng, 1000 + produced)
            if base is None:
                continue
            # Mostly mutated; some sent as sampled, so handlers see odd but decodable values.
            yield api_key, version, mutate(base, rng) if rng.random() < 0.8 else base
            produced += 1
            if produced >= count:
                return


def still_serving(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(encode_request(API_VERSIONS, 0, 7, "fuzz", codec(API_VERSIONS, 0).request_type()))
        return decode_response(API_VERSIONS, 0, _read_frame(s))[0] == 7


def run(port: int, count: int, seed: int, batch: int = 50) -> int:
    """Send `count` mutated frames, up to `batch` per connection (pipelined), checking after
    each connection that the server answers a valid request. A frame that makes the server
    close the connection ends its batch: the frames after it go again on a new connection,
    so every frame is handled."""
    apis = served(port)
    handled = 0
    pending: list[bytes] = []
    source = inputs(apis, count, seed)
    exhausted = False
    while pending or not exhausted:
        while len(pending) < batch and not exhausted:
            item = next(source, None)
            if item is None:
                exhausted = True
            else:
                pending.append(item[2])
        if not pending:
            break
        n = _send_batch(port, pending)
        handled += n
        pending = pending[n:]
        if not still_serving(port):
            raise AssertionError("the server stopped answering")
    return handled


def _send_batch(port: int, frames: list[bytes]) -> int:
    """Send frames pipelined; how many the server handled: all if it answered the last one
    or kept the connection, else up to the one after the last answered (which closed it)."""
    ids = [struct.unpack_from(">i", f, 8)[0] for f in frames]
    answered: set[int] = set()
    closed = False
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        buf = b""
        try:
            s.sendall(b"".join(frames))
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)  # long polls (Fetch) may wait
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    closed = True
                    break
                buf += chunk
                while len(buf) >= 8 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    answered.add(struct.unpack_from(">i", buf, 4)[0])
                    buf = buf[4 + struct.unpack_from(">i", buf)[0]:]
        except ConnectionError:
            closed = True
        except socket.timeout:
            return len(frames)
    if not closed or ids[-1] in answered:
        return len(frames)
    last = max((i for i, c in enumerate(ids) if c in answered), default=-1)
    return min(len(frames), last + 2)


def decode_only(apis: list[tuple[int, int]], count: int, seed: int) -> dict[str, int]:
    """Feed mutated frames straight to the request decoder (no server): only its defined
    errors may escape. Returns how many frames decoded and how many were refused."""
    from protocol.messages import MalformedRequest, UnknownApi, decode_request

    outcome = {"decoded": 0, "refused": 0}
    for _, _, data in inputs(apis, count, seed):
        try:
            decode_request(data[4:])
            outcome["decoded"] += 1
        except (MalformedRequest, UnknownApi):
            outcome["refused"] += 1
    return outcome


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, help="a running server (default: start one)")
    p.add_argument("--inputs", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--decode-only", action="store_true",
                   help="feed the request decoder in this process, no server (much faster)")
    args = p.parse_args()
    if args.port:
        print(f"sent {run(args.port, args.inputs, args.seed)} mutated frames; the server still answers")
        return
    import tempfile
    from pathlib import Path

    from tests.conftest import ServerProcess
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", ["--fetch-max-wait-ms", "50"])
        server.start()
        try:
            if args.decode_only:
                apis = served(server.port)
                server.close()
                print(f"{args.inputs} mutated frames of {len(apis)} api versions decoded in-process:",
                      decode_only(apis, args.inputs, args.seed))
                return
            try:
                n = run(server.port, args.inputs, args.seed)
            except Exception:
                import os
                import subprocess
                spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
                if os.path.exists(spy):
                    subprocess.run(["gdb", "-p", str(server.proc.pid), "-batch", "-ex", "bt 25"])
                print("fds:", len(os.listdir(f"/proc/{server.proc.pid}/fd")), open(f"/proc/{server.proc.pid}/stat").read().split()[13:15], file=sys.stderr)
                print(server.log_text()[-3000:], file=sys.stderr)
                raise
            log = server.log_text()
            print(f"sent {n} mutated frames; the server still answers; tracebacks in its log: "
                  f"{log.count('Traceback')}")
            if "Traceback" in log:
                print(log[log.index("Traceback") - 300:][:3000], file=sys.stderr)
                raise SystemExit(1)
        finally:
            server.close()


if __name__ == "__main__":
    main()
