"""KIP-1101's group metadata hash, byte for byte as Kafka's Utils.computeTopicHash / computeGroupHash
(hash4j XXH3-64, seed 0; ints and longs little-endian; a String as UTF-16LE units then its length)."""

import struct
import uuid

import xxhash

from coordinator.groups.metadata_hash import group_hash, metadata_hash, topic_hash
from protocol import consumer_records as CR
from protocol import share_records as SR

TID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def test_topic_hash_bytes():
    expected = (
        b"\x00"
        + bytes.fromhex("78695a4b3c2d1e0f")
        + bytes.fromhex("f0e1d2c3b4a59687")
        + "foo".encode("utf-16-le")
        + struct.pack("<i", 3)
        + struct.pack("<i", 2)
        + struct.pack("<i", 0)
        + struct.pack("<i", 1)
    )
    want = struct.unpack("<q", struct.pack("<Q", xxhash.xxh3_64_intdigest(expected)))[0]
    assert topic_hash("foo", TID, 2) == want


def test_topic_hash_racks_sorted_each_with_its_length_twice():
    body = (
        b"\x00"
        + struct.pack("<qq", *struct.unpack(">qq", TID.bytes))
        + "t".encode("utf-16-le")
        + struct.pack("<i", 1)
        + struct.pack("<i", 1)
        + struct.pack("<i", 0)
    )
    for rack in ("a", "bb"):
        body += struct.pack("<i", len(rack)) + rack.encode("utf-16-le") + struct.pack("<i", len(rack))
    want = struct.unpack("<q", struct.pack("<Q", xxhash.xxh3_64_intdigest(body)))[0]
    assert topic_hash("t", TID, 1, {0: ["bb", "a"]}) == want


def test_group_hash_sorted_by_name_and_zero_when_empty():
    assert group_hash({}) == 0 and metadata_hash({}) == 0
    hashes = {"b": 2, "a": -1}
    body = struct.pack("<q", -1) + struct.pack("<q", 2)
    assert group_hash(hashes) == struct.unpack("<q", struct.pack("<Q", xxhash.xxh3_64_intdigest(body)))[0]
    # Java orders Strings by UTF-16 unit: U+10000 (a surrogate pair, D800..) before U+FFFD
    astral, bmp = "\U00010000", "\ufffd"
    body = struct.pack("<q", 1) + struct.pack("<q", 2)
    assert group_hash({bmp: 2, astral: 1}) == struct.unpack("<q", struct.pack("<Q", xxhash.xxh3_64_intdigest(body)))[0]


def test_metadata_hash_changes_with_partitions_and_id():
    base = metadata_hash({"t": (TID, 2)})
    assert base != metadata_hash({"t": (TID, 3)})
    assert base != metadata_hash({"t": (uuid.uuid4(), 2)})
    assert metadata_hash({"t": (TID, 2)}) == group_hash({"t": topic_hash("t", TID, 2)})


def test_consumer_group_metadata_value_carries_the_hash_in_tag_0():
    key = CR.ConsumerGroupMetadataKey("g")
    value = CR.ConsumerGroupMetadataValue(7, -5)
    data = CR.encode_value(value)
    # version 0, epoch 7, one tagged field: tag 0, 8 bytes, the hash (big-endian as Kafka's int64)
    assert data == struct.pack(">hi", 0, 7) + b"\x01\x00\x08" + struct.pack(">q", -5)
    assert CR.decode_value(key, data) == value
    old = struct.pack(">hi", 0, 7) + b"\x00"  # a log written before the hash: read as 0
    assert CR.decode_value(key, old) == CR.ConsumerGroupMetadataValue(7, 0)
    assert CR.encode_value(CR.ConsumerGroupMetadataValue(7)) == old


def test_share_group_metadata_value_round_trip():
    value = SR.ShareGroupMetadataValue(3, metadata_hash({"t": (TID, 2)}))
    assert SR.decode_value(SR.ShareGroupMetadataKey("g"), SR.encode_value(value)) == value


