"""Kafka 4.4's subscribed-topics metadata hash (KIP-1101), kept in a consumer group's
ConsumerGroupMetadata record: the group epoch moves when it changes.

Kafka's `Utils.computeTopicHash` feeds, into a hash4j XXH3-64 stream (seed 0), a magic byte 0,
the topic id (most then least significant 64 bits), the name, the partition count, then for
each partition its index and the racks of its replicas' brokers, sorted (each rack as its
length, then the string). `Utils.computeGroupHash` feeds the subscribed topics' hashes (topics
in the metadata image only), ordered by topic name, into another stream; no topic is 0.

A hash4j stream hashes the bytes its puts write, little-endian: a byte, an int (4 bytes), a
long (8); a string as its UTF-16 code units (2 bytes each) followed by its length in code units
as an int. The result is XXH3-64 of those bytes (the xxhash library, which wraps the reference C
implementation; tests/unit/test_metadata_hash.py checks it against hash4j's values), as a signed
64-bit value (Java's long).
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace

import xxhash

from raftka.broker.group.consumer_assignors import TopicMeta

xxh3_64 = xxhash.xxh3_64_intdigest  # XXH3-64, seed 0: what hash4j's Hashing.xxh3_64() gives
_M64 = (1 << 64) - 1


def _signed(h: int) -> int:
    return h - (1 << 64) if h >> 63 else h


def _string(s: str) -> bytes:
    """hash4j's putString: the UTF-16 code units, then their count as an int."""
    units = s.encode("utf-16-le")
    return units + struct.pack("<i", len(units) // 2)


def topic_hash(meta: TopicMeta) -> int:
    """Kafka's `Utils.computeTopicHash` of a topic in the metadata image (the one it carries,
    if computed already)."""
    return meta.hash if meta.hash is not None else _topic_hash(meta)


def with_hash(meta: TopicMeta) -> TopicMeta:
    """The topic with its hash computed (a topic of many partitions takes a while in Python:
    the coordinator does this in a worker thread)."""
    return meta if meta.hash is not None else replace(meta, hash=_topic_hash(meta))


@functools.lru_cache(maxsize=1024)
def _topic_hash(meta: TopicMeta) -> int:
    topic_id = uuid.UUID(meta.topic_id).int
    parts = [b"\x00", struct.pack("<QQ", topic_id >> 64, topic_id & _M64), _string(meta.name),
             struct.pack("<i", meta.partitions)]
    racks: dict[str, bytes] = {}  # a rack as hashed: its length in code units, then putString
    for p in range(meta.partitions):
        parts.append(struct.pack("<i", p))
        for rack in meta.partition_racks(p):
            hashed = racks.get(rack)
            if hashed is None:
                hashed = racks[rack] = _string(rack)[-4:] + _string(rack)
            parts.append(hashed)
    return _signed(xxh3_64(b"".join(parts)))


def group_hash(topic_hashes: Mapping[str, int]) -> int:
    """Kafka's `Utils.computeGroupHash`: the topics' hashes ordered by name (0 for none)."""
    if not topic_hashes:
        return 0
    return _signed(xxh3_64(b"".join(struct.pack("<q", h) for _, h in sorted(topic_hashes.items()))))


def subscription_hash(names: Iterable[str], topics: Mapping[str, TopicMeta]) -> int:
    """Kafka's `ModernGroup.computeMetadataHash`: of the subscribed topics the image has."""
    return group_hash({name: topic_hash(topics[name]) for name in names if name in topics})
