"""log.record_validator: every rule refuses a hand-built malformed batch (uncompressed and
inside each codec), good batches of every shape pass, the uniform fast path never accepts
what the record-by-record walk refuses, and the walk agrees with the SDK's decoder."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftka.log import record_validator
from raftka.log.batch_header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    pack_header,
    parse_header,
    update_crc,
)
from raftka.log.compression import Compression, compress
from raftka.log.config import LogConfig
from raftka.log.errors import (
    CorruptRecord,
    InvalidRecord,
    LogError,
    RecordTooLarge,
    UnsupportedCompression,
)
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import Record, decode_batch, encode_batch
from raftka.log.record_validator import validate_records
from raftka.log.varint import INT64_MAX, INT64_MIN, decode_varint, encode_varint

BOUND = 1 << 20
CODECS = [c for c in Compression if c is not Compression.NONE]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def record(offset_delta: int, *, key: bytes | None = None, value: bytes | None = b"v",
           headers: bytes = b"\x00", ts: bytes = b"\x00", attributes: bytes = b"\x00",
           key_field: bytes | None = None, value_field: bytes | None = None,
           delta_field: bytes | None = None, extra: bytes = b"", length: int | None = None) -> bytes:
    """One record's bytes, every field overridable with raw bytes (`length` lies if given)."""
    if key_field is None:
        key_field = b"\x01" if key is None else encode_varint(len(key)) + key
    if value_field is None:
        value_field = b"\x01" if value is None else encode_varint(len(value)) + value
    body = (attributes + ts + (encode_varint(offset_delta) if delta_field is None else delta_field)
            + key_field + value_field + headers + extra)
    return encode_varint(len(body) if length is None else length) + body


def header_field(*pairs: tuple[bytes, bytes | None]) -> bytes:
    out = encode_varint(len(pairs))
    for key, value in pairs:
        out += encode_varint(len(key)) + key
        out += b"\x01" if value is None else encode_varint(len(value)) + value
    return out


def raw_batch(records: bytes, count: int, codec: int = 0) -> bytes:
    """A batch around these record bytes, declaring `count` records, CRC valid."""
    payload = compress(codec, records) if codec else records
    header = BatchHeader(base_offset=0, batch_length=HEADER_SIZE - LOG_OVERHEAD + len(payload),
                         partition_leader_epoch=-1, magic=MAGIC_V2, crc=0, attributes=codec,
                         last_offset_delta=max(count - 1, 0), base_timestamp=1000, max_timestamp=1000,
                         producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=count)
    buf = bytearray(pack_header(header) + payload)
    update_crc(buf)
    return bytes(buf)


def validate(batch: bytes, **options) -> None:
    validate_records(batch, parse_header(batch), max_uncompressed=options.pop("bound", BOUND), **options)


def records(n: int, **options) -> bytes:
    return b"".join(record(i, **options) for i in range(n))


