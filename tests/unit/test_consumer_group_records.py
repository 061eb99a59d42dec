"""KIP-848 records in `__consumer_offsets` (broker/group/consumer_group_records.py): each of
Kafka's seven record types round-trips, tombstones included, with Kafka's key versions.

KAFKA_44_REGEX holds a ConsumerGroupRegularExpression record (type 16) exactly as a Kafka 4.4
broker wrote it to `__consumer_offsets` (read back from the log of tests/differential's Kafka
server after a member subscribed to `rx-.*` in group rx-group): raftka writes the same bytes."""

from __future__ import annotations

import struct

import pytest

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.consumer_group_records import decode_key, decode_record, encode_record
from raftka.broker.group.consumer_group_state import (
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberAssignment,
    MemberMetadata,
    MemberMetadataRecord,
    MemberState,
    RegexResolution,
    RegexResolutionRecord,
    SubscriptionMetadataRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)

T1 = "6d0f4a3e-1111-4c1e-9a55-0123456789ab"
T2 = "00000000-0000-0000-0000-00000000002a"

RECORDS = [
    (3, GroupEpochRecord(7)),
    (3, GroupEpochRecord(None)),
    (4, SubscriptionMetadataRecord((TopicMeta(T1, "foo", 6), TopicMeta(T2, "bar", 1)))),
    (4, SubscriptionMetadataRecord(None)),
    (5, MemberMetadataRecord("m-1", MemberMetadata("inst", None, "client", "/127.0.0.1", ("bar", "foo"),
                                                   300000, "range"))),
    (5, MemberMetadataRecord("m-2", MemberMetadata(None, "rack", "client", "/127.0.0.1", (), 45000, None,
                                                   "orders-.*"))),
    (5, MemberMetadataRecord("m-1", None)),
    (6, TargetAssignmentEpochRecord(7)),
    (7, TargetAssignmentMemberRecord("m-1", {T1: frozenset({0, 2}), T2: frozenset({0})})),
    (7, TargetAssignmentMemberRecord("m-1", None)),
    (8, CurrentAssignmentRecord("m-1", MemberAssignment(5, 4, MemberState.UNREVOKED_PARTITIONS,
                                                        {T1: frozenset({0})}, {T1: frozenset({1, 3})},
                                                        {(T1, 0): 2, (T1, 1): 5, (T1, 3): 4}))),
    (8, CurrentAssignmentRecord("m-1", None)),
    (16, RegexResolutionRecord("orders-.*", RegexResolution(frozenset({"orders-us", "orders-eu"}), 42, 1_700_000))),
    (16, RegexResolutionRecord("orders-.*", RegexResolution(frozenset(), 0, 0))),
    (16, RegexResolutionRecord("orders-.*", None)),
]

# (key, value) hex of Kafka 4.4's own record: group rx-group, regex rx-.*, topics rx-a and rx-b,
# version 90 (the metadata image's offset), timestamp 1795802096628 (wall-clock ms).
KAFKA_44_REGEX = ("0010000872782d67726f7570000572782d2e2a",
                  "0000030572782d610572782d62000000000000005a000001a21e2563f400")


@pytest.mark.parametrize(("kind", "record"), RECORDS, ids=[f"{k}-{type(r).__name__}" for k, r in RECORDS])
def test_round_trip(kind, record) -> None:
    key, value = encode_record("group-1", record)
    assert struct.unpack_from(">h", key)[0] == kind  # Kafka's record type is the key version
    decoded_kind, group, member = decode_key(key)
    assert (decoded_kind, group) == (kind, "group-1")
    assert decode_record(decoded_kind, member, value) == record


def test_bad_value_version_is_refused() -> None:
    key, value = encode_record("g", GroupEpochRecord(1))
    with pytest.raises(ValueError, match="value version 1"):
        decode_record(3, None, b"\x00\x01" + value[2:])


