"""Compression codecs: round trips, independent implementations both ways, xerial
framing, corrupt input and decompression bombs."""

from __future__ import annotations

import gzip
import random
import struct

import cramjam
import kafka.codec
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from raftka.log import compression
from raftka.log.compression import (
    LZ4_FRAME_MAGIC,
    XERIAL_MAGIC,
    Compression,
    compress,
    decompress,
)
from raftka.log.errors import CorruptRecord, UnsupportedCompression

ALL_CODECS = list(Compression)
REAL_CODECS = [c for c in Compression if c is not Compression.NONE]

# Mixes incompressible bytes with long runs, so real compression happens.
payloads = st.one_of(
    st.binary(max_size=2048),
    st.lists(st.sampled_from([b"", b"a", b"kafka ", b"\x00" * 100, b"\xff\xfe"]), max_size=200).map(
        b"".join
    ),
)
BIG = (b"raftka record batch payload " * 5000) + bytes(range(256)) * 300  # > 2 xerial blocks


@pytest.fixture(scope="module")
def oracle():
    """kafka-python's codec module with working snappy and lz4 (pyarrow-backed)."""
    from tests.unit.kafka_python_codecs import pyarrow_backed_kafka_codecs

    with pyarrow_backed_kafka_codecs():
        yield kafka.codec


@pytest.fixture(scope="module")
def pyarrow_codecs():
    from tests.unit import kafka_python_codecs

    return kafka_python_codecs


# -- names and ids ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "codec"),
    [("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("ZSTD", 4)],
)
def test_from_name(name: str, codec: int) -> None:
    assert Compression.from_name(name) == codec


def test_from_unknown_name() -> None:
    with pytest.raises(UnsupportedCompression, match="'brotli'.*expected one of none, gzip"):
        Compression.from_name("brotli")


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec_id(codec: int) -> None:
    with pytest.raises(UnsupportedCompression, match=f"codec id {codec}"):
        compress(codec, b"x")
    with pytest.raises(UnsupportedCompression, match=f"codec id {codec}"):
        decompress(codec, b"x")


# -- round trips --------------------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
@settings(max_examples=60, deadline=None)
@given(data=payloads)
def test_round_trip(codec: Compression, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data  # any buffer type


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_round_trip_large(codec: Compression) -> None:
    packed = compress(codec, BIG)
    if codec is not Compression.NONE:
        assert len(packed) < len(BIG) // 4
    assert decompress(codec, packed) == BIG


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_any_buffer_type_compresses(codec: Compression, kind) -> None:
    data = kind(BIG[:5000])
    assert decompress(codec, compress(codec, data)) == BIG[:5000]
    if codec is Compression.SNAPPY:
        assert decompress(codec, compress(codec, data, xerial=True)) == BIG[:5000]


@settings(max_examples=60, deadline=None)
@given(data=payloads)
def test_xerial_round_trip(data: bytes) -> None:
    packed = compress(Compression.SNAPPY, data, xerial=True)
    assert packed.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, packed) == data


def test_snappy_writes_raw_by_default() -> None:
    packed = compress(Compression.SNAPPY, BIG)
    assert not packed.startswith(XERIAL_MAGIC)
    assert bytes(cramjam.snappy.decompress_raw(packed)) == BIG


# -- snappy: xerial framing ---------------------------------------------------


def _xerial(blocks: list[bytes], version: int = 1, compat: int = 1, fmt: str = ">ii") -> bytes:
    out = bytearray(XERIAL_MAGIC + struct.pack(fmt, version, compat))
    for block in blocks:
        raw = bytes(cramjam.snappy.compress_raw(block))
        out += struct.pack(">i", len(raw)) + raw
    return bytes(out)


def test_hand_built_xerial_stream() -> None:
    blocks = [b"first block " * 100, b"", bytes(range(256)), b"last"]
    assert decompress(Compression.SNAPPY, _xerial(blocks)) == b"".join(blocks)


def test_xerial_header_fields_are_not_checked() -> None:
    # Some producers write version and compat little-endian; readers tolerate it.
    stream = _xerial([b"payload"], fmt="<ii")
    assert decompress(Compression.SNAPPY, stream) == b"payload"


def test_xerial_header_only_is_empty() -> None:
    assert decompress(Compression.SNAPPY, _xerial([])) == b""


def test_kafka_python_xerial_decodes(oracle) -> None:
    for data in (b"", b"x", BIG):
        stream = oracle.snappy_encode(data, xerial_compatible=True)
        assert stream.startswith(XERIAL_MAGIC)
        assert decompress(Compression.SNAPPY, stream) == data


def test_kafka_python_decodes_ours(oracle) -> None:
    for data in (b"x", BIG):
        assert oracle.snappy_decode(compress(Compression.SNAPPY, data, xerial=True)) == data
        assert oracle.snappy_decode(compress(Compression.SNAPPY, data)) == data


def test_reference_snappy_raw_both_ways(pyarrow_codecs) -> None:
    assert decompress(Compression.SNAPPY, pyarrow_codecs.pyarrow_snappy_raw_encode(BIG)) == BIG
    assert pyarrow_codecs.pyarrow_snappy_raw_decode(compress(Compression.SNAPPY, BIG)) == BIG


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        (XERIAL_MAGIC + b"\x00\x00\x00\x01", "header truncated"),
        (_xerial([b"abc"])[:-1], "declares"),
        (_xerial([b"abc"]) + b"\x00\x00", "length at byte .* truncated"),
        (XERIAL_MAGIC + b"\x00" * 8 + b"\xff\xff\xff\xff", "declares -1 bytes"),
        (XERIAL_MAGIC + b"\x00" * 8 + b"\x00\x00\x00\x02\x05\x00", "snappy"),
    ],
)
def test_corrupt_xerial(stream: bytes, message: str) -> None:
    with pytest.raises(CorruptRecord, match=message):
        decompress(Compression.SNAPPY, stream)


