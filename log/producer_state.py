"""Idempotent-producer state of one partition: who wrote what, and is this batch a retry?

Kafka's broker owes an idempotent producer (KIP-98): per producer id, the current epoch and the last 5 batches it
wrote (first/last sequence, first/last offset). A retried batch whose
sequence range is retained is a duplicate and gets the original offsets back;
anything else must continue the sequence or be rejected.

The module is split the h11 way:

- `ProducerEntry`, `validate` and `advance` are the pure core: no files, no
  clocks, easy to drive from a table of cases.
- `ProducerStateManager` is the thin shell the partition log owns: a dict of
  entries, plus snapshot files `<20-digit offset>.snapshot` so a restart
  replays only the batch headers written after the newest snapshot.

Transactions (KIP-98): an entry also holds the first offset of the producer's
open transaction in this partition (`current_txn_first_offset`, set by its
first transactional batch, cleared by its COMMIT/ABORT marker) and the
coordinator epoch of the last marker. The manager keeps the open transactions
and the decided ones whose marker is not yet below the high watermark: the
first unstable offset, and with it the last stable offset (LSO), comes from them.

Not done (deliberately): Kafka's `producer.id.expiration.ms` — entries never
expire by time, and nothing drops producers whose batches fell below the log
start offset. Both only bound memory; correctness does not depend on them.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import structlog
from crc32c import crc32c

from raftka.log.atomic_file import atomic_write, fsync_dir
from raftka.log.batch_header import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from raftka.log.control_record import ABORT, ControlRecord
from raftka.log.errors import (
    InvalidProducerEpoch,
    InvalidTxnState,
    LogError,
    OutOfOrderSequence,
    TransactionCoordinatorFenced,
)

_log = structlog.get_logger(__name__)

# Kafka keeps exactly this many batches per producer (ProducerStateEntry.NUM_BATCHES_TO_RETAIN);
# clients never have more than 5 requests in flight with idempotence on, so 5 suffices.
RETAINED_BATCHES = 5
SEQUENCE_MODULUS = 1 << 31  # sequences wrap from Integer.MAX_VALUE to 0

SNAPSHOT_SUFFIX = ".snapshot"
_TMP_SUFFIX = ".snapshot.tmp"

# (first_seq, last_seq, first_offset, last_offset)
BatchMetadata = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """What the partition remembers about one producer id."""

    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...] = ()  # newest last, at most RETAINED_BATCHES
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of the last transaction marker written for this producer
    current_txn_first_offset: int = -1  # first offset of its open transaction here, -1 if none

    @property
    def in_transaction(self) -> bool:
        return self.current_txn_first_offset >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record written in the current epoch, or -1."""
        return self.batches[-1][1] if self.batches else NO_SEQUENCE


