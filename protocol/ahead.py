"""Request versions Kafka 4.4 serves that kio 0.6.5 does not know yet.

- ApiVersions v5 (KIP-1242): the request adds ClusterId (nullable) and NodeId, which a client
  that knows whom it meant to reach sends so the broker can tell it was misrouted; the response
  is v4's.
- DeleteGroups v3: the request is v2's; each result adds a nullable ErrorMessage.

Each is read or written here and otherwise stands in for the kio classes of the version before
it, so handlers see one shape (the LEGACY table's scheme, protocol/legacy.py). Sans-IO.
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from kio.serial import readers as _kio

from .wire import MalformedRequest, encode_uvarint, skip_tagged_fields


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequestV5:
    """ApiVersionsRequest v5: v4's fields and the misrouting check's two."""

    __version__: ClassVar[int] = 5
    client_software_name: str = field(metadata={"kafka_type": "string"})
    client_software_version: str = field(metadata={"kafka_type": "string"})
    cluster_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    node_id: int = field(metadata={"kafka_type": "int32"}, default=-1)


def _api_versions_v5_read(buf: bytes, pos: int) -> tuple[ApiVersionsRequestV5, int]:
    start = pos
    try:
        name, n = _kio.read_compact_string(buf, pos)
        pos += n
        version, n = _kio.read_compact_string(buf, pos)
        pos += n
        cluster_id, n = _kio.read_compact_string_nullable(buf, pos)
        pos += n
        (node_id,) = struct.unpack_from(">i", buf, pos)
        pos += 4
    except (ValueError, struct.error, UnicodeDecodeError) as e:
        raise MalformedRequest(f"ApiVersions v5: {e!r}") from e
    pos = skip_tagged_fields(buf, pos)
    body = ApiVersionsRequestV5(
        client_software_name=name, client_software_version=version, cluster_id=cluster_id, node_id=node_id
    )
    return body, pos - start


def api_versions_v5_request(name: str, version: str, cluster_id: str | None, node_id: int) -> bytes:
    """The body of an ApiVersions v5 request (client direction, for tests)."""

    def compact(s: str | None) -> bytes:
        if s is None:
            return b"\0"
        data = s.encode()
        return encode_uvarint(len(data) + 1) + data

    return compact(name) + compact(version) + compact(cluster_id) + struct.pack(">i", node_id) + b"\0"


def _delete_groups_v3_write(out: Any, response: Any) -> None:
    """v2's answer with each result's ErrorMessage: Kafka 4.4 sets one only for a streams
    group whose topology-description plugin failed (none here), so it is null."""
    out.write(struct.pack(">i", _ms(response.throttle_time)))
    out.write(encode_uvarint(len(response.results) + 1))
    for r in response.results:
        gid = r.group_id.encode()
        out.write(encode_uvarint(len(gid) + 1) + gid + struct.pack(">h", r.error_code) + b"\0\0")
    out.write(b"\0")


def _ms(value: Any) -> int:
    """A throttle time as handlers give it (an int) or kio reads it (a timedelta)."""
    return value if type(value) is int else value // datetime.timedelta(milliseconds=1)


# (api key, version) -> (the version whose classes stand in, reader or None, writer or None)
AHEAD: dict[tuple[int, int], tuple[int, Callable[..., Any] | None, Callable[..., Any] | None]] = {
    (18, 5): (4, _api_versions_v5_read, None),
    (42, 3): (2, None, _delete_groups_v3_write),
}
