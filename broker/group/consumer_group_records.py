"""KIP-848 consumer groups' `__consumer_offsets` records, in Kafka's own schemas.

Keys are non-flexible (a version i16 that is the record type, then i16-length
strings), values are flexible version 0 (compact encoding and tagged fields), as in
Kafka's group-coordinator `ConsumerGroup*Key/Value.json`:

    3 ConsumerGroupMetadata               group            -> Epoch, MetadataHash (tagged, KIP-1101)
    4 ConsumerGroupPartitionMetadata      group            -> Topics[TopicId, TopicName, NumPartitions, ...]
                                                              (no longer written; read from older data,
                                                              then tombstoned, as Kafka 4.4 does)
    5 ConsumerGroupMemberMetadata         group, member    -> InstanceId, RackId, ClientId, ClientHost,
                                                              SubscribedTopicNames, SubscribedTopicRegex,
                                                              RebalanceTimeoutMs, ServerAssignor,
                                                              ClassicMemberMetadata (tagged)
    6 ConsumerGroupTargetAssignmentMetadata group          -> AssignmentEpoch, AssignmentTimestamp (tagged)
    7 ConsumerGroupTargetAssignmentMember group, member    -> TopicPartitions[TopicId, Partitions]
    8 ConsumerGroupCurrentMemberAssignment group, member   -> MemberEpoch, PreviousMemberEpoch, State,
                                                              AssignedPartitions, PartitionsPendingRevocation
                                                              (each partition's AssignmentEpochs, tagged)
   16 ConsumerGroupRegularExpression     group, regex     -> Topics (sorted), Version (the metadata
                                                              image's offset), Timestamp (wall-clock ms)

A null value is a tombstone. The core's records (broker/group/consumer_group_state.py) map
one to one; topic ids are UUID strings there.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping

from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.consumer_group_state import (
    ClassicMemberMetadata,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    GroupRecord,
    MemberAssignment,
    MemberMetadata,
    MemberMetadataRecord,
    MemberState,
    Partitions,
    RegexResolution,
    RegexResolutionRecord,
    SubscriptionMetadataRecord,
    TargetAssignmentEpochRecord,
    TargetAssignmentMemberRecord,
)
from raftka.client.protocol.codec import MessageCodec
from raftka.client.protocol.schema import Field as F
from raftka.client.protocol.schema import MessageSchema

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
REGULAR_EXPRESSION = 16
KEY_VERSIONS = frozenset((*range(3, 9), REGULAR_EXPRESSION))


def _value(name: str, *fields: F) -> MessageCodec:
    return MessageCodec(MessageSchema(name, -1, "data", "0", flexible="0+", fields=fields))


_TOPIC_PARTITIONS = (F("topic_id", "uuid", "0+"), F("partitions", "[]int32", "0+"))
# ConsumerGroupCurrentMemberAssignmentValue's TopicPartitions add the tagged AssignmentEpochs
# (Kafka 4.3+, KIP-1251): the epoch of each of Partitions, in the same order.
_HELD_PARTITIONS = (*_TOPIC_PARTITIONS, F("assignment_epochs", "[]int32", "0+", nullable="0+", default=None,
                                         tag=0, tagged="0+"))
# ConsumerGroupMemberMetadataValue's tagged ClassicMemberMetadata (a member on the classic protocol).
_CLASSIC_MEMBER_METADATA = (F("session_timeout_ms", "int32", "0+"), F("supported_protocols", "[]ClassicProtocol", "0+",
                            fields=(F("name", "string", "0+"), F("metadata", "bytes", "0+"))))
_CODECS: dict[int, MessageCodec] = {
    GROUP_METADATA: _value("ConsumerGroupMetadataValue", F("epoch", "int32", "0+"),
                           F("metadata_hash", "int64", "0+", default=0, tag=0, tagged="0+")),
    PARTITION_METADATA: _value("ConsumerGroupPartitionMetadataValue", F("topics", "[]TopicMetadata", "0+", fields=(
        F("topic_id", "uuid", "0+"), F("topic_name", "string", "0+"), F("num_partitions", "int32", "0+"),
        F("partition_metadata", "[]PartitionMetadata", "0+", fields=(
            F("partition", "int32", "0+"), F("racks", "[]string", "0+"))),
    ))),
    MEMBER_METADATA: _value(
        "ConsumerGroupMemberMetadataValue",
        F("instance_id", "string", "0+", nullable="0+"), F("rack_id", "string", "0+", nullable="0+"),
        F("client_id", "string", "0+"), F("client_host", "string", "0+"),
        F("subscribed_topic_names", "[]string", "0+"),
        F("subscribed_topic_regex", "string", "0+", nullable="0+"),
        F("rebalance_timeout_ms", "int32", "0+", default=-1),
        F("server_assignor", "string", "0+", nullable="0+")),
    TARGET_METADATA: _value("ConsumerGroupTargetAssignmentMetadataValue", F("assignment_epoch", "int32", "0+"),
                            F("assignment_timestamp", "int64", "0+", default=0, tag=0, tagged="0+")),
    TARGET_MEMBER: _value("ConsumerGroupTargetAssignmentMemberValue",
                          F("topic_partitions", "[]TopicPartition", "0+", fields=_TOPIC_PARTITIONS)),
    CURRENT_ASSIGNMENT: _value(
        "ConsumerGroupCurrentMemberAssignmentValue",
        F("member_epoch", "int32", "0+"), F("previous_member_epoch", "int32", "0+"), F("state", "int8", "0+"),
        F("assigned_partitions", "[]TopicPartitions", "0+", fields=_HELD_PARTITIONS),
        F("partitions_pending_revocation", "[]TopicPartitions", "0+", fields=_HELD_PARTITIONS)),
    REGULAR_EXPRESSION: _value("ConsumerGroupRegularExpressionValue", F("topics", "[]string", "0+"),
                               F("version", "int64", "0+"), F("timestamp", "int64", "0+")),
}
_VALUE_VERSION = struct.pack(">h", 0)
# ConsumerGroupMemberMetadataValue's tagged ClassicMemberMetadata (tag 0) is Kafka's nullable struct
# whose default is an empty struct, not null: Kafka writes the tag for a member on the consumer
# protocol too, as a null marker (varint 0; 1 precedes a struct), and reads a marker <= 0 as null.
# The codec above leaves tag 0 unknown (kept raw); these bytes are its payload.
_CLASSIC_CODEC = _value("ClassicMemberMetadata", *_CLASSIC_MEMBER_METADATA)
_CLASSIC_TAG = 0
_NULL_STRUCT, _PRESENT_STRUCT = b"\x00", b"\x01"


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def _key(kind: int, *parts: str) -> bytes:
    return struct.pack(">h", kind) + b"".join(_string(p) for p in parts)


def _encode(kind: int, **values) -> bytes:
    codec = _CODECS[kind]
    return _VALUE_VERSION + codec.encode(codec.cls(**values), 0)


def _partitions(partitions: Partitions) -> list[dict]:
    return [{"topic_id": uuid.UUID(t), "partitions": sorted(ps)} for t, ps in sorted(partitions.items())]


def _held(partitions: Partitions, epochs: Mapping[tuple[str, int], int]) -> list[dict]:
    return [{**row, "assignment_epochs": [epochs[(t, p)] for p in row["partitions"]]}
            for t, row in zip(sorted(partitions), _partitions(partitions), strict=True)]


def encode_record(group_id: str, record: GroupRecord) -> tuple[bytes, bytes | None]:
    """(key, value) of one core record for `__consumer_offsets`."""
    match record:
        case GroupEpochRecord(epoch, metadata_hash):
            value = None if epoch is None else _encode(GROUP_METADATA, epoch=epoch, metadata_hash=metadata_hash)
            return _key(GROUP_METADATA, group_id), value
        case SubscriptionMetadataRecord(None):
            return _key(PARTITION_METADATA, group_id), None
        case SubscriptionMetadataRecord(topics):
            return _key(PARTITION_METADATA, group_id), _encode(PARTITION_METADATA, topics=[
                {"topic_id": uuid.UUID(t.topic_id), "topic_name": t.name, "num_partitions": t.partitions,
                 "partition_metadata": []} for t in topics])
        case MemberMetadataRecord(member_id, m):
            return _key(MEMBER_METADATA, group_id, member_id), None if m is None else _member_value(m)
        case TargetAssignmentEpochRecord(epoch, timestamp_ms):
            value = None if epoch is None else _encode(TARGET_METADATA, assignment_epoch=epoch,
                                                       assignment_timestamp=timestamp_ms)
            return _key(TARGET_METADATA, group_id), value
        case TargetAssignmentMemberRecord(member_id, partitions):
            value = None if partitions is None else _encode(TARGET_MEMBER, topic_partitions=_partitions(partitions))
            return _key(TARGET_MEMBER, group_id, member_id), value
        case CurrentAssignmentRecord(member_id, a):
            value = None if a is None else _encode(
                CURRENT_ASSIGNMENT, member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
                state=int(a.state), assigned_partitions=_held(a.assigned, a.epochs),
                partitions_pending_revocation=_held(a.pending_revocation, a.epochs))
            return _key(CURRENT_ASSIGNMENT, group_id, member_id), value
        case RegexResolutionRecord(regex, resolution):
            value = None if resolution is None else _encode(
                REGULAR_EXPRESSION, topics=sorted(resolution.topics), version=resolution.version,
                timestamp=resolution.timestamp_ms)
            return _key(REGULAR_EXPRESSION, group_id, regex), value
    raise TypeError(f"not a consumer group record: {record!r}")


def _member_value(m: MemberMetadata) -> bytes:
    """Kafka writes "" for a member without a regex (its ConsumerGroupMember's default), raftka's None."""
    codec = _CODECS[MEMBER_METADATA]
    value = codec.cls(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex or "",
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor)
    classic = m.classic
    value._unknown_tags = {_CLASSIC_TAG: _NULL_STRUCT if classic is None else _PRESENT_STRUCT + _CLASSIC_CODEC.encode(
        _CLASSIC_CODEC.cls(session_timeout_ms=classic.session_timeout_ms, supported_protocols=[
            {"name": n, "metadata": data} for n, data in classic.protocols]), 0)}
    return _VALUE_VERSION + codec.encode(value, 0)


def _classic_metadata(value) -> ClassicMemberMetadata | None:
    """The tagged ClassicMemberMetadata: absent (raftka's records before it wrote the null marker)
    or a null marker, None."""
    raw = (getattr(value, "_unknown_tags", None) or {}).get(_CLASSIC_TAG)
    if not raw or raw[0] == 0:
        return None
    if raw[:1] != _PRESENT_STRUCT:
        raise ValueError(f"ClassicMemberMetadata marker {raw[0]}; expected 0 or 1")
    classic, end = _CLASSIC_CODEC.decode(raw, 0, 1)
    if end != len(raw):
        raise ValueError(f"ClassicMemberMetadata: {len(raw) - end} byte(s) after it")
    return ClassicMemberMetadata(classic.session_timeout_ms,
                                 tuple((p.name, bytes(p.metadata)) for p in classic.supported_protocols))


def _read_string(data: bytes, pos: int, what: str) -> tuple[str, int]:
    if pos + 2 > len(data):
        raise ValueError(f"{what}: truncated at {pos}")
    n = struct.unpack_from(">h", data, pos)[0]
    if n < 0 or pos + 2 + n > len(data):
        raise ValueError(f"{what}: bad string length {n} at {pos}")
    return data[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def decode_key(data: bytes) -> tuple[int, str, str | None]:
    """(record type, group id, member id or None) of a consumer group record key; for a
    ConsumerGroupRegularExpression key, the regex in the member id's place."""
    kind = struct.unpack_from(">h", data, 0)[0]
    if kind not in KEY_VERSIONS:
        raise ValueError(f"consumer group key version {kind}; expected 3..8 or 16")
    group_id, pos = _read_string(data, 2, "consumer group key")
    member_id = None
    if kind in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION):
        member_id, pos = _read_string(data, pos, "consumer group key")
    return kind, group_id, member_id


def _unpartitions(rows) -> dict[str, frozenset[int]]:
    return {str(r.topic_id): frozenset(r.partitions) for r in rows if r.partitions}


def _epochs(rows) -> dict[tuple[str, int], int]:
    """The rows' assignment epochs; a row without them (or not one per partition: Kafka logs an
    error) leaves its partitions at the member epoch (MemberAssignment's default)."""
    return {(str(r.topic_id), p): e for r in rows
            if r.assignment_epochs is not None and len(r.assignment_epochs) == len(r.partitions)
            for p, e in zip(r.partitions, r.assignment_epochs, strict=True)}


def decode_record(kind: int, member_id: str | None, value: bytes | None) -> GroupRecord:
    """The core record of a decoded key and its value (None: a tombstone). Raises ValueError."""
    if value is not None:
        version = struct.unpack_from(">h", value, 0)[0] if len(value) >= 2 else -1
        if version != 0:
            raise ValueError(f"consumer group record type {kind} value version {version}; expected 0")
        v, _ = _CODECS[kind].decode(value, 0, 2)
    if kind == GROUP_METADATA:
        return GroupEpochRecord(None) if value is None else GroupEpochRecord(v.epoch, v.metadata_hash)
    if kind == PARTITION_METADATA:
        return SubscriptionMetadataRecord(None if value is None else tuple(
            TopicMeta(str(t.topic_id), t.topic_name, t.num_partitions) for t in v.topics))
    if kind == TARGET_METADATA:
        return (TargetAssignmentEpochRecord(None) if value is None
                else TargetAssignmentEpochRecord(v.assignment_epoch, v.assignment_timestamp))
    assert member_id is not None
    if kind == REGULAR_EXPRESSION:
        return RegexResolutionRecord(member_id, None if value is None else RegexResolution(
            frozenset(v.topics), v.version, v.timestamp))
    if kind == MEMBER_METADATA:
        return MemberMetadataRecord(member_id, None if value is None else MemberMetadata(
            v.instance_id, v.rack_id, v.client_id, v.client_host, tuple(v.subscribed_topic_names),
            v.rebalance_timeout_ms, v.server_assignor, v.subscribed_topic_regex or None,
            _classic_metadata(v)))
    if kind == TARGET_MEMBER:
        return TargetAssignmentMemberRecord(member_id, None if value is None else _unpartitions(v.topic_partitions))
    return CurrentAssignmentRecord(member_id, None if value is None else MemberAssignment(
        v.member_epoch, v.previous_member_epoch, MemberState(v.state), _unpartitions(v.assigned_partitions),
        _unpartitions(v.partitions_pending_revocation),
        {**_epochs(v.assigned_partitions), **_epochs(v.partitions_pending_revocation)}))
