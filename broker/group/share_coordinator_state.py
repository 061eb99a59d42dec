"""The share coordinator's state (KIP-932, Kafka's `ShareCoordinatorShard`), with no I/O.

One `__share_group_state` partition holds the state of every share partition whose key
(`"<group>:<topic id>:<partition>"`) hashes to it. This is that state, rebuilt by replaying
the partition's records, and the decisions the state APIs make on it: each call returns
the records to write (the caller appends them with acks=all, then `replay`s them) and the
answer. It reads no clock (the caller passes `now_ms`) and no metadata (the caller passes
how many partitions the topic has, None when the topic does not exist).

Records (Kafka's coordinator JSON, one key type each; broker/group/share_coordinator_records.py
encodes them)::

    ShareSnapshot (type 0)  the whole state: snapshot epoch, state epoch, leader epoch,
                            start offset, delivery-complete count, timestamps, batches.
                            A null value (tombstone) deletes the share partition's state.
    ShareUpdate   (type 1)  a delta on the last snapshot: leader epoch, start offset (-1: same)
                            and the batches written; no state epoch.

What each call writes:

- `initialize`: a snapshot with no batches, the new state epoch and start offset (-1: none
  yet), leader epoch 0; FENCED_STATE_EPOCH for an older state epoch than recorded.
- `write`: an update record, or a snapshot once `snapshot_every` updates
  (`share.coordinator.snapshot.update.records.per.snapshot`, 500) followed the last one.
  The start offset never moves back (the larger of the request's and the state's), the
  leader epoch is not taken from a write, and batches are merged into the state's by
  `combine_batches`. A write to an uninitialized share partition is INVALID_REQUEST; an
  older leader epoch than recorded FENCED_LEADER_EPOCH, an older state epoch FENCED_STATE_EPOCH.
- `read`: the state; a newer leader epoch than recorded is written first (an update record
  with no batches), an older one is FENCED_LEADER_EPOCH; reading an uninitialized share
  partition is INVALID_REQUEST (`READ_UNINITIALIZED`).
- `read_summary`: start offset and epochs; an uninitialized one answers start offset -1,
  state and leader epoch 0 (Kafka's `toResponseData(.., -1, -1, 0, 0)`), with no error.
- `delete`: a tombstone, or nothing when there is no state.
- `cleanup_topics`: tombstones for the share partitions of deleted topics.

Every call checks, in Kafka's order: a negative partition (and epochs where given) is
INVALID_REQUEST, then the epochs, then an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace

from raftka.broker.group.share_persister import ShareStateKey
from raftka.client.protocol import ErrorCode

SNAPSHOT, UPDATE = 0, 1  # the record types (key versions)
UNINITIALIZED_START_OFFSET = -1
NO_DELIVERY_COMPLETE_COUNT = -1
SNAPSHOT_EVERY_DEFAULT = 500  # share.coordinator.snapshot.update.records.per.snapshot (0..500)

INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
FENCED_LEADER_EPOCH = int(ErrorCode.FENCED_LEADER_EPOCH)
FENCED_STATE_EPOCH = int(ErrorCode.FENCED_STATE_EPOCH)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

# Kafka's messages, word for word: the persister tells "never initialized" by this one.
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."


@dataclass(frozen=True, slots=True)
class StateBatch:
    """One StateBatches entry: offsets first..last in one delivery state and count. The state
    byte is kept as sent (0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED in Kafka's use)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """One share partition's state (Kafka's `ShareGroupOffset`)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT
    batches: tuple[StateBatch, ...] = ()
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ShareRecord:
    """A record of `__share_group_state`: a snapshot (value None: tombstone) or an update."""

    kind: int
    key: ShareStateKey
    value: ShareGroupOffset | None


@dataclass(frozen=True, slots=True)
class Answer:
    """What a call decided: the records to write first, then the error (0) and message, and
    for reads the state."""

    error: int = 0
    message: str | None = None
    records: tuple[ShareRecord, ...] = ()
    state: ShareGroupOffset | None = None


def combine_batches(so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int,
                    ) -> tuple[StateBatch, ...]:
    """Kafka's `PersisterStateBatchCombiner`: drop what ends before `start_offset` (-1: keep
    all) and cut what starts before it; where batches overlap, the one with the higher
    delivery count wins, then the higher state; adjacent runs of the same state and count
    merge. The result is sorted and disjoint."""
    pruned: list[StateBatch] = []
    for batch in (*so_far, *new):
        if start_offset != -1 and batch.last_offset < start_offset:
            continue
        if start_offset != -1 and batch.first_offset < start_offset:
            batch = replace(batch, first_offset=start_offset)
        pruned.append(batch)
    if len(pruned) <= 1:
        return tuple(pruned)
    # A sweep over begin/end events; at each offset the highest-priority open batch wins.
    events = [(b.first_offset, 1, b.delivery_count, b.delivery_state) for b in pruned]
    events += [(b.last_offset + 1, 0, b.delivery_count, b.delivery_state) for b in pruned]
    events.sort(key=lambda e: (e[0], e[1]))  # at one offset, ends before begins (Kafka's order)
    active: dict[tuple[int, int], int] = {}
    heap: list[tuple[int, int]] = []  # (-count, -state), lazily cleaned
    out: list[StateBatch] = []
    open_from, winner = -1, None
    i = 0
    while i < len(events):
        offset = events[i][0]
        if winner is not None and offset > open_from:
            _append_coalesced(out, open_from, offset - 1, winner)
        while i < len(events) and events[i][0] == offset:
            _, begin, count, state = events[i]
            i += 1
            priority = (count, state)
            if begin:
                if not active.get(priority):
                    heapq.heappush(heap, (-count, -state))
                active[priority] = active.get(priority, 0) + 1
            else:
                active[priority] -= 1
        while heap and not active.get((-heap[0][0], -heap[0][1])):
            heapq.heappop(heap)
        winner = (-heap[0][0], -heap[0][1]) if heap else None
        open_from = offset
    return tuple(out)


def _append_coalesced(out: list[StateBatch], first: int, last: int, winner: tuple[int, int]) -> None:
    count, state = winner
    if out:
        tail = out[-1]
        if tail.last_offset + 1 == first and (tail.delivery_state, tail.delivery_count) == (state, count):
            out[-1] = replace(tail, last_offset=last)
            return
    out.append(StateBatch(first, last, state, count))


class ShareCoordinatorState:
    """The share partitions of one `__share_group_state` partition (see the module docstring)."""

    def __init__(self, snapshot_every: int = SNAPSHOT_EVERY_DEFAULT) -> None:
        self.snapshot_every = snapshot_every
        self.offsets: dict[ShareStateKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[ShareStateKey, int] = {}
        self.state_epochs: dict[ShareStateKey, int] = {}
        self.update_counts: dict[ShareStateKey, int] = {}  # updates since the last snapshot

    # -- replay ------------------------------------------------------------------------------

    def replay(self, record: ShareRecord) -> None:
        """Apply one record (from the log at load, or just written). Never raises."""
        key, value = record.key, record.value
        if record.kind == SNAPSHOT:
            if value is None:
                for table in (self.offsets, self.leader_epochs, self.state_epochs, self.update_counts):
                    table.pop(key, None)
                return
            self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
            self._raise_epoch(self.state_epochs, key, value.state_epoch)
            self.offsets[key] = value
            if key in self.update_counts and self.update_counts[key] >= self.snapshot_every:
                self.update_counts[key] = 0
        elif record.kind == UPDATE and value is not None:
            self._raise_epoch(self.leader_epochs, key, value.leader_epoch)
            current = self.offsets.get(key)
            self.offsets[key] = value if current is None else _merge(current, value)
            self.update_counts[key] = self.update_counts.get(key, 0) + 1

    @staticmethod
    def _raise_epoch(table: dict[ShareStateKey, int], key: ShareStateKey, epoch: int) -> None:
        if epoch > table.get(key, epoch - 1):
            table[key] = epoch

    # -- the state APIs ----------------------------------------------------------------------

    def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int, now_ms: int,
                   partitions: int | None) -> Answer:
        """InitializeShareGroupState for one share partition."""
        if key.partition < 0:
            return Answer(INVALID_REQUEST, "The partition id cannot be a negative number.")
        if state_epoch < 0:
            return Answer(INVALID_REQUEST, "The state epoch cannot be a negative number.")
        recorded = self.state_epochs.get(key)
        if recorded is not None and recorded > state_epoch:
            return Answer(FENCED_STATE_EPOCH, f"state epoch {state_epoch} is older than the recorded {recorded}")
        unknown = _unknown_partition(key, partitions)
        if unknown:
            return unknown
        current = self.offsets.get(key)
        value = ShareGroupOffset(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1, state_epoch=state_epoch,
            leader_epoch=0, start_offset=start_offset,
            delivery_complete_count=NO_DELIVERY_COMPLETE_COUNT if start_offset == -1 else 0,
            create_timestamp=now_ms, write_timestamp=now_ms)
        return Answer(records=(ShareRecord(SNAPSHOT, key, value),))

    def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: tuple[StateBatch, ...], now_ms: int, partitions: int | None,
              delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT) -> Answer:
        """WriteShareGroupState for one share partition."""
        if key.partition < 0:
            return Answer(INVALID_REQUEST, "The partition id cannot be a negative number.")
        if leader_epoch < 0:
            return Answer(INVALID_REQUEST, "The leader epoch cannot be a negative number.")
        if state_epoch < 0:
            return Answer(INVALID_REQUEST, "The state epoch cannot be a negative number.")
        for batch in batches:
            if batch.last_offset < batch.first_offset:
                return Answer(INVALID_REQUEST, f"state batch {batch.first_offset}-{batch.last_offset}: the last "
                                               "offset is before the first")
        current = self.offsets.get(key)
        if current is None:
            return Answer(INVALID_REQUEST, WRITE_UNINITIALIZED)
        fenced = self._fenced_leader(key, leader_epoch) or self._fenced_state(key, state_epoch)
        if fenced:
            return fenced
        unknown = _unknown_partition(key, partitions)
        if unknown:
            return unknown
        return Answer(records=(self._state_record(key, current, start_offset, delivery_complete_count, batches,
                                                  current.leader_epoch, now_ms),))

    def read(self, key: ShareStateKey, leader_epoch: int, now_ms: int, partitions: int | None) -> Answer:
        """ReadShareGroupState for one share partition (records a newer leader epoch)."""
        if key.partition < 0:
            return Answer(INVALID_REQUEST, "The partition id cannot be a negative number.")
        if leader_epoch < 0:
            return Answer(INVALID_REQUEST, "The leader epoch cannot be a negative number.")
        current = self.offsets.get(key)
        if current is None:
            return Answer(INVALID_REQUEST, READ_UNINITIALIZED)
        fenced = self._fenced_leader(key, leader_epoch)
        if fenced:
            return fenced
        unknown = _unknown_partition(key, partitions)
        if unknown:
            return unknown
        if self.leader_epochs.get(key) == leader_epoch:
            return Answer(state=current)
        record = self._state_record(key, current, current.start_offset, current.delivery_complete_count, (),
                                    leader_epoch, now_ms)
        return Answer(records=(record,), state=current)

    def read_summary(self, key: ShareStateKey, partitions: int | None) -> Answer:
        """ReadShareGroupStateSummary for one share partition."""
        if key.partition < 0:
            return Answer(INVALID_REQUEST, "The partition id cannot be a negative number.")
        unknown = _unknown_partition(key, partitions)
        if unknown:
            return unknown
        current = self.offsets.get(key)
        if current is None:
            return Answer(state=ShareGroupOffset(0, 0, 0, UNINITIALIZED_START_OFFSET))
        return Answer(state=current)

    def delete(self, key: ShareStateKey, partitions: int | None) -> Answer:
        """DeleteShareGroupState for one share partition: a tombstone, if there is state."""
        if key.partition < 0:
            return Answer(INVALID_REQUEST, "The partition id cannot be a negative number.")
        unknown = _unknown_partition(key, partitions)
        if unknown:
            return unknown
        if key not in self.offsets:
            return Answer()
        return Answer(records=(ShareRecord(SNAPSHOT, key, None),))

    def cleanup_topics(self, deleted: frozenset[uuid.UUID]) -> tuple[ShareRecord, ...]:
        """Tombstones for the share partitions of deleted topics (Kafka's `maybeCleanupShareState`)."""
        return tuple(ShareRecord(SNAPSHOT, key, None) for key in self.offsets if key.topic_id in deleted)

    # -- helpers -----------------------------------------------------------------------------

    def _fenced_leader(self, key: ShareStateKey, leader_epoch: int) -> Answer | None:
        recorded = self.leader_epochs.get(key)
        if recorded is not None and recorded > leader_epoch:
            return Answer(FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} is older than the recorded {recorded}")
        return None

    def _fenced_state(self, key: ShareStateKey, state_epoch: int) -> Answer | None:
        recorded = self.state_epochs.get(key)
        if recorded is not None and recorded > state_epoch:
            return Answer(FENCED_STATE_EPOCH, f"state epoch {state_epoch} is older than the recorded {recorded}")
        return None

    def _state_record(self, key: ShareStateKey, current: ShareGroupOffset, start_offset: int,
                      delivery_complete_count: int, batches: tuple[StateBatch, ...], leader_epoch: int,
                      now_ms: int) -> ShareRecord:
        """Kafka's `generateShareStateRecord`: an update, or a snapshot every `snapshot_every` updates."""
        new_start = max(start_offset, current.start_offset)
        if start_offset == current.start_offset:
            delivery_complete_count = max(delivery_complete_count, current.delivery_complete_count)
        elif start_offset < current.start_offset:
            delivery_complete_count = current.delivery_complete_count
        if self.update_counts.get(key, 0) >= self.snapshot_every:
            return ShareRecord(SNAPSHOT, key, ShareGroupOffset(
                snapshot_epoch=current.snapshot_epoch + 1, state_epoch=current.state_epoch, leader_epoch=leader_epoch,
                start_offset=new_start, delivery_complete_count=delivery_complete_count,
                batches=combine_batches(current.batches, batches, new_start),
                create_timestamp=now_ms, write_timestamp=now_ms))
        return ShareRecord(UPDATE, key, ShareGroupOffset(
            snapshot_epoch=current.snapshot_epoch, state_epoch=0, leader_epoch=leader_epoch, start_offset=new_start,
            delivery_complete_count=delivery_complete_count, batches=combine_batches((), batches, new_start)))


def _merge(current: ShareGroupOffset, update: ShareGroupOffset) -> ShareGroupOffset:
    """An update record applied to the state (Kafka's `ShareCoordinatorShard.merge`)."""
    start = current.start_offset if update.start_offset == -1 else update.start_offset
    leader = current.leader_epoch if update.leader_epoch == -1 else update.leader_epoch
    return replace(current, start_offset=start, leader_epoch=leader,
                   delivery_complete_count=update.delivery_complete_count,
                   batches=combine_batches(current.batches, update.batches, start))


def _unknown_partition(key: ShareStateKey, partitions: int | None) -> Answer | None:
    if partitions is None or key.partition >= partitions:
        return Answer(UNKNOWN_TOPIC_OR_PARTITION, f"topic {key.topic_id} partition {key.partition} is not in the "
                                                  f"metadata ({'no such topic' if partitions is None else partitions})")
    return None


__all__ = ["SNAPSHOT", "UPDATE", "Answer", "ShareCoordinatorState", "ShareGroupOffset", "ShareRecord",
           "StateBatch", "combine_batches"]
