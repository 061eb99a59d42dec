"""The producer's per-partition batching core and its partitioners (pure: the
clock is passed in, randomness is injected).

Records for one partition collect in an open batch until it holds
`batch_size` bytes (estimated: the encoded size without compression) or has
waited `linger_ms`; then it is *ready*. The sender drains ready batches
(oldest first, one per partition at a time: a partition with a batch in
flight is *muted* until it is answered, which keeps order under retries).
A retried batch goes back to the front of its partition's queue with a
backoff time.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from raftka.client.partitioner import partition_for_key
from raftka.client.records import TopicPartition
from raftka.log.record_batch import RecordLike

BATCH_OVERHEAD = 61  # RecordBatch v2 header
RECORD_OVERHEAD = 21  # worst-case varints + attributes per record, roughly


def estimate_record_size(key: bytes | None, value: bytes | None,
                         headers: Sequence[tuple[str, bytes | None]] = ()) -> int:
    size = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for hk, hv in headers:
        size += 10 + len(hk.encode()) + (len(hv) if hv else 0)
    return size


@dataclass(eq=False)
class ProducerBatch:
    """Records bound for one partition, sent as one RecordBatch. `futures[i]`
    belongs to `records[i]` (whatever the producer uses to report delivery)."""

    tp: TopicPartition
    created_ms: float
    records: list[RecordLike] = field(default_factory=list)
    futures: list[Any] = field(default_factory=list)
    size: int = BATCH_OVERHEAD
    closed: bool = False  # no more appends (full, or drained)
    attempts: int = 0
    retry_at_ms: float = 0.0
    base_sequence: int = -1  # set on first drain when idempotent
    encoded: bytes | None = None  # cached: a retry resends identical bytes

    def __len__(self) -> int:
        return len(self.records)


@dataclass(frozen=True, slots=True)
class AppendResult:
    batch: ProducerBatch
    batch_full: bool  # the batch takes no more records: wake the sender
    new_batch: bool  # this record opened a new batch


class RecordAccumulator:
    def __init__(self, batch_size: int = 16384, linger_ms: float = 5) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0 bytes, got {batch_size}")
        if linger_ms < 0:
            raise ValueError(f"linger_ms must be >= 0, got {linger_ms}")
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._muted: set[TopicPartition] = set()
        self._flushing = 0

    # --- appending -------------------------------------------------------
    def append(self, tp: TopicPartition, record: RecordLike, future: Any, now_ms: float,
               size: int | None = None) -> AppendResult:
        """Add a record to `tp`'s open batch, opening one if needed."""
        if size is None:
            size = estimate_record_size(record.key, record.value, record.headers)
        queue = self._queues.setdefault(tp, deque())
        batch = queue[-1] if queue and not queue[-1].closed else None
        new = False
        if batch is not None and batch.records and batch.size + size > self.batch_size:
            batch.closed = True
            batch = None
        if batch is None:
            batch = ProducerBatch(tp, now_ms)
            queue.append(batch)
            new = True
        batch.records.append(record)
        batch.futures.append(future)
        batch.size += size
        if batch.size >= self.batch_size:
            batch.closed = True
        return AppendResult(batch, batch.closed, new)

    # --- readiness -------------------------------------------------------
    def begin_flush(self) -> None:
        """Every batch counts as ready until `end_flush` (linger no longer waits)."""
        self._flushing += 1

    def end_flush(self) -> None:
        self._flushing = max(0, self._flushing - 1)

    def ready(self, now_ms: float) -> tuple[list[TopicPartition], float | None]:
        """Partitions whose head batch may be sent now (not muted, full or lingered
        long enough or flushing, past any retry backoff), and the earliest time
        (ms) another one becomes ready, or None if nothing is waiting."""
        ready: list[TopicPartition] = []
        next_ms: float | None = None
        for tp, queue in self._queues.items():
            if not queue or tp in self._muted:
                continue
            head = queue[0]
            if head.attempts:
                when = head.retry_at_ms
            elif head.closed or self._flushing or len(queue) > 1:
                when = now_ms
            else:
                when = head.created_ms + self.linger_ms
            if when <= now_ms:
                ready.append(tp)
            elif next_ms is None or when < next_ms:
                next_ms = when
        return ready, next_ms

    def drain(self, tp: TopicPartition) -> ProducerBatch:
        """Take `tp`'s head batch for sending and mute `tp` until `complete(tp)`."""
        batch = self._queues[tp].popleft()
        batch.closed = True
        self._muted.add(tp)
        return batch

    def complete(self, tp: TopicPartition) -> None:
        """The in-flight batch of `tp` is finished (delivered or failed for good)."""
        self._muted.discard(tp)

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: float) -> None:
        """Put a failed-but-retriable batch back at the front of its queue."""
        batch.retry_at_ms = retry_at_ms
        self._queues.setdefault(batch.tp, deque()).appendleft(batch)
        self._muted.discard(batch.tp)

    # --- inspection ------------------------------------------------------
    def has_unsent(self) -> bool:
        return any(self._queues.values())

    def in_flight(self) -> int:
        return len(self._muted)

    def pending_batches(self) -> list[ProducerBatch]:
        return [b for q in self._queues.values() for b in q]

    def expire_older_than(self, cutoff_ms: float) -> list[ProducerBatch]:
        """Remove and return queued batches created before `cutoff_ms`.

        A queue is in creation order (new batches go to the back; a retried
        batch, older than all, to the front), so only its head needs a look:
        the sender calls this every round, with thousands of batches queued."""
        expired: list[ProducerBatch] = []
        for queue in self._queues.values():
            while queue and queue[0].created_ms < cutoff_ms:
                expired.append(queue.popleft())
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        """Remove and return every unsent batch (on close without flush)."""
        out = self.pending_batches()
        self._queues.clear()
        return out


