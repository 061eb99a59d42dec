"""Kafka 4.4's subscribed-topics metadata hash (KIP-1101), kept in a consumer group's
ConsumerGroupMetadata record: the group epoch moves when it changes.

Kafka's `Utils.computeTopicHash` feeds, into a hash4j XXH3-64 stream (seed 0), a magic byte 0,
the topic id (most then least significant 64 bits), the name, the partition count, then for
each partition its index and the racks of its replicas' brokers, sorted (each rack as its
length, then the string). `Utils.computeGroupHash` feeds the subscribed topics' hashes (topics
in the metadata image only), ordered by topic name, into another stream; no topic is 0.

A hash4j stream hashes the bytes its puts write, little-endian: a byte, an int (4 bytes), a
long (8); a string as its UTF-16 code units (2 bytes each) followed by its length in code units
as an int. The result is XXH3-64 of those bytes, here in pure Python (`xxh3_64`), as a signed
64-bit value (Java's long).
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace

from raftka.broker.group.consumer_assignors import TopicMeta

_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1
_P32_1, _P32_2, _P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_P64_1, _P64_2, _P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P64_4, _P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_PMX1, _PMX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25

# XXH3's default secret (kSecret, 192 bytes).
_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
_SECRET64 = struct.unpack("<24Q", _SECRET)
_STRIPE = 64
_STRIPES_PER_BLOCK = (len(_SECRET) - _STRIPE) // 8  # 16
_BLOCK = _STRIPE * _STRIPES_PER_BLOCK  # 1024


def _r64(data: bytes, at: int) -> int:
    return struct.unpack_from("<Q", data, at)[0]


def _r32(data: bytes, at: int) -> int:
    return struct.unpack_from("<I", data, at)[0]


def _fold(a: int, b: int) -> int:
    product = a * b
    return (product & _M64) ^ (product >> 64)


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = (h * _PMX1) & _M64
    return h ^ (h >> 32)


def _xxh64_avalanche(h: int) -> int:
    h ^= h >> 33
    h = (h * _P64_2) & _M64
    h ^= h >> 29
    h = (h * _P64_3) & _M64
    return h ^ (h >> 32)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _mix16(data: bytes, at: int, secret_at: int) -> int:
    return _fold(_r64(data, at) ^ _r64(_SECRET, secret_at), _r64(data, at + 8) ^ _r64(_SECRET, secret_at + 8))


def _short(data: bytes) -> int:
    n = len(data)
    if n == 0:
        return _xxh64_avalanche(_r64(_SECRET, 56) ^ _r64(_SECRET, 64))
    if n <= 3:
        combined = (data[0] << 16) | (data[n >> 1] << 24) | data[n - 1] | (n << 8)
        return _xxh64_avalanche(combined ^ (_r32(_SECRET, 0) ^ _r32(_SECRET, 4)))
    if n <= 8:
        keyed = ((_r32(data, n - 4) + (_r32(data, 0) << 32)) & _M64) ^ (_r64(_SECRET, 8) ^ _r64(_SECRET, 16))
        keyed ^= _rotl(keyed, 49) ^ _rotl(keyed, 24)
        keyed = (keyed * _PMX2) & _M64
        keyed ^= (keyed >> 35) + n
        keyed = (keyed * _PMX2) & _M64
        return keyed ^ (keyed >> 28)
    lo = _r64(data, 0) ^ (_r64(_SECRET, 24) ^ _r64(_SECRET, 32))
    hi = _r64(data, n - 8) ^ (_r64(_SECRET, 40) ^ _r64(_SECRET, 48))
    swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
    return _avalanche((n + swapped + hi + _fold(lo, hi)) & _M64)


def _medium(data: bytes) -> int:
    n = len(data)
    acc = (n * _P64_1) & _M64
    if n <= 128:
        if n > 32:
            if n > 64:
                if n > 96:
                    acc += _mix16(data, 48, 96) + _mix16(data, n - 64, 112)
                acc += _mix16(data, 32, 64) + _mix16(data, n - 48, 80)
            acc += _mix16(data, 16, 32) + _mix16(data, n - 32, 48)
        acc += _mix16(data, 0, 0) + _mix16(data, n - 16, 16)
        return _avalanche(acc & _M64)
    for i in range(8):
        acc += _mix16(data, 16 * i, 16 * i)
    acc = _avalanche(acc & _M64)
    for i in range(8, n // 16):
        acc += _mix16(data, 16 * i, 16 * (i - 8) + 3)
    acc += _mix16(data, n - 16, 136 - 17)
    return _avalanche(acc & _M64)


def _stripes(acc: list[int], lanes: tuple[int, ...], first: int, count: int, secret_lane: int) -> None:
    """XXH3's accumulate_512 over `count` stripes of 8 lanes from lanes[first], the secret's keys
    from its 64-bit lane `secret_lane` on, one lane further each stripe."""
    a0, a1, a2, a3, a4, a5, a6, a7 = acc
    for s in range(count):
        at, k = first + 8 * s, secret_lane + s
        v0, v1, v2, v3, v4, v5, v6, v7 = lanes[at:at + 8]
        x0, x1, x2, x3 = v0 ^ _SECRET64[k], v1 ^ _SECRET64[k + 1], v2 ^ _SECRET64[k + 2], v3 ^ _SECRET64[k + 3]
        x4, x5, x6, x7 = v4 ^ _SECRET64[k + 4], v5 ^ _SECRET64[k + 5], v6 ^ _SECRET64[k + 6], v7 ^ _SECRET64[k + 7]
        a0 = (a0 + v1 + (x0 & _M32) * (x0 >> 32)) & _M64
        a1 = (a1 + v0 + (x1 & _M32) * (x1 >> 32)) & _M64
        a2 = (a2 + v3 + (x2 & _M32) * (x2 >> 32)) & _M64
        a3 = (a3 + v2 + (x3 & _M32) * (x3 >> 32)) & _M64
        a4 = (a4 + v5 + (x4 & _M32) * (x4 >> 32)) & _M64
        a5 = (a5 + v4 + (x5 & _M32) * (x5 >> 32)) & _M64
        a6 = (a6 + v7 + (x6 & _M32) * (x6 >> 32)) & _M64
        a7 = (a7 + v6 + (x7 & _M32) * (x7 >> 32)) & _M64
    acc[:] = (a0, a1, a2, a3, a4, a5, a6, a7)


def _long(data: bytes) -> int:
    n = len(data)
    acc = [_P32_3, _P64_1, _P64_2, _P64_3, _P64_4, _P32_2, _P64_5, _P32_1]
    blocks = (n - 1) // _BLOCK
    lanes = struct.unpack_from(f"<{(n - 1) // 8}Q", data)  # every whole lane but the last stripe's tail
    scramble = _SECRET64[(len(_SECRET) - _STRIPE) // 8:]
    for b in range(blocks):
        _stripes(acc, lanes, b * _BLOCK // 8, _STRIPES_PER_BLOCK, 0)
        for i in range(8):
            a = acc[i] ^ (acc[i] >> 47) ^ scramble[i]
            acc[i] = (a * _P32_1) & _M64
    _stripes(acc, lanes, blocks * _BLOCK // 8, ((n - 1) - blocks * _BLOCK) // _STRIPE, 0)
    # The last stripe: the input's last 64 bytes, with the secret from byte 121 (not lane-aligned).
    last = struct.unpack_from("<8Q", data, n - _STRIPE)
    keys = struct.unpack_from("<8Q", _SECRET, len(_SECRET) - _STRIPE - 7)
    for i in range(8):
        keyed = last[i] ^ keys[i]
        acc[i ^ 1] = (acc[i ^ 1] + last[i]) & _M64
        acc[i] = (acc[i] + (keyed & _M32) * (keyed >> 32)) & _M64
    result = (n * _P64_1) & _M64
    for i in range(4):
        result += _fold(acc[2 * i] ^ _r64(_SECRET, 11 + 16 * i), acc[2 * i + 1] ^ _r64(_SECRET, 11 + 16 * i + 8))
    return _avalanche(result & _M64)


def xxh3_64(data: bytes) -> int:
    """XXH3-64 of `data` with seed 0 and the default secret, as an unsigned 64-bit value."""
    n = len(data)
    if n <= 16:
        return _short(data)
    if n <= 240:
        return _medium(data)
    return _long(data)


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