class OutcomeKind(enum.Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker just ended in this partition: [first_offset, last_offset (the marker)]."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict on a batch: append it, or answer with the offsets it already has."""

    kind: OutcomeKind
    first_offset: int = -1
    last_offset: int = -1

    @property
    def is_duplicate(self) -> bool:
        return self.kind is OutcomeKind.DUPLICATE


APPEND = Outcome(OutcomeKind.APPEND)


def next_sequence(sequence: int) -> int:
    """The sequence that follows `sequence`; -1 (nothing written yet) is followed by 0."""
    return (sequence + 1) % SEQUENCE_MODULUS


def validate(entry: ProducerEntry | None, header: BatchHeader, *, verify_sequence: bool = True) -> Outcome:
    """Decide whether a batch from a client may be appended.

    Only the producer fields and the sequence range matter; `header.base_offset`
    is whatever the producer sent. Raises InvalidProducerEpoch for an epoch below
    the known one, InvalidTxnState for a non-transactional batch from a producer
    with an open transaction here, OutOfOrderSequence for a sequence that does not
    continue the producer's last batch (or a new epoch that does not start at 0).
    `verify_sequence=False` is the coordinator's own write (TxnOffsetCommit's batch,
    Kafka's AppendOrigin.COORDINATOR): epoch and transaction state only.
    """
    if not header.has_producer_id or entry is None:
        # No producer id: plain at-least-once producer. Unknown producer: its state
        # may have been removed (Kafka >= 2.5 accepts any sequence then).
        return APPEND
    epoch = header.producer_epoch
    if epoch < entry.epoch:
        raise InvalidProducerEpoch(
            f"producer {header.producer_id}: epoch {epoch} is older than the current epoch {entry.epoch}"
        )
    if header.is_control:
        return APPEND  # transaction markers carry no sequence
    if not header.is_transactional and entry.in_transaction:
        raise InvalidTxnState(
            f"producer {header.producer_id}: a non-transactional batch while its transaction opened at "
            f"offset {entry.current_txn_first_offset} is not ended"
        )
    if not verify_sequence:
        return APPEND
    first_seq = header.base_sequence
    if epoch > entry.epoch:
        # A known epoch of -1 means we never saw a real epoch: nothing to continue from.
        if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequence(
                f"producer {header.producer_id}: new epoch {epoch} (was {entry.epoch}) "
                f"must start at sequence 0, received {first_seq}"
            )
        return APPEND
    last_seq = header.last_sequence
    for batch_first, batch_last, first_offset, last_offset in entry.batches:
        if batch_first == first_seq and batch_last == last_seq:
            return Outcome(OutcomeKind.DUPLICATE, first_offset, last_offset)
    expected = next_sequence(entry.last_sequence)
    if first_seq != expected:
        raise OutOfOrderSequence(
            f"producer {header.producer_id} epoch {epoch}: expected sequence {expected}, "
            f"received {first_seq} (last sequence written {entry.last_sequence})"
        )
    return APPEND


def validate_marker(entry: ProducerEntry | None, producer_id: int, producer_epoch: int,
                    coordinator_epoch: int, transaction_version: int = 0) -> None:
    """Whether a transaction marker may be written for `producer_id` (Kafka's
    ProducerAppendInfo.checkProducerEpoch and checkCoordinatorEpoch).

    Raises InvalidProducerEpoch for an epoch below the producer's (at `transaction_version` 2,
    KIP-1228: not above it, since such a transaction's marker always carries a bumped epoch,
    so a late or repeated one is refused), TransactionCoordinatorFenced for a coordinator
    epoch below the last marker's. A producer never seen is fine."""
    if entry is None:
        return
    strict = transaction_version >= 2
    if producer_epoch < entry.epoch or (strict and producer_epoch == entry.epoch):
        raise InvalidProducerEpoch(
            f"producer {producer_id}: marker epoch {producer_epoch} is "
            f"{'not newer than' if strict else 'older than'} the current epoch {entry.epoch}"
            f"{' (transaction version 2)' if strict else ''}"
        )
    if coordinator_epoch < entry.coordinator_epoch:
        raise TransactionCoordinatorFenced(
            f"producer {producer_id}: marker coordinator epoch {coordinator_epoch} is older than the last "
            f"one seen, {entry.coordinator_epoch}"
        )


def advance(entry: ProducerEntry | None, header: BatchHeader, control: ControlRecord | None = None) -> ProducerEntry:
    """The producer's entry after `header` (with its real offsets) was written; `control` is
    the record of a control batch (a COMMIT/ABORT marker ends the open transaction).

    Never raises: followers and recovery replay what the leader accepted, so an
    odd sequence or epoch is taken as the new truth rather than refused.
    Raises ValueError only for a batch without a producer id (the caller's bug:
    such batches are not tracked).
    """
    if not header.has_producer_id:
        raise ValueError(
            f"batch at offset {header.base_offset} has producer id {header.producer_id}; "
            f"only batches with a producer id (>= 0) are tracked"
        )
    batches: tuple[BatchMetadata, ...] = ()
    if entry is not None and entry.epoch == header.producer_epoch:
        batches = entry.batches
    if not header.is_control:
        first_seq = header.base_sequence
        if batches and first_seq != next_sequence(batches[-1][1]):
            # The window must stay contiguous for duplicate answers to be exact;
            # a jump (replayed from a leader that accepted it) starts a new window.
            batches = ()
        new = (first_seq, header.last_sequence, header.base_offset, header.last_offset)
        batches = (*batches, new)[-RETAINED_BATCHES:]
    last_timestamp = header.max_timestamp
    coordinator_epoch = txn_first = -1
    if entry is not None:
        last_timestamp = max(last_timestamp, entry.last_timestamp)
        coordinator_epoch, txn_first = entry.coordinator_epoch, entry.current_txn_first_offset
    if header.is_control:
        if control is not None and control.is_marker:
            coordinator_epoch, txn_first = control.coordinator_epoch, -1
    elif header.is_transactional and txn_first < 0:
        txn_first = header.base_offset
    return ProducerEntry(header.producer_id, header.producer_epoch, batches, last_timestamp,
                         coordinator_epoch, txn_first)


# ---------------------------------------------------------------------------
# Snapshot file format (big-endian), version 2:
#   magic "RKPS" | version u16 | crc32c u32 of everything after it
#   | offset i64 | entry count u32
#   | per entry: producer_id i64, epoch i16, last_timestamp i64, coordinator_epoch i32,
#                current_txn_first_offset i64, batch count u8,
#                batches (first_seq i32, last_seq i32, first_offset i64, last_offset i64)
# Version 1 (before transactions) lacks coordinator_epoch and current_txn_first_offset;
# it still loads (both -1). The CRC catches a torn write; the embedded offset must match
# the file name. (Kafka's own `.snapshot` layout differs; raftka reads only its own.)

_MAGIC = b"RKPS"
_VERSION = 2
_PREAMBLE = struct.Struct(">4sHI")
_BODY_HEAD = struct.Struct(">qI")
_ENTRIES = {1: struct.Struct(">qhqB"), 2: struct.Struct(">qhqiqB")}
_ENTRY = _ENTRIES[_VERSION]
_BATCH = struct.Struct(">iiqq")


class CorruptSnapshot(LogError):
    """A snapshot file that cannot be trusted (torn, wrong version, bad CRC)."""


def encode_snapshot(offset: int, entries: Mapping[int, ProducerEntry]) -> bytes:
    parts = [_BODY_HEAD.pack(offset, len(entries))]
    for entry in entries.values():
        parts.append(
            _ENTRY.pack(entry.producer_id, entry.epoch, entry.last_timestamp, entry.coordinator_epoch,
                        entry.current_txn_first_offset, len(entry.batches))
        )
        parts.extend(_BATCH.pack(*batch) for batch in entry.batches)
    body = b"".join(parts)
    return _PREAMBLE.pack(_MAGIC, _VERSION, crc32c(body)) + body


def decode_snapshot(data: bytes) -> tuple[int, dict[int, ProducerEntry]]:
    """Return (offset, entries); raise CorruptSnapshot if `data` is not a whole, valid snapshot."""
    if len(data) < _PREAMBLE.size + _BODY_HEAD.size:
        raise CorruptSnapshot(
            f"snapshot is {len(data)} bytes, shorter than its {_PREAMBLE.size + _BODY_HEAD.size}-byte header"
        )
    magic, version, crc = _PREAMBLE.unpack_from(data, 0)
    entry_struct = _ENTRIES.get(version)
    if magic != _MAGIC or entry_struct is None:
        raise CorruptSnapshot(
            f"snapshot magic/version {magic!r}/{version}, expected {_MAGIC!r}/{sorted(_ENTRIES)}"
        )
    body = memoryview(data)[_PREAMBLE.size :]
    actual = crc32c(body)
    if actual != crc:
        raise CorruptSnapshot(f"snapshot CRC-32C {actual:#010x} does not match stored {crc:#010x}")
    try:
        offset, count = _BODY_HEAD.unpack_from(body, 0)
        pos = _BODY_HEAD.size
        entries: dict[int, ProducerEntry] = {}
        for _ in range(count):
            fields = entry_struct.unpack_from(body, pos)
            pos += entry_struct.size
            producer_id, epoch, last_timestamp = fields[:3]
            coordinator_epoch, txn_first = fields[3:5] if version >= 2 else (-1, -1)
            n_batches = fields[-1]
            batches = []
            for _ in range(n_batches):
                batches.append(_BATCH.unpack_from(body, pos))
                pos += _BATCH.size
            entries[producer_id] = ProducerEntry(producer_id, epoch, tuple(batches), last_timestamp,
                                                 coordinator_epoch, txn_first)
    except struct.error as exc:
        raise CorruptSnapshot(f"snapshot body ends early: {exc}") from exc
    if pos != len(body):
        raise CorruptSnapshot(
            f"snapshot has {len(body) - pos} trailing bytes after {count} entries"
        )
    return offset, entries


def snapshot_path(partition_dir: Path, offset: int) -> Path:
    return partition_dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _snapshot_offset(path: Path) -> int | None:
    name = path.name
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    return int(stem) if stem.isdigit() else None


class ProducerStateManager:
    """The producer entries of one partition and their snapshot files.

    The partition log calls `check` before assigning offsets to a client batch,
    `update` after writing any batch (leader, follower, recovery alike),
    `take_snapshot` when it rolls a segment or shuts down, and `load` /
    `truncate_and_reload` on open and after a truncation, replaying batch
    headers from the offset they return.
    """

    def __init__(self, partition_dir: Path) -> None:
        self._dir = Path(partition_dir)
        self._entries: dict[int, ProducerEntry] = {}
        self._last_offset = -1
        self._ongoing: dict[int, int] = {}  # first offset of each open transaction -> producer id
        # Decided transactions whose marker may not be replicated yet (Kafka's unreplicatedTxns),
        # dropped once the high watermark passes their marker (`on_high_watermark`).
        self._unreplicated: list[CompletedTxn] = []

    def _set_entries(self, entries: dict[int, ProducerEntry]) -> None:
        self._entries = entries
        self._ongoing = {e.current_txn_first_offset: pid for pid, e in entries.items() if e.in_transaction}
        self._unreplicated = []

    # -- the hot path -------------------------------------------------------

    def check(self, header: BatchHeader, *, verify_sequence: bool = True) -> tuple[int, int] | None:
        """None to append; (first_offset, last_offset) of the original for a duplicate.

        Raises InvalidProducerEpoch, InvalidTxnState or OutOfOrderSequence (see `validate`).
        """
        if not header.has_producer_id:
            return None
        outcome = validate(self._entries.get(header.producer_id), header, verify_sequence=verify_sequence)
        if outcome.is_duplicate:
            return (outcome.first_offset, outcome.last_offset)
        return None

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> None:
        """Raise InvalidProducerEpoch / TransactionCoordinatorFenced for a stale marker."""
        validate_marker(self._entries.get(producer_id), producer_id, producer_epoch, coordinator_epoch,
                        transaction_version)

    def update(self, header: BatchHeader, control: ControlRecord | None = None) -> CompletedTxn | None:
        """Record a batch as written at its real offsets (`control`: the record of a control
        batch). Never raises for odd sequences. Returns the transaction a marker ended, if any."""
        completed = None
        if header.has_producer_id:
            pid = header.producer_id
            before = self._entries.get(pid)
            after = self._entries[pid] = advance(before, header, control)
            if before is not None and before.in_transaction and not after.in_transaction:
                self._ongoing.pop(before.current_txn_first_offset, None)
                completed = CompletedTxn(pid, before.current_txn_first_offset, header.last_offset,
                                         control is not None and control.type == ABORT)
                self._unreplicated.append(completed)
            elif after.in_transaction and (before is None or not before.in_transaction):
                self._ongoing[after.current_txn_first_offset] = pid
        self._last_offset = max(self._last_offset, header.last_offset)
        return completed

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest open transaction, or None."""
        ongoing = list(self._ongoing)
        return min(ongoing) if ongoing else None

    def first_unstable_offset(self) -> int | None:
        """The LSO bound: the oldest open transaction's first offset, or that of a decided one
        whose marker the high watermark has not passed yet; None if neither exists."""
        # Copies first: compaction asks from a worker thread while the event loop appends.
        candidates = list(self._ongoing)
        unreplicated = self._unreplicated
        if unreplicated:
            candidates.append(min(t.first_offset for t in unreplicated))
        return min(candidates) if candidates else None

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget decided transactions whose marker is below the high watermark."""
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]

    def ongoing_transactions(self) -> Mapping[int, int]:
        """First offset -> producer id of every open transaction."""
        return MappingProxyType(self._ongoing)

    def producers(self) -> Mapping[int, ProducerEntry]:
        return MappingProxyType(self._entries)

    def last_offset(self) -> int:
        """Offset of the last batch applied (-1 if none); after `load`, the loaded offset - 1."""
        return self._last_offset

    # -- snapshots ----------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        if not self._dir.is_dir():
            return []
        offsets = (_snapshot_offset(p) for p in self._dir.iterdir())
        return sorted(o for o in offsets if o is not None)

    def take_snapshot(self, offset: int) -> None:
        """Persist the current state as the state after every batch below `offset`.

        Written to a temporary file, fsynced, then renamed, so a crash leaves
        either the old set of snapshots or the new one. Raises ValueError if a
        batch at or above `offset` has already been applied (the snapshot would lie).
        """
        if offset <= self._last_offset:
            raise ValueError(
                f"snapshot offset {offset} must be above the last applied offset {self._last_offset}"
            )
        final = snapshot_path(self._dir, offset)
        tmp = final.with_name(f"{offset:020d}{_TMP_SUFFIX}")
        atomic_write(final, encode_snapshot(offset, self._entries), tmp=tmp)

    def load(self, log_start_offset: int, log_end_offset: int, *, at_or_below: int | None = None) -> int:
        """Load the newest valid snapshot in [log_start_offset, log_end_offset] (and at or
        below `at_or_below`, when the caller must replay from there: a transaction index rebuild).

        Snapshots above `log_end_offset` describe batches that no longer exist
        and are deleted, as are corrupt ones (a torn write falls back to an older
        snapshot or to full replay). Returns the offset the caller must replay
        batch headers from: the snapshot's offset, or `log_start_offset` if none.
        """
        self._delete_matching(lambda o: o > log_end_offset)
        for tmp in self._dir.glob(f"*{_TMP_SUFFIX}") if self._dir.is_dir() else ():
            tmp.unlink(missing_ok=True)  # a snapshot write that never completed
        for offset in reversed(self.snapshot_offsets()):
            if at_or_below is not None and offset > at_or_below:
                continue
            if offset < log_start_offset:
                break
            path = snapshot_path(self._dir, offset)
            try:
                stored_offset, entries = decode_snapshot(path.read_bytes())
                if stored_offset != offset:
                    raise CorruptSnapshot(f"file {path.name} holds offset {stored_offset}")
            except (CorruptSnapshot, OSError) as exc:
                _log.warning("producer_state.snapshot_corrupt", path=str(path), error=str(exc))
                path.unlink(missing_ok=True)
                continue
            self._set_entries(entries)
            self._last_offset = offset - 1
            return offset
        self._set_entries({})
        self._last_offset = log_start_offset - 1
        return log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int:
        """After the log was truncated to [start, end): drop out-of-range snapshots and reload."""
        self._delete_matching(lambda o: o < log_start_offset or o > log_end_offset)
        return self.load(log_start_offset, log_end_offset)

    def delete_snapshots_below(self, offset: int) -> None:
        """Delete snapshots whose offset is below `offset` (e.g. the new log start offset)."""
        self._delete_matching(lambda o: o < offset)

    def _delete_matching(self, predicate: Callable[[int], bool]) -> None:
        deleted = False
        for offset in self.snapshot_offsets():
            if predicate(offset):
                snapshot_path(self._dir, offset).unlink(missing_ok=True)
                deleted = True
        if deleted:
            fsync_dir(self._dir)

