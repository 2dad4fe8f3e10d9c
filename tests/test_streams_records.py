"""The KIP-1071 streams-group records of __consumer_offsets and the version 1 bodies of
StreamsGroupHeartbeat/StreamsGroupDescribe, against bytes written by Kafka 4.4's own generated
classes (kafka-group-coordinator and kafka-clients 4.4.0, each message's write() at version 0
resp. 1), and through the __consumer_offsets record codec."""

from __future__ import annotations

import datetime

import pytest

from protocol import group_records, streams_records as R
from protocol.messages import codec
from protocol.streams_describe_v1 import DescribedGroup, StreamsGroupDescribeResponse, Topology
from protocol.streams_heartbeat_v1 import StreamsGroupHeartbeatResponse, Status, TaskIds
from kio.serial import entity_reader

# value bytes after the int16 version, as Kafka 4.4 writes them
KAFKA = {
    "meta": "0000000500000000075bcd1502000400000001011902156e756d2e7374616e6462792e7265706c69636173023100",
    "member": "0003723102630b2f3132372e302e302e31000493e0000000010370310102681f90000203617a02610000",
    "member2": "010102630268ffffffff000000000270ff0100",
    "current": "00000003000000020102023003000000000000000201000903000000020000000302023102000000010001020230020000000100010100",
    "target": "020230030000000000000001000102023102000000030000",
    "targetmeta": "000000040100080000018bcfe56800",
    "topology": (
        "000000010302300206776f72647301010204726570010100023101010203636c000000000000020f636c65616e75702e"
        "706f6c69637908636f6d7061637400000102047265700000000400030100020101020000000000"
    ),
}
VALUES = {
    "meta": (
        R.StreamsGroupMetadataKey("g"),
        R.StreamsGroupMetadataValue(5, 123456789, 1, (("num.standby.replicas", "1"),)),
    ),
    "member": (
        R.StreamsGroupMemberMetadataKey("g", "m"),
        R.StreamsGroupMemberMetadataValue(
            None, "r1", "c", "/127.0.0.1", 300000, 1, "p1", R.Endpoint("h", 8080), (("az", "a"),)
        ),
    ),
    "member2": (
        R.StreamsGroupMemberMetadataKey("g", "m"),
        R.StreamsGroupMemberMetadataValue("", "", "c", "h", -1, 0, "p"),
    ),
    "current": (
        R.StreamsGroupCurrentMemberAssignmentKey("g", "m"),
        R.StreamsGroupCurrentMemberAssignmentValue(
            3, 2, 1, (("0", (0, 2)),), (("1", (1,)),), (), (("0", (1,)),), (), (), ((2, 3),), ()
        ),
    ),
    "target": (
        R.StreamsGroupTargetAssignmentMemberKey("g", "m"),
        R.StreamsGroupTargetAssignmentMemberValue((("0", (0, 1)),), (), (("1", (3,)),)),
    ),
    "targetmeta": (
        R.StreamsGroupTargetAssignmentMetadataKey("g"),
        R.StreamsGroupTargetAssignmentMetadataValue(4, 1700000000000),
    ),
    "topology": (
        R.StreamsGroupTopologyKey("g"),
        R.StreamsGroupTopologyValue(
            1,
            (
                R.Subtopology("0", ("words",), repartition_sink_topics=("rep",)),
                R.Subtopology(
                    "1",
                    state_changelog_topics=(R.TopicInfo("cl", 0, 0, (("cleanup.policy", "compact"),)),),
                    repartition_source_topics=(R.TopicInfo("rep", 4, 3),),
                    copartition_groups=(R.CopartitionGroup((), (), (0,)),),
                ),
            ),
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(KAFKA))
def test_values_are_kafkas_bytes(name):
    key, value = VALUES[name]
    raw = group_records.encode_value(value)
    assert raw is not None and raw.hex() == "0000" + KAFKA[name]
    k, v = group_records.decode_record(group_records.encode_key(key), raw)
    assert (k, v) == (key, value)


def test_keys_and_tombstones():
    key = R.StreamsGroupCurrentMemberAssignmentKey("g", "m")
    assert group_records.encode_key(key).hex() == "0016" + "00016700016d"  # type 22, then Kafka's key bytes
    assert group_records.decode_record(group_records.encode_key(key), None) == (key, None)
    for t, cls in (
        (17, R.StreamsGroupMetadataKey),
        (20, R.StreamsGroupTargetAssignmentMetadataKey),
        (23, R.StreamsGroupTopologyKey),
    ):
        raw = group_records.encode_key(cls("grp"))
        assert raw[:2] == t.to_bytes(2, "big") and group_records.decode_key(raw) == cls("grp")
    # type 18 (StreamsGroupPartitionMetadata, never shipped) stays raw
    assert type(group_records.decode_key(b"\x00\x12\x00\x01g")) is group_records.UnknownKey


def test_unknown_tags_are_skipped_and_bad_bytes_refused():
    value = bytes.fromhex("0000" + "00000001" + "0000000000000000" + "01" + "09" + "03" + "aabbcc")  # tag 9, 3 bytes
    assert R.decode_value(R.StreamsGroupMetadataKey("g"), value) == R.StreamsGroupMetadataValue(1, 0)
    with pytest.raises(group_records.RecordDecodeError):
        R.decode_value(R.StreamsGroupTopologyKey("g"), bytes.fromhex("0000000000010500"))  # a cut array


def test_version_1_bodies_are_kafkas_bytes():
    hb = StreamsGroupHeartbeatResponse(
        throttle_time=datetime.timedelta(0),
        error_code=0,
        member_id="m",
        member_epoch=1,
        heartbeat_interval=datetime.timedelta(milliseconds=5000),
        task_offset_interval=datetime.timedelta(milliseconds=60000),
        acceptable_recovery_lag=10000,
        status=(Status(status_code=1, status_detail="x"),),
        active_tasks=(TaskIds(subtopology_id="0", partitions=(0, 1)),),
        standby_tasks=(),
        warmup_tasks=(),
        endpoint_information_epoch=3,
    )
    kafka = "00000000000000026d00000001000013880000ea600000000000002710020102780002023003000000000000000100010100000000030000"
    assert codec(88, 1).encode(hb).hex() == kafka
    assert entity_reader(StreamsGroupHeartbeatResponse)(bytes.fromhex(kafka), 0)[0] == hb
    assert codec(89, 1).read(bytes.fromhex("020261010100"), 0)[0] == codec(89, 1).request_type(
        group_ids=("a",), include_authorized_operations=True, include_topology_description=True
    )
    d = StreamsGroupDescribeResponse(
        throttle_time=datetime.timedelta(0),
        groups=(
            DescribedGroup(
                error_code=0,
                group_id="g",
                group_state="Stable",
                group_epoch=2,
                assignment_epoch=2,
                topology=Topology(epoch=1, subtopologies=None),
                members=(),
                topology_description_status=1,
                assignor_name="sticky",
            ),
        ),
    )
    kafka = "0000000002000000026707537461626c650000000200000002010000000100000180000000ff0107737469636b790000"
    assert codec(89, 1).encode(d).hex() == kafka
