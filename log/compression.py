"""The compression codecs of RecordBatch v2 (attribute bits 0-2).

Compression covers everything after a batch's recordCount as one block:

- gzip (1): a gzip stream (zlib), possibly several members.
- snappy (2): librdkafka writes *raw* snappy; the Java client and kafka-python
  write *xerial* framing: the 8-byte magic ``\\x82SNAPPY\\x00``, version i32,
  compat i32, then repeated ``[block length i32 BE][raw snappy block]``.
  We read both and write raw unless asked for xerial.
- lz4 (3): the LZ4 *frame* format (magic ``04 22 4D 18``) with independent
  blocks, the only kind the Java client reads. (Not the LZ4 *block* format.)
- zstd (4): a zstd frame, which may omit its content size (librdkafka's
  streaming compressor does), so we decompress by streaming.

Every decompression is bounded by `max_output` bytes (a decompression bomb in
a produce request must not exhaust the broker's memory): past it,
UncompressedTooLarge (a CorruptRecord). Every failure of a codec library
surfaces as CorruptRecord, never as the library's own type.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam
import zstandard

from raftka.log.errors import CorruptRecord, UncompressedTooLarge, UnsupportedCompression

DEFAULT_MAX_OUTPUT = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16  # magic 8 + version i32 + compat i32
XERIAL_VERSION = 1
XERIAL_COMPAT = 1
XERIAL_BLOCK_SIZE = 32 * 1024  # the xerial library's (and kafka-python's) default

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"

_I32 = struct.Struct(">i")
_XERIAL_HEADER = struct.Struct(">8sii")
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip container only
# Input fed to zstd per call: a zstd block expands at most ~32768x, so this caps
# how far past `max_output` one call can go.
_ZSTD_INPUT_SLICE = 1024

Buffer = bytes | bytearray | memoryview


class Compression(IntEnum):
    """Codec ids as stored in a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> Compression:
        """The codec for a Kafka `compression.type` name: none, gzip, snappy, lz4 or zstd."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            names = ", ".join(c.name.lower() for c in cls)
            raise UnsupportedCompression(
                f"unknown compression type {name!r}, expected one of {names}"
            ) from None

    @classmethod
    def of(cls, codec: int) -> Compression:
        """The codec for a numeric id; UnsupportedCompression if it is not one of 0-4."""
        try:
            return cls(codec)
        except ValueError:
            raise UnsupportedCompression(
                f"unknown compression codec id {codec!r}, expected 0 (none), 1 (gzip), "
                f"2 (snappy), 3 (lz4) or 4 (zstd)"
            ) from None


def compress(codec: int, data: Buffer, *, xerial: bool = False) -> bytes:
    """Compress `data` with `codec` (a Compression or its id).

    `xerial=True` makes snappy write the xerial framing the Java client uses
    instead of raw snappy. Raises UnsupportedCompression for an unknown codec.
    """
    codec = Compression.of(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        # Level 6 (zlib's default) rather than gzip's 9: far cheaper, nearly as small.
        c = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS)
        return c.compress(data) + c.flush()
    if codec is Compression.SNAPPY:
        if xerial:
            return _xerial_compress(data)
        return bytes(cramjam.snappy.compress_raw(data))
    if codec is Compression.LZ4:
        # Independent blocks, as the Java client's KafkaLZ4BlockInputStream requires
        # (cramjam.lz4.compress would link them).
        c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        c.compress(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only
        return bytes(c.finish())
    return zstandard.ZstdCompressor().compress(data)


def decompress(codec: int, data: Buffer, *, max_output: int = DEFAULT_MAX_OUTPUT) -> bytes:
    """Decompress `data` compressed with `codec`, producing at most `max_output` bytes.

    Raises UnsupportedCompression for an unknown codec, and CorruptRecord if the
    data is not valid for the codec or would decompress to more than `max_output`.
    """
    codec = Compression.of(codec)
    if codec is Compression.NONE:
        _check_size(len(data), max_output, codec)
        return bytes(data)
    try:
        if codec is Compression.GZIP:
            return _gzip_decompress(data, max_output)
        if codec is Compression.SNAPPY:
            if bytes(data[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC:
                return _xerial_decompress(data, max_output)
            return _snappy_raw_decompress(data, max_output, "raw snappy data")
        if codec is Compression.LZ4:
            return _lz4_decompress(data, max_output)
        return _zstd_decompress(data, max_output)
    except CorruptRecord:
        raise
    except Exception as exc:  # every codec library has its own error types; none may leak
        raise CorruptRecord(
            f"{codec.name.lower()} data ({len(data)} bytes) failed to decompress: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _check_size(size: int, max_output: int, codec: Compression) -> None:
    if size > max_output:
        raise UncompressedTooLarge(
            f"{codec.name.lower()} data decompresses to more than {max_output} bytes "
            f"(at least {size}), the limit"
        )


def _gzip_decompress(data: Buffer, max_output: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    if not rest:
        raise CorruptRecord("gzip data is empty, expected at least one gzip member")
    # A gzip stream may hold several members back to back; decode them all.
    while rest:
        d = zlib.decompressobj(_GZIP_WBITS)
        chunk = d.decompress(rest, max_output - len(out) + 1)
        out += chunk
        _check_size(len(out), max_output, Compression.GZIP)
        if not d.eof:
            if d.unconsumed_tail:
                # max_length stopped it short of the end: the output exceeds the limit
                _check_size(max_output + 1, max_output, Compression.GZIP)
            raise CorruptRecord(
                f"gzip data truncated: the stream of {len(data)} bytes ends inside a member"
            )
        rest = d.unused_data
    return bytes(out)


def _snappy_raw_decompress(block: Buffer, max_output: int, what: str) -> bytes:
    # The raw format starts with the uncompressed length: check it before allocating.
    declared = cramjam.snappy.decompress_raw_len(block)
    if declared > max_output:
        raise UncompressedTooLarge(
            f"{what} declares an uncompressed length of {declared} bytes, "
            f"more than the limit of {max_output}"
        )
    return bytes(cramjam.snappy.decompress_raw(block))


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_COMPAT))
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def _xerial_decompress(data: Buffer, max_output: int) -> bytes:
    view = memoryview(data)
    if len(view) < XERIAL_HEADER_SIZE:
        raise CorruptRecord(
            f"xerial snappy header truncated: {len(view)} bytes, need {XERIAL_HEADER_SIZE}"
        )
    # version and compat are not checked: some producers write them little-endian.
    out = bytearray()
    pos = XERIAL_HEADER_SIZE
    end = len(view)
    index = 0
    while pos < end:
        if end - pos < 4:
            raise CorruptRecord(
                f"xerial snappy block {index} length at byte {pos} truncated: "
                f"{end - pos} bytes left, need 4"
            )
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecord(
                f"xerial snappy block {index} at byte {pos - 4} declares {length} bytes "
                f"but {end - pos} remain"
            )
        out += _snappy_raw_decompress(
            view[pos : pos + length], max_output - len(out), f"xerial snappy block {index}"
        )
        pos += length
        index += 1
    return bytes(out)


def _lz4_decompress(data: Buffer, max_output: int) -> bytes:
    if bytes(data[:4]) != LZ4_FRAME_MAGIC:
        raise CorruptRecord(
            f"lz4 data starts with {bytes(data[:4]).hex()}, expected the LZ4 frame magic "
            f"{LZ4_FRAME_MAGIC.hex()}"
        )
    # The frame may declare its content size: reject a bomb before reading further.
    if len(data) >= 14 and data[4] & 0x08:  # FLG bit 3: content size follows BD
        declared = int.from_bytes(data[6:14], "little")
        if declared > max_output:
            raise UncompressedTooLarge(
                f"lz4 frame declares a content size of {declared} bytes, "
                f"more than the limit of {max_output}"
            )
    # cramjam inflates a whole frame at once: bound what it may produce from the
    # frame's own structure first (up to ~255x the input otherwise). The bound counts
    # the last block as full, so within one block of the limit the exact size decides.
    bound = _lz4_output_bound(memoryview(data).cast("B"))
    if bound > max_output + _LZ4_LARGEST_BLOCK:
        raise UncompressedTooLarge(
            f"lz4 data may decompress to {bound} bytes (its blocks' declared maximum), "
            f"more than the limit of {max_output}"
        )
    out = bytes(cramjam.lz4.decompress(data))
    _check_size(len(out), max_output, Compression.LZ4)
    return out


# LZ4 frame descriptor BD bits 6-4: the largest uncompressed size of one block.
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_LZ4_LARGEST_BLOCK = 4 << 20


def _lz4_output_bound(view: memoryview) -> int:
    """An upper bound on the decompressed size of the LZ4 frames in `view`, read from
    their headers and block sizes (not inflated): the declared content size when a
    frame has one, else its block count times its maximum block size. Every block
    but the last is full in practice, so for honest data the bound is tight.
    Raises CorruptRecord if the frame structure does not parse."""
    end = len(view)
    pos = 0
    total = 0
    while pos < end:
        if end - pos < 7 or bytes(view[pos : pos + 4]) != LZ4_FRAME_MAGIC:
            raise CorruptRecord(f"lz4 data: no frame header at byte {pos} of {end}")
        flg, bd = view[pos + 4], view[pos + 5]
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
        if flg >> 6 != 1 or block_max is None:
            raise CorruptRecord(f"lz4 frame at byte {pos}: descriptor FLG {flg:#04x} BD {bd:#04x} is not LZ4 frame v1")
        p = pos + 6
        declared = None
        if flg & 0x08:  # content size
            declared = int.from_bytes(view[p : p + 8], "little")
            p += 8
        if flg & 0x01:  # dictionary id
            p += 4
        p += 1  # header checksum
        block_checksum = 4 if flg & 0x10 else 0
        blocks = 0
        while True:
            if end - p < 4:
                raise CorruptRecord(f"lz4 frame at byte {pos}: block size at byte {p} truncated")
            size = int.from_bytes(view[p : p + 4], "little") & 0x7FFFFFFF
            p += 4
            if size == 0:  # end mark
                break
            p += size + block_checksum
            blocks += 1
        if flg & 0x04:  # content checksum
            p += 4
        if p > end:
            raise CorruptRecord(f"lz4 frame at byte {pos}: its blocks run to byte {p}, past the end {end}")
        total += declared if declared is not None else blocks * block_max
        pos = p
    return total


def _zstd_decompress(data: Buffer, max_output: int) -> bytes:
    view = memoryview(data).cast("B")
    if not len(view):
        raise CorruptRecord("zstd data is empty, expected at least one zstd frame")
    frames = _zstd_frames(view)
    if frames is None:  # not the plain frame layout read below: the careful streaming way
        return _zstd_stream_decompress(view, max_output)
    bound = sum(frame_bound for _start, _stop, frame_bound in frames)
    if bound > max_output + _ZSTD_BLOCK_MAX:
        raise UncompressedTooLarge(
            f"zstd data may decompress to {bound} bytes (its blocks' declared maximum), "
            f"more than the limit of {max_output}"
        )
    # Each frame in one call, its output buffer sized by the frame's own bound: about
    # twice as fast as streaming, and a frame that does not end where its blocks say fails.
    dctx = zstandard.ZstdDecompressor()
    out = [dctx.decompress(view[start:stop], max_output_size=frame_bound)
           for start, stop, frame_bound in frames if frame_bound]
    result = b"".join(out)
    _check_size(len(result), max_output, Compression.ZSTD)
    return result


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_BLOCK_MAX = 128 << 10  # no block regenerates more (RFC 8878, Block_Maximum_Size)
_ZSTD_FCS_BYTES = (0, 2, 4, 8)
_ZSTD_DICT_ID_BYTES = (0, 1, 2, 4)


def _zstd_frames(view: memoryview) -> list[tuple[int, int, int]] | None:
    """(start, stop, output bound) of each zstd frame in `view`, from the frame and block
    headers alone (RFC 8878): raw and RLE blocks count their size, a compressed block
    128 KiB; a declared content size is the bound. Skippable frames have bound 0.
    None if the bytes are not laid out as complete frames (the caller then streams).
    Raises CorruptRecord for a frame whose declared content size exceeds its blocks'."""
    end = len(view)
    pos = 0
    frames = []
    while pos < end:
        if end - pos < 6:
            return None
        magic = int.from_bytes(view[pos : pos + 4], "little")
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if end - pos < 8:
                return None
            stop = pos + 8 + int.from_bytes(view[pos + 4 : pos + 8], "little")
            if stop > end:
                return None
            frames.append((pos, stop, 0))
            pos = stop
            continue
        if magic != _ZSTD_MAGIC:
            return None
        descriptor = view[pos + 4]
        single_segment = descriptor & 0x20
        fcs_bytes = _ZSTD_FCS_BYTES[descriptor >> 6] or (1 if single_segment else 0)
        p = pos + 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_BYTES[descriptor & 0x03]
        declared = None
        if fcs_bytes:
            declared = int.from_bytes(view[p : p + fcs_bytes], "little") + (256 if fcs_bytes == 2 else 0)
            p += fcs_bytes
        bound = 0
        while True:
            if end - p < 3:
                return None
            block = int.from_bytes(view[p : p + 3], "little")
            kind, size = (block >> 1) & 0x03, block >> 3
            p += 3
            if kind == 0:  # raw
                p += size
                bound += size
            elif kind == 1:  # RLE: one byte, repeated `size` times
                p += 1
                bound += size
            elif kind == 2:
                p += size
                bound += _ZSTD_BLOCK_MAX
            else:
                return None
            if block & 1:  # last block
                break
        if descriptor & 0x04:  # content checksum
            p += 4
        if p > end:
            return None
        if declared is not None:
            if declared > bound:
                raise CorruptRecord(
                    f"zstd frame at byte {pos} declares a content size of {declared} bytes, "
                    f"more than its blocks can hold ({bound})"
                )
            bound = declared
        frames.append((pos, p, bound))
        pos = p
    return frames


def _zstd_stream_decompress(view: memoryview, max_output: int) -> bytes:
    # zstandard's stream reader returns a truncated frame's partial output without
    # complaint, so feed one decompressobj per frame small slices of input: that
    # bounds the output overshoot and shows whether each frame really ended.
    src = view.tobytes()
    end = len(src)
    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    pos = 0
    frame = 0
    while pos < end:
        dobj = dctx.decompressobj()
        while not dobj.eof and pos < end:
            piece = src[pos : pos + _ZSTD_INPUT_SLICE]
            pos += len(piece)
            out += dobj.decompress(piece)
            _check_size(len(out), max_output, Compression.ZSTD)
        if not dobj.eof:
            raise CorruptRecord(
                f"zstd data truncated: frame {frame} is incomplete at the end of {end} bytes"
            )
        pos -= len(dobj.unused_data)
        frame += 1
    return bytes(out)
