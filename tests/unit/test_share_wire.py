"""The share-group messages (KIP-932: ShareGroupHeartbeat 76, ShareGroupDescribe 77, ShareFetch 78,
ShareAcknowledge 79) against Apache Kafka 4.4's own serializer.

testdata/share_wire/golden.json holds, for every declared version of each request and response,
three sample messages as Kafka 4.4 encodes them (tests/unit/test_protocol_support.sample): full,
sparse and nested (one element per array, null wherever allowed, so nullability inside arrays
is checked too) (testdata/share_wire/generate.py runs Kafka's generated JsonConverters and MessageUtil; the
schemas come from client/protocol/specs/, Kafka 4.4's JSON). raftka must write the same bytes and
read them back to the same message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raftka.client.protocol.api_keys import ADVERTISED_VERSIONS, DECLARED_VERSIONS, ApiKey
from raftka.client.protocol.codec import Message, MessageCodec
from raftka.client.protocol.messages import REQUEST_CODECS, RESPONSE_CODECS
from tests.unit.test_protocol_support import sample

GOLDEN = json.loads((Path(__file__).parent / "testdata" / "share_wire" / "golden.json").read_text())
SHARE_APIS = (ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE)


MODES = ("full", "sparse", "nested")


def message_for(codec: MessageCodec, version: int, mode: str) -> Message:
    return sample(codec, version, sparse=mode == "sparse", nested=mode == "nested")


def _id(case: dict) -> str:
    return f"{case['api']}-{case['kind']}-v{case['version']}-{case['mode']}"


def test_golden_covers_every_declared_version() -> None:
    assert GOLDEN["kafka"] == "kafka-4.4.0"
    got = {(c["api"], c["kind"], c["version"], c["mode"]) for c in GOLDEN["cases"]}
    want = {(key.name, kind, v, mode) for key in SHARE_APIS for kind in ("request", "response")
            for v in range(DECLARED_VERSIONS[key][0], DECLARED_VERSIONS[key][1] + 1) for mode in MODES}
    assert got == want


def test_kafka_4_4_versions_advertised() -> None:
    # Kafka 4.4: ShareGroupHeartbeat v1, ShareGroupDescribe v1, ShareFetch v1-2, ShareAcknowledge v1-2
    # (v0 was 4.0's early access), advertised as Kafka 4.4 does.
    want = {ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1), ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
            ApiKey.SHARE_FETCH: (1, 2), ApiKey.SHARE_ACKNOWLEDGE: (1, 2)}
    assert {key: DECLARED_VERSIONS[key] for key in SHARE_APIS} == want
    assert {key: ADVERTISED_VERSIONS[key] for key in SHARE_APIS} == want


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=_id)
def test_same_bytes_as_kafka(case: dict) -> None:
    codecs = REQUEST_CODECS if case["kind"] == "request" else RESPONSE_CODECS
    codec = codecs[ApiKey[case["api"]]]
    message = message_for(codec, case["version"], case["mode"])
    kafka_bytes = bytes.fromhex(case["hex"])
    assert codec.encode(message, case["version"]).hex() == case["hex"]
    decoded, end = codec.decode(kafka_bytes, case["version"])
    assert end == len(kafka_bytes)
    assert decoded == message