# (name, record bytes, declared count, blamed record index or None, words of the error)
MALFORMED = [
    ("length claims more than remains", record(0, value=b"vv", length=11), 1, 0,
     "length is 11 but 8 bytes remain"),
    ("length below the minimum", encode_varint(5) + b"\x00" * 5, 1, 0, "length is 5, expected at least 6"),
    ("negative length", encode_varint(-3) + record(0)[1:], 1, 0, "length is -3"),
    ("length varint over 5 bytes", b"\x80\x80\x80\x80\x80\x01" + record(0)[1:], 1, 0, "longer than 5 bytes"),
    ("fields shorter than the length", record(0, extra=b"\x00"), 1, 0, "length is 8 but its fields take 7 bytes"),
    ("fields longer than the length", record(0, value=b"vvvv", length=7), 1, 0, "value length 4, expected -1 \\(null\\) or 0..2"),
    ("timestamp varlong over 10 bytes", record(0, ts=b"\x80" * 10 + b"\x01"), 1, 0, "longer than 10 bytes"),
    ("timestamp delta outside int64", record(0, ts=b"\xff" * 9 + b"\x7f"), 1, 0, "not an int64"),
    ("first offset delta not 0", record(1), 1, 0, "offset delta is 1, expected 0"),
    ("offset deltas out of order", record(0) + record(2) + record(1), 3, 1, "offset delta is 2, expected 1"),
    ("offset delta repeated", record(0) + record(0), 2, 1, "offset delta is 0, expected 1"),
    ("negative offset delta", record(-1), 1, 0, "offset delta is -1, expected 0"),
    ("two-byte offset delta wrong", records(64) + record(65), 65, 64, "offset delta is 65, expected 64"),
    ("offset delta varint over 5 bytes", record(0, delta_field=b"\x80" * 5 + b"\x00"), 1, 0,
     "offset delta is unreadable"),
    ("fewer records than declared", records(2), 3, 2, "records end after 2 of the 3"),
    ("more records than declared", records(3), 2, None, "trailing garbage"),
    ("trailing bytes after the records", records(1) + b"\x00\x00", 1, None, "2 bytes of trailing garbage"),
    ("key length -2", record(0, key_field=encode_varint(-2)), 1, 0, "key length -2"),
    ("key length past int32", record(0, key_field=b"\xfe\xff\xff\xff\x7f"), 1, 0, "key length 17179869183"),
    ("value length past int32", record(0, value_field=b"\xfe\xff\xff\xff\x7f"), 1, 0,
     "value length 17179869183"),
    ("key longer than the record", record(0, key_field=encode_varint(50) + b"abc"), 1, 0, "key length 50"),
    ("value length -2", record(0, value_field=encode_varint(-2)), 1, 0, "value length -2"),
    ("value longer than the record", record(0, value_field=encode_varint(300) + b"abc"), 1, 0,
     "value length 300"),
    ("no header count", record(0, headers=b""), 1, 0, "ends before its header count"),
    ("negative header count", record(0, headers=encode_varint(-1)), 1, 0, "header count -1"),
    ("header count beyond the record", record(0, headers=encode_varint(1000) + b"\x00\x01"), 1, 0,
     "header count 1000"),
    ("null header key", record(0, headers=b"\x02" + encode_varint(-1) + b"\x01"), 1, 0,
     "header 0 key length -1"),
    ("header key beyond the record", record(0, headers=b"\x02" + encode_varint(40) + b"ab\x01"), 1, 0,
     "header 0 key length 40"),
    ("header key not UTF-8", record(0, headers=header_field((b"\xff\xfe", b"v"))), 1, 0, "not valid UTF-8"),
    ("header value length -2", record(0, headers=b"\x02\x04ab" + encode_varint(-2)), 1, 0,
     "header 0 value length -2"),
    ("header value beyond the record", record(0, headers=b"\x02\x04ab" + encode_varint(90) + b"x"), 1, 0,
     "header 0 value length 90"),
    ("second header cut short", record(0, headers=b"\x04\x04ab\x01\x04cd"), 1, 0, "header 1 ends before"),
    ("bad record after good ones", records(70) + record(70, length=200), 71, 70, "length is 200"),
]


