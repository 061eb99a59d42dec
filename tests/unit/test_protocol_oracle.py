"""kafka-python's `kafka.protocol` as an independent oracle, both directions.

For every declared (api, version) that kafka-python can build: encode with
kafka-python -> decode with raftka and compare field values, and encode with
raftka -> decode with kafka-python and compare. A second pass compiles
kafka-python's copy of Kafka's JSON specs over their FULL version ranges
(flexible versions included) to exercise the compact/tagged paths, e.g.
Metadata v9-12, Fetch v12+, ApiVersions v3-4, CreateTopics v5+.
"""

from __future__ import annotations

import pytest

from raftka.client.protocol import (
    DECLARED_VERSIONS,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from raftka.client.protocol.codec import MessageCodec
from raftka.client.protocol.generate_schemas import (
    SPEC_NAMES,
    default_resources_dir,
    load_spec,
    message_schema_from_json,
)
from raftka.client.protocol.messages import REQUEST_CODECS, RESPONSE_CODECS
from tests.unit.test_protocol_support import assert_matches_kp, kp_class, sample, to_kp


def _kp_supports(kp_cls, version: int) -> bool:
    return version <= kp_cls.max_version


# kafka-python 3.0.12 has no UnregisterBroker, no KIP-848 APIs and no share-group APIs (their specs
# are in client/protocol/specs/): the generic round trip (test_protocol_roundtrip.py) covers them,
# and test_share_wire.py checks the share-group ones against Kafka 4.4's own serializer.
NOT_IN_KAFKA_PYTHON = frozenset({ApiKey.UNREGISTER_BROKER, ApiKey.CONSUMER_GROUP_HEARTBEAT,
                                 ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_HEARTBEAT,
                                 ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
                                 ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                                 ApiKey.DELETE_SHARE_GROUP_OFFSETS})

DECLARED = [
    (kind, key, version, sparse)
    for kind in ("request", "response")
    for key in REQUEST_CODECS if key not in NOT_IN_KAFKA_PYTHON
    for version in range(DECLARED_VERSIONS[key][0], DECLARED_VERSIONS[key][1] + 1)
    for sparse in (False, True)
]


@pytest.mark.parametrize(("kind", "key", "version", "sparse"), DECLARED)
def test_declared_versions_against_kafka_python(kind, key, version, sparse):
    codec = (REQUEST_CODECS if kind == "request" else RESPONSE_CODECS)[key]
    kp_cls = kp_class(codec.schema.name)
    # kafka-python 3.0.12 (pinned) builds every version we declare; a gap must fail, not skip.
    assert _kp_supports(kp_cls, version), f"kafka-python cannot build {codec.schema.name} v{version}"
    message = sample(codec, version, sparse=sparse)
    if codec.schema.name == "ApiVersionsResponse":
        message.error_code = 0  # kafka-python decodes any error reply as v0
    kp_message = to_kp(codec, message, version)
    if kind == "request":
        # raftka -> kafka-python
        ours = encode_request(key, version, 4242, message, client_id="raftka-test")
        theirs = kp_cls.decode(ours[4:], version=version, header=True)
        assert theirs.header.correlation_id == 4242
        assert theirs.header.client_id == "raftka-test"
        assert_matches_kp(codec, message, theirs, version)
        # kafka-python -> raftka
        kp_message.with_header(correlation_id=99, client_id="kp")
        header, decoded = decode_request(kp_message.encode(version=version, header=True))
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            key, version, 99, "kp")
        assert decoded == message
    else:
        ours = encode_response(4242, key, version, message)
        theirs = kp_cls.decode(ours[4:], version=version, header=True)
        assert theirs.header.correlation_id == 4242
        assert_matches_kp(codec, message, theirs, version)
        kp_message.with_header(correlation_id=99)
        header, decoded = decode_response(key, version, kp_message.encode(header=True))
        assert header.correlation_id == 99
        assert decoded == message


def _full_range_cases():
    resources = default_resources_dir()
    cases = []
    for key, stem in SPEC_NAMES.items():
        if key in NOT_IN_KAFKA_PYTHON:
            continue
        for kind in ("Request", "Response"):
            spec = load_spec(resources, stem + kind)
            low, _, high = spec["validVersions"].partition("-")  # "0" for a single version (OffsetDelete)
            low, high = int(low), int(high or low)
            codec = MessageCodec(message_schema_from_json(spec, low, high))
            for version in range(low, high + 1):
                if codec.schema.is_flexible(version):
                    cases.append(pytest.param(codec, version, id=f"{spec['name']}-v{version}"))
    return cases


@pytest.mark.parametrize(("codec", "version"), _full_range_cases())
def test_flexible_versions_against_kafka_python(codec, version):
    """Compact strings/arrays and tagged fields, body only, both directions."""
    kp_cls = kp_class(codec.schema.name)
    assert _kp_supports(kp_cls, version), f"kafka-python lacks {codec.schema.name} v{version}"
    for sparse in (False, True):
        message = sample(codec, version, sparse=sparse)
        if codec.schema.name == "ApiVersionsResponse":
            message.error_code = 0  # kafka-python decodes any error reply as v0
        ours = codec.encode(message, version)
        theirs = kp_cls.decode(ours, version=version)
        assert_matches_kp(codec, message, theirs, version)
        kp_bytes = to_kp(codec, message, version).encode(version=version)
        assert kp_bytes == ours
        decoded, end = codec.decode(kp_bytes, version)
        assert end == len(kp_bytes) and decoded == message


def test_api_versions_v3_request_from_kafka_python_decodes():
    kp_cls = kp_class("ApiVersionsRequest")
    req = kp_cls[3](client_software_name="kafka-python", client_software_version="3.0.12")
    req.with_header(correlation_id=1, client_id="kp")
    header, body = decode_request(req.encode(header=True))
    assert header.api_version == 3
    assert (body.client_software_name, body.client_software_version) == ("kafka-python", "3.0.12")


def test_flexible_tagged_fields_reach_kafka_python():
    """ApiVersions v3 response tagged fields (supported_features etc.)."""
    codec = RESPONSE_CODECS[ApiKey.API_VERSIONS]
    msg = codec.cls(
        api_keys=[{"api_key": 0, "min_version": 0, "max_version": 8}],
        supported_features=[{"name": "metadata.version", "min_version": 1, "max_version": 7}],
        finalized_features_epoch=5,
        zk_migration_ready=True,
    )
    data = encode_response(3, ApiKey.API_VERSIONS, 3, msg)
    kp = kp_class("ApiVersionsResponse").decode(data[4:], version=3, header=True)
    assert kp.finalized_features_epoch == 5 and kp.zk_migration_ready is True
    assert kp.supported_features[0].name == "metadata.version"
    _, back = decode_response(ApiKey.API_VERSIONS, 3, data[4:])
    assert back == msg
