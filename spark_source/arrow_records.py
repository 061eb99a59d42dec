"""Fetched RecordBatch v2 bytes to a `pyarrow.RecordBatch` in the Kafka source's shape (pure).

Why not the SDK's ConsumerRecords: building a Python object per field per
record costs several microseconds a row, more than Spark itself. Here the
only per-record Python work is one pass that hops from record to record by
their length varints (records are variable-length, so finding where each one
starts is inherently sequential); every field is then decoded for all
records at once with numpy, and keys and values are copied by Arrow
straight out of the batch bytes. Headers, when asked for, are the exception
(a list of structs per row) and are parsed in Python.

Keys and values become `binary_view` arrays pointing into the batch bytes,
which Arrow casts to compact `binary` columns in C++.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from raftka.client.fetched_records import (
    CONTROL_ABORT,
    AbortedFilter,
    control_type,
    whole_batches_end,
)
from raftka.log.batch_header import ATTR_CODEC_MASK, ATTR_TIMESTAMP_TYPE, HEADER_SIZE, parse_header
from raftka.log.batch_header import verify_crc as check_crc
from raftka.log.compression import decompress
from raftka.log.errors import CorruptRecord
from raftka.log.record_batch import decode_batch

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([
    pa.field("key", pa.string()), pa.field("value", pa.binary())])))

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
SCHEMA = pa.schema(_BASE_FIELDS)
SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", HEADERS_TYPE)])
_PAD = bytes(16)
_MIN_RECORD_SIZE = 6  # attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount  # vectorised varint reads may look a few bytes past the last record


def arrow_schema(include_headers: bool) -> pa.Schema:
    return SCHEMA_WITH_HEADERS if include_headers else SCHEMA


@dataclass(frozen=True)
class DecodedRange:
    batch: pa.RecordBatch | None  # None when no record of [start, end) was in the bytes
    next_offset: int  # where the next fetch should start
    partial_batch: bool  # a batch cut short by the fetch size limit was left at the end


def scan_range(records: bytes | memoryview | None, start: int) -> tuple[int, bool]:
    """Where the fetch after this one starts, and whether a cut-short batch
    ends the bytes, from the batch headers alone (no record is decoded), so
    the next fetch can be sent while these records are decoded."""
    if not records:
        return start, False
    view = memoryview(records)
    whole_end, partial = whole_batches_end(view)
    next_offset = start
    pos = 0
    while pos < whole_end:
        header = parse_header(view, pos)
        next_offset = max(next_offset, header.base_offset + header.last_offset_delta + 1)
        pos += header.size
    return next_offset, partial


def decode_range(topic: str, partition: int, records: bytes | memoryview | None, start: int,
                 end: int, *, include_headers: bool = False, verify_crc: bool = True,
                 aborted: Iterable[tuple[int, int]] | None = None) -> DecodedRange:
    """Records with offsets in [start, end) from one partition's fetched bytes.
    `aborted` (the Fetch answer's aborted_transactions, read_committed) drops the batches
    of aborted transactions as the consumer does (client/fetched_records.AbortedFilter).

    Raises CorruptRecord for bad CRCs or records that disagree with their
    lengths, UnsupportedCompression for unknown codecs.
    """
    if not records:
        return DecodedRange(None, start, False)
    view = memoryview(records)
    whole_end, partial = whole_batches_end(view)
    bodies: list[bytes | memoryview] = []
    counts: list[int] = []
    base_offsets: list[int] = []
    base_timestamps: list[int] = []
    append_times: list[int] = []  # -1: CreateTime
    next_offset = start
    pos = 0
    committed = AbortedFilter(aborted) if aborted is not None else None
    while pos < whole_end:
        header = parse_header(view, pos)
        if verify_crc:
            check_crc(view, header)
        batch_start, pos = pos, pos + header.size
        if header.base_offset >= end:
            break
        batch_next = header.base_offset + header.last_offset_delta + 1
        next_offset = max(next_offset, batch_next)
        if committed is not None and committed.skip(header, lambda at=batch_start: any(
                control_type(r.key) == CONTROL_ABORT
                for r in decode_batch(view, at, verify_crc=False).records)):
            continue
        if header.is_control or batch_next <= start or header.record_count == 0:
            continue
        body = view[batch_start + HEADER_SIZE: pos]
        codec = header.attributes & ATTR_CODEC_MASK
        bodies.append(decompress(codec, body) if codec else body)
        counts.append(header.record_count)
        base_offsets.append(header.base_offset)
        base_timestamps.append(header.base_timestamp)
        append_times.append(header.max_timestamp
                            if header.attributes & ATTR_TIMESTAMP_TYPE else -1)
    if not counts:
        return DecodedRange(None, next_offset, partial)
    data = b"".join([*bodies, _PAD])
    body_ends = np.cumsum([len(b) for b in bodies]).tolist()
    try:
        starts = _record_starts(data, counts, body_ends, base_offsets)
    except IndexError:
        raise CorruptRecord(
            f"the records of the batches at offsets {base_offsets[0]}..{base_offsets[-1]} "
            "run past their end") from None
    batch = _columns(topic, partition, data, starts, counts, base_offsets, base_timestamps,
                     append_times, start, end, include_headers)
    return DecodedRange(batch, next_offset, partial)


def _record_starts(data: bytes, counts: list[int], body_ends: list[int],
                   base_offsets: list[int]) -> np.ndarray:
    """Where each record starts in `data`: the one sequential pass, hopping by
    the length varints (1 or 2 bytes for records under 8 KiB, inlined). A
    negative or overlong length shows up as a batch that does not end where
    its bytes end, or in the vectorised length check of `_columns`."""
    starts: list[int] = []
    append = starts.append
    pos = 0
    for count, body_end, base in zip(counts, body_ends, base_offsets, strict=True):
        for _ in range(count):
            append(pos)
            b = data[pos]
            if b < 0x80:
                pos += 1 + (b >> 1)
                continue
            b2 = data[pos + 1]
            if b2 < 0x80:
                pos += 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                continue
            z, shift, pos = (b & 0x7F) | ((b2 & 0x7F) << 7), 14, pos + 2
            while True:
                b = data[pos]
                z |= (b & 0x7F) << shift
                pos += 1
                if b < 0x80 or shift > 28:
                    break
                shift += 7
            pos += z >> 1
        if pos != body_end:
            raise CorruptRecord(
                f"batch at offset {base}: its {count} records end at byte {pos} of the "
                f"decompressed records, expected {body_end}")
    return np.array(starts, dtype=np.int64)


def _varints(buf: np.ndarray, positions: np.ndarray, max_bytes: int, what: str
             ) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at `positions` of `buf` (uint8): (int64 values, byte sizes).

    Values of up to three bytes (deltas and lengths below 2**20) are computed
    for all positions at once; longer ones, rare, byte by byte.
    """
    b0 = buf[positions].astype(np.int64)
    if not (b0 & 0x80).any():
        return (b0 >> 1) ^ -(b0 & 1), np.ones(len(positions), dtype=np.int64)
    b1 = buf[positions + 1].astype(np.int64)
    b2 = buf[positions + 2].astype(np.int64)
    one = b0 < 0x80
    two = ~one & (b1 < 0x80)
    z = np.where(one, b0, (b0 & 0x7F) | ((b1 & 0x7F) << 7) | ((b2 & 0x7F) << 14))
    sizes = np.where(one, 1, np.where(two, 2, 3))
    z[two] &= (1 << 14) - 1
    longer = np.nonzero(~one & ~two & (b2 >= 0x80))[0]
    if len(longer):
        u = z[longer].astype(np.uint64)
        more = np.arange(len(longer))
        for k in range(3, max_bytes):
            b = buf[positions[longer[more]] + k]
            u[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * k)
            sizes[longer[more]] += 1
            more = more[(b & 0x80) != 0]
            if not len(more):
                break
        if len(more):
            raise CorruptRecord(f"a record's {what} varint is longer than {max_bytes} bytes")
        values = (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)
        out = (z >> 1) ^ -(z & 1)
        out[longer] = values
        return out, sizes
    return (z >> 1) ^ -(z & 1), sizes


def _columns(topic: str, partition: int, data: bytes, starts: np.ndarray, counts: list[int],
             base_offsets: list[int], base_timestamps: list[int], append_times: list[int],
             start: int, end: int, include_headers: bool) -> pa.RecordBatch | None:
    buf = np.frombuffer(data, dtype=np.uint8)
    length, n = _varints(buf, starts, 5, "length")
    _check(length >= _MIN_RECORD_SIZE, "length", length, base_offsets, counts)
    record_end = starts + n + length
    p = starts + n + 1  # skip the attributes byte
    ts_delta, n = _varints(buf, p, 10, "timestampDelta")
    p = p + n
    offset_delta, n = _varints(buf, p, 5, "offsetDelta")
    p = p + n
    key_len, n = _varints(buf, p, 5, "keyLength")
    key_start = p + n
    p = key_start + np.maximum(key_len, 0)
    _check(key_len >= -1, "keyLength", key_len, base_offsets, counts)
    _check(p < record_end, "key", key_len, base_offsets, counts)
    value_len, n = _varints(buf, p, 5, "valueLength")
    value_start = p + n
    p = value_start + np.maximum(value_len, 0)
    _check(value_len >= -1, "valueLength", value_len, base_offsets, counts)
    _check(p < record_end, "value", value_len, base_offsets, counts)
    has_headers = buf[p] != 0
    _check(has_headers | (p + 1 == record_end), "headerCount", length, base_offsets, counts)

    counts_np = np.array(counts, dtype=np.int64)
    offsets = np.repeat(np.array(base_offsets, dtype=np.int64), counts_np) + offset_delta
    append_np = np.repeat(np.array(append_times, dtype=np.int64), counts_np)
    log_append = append_np >= 0
    timestamps = np.where(log_append, append_np,
                          np.repeat(np.array(base_timestamps, dtype=np.int64), counts_np)
                          + ts_delta)
    selected = np.nonzero((offsets >= start) & (offsets < end))[0]
    rows = len(selected)
    if not rows:
        return None
    data_buffer = pa.py_buffer(data)
    words = _u32_words(data)
    topic_bytes = topic.encode("utf-8")
    columns = [
        _binary_column(data_buffer, words, key_start[selected], key_len[selected]),
        _binary_column(data_buffer, words, value_start[selected], value_len[selected]),
        pa.Array.from_buffers(pa.string(), rows, [
            None, pa.py_buffer(np.arange(rows + 1, dtype=np.int32) * len(topic_bytes)),
            pa.py_buffer(topic_bytes * rows)]),
        pa.array(np.full(rows, partition, dtype=np.int32)),
        pa.array(offsets[selected]),
        pa.array(timestamps[selected] * 1000, type=pa.timestamp("us", tz="UTC")),
        pa.array(log_append[selected].astype(np.int32)),
    ]
    if include_headers:
        columns.append(_headers_column(data, p[selected], record_end[selected],
                                       has_headers[selected]))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _check(ok: np.ndarray, field: str, values: np.ndarray, base_offsets: list[int],
           counts: list[int]) -> None:
    if ok.all():
        return
    index = int(np.argmin(ok))
    batch = int(np.searchsorted(np.cumsum(counts), index, side="right"))
    raise CorruptRecord(
        f"batch at offset {base_offsets[batch]}: record {index} (of this fetch) has a bad "
        f"{field} (decoded value {int(values[index])}) or runs past its record length")


def _binary_column(data: pa.Buffer, words: list[np.ndarray], starts: np.ndarray,
                   lengths: np.ndarray) -> pa.Array:
    """Binary column of data[starts[i] : starts[i] + lengths[i]] (null where length is -1).

    Built as a `binary_view` array pointing into `data` (16-byte views: length,
    then either the bytes inline when at most 12, or a 4-byte prefix, buffer 0
    and the offset), then cast to `binary`: Arrow does the copying in C++.
    """
    rows = len(starts)
    nulls = lengths < 0
    sizes = np.maximum(lengths, 0)
    if rows and int(starts[-1]) >= 1 << 31:
        raise ValueError(f"fetched data of {int(starts[-1])} bytes exceeds the 2 GiB an Arrow "
                         "array can address; lower kafka.max.partition.fetch.bytes")
    views = np.zeros((rows, 4), dtype="<u4")
    views[:, 0] = sizes
    views[:, 1] = _load_u32(words, starts)
    short = np.nonzero(sizes <= 12)[0]
    views[:, 3] = starts
    if len(short):
        s = starts[short]
        views[short, 2] = _load_u32(words, s + 4)
        views[short, 3] = _load_u32(words, s + 8)
        # inline bytes past the length must be zero
        keep = np.arange(12) < sizes[short, None]
        inline = views[short, 1:4].view(np.uint8) * keep
        views[short, 1:4] = inline.view("<u4")
    null_count = int(nulls.sum())
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if null_count else None
    array = pa.Array.from_buffers(pa.binary_view(), rows, [validity, pa.py_buffer(views), data],
                                  null_count=null_count)
    return array.cast(pa.binary())


def _u32_words(data: bytes) -> list[np.ndarray]:
    """`data` as little-endian uint32 words at each of the 4 byte alignments."""
    usable = len(data) - 4
    return [np.frombuffer(data, dtype="<u4", offset=a, count=(usable - a) // 4 + 1)
            for a in range(4)]


def _load_u32(words: list[np.ndarray], positions: np.ndarray) -> np.ndarray:
    """The 4 bytes at each of `positions` as a little-endian uint32."""
    out = np.empty(len(positions), dtype="<u4")
    align = positions & 3
    for a in range(4):
        picked = np.nonzero(align == a)[0]
        if len(picked):
            out[picked] = words[a][(positions[picked] - a) >> 2]
    return out


def _headers_column(data: bytes, positions: np.ndarray, ends: np.ndarray,
                    has_headers: np.ndarray) -> pa.Array:
    """Spark's Kafka source gives null, not [], for a record without headers."""
    rows: list[list[dict] | None] = [None] * len(positions)
    for i in np.nonzero(has_headers)[0].tolist():
        rows[i] = _parse_headers(data, int(positions[i]), int(ends[i]))
    return pa.array(rows, type=HEADERS_TYPE)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    z, shift = 0, 0
    while True:
        b = data[pos]
        z |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift > 28:
            raise CorruptRecord(f"a header varint at byte {pos} is longer than 5 bytes")


def _parse_headers(data: bytes, pos: int, end: int) -> list[dict]:
    count, pos = _varint(data, pos)
    headers = []
    for index in range(count):
        key_len, pos = _varint(data, pos)
        if key_len < 0 or pos + key_len > end:
            raise CorruptRecord(f"header {index} has key length {key_len}, expected "
                                f"0..{end - pos}")
        key = data[pos: pos + key_len].decode("utf-8", errors="replace")
        pos += key_len
        value_len, pos = _varint(data, pos)
        if value_len < -1 or pos + max(value_len, 0) > end:
            raise CorruptRecord(f"header {index} ({key!r}) has value length {value_len}, "
                                f"expected -1..{end - pos}")
        value = None if value_len < 0 else data[pos: pos + value_len]
        pos += max(value_len, 0)
        headers.append({"key": key, "value": value})
    if pos != end:
        raise CorruptRecord(f"headers end at byte {pos}, but the record ends at {end}")
    return headers
