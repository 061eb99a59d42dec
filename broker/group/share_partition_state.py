"""One share-partition's record states (KIP-932, Kafka's `SharePartition`), with no I/O.

A share group reads a partition as a queue: many members take records from the
same partition, each record is locked to one member at a time, and each is
acknowledged on its own. This module is the pure core a share-fetch shell will
drive. It reads no clock, log or socket: the caller passes `now_ms`, the offsets
the log returned, and the log start offset when retention moves it; it asks
`next_lock_deadline()` when to call `expire_locks`.

Offsets (Kafka's names)::

      SPSO                                 SPEO
       |                                    |
    ...[ACK][ACQ m1][AVAIL][ARCH][ACQ m2]...[ACQ m1]   next new offset: SPEO + 1
       '------------- in flight ------------'

- SPSO, the share-partition start offset: every record before it is done
  (acknowledged or archived) and forgotten. It moves past the head records as
  soon as they reach a terminal state.
- SPEO, the share-partition end offset: the last offset ever acquired. With
  nothing in flight, SPEO = SPSO (Kafka's convention).
- In flight: the offsets from SPSO to SPEO, whatever their state. At most
  `group.share.partition.max.record.locks` (2000) of them: one acquisition takes
  at most the room left in the window (re-acquired records count against it
  too), and with the window full only records inside it are served.

States of a record (`RecordState`, the ids `__share_group_state` stores)::

                 acquire (delivery count + 1)
    AVAILABLE ------------------------------------> ACQUIRED (by one member, locked until
        ^                                             |       now + group.share.record.lock.duration.ms)
        |  RELEASE / lock timeout / member left       |
        '---------------------------------------------+
                                                      |-- ACCEPT ---------> ACKNOWLEDGED (terminal)
                                                      |-- REJECT, GAP ----> ARCHIVED (terminal)
                                                      |-- RENEW ----------> ACQUIRED, lock restarted
                                                      '-- RELEASE / lock timeout with delivery count
                                                          >= group.share.delivery.count.limit --> ARCHIVED

    with a dead-letter queue (`ShareConfig.dlq_enabled`, KIP-1191):
    REJECT / the delivery limit --> ARCHIVING --(written to the DLQ topic, or that failed)--> ARCHIVED

- The delivery count is raised when a record is acquired, so a record is
  delivered at most `group.share.delivery.count.limit` (5) times: released or
  timed out at the limit, it is ARCHIVED instead of becoming AVAILABLE.
  Records that keep coming back are isolated (Kafka's throttling, the
  poison-pill defence): one already delivered max(2, ceil(limit / 2)) times or
  more goes out alone, as does any record on its last attempt (limit > 2), so a
  poisoned record cannot use up its neighbours' attempts.
- A member leaving (its share session closed) releases its records as a RELEASE
  would: AVAILABLE again with their delivery count kept, or ARCHIVED at the limit
  (Kafka 4.4's `releaseAcquiredRecords`, with `DeliveryCountOps.NO_OP`).
- Acknowledgements (`AcknowledgeType`, ShareAcknowledge's ids): GAP (0, an
  offset with no record, e.g. compacted away), ACCEPT (1), RELEASE (2), REJECT
  (3) and RENEW (4, KIP-1222: restarts the lock; refused with
  INVALID_RECORD_STATE when the group sets `share.renew.acknowledge.enable`
  to false, true by default in 4.4). An acknowledgement is all
  or nothing per partition: an offset that is not ACQUIRED by this member, or
  not in flight, fails the whole request with INVALID_RECORD_STATE and changes
  nothing (Kafka rolls the transition back); a malformed batch (unordered,
  overlapping, a bad type, a type count that is neither 1 nor one per offset)
  is INVALID_REQUEST. Offsets below the SPSO are already done and are skipped.
- When the log start offset moves past in-flight records (retention), the
  AVAILABLE ones there are ARCHIVED at once and the SPSO follows; ACQUIRED ones
  keep their lock (acknowledgements below the SPSO are skipped) and are
  ARCHIVED when it times out or their member leaves.
- `share.auto.offset.reset` (latest by default) places the SPSO of a share
  partition that has no state yet: the log end (latest) or the log start
  (earliest); `by_duration:` needs the time index and is resolved by the
  caller (`start_offset_for_reset`).

Persistence: `persisted_batches()` is what the share coordinator keeps and `load` reads
it back (Kafka's `maybeInitialize`): a record ACQUIRED when the leader stops comes back
AVAILABLE without that attempt counted, offsets no batch covers come back AVAILABLE,
and what was ACKNOWLEDGED or ARCHIVED stays so.

Dead-letter queue (KIP-1191, share.version 2, the group's `errors.deadletterqueue.topic.name`
set: `ShareConfig.dlq_enabled`): a REJECTed record, and one released or timed out at the
delivery count limit, becomes ARCHIVING instead of ARCHIVED, as in Kafka 4.4's `SharePartition`
(a GAP, a record below the log start, of an aborted transaction or compacted away is ARCHIVED
as before). ARCHIVING is not terminal: it holds the SPSO, is persisted (id 3) and is never
acquired. This core decides which records go to the DLQ: `take_dlq_runs()` hands each ARCHIVING
record out once (the shell calls it after the ARCHIVING state is persisted, and writes the runs
to the DLQ topic), and `finish_dlq(first, last)` then archives them, whether the write succeeded
or not (Kafka: "proceeding to ARCHIVED regardless"). An ARCHIVING record read back by `load`
(the leader stopped between the two writes) is handed out again: the DLQ is at least once. The
reason goes in the DLQ record's `__dlq.errors.message` header: REJECT's, or the delivery limit's
(for a record loaded back: the limit's when its delivery count reached it, as Kafka decides).

Not modelled here: the persister's I/O and its state epoch, Kafka's
whole-log-batch acquisition: records are acquired one offset at a time and
returned as ranges, which is Kafka with in-flight batches of one offset (its
budget and throttling then count records, not cached batches). Which batches belong
to aborted transactions (read_committed) is the shell's to find, from the log;
`archive_aborted` archives them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from raftka.client.protocol import ErrorCode

NONE = int(ErrorCode.NONE)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
INVALID_RECORD_STATE = int(ErrorCode.INVALID_RECORD_STATE)

NO_MEMBER = ""

# Kafka's ShareGroupConfig defaults (broker configs; KIP-1240 lets a group override them).
RECORD_LOCK_DURATION_MS_DEFAULT = 30_000    # group.share.record.lock.duration.ms
PARTITION_MAX_RECORD_LOCKS_DEFAULT = 2000   # group.share.partition.max.record.locks
DELIVERY_COUNT_LIMIT_DEFAULT = 5            # group.share.delivery.count.limit
AUTO_OFFSET_RESET_DEFAULT = "latest"        # share.auto.offset.reset (group config)


class RecordState(enum.IntEnum):
    """Kafka's `RecordState`, with the ids `__share_group_state` stores."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3  # KIP-1191: on its way to the dead-letter queue topic
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


