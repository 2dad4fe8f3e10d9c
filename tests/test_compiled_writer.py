"""protocol/compiled_writer.py writes every response body byte for byte as kio's
entity_writer does: random bodies of every response schema kio has, both writers."""

from __future__ import annotations

import io
import struct

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
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_response_bytes_match_kio(api_key: int, version: int, data: st.DataObject) -> None:
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
