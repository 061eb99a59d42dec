"""DescribeShareGroupOffsets v1's Lag (KIP-1226) as Kafka 4.4 computes it: the pure pieces,
the delivery complete count a share partition's leader writes and the lag from it."""

from __future__ import annotations

import pytest

from raftka.broker.group.share_partition_state import PersistedBatch, RecordState
from raftka.broker.group.share_persister import delivery_complete_count, lag_wanted, share_lag

AV, AQ, ACK, ARC = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


@pytest.mark.parametrize(("start", "batches", "complete"), [
    (0, (), 0),
    (0, ((0, 4, AV, 1),), 0),                                # delivered, not acknowledged
    (0, ((0, 4, ACK, 1),), 5),
    (0, ((0, 1, ACK, 1), (2, 2, AV, 2), (3, 5, ARC, 5)), 5),  # acknowledged and archived (gaps too) count
    (0, ((0, 9, AQ, 1),), 0),
    (3, ((0, 5, ACK, 1),), 3),                               # only offsets at or past the start offset
    (7, ((0, 5, ACK, 1), (6, 6, AV, 1)), 0),
])
def test_delivery_complete_count(start: int, batches: tuple, complete: int) -> None:
    assert delivery_complete_count(start, tuple(PersistedBatch(*b) for b in batches)) == complete


@pytest.mark.parametrize(("start", "complete", "end", "lag"), [
    (0, 0, 6, 6),       # nothing delivered yet
    (0, 6, 6, 0),       # every record accepted, start offset not moved yet (Kafka's lazy start offset)
    (6, 0, 6, 0),       # start offset moved past them
    (2, 1, 10, 7),
    (5, 0, 0, -5),      # an altered start offset past the end: Kafka does not clamp
    (-1, 0, 6, -1),     # uninitialized: unknown
    (0, -1, 6, -1),     # no delivery complete count (written by an older leader): unknown
])
def test_share_lag(start: int, complete: int, end: int, lag: int) -> None:
    assert share_lag(start, complete, end) == lag
    assert lag_wanted(start, complete) == (lag != -1)
