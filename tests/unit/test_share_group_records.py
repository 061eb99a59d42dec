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


# ShareGroupMetadata records as a live Kafka 4.4 wrote them to `__consumer_offsets` (read back
# with tests/compat/share_group_cases.py's flow): a member of group dsh-group joined topic dsh-t
# (2 partitions, the id below), the topic got a third partition, the member left. The value
# carries the subscribed topics' metadata hash (KIP-1101); the emptied group's is 0.
KAFKA_44_TOPIC_ID = "4e558a41-2c2e-42bb-84e4-596a0c3a3831"
KAFKA_44_GROUP_METADATA = [
    (GroupEpochRecord(2, 0x4D6C8121E315A186), 2, "0000000000024d6c8121e315a18600"),
    (GroupEpochRecord(4, 0xE82D487E018C2191 - (1 << 64)), 3, "000000000004e82d487e018c219100"),
    (GroupEpochRecord(5), None, "000000000005000000000000000000"),
]


@pytest.mark.parametrize(("record", "partitions", "value"), KAFKA_44_GROUP_METADATA,
                         ids=[f"epoch{r.epoch}" for r, _, _ in KAFKA_44_GROUP_METADATA])
def test_group_metadata_is_kafkas(record, partitions, value) -> None:
    """raftka writes Kafka's bytes, and computes Kafka's hash of dsh-t at each partition count."""
    from raftka.broker.group.consumer_assignors import TopicMeta
    from raftka.broker.group.metadata_hash import subscription_hash

    key, data = r.encode_record("dsh-group", record, {})
    assert key.hex() == "000b00096473682d67726f7570" and data is not None and data.hex() == value
    assert r.decode_record(11, None, bytes.fromhex(value), {}) == record
    if partitions is not None:
        topic = TopicMeta(KAFKA_44_TOPIC_ID, "dsh-t", partitions)
        assert subscription_hash(["dsh-t"], {"dsh-t": topic}) == record.metadata_hash


def test_a_group_metadata_record_without_the_hash_still_loads() -> None:
    """raftka wrote MetadataHash 0 before it kept the hash: it reads back as hash 0 (the group's
    next heartbeat bumps its epoch with the hash)."""
    assert r.decode_record(11, None, bytes.fromhex("000000000003000000000000000000"), {}) == GroupEpochRecord(3, 0)


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
