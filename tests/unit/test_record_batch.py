"""RecordBatch v2 encode/decode: round trips, kafka-python as an independent oracle in
both directions, and every kind of corruption surfacing as CorruptRecord/InvalidRecord."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from raftka.log.batch_header import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    pack_header,
    parse_header,
    set_base_offset,
    set_max_timestamp_and_crc,
    set_partition_leader_epoch,
    update_crc,
)
from raftka.log.compression import Compression, compress
from raftka.log.errors import CorruptRecord, InvalidRecord, LogError, UnsupportedCompression
from raftka.log.record_batch import DecodedBatch, Record, decode_batch, encode_batch, iter_batches
from raftka.log.varint import encode_varint, encode_varlong

CODECS = list(Compression)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

nullable_bytes = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=8), nullable_bytes), max_size=3).map(tuple)
timestamps = st.integers(0, 2**42)


@st.composite
def record_lists(draw, max_size: int = 12) -> tuple[int, list[Record]]:
    """A base offset and records with explicit, strictly increasing offsets (gaps allowed)."""
    base = draw(st.integers(0, 2**40))
    gaps = draw(st.lists(st.integers(1, 1000), min_size=1, max_size=max_size))
    first_delta = draw(st.integers(0, 50))
    records = []
    delta = first_delta
    for gap in gaps:
        records.append(
            Record(
                key=draw(nullable_bytes),
                value=draw(nullable_bytes),
                headers=draw(headers),
                timestamp=draw(timestamps),
                offset=base + delta,
            )
        )
        delta += gap
    return base, records


def _kafka_python_records(buf: bytes) -> tuple[DefaultRecordBatch, list[Record]]:
    batch = DefaultRecordBatch(bytearray(buf))
    assert batch.validate_crc(), "kafka-python's CRC-32C check failed on our batch"
    records = [Record(r.key, r.value, tuple(r.headers), r.timestamp, r.offset) for r in batch]
    return batch, records


@pytest.fixture(scope="module")
def kafka_codecs():
    """Make kafka-python's snappy and lz4 work (pyarrow-backed) for the oracle tests."""
    from tests.unit.kafka_python_codecs import pyarrow_backed_kafka_codecs

    with pyarrow_backed_kafka_codecs():
        yield


# -- round trips --------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@SETTINGS
@given(batch=record_lists())
def test_round_trip(codec: Compression, batch: tuple[int, list[Record]]) -> None:
    base, records = batch
    buf = encode_batch(records, base_offset=base, compression=codec)
    decoded = decode_batch(buf)
    assert decoded.records == records
    h = decoded.header
    assert h.size == len(buf)
    assert h.compression == codec
    assert h.base_offset == base
    assert h.record_count == len(records)
    assert h.last_offset == records[-1].offset
    assert h.base_timestamp == min(r.timestamp for r in records)
    assert h.max_timestamp == max(r.timestamp for r in records)


def test_defaults_fill_offsets_and_timestamps() -> None:
    records = [Record(b"a", b"1"), Record(None, b"2", timestamp=5), Record(b"c", None)]
    decoded = decode_batch(encode_batch(records, base_offset=10, base_timestamp=1000))
    assert [(r.offset, r.timestamp) for r in decoded.records] == [(10, 1000), (11, 5), (12, 1000)]
    assert (decoded.header.base_timestamp, decoded.header.max_timestamp) == (5, 1000)


def test_timestamp_defaults_to_now() -> None:
    before = int(time.time() * 1000)
    decoded = decode_batch(encode_batch([Record(b"k", b"v")]))
    after = int(time.time() * 1000)
    assert before <= decoded.records[0].timestamp <= after


def test_producer_fields_and_flags_round_trip() -> None:
    buf = encode_batch(
        [Record(b"k", b"v", timestamp=1)],
        base_offset=7,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=9,
        transactional=True,
        control=True,
    )
    h = decode_batch(buf).header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 3, 17)
    assert h.partition_leader_epoch == 9
    assert h.is_transactional and h.is_control and not h.is_log_append_time
    kp = DefaultRecordBatch(bytearray(buf))
    assert kp.validate_crc()
    assert (kp.producer_id, kp.producer_epoch, kp.base_sequence) == (4242, 3, 17)
    assert kp.is_transactional and kp.is_control_batch


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    records = [Record(b"a", b"1", timestamp=10), Record(b"b", b"2", timestamp=20)]
    buf = bytearray(encode_batch(records, log_append_time=True))
    set_max_timestamp_and_crc(buf, 0, 999)  # what the broker does on append
    decoded = decode_batch(buf)
    assert decoded.header.is_log_append_time
    assert [r.timestamp for r in decoded.records] == [999, 999]
    _batch, theirs = _kafka_python_records(bytes(buf))
    assert [r.timestamp for r in theirs] == [999, 999]