_TERMINAL = frozenset(state for state in RecordState if state.terminal)


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge's AcknowledgeTypes (0 marks a gap: no record at that offset)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """The share-group settings one share-partition obeys (Kafka's names in the comments)."""

    record_lock_duration_ms: int = RECORD_LOCK_DURATION_MS_DEFAULT
    max_record_locks: int = PARTITION_MAX_RECORD_LOCKS_DEFAULT
    delivery_count_limit: int = DELIVERY_COUNT_LIMIT_DEFAULT
    renew_acknowledge_enabled: bool = True  # share.renew.acknowledge.enable (group config, KIP-1222)
    # share.version >= 2 and the group's errors.deadletterqueue.topic.name set (KIP-1191)
    dlq_enabled: bool = False


class DlqReason(enum.Enum):
    """Why a record goes to the dead-letter queue: Kafka's `ShareGroupDLQManager` causes, whose
    messages are the `__dlq.errors.message` header."""

    REJECTED = "Offset rejected by client."
    DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."


@dataclass(frozen=True, slots=True)
class DlqRun:
    """Consecutive ARCHIVING offsets with one delivery count and reason, for the shell to write
    to the DLQ topic (one DLQ record per offset), then to pass to `finish_dlq`."""

    first_offset: int
    last_offset: int
    delivery_count: int
    reason: DlqReason


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState
    delivery_count: int
    member_id: str = NO_MEMBER
    lock_deadline_ms: int | None = None  # set while ACQUIRED


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """ShareFetch's AcquiredRecords: a range of offsets delivered with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """ShareFetch/ShareAcknowledge's AcknowledgementBatches entry: one type for the whole
    range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PersistedBatch:
    """One of `__share_group_state`'s StateBatches: a run of offsets in one state."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a call did: an error (with why), and whether records became AVAILABLE (a parked
    share fetch may now be answered) or the SPSO moved (state to persist)."""

    error: int = NONE
    reason: str = ""
    released: bool = False
    start_offset_moved: bool = False


