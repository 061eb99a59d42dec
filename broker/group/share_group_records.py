"""Share groups' `__consumer_offsets` records (KIP-932), in Kafka 4.4's own schemas.

Keys are non-flexible (an i16 record type, then i16-length strings), values flexible
version 0, as Kafka's group-coordinator `ShareGroup*Key/Value.json`:

    10 ShareGroupMemberMetadata           group, member -> RackId, ClientId, ClientHost, SubscribedTopicNames
    11 ShareGroupMetadata                 group         -> Epoch, MetadataHash
    12 ShareGroupTargetAssignmentMetadata group         -> AssignmentEpoch (+ tagged AssignmentTimestamp)
    13 ShareGroupTargetAssignmentMember   group, member -> TopicPartitions[TopicId, Partitions]
    14 ShareGroupCurrentMemberAssignment  group, member -> MemberEpoch, PreviousMemberEpoch, State,
                                                           AssignedPartitions[TopicId, Partitions]
    15 ShareGroupStatePartitionMetadata   group         -> InitializingTopics, InitializedTopics,
                                                           DeletingTopics

A null value is a tombstone. The core's records (broker/group/share_group_state.py) name
topics; the records carry topic ids, so encoding takes the name -> id map of the metadata
image and decoding the id -> name map (a partition of a topic that no longer exists is
dropped). MetadataHash is the subscribed topics' metadata hash (KIP-1101,
broker/group/metadata_hash.py); a record with 0 (raftka before it) still loads, and the
group's next heartbeat bumps its epoch with the hash. Kafka 4.0's ShareGroupPartitionMetadata
(type 9) is no record type of Kafka 4.4 or raftka: a load skips it (`group_metadata.bad_record`).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping

from raftka.broker.group.share_assignor import TopicPartition
from raftka.broker.group.share_group_state import (
    CurrentAssignment,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberMetadata,
    MemberMetadataRecord,
    ShareGroupRecord,
    StatePartitions,
    StatePartitionsRecord,
    TargetEpochRecord,
    TargetMemberRecord,
)
from raftka.client.protocol.codec import MessageCodec
from raftka.client.protocol.schema import Field as F
from raftka.client.protocol.schema import MessageSchema

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA = 10, 11, 12
TARGET_MEMBER, CURRENT_ASSIGNMENT, STATE_PARTITION_METADATA = 13, 14, 15
KEY_VERSIONS = frozenset(range(10, 16))
_MEMBER_KEYS = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
MEMBER_STATE_STABLE = 0  # Kafka's MemberState.STABLE: share members never wait on revocation


def _value(name: str, *fields: F) -> MessageCodec:
    return MessageCodec(MessageSchema(name, -1, "data", "0", flexible="0+", fields=fields))


_TOPIC_PARTITIONS = (F("topic_id", "uuid", "0+"), F("partitions", "[]int32", "0+"))
_TOPIC_INFO = (F("topic_id", "uuid", "0+"), F("topic_name", "string", "0+"), F("partitions", "[]int32", "0+"))
_CODECS: dict[int, MessageCodec] = {
    MEMBER_METADATA: _value(
        "ShareGroupMemberMetadataValue", F("rack_id", "string", "0+", nullable="0+"),
        F("client_id", "string", "0+"), F("client_host", "string", "0+"),
        F("subscribed_topic_names", "[]string", "0+")),
    GROUP_METADATA: _value("ShareGroupMetadataValue", F("epoch", "int32", "0+"), F("metadata_hash", "int64", "0+")),
    TARGET_METADATA: _value("ShareGroupTargetAssignmentMetadataValue", F("assignment_epoch", "int32", "0+"),
                            F("assignment_timestamp", "int64", "0+", tag=0, tagged="0+", default=0)),
    TARGET_MEMBER: _value("ShareGroupTargetAssignmentMemberValue",
                          F("topic_partitions", "[]TopicPartition", "0+", fields=_TOPIC_PARTITIONS)),
    CURRENT_ASSIGNMENT: _value(
        "ShareGroupCurrentMemberAssignmentValue",
        F("member_epoch", "int32", "0+"), F("previous_member_epoch", "int32", "0+"), F("state", "int8", "0+"),
        F("assigned_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS)),
    STATE_PARTITION_METADATA: _value(
        "ShareGroupStatePartitionMetadataValue",
        F("initializing_topics", "[]TopicPartitionsInfo", "0+", fields=_TOPIC_INFO),
        F("initialized_topics", "[]TopicPartitionsInfo", "0+", fields=_TOPIC_INFO),
        F("deleting_topics", "[]TopicInfo", "0+", fields=_TOPIC_INFO[:2])),
}
_VALUE_VERSION = struct.pack(">h", 0)


def _key(kind: int, *parts: str) -> bytes:
    out = struct.pack(">h", kind)
    for part in parts:
        data = part.encode()
        out += struct.pack(">h", len(data)) + data
    return out


def _encode(kind: int, **values) -> bytes:
    codec = _CODECS[kind]
    return _VALUE_VERSION + codec.encode(codec.cls(**values), 0)


def _by_topic(tps: Iterable[TopicPartition], ids: Mapping[str, str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        if topic in ids:
            out.setdefault(topic, []).append(partition)
    return out


def _partitions(tps: Iterable[TopicPartition], ids: Mapping[str, str]) -> list[dict]:
    return [{"topic_id": uuid.UUID(ids[t]), "partitions": ps} for t, ps in _by_topic(tps, ids).items()]


def _topic_infos(tps: Iterable[TopicPartition], ids: Mapping[str, str]) -> list[dict]:
    return [{"topic_id": uuid.UUID(ids[t]), "topic_name": t, "partitions": ps}
            for t, ps in _by_topic(tps, ids).items()]


def encode_record(group_id: str, record: ShareGroupRecord, ids: Mapping[str, str]) -> tuple[bytes, bytes | None]:
    """(key, value) of one core record; `ids`: topic name -> topic id (UUID string)."""
    match record:
        case MemberMetadataRecord(member_id, m):
            value = None if m is None else _encode(
                MEMBER_METADATA, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names))
            return _key(MEMBER_METADATA, group_id, member_id), value
        case GroupEpochRecord(epoch, metadata_hash):
            value = None if epoch is None else _encode(GROUP_METADATA, epoch=epoch, metadata_hash=metadata_hash)
            return _key(GROUP_METADATA, group_id), value
        case TargetEpochRecord(epoch):
            value = None if epoch is None else _encode(TARGET_METADATA, assignment_epoch=epoch,
                                                       assignment_timestamp=0)
            return _key(TARGET_METADATA, group_id), value
        case TargetMemberRecord(member_id, tps):
            value = None if tps is None else _encode(TARGET_MEMBER, topic_partitions=_partitions(tps, ids))
            return _key(TARGET_MEMBER, group_id, member_id), value
        case CurrentAssignmentRecord(member_id, a):
            value = None if a is None else _encode(
                CURRENT_ASSIGNMENT, member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
                state=MEMBER_STATE_STABLE, assigned_partitions=_partitions(a.partitions, ids))
            return _key(CURRENT_ASSIGNMENT, group_id, member_id), value
        case StatePartitionsRecord(v):
            value = None if v is None else _encode(
                STATE_PARTITION_METADATA, initializing_topics=_topic_infos(v.initializing, ids),
                initialized_topics=_topic_infos(v.initialized, ids), deleting_topics=[])
            return _key(STATE_PARTITION_METADATA, group_id), value
    raise TypeError(f"not a share group record: {record!r}")


def _read_string(data: bytes, pos: int) -> tuple[str, int]:
    if pos + 2 > len(data):
        raise ValueError(f"share group key: truncated at {pos}")
    n = struct.unpack_from(">h", data, pos)[0]
    if n < 0 or pos + 2 + n > len(data):
        raise ValueError(f"share group key: bad string length {n} at {pos}")
    return data[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def decode_key(data: bytes) -> tuple[int, str, str | None]:
    """(record type, group id, member id or None) of a share group record key."""
    if len(data) < 2:
        raise ValueError(f"share group key of {len(data)} bytes; expected at least 2")
    kind = struct.unpack_from(">h", data, 0)[0]
    if kind not in KEY_VERSIONS:
        raise ValueError(f"share group key version {kind}; expected 10..15")
    group_id, pos = _read_string(data, 2)
    member_id = _read_string(data, pos)[0] if kind in _MEMBER_KEYS else None
    return kind, group_id, member_id


def _tps(rows, names: Mapping[str, str]) -> frozenset[TopicPartition]:
    return frozenset((names[str(r.topic_id)], p) for r in rows if str(r.topic_id) in names for p in r.partitions)


def decode_record(kind: int, member_id: str | None, value: bytes | None,
                  names: Mapping[str, str]) -> ShareGroupRecord:
    """The core record of a decoded key and its value (None: a tombstone); `names`: topic id
    (UUID string) -> name. Raises ValueError."""
    if value is not None:
        version = struct.unpack_from(">h", value, 0)[0] if len(value) >= 2 else -1
        if version != 0:
            raise ValueError(f"share group record type {kind} value version {version}; expected 0")
        v, _ = _CODECS[kind].decode(value, 0, 2)
    if kind == GROUP_METADATA:
        return GroupEpochRecord(None) if value is None else GroupEpochRecord(v.epoch, v.metadata_hash)
    if kind == TARGET_METADATA:
        return TargetEpochRecord(None if value is None else v.assignment_epoch)
    if kind == STATE_PARTITION_METADATA:
        return StatePartitionsRecord(None if value is None else StatePartitions(
            _tps(v.initializing_topics, names), _tps(v.initialized_topics, names)))
    if member_id is None:
        raise ValueError(f"share group record type {kind} without a member id")
    if kind == MEMBER_METADATA:
        return MemberMetadataRecord(member_id, None if value is None else MemberMetadata(
            v.rack_id, v.client_id, v.client_host, tuple(v.subscribed_topic_names)))
    if kind == TARGET_MEMBER:
        return TargetMemberRecord(member_id, None if value is None else _tps(v.topic_partitions, names))
    return CurrentAssignmentRecord(member_id, None if value is None else CurrentAssignment(
        v.member_epoch, v.previous_member_epoch, _tps(v.assigned_partitions, names)))
