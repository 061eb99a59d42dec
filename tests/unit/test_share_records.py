"""A share consumer's records and acknowledgements (client/share_records.py): which fetched records
are this member's, what it owes for acquired offsets holding no record, and the wire batches."""

from __future__ import annotations

import pytest

from raftka.client.share_consumer import MAX_EPOCH, next_epoch
from raftka.client.share_records import (
    GAP,
    AcknowledgeType,
    Acquired,
    acknowledgement_batches,
    delivered_records,
)
from raftka.log.record_batch import Record, encode_batch

ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


def batch(base: int, offsets: list[int], **kw: object) -> bytes:
    records = [Record(key=None, value=f"v{o}".encode(), offset=o, timestamp=1000) for o in offsets]
    return encode_batch(records, base_offset=base, **kw)


def offsets_and_counts(delivered) -> list[tuple[int, int]]:
    return [(r.offset, r.delivery_count) for r in delivered.records]


@pytest.mark.parametrize(("data", "acquired", "records", "settled"), [
    # Only acquired records are the member's, each with its range's delivery count.
    (batch(0, list(range(10))), [Acquired(2, 4, 1), Acquired(7, 7, 3)],
     [(2, 1), (3, 1), (4, 1), (7, 3)], []),
    # Offsets a batch covers but holds no record for (compaction) are gaps.
    (batch(0, [0, 3, 4], last_offset_delta=6), [Acquired(0, 6, 1)],
     [(0, 1), (3, 1), (4, 1)], [(1, 2, GAP), (5, 6, GAP)]),
    # A transaction marker is never delivered: a gap.
    (batch(0, [0, 1], producer_id=7, producer_epoch=0, transactional=True)
     + encode_batch([Record(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")], base_offset=2,
                    producer_id=7, producer_epoch=0, transactional=True, control=True),
     [Acquired(0, 2, 1)], [(0, 1), (1, 1)], [(2, 2, GAP)]),
    # Acquired offsets the data does not reach go back (RELEASE): they may be records.
    (batch(0, [0, 1]), [Acquired(0, 4, 2)], [(0, 2), (1, 2)], [(2, 4, RELEASE)]),
    # No data at all: the whole range is released, never gapped.
    (None, [Acquired(5, 9, 1)], [], [(5, 9, RELEASE)]),
    # Nothing acquired: nothing is the member's, whatever came.
    (batch(0, [0, 1]), [], [], []),
])
def test_delivered_records_and_what_is_owed_for_the_rest(data, acquired, records, settled) -> None:
    got = delivered_records("t", 0, data, acquired)
    assert offsets_and_counts(got) == records
    assert got.settled == settled
    assert all(r.topic == "t" and r.partition == 0 for r in got.records)


def test_a_huge_acquired_range_is_settled_as_ranges_not_offset_by_offset() -> None:
    got = delivered_records("t", 0, batch(10, [10]), [Acquired(0, 1 << 60, 1)])
    assert offsets_and_counts(got) == [(10, 1)]
    assert got.settled == [(0, 9, RELEASE), (11, 1 << 60, RELEASE)]


@pytest.mark.parametrize(("ranges", "batches"), [
    ([], []),
    ([(5, 5, ACCEPT), (3, 3, ACCEPT), (4, 4, ACCEPT)], [(3, 5, [1])]),
    ([(0, 0, ACCEPT), (1, 1, RELEASE), (2, 2, RELEASE), (4, 4, REJECT)], [(0, 0, [1]), (1, 2, [2]), (4, 4, [3])]),
    ([(0, 9, GAP), (10, 10, ACCEPT)], [(0, 9, [0]), (10, 10, [1])]),
])
def test_acknowledgement_batches_merge_adjacent_ranges_of_one_type(ranges, batches) -> None:
    assert [(b["first_offset"], b["last_offset"], b["acknowledge_types"])
            for b in acknowledgement_batches(ranges)] == batches


def test_an_offset_acknowledged_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="acknowledged once"):
        acknowledgement_batches([(0, 5, ACCEPT), (5, 5, RELEASE)])


def test_the_share_session_epoch_wraps_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(MAX_EPOCH) == 1