def test_regex_record_bytes_are_kafkas() -> None:
    record = RegexResolutionRecord("rx-.*", RegexResolution(frozenset({"rx-b", "rx-a"}), 90, 1795802096628))
    key, value = encode_record("rx-group", record)
    assert (key.hex(), value.hex() if value else None) == KAFKA_44_REGEX
    kind, group, regex = decode_key(bytes.fromhex(KAFKA_44_REGEX[0]))
    assert (kind, group) == (16, "rx-group")
    assert decode_record(kind, regex, bytes.fromhex(KAFKA_44_REGEX[1])) == record
    # Kafka's tombstone of that regex: the same key, no value.
    assert encode_record("rx-group", RegexResolutionRecord("rx-.*", None)) == (bytes.fromhex(KAFKA_44_REGEX[0]), None)


def test_regex_record_topics_are_sorted() -> None:
    """Kafka sorts the topics (`Collections.sort`) before it writes them."""
    names = [f"t-{i:02d}" for i in range(12)]
    _, value = encode_record("g", RegexResolutionRecord("t-.*", RegexResolution(frozenset(names), 1, 2)))
    assert value is not None
    positions = [value.index(name.encode()) for name in names]
    assert positions == sorted(positions)


def test_classic_member_metadata_is_kafkas_tagged_field() -> None:
    """A classic member's ClassicMemberMetadata (tag 0 of ConsumerGroupMemberMetadataValue):
    the bytes are what Kafka 4.4's own serializer writes for it (its generated
    `ConsumerGroupMemberMetadataValueJsonConverter.read`, then
    `MessageUtil.toVersionPrefixedByteBuffer(0, ...)`, checked once with the cached jars), the regex
    "" as Kafka's member without one has it (ConsumerGroupMember's default)."""
    from raftka.broker.group.consumer_group_state import ClassicMemberMetadata

    record = MemberMetadataRecord("m", MemberMetadata(
        "i", None, "c", "/h", ("a", "b"), 300, None, None,
        ClassicMemberMetadata(10000, (("range", b"\x00\x01abc"), ("roundrobin", b"")))))
    key, value = encode_record("g", record)
    assert value == bytes.fromhex(
        "00000269000263032f680302610262010000012c000100210100002710030672616e67650600016162"
        "63000b726f756e64726f62696e010000")
    assert decode_record(*decode_key(key)[::2], value) == record


# ConsumerGroupCurrentMemberAssignmentValue with AssignmentEpochs (tag 0 of each TopicPartitions,
# KIP-1251) as Kafka 4.4's generated class writes it (`MessageUtil.toVersionPrefixedBytes(0, ...)`
# with the cached jars): epoch 5 (previous 4), UNREVOKED_PARTITIONS, T1 partitions 0 and 2
# assigned at epochs 3 and 5, partition 1 pending revocation, assigned at epoch 4.
KAFKA_44_CURRENT_ASSIGNMENT = (
    "0000000000050000000401026d0f4a3e11114c1e9a550123456789ab030000000000000002010009030000000300000005"
    "026d0f4a3e11114c1e9a550123456789ab0200000001010005020000000400")


def test_current_assignment_carries_kafkas_assignment_epochs() -> None:
    record = CurrentAssignmentRecord("m", MemberAssignment(
        5, 4, MemberState.UNREVOKED_PARTITIONS, {T1: frozenset({0, 2})}, {T1: frozenset({1})},
        {(T1, 0): 3, (T1, 2): 5, (T1, 1): 4}))
    key, value = encode_record("g", record)
    assert value is not None and value.hex() == KAFKA_44_CURRENT_ASSIGNMENT
    assert decode_record(*decode_key(key)[::2], value) == record
    assert record.assignment is not None and record.assignment.assignment_epoch(T1, 1) == 4


def test_current_assignment_without_epochs_holds_at_the_member_epoch() -> None:
    """A record written before assignment epochs (no tag 0, as raftka wrote them before): Kafka's
    `assignmentFromTopicPartitions` puts every partition at the member epoch, 0 at least."""
    without = ("0000000000050000000401026d0f4a3e11114c1e9a550123456789ab03000000000000000200"
               "026d0f4a3e11114c1e9a550123456789ab02000000010000")  # Kafka's, the same without epochs
    decoded = decode_record(8, "m", bytes.fromhex(without))
    assert isinstance(decoded, CurrentAssignmentRecord) and decoded.assignment is not None
    assert decoded.assignment.epochs == {(T1, 0): 5, (T1, 2): 5, (T1, 1): 5}
    static_left = decode_record(8, "m", bytes.fromhex("0000fffffffe" + without[12:]))
    assert isinstance(static_left, CurrentAssignmentRecord) and static_left.assignment is not None
    assert set(static_left.assignment.epochs.values()) == {0}


