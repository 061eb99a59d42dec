"""Every declared API and version round-trips through the codec, and whole
frames round-trip through the header + framing functions."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from raftka.client.protocol import (
    ADVERTISED_VERSIONS,
    DECLARED_VERSIONS,
    FIRST_FLEXIBLE_VERSION,
    ApiKey,
    EncodeError,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
    ProduceResponse,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    expects_response,
    is_flexible,
    peek_correlation_id,
    peek_request_header,
    request_header_version,
    response_header_version,
)
from raftka.client.protocol.messages import REQUEST_CODECS, RESPONSE_CODECS
from tests.unit.test_protocol_support import sample, strategy

PAIRS = [
    (kind, key, version)
    for kind, codecs in (("request", REQUEST_CODECS), ("response", RESPONSE_CODECS))
    for key in codecs
    for version in range(DECLARED_VERSIONS[key][0], DECLARED_VERSIONS[key][1] + 1)
]


def _codec(kind, key):
    return (REQUEST_CODECS if kind == "request" else RESPONSE_CODECS)[key]


def test_every_api_in_protocol_md_is_declared():
    assert set(REQUEST_CODECS) == set(DECLARED_VERSIONS) == set(RESPONSE_CODECS)
    # Everything declared is advertised (DescribeQuorum and the SCRAM credential APIs too, which
    # Kafka's tools and librdkafka refuse to call otherwise; the share groups' APIs and the share
    # coordinator's state APIs, as Kafka 4.4 does).
    assert set(DECLARED_VERSIONS) == set(ADVERTISED_VERSIONS)
    assert ADVERTISED_VERSIONS[ApiKey.API_VERSIONS] == DECLARED_VERSIONS[ApiKey.API_VERSIONS] == (0, 5)
    for key, codec in REQUEST_CODECS.items():
        low, high = DECLARED_VERSIONS[key]
        assert (codec.versions.low, codec.versions.high) == (low, high)
        if codec.schema.flexible == "none":  # OffsetDelete has no flexible version
            assert FIRST_FLEXIBLE_VERSION[key] > high
            continue
        assert codec.schema.is_flexible(FIRST_FLEXIBLE_VERSION[key])
        if FIRST_FLEXIBLE_VERSION[key] > 0:
            assert not codec.schema.is_flexible(FIRST_FLEXIBLE_VERSION[key] - 1)


@pytest.mark.parametrize(("kind", "key", "version"), PAIRS)
@pytest.mark.parametrize("sparse", [False, True], ids=["full", "sparse"])
def test_body_round_trip(kind, key, version, sparse):
    codec = _codec(kind, key)
    message = sample(codec, version, sparse=sparse)
    data = codec.encode(message, version)
    decoded, end = codec.decode(data, version)
    assert end == len(data)
    assert decoded == message
    # Re-encoding the decoded message reproduces the bytes exactly.
    assert codec.encode(decoded, version) == data


@pytest.mark.parametrize(("kind", "key", "version"), PAIRS)
def test_whole_frame_round_trip(kind, key, version):
    codec = _codec(kind, key)
    message = sample(codec, version)
    if kind == "request":
        frame = encode_request(key, version, 1234, message, client_id="cli")
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        header, decoded = decode_request(frame[4:])
        assert header == RequestHeader(key, version, 1234, "cli")
        assert peek_request_header(frame[4:]) == header
    else:
        frame = encode_response(RequestHeader(key, version, 77, None), key, version, message)
        assert peek_correlation_id(frame[4:]) == 77
        header, decoded = decode_response(key, version, frame[4:])
        assert header.correlation_id == 77
    assert decoded == message


@pytest.mark.parametrize(
    ("kind", "key", "version"),
    # a spread of pairs keeps the property test quick: the last version of each API
    [p for p in PAIRS if p[2] == DECLARED_VERSIONS[p[1]][1] or p[2] == DECLARED_VERSIONS[p[1]][0]],
)
def test_random_messages_round_trip(kind, key, version):
    codec = _codec(kind, key)

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy(codec, version))
    def check(message):
        data = codec.encode(message, version)
        decoded, end = codec.decode(data, version)
        assert end == len(data)
        assert decoded == message

    check()


def test_header_versions():
    assert request_header_version(ApiKey.PRODUCE, 8) == 1
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0  # always v0
    assert response_header_version(ApiKey.METADATA, 8) == 0
    assert response_header_version(ApiKey.METADATA, 9) == 1
    assert is_flexible(ApiKey.FETCH, 12) and not is_flexible(ApiKey.FETCH, 11)
    with pytest.raises(ValueError, match="api_key 99 is unknown"):
        request_header_version(99, 0)


def test_fields_outside_the_version_keep_defaults_and_are_not_sent():
    resp = ProduceResponse(
        responses=[{"name": "t", "partition_responses": [{"index": 3, "base_offset": 42}]}],
        throttle_time_ms=5,
    )
    v0 = encode_response(9, ApiKey.PRODUCE, 0, resp)
    _, decoded = decode_response(ApiKey.PRODUCE, 0, v0[4:])
    part = decoded.responses[0].partition_responses[0]
    assert (part.index, part.base_offset, part.log_append_time_ms) == (3, 42, -1)
    assert decoded.throttle_time_ms == 0  # v0 has no throttle field: default
    v8 = encode_response(9, ApiKey.PRODUCE, 8, resp)
    assert len(v8) > len(v0)
    _, decoded8 = decode_response(ApiKey.PRODUCE, 8, v8[4:])
    assert decoded8.throttle_time_ms == 5


def test_records_decode_as_zero_copy_views():
    payload = b"\x00" * 61 + b"batch"
    frame = encode_request(
        ApiKey.PRODUCE, 7, 1,
        ProduceRequest(acks=1, timeout_ms=10, topic_data=[
            {"name": "t", "partition_data": [{"index": 0, "records": payload}]}]),
    )
    _, req = decode_request(frame[4:])
    records = req.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is not None
    assert bytes(records) == payload
    # And a records view can be sent straight back out (e.g. in a Fetch response).
    resp = FetchResponse(responses=[{"topic": "t", "partitions": [
        {"partition_index": 0, "high_watermark": 1, "records": records}]}])
    out = encode_response(1, ApiKey.FETCH, 11, resp)
    _, back = decode_response(ApiKey.FETCH, 11, out[4:])
    assert bytes(back.responses[0].partitions[0].records) == payload


def test_metadata_null_versus_empty_topics():
    for topics in (None, []):
        frame = encode_request(ApiKey.METADATA, 8, 1, MetadataRequest(topics=topics))
        _, req = decode_request(frame[4:])
        assert req.topics == topics
    with pytest.raises(EncodeError, match="topics"):
        encode_request(ApiKey.METADATA, 0, 1, MetadataRequest(topics=None))


def test_encode_errors_name_the_field():
    bad = ProduceResponse(responses=[{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 1 << 20}]}])
    with pytest.raises(EncodeError) as info:
        encode_response(1, ApiKey.PRODUCE, 8, bad)
    assert info.value.path[-1] == "error_code"
    assert "1048576" in str(info.value)
    with pytest.raises(TypeError, match="no field"):
        ProduceResponse(nonsense=1)
    with pytest.raises(EncodeError, match="'name' is None"):
        encode_response(1, ApiKey.PRODUCE, 8, {"responses": [{"name": None}]})


def test_acks_zero_expects_no_response():
    header = RequestHeader(ApiKey.PRODUCE, 8, 1, None)
    assert not expects_response(header, ProduceRequest(acks=0))
    assert expects_response(header, ProduceRequest(acks=-1))
