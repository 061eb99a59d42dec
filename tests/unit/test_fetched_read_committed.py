"""read_committed filtering in client/fetched_records.decode_fetched (Kafka's client rules)."""

from __future__ import annotations

import struct

import pytest

from raftka.client.fetched_records import decode_fetched
from raftka.log.record_batch import Record, encode_batch


def data(offset: int, pid: int = -1, n: int = 1, txn: bool = False) -> bytes:
    return encode_batch([Record(None, b"v%d" % (offset + i)) for i in range(n)],
                        base_offset=offset, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                        base_sequence=0 if pid >= 0 else -1, transactional=txn)


def marker(offset: int, pid: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    return encode_batch([Record(key, struct.pack(">hi", 0, 0))], base_offset=offset,
                        producer_id=pid, producer_epoch=0, transactional=True, control=True)


# (log, aborted list, fetch offset, offsets returned, next offset)
CASES = [
    # committed txn of pid 1: its records show, the marker does not
    ([data(0, 1, 2, True), marker(2, 1, True)], [], 0, [0, 1], 3),
    # aborted txn of pid 1 next to a plain record
    ([data(0, 1, 2, True), data(2), marker(3, 1, False), data(4)], [(1, 0)], 0, [2, 4], 5),
    # two producers interleaved, only pid 2 aborted
    ([data(0, 1, 1, True), data(1, 2, 1, True), data(2, 1, 1, True), marker(3, 2, False),
      marker(4, 1, True)], [(2, 1)], 0, [0, 2], 5),
    # pid 1 aborts then commits: after its ABORT marker it is visible again
    ([data(0, 1, 1, True), marker(1, 1, False), data(2, 1, 1, True), marker(3, 1, True)],
     [(1, 0)], 0, [2], 4),
    # the aborted txn started before the fetch offset (listed by the broker: last >= fetch)
    ([data(0, 1, 2, True), data(2, 1, 1, True), marker(3, 1, False), data(4)],
     [(1, 0)], 2, [4], 5),
    # an idempotent (non-transactional) batch of an aborting pid is not skipped
    ([data(0, 1, 1, True), data(1, 1, 1, False), marker(2, 1, False)], [(1, 0)], 0, [1], 3),
    # a first offset not yet reached does not hide earlier batches of the pid
    ([data(0, 1, 1, True), marker(1, 1, True), data(2, 1, 1, True), marker(3, 1, False)],
     [(1, 2)], 0, [0], 4),
]


@pytest.mark.parametrize("batches,aborted,fetch,offsets,next_offset", CASES)
def test_read_committed(batches: list[bytes], aborted: list[tuple[int, int]], fetch: int,
                        offsets: list[int], next_offset: int) -> None:
    got = decode_fetched("t", 0, b"".join(batches), fetch, aborted=aborted)
    assert [r.offset for r in got.records] == offsets
    assert got.next_offset == next_offset


def test_read_uncommitted_returns_aborted_data_but_never_markers() -> None:
    log = b"".join([data(0, 1, 2, True), marker(2, 1, False), data(3)])
    got = decode_fetched("t", 0, log, 0)
    assert [r.offset for r in got.records] == [0, 1, 3] and got.next_offset == 4


def test_only_markers_advance_the_position() -> None:
    got = decode_fetched("t", 0, marker(5, 1, True), 5, aborted=[])
    assert got.records == [] and got.next_offset == 6