# -- lz4: the frame format ----------------------------------------------------


def test_lz4_writes_frames_with_independent_blocks() -> None:
    packed = compress(Compression.LZ4, BIG)
    assert packed.startswith(LZ4_FRAME_MAGIC)
    flags = packed[4]
    assert flags >> 6 == 0b01, "LZ4 frame version 01"
    assert flags & 0x20, "block independence: the Java client reads only independent blocks"


def test_lz4_reference_implementation_both_ways(pyarrow_codecs) -> None:
    for data in (b"", b"x", BIG):
        assert pyarrow_codecs.pyarrow_lz4_frame_decode(compress(Compression.LZ4, data)) == data
        assert decompress(Compression.LZ4, pyarrow_codecs.pyarrow_lz4_frame_encode(data)) == data


def test_kafka_python_lz4_both_ways(oracle) -> None:
    assert oracle.lz4_decode(compress(Compression.LZ4, BIG)) == BIG
    assert decompress(Compression.LZ4, oracle.lz4_encode(BIG)) == BIG


def test_lz4_block_format_is_rejected() -> None:
    block = bytes(cramjam.lz4.compress_block(b"not a frame" * 10))
    with pytest.raises(CorruptRecord, match="LZ4 frame magic"):
        decompress(Compression.LZ4, block)


# -- zstd ---------------------------------------------------------------------


def test_zstd_frame_without_content_size() -> None:
    streaming = zstandard.ZstdCompressor().compressobj()
    frame = streaming.compress(BIG) + streaming.flush()
    assert zstandard.frame_content_size(frame) == -1  # unknown, as librdkafka writes it
    assert decompress(Compression.ZSTD, frame) == BIG


def test_zstd_several_frames() -> None:
    frames = compress(Compression.ZSTD, b"one ") + compress(Compression.ZSTD, b"two")
    assert decompress(Compression.ZSTD, frames) == b"one two"


def test_zstd_frames_the_header_walk_reads() -> None:
    """The one-call path (frames read from their headers) and the streaming fallback agree:
    a skippable frame, content size declared or not, one-byte and big inputs, empty."""
    streaming = zstandard.ZstdCompressor().compressobj()
    unsized = streaming.compress(BIG) + streaming.flush()
    sized = zstandard.ZstdCompressor().compress(BIG)
    skippable = (0x184D2A53).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    empty = zstandard.ZstdCompressor().compress(b"")
    for data, expected in ((unsized, BIG), (sized, BIG), (skippable + sized, BIG),
                           (unsized + empty + sized, BIG + BIG), (compress(Compression.ZSTD, b"x"), b"x")):
        assert compression._zstd_frames(memoryview(data)) is not None
        assert decompress(Compression.ZSTD, data) == expected
        assert compression._zstd_stream_decompress(memoryview(data), 1 << 30) == expected


def test_zstd_declared_content_size_larger_than_the_blocks_is_corrupt() -> None:
    """A lie in the frame header is caught before zstd sizes its output buffer by it."""
    incompressible = random.Random(3).randbytes(300)  # stored as one raw block of 300 bytes
    frame = bytearray(zstandard.ZstdCompressor().compress(incompressible))
    assert frame[4] == 0x60  # single segment (no window byte), 2-byte content size (+256)
    frame[5:7] = b"\xff\xff"
    assert zstandard.frame_content_size(bytes(frame)) == 65791
    with pytest.raises(CorruptRecord, match="declares a content size of 65791 bytes, more than its blocks"):
        decompress(Compression.ZSTD, bytes(frame))