class StickyPartitioner:
    """Java ≥ 2.4's default: a key picks its partition by murmur2; null-key
    records stick to one partition until a batch for it completes, then move
    to another (randomly chosen, avoiding the current one when possible)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, all_partitions: Sequence[int],
                  available: Sequence[int]) -> int:
        if not all_partitions:
            raise ValueError(f"topic {topic!r} has no partitions")
        if key is not None:
            return partition_for_key(key, len(all_partitions))
        current = self._sticky.get(topic)
        if current is None or current not in all_partitions:
            current = self._pick(available or all_partitions, None)
            self._sticky[topic] = current
        return current

    def batch_completed(self, topic: str, partition: int, available: Sequence[int]) -> None:
        """A batch for `topic`/`partition` filled up or was sent: if null-key
        records were sticking there, move them on."""
        if self._sticky.get(topic) == partition:
            self._sticky[topic] = self._pick(available, partition)

    def _pick(self, candidates: Sequence[int], avoid: int | None) -> int:
        pool = [p for p in candidates if p != avoid] or list(candidates)
        if not pool:
            raise ValueError("no partition to choose from")
        return self._rng.choice(pool)


class SequenceNumbers:
    """Idempotent-producer bookkeeping: the producer id/epoch and the next
    sequence number per partition. A batch gets its base sequence once, on
    first send; retries resend it unchanged so the broker can drop duplicates.
    Sequences wrap at 2**31 as Kafka's do."""

    MAX = (1 << 31) - 1

    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self._next: dict[TopicPartition, int] = {}

    @property
    def initialized(self) -> bool:
        return self.producer_id >= 0

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A new (id, epoch) from InitProducerId: every partition starts over at 0."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._next.clear()

    def assign(self, batch: ProducerBatch) -> int:
        """Give `batch` its base sequence if it has none; return it."""
        if batch.base_sequence < 0:
            start = self._next.get(batch.tp, 0)
            batch.base_sequence = start
            self._next[batch.tp] = (start + len(batch)) & self.MAX
        return batch.base_sequence

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._next.get(tp, 0)

    def reset(self) -> None:
        """Forget the producer id (after UNKNOWN_PRODUCER_ID / OUT_OF_ORDER): a new
        InitProducerId is needed before the next send."""
        self.producer_id = -1
        self.producer_epoch = -1
        self._next.clear()
