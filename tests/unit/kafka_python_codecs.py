"""Give kafka-python working snappy and lz4 codecs backed by pyarrow, for use as a test oracle.

kafka-python looks for the `python-snappy` and `lz4` packages, which raftka does
not install; without them its record code cannot read or write snappy or lz4
batches. pyarrow (the `spark` extra) bundles the reference C snappy and lz4
libraries, independent of the cramjam build raftka uses, so plugging them into
kafka-python's codec hooks gives an independent implementation of both codecs
while kafka-python's own framing (xerial) and record code run unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import kafka.codec
import kafka.record.default_records
import pyarrow as pa


class _PyarrowSnappy:
    """The two functions kafka.codec calls on the `snappy` module (raw snappy)."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return pyarrow_snappy_raw_encode(data)

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return pyarrow_snappy_raw_decode(data)


def pyarrow_snappy_raw_encode(data: bytes) -> bytes:
    return pa.compress(data, codec="snappy", asbytes=True)


def pyarrow_snappy_raw_decode(data: bytes) -> bytes:
    # The raw format starts with the uncompressed length as a little-endian base-128 varint.
    size = shift = pos = 0
    while True:
        b = data[pos]
        pos += 1
        size |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    return pa.decompress(data, decompressed_size=size, codec="snappy", asbytes=True)


def pyarrow_lz4_frame_encode(data: bytes) -> bytes:
    return pa.compress(data, codec="lz4", asbytes=True)


def pyarrow_lz4_frame_decode(data: bytes) -> bytes:
    return pa.input_stream(pa.py_buffer(bytes(data)), compression="lz4").read()


@contextlib.contextmanager
def pyarrow_backed_kafka_codecs() -> Iterator[None]:
    """Within the block, kafka-python's snappy and lz4 codecs work (backed by pyarrow)."""
    records = kafka.record.default_records
    saved_codec = {
        name: getattr(kafka.codec, name) for name in ("snappy", "lz4f", "lz4_encode", "lz4_decode")
    }
    saved_records = {name: getattr(records, name) for name in ("lz4_encode", "lz4_decode")}
    try:
        kafka.codec.snappy = _PyarrowSnappy
        kafka.codec.lz4f = object()  # only tested for presence by kafka.codec.has_lz4()
        for module in (kafka.codec, records):
            module.lz4_encode = pyarrow_lz4_frame_encode
            module.lz4_decode = pyarrow_lz4_frame_decode
        yield
    finally:
        for name, value in saved_codec.items():
            setattr(kafka.codec, name, value)
        for name, value in saved_records.items():
            setattr(records, name, value)
