"""The producer's pure cores: accumulator, sticky partitioner, sequence numbers."""

from __future__ import annotations

import random

import pytest

from raftka.client.accumulator import (
    BATCH_OVERHEAD,
    RecordAccumulator,
    SequenceNumbers,
    StickyPartitioner,
    estimate_record_size,
)
from raftka.client.partitioner import partition_for_key
from raftka.client.records import TopicPartition
from raftka.log.record_batch import Record

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def rec(n: int = 10) -> Record:
    return Record(key=None, value=b"x" * n, timestamp=1)


def test_linger_holds_a_batch_until_its_deadline() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=5)
    result = acc.append(TP0, rec(), "f", now_ms=100)
    assert result.new_batch and not result.batch_full
    assert acc.ready(now_ms=104) == ([], 105)
    assert acc.ready(now_ms=105) == ([TP0], None)


def test_linger_zero_is_ready_at_once() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=0)
    acc.append(TP0, rec(), "f", now_ms=7)
    assert acc.ready(now_ms=7)[0] == [TP0]


def test_batch_size_closes_a_batch_and_opens_the_next() -> None:
    size = estimate_record_size(None, b"x" * 10)
    acc = RecordAccumulator(batch_size=BATCH_OVERHEAD + 2 * size, linger_ms=1000)
    first = acc.append(TP0, rec(), "a", now_ms=0)
    second = acc.append(TP0, rec(), "b", now_ms=0)
    assert not first.batch_full and second.batch_full and second.batch is first.batch
    third = acc.append(TP0, rec(), "c", now_ms=0)
    assert third.new_batch and third.batch is not first.batch
    # The full batch is ready long before linger; the new one is not.
    assert acc.ready(now_ms=1)[0] == [TP0]
    batch = acc.drain(TP0)
    assert batch.futures == ["a", "b"] and len(batch) == 2
    # Muted while in flight: the next batch waits even once it is due.
    assert acc.ready(now_ms=5000)[0] == []
    acc.complete(TP0)
    assert acc.drain(TP0).futures == ["c"]


def test_an_oversized_record_gets_a_batch_of_its_own() -> None:
    acc = RecordAccumulator(batch_size=100, linger_ms=1000)
    acc.append(TP0, rec(5), "small", now_ms=0)
    big = acc.append(TP0, rec(500), "big", now_ms=0)
    assert big.new_batch and big.batch_full and big.batch.futures == ["big"]


def test_partitions_batch_independently() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=10)
    acc.append(TP0, rec(), "a", now_ms=0)
    acc.append(TP1, rec(), "b", now_ms=5)
    ready, next_ms = acc.ready(now_ms=10)
    assert ready == [TP0] and next_ms == 15
    assert acc.drain(TP0).futures == ["a"]
    assert acc.ready(now_ms=15)[0] == [TP1]


def test_flush_makes_lingering_batches_ready() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=10_000)
    acc.append(TP0, rec(), "a", now_ms=0)
    assert acc.ready(now_ms=1)[0] == []
    acc.begin_flush()
    assert acc.ready(now_ms=1)[0] == [TP0]
    acc.end_flush()
    assert acc.ready(now_ms=1)[0] == []


def test_a_retried_batch_goes_first_after_its_backoff() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=0)
    acc.append(TP0, rec(), "a", now_ms=0)
    first = acc.drain(TP0)
    acc.append(TP0, rec(), "b", now_ms=1)
    first.attempts = 1
    acc.reenqueue(first, retry_at_ms=100)
    assert acc.ready(now_ms=50) == ([], 100)
    assert acc.ready(now_ms=100)[0] == [TP0]
    assert acc.drain(TP0) is first


def test_expiry_removes_only_old_batches() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=0)
    acc.append(TP0, rec(), "old", now_ms=0)
    acc.append(TP1, rec(), "new", now_ms=500)
    expired = acc.expire_older_than(100)
    assert [b.futures for b in expired] == [["old"]]
    assert [b.futures for b in acc.pending_batches()] == [["new"]]


def test_invalid_settings_are_rejected_with_the_value() -> None:
    with pytest.raises(ValueError, match="batch_size must be > 0 bytes, got 0"):
        RecordAccumulator(batch_size=0)
    with pytest.raises(ValueError, match="linger_ms must be >= 0, got -1"):
        RecordAccumulator(linger_ms=-1)


def test_keyed_records_use_murmur2() -> None:
    sticky = StickyPartitioner(random.Random(1))
    for key in (b"21", b"foobar", b"abc", b"k-17"):
        assert sticky.partition("t", key, range(7), range(7)) == partition_for_key(key, 7)


def test_null_keys_stick_until_a_batch_completes() -> None:
    sticky = StickyPartitioner(random.Random(42))
    first = sticky.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3])
    assert all(sticky.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3]) == first
               for _ in range(20))
    sticky.batch_completed("t", (first + 1) % 4, [0, 1, 2, 3])  # another partition: no move
    assert sticky.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3]) == first
    sticky.batch_completed("t", first, [0, 1, 2, 3])
    second = sticky.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3])
    assert second != first


def test_sticky_prefers_partitions_with_a_leader() -> None:
    sticky = StickyPartitioner(random.Random(3))
    for _ in range(10):
        sticky.batch_completed("t", sticky.partition("t", None, [0, 1, 2], [2]), [2])
        assert sticky.partition("t", None, [0, 1, 2], [2]) == 2


def test_sequence_numbers_advance_per_partition_and_survive_retries() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=0)
    seq = SequenceNumbers()
    seq.set_producer(7, 0)
    for i in range(3):
        acc.append(TP0, rec(), i, now_ms=0)
    acc.append(TP1, rec(), "x", now_ms=0)
    b0 = acc.drain(TP0)
    b1 = acc.drain(TP1)
    assert seq.assign(b0) == 0 and seq.assign(b1) == 0
    assert seq.assign(b0) == 0  # a retry keeps its sequence
    assert seq.next_sequence(TP0) == 3 and seq.next_sequence(TP1) == 1
    acc.complete(TP0)
    acc.append(TP0, rec(), "y", now_ms=0)
    assert seq.assign(acc.drain(TP0)) == 3


def test_sequence_numbers_wrap_and_reset() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=0)
    seq = SequenceNumbers()
    seq.set_producer(1, 0)
    seq._next[TP0] = SequenceNumbers.MAX  # just below the wrap
    acc.append(TP0, rec(), "a", now_ms=0)
    acc.append(TP0, rec(), "b", now_ms=0)
    assert seq.assign(acc.drain(TP0)) == SequenceNumbers.MAX
    assert seq.next_sequence(TP0) == 1
    seq.set_producer(2, 0)
    assert seq.next_sequence(TP0) == 0
    seq.reset()
    assert not seq.initialized
