"""The share coordinator's bytes against Apache Kafka 4.4's own serializers: the state APIs
(InitializeShareGroupState 83, ReadShareGroupState 84, WriteShareGroupState 85,
DeleteShareGroupState 86, ReadShareGroupStateSummary 87) and the `__share_group_state`
records (ShareSnapshot/ShareUpdate keys and values, tombstones) through Kafka's
ShareCoordinatorRecordSerde.

testdata/share_state_wire/golden.json is written by testdata/share_state_wire/generate.py
(Kafka's generated JsonConverters; no Java runs here). raftka must write the same bytes and
read them back to the same message or record.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from raftka.broker.group.share_coordinator_records import decode_record, encode_record
from raftka.broker.group.share_coordinator_state import (
    SNAPSHOT,
    UPDATE,
    ShareGroupOffset,
    ShareRecord,
    StateBatch,
)
from raftka.broker.group.share_persister import ShareStateKey
from raftka.client.protocol.api_keys import DECLARED_VERSIONS, ApiKey
from raftka.client.protocol.messages import REQUEST_CODECS, RESPONSE_CODECS
from tests.unit.test_share_wire import MODES, message_for

GOLDEN = json.loads((Path(__file__).parent / "testdata" / "share_state_wire" / "golden.json").read_text())
STATE_APIS = (ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
              ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)

_KEY = ShareStateKey("group-é", uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), 7)
_BATCHES = (StateBatch(10, 12, 2, 1), StateBatch(13, 13, 0, 3), StateBatch(14, 2**40, 4, 32767))
RECORDS = {
    "snapshot": ShareRecord(SNAPSHOT, _KEY, ShareGroupOffset(3, 2, 5, 10, -1, _BATCHES, 1700000000000,
                                                             1700000000123)),
    "snapshot-complete-count": ShareRecord(SNAPSHOT, _KEY, ShareGroupOffset(0, 0, 0, -1, 4, (), 1, 2)),
    "snapshot-tombstone": ShareRecord(SNAPSHOT, _KEY, None),
    "update": ShareRecord(UPDATE, _KEY, ShareGroupOffset(3, 0, 6, 11, -1, _BATCHES[:2])),
    "update-complete-count": ShareRecord(UPDATE, _KEY, ShareGroupOffset(0, 0, -1, -1, 9, ())),
}


def _id(case: dict) -> str:
    return f"{case['api']}-{case['kind']}-v{case['version']}-{case['mode']}"


def test_golden_covers_every_declared_version_and_record() -> None:
    assert GOLDEN["kafka"] == "kafka-4.4.0"
    got = {(c["api"], c["kind"], c["version"], c["mode"]) for c in GOLDEN["cases"]}
    want = {(key.name, kind, v, mode) for key in STATE_APIS for kind in ("request", "response")
            for v in range(DECLARED_VERSIONS[key][0], DECLARED_VERSIONS[key][1] + 1) for mode in MODES}
    assert got == want
    assert set(GOLDEN["records"]) == set(RECORDS)


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


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_records_as_kafkas_serde_writes_them(name: str) -> None:
    key_hex, value_hex = GOLDEN["records"][name].split("/")
    key, value = encode_record(RECORDS[name])
    assert key.hex() == key_hex
    assert (value.hex() if value is not None else "-") == value_hex
    kafka_value = None if value_hex == "-" else bytes.fromhex(value_hex)
    assert decode_record(bytes.fromhex(key_hex), kafka_value) == RECORDS[name]


@pytest.mark.parametrize("key, value, why", [
    (b"", None, "at least 2"),
    (b"\x00\x00\x00", None, "truncated|needs"),
    (bytes.fromhex("0001") + b"\x00\x01g" + bytes(16) + b"\xff\xff\xff\xff", b"\x00\x00", "negative partition"),
    (bytes.fromhex("0001") + b"\x00\x01g" + bytes(16) + bytes(4), None, "no value"),
    (bytes.fromhex("0000") + b"\x00\x01g" + bytes(16) + bytes(4) + b"x", None, "trailing"),
    (bytes.fromhex("0000") + b"\x00\x01g" + bytes(16) + bytes(4), b"\x00\x01" + bytes(40), "version 1"),
    (bytes.fromhex("0000") + b"\x00\x01g" + bytes(16) + bytes(4), b"\x00\x00\x01", "truncated|needs"),
])
def test_malformed_records_raise_value_error(key: bytes, value: bytes | None, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        decode_record(key, value)


def test_unknown_record_types_are_skipped() -> None:
    assert decode_record(bytes.fromhex("0005") + b"\x00\x01g", b"\x00\x00") is None
