"""RecordBatch v2 bytes built field by field, so a mutation can break one record field and
still hand the broker a batch whose CRC is right (it then passes the CRC check, and only
record validation can refuse it).

Written from the format (docs/protocol.md, Kafka's DefaultRecordBatch), not with
log/record_batch.py: the fuzzer must not share the encoder it tests. Compression
uses log/compression.py (the codecs themselves are third-party libraries).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

import crc32c

from raftka.log.compression import compress

# Batch header after baseOffset + batchLength: partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, count.
_TAIL = struct.Struct(">ibIhiqqqhii")
CRC_START = 21  # attributes onwards are covered by the CRC
BASE_TIMESTAMP = 1_700_000_000_000


def varint(value: int) -> bytes:
    """Zigzag varint (any size: a mutation may want one far wider than 64 bits)."""
    raw = (value << 1) ^ (value >> 127) if value < 0 else value << 1
    return uvarint(raw)


def uvarint(raw: int) -> bytes:
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


@dataclass
class RecordFields:
    """One record as the wire pieces after its length; any piece may be replaced raw."""

    attributes: bytes = b"\x00"
    timestamp_delta: bytes = b"\x00"
    offset_delta: bytes = b"\x00"
    key: bytes = b"\x01"      # key length varint (-1 = null) followed by the key
    value: bytes = b"\x00"    # value length varint followed by the value
    headers: bytes = b"\x00"  # header count varint followed by the headers
    trailer: bytes = b""      # bytes after the last field (a well-formed record has none)
    length: int | None = None  # a length lie; None: the true length

    def encode(self) -> bytes:
        body = (self.attributes + self.timestamp_delta + self.offset_delta + self.key
                + self.value + self.headers + self.trailer)
        return varint(len(body) if self.length is None else self.length) + body


def _sized(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record(index: int, key: bytes | None, value: bytes | None,
           headers: list[tuple[bytes, bytes | None]] = (), timestamp_delta: int = 0) -> RecordFields:
    head = varint(len(headers)) + b"".join(_sized(k) + _sized(v) for k, v in headers)
    return RecordFields(timestamp_delta=varint(timestamp_delta), offset_delta=varint(index),
                        key=_sized(key), value=_sized(value), headers=head)


@dataclass
class BatchSpec:
    """A batch before encoding: its records and every header field a mutation may change."""

    records: list[RecordFields]
    codec: int = 0
    attributes: int | None = None  # None: the codec, nothing else
    last_offset_delta: int | None = None  # None: len(records) - 1
    count: int | None = None  # None: len(records)
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    magic: int = 2
    base_timestamp: int = BASE_TIMESTAMP
    max_timestamp: int | None = None
    records_area: bytes | None = None  # raw (uncompressed) records bytes replacing the records
    compressed_area: bytes | None = None  # raw bytes after the header, replacing the compression
    extra: dict = field(default_factory=dict)

    def encode(self) -> bytes:
        area = self.records_area if self.records_area is not None else b"".join(r.encode() for r in self.records)
        if self.compressed_area is not None:
            payload = self.compressed_area
        else:
            payload = compress(self.codec, area) if self.codec in (1, 2, 3, 4) else area
        count = len(self.records) if self.count is None else self.count
        last = max(count - 1, 0) if self.last_offset_delta is None else self.last_offset_delta
        max_ts = self.base_timestamp if self.max_timestamp is None else self.max_timestamp
        attributes = self.codec if self.attributes is None else self.attributes
        tail = _TAIL.pack(0, self.magic, 0, attributes, last, self.base_timestamp, max_ts,
                          self.producer_id, self.producer_epoch, self.base_sequence, count) + payload
        batch = bytearray(struct.pack(">qi", 0, len(tail)) + tail)
        struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[CRC_START:]))
        return bytes(batch)


def valid_batch(rng: random.Random) -> BatchSpec:
    """A well-formed batch: 1-6 records, keys, values, headers, any codec."""
    records = []
    for i in range(rng.randint(1, 6)):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 12))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 60))
        headers = [(f"h{j}".encode(), None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 8)))
                   for j in range(rng.choice((0, 0, 1, 3)))]
        records.append(record(i, key, value, headers, timestamp_delta=i))
    return BatchSpec(records, codec=rng.choice((0, 0, 0, 1, 2, 3, 4)))


_BIG = (2**31 - 1, 2**31, 2**63 - 1, 2**64, -(2**31), -(2**63), 2**70)


def _overlong() -> list[bytes]:
    return [b"\xff" * 10 + b"\x01", b"\xff" * 12, b"\x80" * 10 + b"\x00", b"\xff\xff\xff\xff\x0f",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", b"\x80"]


def _record_mutation(rng: random.Random, r: RecordFields) -> str:
    """Break one field of record `r` in place; the name of what was done."""
    choice = rng.randrange(12)
    if choice == 0:
        r.length = rng.choice((-1, 0, 1, 5)) if rng.random() < 0.5 else len(r.encode()) + rng.choice((-3, -1, 1, 3, 100))
        return "record_length"
    if choice == 1:
        r.key = varint(rng.choice((-2, 10**6, 2**31 - 1, len(r.key) + 5))) + r.key[1:]
        return "key_length"
    if choice == 2:
        r.value = varint(rng.choice((-2, 10**6, 2**31 - 1, len(r.value) + 5))) + r.value[1:]
        return "value_length"
    if choice == 3:
        r.headers = varint(rng.choice((-1, -5, 2**31 - 1, 1000, 3)))
        return "header_count"
    if choice == 4:
        # a header whose key (or value) length runs past the record
        r.headers = varint(1) + varint(rng.choice((50, -2, 2**20))) + b"k"
        return "header_length"
    if choice == 5:
        piece = rng.choice(("timestamp_delta", "offset_delta", "key", "value", "headers"))
        setattr(r, piece, rng.choice(_overlong()))
        return f"varint_overflow_{piece}"
    if choice == 6:
        r.timestamp_delta = varint(rng.choice(_BIG))
        return "timestamp_delta"
    if choice == 7:
        r.offset_delta = varint(rng.choice((-1, 2**31 - 1, 1000, -(2**31))))
        return "offset_delta"
    if choice == 8:
        r.trailer = rng.randbytes(rng.randint(1, 8))
        return "trailing_bytes"
    if choice == 9:
        r.attributes = bytes([rng.randrange(256)])
        return "record_attributes"
    if choice == 10:
        r.key = varint(-1) + rng.randbytes(3)  # a null key with bytes after it
        return "null_key_with_bytes"
    r.value = rng.randbytes(rng.randint(1, 6))
    return "garbage_value"


def mutate_batch(rng: random.Random, spec: BatchSpec) -> str:
    """Make `spec` malformed in one way that keeps a valid CRC (it is computed at encode)."""
    choice = rng.randrange(10)
    if choice <= 4 and spec.records:
        return _record_mutation(rng, rng.choice(spec.records))
    if choice == 5:
        spec.count = rng.choice((len(spec.records) + 1, len(spec.records) + 1000, 0, -1, 2**31 - 1))
        return "records_count"
    if choice == 6:
        spec.last_offset_delta = rng.choice((-1, len(spec.records) + 5, 2**31 - 1, len(spec.records) - 2))
        return "last_offset_delta"
    if choice == 7:
        area = b"".join(r.encode() for r in spec.records)
        cut = rng.randrange(len(area)) if area else 0
        spec.records_area = area[:cut] if rng.random() < 0.7 else area + rng.randbytes(rng.randint(1, 20))
        return "records_area_cut" if len(spec.records_area) < len(area) else "records_area_extra"
    if choice == 8:
        attributes = rng.choice((5, 6, 7, spec.codec | 0x20, spec.codec | 0x10, 0x40 | spec.codec))
        spec.attributes = attributes
        return "batch_attributes"
    # compressed: garbage instead of the codec's bytes, or a real codec over broken records
    spec.codec = rng.choice((1, 2, 3, 4))
    if rng.random() < 0.5:
        spec.compressed_area = rng.randbytes(rng.randint(0, 40))
        return "compressed_garbage"
    if spec.records:
        _record_mutation(rng, rng.choice(spec.records))
    return "compressed_broken_records"


def mutated_batch(rng: random.Random) -> tuple[str, bytes]:
    spec = valid_batch(rng)
    what = mutate_batch(rng, spec)
    return what, spec.encode()
