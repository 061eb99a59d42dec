"""Turn a partition's fetched bytes into ConsumerRecords (pure).

A fetch answers with whole batches starting at the batch that *contains* the
requested offset, so records below it are skipped here. The last batch may
be cut short by the size limits (Kafka allows that); it is ignored and
fetched again next time. Control batches (transaction markers) are skipped
but still advance the position.

Under read_committed (`aborted` given: the Fetch response's aborted_transactions)
a producer's transactional batches are dropped from the first offset of one of
its aborted transactions until its ABORT marker, as Kafka's clients do: the
list is sorted by first offset, a producer id joins the aborted set once a
batch's last offset reaches that first offset, and leaves it at its ABORT
marker.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from raftka.client.records import CREATE_TIME, LOG_APPEND_TIME, ConsumerRecord
from raftka.log.batch_header import LOG_OVERHEAD, BatchHeader, parse_header
from raftka.log.record_batch import Buffer, decode_batch

_BATCH_LENGTH = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_ABORT, CONTROL_COMMIT = 0, 1


class AbortedFilter:
    """read_committed's rule over one fetched partition, batch by batch (Kafka's clients):
    `aborted` is the Fetch response's aborted_transactions as (producer_id, first_offset).
    Shared by the consumer and the Spark source."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda e: e[1], reverse=True)
        self._aborting: set[int] = set()

    def skip(self, header: BatchHeader, is_abort_marker: Callable[[], bool]) -> bool:
        """True if the batch's records must not be returned (an aborted transaction's data).
        Control batches are never returned either; `is_abort_marker()` is asked only for a
        control batch of a producer in an aborted transaction."""
        pid = header.producer_id
        if pid < 0:
            return False
        last = header.base_offset + header.last_offset_delta
        pending = self._pending
        while pending and pending[-1][1] <= last:
            self._aborting.add(pending.pop()[0])
        if pid not in self._aborting:
            return False
        if header.is_control:
            if is_abort_marker():
                self._aborting.discard(pid)
            return False  # the caller skips control batches anyway
        return header.is_transactional


def control_type(key: bytes | None) -> int | None:
    """The marker type of a control record's key (0 ABORT, 1 COMMIT), None if malformed."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    return _CONTROL_KEY.unpack_from(key)[1]


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    records: list[ConsumerRecord]
    next_offset: int  # where the next fetch should start
    partial_batch: bool  # a truncated batch was left at the end


def whole_batches_end(buf: Buffer) -> tuple[int, bool]:
    """The length of the prefix of `buf` made of whole batches, and whether a
    truncated one follows."""
    pos, end = 0, len(buf)
    while pos + LOG_OVERHEAD <= end:
        (length,) = _BATCH_LENGTH.unpack_from(buf, pos + 8)
        size = LOG_OVERHEAD + length
        if length < 0 or pos + size > end:
            return pos, True
        pos += size
    return pos, pos != end


def decode_fetched(topic: str, partition: int, records: Buffer | None, fetch_offset: int,
                   *, max_records: int | None = None, verify_crc: bool = True,
                   aborted: Iterable[tuple[int, int]] | None = None) -> FetchedRecords:
    """Records at or after `fetch_offset` in `records` (the Fetch response's
    bytes for one partition), at most `max_records` of them. `next_offset` is
    one past the last record returned, or past the last whole batch when every
    record was returned (a compacted batch may end after its last record).
    `aborted` = [(producer_id, first_offset), ...] turns on read_committed filtering."""
    if not records:
        return FetchedRecords([], fetch_offset, False)
    view = memoryview(records)
    end, partial = whole_batches_end(view)
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    pos = 0
    new_record = tuple.__new__
    committed = AbortedFilter(aborted) if aborted is not None else None
    while pos < end:
        ts_type = LOG_APPEND_TIME if parse_header(view, pos).is_log_append_time else CREATE_TIME

        # Built straight from the decoded fields: one tuple per record, no Record in between.
        def make(key, value, headers, timestamp, offset, ts_type=ts_type):
            return new_record(ConsumerRecord, (topic, partition, offset, timestamp, ts_type, key, value, headers))

        batch = decode_batch(view, pos, verify_crc=verify_crc, make_record=make)
        header = batch.header
        pos += header.size
        batch_next = header.base_offset + header.last_offset_delta + 1
        if committed is not None and committed.skip(
                header, lambda b=batch: any(control_type(r.key) == CONTROL_ABORT for r in b.records)):
            next_offset = max(next_offset, batch_next)
            continue
        if header.is_control or batch_next <= fetch_offset:
            next_offset = max(next_offset, batch_next)
            continue
        decoded = batch.records
        if decoded and decoded[0].offset < fetch_offset:  # the batch holding fetch_offset
            decoded = [r for r in decoded if r.offset >= fetch_offset]
        if max_records is not None and len(decoded) > max_records - len(out):
            taken = decoded[: max_records - len(out)]
            out.extend(taken)
            if taken:
                next_offset = taken[-1].offset + 1
            return FetchedRecords(out, next_offset, partial)
        out.extend(decoded)
        if decoded:
            next_offset = decoded[-1].offset + 1
        next_offset = max(next_offset, batch_next)
    return FetchedRecords(out, next_offset, partial)
