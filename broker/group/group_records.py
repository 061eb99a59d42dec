"""The keys and values of `__consumer_offsets` records, in Kafka's own schemas.

Kafka's layout, so its tools (and ours) can read the topic:

- OffsetCommitKey v1: version i16=1, group string, topic string, partition i32
- OffsetCommitValue v3: version i16=3, offset i64, leader_epoch i32, metadata string,
  commit_timestamp i64
- GroupMetadataKey v2: version i16=2, group string
- GroupMetadataValue v3: version i16=3, protocol_type string, generation i32,
  protocol string?, leader string?, current_state_timestamp i64, members
  [member_id string, group_instance_id string?, client_id string, client_host string,
  rebalance_timeout i32, session_timeout i32, subscription bytes, assignment bytes]

KIP-848 consumer groups' records (key versions 3-8 and 16) are in
broker/group/consumer_group_records.py; `decode_key` names them `ConsumerGroupKey`. Share
groups' (key versions 10-15) are in broker/group/share_group_records.py (`ShareGroupKey`).

A null value is a tombstone (the offset or the group was deleted); the topic is
compacted on these keys. Strings are i16-length-prefixed UTF-8 (-1 = null), bytes
i32-length-prefixed. Decoding raises ValueError naming what was malformed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from raftka.broker.group.consumer_group_records import KEY_VERSIONS as CONSUMER_GROUP_KEY_VERSIONS
from raftka.broker.group.consumer_group_records import decode_key as consumer_group_key
from raftka.broker.group.group_state import CommittedOffset, Member
from raftka.broker.group.share_group_records import KEY_VERSIONS as SHARE_GROUP_KEY_VERSIONS
from raftka.broker.group.share_group_records import decode_key as share_group_key

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


@dataclass(frozen=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True)
class ConsumerGroupKey:
    """A KIP-848 consumer group record's key (versions 3-8 and 16: broker/group/consumer_group_records.py;
    16's regex is in `member_id`)."""

    kind: int
    group_id: str
    member_id: str | None


@dataclass(frozen=True)
class ShareGroupKey:
    """A share group record's key (versions 10-15: broker/group/share_group_records.py)."""

    kind: int
    group_id: str
    member_id: str | None


@dataclass(frozen=True)
class GroupMetadata:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[Member, ...]


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def _bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"{self.what}: needs {n} bytes at position {self.pos}, "
                             f"only {len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self._take(size))[0]

    def string(self) -> str | None:
        n = self.unpack(">h")
        return None if n == -1 else self._take(n).decode()

    def bytes_(self) -> bytes:
        n = self.unpack(">i")
        return b"" if n == -1 else self._take(n)


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", OFFSET_KEY_VERSION) + _string(group_id) + _string(topic) + struct.pack(">i", partition)


def group_key(group_id: str) -> bytes:
    return struct.pack(">h", GROUP_KEY_VERSION) + _string(group_id)


def offset_value(committed: CommittedOffset) -> bytes:
    return (struct.pack(">hqi", OFFSET_VALUE_VERSION, committed.offset, committed.leader_epoch)
            + _string(committed.metadata) + struct.pack(">q", committed.commit_timestamp_ms))


def group_value(meta: GroupMetadata) -> bytes:
    out = [struct.pack(">h", GROUP_VALUE_VERSION), _string(meta.protocol_type),
           struct.pack(">i", meta.generation_id), _string(meta.protocol_name), _string(meta.leader_id),
           struct.pack(">q", meta.state_timestamp_ms), struct.pack(">i", len(meta.members))]
    for m in meta.members:
        out += [_string(m.member_id), _string(m.group_instance_id), _string(m.client_id),
                _string(m.client_host), struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms),
                _bytes(m.metadata_for(meta.protocol_name)), _bytes(m.assignment)]
    return b"".join(out)


def decode_key(data: bytes) -> OffsetKey | GroupKey | ConsumerGroupKey | ShareGroupKey:
    reader = _Reader(data, "__consumer_offsets key")
    version = reader.unpack(">h")
    if version in CONSUMER_GROUP_KEY_VERSIONS:
        return ConsumerGroupKey(*consumer_group_key(data))
    if version in SHARE_GROUP_KEY_VERSIONS:
        return ShareGroupKey(*share_group_key(data))
    if version in (0, 1):
        group, topic = reader.string(), reader.string()
        return OffsetKey(group or "", topic or "", reader.unpack(">i"))
    if version == 2:
        return GroupKey(reader.string() or "")
    raise ValueError(f"__consumer_offsets key version {version}; expected 0 to 8 or 10 to 16")


def decode_offset_value(data: bytes) -> CommittedOffset:
    reader = _Reader(data, "offset commit value")
    version = reader.unpack(">h")
    if version not in (1, 3):
        raise ValueError(f"offset commit value version {version}; expected 1 or 3")
    offset = reader.unpack(">q")
    epoch = reader.unpack(">i") if version >= 3 else -1
    metadata = reader.string() or ""
    timestamp = reader.unpack(">q")
    return CommittedOffset(offset, epoch, metadata, timestamp)


def decode_group_value(data: bytes) -> GroupMetadata:
    reader = _Reader(data, "group metadata value")
    version = reader.unpack(">h")
    if version != GROUP_VALUE_VERSION:
        raise ValueError(f"group metadata value version {version}; expected {GROUP_VALUE_VERSION}")
    protocol_type = reader.string() or ""
    generation = reader.unpack(">i")
    protocol, leader = reader.string(), reader.string()
    timestamp = reader.unpack(">q")
    members = []
    for _ in range(reader.unpack(">i")):
        member_id = reader.string() or ""
        instance_id = reader.string()
        client_id = reader.string() or ""
        client_host = reader.string() or ""
        rebalance_timeout, session_timeout = reader.unpack(">i"), reader.unpack(">i")
        subscription, assignment = reader.bytes_(), reader.bytes_()
        members.append(Member(member_id, client_id, client_host, session_timeout, rebalance_timeout,
                              protocol_type, ((protocol or "", subscription),), instance_id, assignment))
    return GroupMetadata(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """Kafka's choice: Utils.abs(groupId.hashCode) % offsets.topic.num.partitions."""
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0, not to its (unrepresentable) absolute value.
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
