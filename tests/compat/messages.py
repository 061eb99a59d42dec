"""Test messages for the client compatibility tests, and the round-trip check over them.

Every message is unique (its index is in the value), keyed (so the partition
is decided by the key hash), and carries headers including binary and empty
values; values mix compressible text with random bytes so that every codec
really compresses and every byte value occurs.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from raftka.client.partitioner import partition_for_key
from raftka.log.record_batch import iter_batches
from tests.compat.wire_client import WireConnection

Headers = tuple[tuple[str, bytes], ...]

# RecordBatch attribute bits 0-2: the compression codec (raftka.log.compression).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass(frozen=True, slots=True)
class Message:
    key: bytes
    value: bytes
    headers: Headers


@dataclass(frozen=True, slots=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


def make_messages(count: int, *, seed: int, distinct_keys: int = 37) -> list[Message]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        key = f"key-{rng.randrange(distinct_keys)}".encode()
        size = rng.choice((0, 1, 16, 100, 700)) if i % 500 else 20_000
        value = f"value {i} ".encode() * (size // 12) + rng.randbytes(size % 37 + 8)
        headers: Headers = ()
        if i % 3 == 0:
            headers = (("index", str(i).encode()), ("bin", rng.randbytes(6)))
        elif i % 3 == 1:
            headers = (("empty", b""), ("index", str(i).encode()), ("index", b"dup name"))
        out.append(Message(key, value, headers))
    return out


def check_round_trip(sent: Sequence[Message], consumed: Sequence[Consumed],
                     num_partitions: int) -> None:
    """Everything sent came back exactly once, byte for byte, where the Java partitioner
    puts its key, in offset order per partition and in send order per key."""
    assert len(consumed) == len(sent), f"consumed {len(consumed)} messages, sent {len(sent)}"
    last_offset: dict[int, int] = {}
    per_key_consumed: dict[bytes | None, list[tuple[bytes | None, Headers]]] = defaultdict(list)
    for message in consumed:
        previous = last_offset.get(message.partition, -1)
        assert message.offset > previous, (
            f"partition {message.partition}: offset {message.offset} after {previous}, "
            "expected strictly increasing offsets")
        last_offset[message.partition] = message.offset
        assert message.key is not None, f"offset {message.offset}: key came back null"
        expected_partition = partition_for_key(message.key, num_partitions)
        assert message.partition == expected_partition, (
            f"key {message.key!r} is in partition {message.partition}, "
            f"the Java partitioner says {expected_partition}")
        per_key_consumed[message.key].append((message.value, message.headers))
    per_key_sent: dict[bytes | None, list[tuple[bytes | None, Headers]]] = defaultdict(list)
    for message in sent:
        per_key_sent[message.key].append((message.value, message.headers))
    assert per_key_consumed.keys() == per_key_sent.keys()
    for key, expected in per_key_sent.items():
        got = per_key_consumed[key]
        if got != expected:
            first = next(i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b)
            raise AssertionError(f"key {key!r}: message #{first} differs: got {got[first]!r}, "
                                 f"sent {expected[first]!r}")


def check_stored_batches(bootstrap: str, topic: str, partitions: Iterable[int], codec: str,
                         *, idempotent: bool = True) -> int:
    """Read the raw batches back: the producer really used `codec` and (if `idempotent`) a
    producer id and sequence numbers. The number of batches.

    Both clients send a batch uncompressed when compressing it would not make it
    smaller, so a few uncompressed batches are allowed; most must use the codec.
    """
    codecs: Counter[int] = Counter()
    with WireConnection(bootstrap) as conn:
        for partition in partitions:
            end = conn.end_offset(topic, partition)
            offset = 0
            while offset < end:
                result = conn.fetch(topic, partition, offset)
                assert result.error_code == 0, f"fetch {topic}-{partition}: {result.error_code}"
                for batch in iter_batches(bytes(result.records), verify_crc=True):
                    header = batch.header
                    assert header.compression in (CODEC_IDS[codec], 0), (
                        f"{topic}-{partition}@{header.base_offset}: codec {header.compression}, "
                        f"expected {CODEC_IDS[codec]} ({codec})")
                    if idempotent:
                        assert header.producer_id >= 0 and header.base_sequence >= 0, (
                            f"{topic}-{partition}@{header.base_offset}: producer id "
                            f"{header.producer_id} seq {header.base_sequence}, expected an "
                            "idempotent producer's batch")
                    codecs[header.compression] += 1
                    offset = header.last_offset + 1
    total = sum(codecs.values())
    assert codecs[CODEC_IDS[codec]] * 2 >= total, (
        f"{topic}: batches per codec {dict(codecs)}, expected most to use {codec}")
    return total
