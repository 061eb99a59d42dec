"""Hostile and broken input: only ProtocolError ever escapes, nothing big is
allocated on a lying length prefix, framing enforces its maximum, and the
ApiVersions fallback is exactly the v0 layout."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftka.client.protocol import (
    ADVERTISED_VERSIONS,
    DECLARED_VERSIONS,
    ApiKey,
    FrameDecoder,
    FrameTooLarge,
    MalformedMessage,
    ProtocolError,
    RequestHeader,
    TruncatedMessage,
    UnknownApi,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_frame,
    encode_request,
    encode_response,
    needs_api_versions_fallback,
    peek_request_header,
)
from raftka.client.protocol.messages import REQUEST_CODECS, RESPONSE_CODECS, _tolerated_trailing
from tests.unit.test_protocol_support import kp_class, sample

PAIRS = [
    (key, version)
    for key in REQUEST_CODECS
    for version in range(DECLARED_VERSIONS[key][0], DECLARED_VERSIONS[key][1] + 1)
]
FAST = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def _header(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"c") -> bytes:
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if version >= 0 and api_key in REQUEST_CODECS and REQUEST_CODECS[api_key].schema.is_flexible(version):
        head += b"\x00"
    return head


def _valid_frames():
    frames = []
    for key, version in PAIRS:
        for sparse in (False, True):
            req = sample(REQUEST_CODECS[key], version, sparse=sparse)
            frames.append(("request", key, version, encode_request(key, version, 5, req, "c")[4:]))
            resp = sample(RESPONSE_CODECS[key], version, sparse=sparse)
            frames.append(("response", key, version, encode_response(5, key, version, resp)[4:]))
    return frames


VALID_FRAMES = _valid_frames()


def _decode(kind: str, key: int, version: int, frame: bytes) -> None:
    if kind == "request":
        decode_request(frame)
    else:
        decode_response(key, version, frame)


@FAST
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_error(data):
    try:
        decode_request(data)
    except ProtocolError:
        pass


@FAST
@given(st.sampled_from(PAIRS), st.binary(max_size=120))
def test_random_bodies_behind_valid_headers_raise_only_protocol_error(pair, body):
    key, version = pair
    try:
        decode_request(_header(key, version) + body)
    except ProtocolError:
        pass
    try:
        decode_response(key, version, struct.pack(">i", 1) + body)
    except ProtocolError:
        pass


@FAST
@given(st.sampled_from(VALID_FRAMES), st.data())
def test_mutated_valid_frames_raise_only_protocol_error(case, data):
    kind, key, version, frame = case
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(mutated) - 1))
        mutated[index] = data.draw(st.integers(0, 255))
    try:
        _decode(kind, key, version, bytes(mutated))
    except ProtocolError:
        pass


@pytest.mark.parametrize("case", VALID_FRAMES, ids=lambda c: f"{c[0]}-{c[1]}-v{c[2]}")
def test_every_truncation_raises_protocol_error(case):
    kind, key, version, frame = case
    _decode(kind, key, version, frame)  # the whole frame is fine
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            _decode(kind, key, version, frame[:cut])
    # Past the few bytes a known client quirk leaves (messages.TOLERATED_TRAILING_BYTES).
    extra = 1 + (_tolerated_trailing(ApiKey(key), version) if kind == "request" else 0)
    with pytest.raises(MalformedMessage, match="unexpected byte"):
        _decode(kind, key, version, frame + b"\x00" * extra)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        # Produce v3: transactional_id null, acks, timeout, topic_data of 2**31-1 topics
        (b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x00\x10" + b"\x7f\xff\xff\xff", TruncatedMessage),
        # one topic "t", 2**31-1 partitions
        (b"\xff\xff\x00\x01\x00\x00\x00\x10\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff", TruncatedMessage),
        # one partition whose records claim 2**31-1 bytes
        (b"\xff\xff\x00\x01\x00\x00\x00\x10\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"
         b"\x00\x00\x00\x00\x7f\xff\xff\xff" + b"x" * 10, TruncatedMessage),
        # transactional_id claims 32767 bytes
        (b"\x7f\xff" + b"a" * 20, TruncatedMessage),
        # negative lengths other than -1
        (b"\xff\xfe", MalformedMessage),
        (b"\xff\xff\x00\x01\x00\x00\x00\x10\xff\xff\xff\xf0", MalformedMessage),
        # topic name is not UTF-8
        (b"\xff\xff\x00\x01\x00\x00\x00\x10\x00\x00\x00\x01\x00\x02\xff\xfe\x00\x00\x00\x00",
         MalformedMessage),
        # topic name null where the version does not allow it
        (b"\xff\xff\x00\x01\x00\x00\x00\x10\x00\x00\x00\x01\xff\xff\x00\x00\x00\x00",
         MalformedMessage),
    ],
)
def test_lying_lengths_are_rejected_without_allocating(body, error):
    frame = _header(ApiKey.PRODUCE, 3) + body
    tracemalloc.start()
    try:
        with pytest.raises(error):
            decode_request(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, f"decoding a {len(frame)}-byte frame peaked at {peak} bytes"


def test_compact_lengths_and_varints_are_bounded():
    # ApiVersions v3 request: compact string length as an over-long varint
    frame = _header(ApiKey.API_VERSIONS, 3) + b"\xff\xff\xff\xff\xff\xff\x01"
    with pytest.raises(MalformedMessage, match="varint"):
        decode_request(frame)
    # compact string declaring ~2**28 bytes
    frame = _header(ApiKey.API_VERSIONS, 3) + b"\xff\xff\xff\x7f" + b"ab"
    with pytest.raises(TruncatedMessage):
        decode_request(frame)
    # the request header's tagged-field section claims 2**28 tags
    frame = struct.pack(">hhih", 18, 3, 1, -1) + b"\xff\xff\xff\x7f"
    with pytest.raises(TruncatedMessage):
        decode_request(frame)


def test_unknown_api_and_unsupported_versions_carry_the_header():
    with pytest.raises(UnknownApi) as info:
        decode_request(_header(57, 0, correlation_id=11, client_id=b"me"))
    assert info.value.header == RequestHeader(57, 0, 11, "me")
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(_header(ApiKey.PRODUCE, 14, correlation_id=12) + b"garbage")
    assert info.value.header == RequestHeader(0, 14, 12, "c")
    assert f"0..{DECLARED_VERSIONS[ApiKey.PRODUCE][1]}" in str(info.value)
    # A client newer than raftka may open with a newer ApiVersions: not parseable, fallback required
    above = ADVERTISED_VERSIONS[ApiKey.API_VERSIONS][1] + 1
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(_header(ApiKey.API_VERSIONS, above, correlation_id=13) + b"\x00garbage")
    assert needs_api_versions_fallback(info.value.header)
    # librdkafka opens with v3, kafka-python with v4: both parsed and answered
    v3 = encode_request(ApiKey.API_VERSIONS, 3, 14,
                        {"client_software_name": "librdkafka", "client_software_version": "2.0"})
    assert not needs_api_versions_fallback(peek_request_header(v3[4:]))
    header, body = decode_request(v3[4:])
    assert body.client_software_name == "librdkafka"
    assert not needs_api_versions_fallback(RequestHeader(ApiKey.API_VERSIONS, above - 1, 1, None))
    assert not needs_api_versions_fallback(RequestHeader(ApiKey.METADATA, 9, 1, None))


def test_api_versions_fallback_is_exactly_the_v0_layout():
    data = api_versions_fallback_response(0x01020304)
    assert data == (
        b"\x00\x00\x00\x10"  # size 16
        b"\x01\x02\x03\x04"  # correlation id: response header v0, no tagged fields
        b"\x00\x23"  # error_code 35
        b"\x00\x00\x00\x01"  # one api_keys entry
        b"\x00\x12\x00\x00\x00\x05"  # ApiVersions 0..5, and no throttle_time_ms
    )
    kp_response = kp_class("ApiVersionsResponse")
    for version in (0, 3, 4):  # kafka-python parses error replies as v0 whatever it asked
        kp = kp_response.decode(data[4:], version=version, header=True)
        assert kp.header.correlation_id == 0x01020304
        assert kp.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in kp.api_keys] == [(18, 0, 5)]
    for version in (0, 2, 3):  # our SDK side does the same
        header, body = decode_response(ApiKey.API_VERSIONS, version, data[4:])
        assert header.correlation_id == 0x01020304 and body.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 5)]


# --------------------------------------------------------------------------- #
# Framing


@FAST
@given(st.lists(st.binary(max_size=50), max_size=6), st.data())
def test_frame_decoder_reassembles_any_chunking(payloads, data):
    stream = b"".join(encode_frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder(max_frame_size=64)
    out = []
    start = 0
    for cut in [*cuts, len(stream)]:
        out.extend(decoder.feed(stream[start:cut]))
        start = cut
    assert out == payloads
    assert decoder.buffered == 0
    decoder.eof()


def test_frame_decoder_rejects_oversize_from_the_prefix_alone():
    decoder = FrameDecoder(max_frame_size=1000)
    assert decoder.feed(encode_frame(b"x" * 1000)) == [b"x" * 1000]
    with pytest.raises(FrameTooLarge, match="1001"):
        decoder.feed(b"\x00\x00\x03\xe9")  # just the size prefix of a 1001-byte frame
    with pytest.raises(FrameTooLarge):  # poisoned: the stream position is lost
        decoder.feed(b"x")
    with pytest.raises(FrameTooLarge, match="-5"):
        FrameDecoder().feed(struct.pack(">i", -5))


def test_frame_decoder_reports_a_frame_cut_by_eof():
    decoder = FrameDecoder()
    assert decoder.feed(b"\x00\x00\x00\x05ab") == []
    assert decoder.buffered == 2
    with pytest.raises(TruncatedMessage, match="2 byte"):
        decoder.eof()
    FrameDecoder().eof()  # a clean close between frames is fine


def test_frame_decoder_returns_several_frames_and_keeps_the_rest():
    decoder = FrameDecoder()
    frames = decoder.feed(encode_frame(b"one") + encode_frame(b"") + encode_frame(b"three")[:5])
    assert frames == [b"one", b""]
    assert decoder.feed(encode_frame(b"three")[5:]) == [b"three"]
