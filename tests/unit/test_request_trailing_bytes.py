"""librdkafka 2.x asks Metadata v9+ for all topics with a 4-byte zero placeholder where a
1-byte compact-array count belongs; Kafka ignores the 3 bytes left over, so raftka tolerates
exactly those (and nothing more, and nowhere else)."""

from __future__ import annotations

import pytest

from raftka.client.protocol import ApiKey, ProtocolError, decode_request, encode_request

# Captured from confluent-kafka 2.16.1 (librdkafka 2.16.0) listing all topics, without the
# size prefix: header v2 (client id "rdkafka"), then 00000000 01 00 00.
LIBRDKAFKA_ALL_TOPICS_V12 = bytes.fromhex("0003000c00000005000772646b61666b610000000000010000")


def test_librdkafka_all_topics_metadata_v12_decodes_as_all_topics() -> None:
    header, request = decode_request(LIBRDKAFKA_ALL_TOPICS_V12)
    assert (header.api_key, header.api_version, header.client_id) == (ApiKey.METADATA, 12, "rdkafka")
    assert request.topics is None


@pytest.mark.parametrize(("version", "extra", "accepted"), [
    (9, b"\x00" * 3, True),
    (12, b"\x01\x00\x00", True),
    (12, b"\x00" * 4, False),   # more than the quirk leaves
    (8, b"\x00", False),        # not flexible: no quirk, no tolerance
])
def test_trailing_bytes_only_as_the_quirk_leaves_them(version: int, extra: bytes, accepted: bool) -> None:
    frame = encode_request(ApiKey.METADATA, version, 1, {"topics": None}, client_id="x")[4:] + extra
    if accepted:
        assert decode_request(frame)[1].topics is None
    else:
        with pytest.raises(ProtocolError, match="unexpected byte"):
            decode_request(frame)


def test_other_apis_keep_refusing_trailing_bytes() -> None:
    frame = encode_request(ApiKey.HEARTBEAT, 3, 1, {"group_id": "g", "generation_id": 1, "member_id": "m"},
                           client_id="x")[4:] + b"\x00"
    with pytest.raises(ProtocolError, match="unexpected byte"):
        decode_request(frame)
