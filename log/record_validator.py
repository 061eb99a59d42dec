"""The leader's record check: walk every record of a batch without building one.

`log.batch_header` proves a batch's header and CRC; a CRC only proves that the
bytes are the ones the producer sent, not that they parse. A batch whose
records lie about their lengths would be stored, replicated, and then stop
every consumer at its offset for ever. So the leader walks each record, as
Kafka's LogValidator does (through DefaultRecord.readFrom), and refuses the
batch if any record breaks the format of `log.record_batch`:

    length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | headerCount x (keyLength varint, key, valueLength varint, value)

Rules, in the order they are checked (record i of a batch declaring n records):

- the records region holds exactly n records, no trailing byte;
- `length` is a varint of at most 5 bytes, at least 6 (the fields' minimum)
  and within the records region;
- `attributes` is present (its bits are unused by every Kafka version; any
  value is accepted, as Kafka does);
- `timestampDelta` is a varlong of at most 10 bytes within the int64 range;
- `offsetDelta` equals i (deltas 0..n-1 in order; Kafka rewrites a compressed
  batch whose inner offsets are not, raftka refuses it);
- `keyLength` and `valueLength` are -1 (null) or 0..bytes left in the record;
  on a compacted topic the key may not be null (Kafka's rule);
- `headerCount` is 0..bytes left; each header key length is 0..bytes left and
  its key valid UTF-8 (a String in the protocol), each header value length -1
  or 0..bytes left;
- the fields end exactly at `length`.

A compressed batch is decompressed to be walked, at most `max_uncompressed`
bytes (a decompression bomb is refused before it is inflated further). In a
compressed batch, a record whose `length` exceeds `max_record_body` (the topic's
max.decompressed.message.bytes: Kafka's LogValidator hands it to
DefaultRecord.readFrom as maxRecordBodySize) is an InvalidRecord, as on Kafka;
the bound is not applied to uncompressed batches (nor by Kafka).

Errors: InvalidRecord (Kafka's INVALID_RECORD, not retriable) with the index
of the offending record in `record_index`; CorruptRecord when compressed data
does not decompress; RecordTooLarge when it would decompress past the bound;
UnsupportedCompression for codec ids 5-7.

This is the one walk over records on the produce hot path, so it builds no
objects: one flat loop over the bytes with the common one- and two-byte
varints inlined (function calls dominate its cost in CPython).
"""

from __future__ import annotations

from raftka.log.batch_header import ATTR_CODEC_MASK, HEADER_SIZE, BatchHeader
from raftka.log.compression import decompress
from raftka.log.errors import CorruptRecord, InvalidRecord, RecordTooLarge, UncompressedTooLarge
from raftka.log.varint import INT64_MAX, INT64_MIN, decode_varint, decode_varlong, encode_varint

# attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount: a byte each
MIN_RECORD_BODY = 6
# A compressed batch may inflate to this many times `max.message.bytes` (which bounds
# its compressed size). The walk costs about a microsecond per record that is not
# of the batch's uniform shape, so this bounds what one request can cost the event
# loop (8 MiB of 7-byte records: ~1 s); an honest batch above it (only the Java
# client builds them, from highly compressible data and a large batch.size) gets
# MESSAGE_TOO_LARGE, on which that client splits the batch and retries.
UNCOMPRESSED_BOUND_FACTOR = 8

# The uniform fast path handles offset deltas of one and two bytes: up to 8192 records.
_UNIFORM_MAX_RECORDS = 1 << 13
# zigzag(i) in one byte (i < 64), and the two bytes of zigzag(i) for 64 <= i < 8192, by i
_DELTA_1 = bytes(i << 1 for i in range(64))
_DELTA_2_LOW = bytes(((i << 1) & 0x7F) | 0x80 for i in range(_UNIFORM_MAX_RECORDS))
_DELTA_2_HIGH = bytes((i << 1) >> 7 for i in range(_UNIFORM_MAX_RECORDS))

Buffer = bytes | bytearray | memoryview


