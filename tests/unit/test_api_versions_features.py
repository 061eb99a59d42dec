"""ApiVersions v3/v4's KIP-584 features, KIP-511 client software check and v5's KIP-1242 cluster and
node id check (broker/features.py, broker/handlers/api_versions.py), table-driven, and the v3/v4
bytes read by kafka-python."""

from __future__ import annotations

import pytest

from raftka.broker.features import FEATURES, Feature, finalized_features, supported_features
from raftka.broker.handlers.api_versions import target_error, valid_client_software
from raftka.client.protocol import ApiKey, ErrorCode, decode_response, encode_response
from raftka.client.protocol.messages import RESPONSE_CODECS
from tests.unit.test_protocol_support import kp_class

CUSTOM = (Feature("metadata.version", 7, 20, 20), Feature("kraft.version", 0, 1, 1),
          Feature("group.version", 0, 0, 0))


@pytest.mark.parametrize(("api_version", "features", "names"), [
    # Before v4 a feature whose minimum is 0 is left out (KAFKA-17492).
    (3, FEATURES, ["metadata.version"]),
    (4, FEATURES, ["metadata.version", "kraft.version", "transaction.version", "group.version", "share.version"]),
    (3, CUSTOM, ["metadata.version"]),
    (4, CUSTOM, ["metadata.version", "kraft.version", "group.version"]),
])
def test_supported_features_per_version(api_version, features, names):
    assert [f["name"] for f in supported_features(api_version, features)] == names


def test_what_raftka_supports_and_runs_at():
    assert {f.name: (f.min_version, f.max_version, f.finalized) for f in FEATURES} == {
        "metadata.version": (7, 20, 20),  # 3.3-IV3 .. 3.8-IV0
        "kraft.version": (0, 0, 0), "transaction.version": (0, 2, 2), "group.version": (0, 1, 1),
        "share.version": (0, 2, 2)}


@pytest.mark.parametrize(("features", "finalized"), [
    (FEATURES, [("metadata.version", 20, 20), ("transaction.version", 2, 2),  # levels 0 are not listed
                ("group.version", 1, 1), ("share.version", 2, 2)]),
    (CUSTOM, [("metadata.version", 20, 20), ("kraft.version", 1, 1)]),
])
def test_finalized_features_leave_out_level_0(features, finalized):
    assert [(f["name"], f["min_version_level"], f["max_version_level"])
            for f in finalized_features(features)] == finalized


@pytest.mark.parametrize(("name", "version", "valid"), [
    ("librdkafka", "2.16.1", True),
    ("apache-kafka-java", "4.4.0", True),
    ("kafka-python", "3.0.12", True),
    ("a", "1", True),
    ("", "1.0", False),           # empty
    ("kafka python", "1.0", False),  # space
    ("-kafka", "1.0", False),     # must start alphanumeric
    ("kafka-", "1.0", False),     # must end alphanumeric
    ("kafka", "1.0-SNAPSHOT+x", False),
    (None, "1.0", False),
])
def test_client_software_rule(name, version, valid):
    assert valid_client_software(name, version) is valid


@pytest.mark.parametrize("version", [3, 4])
def test_features_on_the_wire_read_by_kafka_python(version):
    codec = RESPONSE_CODECS[ApiKey.API_VERSIONS]
    message = codec.cls(error_code=0, api_keys=[{"api_key": 18, "min_version": 0, "max_version": 4}],
                        throttle_time_ms=0, supported_features=supported_features(version),
                        finalized_features=finalized_features(), finalized_features_epoch=42)
    data = encode_response(7, ApiKey.API_VERSIONS, version, message)
    kp = kp_class("ApiVersionsResponse").decode(data[4:], version=version, header=True)
    assert kp.finalized_features_epoch == 42
    assert [(f.name, f.min_version, f.max_version) for f in kp.supported_features] == [
        (f["name"], f["min_version"], f["max_version"]) for f in supported_features(version)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in kp.finalized_features] == [
        ("metadata.version", 20, 20), ("transaction.version", 2, 2), ("group.version", 1, 1), ("share.version", 2, 2)]
    _, back = decode_response(ApiKey.API_VERSIONS, version, data[4:])
    assert back == message


# As Kafka 4.4 answers them (run against it: tests/differential, step api-versions-v5-target).
@pytest.mark.parametrize(("version", "cluster_id", "node_id", "code"), [
    (5, None, -1, 0),                                   # neither: no check
    (5, "own", 1, 0),                                   # both, this broker
    (5, "other", 1, ErrorCode.REBOOTSTRAP_REQUIRED),    # another cluster
    (5, "own", 2, ErrorCode.REBOOTSTRAP_REQUIRED),      # another node of this cluster
    (5, "", 1, ErrorCode.REBOOTSTRAP_REQUIRED),         # empty is a cluster id, not "none"
    (5, "own", -1, ErrorCode.INVALID_REQUEST),          # one without the other
    (5, None, 1, ErrorCode.INVALID_REQUEST),
    (4, "other", 7, 0),                                 # v4 has no such fields
])
def test_v5_target_check(version, cluster_id, node_id, code):
    assert target_error(version, cluster_id, node_id, "own", 1) == code
