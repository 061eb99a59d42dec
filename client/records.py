"""The small value types the SDK hands to and gets from its users."""

from __future__ import annotations

from typing import NamedTuple

# Kafka's timestamp types, as in a batch's attributes bit 3.
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where a produced record landed. `offset` is -1 for acks=0 (no answer);
    `timestamp` is the broker's LogAppendTime when the topic uses it, else the
    record's create time."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # CREATE_TIME or LOG_APPEND_TIME
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class ShareConsumerRecord(NamedTuple):
    """A record a share consumer was given: a ConsumerRecord's fields plus how many times it has
    been delivered (1 the first time; it rises each time it comes back)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's group membership, for `send_offsets_to_transaction` (KIP-447): the
    group coordinator fences a TxnOffsetCommit from an older generation or another member.
    A consumer outside a group, or before its first join, gives generation -1 and ""."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