def validate_records(buf: Buffer, header: BatchHeader, *, max_uncompressed: int,
                     require_keys: bool = False, max_record_body: int | None = None) -> None:
    """Walk every record of the batch `header` describes in `buf`; return if all are well formed.

    `buf` holds the batch at `header.position` (its header already parsed and its
    CRC checked). `max_uncompressed` bounds what a compressed batch may inflate to;
    `require_keys` refuses null keys (compacted topics). Raises InvalidRecord,
    CorruptRecord, RecordTooLarge or UnsupportedCompression (see the module doc).
    """
    start = header.position + HEADER_SIZE
    end = header.position + header.size
    codec = header.attributes & ATTR_CODEC_MASK
    if codec:
        body = memoryview(buf)[start:end]
        try:
            data: Buffer = decompress(codec, body, max_output=max_uncompressed)
        except UncompressedTooLarge as exc:
            raise RecordTooLarge(
                f"batch at position {header.position}: its {len(body)} compressed bytes inflate "
                f"past {max_uncompressed} bytes, the bound for one batch ({exc})"
            ) from None
        except CorruptRecord as exc:
            raise CorruptRecord(f"batch at position {header.position}: {exc}") from None
        start, end = 0, len(data)
        if max_record_body is not None and max_record_body < end:  # else no record can exceed it
            _check_record_bodies(data, end, header, max_record_body)
    else:
        data = buf
    # A one-byte timestamp delta (-64..63, all the fast path takes) cannot leave int64 unless the
    # base timestamp sits at its very edge; such batches take the walk, which checks each sum.
    if INT64_MIN + 64 <= header.base_timestamp <= INT64_MAX - 64 and \
            _uniform_records(data, start, end, header.record_count, require_keys):
        return
    failure = _walk(data, start, end, header.record_count, require_keys, header.base_timestamp)
    if failure is not None:
        index, reason = failure
        where = f"record {index}: " if index is not None else ""
        raise InvalidRecord(
            f"batch at position {header.position} (base offset {header.base_offset}, "
            f"{header.record_count} records): {where}{reason}",
            record_index=index,
        )


def _check_record_bodies(data: Buffer, end: int, header: BatchHeader, max_record_body: int) -> None:
    """Each record's `length` within `max_record_body` (Kafka's message: DefaultRecord.readFrom);
    a record that cannot be read is left to the walk."""
    pos = 0
    for index in range(header.record_count):
        try:
            length, after = decode_varint(data, pos)
        except CorruptRecord:
            return
        if length > max_record_body:
            raise InvalidRecord(
                f"batch at position {header.position} (base offset {header.base_offset}, "
                f"{header.record_count} records): record {index}: Found invalid record structure: "
                f"sizeOfBodyInBytes {length} exceeds maxRecordBodySize {max_record_body} "
                "(the topic's max.decompressed.message.bytes)",
                record_index=index,
            )
        if length < 0 or after + length > end:
            return
        pos = after + length


