"""Zigzag varints: known vectors, kafka-python as an oracle, round trips, truncation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.util import encode_varint as kafka_encode_varint

from raftka.log.errors import CorruptRecord
from raftka.log.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    write_varint,
    write_varlong,
)

int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)

VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (300, "d804"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]
VARLONG_VECTORS = [
    *VARINT_VECTORS,
    (INT32_MAX + 1, "8080808010"),
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "encoded"), VARINT_VECTORS)
def test_varint_vectors(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)
    assert size_of_varint(value) == len(encoded) // 2


@pytest.mark.parametrize(("value", "encoded"), VARLONG_VECTORS)
def test_varlong_vectors(value: int, encoded: str) -> None:
    assert encode_varlong(value).hex() == encoded
    assert decode_varlong(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


@given(int64s)
def test_varlong_matches_kafka_python(value: int) -> None:
    expected = bytearray()
    kafka_encode_varint(value, expected.append)  # kafka-python's encoder is 64-bit zigzag
    assert encode_varlong(value) == bytes(expected)


@given(int32s, st.binary(max_size=4), st.binary(max_size=4))
def test_varint_round_trip_in_context(value: int, before: bytes, after: bytes) -> None:
    buf = before + encode_varint(value) + after
    got, pos = decode_varint(memoryview(buf), len(before))
    assert got == value
    assert pos == len(buf) - len(after)


@given(int64s, st.binary(max_size=4), st.binary(max_size=4))
def test_varlong_round_trip_in_context(value: int, before: bytes, after: bytes) -> None:
    buf = bytearray(before + encode_varlong(value) + after)
    assert decode_varlong(buf, len(before)) == (value, len(buf) - len(after))


@given(st.lists(int64s, max_size=20))
def test_write_appends(values: list[int]) -> None:
    out = bytearray(b"x")
    for v in values:
        if INT32_MIN <= v <= INT32_MAX:
            write_varint(out, v)
        else:
            write_varlong(out, v)
    pos = 1
    for v in values:
        got, pos = decode_varlong(out, pos)
        assert got == v
    assert pos == len(out)


@pytest.mark.parametrize("value", [INT32_MIN, -65, 64, 300, INT32_MAX])
def test_every_truncation_of_a_varint_is_corrupt(value: int) -> None:
    encoded = encode_varint(value)
    for cut in range(len(encoded)):
        with pytest.raises(CorruptRecord, match="truncated"):
            decode_varint(encoded[:cut], 0)


@pytest.mark.parametrize("value", [INT64_MIN, INT64_MAX, 1 << 40])
def test_every_truncation_of_a_varlong_is_corrupt(value: int) -> None:
    encoded = encode_varlong(value)
    for cut in range(len(encoded)):
        with pytest.raises(CorruptRecord, match="truncated"):
            decode_varlong(encoded[:cut], 0)


def test_decode_past_the_end_is_corrupt() -> None:
    with pytest.raises(CorruptRecord, match="truncated"):
        decode_varint(b"\x02", 1)


def test_too_long_varint_is_corrupt() -> None:
    assert decode_varint(b"\x80\x80\x80\x80\x00", 0) == (0, 5)  # 5 bytes: the maximum
    with pytest.raises(CorruptRecord, match="longer than 5 bytes"):
        decode_varint(b"\x80\x80\x80\x80\x80\x00", 0)


def test_too_long_varlong_is_corrupt() -> None:
    assert decode_varlong(b"\x80" * 9 + b"\x00", 0) == (0, 10)
    with pytest.raises(CorruptRecord, match="longer than 10 bytes"):
        decode_varlong(b"\x80" * 10 + b"\x00", 0)


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1])
def test_encode_varint_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError, match="int32 range"):
        encode_varint(value)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1])
def test_encode_varlong_rejects_out_of_range(value: int) -> None:
    with pytest.raises(ValueError, match="int64 range"):
        encode_varlong(value)
