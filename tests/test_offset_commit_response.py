"""The hand-encoded OffsetCommit response body is byte-identical to kio's, every version."""

import pytest

from coordinator.apis import RequestContext
from coordinator.groups.api import offset_commit_response
from protocol.messages import RequestHeader, codec, encode_body


@pytest.mark.parametrize("version", range(10))
def test_offset_commit_response_matches_kio(version):
    c = codec(8, version)
    ctx = RequestContext(RequestHeader(8, version, 1, "c"), c, "h", None)
    topics = [("orders", [(0, 0), (7, 25), (200_000, 12)]), ("", []), ("ü" * 70, [(1, 0)])]
    expected = encode_body(c, ctx.response(throttle_time=0, topics=tuple(
        ctx.nested("OffsetCommitResponseTopic", name=name, partitions=tuple(
            ctx.nested("OffsetCommitResponsePartition", partition_index=p, error_code=e) for p, e in parts))
        for name, parts in topics)))
    assert offset_commit_response(version, topics) == expected
    assert offset_commit_response(version, []) == encode_body(c, ctx.response(throttle_time=0, topics=()))