def _uniform_records(data: Buffer, pos: int, end: int, count: int, require_keys: bool) -> bool:
    """The fast path: True if every record has record 0's layout and is well formed.

    Producers mostly batch records of one shape: a null or fixed-size key, a
    fixed-size value, no headers, a one-byte timestamp delta. Then records sit at
    a fixed stride (one stride while offset deltas take one byte, the next while
    they take two), and each field can be checked for all records at once with
    strided slices compared in C, instead of a Python step per record. Keys and
    values are free; every other byte is fixed (lengths, the unused attributes
    byte 0, a zero header count, offset delta = index) or bounded (a timestamp
    delta below 0x80, a one-byte varlong). False means "not uniform", never
    "malformed": the caller then walks record by record and says what is wrong.
    """
    if not 0 < count <= _UNIFORM_MAX_RECORDS:
        return False
    try:  # record 0's layout; any surprise leaves the batch to the full walk
        _length, p = decode_varint(data, pos)
        if data[p + 1] >= 0x80 or data[p + 2] != 0:  # timestampDelta 1 byte, offsetDelta 0
            return False
        key_length, p = decode_varint(data, p + 3)
        value_length, p = decode_varint(data, p + max(key_length, 0))
    except (CorruptRecord, IndexError):
        return False
    room = end - pos  # also keeps both lengths in the int32 range encode_varint takes
    if not (-1 <= key_length <= room and -1 <= value_length <= room) or (require_keys and key_length == -1):
        return False
    key_field = encode_varint(key_length)
    value_field = encode_varint(value_length)
    # attributes, timestampDelta, offsetDelta (added below), key, value, header count
    body_base = 2 + len(key_field) + max(key_length, 0) + len(value_field) + max(value_length, 0) + 1
    view = memoryview(data).cast("B")
    index = 0
    while index < count:
        delta_size = 1 if index < 64 else 2
        stop_index = min(count, 64 if index < 64 else _UNIFORM_MAX_RECORDS)
        n = stop_index - index
        length_field = encode_varint(body_base + delta_size)
        stride = len(length_field) + body_base + delta_size
        seg_end = pos + n * stride
        if seg_end > end:
            return False
        seg = view[pos:seg_end]
        k = 0
        for c in length_field:
            if seg[k::stride].tobytes() != bytes((c,)) * n:
                return False
            k += 1
        if seg[k::stride].tobytes() != bytes(n):  # attributes 0
            return False
        k += 1
        if not seg[k::stride].tobytes().isascii():  # one-byte timestampDelta
            return False
        k += 1
        if delta_size == 1:
            if seg[k::stride].tobytes() != _DELTA_1[index:stop_index]:
                return False
        elif (seg[k::stride].tobytes() != _DELTA_2_LOW[index:stop_index]
              or seg[k + 1::stride].tobytes() != _DELTA_2_HIGH[index:stop_index]):
            return False
        k += delta_size
        for c in key_field:
            if seg[k::stride].tobytes() != bytes((c,)) * n:
                return False
            k += 1
        k += max(key_length, 0)
        for c in value_field:
            if seg[k::stride].tobytes() != bytes((c,)) * n:
                return False
            k += 1
        k += max(value_length, 0)
        if seg[k::stride].tobytes() != bytes(n):  # header count 0
            return False
        pos = seg_end
        index = stop_index
    return pos == end


