"""A share consumer's records and acknowledgements on the wire (pure; KIP-932).

A ShareFetch answers, per partition, with record batches and the offset ranges this member
acquired in them (`AcquiredRecords`: first, last, delivery count). Only acquired records are
the member's: `delivered_records` keeps those, with their delivery count, and names what else
of the acquired ranges must be acknowledged without reaching the application:

- an acquired offset inside a whole batch that holds no record for it (a transaction marker,
  a record compaction removed) is a GAP: nothing there to deliver, ever;
- an acquired offset outside every whole batch (the data was cut short) is RELEASEd: it may
  be a record, so it goes back to be delivered again, never thrown away.

Acknowledgements are kept per partition as offset ranges of one type; `acknowledgement_batches`
turns them into the wire's AcknowledgementBatches (adjacent ranges of one type merged, one type
per batch). The offsets come from the broker, so nothing here walks a range offset by offset.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from raftka.client.fetched_records import decode_fetched, whole_batches_end
from raftka.client.records import ConsumerRecord, ShareConsumerRecord
from raftka.log.batch_header import parse_header
from raftka.log.record_batch import Buffer


class AcknowledgeType(IntEnum):
    """How a share consumer settles a record it was given (Kafka's AcknowledgeType)."""

    ACCEPT = 1   # processed: never delivered again
    RELEASE = 2  # give it back: delivered again (to any member), its delivery count rising
    REJECT = 3   # unprocessable: never delivered again (archived)


GAP = 0  # the wire's type for an acquired offset that holds no record


@dataclass(frozen=True, slots=True)
class Acquired:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Delivered:
    records: list[ShareConsumerRecord]
    # (first, last, type) ranges to acknowledge without the application: GAP and RELEASE
    settled: list[tuple[int, int, int]]


def _merged(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def _batch_ranges(records: Buffer) -> list[tuple[int, int]]:
    """The offset ranges the whole batches in `records` cover."""
    view = memoryview(records)
    end, _partial = whole_batches_end(view)
    out, pos = [], 0
    while pos < end:
        header = parse_header(view, pos)
        out.append((header.base_offset, header.base_offset + header.last_offset_delta))
        pos += header.size
    return _merged(out)


def _subtract(first: int, last: int, points: Sequence[int]) -> list[tuple[int, int]]:
    """[first, last] without the (sorted) offsets in `points`, as ranges."""
    out, start = [], first
    for p in points:
        if p < start or p > last:
            continue
        if p > start:
            out.append((start, p - 1))
        start = p + 1
    if start <= last:
        out.append((start, last))
    return out


def delivered_records(topic: str, partition: int, records: Buffer | None, acquired: Sequence[Acquired], *,
                      verify_crc: bool = True) -> Delivered:
    """The acquired records of one ShareFetch partition, and the GAP/RELEASE ranges owed for
    acquired offsets that hold no record here."""
    spans = sorted(acquired, key=lambda a: a.first_offset)
    if not spans:
        return Delivered([], [])
    decoded: list[ConsumerRecord] = []
    covered: list[tuple[int, int]] = []
    if records:
        decoded = decode_fetched(topic, partition, records, spans[0].first_offset, verify_crc=verify_crc).records
        covered = _batch_ranges(records)
    by_offset = {r.offset: r for r in decoded}
    offsets = sorted(by_offset)
    out: list[ShareConsumerRecord] = []
    settled: list[tuple[int, int, int]] = []
    new_record = tuple.__new__
    for span in spans:
        first, last = span.first_offset, span.last_offset
        if last < first:
            continue
        mine = offsets[bisect_left(offsets, first):bisect_right(offsets, last)]
        count = (span.delivery_count,)  # a ConsumerRecord's fields, then the delivery count
        out.extend(new_record(ShareConsumerRecord, by_offset[o] + count) for o in mine)
        uncovered_start = first
        for low, high in covered:
            low, high = max(low, first), min(high, last)
            if low > high:
                continue
            if low > uncovered_start:
                settled.append((uncovered_start, low - 1, AcknowledgeType.RELEASE))
            settled.extend((a, b, GAP) for a, b in _subtract(low, high, mine))
            uncovered_start = high + 1
        if uncovered_start <= last:
            settled.append((uncovered_start, last, AcknowledgeType.RELEASE))
    return Delivered(out, settled)


def acknowledgement_batches(ranges: Iterable[tuple[int, int, int]]) -> list[dict]:
    """AcknowledgementBatches for ShareFetch/ShareAcknowledge: sorted, adjacent ranges of one
    type merged, one type per batch. Overlapping ranges are a caller's bug (ValueError)."""
    out: list[dict] = []
    for first, last, kind in sorted(ranges):
        if out and first <= out[-1]["last_offset"]:
            raise ValueError(f"acknowledgement {first}..{last} overlaps {out[-1]['first_offset']}.."
                             f"{out[-1]['last_offset']}: an offset is acknowledged once")
        if out and first == out[-1]["last_offset"] + 1 and out[-1]["acknowledge_types"] == [int(kind)]:
            out[-1]["last_offset"] = last
        else:
            out.append({"first_offset": first, "last_offset": last, "acknowledge_types": [int(kind)]})
    return out


__all__ = ["AcknowledgeType", "Acquired", "Delivered", "acknowledgement_batches", "delivered_records"]
