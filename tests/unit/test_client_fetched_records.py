"""Decoding fetched partition bytes: skipping, partial batches, control batches."""

from __future__ import annotations

from raftka.client.fetched_records import decode_fetched, whole_batches_end
from raftka.client.records import CREATE_TIME, LOG_APPEND_TIME
from raftka.log.record_batch import Record, encode_batch


def batch(base: int, n: int, **kw: object) -> bytes:
    records = [Record(key=f"k{base + i}".encode(), value=f"v{base + i}".encode(),
                      headers=(("h", b"1"),), timestamp=1000 + i) for i in range(n)]
    return encode_batch(records, base_offset=base, **kw)


def test_records_below_the_fetch_offset_are_skipped() -> None:
    data = batch(10, 5) + batch(15, 5)
    got = decode_fetched("t", 0, data, 13)
    assert [r.offset for r in got.records] == list(range(13, 20))
    assert got.next_offset == 20 and not got.partial_batch
    first = got.records[0]
    assert (first.topic, first.partition, first.key, first.value) == ("t", 0, b"k13", b"v13")
    assert first.headers == (("h", b"1"),) and first.timestamp == 1003
    assert first.timestamp_type == CREATE_TIME


def test_a_whole_batch_below_the_offset_is_skipped() -> None:
    data = batch(0, 5) + batch(5, 2)
    assert [r.offset for r in decode_fetched("t", 0, data, 5).records] == [5, 6]


def test_a_truncated_last_batch_is_left_for_the_next_fetch() -> None:
    second = batch(3, 3)
    data = batch(0, 3) + second[: len(second) - 7]
    assert whole_batches_end(data) == (len(batch(0, 3)), True)
    got = decode_fetched("t", 0, data, 0)
    assert [r.offset for r in got.records] == [0, 1, 2]
    assert got.next_offset == 3 and got.partial_batch


def test_only_a_partial_batch_returns_nothing_and_keeps_the_offset() -> None:
    got = decode_fetched("t", 0, batch(0, 3)[:30], 0)
    assert got.records == [] and got.next_offset == 0 and got.partial_batch


def test_empty_or_null_records() -> None:
    assert decode_fetched("t", 0, None, 4).next_offset == 4
    assert decode_fetched("t", 0, b"", 4).records == []


def test_compacted_gap_advances_past_the_batch_end() -> None:
    records = [Record(key=b"a", value=b"1", timestamp=1, offset=0),
               Record(key=b"b", value=b"2", timestamp=1, offset=2)]
    data = encode_batch(records, base_offset=0, last_offset_delta=4)
    got = decode_fetched("t", 0, data, 0)
    assert [r.offset for r in got.records] == [0, 2] and got.next_offset == 5


def test_control_batches_advance_without_records() -> None:
    control = encode_batch([Record(key=b"\x00\x00\x00\x00", value=b"", timestamp=1)],
                           base_offset=3, control=True, transactional=True,
                           producer_id=1, producer_epoch=0)
    got = decode_fetched("t", 0, batch(0, 3) + control, 0)
    assert [r.offset for r in got.records] == [0, 1, 2] and got.next_offset == 4


def test_log_append_time_and_max_records() -> None:
    data = batch(0, 4, log_append_time=True)
    got = decode_fetched("t", 0, data, 0, max_records=2)
    assert [r.offset for r in got.records] == [0, 1] and got.next_offset == 2
    assert got.records[0].timestamp_type == LOG_APPEND_TIME


def test_compressed_batches_decode() -> None:
    for codec in (1, 2, 3, 4):
        got = decode_fetched("t", 0, batch(0, 3, compression=codec), 1)
        assert [r.value for r in got.records] == [b"v1", b"v2"]
