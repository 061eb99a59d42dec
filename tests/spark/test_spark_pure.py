"""The source's pure parts: option parsing, offset planning, Arrow decoding."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from raftka.log.compression import Compression
from raftka.log.errors import CorruptRecord
from raftka.log.record_batch import Record, encode_batch
from raftka.spark_source.arrow_records import arrow_schema, decode_range
from raftka.spark_source.offset_ranges import (
    OffsetRange,
    cap_offsets,
    from_stream_offset,
    plan_ranges,
    to_stream_offset,
)
from raftka.spark_source.options import OffsetSpec, SourceOptionError, parse_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


# --- options --------------------------------------------------------------------
def test_defaults_and_case_insensitive_keys() -> None:
    opts = parse_options({"Kafka.Bootstrap.Servers": "h:1", "SUBSCRIBE": "a, b"})
    assert opts.subscribe == ("a", "b")
    assert opts.starting is None and opts.ending == OffsetSpec("latest")
    assert opts.fail_on_data_loss and not opts.include_headers


def test_offsets_json_and_timestamps() -> None:
    opts = parse_options({**BASE, "startingOffsets": '{"t":{"1":5,"0":-2}}',
                          "endingOffsets": '{"t":{"0":9,"1":-1}}'})
    assert opts.starting == OffsetSpec("offsets", per_partition=((("t", 0), -2), (("t", 1), 5)))
    assert opts.ending.as_dict() == {("t", 0): 9, ("t", 1): -1}
    # a global timestamp beats per-partition timestamps, which beat offsets
    opts = parse_options({**BASE, "startingOffsets": "latest", "startingTimestamp": "1000",
                          "startingOffsetsByTimestamp": '{"t":{"0":5}}'})
    assert opts.starting == OffsetSpec("timestamp", timestamp=1000)
    opts = parse_options({**BASE, "startingOffsetsByTimestamp": '{"t":{"0":5}}'})
    assert opts.starting == OffsetSpec("timestamps", per_partition=((("t", 0), 5),))


@pytest.mark.parametrize(("extra", "names"), [
    ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "nohostport"}, "kafka.bootstrap.servers"),
    ({"subscribePattern": "x.*"}, "exactly one of"),
    ({"startingOffsets": "first"}, "startingOffsets"),
    ({"startingOffsets": '{"t":{"0":-3}}'}, "startingOffsets"),
    ({"startingOffsets": '{"t":'}, "startingOffsets"),
    ({"endingOffsets": '{"t":{"0":-2}}'}, "endingOffsets"),
    ({"endingOffsets": "earliest"}, "endingOffsets"),
    ({"startingTimestamp": "yesterday"}, "startingTimestamp"),
    ({"minPartitions": "0"}, "minPartitions"),
    ({"maxOffsetsPerTrigger": "lots"}, "maxOffsetsPerTrigger"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"includeHeaders": "1"}, "includeHeaders"),
    ({"kafka.fetch.max.bytes": "-5"}, "kafka.fetch.max.bytes"),
])
def test_bad_options_name_the_option(extra: dict, names: str) -> None:
    with pytest.raises(SourceOptionError, match=names):
        parse_options({**BASE, **extra}, streaming=True)


def test_assign_pattern_and_streaming_rules() -> None:
    opts = parse_options({"kafka.bootstrap.servers": "h:1", "assign": '{"b":[1,0],"a":[2]}'})
    assert opts.assign == (("a", 2), ("b", 0), ("b", 1))
    with pytest.raises(SourceOptionError, match="assign"):
        parse_options({"kafka.bootstrap.servers": "h:1", "assign": '{"b":"0"}'})
    with pytest.raises(SourceOptionError, match="subscribePattern"):
        parse_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("})
    with pytest.raises(SourceOptionError, match="batch reads only"):
        parse_options({**BASE, "endingOffsets": "latest"}, streaming=True)
    assert parse_options({**BASE, "maxOffsetsPerTrigger": "7"},
                         streaming=True).max_offsets_per_trigger == 7


# --- offset planning --------------------------------------------------------------
def test_stream_offsets_have_one_json_form() -> None:
    a = to_stream_offset({("t", 10): 1, ("t", 2): 5, ("a", 0): 3})
    b = to_stream_offset({("a", 0): 3, ("t", 2): 5, ("t", 10): 1})
    assert json.dumps(a) == json.dumps(b) == '{"a": {"0": 3}, "t": {"2": 5, "10": 1}}'
    assert from_stream_offset(json.loads(json.dumps(a))) == {("t", 10): 1, ("t", 2): 5,
                                                             ("a", 0): 3}


def test_plan_ranges_split_without_loss_or_overlap() -> None:
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    end = {("t", 0): 100, ("t", 1): 13, ("t", 2): 5}
    assert plan_ranges(start, end) == [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 10, 13)]
    split = plan_ranges(start, end, min_partitions=8)
    assert len(split) >= 8
    for tp, (lo, hi) in {("t", 0): (0, 100), ("t", 1): (10, 13)}.items():
        mine = sorted((r.start, r.end) for r in split if (r.topic, r.partition) == tp)
        assert mine[0][0] == lo and mine[-1][1] == hi
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False))
        assert all(e > s for s, e in mine)


def test_cap_offsets_never_exceeds_the_limit_and_always_progresses() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    latest = {("t", 0): 1000, ("t", 1): 1, ("t", 2): 50}
    for limit in (1, 2, 3, 7, 500, 1001, 5000):
        end = cap_offsets(start, latest, limit)
        taken = sum(end[tp] - start[tp] for tp in start)
        assert taken == min(limit, 1001)
        assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)


# --- Arrow decoding --------------------------------------------------------------
def _records(n: int, base_ts: int = 1_700_000_000_000) -> list[Record]:
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{i}".encode() * (1 + i % 5)
        value = None if i % 11 == 5 else bytes([i % 256]) * (i % 300)
        headers = () if i % 3 else (("h", str(i).encode()), ("n", None))
        out.append(Record(key, value, headers, base_ts + i * 37))
    return out


def _expected(records: list[Record], base: int, lo: int, hi: int) -> list[dict]:
    return [{"key": r.key, "value": r.value, "topic": "tópico", "partition": 3, "offset": base + i,
             "timestampType": 0,
             "headers": [{"key": k, "value": v} for k, v in r.headers] or None}
            for i, r in enumerate(records) if lo <= base + i < hi]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY,
                                   Compression.LZ4, Compression.ZSTD])
def test_decode_matches_the_records_in_range(codec: Compression) -> None:
    records = _records(600)
    data = b"".join(encode_batch(records[i:i + 200], base_offset=1000 + i, compression=codec)
                    for i in range(0, 600, 200))
    for lo, hi in [(0, 10**9), (1000, 1600), (1150, 1420), (1599, 1600)]:
        got = decode_range("tópico", 3, data, lo, hi, include_headers=True)
        assert got.batch is not None and got.batch.schema == arrow_schema(True)
        rows = got.batch.to_pylist()
        for row in rows:
            ts = row.pop("timestamp")
            assert int(ts.timestamp() * 1000) == 1_700_000_000_000 + (row["offset"] - 1000) * 37
        assert rows == _expected(records, 1000, lo, hi)
        assert got.next_offset >= min(hi, 1600) and not got.partial_batch


def test_log_append_time_partial_batches_and_empty_input() -> None:
    first = encode_batch([Record(b"k", b"v")] * 3, base_offset=0, log_append_time=True,
                         base_timestamp=5)
    second = encode_batch([Record(b"k2", b"v2")], base_offset=3)
    got = decode_range("t", 0, first + second[:30], 1, 100)
    assert got.partial_batch and got.next_offset == 3
    assert got.batch.column("offset").to_pylist() == [1, 2]
    assert got.batch.column("timestampType").to_pylist() == [1, 1]
    assert got.batch.schema == arrow_schema(False)
    assert decode_range("t", 0, b"", 7, 9).next_offset == 7
    assert decode_range("t", 0, first, 3, 9).batch is None


def test_corrupt_batches_raise() -> None:
    good = bytearray(encode_batch([Record(b"k", b"value")] * 4, base_offset=0))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecord, match="CRC"):
        decode_range("t", 0, bytes(bad_crc), 0, 10)
    bad_length = bytearray(good)
    bad_length[61] += 2  # the first record's length varint: one byte longer
    with pytest.raises(CorruptRecord, match="end at byte"):
        decode_range("t", 0, bytes(bad_length), 0, 10, verify_crc=False)
    bad_key = bytearray(good)
    bad_key[61 + 4] = 40  # the first record's key length: 20 bytes, past its record
    with pytest.raises(CorruptRecord, match="key"):
        decode_range("t", 0, bytes(bad_key), 0, 10, verify_crc=False)


def test_schema_matches_what_spark_expects(spark) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    from raftka.spark_source.data_source import HEADERS_DDL, SCHEMA_DDL

    for include, ddl in [(False, SCHEMA_DDL), (True, SCHEMA_DDL + HEADERS_DDL)]:
        spark_schema = StructType.fromDDL(ddl)
        assert to_arrow_schema(spark_schema, timezone="UTC") == arrow_schema(include)
    assert isinstance(arrow_schema(False), pa.Schema)


def test_isolation_level_option() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_options(base).isolation_level == 0  # Spark's default: read_uncommitted
    assert parse_options({**base, "kafka.isolation.level": "read_committed"}).isolation_level == 1
    assert parse_options({**base, "KAFKA.ISOLATION.LEVEL": "READ_UNCOMMITTED"}).isolation_level == 0
    with pytest.raises(SourceOptionError, match="kafka.isolation.level"):
        parse_options({**base, "kafka.isolation.level": "serializable"})


def test_read_committed_ranges_drop_aborted_transactions_and_markers() -> None:
    # The consumer's table (tests/unit/test_fetched_read_committed.py) through the Arrow decoder.
    from tests.unit.test_fetched_read_committed import CASES

    for batches, aborted, fetch, offsets, next_offset in CASES:
        decoded = decode_range("t", 0, b"".join(batches), fetch, 1 << 40, aborted=aborted)
        got = [] if decoded.batch is None else decoded.batch.column("offset").to_pylist()
        assert got == offsets, (aborted, fetch)
        assert decoded.next_offset == next_offset
    # read_uncommitted (no list) keeps the aborted records, never the markers
    batches, _, _, _, _ = CASES[1]
    decoded = decode_range("t", 0, b"".join(batches), 0, 1 << 40)
    assert decoded.batch.column("offset").to_pylist() == [0, 1, 2, 4]
