"""Feature flags as Kafka 4.4 carries them: ApiVersions v3+ with supported and finalized features
(v5's misrouting check too), UpdateFeatures (57) with Kafka's refusals, and a feature taken down
to 0 switching its APIs off, kept across a restart. Over real sockets, in-process server."""

from __future__ import annotations

import datetime
import struct

from coordinator.features import FEATURES
from protocol.ahead import api_versions_v5_request
from protocol.framing import frame
from protocol.messages import decode_response
from tests.support.raw_wire import API_VERSIONS, Wire
from tests.support.wire_client import request_class
from coordinator.data_dir import stored_cluster_id

UPDATE_FEATURES, CONSUMER_GROUP_HEARTBEAT = 57, 68
NONE, UNSUPPORTED_VERSION, INVALID_REQUEST, INVALID_UPDATE_VERSION, REBOOTSTRAP_REQUIRED = 0, 35, 42, 95, 129
UPGRADE, SAFE_DOWNGRADE = 1, 2
FAILED = "The update failed for all features since the following feature had an error: "

# What this server serves (coordinator/features.py): Kafka 4.4's table
SUPPORTED = {
    "metadata.version": (7, 33),
    "group.version": (0, 1),
    "share.version": (0, 2),
    "eligible.leader.replicas.version": (0, 1),
    "kraft.version": (0, 1),
    "transaction.version": (0, 2),
    "streams.version": (0, 1),
}
FINALIZED = {
    "metadata.version": 33,
    "group.version": 1,
    "share.version": 2,
    "eligible.leader.replicas.version": 1,
    "transaction.version": 2,
    "streams.version": 1,
}


def _features(body):
    supported = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
    finalized = {f.name: f.max_version_level for f in body.finalized_features}
    assert all(f.min_version_level == f.max_version_level for f in body.finalized_features)
    return supported, finalized, body.finalized_features_epoch


def _api_versions(w: Wire, version: int):
    return w.call(API_VERSIONS, version, corr=version, client_software_name="t", client_software_version="1")


def test_api_versions_carries_features_as_kafka(server):
    assert {f.name: (f.min_level, f.implemented) for f in FEATURES} == SUPPORTED
    w = Wire(server.port)
    try:
        supported, finalized, epoch = _features(_api_versions(w, 4))
        assert supported == SUPPORTED and finalized == FINALIZED and epoch >= 1
        # Kafka lists its supported features in a Java HashMap's order
        assert [f.name for f in _api_versions(w, 4).supported_features][:3] == [
            "group.version",
            "kraft.version",
            "metadata.version",
        ]
        # v3: a range starting at 0 is left out (KAFKA-17011), the finalized ones are all there
        supported, finalized, _ = _features(_api_versions(w, 3))
        assert supported == {"metadata.version": (7, 33)} and finalized == FINALIZED
        # v0-2 have no tagged fields at all
        assert w.call(API_VERSIONS, 2, corr=9).error_code == NONE
    finally:
        w.close()


def _v5(w: Wire, cluster_id: str | None, node_id: int, corr: int = 5):
    head = struct.pack(">hhih", API_VERSIONS, 5, corr, 1) + b"c" + b"\0"
    w.send(frame(head + api_versions_v5_request("t", "1", cluster_id, node_id)))
    data = w.read_frame()
    assert data is not None and struct.unpack_from(">i", data)[0] == corr
    return decode_response(API_VERSIONS, 5, data)[1]


def test_api_versions_v5_checks_the_cluster_and_node_named(server):
    w = Wire(server.port)
    try:
        ranges = {k.api_key: (k.min_version, k.max_version) for k in _v5(w, None, -1).api_keys}
        assert ranges[API_VERSIONS] == (0, 5)
        cluster_id = stored_cluster_id(server.data_dir)
        ok = _v5(w, cluster_id, 1)
        assert ok.error_code == NONE and _features(ok)[1] == FINALIZED
        # misrouted: another cluster, or another node of this one (KIP-1242)
        for other, node in (("other-cluster", 1), (cluster_id, 2)):
            body = _v5(w, other, node)
            assert (body.error_code, body.api_keys) == (REBOOTSTRAP_REQUIRED, ())
        # both or neither (ApiVersionsRequest.isValid)
        for other, node in ((None, 0), (cluster_id, -1)):
            assert _v5(w, other, node).error_code == INVALID_REQUEST
        assert _api_versions(w, 4).error_code == NONE  # the connection serves on
    finally:
        w.close()


