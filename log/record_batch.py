"""Encode and decode whole RecordBatch v2 batches, records included.

The broker's hot path never comes here (it reads the 61-byte header, see
`log.batch_header`, and the leader walks the records without building them, see
`log.record_validator`); this is for the SDK, the compaction cleaner and tests.

A record inside a batch (after decompression) is

    length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
    headerCount varint | headerCount x (keyLength varint, key utf-8,
                                        valueLength varint (-1 = null), value)

where `length` counts the bytes after itself. Offsets and timestamps are stored
as deltas from the header's baseOffset and baseTimestamp; with LogAppendTime
every record's timestamp is the header's maxTimestamp.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from crc32c import crc32c

from raftka.log.batch_header import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    pack_header,
    parse_header,
)
from raftka.log.batch_header import verify_crc as check_crc
from raftka.log.compression import Compression, compress, decompress
from raftka.log.errors import CorruptRecord
from raftka.log.varint import (
    INT32_MAX,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

NO_TIMESTAMP = -1
_CRC = struct.Struct(">I")
# Zigzag varints of 0.._CACHED-1: record lengths, offset and timestamp deltas mostly fit.
_CACHED = 1 << 14
_NON_NEGATIVE = tuple(encode_varint(n) for n in range(_CACHED))
# attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount: a byte each
_MIN_RECORD_SIZE = 6

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Record:
    """One record. On encode, `timestamp` None means the batch's base timestamp
    (now if none is given) and `offset` None means base_offset + its index;
    decode always fills both in (absolute values)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None
    offset: int | None = None


