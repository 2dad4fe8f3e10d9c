"""Raw requests for the differential suite: kio bodies built from plain values for any API and
version (a field not given takes its schema default, else its type's zero), sent the same way
to Kafka 4.4 and to this server."""

from __future__ import annotations

import dataclasses
import datetime
import socket
import typing
import uuid
from functools import cache
from typing import Any

from kio.index import load_payload_module
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from protocol.messages import NEWER, codec, decode_response, encode_request
from tests.support.raw_wire import Wire

NAMES = {k: "".join(p.capitalize() for p in v.split("_")) for k, v in api_key_map.items()}
# Kafka 4.4's APIs newer than kio 0.6.5's index
NAMES |= {93: "StreamsGroupTopologyDescriptionUpdate", 94: "UnregisterController"}


def kio_versions(api_key: int) -> set[int]:
    name = api_key_map.get(api_key)
    return set(schema_name_map.get(name, {})) if name else set()


@cache
def request_type(api_key: int, version: int) -> type:
    if (api_key, version) in NEWER:  # a version kio lacks (protocol/streams_*_v1.py)
        return codec(api_key, version).request_type
    module = load_payload_module(api_key, version, EntityType.request)
    return next(
        v
        for k, v in vars(module).items()
        if k.endswith("Request") and getattr(v, "__type__", None) is EntityType.request
    )


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _entity_of(tp: Any) -> type | None:
    """The entity class of `Entity`, `tuple[Entity, ...]` or their optional forms."""
    for t in (tp, *typing.get_args(tp)):
        if dataclasses.is_dataclass(t):
            return t  # type: ignore[return-value]  # (a dataclass class, not an instance)
        for a in typing.get_args(t):
            if dataclasses.is_dataclass(a):
                return a  # type: ignore[return-value]  # (a dataclass class, not an instance)
    return None


def _optional(tp: Any) -> bool:
    return type(None) in typing.get_args(tp)


def _is_tuple(tp: Any) -> bool:
    return any(typing.get_origin(t) is tuple for t in (tp, *typing.get_args(tp)))


def _zero(f: dataclasses.Field[Any], tp: Any) -> Any:
    kind = f.metadata.get("kafka_type")
    if _optional(tp):
        return None  # (a nullable array: null, as a client that leaves it out sends)
    if _is_tuple(tp):
        return ()
    entity = _entity_of(tp)
    if entity is not None:
        return make(entity, {})
    if _optional(tp):
        return None
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kind == "string":
        return ""
    if kind == "bool":
        return False
    if kind == "uuid":
        return uuid.UUID(int=0)
    if kind in ("bytes", "records"):
        return b""
    if kind == "float64":
        return 0.0
    return 0


def _convert(f: dataclasses.Field[Any], tp: Any, value: Any) -> Any:
    entity = _entity_of(tp)
    if entity is not None and _is_tuple(tp) and isinstance(value, list | tuple):
        return tuple(make(entity, v) if isinstance(v, dict) else v for v in value)
    if entity is not None and isinstance(value, dict):
        return make(entity, value)
    if f.metadata.get("kafka_type") in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if _is_tuple(tp) and isinstance(value, list):
        return tuple(value)
    return value


def make(cls: type, values: dict[str, Any]) -> Any:
    """An instance of kio entity `cls`; values for fields this version lacks are ignored."""
    hints = _hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if f.name in values:
            kw[f.name] = _convert(f, tp, values[f.name])
        elif f.default is not dataclasses.MISSING:
            kw[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kw[f.name] = f.default_factory()
        else:
            kw[f.name] = _zero(f, tp)
    return cls(**kw)


class Conn:
    """One raw connection; reopened after the broker closes it. `call` returns the decoded
    body, or "closed" / "timeout" when the broker answered with no body."""

    def __init__(self, port: int, timeout: float = 15) -> None:
        self.port = port
        self.timeout = timeout
        self.wire: Wire | None = None
        self.corr = 0

    def call(self, api_key: int, version: int, values: dict[str, Any], client_id: str = "oracle") -> Any:
        body = make(request_type(api_key, version), values)
        if self.wire is None:
            self.wire = Wire(self.port)
            self.wire.sock.settimeout(self.timeout)
        self.corr += 1
        try:
            self.wire.send(encode_request(api_key, version, self.corr, client_id, body))
            data = self.wire.read_frame()
        except TimeoutError:
            self.close()
            return "timeout"
        except OSError:
            self.close()
            return "closed"
        if data is None:
            self.close()
            return "closed"
        try:
            corr, response = decode_response(api_key, version, data)
        except Exception as e:  # (kio's errors: an answer its schema cannot read is itself a finding)
            return f"undecodable: {type(e).__name__}: {data.hex()[:120]}"
        assert corr == self.corr
        return response

    def close(self) -> None:
        if self.wire is not None:
            try:
                self.wire.close()
            except OSError:
                pass
            self.wire = None


def api_ranges(port: int, version: int = 3) -> tuple[dict[int, tuple[int, int]], Any]:
    c = Conn(port)
    try:
        body = c.call(18, version, {"client_software_name": "oracle", "client_software_version": "1"})
    finally:
        c.close()
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}, body


def common_versions(kafka: dict[int, tuple[int, int]], ours: dict[int, tuple[int, int]], api_key: int) -> list[int]:
    """The versions of an API both brokers serve and kio can build."""
    if api_key not in kafka or api_key not in ours:
        return []
    lo = max(kafka[api_key][0], ours[api_key][0])
    hi = min(kafka[api_key][1], ours[api_key][1])
    return sorted(v for v in kio_versions(api_key) if lo <= v <= hi)


def port_answers(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
