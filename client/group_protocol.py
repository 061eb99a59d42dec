"""The "consumer" embedded protocol: JoinGroup subscription and SyncGroup assignment bytes.

Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment, which every
client puts inside JoinGroup and SyncGroup, so raftka's SDK can share a group
with librdkafka, kafka-python and the Java client:

- Subscription v0: version i16, topics [string], user_data bytes?; v1 adds owned
  partitions [topic string, partitions [i32]] (KIP-429: what the member consumes
  while it rejoins), v2 generation_id i32 (the generation those were owned in),
  v3 rack_id string?. Decoding reads every version; a newer one's extra fields are
  ignored, as Kafka's readers do.
- Assignment v0: version i16, assigned [topic string, partitions [i32]], user_data bytes?

Decoding raises ValueError naming what was malformed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from raftka.client.records import TopicPartition

PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def _nullable_bytes(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def _topic_partitions(tps: Iterable[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">i", len(by_topic))]
    for topic, parts in sorted(by_topic.items()):
        out.append(_string(topic) + struct.pack(f">i{len(parts)}i", len(parts), *sorted(parts)))
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = bytes(data), 0, what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"{self.what}: wanted {n} bytes at position {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self, fmt: str) -> int:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.int(">h")
        if n < 0:
            raise ValueError(f"{self.what}: null string at position {self.pos}")
        return self.take(n).decode()

    def nullable_string(self) -> str | None:
        n = self.int(">h")
        return None if n < 0 else self.take(n).decode()

    def nullable_bytes(self) -> bytes | None:
        n = self.int(">i")
        return None if n < 0 else self.take(n)

    def topic_partitions(self) -> list[TopicPartition]:
        out = []
        for _ in range(self.int(">i")):
            topic = self.string()
            out += [TopicPartition(topic, self.int(">i")) for _ in range(self.int(">i"))]
        return out

    @property
    def done(self) -> bool:
        return self.pos >= len(self.data)


def encode_subscription(sub: Subscription, version: int = 0) -> bytes:
    if not 0 <= version <= 3:
        raise ValueError(f"consumer subscription version {version}; expected 0 to 3")
    out = struct.pack(">hi", version, len(sub.topics)) + b"".join(_string(t) for t in sub.topics)
    out += _nullable_bytes(sub.user_data)
    if version >= 1:
        out += _topic_partitions(sub.owned_partitions)
    if version >= 2:
        out += struct.pack(">i", sub.generation_id)
    if version >= 3:
        out += struct.pack(">h", -1) if sub.rack_id is None else _string(sub.rack_id)
    return out


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data, "consumer subscription")
    version = reader.int(">h")
    topics = tuple(reader.string() for _ in range(reader.int(">i")))
    user_data = reader.nullable_bytes()
    owned: list[TopicPartition] = []
    generation, rack = -1, None
    if version >= 1 and not reader.done:
        owned = reader.topic_partitions()
    if version >= 2 and not reader.done:
        generation = reader.int(">i")
    if version >= 3 and not reader.done:
        rack = reader.nullable_string()
    return Subscription(topics, user_data, tuple(owned), generation, rack)


def encode_assignment(assignment: Assignment, version: int = 0) -> bytes:
    """`version` (0 to 3; a newer one is written as 3): the versions only differ by that number."""
    version = min(max(version, 0), 3)
    return struct.pack(">h", version) + _topic_partitions(assignment.partitions) + _nullable_bytes(assignment.user_data)


def decode_assignment(data: bytes) -> Assignment:
    if not data:  # a member the leader gave nothing may get zero bytes
        return Assignment(())
    reader = _Reader(data, "consumer assignment")
    reader.int(">h")
    partitions = reader.topic_partitions()
    user_data = reader.nullable_bytes() if not reader.done else None
    return Assignment(tuple(partitions), user_data)