def _group_records(server, group):
    """(key, value) of every `__consumer_offsets` record of the group, in log order."""
    import pathlib

    from coordinator.log.offsets import partition_for
    from protocol.group_records import decode_record
    from protocol.record_batch import iter_batch_records, parse_header

    out = []
    directory = pathlib.Path(server.data_dir) / f"__consumer_offsets-{partition_for(group, 50)}"
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos < len(data):
            header = parse_header(data, pos)
            if not header.is_control:
                for rec in iter_batch_records(data[pos : pos + header.size], header):
                    key, value = decode_record(rec.key, rec.value)
                    if getattr(key, "group", None) == group:
                        out.append((key, value))
            pos += header.size
    return out


async def test_groups_store_kafkas_hash_and_a_restart_keeps_the_epoch(server):
    """A consumer group and a share group on topic t: their metadata records carry Kafka's hash
    of t (so a Kafka 4.1+ broker loading the log sees no change), the consumer group writes no
    ConsumerGroupPartitionMetadata (Kafka 4.1+ keeps only the hash), and after a restart the
    hash alone tells the topics did not change: the next heartbeats keep the epochs."""
    import datetime

    from tests.support.share import until_assigned
    from tests.support.wire_client import WireClient, request_class

    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=3)
        cg = await conn.request(
            68,
            1,
            request_class(68, 1)(
                group_id="cg",
                member_id="m",
                member_epoch=0,
                rebalance_timeout=datetime.timedelta(seconds=30),
                subscribed_topic_names=("t",),
                topic_partitions=(),
            ),
        )
        sg = await conn.request(
            76, 1, request_class(76, 1)(group_id="sg", member_id="m", member_epoch=0, subscribed_topic_names=("t",))
        )
        # (the share group assigns t once its share-partitions' state is initialized)
        sg = await until_assigned(conn, "sg", "m", sg)
        assert cg.error_code == 0 and sg.error_code == 0
        tid = sg.assignment.topic_partitions[0].topic_id
        want = metadata_hash({"t": (tid, 3)})
        cg_records = _group_records(server, "cg")
        assert [v.metadata_hash for k, v in cg_records if type(k) is CR.ConsumerGroupMetadataKey][-1] == want
        assert not [k for k, _ in cg_records if type(k) is CR.ConsumerGroupPartitionMetadataKey]
        assert [v.metadata_hash for k, v in _group_records(server, "sg") if type(k) is SR.ShareGroupMetadataKey][
            -1
        ] == want
        described = await conn.request(
            69, 0, request_class(69, 0)(group_ids=("cg",), include_authorized_operations=False)
        )
        epoch_before = described.groups[0].group_epoch
    finally:
        await conn.close()
    server.restart()
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        again = await conn.request(
            68,
            1,
            request_class(68, 1)(
                group_id="cg",
                member_id="m",
                member_epoch=cg.member_epoch,
                rebalance_timeout=datetime.timedelta(seconds=30),
                subscribed_topic_names=("t",),
                topic_partitions=None,
            ),
        )
        assert (again.error_code, again.member_epoch) == (0, cg.member_epoch)
        described = await conn.request(
            69, 0, request_class(69, 0)(group_ids=("cg",), include_authorized_operations=False)
        )
        assert described.groups[0].group_epoch == epoch_before  # the hash matched: no bump
        again = await conn.request(
            76, 1, request_class(76, 1)(group_id="sg", member_id="m", member_epoch=sg.member_epoch)
        )
        assert (again.error_code, again.member_epoch) == (0, sg.member_epoch)
    finally:
        await conn.close()


ID = uuid.UUID(bytes=bytes.fromhex("0123456789abcdeffedcba9876543210"))