@pytest.mark.parametrize(("name", "data", "count", "index", "words"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_uncompressed_batch_is_refused(name: str, data: bytes, count: int, index: int | None,
                                                 words: str) -> None:
    with pytest.raises(InvalidRecord, match=words) as caught:
        validate(raw_batch(data, count))
    assert caught.value.record_index == index


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize(("name", "data", "count", "index", "words"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_records_inside_a_compressed_batch_are_refused(codec: Compression, name: str, data: bytes,
                                                                 count: int, index: int | None,
                                                                 words: str) -> None:
    with pytest.raises(InvalidRecord, match=words) as caught:
        validate(raw_batch(data, count, codec))
    assert caught.value.record_index == index


def test_null_key_is_refused_on_a_compacted_topic_only() -> None:
    batch = raw_batch(record(0, key=b"k") + record(1, key=None), 2)
    validate(batch)
    with pytest.raises(InvalidRecord, match="Compacted topic cannot accept message without key") as caught:
        validate(batch, require_keys=True)
    assert caught.value.record_index == 1
    validate(raw_batch(records(3, key=b"k"), 3), require_keys=True)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_compressed_data_that_does_not_decompress_is_corrupt(codec: Compression) -> None:
    batch = bytearray(raw_batch(records(20), 20, codec))
    body = HEADER_SIZE + 10
    batch[body : body + 8] = b"\xa5" * 8  # inside the compressed block
    update_crc(batch)
    with pytest.raises(CorruptRecord):
        validate(bytes(batch))


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_decompression_past_the_bound_is_too_large(codec: Compression) -> None:
    """A decompression bomb (here: honest records, just too many) is refused, not inflated."""
    data = records(2000, value=b"\x00" * 1000)  # ~2 MB that compresses to a few KB
    batch = raw_batch(data, 2000, codec)
    assert len(batch) < len(data) // 20
    with pytest.raises(RecordTooLarge, match=str(BOUND)):
        validate(batch)
    validate(batch, bound=len(data))  # exactly at the bound: accepted


def test_unknown_codec_is_unsupported() -> None:
    batch = bytearray(raw_batch(records(1), 1))
    batch[22] |= 0x05  # attributes (low byte): codec id 5
    update_crc(batch)
    with pytest.raises(UnsupportedCompression):
        validate(bytes(batch))


GOOD = [
    ("one keyless record", [Record(None, b"v")]),
    ("null value", [Record(b"k", None)]),
    ("empty key and value", [Record(b"", b"")]),
    ("headers, null header value", [Record(b"k", b"v", headers=(("h", b"1"), ("é", None)))]),
    ("mixed shapes", [Record(b"k" * (i % 5) or None, b"v" * (i * 37 % 300)) for i in range(300)]),
    ("uniform, 64 records", [Record(None, b"x" * 1000) for _ in range(64)]),
    ("uniform, 65 records", [Record(b"key-1", b"x" * 10) for _ in range(65)]),
    ("uniform, 8192 records", [Record(None, b"x") for _ in range(8192)]),
    ("uniform, 8193 records", [Record(None, b"x") for _ in range(8193)]),
    ("big values", [Record(None, b"x" * 70_000) for _ in range(3)]),
    ("timestamps far apart", [Record(None, b"v", timestamp=t) for t in (0, 10**12, 5, 2**40)]),
]


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name)
@pytest.mark.parametrize(("name", "recs"), GOOD, ids=[g[0] for g in GOOD])
def test_good_batches_pass(codec: Compression, name: str, recs: list[Record]) -> None:
    validate(encode_batch(recs, compression=codec, base_timestamp=1000))


def test_batch_inside_a_larger_buffer() -> None:
    """The batch may sit anywhere in a produce request's records field."""
    first = encode_batch([Record(None, b"a")])
    second = encode_batch([Record(None, b"b" * 10) for _ in range(3)], compression=Compression.ZSTD)
    buf = first + second
    validate_records(buf, parse_header(buf, len(first)), max_uncompressed=BOUND)
    bad = first + raw_batch(record(0, value=b"vv", length=11), 1)
    with pytest.raises(InvalidRecord, match=f"batch at position {len(first)} "):
        validate_records(bad, parse_header(bad, len(first)), max_uncompressed=BOUND)


# -- properties --------------------------------------------------------------------------------

nullable = st.one_of(st.none(), st.binary(max_size=30))
header_lists = st.lists(st.tuples(st.text(max_size=6), nullable), max_size=3).map(tuple)


@st.composite
def record_lists(draw) -> list[Record]:
    n = draw(st.integers(1, 80))
    if draw(st.booleans()):  # uniform: the fast path's case
        key = draw(nullable)
        value = draw(nullable)
        return [Record(key, value, timestamp=1000 + draw(st.integers(0, 63))) for _ in range(n)]
    return [Record(draw(nullable), draw(nullable), draw(header_lists), timestamp=draw(st.integers(0, 2**41)))
            for _ in range(n)]


def decoder_verdict(batch: bytes) -> bool:
    """The independent oracle: the SDK decoder reads it, with offsets 0..n-1 and int64 deltas."""
    try:
        decoded = decode_batch(batch, verify_crc=False)
    except LogError:
        return False
    header = decoded.header
    return ([r.offset for r in decoded.records] == list(range(header.record_count))
            and all(INT64_MIN <= r.timestamp - header.base_timestamp <= INT64_MAX for r in decoded.records)
            and _record_attributes(batch, header.record_count) == [0] * header.record_count)


def _record_attributes(batch: bytes, count: int) -> list[int]:
    """Each record's attributes byte (unused in v2; the validator wants 0, see its module)."""
    out, pos = [], HEADER_SIZE
    for _ in range(count):
        length, p = decode_varint(batch, pos)
        out.append(batch[p])
        pos = p + length
    return out


def validator_verdict(batch: bytes) -> bool:
    try:
        validate(batch)
    except InvalidRecord:
        return False
    return True


@SETTINGS
@given(record_lists(), st.sampled_from(list(Compression)))
def test_every_encoded_batch_passes(recs: list[Record], codec: Compression) -> None:
    validate(encode_batch(recs, compression=codec, base_timestamp=1000))


@SETTINGS
@given(record_lists(), st.randoms(use_true_random=False), st.integers(1, 4))
def test_mutations_agree_with_the_decoder_and_the_fast_path_with_the_walk(
        recs: list[Record], rng: random.Random, mutations: int) -> None:
    batch = bytearray(encode_batch(recs, base_timestamp=1000))
    for _ in range(mutations):
        position = rng.randrange(HEADER_SIZE, len(batch))
        kind = rng.randrange(4)
        if kind == 0:
            batch[position] ^= 1 << rng.randrange(8)
        elif kind == 1:
            batch[position] = rng.choice((0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF))
        elif kind == 2:
            batch.insert(position, rng.randrange(256))
        else:
            del batch[position]
        if len(batch) <= HEADER_SIZE:
            return
    batch[8:12] = (len(batch) - LOG_OVERHEAD).to_bytes(4, "big")  # keep the batch length honest
    data = bytes(batch)
    assert validator_verdict(data) == decoder_verdict(data)
    header = parse_header(data)
    if record_validator._uniform_records(data, HEADER_SIZE, len(data), header.record_count, False):
        assert record_validator._walk(data, HEADER_SIZE, len(data), header.record_count, False) is None


varint_soup = st.lists(st.one_of(st.sampled_from([b"\x00", b"\x01", b"\x02", b"\x7f", b"\x80", b"\xfe", b"\xff"]),
                                 st.binary(max_size=4)), max_size=60).map(b"".join)


@SETTINGS
@given(varint_soup, st.integers(1, 5), st.booleans())
def test_any_bytes_raise_only_invalid_record(data: bytes, count: int, require_keys: bool) -> None:
    """Whatever the records region holds, the answer is a verdict, never another exception
    (a 5-byte varint past int32 once reached encode_varint's ValueError)."""
    for prefix in (b"", record(0)):  # garbage as record 0, or after a good record 0
        batch = raw_batch(prefix + data, count)
        try:
            validate(batch, require_keys=require_keys)
        except InvalidRecord:
            pass


@pytest.mark.parametrize("key", [None, b"", b"kk"])
def test_every_single_byte_change_of_a_uniform_batch(key: bytes | None) -> None:
    """Exhaustive where the fast path works: each byte of a uniform 66-record batch (across
    the one- to two-byte offset delta step) replaced by telling values. The fast path may only
    accept what the walk accepts, and the verdict is the decoder's."""
    batch = encode_batch([Record(key, b"val", timestamp=1000 + i % 3) for i in range(66)], base_timestamp=1000)
    count = parse_header(batch).record_count
    for position in range(HEADER_SIZE, len(batch)):
        for value in (0x00, 0x01, 0x02, 0x7F, 0x80, 0x81, 0xFF, batch[position] ^ 0x01):
            mutated = bytearray(batch)
            mutated[position] = value
            data = bytes(mutated)
            fast = record_validator._uniform_records(data, HEADER_SIZE, len(data), count, False)
            walked = record_validator._walk(data, HEADER_SIZE, len(data), count, False) is None
            assert walked or not fast, f"fast path accepted byte {position} = {value:#04x}"
            assert validator_verdict(data) == decoder_verdict(data), f"byte {position} = {value:#04x}"


def test_uniform_fast_path_is_taken_for_uniform_batches() -> None:
    """The cheap path really runs for the common shape (and only then)."""
    for recs in ([Record(None, b"x" * 1024) for _ in range(1024)],
                 [Record(b"key-00", b"y" * 100) for _ in range(5000)],
                 [Record(b"", None)]):
        data = encode_batch(recs, base_timestamp=1000)
        assert record_validator._uniform_records(data, HEADER_SIZE, len(data), len(recs), False)
    mixed = encode_batch([Record(None, b"x"), Record(None, b"xx")], base_timestamp=1000)
    assert not record_validator._uniform_records(mixed, HEADER_SIZE, len(mixed), 2, False)
    with_headers = encode_batch([Record(None, b"x", (("h", b"1"),))], base_timestamp=1000)
    assert not record_validator._uniform_records(with_headers, HEADER_SIZE, len(with_headers), 1, False)


# -- in the partition log ----------------------------------------------------------------------


def test_partition_log_refuses_the_whole_append_and_stores_nothing(tmp_path) -> None:
    log = PartitionLog.open(tmp_path, "t", 0, LogConfig(), now_ms=0)
    try:
        log.append(encode_batch([Record(None, b"before")]), 0, now_ms=0)
        good = encode_batch([Record(None, b"good")])
        poisoned = raw_batch(record(0, value=b"vv", length=11), 1)
        with pytest.raises(InvalidRecord, match="length is 11"):
            log.append(good + poisoned, 0, now_ms=0)  # a good batch first: not written either
        assert log.log_end_offset == 1
        assert log.append(good, 0, now_ms=0).first_offset == 1
        # Followers take the leader's bytes as they are (already validated there).
        follower = PartitionLog.open(tmp_path / "follower", "t", 0, LogConfig(), now_ms=0)
        try:
            follower.append_as_follower(log.read_bytes(0, 1 << 20), now_ms=0)
            assert follower.log_end_offset == 2
        finally:
            follower.close()
    finally:
        log.close()


def test_partition_log_bounds_inflation_by_max_message_bytes(tmp_path) -> None:
    config = LogConfig(max_message_bytes=10_000)
    log = PartitionLog.open(tmp_path, "t", 0, config, now_ms=0)
    try:
        fits = encode_batch([Record(None, b"\x00" * 1000) for _ in range(70)], compression=Compression.ZSTD)
        log.append(fits, 0, now_ms=0)  # ~70 KB inflated, under 8 x 10 000
        bomb = encode_batch([Record(None, b"\x00" * 1000) for _ in range(100)], compression=Compression.ZSTD)
        with pytest.raises(RecordTooLarge, match="80000"):
            log.append(bomb, 0, now_ms=0)
        assert log.log_end_offset == 70
    finally:
        log.close()


def test_idempotent_batch_without_a_sequence_is_invalid(tmp_path) -> None:
    log = PartitionLog.open(tmp_path, "t", 0, LogConfig(), now_ms=0)
    try:
        with pytest.raises(InvalidRecord, match="base sequence -1"):
            log.append(encode_batch([Record(None, b"v")], producer_id=7, producer_epoch=0), 0, now_ms=0)
    finally:
        log.close()


@pytest.mark.parametrize("attributes", [0x01, 0x80, 0x99, 0xFF])
def test_record_attributes_must_be_zero(attributes: int) -> None:
    """Unused in v2 and written 0 by every producer; kafka-python reads the byte as a varint, so
    a set high bit makes it misread the rest of the record and stop at that offset for good
    (found by the protocol fuzzer). Kafka ignores the byte; raftka refuses it."""
    for records in ([Record(b"k", b"v", timestamp=1000)] * 3,            # the uniform fast path
                    [Record(b"k" * i, b"v", timestamp=1000) for i in range(3)]):  # the walk
        batch = bytearray(encode_batch(records, base_timestamp=1000))
        _, p = decode_varint(batch, HEADER_SIZE)
        batch[p] = attributes
        with pytest.raises(InvalidRecord, match=f"record 0: its attributes byte is {attributes:#04x}, expected 0"):
            validate(bytes(batch))


@pytest.mark.parametrize(("base", "delta"), [(2**63 - 1, 1), (1_700_000_000_000, 2**63 - 1), (-(2**63), -1)])
def test_a_record_timestamp_must_stay_an_int64(base: int, delta: int) -> None:
    """Found by the protocol fuzzer (1 000 000 frames, seed 20261124): base timestamp + delta
    past 2^63-1 was stored, and ListOffsets then failed to encode the record's timestamp."""
    batch = bytearray(encode_batch([Record(b"k", b"v", timestamp=0)], base_timestamp=0))
    header = parse_header(bytes(batch))
    record = _rebuilt_record_with_delta(batch, delta)
    out = bytearray(batch[:HEADER_SIZE]) + record
    struct.pack_into(">q", out, 27, base)  # baseTimestamp
    struct.pack_into(">i", out, 8, len(out) - 12)  # batchLength
    assert header.record_count == 1
    with pytest.raises(InvalidRecord, match="outside the int64 range"):
        validate(bytes(out))


def _rebuilt_record_with_delta(batch: bytearray, delta: int) -> bytes:
    """The batch's single record re-encoded with timestamp delta `delta`."""
    from raftka.log.varint import encode_varint, encode_varlong

    _, p = decode_varint(batch, HEADER_SIZE)
    body = bytes(batch[p:])
    ts_end = decode_varint(body, 1)[1]  # attributes, then the old one-byte delta
    new_body = body[:1] + encode_varlong(delta) + body[ts_end:]
    return encode_varint(len(new_body)) + new_body


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_record_body_past_max_decompressed_message_bytes_is_invalid(codec: Compression) -> None:
    """Kafka's max.decompressed.message.bytes: in a compressed batch, a record whose body is
    longer than the bound is INVALID_RECORD (its index named); at the bound it passes, and an
    uncompressed batch is not bounded (Kafka applies it only to compressed batches)."""
    records = record(0, value=b"x" * 10) + record(1, value=b"y" * 40)
    second = len(record(1, value=b"y" * 40)) - 1  # its body: the record less its one-byte length
    validate(raw_batch(records, 2, codec), max_record_body=second)
    with pytest.raises(InvalidRecord, match="max.decompressed.message.bytes") as caught:
        validate(raw_batch(records, 2, codec), max_record_body=second - 1)
    assert caught.value.record_index == 1
    validate(raw_batch(records, 2), max_record_body=1)