# A consumer-protocol member's life in group dr-group as a live Kafka 4.4 wrote it to
# `__consumer_offsets` (read back with tests/compat/kip848_cases.py's reader): it joined topic
# dr-t (2 partitions, the id below) with the uniform assignor, owned both partitions, and left.
# (record, value hex); the keys are checked by the round trips above.
KAFKA_44_TOPIC = TopicMeta("4b3eeb85-8a99-414e-8a17-d0a3895b80e7", "dr-t", 2)
KAFKA_44_MEMBER = "dr-member-0000000000000"
KAFKA_44_GROUP_LIFE = [
    # ClassicMemberMetadata (tag 0) present as a null marker: Kafka's default is an empty struct.
    (MemberMetadataRecord(KAFKA_44_MEMBER, MemberMetadata(None, None, "dm-client", "/127.0.0.1", ("dr-t",),
                                                          30000, "uniform")),
     "000000000a646d2d636c69656e740b2f3132372e302e302e31020564722d74010000753008756e69666f726d01000100"),
    # The group epoch with the subscribed topics' metadata hash (KIP-1101, tag 0).
    (GroupEpochRecord(2, 0x765814E19D0D2166), "000000000002010008765814e19d0d2166"),
    (TargetAssignmentMemberRecord(KAFKA_44_MEMBER, {KAFKA_44_TOPIC.topic_id: frozenset({0, 1})}),
     "0000024b3eeb858a99414e8a17d0a3895b80e70300000000000000010000"),
    # The target assignment epoch with the wall-clock time it was computed at (tag 0).
    (TargetAssignmentEpochRecord(2, 0x1A21ED0AC18), "000000000002010008000001a21ed0ac18"),
    (CurrentAssignmentRecord(KAFKA_44_MEMBER, MemberAssignment(2, 0, MemberState.STABLE,
                                                               {KAFKA_44_TOPIC.topic_id: frozenset({0, 1})})),
     "0000000000020000000000024b3eeb858a99414e8a17d0a3895b80e70300000000000000010100090300000002000000020100"),
    # The group emptied: the next epoch, hash 0 (no tag), and the target assignment follows it.
    (GroupEpochRecord(3), "00000000000300"),
    (TargetAssignmentEpochRecord(3), "00000000000300"),
]


@pytest.mark.parametrize(("record", "value"), KAFKA_44_GROUP_LIFE, ids=[type(r).__name__ for r, _ in KAFKA_44_GROUP_LIFE])
def test_group_records_are_kafkas(record, value: str) -> None:
    key, encoded = encode_record("dr-group", record)
    assert encoded is not None and encoded.hex() == value
    assert decode_record(decode_key(key)[0], decode_key(key)[2], bytes.fromhex(value)) == record


def test_the_metadata_hash_is_the_one_kafka_wrote() -> None:
    """Kafka's hash of dr-t (its id, name, 2 partitions, no racks) is what raftka computes."""
    from raftka.broker.group.metadata_hash import subscription_hash

    assert subscription_hash(["dr-t"], {"dr-t": KAFKA_44_TOPIC}) == 0x765814E19D0D2166


def test_a_member_record_without_the_classic_tag_is_a_consumer_member() -> None:
    """raftka wrote a consumer-protocol member's record without tag 0 before; it still reads as one."""
    without = bytes.fromhex(KAFKA_44_GROUP_LIFE[0][1][:-8] + "00")
    decoded = decode_record(5, KAFKA_44_MEMBER, without)
    assert isinstance(decoded, MemberMetadataRecord) and decoded.metadata is not None
    assert decoded.metadata.classic is None