def test_golden_values_of_kafkas_utils():
    """Values of Kafka's Utils.computeTopicHash / computeGroupHash run with hash4j 0.22.0 (the
    version Kafka pins), as another Kafka implementation's test suite publishes them."""
    assert topic_hash("foo", ID, 2, {0: ["rack1", "rack0"], 1: ["rack2", "rack1"]}) == 4_231_092_367_357_902_416
    assert topic_hash("bar", uuid.UUID(bytes=b"\x11" * 8 + b"\x22" * 8), 1) == 8_733_119_781_167_439_863
    assert topic_hash("empty", uuid.UUID(int=0), 0) == 728_769_691_835_767_132
    assert topic_hash("foo", ID, 1, {0: ["r", "r"]}) == 2_883_780_561_648_472_600
    assert topic_hash("foo", ID, 1, {0: ["\ue000", "\U0001f600"]}) == 4_767_223_826_197_171_634
    assert topic_hash("t\u00e9", ID, 1, {0: ["\u00e9"]}) == 480_043_309_326_700_168
    foo, bar = 4_231_092_367_357_902_416, 8_733_119_781_167_439_863
    assert group_hash({"foo": foo}) == -3_651_539_661_068_893_492
    assert group_hash({"foo": foo, "bar": bar}) == group_hash({"bar": bar, "foo": foo}) == -556_879_919_459_959_918
    assert group_hash({"foo": 456, "bar": 123}) == 1_482_712_172_080_382_793


async def test_an_older_logs_partition_metadata_is_read_then_tombstoned(server):
    """A log written before Kafka 4.1 holds a ConsumerGroupPartitionMetadata record (type 4):
    it is read (the topics it names are the group's, so the restart bumps nothing) and gets a
    tombstone at the group's next write, as Kafka 4.1+ removes it."""
    import datetime
    import pathlib
    import time

    from coordinator.log import LogConfig, PartitionLog
    from coordinator.log.offsets import partition_for
    from protocol.record_batch import build_batch
    from tests.support.wire_client import WireClient, request_class

    def join(member, epoch, topics=("t",)):
        return request_class(68, 1)(
            group_id="cg",
            member_id=member,
            member_epoch=epoch,
            rebalance_timeout=datetime.timedelta(seconds=30),
            subscribed_topic_names=topics,
            topic_partitions=() if epoch == 0 else None,
        )

    async def group_epoch(conn):
        r = await conn.request(69, 0, request_class(69, 0)(group_ids=("cg",), include_authorized_operations=False))
        return r.groups[0].group_epoch

    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        await conn.create_topics("t", partitions=3)
        a = await conn.request(68, 1, join("a", 0))
        tid = a.assignment.topic_partitions[0].topic_id
        before = await group_epoch(conn)
    finally:
        await conn.close()
    server.stop()
    directory = pathlib.Path(server.data_dir) / f"__consumer_offsets-{partition_for('cg', 50)}"
    legacy = PartitionLog.open_sync(directory, LogConfig(fsync="never", maintenance_interval_ms=None))
    try:
        key = CR.ConsumerGroupPartitionMetadataKey("cg")
        value = CR.ConsumerGroupPartitionMetadataValue((CR.TopicMetadata(tid, "t", 3),))
        await legacy.append_durable(
            build_batch([(CR.encode_key(key), CR.encode_value(value))], timestamp_ms=int(time.time() * 1000))
        )
    finally:
        await legacy.close()
    server.start()
    assert [v for k, v in _group_records(server, "cg") if type(k) is CR.ConsumerGroupPartitionMetadataKey] == [value]
    conn = await WireClient().connect("127.0.0.1", server.port)
    try:
        assert await group_epoch(conn) == before
        b = await conn.request(68, 1, join("b", 0))  # the group changes: its records are written
        assert b.error_code == 0
        legacy_records = [v for k, v in _group_records(server, "cg") if type(k) is CR.ConsumerGroupPartitionMetadataKey]
        assert legacy_records == [value, None]
    finally:
        await conn.close()
