"""broker/group/share_group_records.py: Kafka 4.4's ShareGroup* records in `__consumer_offsets`.

The value bytes in RECORDS are what Apache Kafka 4.4's own serializer writes for the same
records (the group coordinator jar's generated `ShareGroup*ValueJsonConverter.read`, then
`MessageUtil.toVersionPrefixedByteBuffer(0, ...)`), checked once by hand with the cached
Kafka 4.4 libs; the test itself never runs Java."""

from __future__ import annotations

import pytest

from raftka.broker.group import share_group_records as r
from raftka.broker.group.group_records import ShareGroupKey, decode_key
from raftka.broker.group.share_group_state import (
    CurrentAssignment,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberMetadata,
    MemberMetadataRecord,
    StatePartitions,
    StatePartitionsRecord,
    TargetEpochRecord,
    TargetMemberRecord,
)

TOPIC_ID = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
IDS = {"jobs": TOPIC_ID}
NAMES = {TOPIC_ID: "jobs"}
JOBS = frozenset({("jobs", 0), ("jobs", 1)})

RECORDS = [
    (GroupEpochRecord(3), 11, "000000000003000000000000000000"),
    (TargetEpochRecord(2), 12, "00000000000200"),
    (MemberMetadataRecord("m", MemberMetadata(None, "c", "/h", ("jobs",))), 10, "0000000263032f6802056a6f627300"),
    (TargetMemberRecord("m", frozenset({("jobs", 0)})), 13,
     "0000026ba7b8109dad11d180b400c04fd430c802000000000000"),
    (CurrentAssignmentRecord("m", CurrentAssignment(2, 1, frozenset({("jobs", 1)}))), 14,
     "0000000000020000000100026ba7b8109dad11d180b400c04fd430c802000000010000"),
    (StatePartitionsRecord(StatePartitions(frozenset(), frozenset({("jobs", 0)}))), 15,
     "000001026ba7b8109dad11d180b400c04fd430c8056a6f62730200000000000100"),
]


@pytest.mark.parametrize(("record", "kind", "value"), RECORDS, ids=[str(k) for _, k, _ in RECORDS])
def test_record_bytes_and_round_trip(record, kind, value) -> None:
    key, data = r.encode_record("g", record, IDS)
    assert data is not None and data.hex() == value
    decoded = decode_key(key)
    assert isinstance(decoded, ShareGroupKey) and decoded.kind == kind and decoded.group_id == "g"
    assert r.decode_record(decoded.kind, decoded.member_id, data, NAMES) == record


def test_tombstones_and_a_vanished_topic() -> None:
    key, data = r.encode_record("g", MemberMetadataRecord("m", None), IDS)
    assert data is None and r.decode_key(key) == (10, "g", "m")
    _, data = r.encode_record("g", TargetMemberRecord("m", JOBS), IDS)
    assert r.decode_record(13, "m", data, {}) == TargetMemberRecord("m", frozenset())


@pytest.mark.parametrize("key", [b"", b"\x00\x0a", b"\x00\x0a\x00\x05ab", b"\x00\x10\x00\x00"])
def test_malformed_keys_are_value_errors(key) -> None:
    with pytest.raises(ValueError):
        r.decode_key(key)