def test_empty_batch_keeps_its_offset_range() -> None:
    buf = encode_batch([], base_offset=100, last_offset_delta=4, base_timestamp=77, producer_id=5)
    decoded = decode_batch(buf)
    assert decoded.records == []
    assert (decoded.header.last_offset, decoded.header.next_offset) == (104, 105)
    assert decoded.header.base_timestamp == 77
    assert decoded.header.producer_id == 5


def test_last_offset_delta_override_covers_gaps() -> None:
    records = [Record(b"a", b"1", offset=3), Record(b"b", b"2", offset=5)]
    decoded = decode_batch(encode_batch(records, base_offset=0, last_offset_delta=9))
    assert decoded.header.last_offset_delta == 9
    assert [r.offset for r in decoded.records] == [3, 5]


def test_xerial_snappy_batch_decodes() -> None:
    records = [Record(b"k%d" % i, b"value " * 50, timestamp=i) for i in range(20)]
    buf = encode_batch(records, compression=Compression.SNAPPY, xerial_snappy=True)
    assert buf[HEADER_SIZE:].startswith(b"\x82SNAPPY\x00")
    assert [r.key for r in decode_batch(buf).records] == [r.key for r in records]


def test_decode_at_a_position_and_iterate() -> None:
    first = encode_batch([Record(b"a", b"1", timestamp=1)], base_offset=0)
    second = encode_batch(
        [Record(b"b", b"2", timestamp=2), Record(b"c", b"3", timestamp=3)],
        base_offset=1,
        compression=Compression.GZIP,
    )
    buf = first + second
    at = decode_batch(buf, len(first))
    assert at.header.position == len(first)
    assert [r.offset for r in at.records] == [1, 2]
    batches = list(iter_batches(memoryview(buf)))
    assert [b.header.base_offset for b in batches] == [0, 1]
    assert [r.value for b in batches for r in b.records] == [b"1", b"2", b"3"]
    assert list(iter_batches(b"")) == []


# -- encode errors ------------------------------------------------------------


def test_empty_batch_needs_last_offset_delta() -> None:
    with pytest.raises(ValueError, match="last_offset_delta"):
        encode_batch([])


def test_offsets_must_increase() -> None:
    with pytest.raises(ValueError, match="record 1 has offset 5: offsets must increase"):
        encode_batch([Record(b"a", b"", offset=5), Record(b"b", b"", offset=5)], base_offset=0)
    with pytest.raises(ValueError, match="record 0 has offset 9"):
        encode_batch([Record(b"a", b"", offset=9)], base_offset=10)


def test_last_offset_delta_must_cover_the_records() -> None:
    with pytest.raises(ValueError, match="last_offset_delta 1 must lie in \\[3"):
        encode_batch([Record(b"a", b"", offset=3)], last_offset_delta=1)


def test_unknown_compression_on_encode() -> None:
    with pytest.raises(UnsupportedCompression):
        encode_batch([Record(b"a", b"")], compression=6)


def test_header_key_must_be_str() -> None:
    with pytest.raises(TypeError, match="header key b'h' is a bytes, expected str"):
        encode_batch([Record(b"a", b"", headers=((b"h", b""),))])  # type: ignore[arg-type]