def test_kafka_python_zstd_both_ways() -> None:
    assert kafka.codec.zstd_decode(compress(Compression.ZSTD, BIG)) == BIG
    assert decompress(Compression.ZSTD, kafka.codec.zstd_encode(BIG)) == BIG


# -- gzip ---------------------------------------------------------------------


def test_gzip_interoperates_with_stdlib_and_kafka_python() -> None:
    assert gzip.decompress(compress(Compression.GZIP, BIG)) == BIG
    assert decompress(Compression.GZIP, gzip.compress(BIG)) == BIG
    assert kafka.codec.gzip_decode(compress(Compression.GZIP, BIG)) == BIG
    assert decompress(Compression.GZIP, kafka.codec.gzip_encode(BIG)) == BIG


def test_gzip_several_members() -> None:
    assert (
        decompress(Compression.GZIP, gzip.compress(b"one ") + gzip.compress(b"two")) == b"one two"
    )


# -- corrupt input ------------------------------------------------------------


@pytest.mark.parametrize("codec", REAL_CODECS, ids=lambda c: c.name)
def test_every_truncation_is_corrupt(codec: Compression) -> None:
    data = b"a compressible payload, " * 40 + bytes(range(200))
    packed = compress(codec, data)
    for cut in range(len(packed)):
        try:
            got = decompress(codec, packed[:cut])
        except CorruptRecord:
            continue
        # Raw snappy has no end marker and a prefix may still decode; it must not
        # pass as the original.
        assert got != data, f"{codec.name} accepted a stream cut at {cut} of {len(packed)}"


@pytest.mark.parametrize("codec", REAL_CODECS, ids=lambda c: c.name)
@settings(max_examples=100, deadline=None)
@given(garbage=st.binary(max_size=64))
def test_garbage_raises_only_corrupt_record(codec: Compression, garbage: bytes) -> None:
    try:
        result = decompress(codec, garbage)
    except CorruptRecord:
        return
    assert isinstance(result, bytes)


@pytest.mark.parametrize("codec", REAL_CODECS, ids=lambda c: c.name)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_flipped_bytes_raise_only_corrupt_record(codec: Compression, data) -> None:
    packed = bytearray(compress(codec, BIG[:3000]))
    index = data.draw(st.integers(0, len(packed) - 1))
    packed[index] ^= data.draw(st.integers(1, 255))
    try:
        result = decompress(codec, bytes(packed))
    except CorruptRecord:
        return
    assert isinstance(result, bytes)


def test_corrupt_message_names_the_codec() -> None:
    with pytest.raises(CorruptRecord, match="gzip data \\(5 bytes\\) failed to decompress"):
        decompress(Compression.GZIP, b"hello")


# -- decompression bombs --------------------------------------------------------

BOMB = b"\x00" * (4 * 1024 * 1024)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_output_over_max_is_corrupt(codec: Compression) -> None:
    packed = compress(codec, BOMB)
    with pytest.raises(CorruptRecord, match="1048576"):
        decompress(codec, packed, max_output=1024 * 1024)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_output_exactly_max_is_accepted(codec: Compression) -> None:
    data = BOMB[:65536]
    assert decompress(codec, compress(codec, data), max_output=65536) == data
    with pytest.raises(CorruptRecord):
        decompress(codec, compress(codec, data), max_output=65535)


def test_xerial_bomb_is_corrupt() -> None:
    packed = compress(Compression.SNAPPY, BOMB, xerial=True)
    with pytest.raises(CorruptRecord, match="more than the limit"):
        decompress(Compression.SNAPPY, packed, max_output=1024 * 1024)


def test_lz4_declared_content_size_over_max_is_rejected_before_inflating() -> None:
    frame = LZ4_FRAME_MAGIC + bytes([0x68, 0x40]) + (10**9).to_bytes(8, "little") + b"\x00"
    with pytest.raises(CorruptRecord, match="declares a content size of 1000000000"):
        decompress(Compression.LZ4, frame, max_output=1024 * 1024)


def test_zstd_bomb_without_content_size_is_corrupt() -> None:
    streaming = zstandard.ZstdCompressor().compressobj()
    frame = streaming.compress(BOMB) + streaming.flush()
    with pytest.raises(CorruptRecord, match="limit of 1048576"):
        decompress(Compression.ZSTD, frame, max_output=1024 * 1024)


def test_lz4_frame_without_content_size_is_bounded_before_inflating() -> None:
    """A frame that declares no content size is bounded by its block count x block size."""
    frame = compress(Compression.LZ4, bytes(64 << 20))  # ~255x: 64 MiB from ~250 KB
    assert not frame[4] & 0x08, "the frame should not declare its content size"
    with pytest.raises(CorruptRecord, match="blocks' declared maximum"):
        decompress(Compression.LZ4, frame, max_output=1024 * 1024)
