"""Fuzz the server with seeded random mutations of valid request frames, for every api key
and version it serves (as its ApiVersions says); after each batch it must still answer a
valid request, and its log must hold no traceback.

    python -m bench.fuzz --inputs 1000000 [--seed 1]      # a long run against a fresh server
    python -m bench.fuzz --port 9092 --inputs 10000       # against a running server
    python -m bench.fuzz --decode-only --inputs 1000000   # the request decoder alone, in-process
    python -m bench.fuzz --hypothesis --inputs 1000000    # hypothesis drives the decoder

With --hypothesis, hypothesis builds each request body field by field from the api's
schema (boundary numbers, nulls where the version allows them, odd strings), encodes it,
and may then overwrite, insert or cut bytes; a valid body must decode, a mutated one
may only raise the decoder's own errors, and a failure shrinks to a minimal frame.
tests/test_fuzz.py runs both generators on a small budget.
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


_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": -16, "uint32": -32, "uint64": -64}


def value_strategy(tp: Any, kind: str | None, depth: int = 0) -> Any:
    """A hypothesis strategy for one kio field: its whole range, boundaries favoured."""
    from hypothesis import strategies as st

    inner = _strip_optional(tp)
    nullable = inner is not tp
    if typing.get_origin(inner) is tuple:
        element = value_strategy(typing.get_args(inner)[0], kind, depth + 1)
        strategy = st.lists(element, max_size=0 if depth > 3 else 3).map(tuple)
    elif dataclasses.is_dataclass(inner):
        strategy = entity_strategy(inner, depth + 1)
    elif kind in ("timedelta_i32", "timedelta_i64"):
        # An int64 of ms reaches past what kio's codec round-trips: its writer goes through a
        # float of seconds (exact to 2**53 ms) and its reader through an int64 of microseconds
        # (a frame with more is refused as MalformedRequest, which the mutations cover), so a
        # frame "our own encoder made" holds at most 2**53 ms either way.
        low, high = (-(2**31), 2**31 - 1) if kind == "timedelta_i32" else (-(2**53), 2**53)
        strategy = st.integers(low, high).map(lambda n: datetime.timedelta(milliseconds=n))
    elif kind == "uuid":
        strategy = st.uuids() | st.just(uuid.UUID(int=0))
    elif kind == "bool":
        strategy = st.booleans()
    elif kind == "string":
        strategy = st.sampled_from(["", "t", "g", "__consumer_offsets"]) | st.text(max_size=40)
    elif kind in ("bytes", "records"):
        strategy = st.binary(max_size=40)
    elif kind in _INT_RANGES:
        bits = _INT_RANGES[kind]
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if bits > 0 else (0, 2**-bits - 1)
        strategy = st.sampled_from(sorted({low, high, 0, 1, -1 if low < 0 else 2})) | st.integers(low, high)
    elif kind == "float64":
        strategy = st.floats()
    else:
        strategy = st.none()
    return strategy | st.none() if nullable else strategy


def entity_strategy(cls: type, depth: int = 0) -> Any:
    from hypothesis import strategies as st

    return st.builds(
        cls, **{f.name: value_strategy(f.type, f.metadata.get("kafka_type"), depth) for f in dataclasses.fields(cls)}
    )


def frame_strategy(apis: list[tuple[int, int]]) -> Any:
    """(api, frame, mutated): a served api version, a request built from its schema and
    encoded, then (mutated=True) bytes overwritten, inserted or cut by hypothesis."""
    from hypothesis import strategies as st

    def body(api: tuple[int, int]) -> Any:
        return st.tuples(st.just(api), entity_strategy(codec(*api).request_type))

    edits = st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from(["set", "insert", "cut"]), st.binary(min_size=1, max_size=8)),
        max_size=4,
    )
    return st.tuples(st.sampled_from(apis).flatmap(body), edits)


def edit_frame(frame: bytes, edits: list[tuple[float, str, bytes]]) -> bytes:
    """Apply hypothesis's edits to the body after the api key and version (the size
    prefix is fixed up after, so the frame itself stays whole)."""
    body = bytearray(frame[4:])
    for where, op, data in edits:
        at = 4 + int(where * (len(body) - 4))
        if op == "set":
            body[at : at + len(data)] = data
        elif op == "insert":
            body[at:at] = data
        else:
            del body[at : at + len(data)]
    return struct.pack(">i", len(body)) + bytes(body)


def hypothesis_decode(apis: list[tuple[int, int]], examples: int) -> dict[str, int]:
    """Drive the request decoder with frame_strategy: a valid frame must decode, a mutated
    one may only raise MalformedRequest / UnknownApi. Raises hypothesis's shrunk failure."""
    from hypothesis import HealthCheck, given, settings

    from protocol.messages import MalformedRequest, UnknownApi, decode_request

    outcome = {"decoded": 0, "refused": 0, "unencodable": 0}

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(frame_strategy(apis))
    def decode(case):
        ((api_key, version), request), edits = case
        try:
            frame = encode_request(api_key, version, 7, "fuzz", request)
        except Exception:  # a value this version cannot carry (a null, a too long string)
            outcome["unencodable"] += 1
            return
        # Old versions served by a newer version's type (Produce v0-2, OffsetCommit v0-1) have
        # their own readers: the newer type's encoding is not a valid frame of theirs.
        if edits or request.__version__ != version:
            frame = edit_frame(frame, edits)
            try:
                decode_request(frame[4:])
            except (MalformedRequest, UnknownApi):
                outcome["refused"] += 1
                return
        else:
            decode_request(frame[4:])  # a frame our own encoder made must decode
        outcome["decoded"] += 1

    decode()
    return outcome


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
            body[at : at + 8] = struct.pack(">q", rng.choice([2**63 - 1, -(2**63), 2**31 - 1, -1]))
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
    return buf[4 : 4 + struct.unpack_from(">i", buf)[0]]


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
                    buf = buf[4 + struct.unpack_from(">i", buf)[0] :]
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
    p.add_argument(
        "--decode-only", action="store_true", help="feed the request decoder in this process, no server (much faster)"
    )
    p.add_argument(
        "--hypothesis", action="store_true", help="hypothesis builds and mutates the frames for the in-process decoder"
    )
    args = p.parse_args()
    if args.port:
        print(f"sent {run(args.port, args.inputs, args.seed)} mutated frames; the server still answers")
        return
    import tempfile
    from pathlib import Path

    from tests.support.process import ServerProcess

    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", ["--fetch-max-wait-ms", "50"])
        server.start()
        try:
            if args.decode_only or args.hypothesis:
                apis = served(server.port)
                server.close()
                if args.hypothesis:
                    print(
                        f"{args.inputs} hypothesis examples over {len(apis)} api versions:",
                        hypothesis_decode(apis, args.inputs),
                    )
                else:
                    print(
                        f"{args.inputs} mutated frames of {len(apis)} api versions decoded in-process:",
                        decode_only(apis, args.inputs, args.seed),
                    )
                return
            try:
                n = run(server.port, args.inputs, args.seed)
            except Exception:
                print(server.log_text()[-3000:], file=sys.stderr)
                raise
            log = server.log_text()
            print(f"sent {n} mutated frames; the server still answers; tracebacks in its log: {log.count('Traceback')}")
            if "Traceback" in log:
                print(log[log.index("Traceback") - 300 :][:3000], file=sys.stderr)
                raise SystemExit(1)
        finally:
            server.close()


if __name__ == "__main__":
    main()