def _walk(data: Buffer, pos: int, end: int, count: int, require_keys: bool,
          base_timestamp: int = 0) -> tuple[int | None, str] | None:
    """Check `count` records filling data[pos:end] exactly: None, or (record index or None, why not).
    A record's timestamp, `base_timestamp` + its delta, must be an int64 (found by the fuzzer: a
    sum past 2^63-1 was stored, and ListOffsets could not encode it)."""
    varint = decode_varint
    index = 0
    try:
        while index < count:
            if pos >= end:
                return index, f"the records end after {index} of the {count} the header declares"
            b = data[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            else:
                b1 = data[pos + 1] if pos + 1 < end else 0x80
                if b1 < 0x80:  # records of 64 B .. 8 KiB
                    z = (b & 0x7F) | (b1 << 7)
                    length, p = (z >> 1) ^ -(z & 1), pos + 2
                else:
                    length, p = varint(data, pos)
            stop = p + length
            if length < MIN_RECORD_BODY or stop > end:
                if length < MIN_RECORD_BODY:
                    return index, f"its length is {length}, expected at least {MIN_RECORD_BODY}"
                return index, f"its length is {length} but {end - p} bytes remain in the batch"
            # Record attributes are unused in v2 and every producer writes 0. Kafka ignores them;
            # refusing anything else keeps consumers that read this int8 as a varint (kafka-python)
            # from losing their place in the record and stopping at this offset.
            if data[p]:
                return index, f"its attributes byte is {data[p]:#04x}, expected 0 (unused in v2 records)"
            # p + 1 skips the attributes byte; stop >= p + 6 keeps every read below in the record
            b = data[p + 1]
            if b < 0x80:
                ts_delta, p = (b >> 1) ^ -(b & 1), p + 2
            else:
                ts_delta, p = decode_varlong(data, p + 1)
                if not INT64_MIN <= ts_delta <= INT64_MAX or p > stop:
                    return index, f"its timestamp delta {ts_delta} is not an int64 within the record"
            if not INT64_MIN <= base_timestamp + ts_delta <= INT64_MAX:
                return index, (f"its timestamp {base_timestamp} + {ts_delta} is outside the int64 range "
                               "of Kafka timestamps")
            # offsetDelta must be zigzag(index): 1 byte below 64, 2 below 8192
            z = index << 1
            if z < 0x80:
                if data[p] != z:
                    return index, _offset_delta_error(data, p, index)
                p += 1
            elif z < 0x4000:
                if data[p] != (z & 0x7F) | 0x80 or data[p + 1] != z >> 7:
                    return index, _offset_delta_error(data, p, index)
                p += 2
            else:
                delta, p = varint(data, p)
                if delta != index:
                    return index, _offset_delta_error(data, p, index)
            if p >= stop:
                return index, f"its length is {length} but its fields run past it"
            b = data[p]
            if b == 1:  # zigzag(-1): null key
                if require_keys:
                    return index, "Compacted topic cannot accept message without key (this record's key is null)"
                p += 1
            else:
                if b < 0x80:
                    n, p = (b >> 1) ^ -(b & 1), p + 1
                else:
                    n, p = varint(data, p)
                if n < 0 or p + n > stop:
                    return index, f"key length {n}, expected -1 (null) or 0..{stop - p}"
                p += n
            if p >= stop:
                return index, f"its length is {length} but its fields run past it"
            b = data[p]
            if b < 0x80:
                n, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                b1 = data[p + 1] if p + 1 < stop else 0x80
                if b1 < 0x80:  # values of 64 B .. 8 KiB
                    z = (b & 0x7F) | (b1 << 7)
                    n, p = (z >> 1) ^ -(z & 1), p + 2
                else:
                    n, p = varint(data, p)
            if n >= 0:
                if p + n > stop:
                    return index, f"value length {n}, expected -1 (null) or 0..{stop - p}"
                p += n
            elif n != -1:
                return index, f"value length {n}, expected -1 (null) or 0..{stop - p}"
            if p >= stop:
                return index, f"its length is {length} but it ends before its header count"
            if data[p] == 0:
                p += 1
            else:
                failure = _walk_headers(data, p, stop)
                if isinstance(failure, str):
                    return index, failure
                p = failure
            if p != stop:
                return index, f"its length is {length} but its fields take {p - (stop - length)} bytes"
            pos = stop
            index += 1
    except (CorruptRecord, IndexError) as exc:  # a varint longer than allowed, or cut short
        reason = "its fields run past the end of the batch" if isinstance(exc, IndexError) else str(exc)
        return index, reason
    if pos != end:
        return None, f"{end - pos} bytes of trailing garbage after the {count} declared records"
    return None


def _offset_delta_error(data: Buffer, p: int, index: int) -> str:
    try:
        delta = f"{decode_varint(data, p)[0]}"
    except CorruptRecord as exc:
        delta = f"unreadable ({exc})"
    return f"its offset delta is {delta}, expected {index} (deltas run 0..n-1)"


def _walk_headers(data: Buffer, p: int, stop: int) -> int | str:
    """Check a record's headers from its count at `p`: the position after them, or why not."""
    count, p = decode_varint(data, p)
    if count < 0 or 2 * count > stop - p:  # each header takes at least two bytes
        return f"header count {count}, expected 0..{(stop - p) // 2} for the {stop - p} bytes left"
    for h in range(count):
        key_len, p = decode_varint(data, p)
        if key_len < 0 or p + key_len > stop:
            return f"header {h} key length {key_len}, expected 0..{stop - p} (header keys are non-null strings)"
        try:
            bytes(data[p : p + key_len]).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"header {h} key is not valid UTF-8: {exc}"
        p += key_len
        if p >= stop:
            return f"header {h} ends before its value length"
        value_len, p = decode_varint(data, p)
        if value_len >= 0:
            if p + value_len > stop:
                return f"header {h} value length {value_len}, expected -1 (null) or 0..{stop - p}"
            p += value_len
        elif value_len != -1:
            return f"header {h} value length {value_len}, expected -1 (null) or 0..{stop - p}"
    return p