# -- kafka-python as the oracle ---------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@SETTINGS
@given(batch=record_lists(), producer=st.booleans())
def test_kafka_python_reads_ours(
    kafka_codecs, codec: Compression, batch: tuple[int, list[Record]], producer: bool
) -> None:
    base, records = batch
    pid = (77, 2, 1000) if producer else (-1, -1, -1)
    buf = encode_batch(
        records,
        base_offset=base,
        compression=codec,
        producer_id=pid[0],
        producer_epoch=pid[1],
        base_sequence=pid[2],
        partition_leader_epoch=3,
    )
    theirs, their_records = _kafka_python_records(buf)
    assert their_records == records
    assert theirs.compression_type == codec
    assert theirs.base_offset == base
    assert theirs.last_offset_delta == records[-1].offset - base
    assert theirs.leader_epoch == 3
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == pid


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@SETTINGS
@given(
    entries=st.lists(
        st.tuples(
            st.integers(1, 5),  # offset gap
            st.integers(-1000, 1000),  # timestamp jitter: kafka-python allows negative deltas
            nullable_bytes,
            nullable_bytes,
            headers,
        ),
        min_size=1,
        max_size=12,
    ),
    transactional=st.booleans(),
)
def test_we_read_kafka_python_batches(
    kafka_codecs, codec: Compression, entries: list, transactional: bool
) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=55 if transactional else -1,
        producer_epoch=1 if transactional else -1,
        base_sequence=8 if transactional else -1,
        batch_size=1 << 20,
    )
    expected = []
    offset = -1
    for gap, jitter, key, value, hdrs in entries:
        offset += gap
        ts = 1_700_000_000_000 + jitter
        # A compressible value makes kafka-python actually compress (it falls back otherwise).
        value = None if value is None else value + b"x" * 200
        builder.append(offset, timestamp=ts, key=key, value=value, headers=list(hdrs))
        expected.append(Record(key, value, hdrs, ts, offset))
    buf = bytes(builder.build())
    decoded = decode_batch(buf)
    assert decoded.records == expected
    if any(e[3] is not None for e in entries):  # a 200-byte run: kafka-python compresses
        assert decoded.header.compression == codec
    assert decoded.header.is_transactional == transactional
    assert decoded.header.last_offset_delta == offset


def test_kafka_python_really_compresses_for_the_oracle(kafka_codecs) -> None:
    # Guards the test above: kafka-python falls back to no compression when it does not pay.
    for codec in Compression:
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
        for i in range(10):
            builder.append(i, timestamp=1, key=None, value=b"same value " * 20, headers=[])
        header = decode_batch(bytes(builder.build())).header
        assert header.compression == codec


def test_kafka_python_memory_records_reads_a_run_of_our_batches(kafka_codecs) -> None:
    run = b"".join(
        encode_batch(
            [Record(b"k", b"v%d" % i, timestamp=i, offset=i * 2)],
            base_offset=i * 2,
            compression=codec,
        )
        for i, codec in enumerate(Compression)
    )
    memory = MemoryRecords(run)
    seen = []
    while memory.has_next():
        batch = memory.next_batch()
        assert batch.validate_crc()
        seen.extend((r.offset, r.value) for r in batch)
    assert seen == [(i * 2, b"v%d" % i) for i in range(len(Compression))]
    assert [r.offset for b in iter_batches(run) for r in b.records] == [0, 2, 4, 6, 8]


# -- corruption ---------------------------------------------------------------

SAMPLE = encode_batch(
    [
        Record(b"key", b"value", (("h", b"1"), ("n", None)), timestamp=1000),
        Record(None, b"", timestamp=1001),
    ],
    base_offset=40,
)


def test_every_flipped_bit_in_the_crc_region_is_corrupt() -> None:
    # From the CRC field itself to the end: the stored CRC or the data it covers.
    for index in range(CRC_START - 4, len(SAMPLE)):
        for bit in range(8):
            buf = bytearray(SAMPLE)
            buf[index] ^= 1 << bit
            with pytest.raises(CorruptRecord):
                decode_batch(buf)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_every_truncation_is_corrupt(codec: Compression) -> None:
    full = encode_batch(
        [Record(b"k%d" % i, b"v" * 30, timestamp=i) for i in range(5)], compression=codec
    )
    for cut in range(len(full)):
        for check in (True, False):
            with pytest.raises(CorruptRecord):
                decode_batch(full[:cut], verify_crc=check)
            if cut:
                with pytest.raises(CorruptRecord):
                    list(iter_batches(SAMPLE + full[:cut], verify_crc=check))  # whole batches only


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_wrong_magic_is_invalid(magic: int) -> None:
    buf = bytearray(SAMPLE)
    struct.pack_into(">b", buf, 16, magic)
    with pytest.raises(InvalidRecord, match=f"magic {magic}"):
        decode_batch(buf)


def test_unknown_codec_in_attributes() -> None:
    buf = bytearray(SAMPLE)
    struct.pack_into(">h", buf, 21, 6)
    update_crc(buf)
    with pytest.raises(UnsupportedCompression, match="codec id 6"):
        decode_batch(buf)


def test_rewritten_base_offset_and_leader_epoch_keep_the_crc_valid() -> None:
    buf = bytearray(SAMPLE)
    set_base_offset(buf, 0, 1_000_000)
    set_partition_leader_epoch(buf, 0, 12)
    decoded = decode_batch(buf)  # CRC verified
    assert decoded.header.partition_leader_epoch == 12
    assert [r.offset for r in decoded.records] == [1_000_000, 1_000_001]
    assert DefaultRecordBatch(buf).validate_crc()


