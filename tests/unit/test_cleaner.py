"""Compaction: newest record per key, offsets preserved, tombstones expire, output stays valid."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftka.log.batch_header import iter_headers, parse_header
from raftka.log.cleaner import build_offset_map, clean_segment
from raftka.log.record_batch import Record, encode_batch, iter_batches

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
HOUR = 3_600_000


def batch(base_offset: int, pairs, *, ts: int = 1_000, **kwargs) -> bytes:
    """One batch of (key, value) pairs; record i gets timestamp ts + i."""
    records = [Record(key=k, value=v, timestamp=ts + i) for i, (k, v) in enumerate(pairs)]
    return encode_batch(records, base_offset=base_offset, **kwargs)


def compact(
    buf: bytes, *, now_ms: int = 10_000, retention: int = HOUR, safe=None, **kwargs
) -> bytes:
    return clean_segment(
        buf,
        build_offset_map([buf]),
        now_ms=now_ms,
        delete_retention_ms=retention,
        tombstone_safe_before_ms=safe,
        **kwargs,
    )


def survivors(buf: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in iter_batches(buf) for r in b.records]


def headers(buf: bytes):
    return list(iter_headers(buf))  # verifies every CRC


def test_offset_map_is_newest_offset_per_key_across_segments():
    seg1 = batch(0, [(b"a", b"1"), (b"b", b"1"), (None, b"x")]) + batch(3, [(b"a", b"2")])
    seg2 = batch(4, [(b"c", b"1"), (b"b", None)])
    assert build_offset_map([seg1, seg2]) == {b"a": 3, b"b": 5, b"c": 4}


def test_keeps_newest_per_key_and_preserves_offsets():
    buf = (
        batch(0, [(b"a", b"a0"), (b"b", b"b0"), (b"c", b"c0")])
        + batch(3, [(b"a", b"a1"), (b"d", b"d0")])
        + batch(5, [(b"b", b"b1"), (b"a", b"a2")])
    )
    out = compact(buf)
    assert survivors(out) == [
        (2, b"c", b"c0"),
        (4, b"d", b"d0"),
        (5, b"b", b"b1"),
        (6, b"a", b"a2"),
    ]
    # Every surviving batch still spans its original offsets.
    assert [(h.base_offset, h.last_offset_delta) for h in headers(out)] == [(0, 2), (3, 1), (5, 1)]


def test_compacting_across_segments():
    seg1 = batch(0, [(b"a", b"old"), (b"b", b"keep")])
    seg2 = batch(2, [(b"a", b"new")])
    out = clean_segment(
        seg1,
        build_offset_map([seg1, seg2]),
        now_ms=0,
        delete_retention_ms=HOUR,
        tombstone_safe_before_ms=None,
    )
    assert survivors(out) == [(1, b"b", b"keep")]
    assert headers(out)[0].base_offset == 0 and headers(out)[0].last_offset_delta == 1


@pytest.mark.parametrize(
    "codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD], ids=["none", "gzip", "snappy", "lz4", "zstd"]
)
def test_reencoded_batch_keeps_every_batch_field(codec):
    original = batch(
        40,
        [(b"a", b"1" * 50), (b"b", b"2" * 50), (b"a", b"3" * 50), (b"c", b"4" * 50)],
        ts=1_700_000_000_000,
        compression=codec,
        producer_id=77,
        producer_epoch=3,
        base_sequence=120,
        partition_leader_epoch=9,
    )
    out = compact(original)
    before, after = parse_header(original), headers(out)
    assert len(after) == 1
    h = after[0]
    assert out != original
    assert (h.base_offset, h.last_offset_delta, h.last_offset) == (40, 3, 43)
    assert h.compression == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (77, 3, 120, 123)
    assert h.partition_leader_epoch == 9
    assert h.is_log_append_time is False and h.is_transactional is False
    assert h.record_count == 3
    assert h.max_timestamp == before.max_timestamp  # the newest record survived
    [decoded] = list(iter_batches(out))
    assert [(r.offset, r.key, r.timestamp) for r in decoded.records] == [
        (41, b"b", 1_700_000_000_001),
        (42, b"a", 1_700_000_000_002),
        (43, b"c", 1_700_000_000_003),
    ]


def test_log_append_time_and_transactional_flags_survive():
    original = batch(
        0,
        [(b"a", b"1"), (b"a", b"2")],
        ts=5_000,
        log_append_time=True,
        transactional=True,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
    )
    out = compact(original)
    [h] = headers(out)
    assert h.is_log_append_time and h.is_transactional
    assert h.max_timestamp == parse_header(original).max_timestamp
    assert survivors(out) == [(1, b"a", b"2")]


def test_untouched_batches_are_copied_byte_for_byte():
    # Xerial-framed snappy (kafka-python's) would come out raw if it were re-encoded.
    untouched1 = batch(0, [(b"x", b"1"), (b"y", b"1")], compression=SNAPPY, xerial_snappy=True)
    touched = batch(2, [(b"z", b"1"), (b"z", b"2")])
    untouched2 = batch(4, [(b"w", b"1")], compression=ZSTD)
    out = compact(untouched1 + touched + untouched2)
    assert out.startswith(untouched1)
    assert out.endswith(untouched2)
    assert survivors(out) == [(0, b"x", b"1"), (1, b"y", b"1"), (3, b"z", b"2"), (4, b"w", b"1")]


def test_nothing_to_remove_returns_the_input():
    buf = batch(0, [(b"a", b"1")]) + batch(1, [(b"b", b"1")], compression=LZ4)
    assert compact(buf) == buf


def test_compaction_is_idempotent():
    buf = batch(0, [(b"a", b"1"), (b"b", b"1")]) + batch(2, [(b"a", b"2"), (b"c", None)], ts=9_000)
    once = compact(buf, now_ms=9_500, retention=1_000)
    assert compact(once, now_ms=9_500, retention=1_000) == once


def test_tombstones_kept_within_retention_and_dropped_after():
    buf = batch(0, [(b"a", b"1"), (b"b", b"1")], ts=1_000) + batch(2, [(b"a", None)], ts=2_000)
    # Batch max timestamp 2_000; retention 1_000 → expires once now - 1_000 > 2_000.
    assert survivors(compact(buf, now_ms=3_000, retention=1_000)) == [
        (1, b"b", b"1"),
        (2, b"a", None),
    ]
    assert survivors(compact(buf, now_ms=3_001, retention=1_000)) == [(1, b"b", b"1")]


def test_tombstone_age_is_the_batch_max_timestamp():
    # The tombstone itself is old (ts 1_000) but its batch's newest record is not.
    buf = encode_batch(
        [
            Record(key=b"a", value=None, timestamp=1_000),
            Record(key=b"b", value=b"1", timestamp=50_000),
        ],
        base_offset=0,
    )
    assert survivors(compact(buf, now_ms=40_000, retention=1_000)) == [
        (0, b"a", None),
        (1, b"b", b"1"),
    ]
    assert survivors(compact(buf, now_ms=60_000, retention=1_000)) == [(1, b"b", b"1")]


def test_tombstone_safe_before_holds_tombstones_back():
    buf = encode_batch(
        [
            Record(key=b"a", value=None, timestamp=1_000),
            Record(key=b"b", value=None, timestamp=2_000),
        ],
        base_offset=0,
    )
    out = compact(buf, now_ms=100_000, retention=1_000, safe=1_500)
    assert survivors(out) == [(1, b"b", None)]
    assert survivors(compact(buf, now_ms=100_000, retention=1_000, safe=None)) == []


def test_null_keys_are_always_kept():
    buf = batch(0, [(None, b"1"), (b"a", b"1"), (None, b"2"), (b"a", b"2"), (None, None)], ts=1)
    out = compact(buf, now_ms=10 * HOUR)
    assert survivors(out) == [(0, None, b"1"), (2, None, b"2"), (3, b"a", b"2"), (4, None, None)]


def test_emptied_batch_without_producer_is_dropped():
    buf = batch(0, [(b"a", b"1")]) + batch(1, [(b"a", b"2")])
    out = compact(buf)
    assert [h.base_offset for h in headers(out)] == [1]


def test_emptied_batch_that_is_the_producers_newest_stays_empty():
    prod = {"producer_id": 9, "producer_epoch": 2}
    buf = (
        batch(0, [(b"a", b"1")], ts=1_000, base_sequence=0, **prod)
        + batch(1, [(b"b", b"1"), (b"c", b"1")], ts=2_000, base_sequence=1, **prod)
        + batch(3, [(b"a", b"2"), (b"b", b"2"), (b"c", b"2")], ts=3_000)  # no producer
    )
    out = compact(buf)
    hs = headers(out)
    # Offset 0's batch is not the producer's newest: gone. Offset 1's is: kept, empty.
    assert [(h.base_offset, h.last_offset_delta, h.record_count) for h in hs] == [
        (1, 1, 0),
        (3, 2, 3),
    ]
    empty = hs[0]
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.last_sequence) == (
        9,
        2,
        1,
        2,
    )
    assert empty.max_timestamp == 2_001
    assert list(iter_batches(out))[0].records == []
    # With the producer state saying a later batch exists elsewhere, the empty one can go too.
    later = compact(buf, producer_last_offsets={9: 500})
    assert [h.base_offset for h in headers(later)] == [3]


def test_control_batches_are_copied_as_is():
    marker = encode_batch(
        [Record(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x00", timestamp=1_000)],
        base_offset=1,
        producer_id=4,
        producer_epoch=0,
        transactional=True,
        control=True,
    )
    data = batch(
        0,
        [(b"\x00\x00\x00\x00", b"user")],
        producer_id=4,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    buf = data + marker + batch(2, [(b"\x00\x00\x00\x00", b"newer")])
    out = compact(buf)
    # The marker's key is not a user key: it neither compacts nor is compacted.
    assert build_offset_map([buf]) == {b"\x00\x00\x00\x00": 2}
    assert marker in out
    assert [h.base_offset for h in headers(out)] == [1, 2]


def test_corrupt_input_raises_and_names_the_problem():
    buf = bytearray(batch(0, [(b"a", b"1"), (b"a", b"2")]))
    buf[-1] ^= 0xFF
    with pytest.raises(Exception, match="CRC"):
        compact(bytes(buf))


# -- property: compaction preserves the last-write-wins view -----------------------

keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", None])
values = st.one_of(st.none(), st.binary(min_size=0, max_size=8))
batches = st.lists(
    st.tuples(
        st.lists(st.tuples(keys, values), min_size=1, max_size=6),
        st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]),
        st.integers(0, 3),  # gap between batches' timestamps, in seconds
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.integers(0, 30_000), st.integers(0, 10_000))
def test_compaction_equals_last_write_wins(spec, now_offset, retention):
    log = b""
    offset, ts = 0, 0
    expected: dict[bytes, bytes | None] = {}
    tombstone_max_ts: dict[bytes, int] = {}
    null_key_records = []
    for pairs, codec, gap in spec:
        ts += gap * 1_000
        log += batch(offset, pairs, ts=ts, compression=codec)
        batch_max = ts + len(pairs) - 1
        for i, (k, v) in enumerate(pairs):
            if k is None:
                null_key_records.append((offset + i, v))
            else:
                expected[k] = v
                tombstone_max_ts[k] = batch_max
        offset += len(pairs)
    now = now_offset
    horizon = now - retention
    expected = {
        k: v for k, v in expected.items() if not (v is None and tombstone_max_ts[k] < horizon)
    }

    out = clean_segment(
        log,
        build_offset_map([log]),
        now_ms=now,
        delete_retention_ms=retention,
        tombstone_safe_before_ms=None,
    )
    got: dict[bytes, bytes | None] = {}
    got_null = []
    last = -1
    for decoded in iter_batches(out):  # CRCs verified
        assert decoded.header.base_offset > last
        for r in decoded.records:
            assert r.offset > last
            last = r.offset
            if r.key is None:
                got_null.append((r.offset, r.value))
            else:
                assert r.key not in got, f"key {r.key!r} survived twice"
                got[r.key] = r.value
        last = max(last, decoded.header.last_offset)
    assert got == expected
    assert got_null == null_key_records
    assert last <= offset - 1
