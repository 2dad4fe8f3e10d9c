"""protocol/compiled_writer.py writes every response body byte for byte as kio's
entity_writer does: random bodies of every response schema kio has, both writers."""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_writer
from kio.serial.errors import SerialError
from kio.static.constants import EntityType
from kio.static.primitive import Records

from protocol.compiled_writer import compiled_writer
from protocol.messages import _entity

pytestmark = pytest.mark.slow  # hypothesis bodies of every response schema, both writers

st.register_type_strategy(Records, st.none() | st.binary(max_size=64))  # (kio registers none for record sets)

REFUSED = (struct.error, SerialError, UnicodeEncodeError, TypeError, ValueError)
RESPONSES = [
    (key, version) for key, name in sorted(api_key_map.items()) for version in sorted(schema_name_map.get(name, {}))
]


def kio_bytes(entity_type: type, body: object) -> bytes:
    out = io.BytesIO()
    entity_writer(entity_type)(out, body)
    return out.getvalue()


@pytest.mark.parametrize(("api_key", "version"), RESPONSES)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_response_bytes_match_kio(api_key: int, version: int, data: st.DataObject) -> None:
    """Our writer gives kio's bytes, also when the millisecond fields are the ints handlers give."""
    entity_type = _entity(load_payload_module(api_key, version, EntityType.response), "Response")
    body = data.draw(st.from_type(entity_type))
    try:
        expected = kio_bytes(entity_type, body)
    except REFUSED:  # a value kio refuses (out of a field's range): ours refuses it too
        with pytest.raises(REFUSED):
            compiled_writer(entity_type)(io.BytesIO(), body)
        return
    out = io.BytesIO()
    compiled_writer(entity_type)(out, body)
    assert out.getvalue() == expected
    assert compiled_writer(entity_type).encode(with_int_milliseconds(body)) == expected


def with_int_milliseconds(value: Any) -> Any:
    """`value` with every untagged millisecond field (a timedelta in kio) given as the int
    milliseconds handlers give, at any depth."""
    if isinstance(value, tuple):
        return tuple(with_int_milliseconds(v) for v in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes = {}
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if isinstance(v, datetime.timedelta) and "tag" not in f.metadata:
            changes[f.name] = round(v.total_seconds() * 1000)
        elif isinstance(v, tuple) or dataclasses.is_dataclass(v):
            changes[f.name] = with_int_milliseconds(v)
    return dataclasses.replace(value, **changes)