def start_offset_for_reset(reset: str, log_start_offset: int, log_end_offset: int,
                           duration_offset: int | None = None) -> int:
    """The SPSO of a share partition without state (`share.auto.offset.reset`). A
    `by_duration:<ISO8601>` reset needs the offset the caller found in the time index."""
    if reset == "latest":
        return log_end_offset
    if reset == "earliest":
        return log_start_offset
    if reset.startswith("by_duration:"):
        if duration_offset is None:
            raise ValueError(f"share.auto.offset.reset={reset!r} needs the offset for that time from the "
                             "time index (duration_offset)")
        return max(log_start_offset, min(duration_offset, log_end_offset))
    raise ValueError(f"share.auto.offset.reset={reset!r}: expected latest, earliest or by_duration:<ISO8601>")


class SharePartitionState:
    """The in-flight records of one (group, topic, partition). See the module docstring."""

    def __init__(self, start_offset: int, config: ShareConfig | None = None) -> None:
        self.config = config or ShareConfig()
        self.start_offset = start_offset
        self._next_new = start_offset  # SPEO + 1: the first offset never acquired
        # offset -> record, in offset order (new offsets are only ever appended past SPEO).
        # Offsets inside the window missing here are gaps (no record in the log).
        self.records: dict[int, InFlightRecord] = {}
        # The ARCHIVING offsets: why each goes to the DLQ, and whether `take_dlq_runs` handed it out.
        self.dlq: dict[int, tuple[DlqReason, bool]] = {}

    @classmethod
    def load(cls, start_offset: int, batches: list[PersistedBatch], config: ShareConfig | None = None,
             ) -> SharePartitionState:
        """The state read back from the share coordinator (Kafka's `maybeInitialize`): the SPSO and
        the persisted batches. Offsets between them that no batch covers were never written
        (acquired, then the leader stopped): they are AVAILABLE again with no delivery counted.
        Raises ValueError for batches before the SPSO, out of order or overlapping."""
        state = cls(start_offset, config)
        expected = start_offset
        for batch in batches:
            if batch.last_offset < batch.first_offset:
                raise ValueError(f"persisted batch {batch.first_offset}-{batch.last_offset}: last offset before first")
            if batch.first_offset < start_offset:
                raise ValueError(f"persisted batch {batch.first_offset}-{batch.last_offset} starts before the SPSO "
                                 f"{start_offset}")
            if batch.first_offset < expected:
                raise ValueError(f"persisted batch {batch.first_offset}-{batch.last_offset} overlaps or precedes the "
                                 f"previous one (ending at {expected - 1})")
            for offset in range(expected, batch.first_offset):
                state.records[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
            loaded = RecordState.AVAILABLE if batch.state is RecordState.ACQUIRED else batch.state
            for offset in range(batch.first_offset, batch.last_offset + 1):
                state.records[offset] = InFlightRecord(loaded, batch.delivery_count)
            expected = batch.last_offset + 1
        state._next_new = expected
        for offset, record in state.records.items():
            if record.state is RecordState.ARCHIVING:  # Kafka's maybeResumeDlqArchiving
                limit = state.config.delivery_count_limit
                state.dlq[offset] = (DlqReason.DELIVERY_COUNT_EXCEEDED if record.delivery_count >= limit
                                     else DlqReason.REJECTED, False)
        state._advance_start()
        return state

    def copy(self) -> SharePartitionState:
        """An independent copy: the shell's undo when persisting a change fails. (A
        `copy.deepcopy` of a full 2000-record window costs tens of milliseconds.)"""
        other = SharePartitionState(self.start_offset, self.config)
        other._next_new = self._next_new
        other.records = {offset: InFlightRecord(r.state, r.delivery_count, r.member_id, r.lock_deadline_ms)
                         for offset, r in self.records.items()}
        other.dlq = dict(self.dlq)
        return other

    def persisted_batches(self) -> tuple[PersistedBatch, ...]:
        """What the share coordinator keeps (from the SPSO; `load` reads it back): runs of
        in-flight offsets by state and delivery count, gaps (no record) as ARCHIVED. A record
        ACQUIRED now is written as it was before this attempt (AVAILABLE, one delivery fewer):
        Kafka persists a transition only once it completes, so a restart redelivers it without
        counting the lost attempt."""
        # One pass with the current run in locals: a PersistedBatch per run, not per offset.
        out: list[PersistedBatch] = []
        acquired, available, archived = RecordState.ACQUIRED, RecordState.AVAILABLE, RecordState.ARCHIVED
        first = last = -2
        run: tuple[RecordState, int] | None = None  # (state, delivery count) of first..last
        cursor = self.start_offset
        for offset, record in self.records.items():
            if offset < cursor:
                continue
            if offset > cursor:  # a gap: no record there
                if run == (archived, 0) and last + 1 == cursor:
                    last = offset - 1
                else:
                    if run is not None:
                        out.append(PersistedBatch(first, last, run[0], run[1]))
                    first, last, run = cursor, offset - 1, (archived, 0)
            state, count = record.state, record.delivery_count
            if state is acquired:
                state, count = available, count - 1
            if run is not None and last + 1 == offset and run[0] is state and run[1] == count:
                last = offset
            else:
                if run is not None:
                    out.append(PersistedBatch(first, last, run[0], run[1]))
                first, last, run = offset, offset, (state, count)
            cursor = offset + 1
        if run is None:
            return ()
        if cursor < self._next_new:
            if run == (archived, 0) and last + 1 == cursor:
                last = self._next_new - 1
            else:
                out.append(PersistedBatch(first, last, run[0], run[1]))
                first, last, run = cursor, self._next_new - 1, (archived, 0)
        out.append(PersistedBatch(first, last, run[0], run[1]))
        return tuple(out)

    # -- reading ---------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """SPEO: the last offset acquired, or the SPSO when nothing is in flight (Kafka's)."""
        return self._next_new - 1 if self._next_new > self.start_offset else self.start_offset

    @property
    def in_flight_count(self) -> int:
        """Offsets from SPSO to SPEO, the window `max_record_locks` bounds."""
        return max(0, self._next_new - self.start_offset)

    def next_fetch_offset(self) -> int:
        """Where the next share fetch reads the log: the first AVAILABLE record, else past SPEO."""
        for offset, record in self.records.items():
            if offset >= self.start_offset and record.state is RecordState.AVAILABLE:
                return offset
        return max(self._next_new, self.start_offset)

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything now (Kafka's `canAcquireRecords`): an
        AVAILABLE record in flight, or room in the window for new ones."""
        return (self.in_flight_count < self.config.max_record_locks
                or self.next_fetch_offset() < self._next_new)

    def next_lock_deadline(self) -> int | None:
        """The earliest acquisition-lock deadline, when `expire_locks` has work (None: no lock)."""
        deadlines = [r.lock_deadline_ms for r in self.records.values() if r.lock_deadline_ms is not None]
        return min(deadlines) if deadlines else None

    # -- acquiring -------------------------------------------------------------------------

    def acquire(self, member_id: str, first_offset: int, last_offset: int, now_ms: int,
                max_records: int, fetch_offset: int | None = None) -> tuple[AcquiredRecords, ...]:
        """Lock to `member_id` what it may take of the records the log returned, offsets
        `first_offset`..`last_offset`, read from `fetch_offset` (`next_fetch_offset()` when the
        read began). AVAILABLE records between `fetch_offset` and `first_offset` are gone from
        the log (compacted) and are ARCHIVED (Kafka's `maybeArchiveStaleBatches`). Returns the
        acquired ranges; nothing if none is acquirable."""
        if fetch_offset is not None and fetch_offset < first_offset:
            for offset, stale in self.records.items():
                if fetch_offset <= offset < first_offset and stale.state is RecordState.AVAILABLE:
                    self._finish(stale, RecordState.ARCHIVED)
            self._advance_start()
        # Kafka's lastOffsetAndMaxRecordsToAcquire: one call takes at most the room left in the
        # window, re-acquired records included; a full window still serves the records inside it.
        budget = min(max_records, self.config.max_record_locks - self.in_flight_count)
        if budget <= 0:
            read_from = first_offset if fetch_offset is None else fetch_offset
            if not self.records or read_from > self.end_offset:
                return ()
            budget = min(max_records, self.end_offset - read_from + 1)
            last_offset = min(last_offset, self.end_offset)
        limit = self.config.delivery_count_limit
        throttle = throttle_delivery_count(limit)
        deadline = now_ms + self.config.record_lock_duration_ms
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        fresh: AcquiredRecords | None = None  # offsets past SPEO, acquired for the first time
        records, acquired = self.records, RecordState.ACQUIRED
        offset = max(first_offset, self.start_offset)
        while offset <= last_offset and len(taken) < budget:
            if offset < self._next_new:
                record: InFlightRecord | None = records.get(offset)
                if record is None or record.state is not RecordState.AVAILABLE:
                    offset += 1
                    continue
                if record.delivery_count >= throttle and taken:
                    break  # a record delivered that often leads a later fetch
                record.state = acquired
                record.delivery_count += 1
                record.member_id = member_id
                record.lock_deadline_ms = deadline
                taken.append((offset, record.delivery_count))
                if record.delivery_count > throttle or (limit > 2 and record.delivery_count == limit):
                    break  # a throttled record, or a last attempt, goes out alone
                offset += 1
            else:  # the rest is new: one delivery each, never throttled
                if not records and offset > self._next_new:
                    self.start_offset = offset  # the log has nothing before it (compacted, retention)
                last = min(last_offset, offset + budget - len(taken) - 1)
                for new in range(offset, last + 1):
                    records[new] = InFlightRecord(acquired, 1, member_id, deadline)
                self._next_new = last + 1
                fresh = AcquiredRecords(offset, last, 1)
                break
        ranges = _ranges(taken)
        if fresh is None:
            return ranges
        if ranges and ranges[-1].last_offset + 1 == fresh.first_offset and ranges[-1].delivery_count == 1:
            return (*ranges[:-1], AcquiredRecords(ranges[-1].first_offset, fresh.last_offset, 1))
        return (*ranges, fresh)

    def archive_aborted(self, member_id: str, acquired: tuple[AcquiredRecords, ...],
                        aborted: list[tuple[int, int]]) -> tuple[AcquiredRecords, ...]:
        """read_committed (`share.isolation.level`): the offsets of `acquired` that lie in
        `aborted` (first, last) spans, the batches of aborted transactions, are ARCHIVED at
        once, as Kafka's `filterAbortedTransactionalAcquiredRecords` does, and the rest is
        returned. Only records ACQUIRED by `member_id` are touched."""
        if not aborted:
            return acquired
        kept: list[tuple[int, int]] = []
        for run in acquired:
            for offset in range(run.first_offset, run.last_offset + 1):
                record = self.records.get(offset)
                if any(first <= offset <= last for first, last in aborted):
                    if record is not None and record.state is RecordState.ACQUIRED and record.member_id == member_id:
                        self._finish(record, RecordState.ARCHIVED)
                else:
                    kept.append((offset, run.delivery_count))
        self._advance_start()
        return _ranges(kept)

    # -- acknowledging ---------------------------------------------------------------------

    def acknowledge(self, member_id: str, batches: list[AcknowledgementBatch], now_ms: int) -> Outcome:
        """Apply a member's acknowledgements, all or nothing (see the module docstring)."""
        plan: list[tuple[int, int]] = []  # (offset, acknowledge type)
        previous_last = -1
        records, acquired, renew = self.records, RecordState.ACQUIRED, AcknowledgeType.RENEW
        renew_enabled = self.config.renew_acknowledge_enabled
        for batch in batches:
            error = self._check_batch(batch, previous_last)
            if error:
                return Outcome(INVALID_REQUEST, error)
            previous_last = batch.last_offset
            types = batch.acknowledge_types
            one = types[0] if len(types) == 1 else None
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                ack = types[offset - batch.first_offset] if one is None else one
                if ack == renew and not renew_enabled:
                    return Outcome(INVALID_RECORD_STATE, "RENEW acknowledgements are not enabled for this group "
                                                         "(share.renew.acknowledge.enable=false)")
                record = records.get(offset)
                if record is None:
                    return Outcome(INVALID_RECORD_STATE, f"offset {offset} is not in flight "
                                   f"(SPSO {self.start_offset}, SPEO {self.end_offset})")
                if record.state is not acquired:
                    return Outcome(INVALID_RECORD_STATE, f"offset {offset} is {record.state.name}, not ACQUIRED")
                if record.member_id != member_id:
                    return Outcome(INVALID_RECORD_STATE, f"offset {offset} is acquired by another member, "
                                                         f"not {member_id!r}")
                plan.append((offset, ack))
        released = False
        accept, release, acknowledged = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, RecordState.ACKNOWLEDGED
        for offset, ack in plan:
            record = records[offset]
            if ack == renew:
                record.lock_deadline_ms = now_ms + self.config.record_lock_duration_ms
            elif ack == accept:
                self._finish(record, acknowledged)
            elif ack == release:
                released |= self._release(record, offset)
            elif ack == AcknowledgeType.REJECT:
                self._archive(record, offset, DlqReason.REJECTED)
            else:
                self._finish(record, RecordState.ARCHIVED)
        return Outcome(released=released, start_offset_moved=self._advance_start())

    def _check_batch(self, batch: AcknowledgementBatch, previous_last: int) -> str:
        """Why a batch is malformed (INVALID_REQUEST), or ''."""
        if batch.first_offset > batch.last_offset:
            return f"acknowledgement batch first offset {batch.first_offset} > last offset {batch.last_offset}"
        if batch.first_offset <= previous_last:
            return (f"acknowledgement batch at {batch.first_offset} overlaps or precedes the previous batch "
                    f"ending at {previous_last}")
        size = batch.last_offset - batch.first_offset + 1
        if len(batch.acknowledge_types) not in (1, size):
            return (f"acknowledgement batch {batch.first_offset}-{batch.last_offset} has "
                    f"{len(batch.acknowledge_types)} types: expected 1 or {size}")
        bad = [t for t in batch.acknowledge_types if t not in AcknowledgeType._value2member_map_]
        if bad:
            return f"acknowledge type {bad[0]} is not one of 0 (gap) .. 4 (renew)"
        return ""

    # -- releasing -------------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> Outcome:
        """Release every record whose acquisition lock ran out by `now_ms` (AVAILABLE again,
        or ARCHIVED at the delivery limit or below the log start)."""
        return self._release_where(lambda r: r.lock_deadline_ms is not None and r.lock_deadline_ms <= now_ms)

    def release_member(self, member_id: str) -> Outcome:
        """The member left (or its share session closed): its records are released as by a
        RELEASE acknowledgement; those below the log start are ARCHIVED."""
        return self._release_where(lambda r: r.member_id == member_id)

    def advance_log_start(self, log_start_offset: int) -> Outcome:
        """The log start moved (retention, DeleteRecords): AVAILABLE records before it are
        ARCHIVED and the SPSO follows; records still ACQUIRED there wait for their member."""
        if log_start_offset <= self.start_offset:
            return Outcome()
        for offset, record in self.records.items():
            if offset >= log_start_offset:
                break
            if record.state is RecordState.AVAILABLE:
                self._finish(record, RecordState.ARCHIVED)
        self.start_offset = log_start_offset
        self._next_new = max(self._next_new, log_start_offset)
        self._advance_start()
        return Outcome(start_offset_moved=True)

    # -- the dead-letter queue ----------------------------------------------------------------

    def take_dlq_runs(self) -> tuple[DlqRun, ...]:
        """The ARCHIVING records not handed out yet, as runs to write to the DLQ topic; each is
        handed out once (again only after `load`). Call it once the ARCHIVING state is persisted."""
        runs: list[DlqRun] = []
        for offset in sorted(o for o, (_, taken) in self.dlq.items() if not taken):
            reason, _ = self.dlq[offset]
            self.dlq[offset] = (reason, True)
            count = self.records[offset].delivery_count
            last = runs[-1] if runs else None
            if last is not None and (last.last_offset + 1, last.delivery_count, last.reason) == (offset, count, reason):
                runs[-1] = DlqRun(last.first_offset, offset, count, reason)
            else:
                runs.append(DlqRun(offset, offset, count, reason))
        return tuple(runs)

    def finish_dlq(self, first_offset: int, last_offset: int) -> Outcome:
        """The DLQ write of `first_offset`..`last_offset` ended (written, or failed): those still
        ARCHIVING are ARCHIVED and the SPSO moves past them if it can (state to persist)."""
        for offset in range(first_offset, last_offset + 1):
            record = self.records.get(offset)
            if offset in self.dlq and record is not None and record.state is RecordState.ARCHIVING:
                del self.dlq[offset]
                self._finish(record, RecordState.ARCHIVED)
        return Outcome(start_offset_moved=self._advance_start())

    # -- internals -------------------------------------------------------------------------

    def _release_where(self, chosen: Callable[[InFlightRecord], bool]) -> Outcome:
        released = False
        for offset, record in self.records.items():
            if record.state is RecordState.ACQUIRED and chosen(record):
                if offset < self.start_offset:
                    self._finish(record, RecordState.ARCHIVED)
                else:
                    released |= self._release(record, offset)
        return Outcome(released=released, start_offset_moved=self._advance_start())

    def _finish(self, record: InFlightRecord, state: RecordState) -> None:
        record.state = state
        record.member_id = NO_MEMBER
        record.lock_deadline_ms = None

    def _release(self, record: InFlightRecord, offset: int) -> bool:
        """ACQUIRED -> AVAILABLE (True), or ARCHIVED (ARCHIVING with a DLQ) when that attempt
        was the last one."""
        if record.delivery_count >= self.config.delivery_count_limit:
            self._archive(record, offset, DlqReason.DELIVERY_COUNT_EXCEEDED)
            return False
        self._finish(record, RecordState.AVAILABLE)
        return True

    def _archive(self, record: InFlightRecord, offset: int, reason: DlqReason) -> None:
        """A record that is done with (REJECT, the delivery limit): ARCHIVED, or ARCHIVING when
        the group has a dead-letter queue (Kafka's `recordStateWithDlq`)."""
        if self.config.dlq_enabled:
            self._finish(record, RecordState.ARCHIVING)
            self.dlq[offset] = (reason, False)
        else:
            self._finish(record, RecordState.ARCHIVED)

    def _advance_start(self) -> bool:
        """Move the SPSO to the first record in flight that is not terminal (past gaps), and
        forget the terminal records below it."""
        old = self.start_offset
        new = max(self._next_new, old)
        terminal = _TERMINAL
        for offset, record in self.records.items():
            if offset >= old and record.state not in terminal:
                new = offset
                break
        self.start_offset = new
        done = []
        for offset, record in self.records.items():
            if offset >= new:
                break
            if record.state in terminal:
                done.append(offset)
        for offset in done:
            del self.records[offset]
        return new != old


def throttle_delivery_count(limit: int) -> int:
    """Kafka's `throttleRecordsDeliveryLimit`: a record already delivered this many times is
    acquired alone."""
    return max(2, -(-limit // 2))


def _ranges(taken: list[tuple[int, int]]) -> tuple[AcquiredRecords, ...]:
    """Consecutive offsets with one delivery count, as AcquiredRecords ranges."""
    out: list[AcquiredRecords] = []
    if not taken:
        return ()
    first, last, count = taken[0][0], taken[0][0] - 1, taken[0][1]
    for offset, delivery_count in taken:
        if offset == last + 1 and delivery_count == count:
            last = offset
        else:
            out.append(AcquiredRecords(first, last, count))
            first, last, count = offset, offset, delivery_count
    out.append(AcquiredRecords(first, last, count))
    return tuple(out)