@SETTINGS
@given(data=st.data(), codec=st.sampled_from(CODECS))
def test_mutations_without_crc_raise_only_log_errors(data, codec: Compression) -> None:
    """With the CRC check off, arbitrary damage must still end in a LogError."""
    buf = bytearray(
        encode_batch(
            [Record(b"k", b"v" * 20, (("h", b"x"),), timestamp=5), Record(None, None, timestamp=6)],
            compression=codec,
        )
    )
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(CRC_START, len(buf) - 1))
        buf[index] = data.draw(st.integers(0, 255))
    try:
        decoded = decode_batch(buf, verify_crc=False)
    except LogError:
        return
    assert isinstance(decoded, DecodedBatch)


def _batch_with_body(body: bytes, record_count: int, codec: int = 0) -> bytearray:
    """A batch with a valid header and CRC around hand-written record bytes."""
    payload = compress(codec, body)
    header = BatchHeader(
        base_offset=0,
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch=0,
        magic=MAGIC_V2,
        crc=0,
        attributes=codec,
        last_offset_delta=max(record_count - 1, 0),
        base_timestamp=0,
        max_timestamp=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=record_count,
    )
    buf = bytearray(pack_header(header)) + payload
    update_crc(buf)
    assert parse_header(buf).crc != 0
    return buf


def _record(fields: bytes, length: int | None = None) -> bytes:
    return encode_varint(len(fields) if length is None else length) + fields


GOOD_FIELDS = b"\x00" + encode_varlong(0) + encode_varint(0) + b"\x02k" + b"\x02v" + b"\x00"


def test_hand_built_body_decodes() -> None:
    for codec in (0, Compression.ZSTD):
        decoded = decode_batch(_batch_with_body(_record(GOOD_FIELDS) * 2, 2, codec))
        assert [(r.key, r.value) for r in decoded.records] == [(b"k", b"v")] * 2


@pytest.mark.parametrize(
    ("body", "count", "message"),
    [
        (_record(GOOD_FIELDS), 2, "declares 2 records but its data ends after 1"),
        (_record(GOOD_FIELDS) * 2, 1, "2 bytes|trailing garbage after its 1 declared records"),
        (_record(GOOD_FIELDS) + b"\x00", 1, "1 bytes of trailing garbage"),
        (_record(GOOD_FIELDS + b"\x00"), 1, "its length is 9 but its fields take 8 bytes"),
        (_record(GOOD_FIELDS, length=6) + b"\x00", 1, "value length 1 but only 0 bytes remain"),
        (_record(GOOD_FIELDS, length=7) + b"\x00", 1, "ends before its header count"),
        (_record(GOOD_FIELDS, length=40), 1, "its length is 40 but 8 bytes remain"),
        (_record(GOOD_FIELDS, length=-3), 1, "its length is -3"),
        (_record(b"\x00\x00\x00\x03\x02v\x00"), 1, "key length -2, expected -1"),
        (_record(b"\x00\x00\x00\x02k\x05\x00"), 1, "value length -3, expected -1"),
        (_record(b"\x00\x00\x00\x02k\x14v\x00"), 1, "value length 10 but only 2 bytes remain"),
        (_record(b"\x00\x00\x00\x01\x01\x01"), 1, "header count -1"),
        (_record(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 1, "header 0 key length -1"),
        (_record(b"\x00\x00\x00\x01\x01\x02\x02\xff\x01"), 1, "header 0 key is not valid UTF-8"),
        (_record(b"\x00\x00\x00\x01\x01\x02\x00\x03"), 1, "header 0 value length -2"),
        (_record(b"\x00\x00\x00\x01\x01\x04\x00\x01"), 1, "varint at position 9 truncated"),
        (_record(b"\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00"), 1, "longer than 10 bytes"),
        (b"\x0e", 1, "its length is 7 but 0 bytes remain"),
        (b"\x80", 1, "varint at position 0 truncated"),
    ],
)
def test_malformed_records_are_corrupt_with_a_precise_message(
    body: bytes, count: int, message: str
) -> None:
    for codec in (0, Compression.GZIP):
        with pytest.raises(CorruptRecord, match=message):
            decode_batch(_batch_with_body(body, count, codec))


def test_corrupt_compressed_payload_is_corrupt() -> None:
    buf = bytearray(pack_header(BatchHeader(0, 49 + 5, 0, 2, 0, 1, 0, 0, 0, -1, -1, -1, 1)))
    buf += b"hello"
    update_crc(buf)
    with pytest.raises(CorruptRecord, match="gzip"):
        decode_batch(buf)
