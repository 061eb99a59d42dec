"""Kafka's zigzag varints (protobuf style): the integers inside a RecordBatch v2 record.

A *varint* holds a signed 32-bit value in at most 5 bytes, a *varlong* a signed
64-bit value in at most 10. Zigzag maps small magnitudes of either sign to small
unsigned numbers (0→0, -1→1, 1→2, -2→3, ...), which are then written 7 bits per
byte, least significant group first, the top bit of each byte meaning "more".

Decoders take any indexable byte buffer (bytes, bytearray, memoryview) and a
position, and return `(value, new_position)`. They run once per field per record
during decode, so the common one-byte case returns without entering a loop.
"""

from __future__ import annotations

from raftka.log.errors import CorruptRecord

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

Buffer = bytes | bytearray | memoryview

# One-byte encodings of -64..63, the overwhelmingly common case for deltas and lengths.
_SMALL = {n: bytes(((n << 1) ^ (n >> 63),)) for n in range(-64, 64)}


def _zigzag_bytes(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)  # exact for every value in the int64 range
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """The zigzag varint encoding of the signed 32-bit integer `n`.

    Raises ValueError if `n` is outside [-2**31, 2**31 - 1].
    """
    small = _SMALL.get(n)
    if small is not None:
        return small
    if not INT32_MIN <= n <= INT32_MAX:
        raise ValueError(f"varint value {n} is outside the int32 range [{INT32_MIN}, {INT32_MAX}]")
    return _zigzag_bytes(n)


def encode_varlong(n: int) -> bytes:
    """The zigzag varlong encoding of the signed 64-bit integer `n`.

    Raises ValueError if `n` is outside [-2**63, 2**63 - 1].
    """
    small = _SMALL.get(n)
    if small is not None:
        return small
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"varlong value {n} is outside the int64 range [{INT64_MIN}, {INT64_MAX}]")
    return _zigzag_bytes(n)


def write_varint(out: bytearray, n: int) -> None:
    """Append the zigzag varint encoding of `n` (int32) to `out`."""
    out += encode_varint(n)


def write_varlong(out: bytearray, n: int) -> None:
    """Append the zigzag varlong encoding of `n` (int64) to `out`."""
    out += encode_varlong(n)


def size_of_varint(n: int) -> int:
    """How many bytes `encode_varint(n)` (or `encode_varlong(n)`) takes."""
    z = (n << 1) ^ (n >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def _decode(buf: Buffer, pos: int, max_bytes: int, kind: str) -> tuple[int, int]:
    end = len(buf)
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            if pos == start:
                raise CorruptRecord(
                    f"{kind} at position {start} truncated: the buffer ends at {end}"
                )
            raise CorruptRecord(
                f"{kind} at position {start} truncated after {pos - start} bytes: "
                f"the buffer ends at {end} with the continuation bit still set"
            )
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if pos - start >= max_bytes:
            raise CorruptRecord(
                f"{kind} at position {start} is longer than {max_bytes} bytes "
                f"(byte {max_bytes} still has the continuation bit set)"
            )


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode the zigzag varint at `buf[pos]`; return `(value, position after it)`.

    Raises CorruptRecord if the buffer ends mid-varint or the varint is longer than 5 bytes.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        z = b & 0x7F
        b = buf[pos + 1]
        if b < 0x80:
            z |= b << 7
            return (z >> 1) ^ -(z & 1), pos + 2
    except IndexError:
        pass  # _decode says precisely where it ends
    return _decode(buf, pos, MAX_VARINT_BYTES, "varint")


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Decode the zigzag varlong at `buf[pos]`; return `(value, position after it)`.

    Raises CorruptRecord if the buffer ends mid-varlong or the varlong is longer than 10 bytes.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        z = b & 0x7F
        b = buf[pos + 1]
        if b < 0x80:
            z |= b << 7
            return (z >> 1) ^ -(z & 1), pos + 2
    except IndexError:
        pass
    return _decode(buf, pos, MAX_VARLONG_BYTES, "varlong")