def _update(w: Wire, version: int, *updates: tuple[str, int, int], validate_only: bool = False):
    key = request_class(UPDATE_FEATURES, version, "FeatureUpdateKey")
    return w.call(
        UPDATE_FEATURES,
        version,
        timeout=datetime.timedelta(seconds=5),
        feature_updates=tuple(key(feature=f, max_version_level=v, upgrade_type=t) for f, v, t in updates),
        validate_only=validate_only,
    )


def test_update_features_refuses_what_kafka_refuses_and_what_is_not_implemented(server):
    w = Wire(server.port)
    try:
        refused = [
            (("transaction.version", 3, UPGRADE), "Local controller 1 only supports versions 0-2"),
            (("streams.version", 2, UPGRADE), "Local controller 1 only supports versions 0-1"),
            (("share.version", 3, UPGRADE), "Local controller 1 only supports versions 0-2"),
            (("group.version", 2, UPGRADE), "Local controller 1 only supports versions 0-1"),
            (("metadata.version", 34, UPGRADE), "Local controller 1 only supports versions 7-33"),
            (("foo.version", 1, UPGRADE), "Local controller 1 does not support this feature."),
            (("foo.version", 0, SAFE_DOWNGRADE), "Feature foo.version not found."),
            (("group.version", -1, SAFE_DOWNGRADE), "A feature version cannot be less than 0."),
            (("group.version", 1, 7), "The controller does not support the given upgrade type."),
            (
                ("group.version", 0, UPGRADE),
                "Can't downgrade the version of this feature without setting the upgrade type to "
                "either safe or unsafe downgrade.",
            ),
            (("kraft.version", 0, UPGRADE), None),  # (no change: accepted)
        ]
        for (name, level, kind), message in refused:
            for version in (1, 2):
                body = _update(w, version, (name, level, kind))
                if message is None:
                    assert body.error_code == NONE
                    continue
                assert body.error_code == INVALID_UPDATE_VERSION, (name, level, kind)
                assert body.error_message == f"{FAILED}Invalid update version {level} for feature {name}. {message}"
                assert getattr(body, "results", ()) == ()
        body = _update(w, 1, ("metadata.version", 32, SAFE_DOWNGRADE))
        assert body.error_message == (
            f"{FAILED}Unsupported metadata.version downgrade from 33 to 32. Refusing to perform the "
            "requested downgrade because it might delete metadata information."
        )
        # one bad update fails the others with it
        body = _update(w, 1, ("group.version", 0, SAFE_DOWNGRADE), ("share.version", 3, UPGRADE))
        assert body.error_code == INVALID_UPDATE_VERSION
        # validate_only: answered, nothing changed
        body = _update(w, 1, ("group.version", 0, SAFE_DOWNGRADE), validate_only=True)
        assert body.error_code == NONE and [(r.feature, r.error_message) for r in body.results] == [
            ("group.version", "NONE")
        ]
        assert _features(_api_versions(w, 4))[1:] == (FINALIZED, 1)
    finally:
        w.close()


def _heartbeat(w: Wire):
    return w.call(
        CONSUMER_GROUP_HEARTBEAT,
        0,
        group_id="g",
        member_id="m" * 22,
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=("t",),
        server_assignor=None,
        topic_partitions=(),
    )


def test_a_feature_downgraded_to_0_turns_its_apis_off_and_stays_so(server_factory, tmp_path):
    server = server_factory(data_dir=tmp_path / "d")
    w = Wire(server.port)
    try:
        assert _heartbeat(w).error_code == NONE
        assert _update(w, 2, ("group.version", 0, SAFE_DOWNGRADE)).error_code == NONE
        _, finalized, epoch = _features(_api_versions(w, 4))
        assert "group.version" not in finalized and epoch == 2
        assert _heartbeat(w).error_code == UNSUPPORTED_VERSION
    finally:
        w.close()
    server.close()
    server = server_factory(data_dir=tmp_path / "d")
    w = Wire(server.port)
    try:
        assert _features(_api_versions(w, 4))[2] == 2 and _heartbeat(w).error_code == UNSUPPORTED_VERSION
        assert _update(w, 2, ("group.version", 1, UPGRADE)).error_code == NONE
        assert _features(_api_versions(w, 4))[1:] == (FINALIZED, 3)
        assert _heartbeat(w).error_code == NONE
    finally:
        w.close()