class RecordLike(Protocol):
    """What `encode_batch` reads from a record: Record, or a producer's own
    lighter object with the same attributes."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def offset(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    header: BatchHeader
    records: list  # of Record, or of what decode_batch's make_record built


def encode_batch(
    records: Sequence[RecordLike],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    base_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    xerial_snappy: bool = False,
) -> bytes:
    """The bytes of one RecordBatch v2 holding `records`, CRC included.

    Records may carry explicit offsets with gaps (strictly increasing, at most
    2**31 - 1 past `base_offset`). `last_offset_delta` overrides the header's
    lastOffsetDelta (it must cover every record); an empty `records` is allowed
    only with it. Raises ValueError for arguments the format cannot hold and
    UnsupportedCompression for an unknown codec.
    """
    codec = Compression.of(compression)
    if not records and last_offset_delta is None:
        raise ValueError(
            "cannot encode an empty batch without last_offset_delta: an empty batch "
            "only exists to keep an offset range (pass last_offset_delta)"
        )

    default_ts = base_timestamp
    if default_ts is None and any(r.timestamp is None for r in records):
        default_ts = int(time.time() * 1000)
    timestamps = [default_ts if r.timestamp is None else r.timestamp for r in records]
    if timestamps:
        first_ts = min(timestamps)
        max_ts = max(timestamps)
    else:
        first_ts = max_ts = NO_TIMESTAMP if base_timestamp is None else base_timestamp

    # Pieces joined once at the end: a record's value is copied exactly once.
    pieces: list[bytes] = []
    previous_delta = -1
    for index, record in enumerate(records):
        offset = base_offset + index if record.offset is None else record.offset
        delta = offset - base_offset
        if delta <= previous_delta or delta > INT32_MAX:
            raise ValueError(
                f"record {index} has offset {offset}: offsets must increase strictly "
                f"and lie in [{base_offset}, {base_offset + INT32_MAX}] "
                f"(base offset {base_offset}, previous offset delta {previous_delta})"
            )
        previous_delta = delta
        _encode_record(pieces, record, index, timestamps[index] - first_ts, delta)
    body = b"".join(pieces)

    if last_offset_delta is None:
        last_offset_delta = previous_delta
    elif not max(previous_delta, 0) <= last_offset_delta <= INT32_MAX:
        raise ValueError(
            f"last_offset_delta {last_offset_delta} must lie in [{max(previous_delta, 0)}, "
            f"{INT32_MAX}]: the largest record offset delta is {previous_delta}"
        )

    payload = body if codec is Compression.NONE else compress(codec, body, xerial=xerial_snappy)
    attributes = int(codec)
    if log_append_time:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    header = BatchHeader(
        base_offset=base_offset,
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch=partition_leader_epoch,
        magic=MAGIC_V2,
        crc=0,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=first_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
    )
    try:
        head = bytearray(pack_header(header))
    except struct.error as exc:
        raise ValueError(f"a batch header field is out of range ({exc}): {header}") from None
    # The CRC runs over the header's tail and the payload in two steps, so the
    # payload is copied once (into the result) rather than into a scratch buffer too.
    crc = crc32c(payload, value=crc32c(memoryview(head)[CRC_START:]))
    _CRC.pack_into(head, CRC_START - 4, crc)
    return bytes(head + payload) if isinstance(payload, bytearray) else bytes(head) + payload


def _varint(n: int) -> bytes:
    """encode_varint with the common non-negative values looked up, not computed."""
    return _NON_NEGATIVE[n] if 0 <= n < _CACHED else encode_varint(n)


def _encode_record(pieces: list[bytes], record: RecordLike, index: int, timestamp_delta: int,
                   offset_delta: int) -> None:
    """Append one record's encoding to `pieces` (its value as its own piece, uncopied).

    This runs once per record in the SDK producer: lookups instead of varint
    arithmetic, and no intermediate buffer holding the value."""
    key = record.key
    head = (b"\x00"  # attributes: unused by every Kafka version so far
            + (_NON_NEGATIVE[timestamp_delta] if 0 <= timestamp_delta < _CACHED
               else encode_varlong(timestamp_delta))
            + _varint(offset_delta)
            + (b"\x01" if key is None else _varint(len(key)) + key))  # zigzag(-1) = null
    value = record.value
    if value is None:
        value_length, value = b"\x01", b""
    else:
        value_length = _varint(len(value))
    headers = record.headers
    tail = _encode_headers(headers, index) if headers else b"\x00"
    pieces.append(_varint(len(head) + len(value_length) + len(value) + len(tail)))
    pieces.append(head)
    pieces.append(value_length)
    pieces.append(value)
    pieces.append(tail)


def _encode_headers(headers: Sequence[tuple[str, bytes | None]], index: int) -> bytes:
    out = bytearray(_varint(len(headers)))
    for header_key, header_value in headers:
        if not isinstance(header_key, str):
            raise TypeError(
                f"record {index}: header key {header_key!r} is a {type(header_key).__name__}, "
                f"expected str"
            )
        encoded = header_key.encode("utf-8")
        out += _varint(len(encoded))
        out += encoded
        if header_value is None:
            out += b"\x01"
        else:
            out += _varint(len(header_value))
            out += header_value
    return bytes(out)


def decode_batch(buf: Buffer, pos: int = 0, *, verify_crc: bool = True,
                 make_record: Callable[[bytes | None, bytes | None, tuple, int, int], Any] = Record) -> DecodedBatch:
    """Decode the batch at `buf[pos]` with all its records.

    Each record is built by `make_record(key, value, headers, timestamp, offset)`
    (absolute timestamp and offset): `Record` by default; a consumer passes its own
    constructor so a record is built once, not decoded into a Record and copied.

    Raises CorruptRecord (bad CRC, truncated or inconsistent bytes, records that
    disagree with their lengths or with the header's count), InvalidRecord (magic
    other than 2) or UnsupportedCompression (codec id 5-7).
    """
    header = parse_header(buf, pos)
    if verify_crc:
        check_crc(buf, header)
    body = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    codec = header.attributes & ATTR_CODEC_MASK
    try:
        # bytes, not a memoryview: slicing bytes yields the key and value directly
        data = decompress(codec, body) if codec else body.tobytes()
        records = _decode_records(data, header, make_record)
    except (IndexError, ValueError, struct.error, OverflowError) as exc:
        raise CorruptRecord(
            f"batch at offset {header.base_offset} (position {pos}) is malformed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return DecodedBatch(header, records)


def iter_batches(buf: Buffer, *, verify_crc: bool = True) -> Iterator[DecodedBatch]:
    """Decode every batch in `buf`, which must hold whole batches only (else CorruptRecord)."""
    pos = 0
    end = len(buf)
    while pos < end:
        batch = decode_batch(buf, pos, verify_crc=verify_crc)
        yield batch
        pos += batch.header.size


def _decode_records(data: bytes, header: BatchHeader, make_record=Record) -> list:
    """Parse `header.record_count` records filling `data` exactly.

    One flat loop with the one-byte varint case inlined: this runs per record, and
    function calls dominate its cost in CPython.
    """
    count = header.record_count
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    append_ts = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
    end = len(data)
    records: list[Record] = []
    append = records.append
    varint = decode_varint
    pos = 0
    for index in range(count):
        if pos >= end:
            raise CorruptRecord(
                f"batch at offset {base_offset} declares {count} records "
                f"but its data ends after {index}"
            )
        try:
            b = data[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif pos + 1 < end and data[pos + 1] < 0x80:  # two bytes: records of 64 B .. 8 KiB
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length, p = (z >> 1) ^ -(z & 1), pos + 2
            else:
                length, p = varint(data, pos)
            stop = p + length
            if length < _MIN_RECORD_SIZE or stop > end:
                if length < 0 or stop > end:
                    raise CorruptRecord(
                        f"its length is {length} but {end - p} bytes remain in the batch"
                    )
                raise CorruptRecord(f"its length is {length}, expected at least {_MIN_RECORD_SIZE}")
            p += 1  # attributes: unused
            b = data[p]
            if b < 0x80:
                ts_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                ts_delta, p = decode_varlong(data, p)
            b = data[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                offset_delta, p = varint(data, p)

            b = data[p]
            if b < 0x80:
                n, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                n, p = varint(data, p)
            if n >= 0:
                if p + n > stop:
                    raise CorruptRecord(f"key length {n} but only {stop - p} bytes remain")
                key = data[p : p + n]
                p += n
            elif n == -1:
                key = None
            else:
                raise CorruptRecord(f"key length {n}, expected -1 (null) or >= 0")

            b = data[p]
            if b < 0x80:
                n, p = (b >> 1) ^ -(b & 1), p + 1
            elif p + 1 < end and data[p + 1] < 0x80:  # two bytes: values of 64 B .. 8 KiB
                z = (b & 0x7F) | (data[p + 1] << 7)
                n, p = (z >> 1) ^ -(z & 1), p + 2
            else:
                n, p = varint(data, p)
            if n >= 0:
                if p + n > stop:
                    raise CorruptRecord(f"value length {n} but only {stop - p} bytes remain")
                value = data[p : p + n]
                p += n
            elif n == -1:
                value = None
            else:
                raise CorruptRecord(f"value length {n}, expected -1 (null) or >= 0")

            if p >= stop:
                raise CorruptRecord(f"its length is {length} but it ends before its header count")
            b = data[p]
            if b == 0:
                headers: tuple[tuple[str, bytes | None], ...] = ()
                p += 1
            else:
                headers, p = _decode_headers(data, p, stop)

            if p != stop:
                raise CorruptRecord(
                    f"its length is {length} but its fields take {p - (stop - length)} bytes"
                )
        except (CorruptRecord, IndexError) as exc:
            raise CorruptRecord(
                f"batch at offset {base_offset}: record {index} of {count} "
                f"(byte {pos} of the records): {_reason(exc)}"
            ) from None
        append(
            make_record(
                key,
                value,
                headers,
                base_ts + ts_delta if append_ts is None else append_ts,
                base_offset + offset_delta,
            )
        )
        pos = stop
    if pos != end:
        raise CorruptRecord(
            f"batch at offset {base_offset}: {end - pos} bytes of trailing garbage after "
            f"its {count} declared records"
        )
    return records


def _reason(exc: Exception) -> str:
    if isinstance(exc, IndexError):
        return "its fields run past the end of the batch"
    return str(exc)


def _decode_headers(
    data: bytes, p: int, stop: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, p = decode_varint(data, p)
    if count < 0:
        raise CorruptRecord(f"header count {count}, expected >= 0")
    headers = []
    for h in range(count):
        key_len, p = decode_varint(data, p)
        if key_len < 0 or p + key_len > stop:
            raise CorruptRecord(
                f"header {h} key length {key_len}, expected 0..{stop - p} "
                f"(header keys are non-null strings)"
            )
        try:
            key = data[p : p + key_len].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecord(f"header {h} key is not valid UTF-8: {exc}") from None
        p += key_len
        value_len, p = decode_varint(data, p)
        if value_len >= 0:
            if p + value_len > stop:
                raise CorruptRecord(
                    f"header {h} value length {value_len} but only {stop - p} bytes remain"
                )
            value = data[p : p + value_len]
            p += value_len
        elif value_len == -1:
            value = None
        else:
            raise CorruptRecord(f"header {h} value length {value_len}, expected -1 (null) or >= 0")
        headers.append((key, value))
    return tuple(headers), p
