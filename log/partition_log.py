"""The on-disk log of one partition, in Kafka's layout. Synchronous: no trio, no threads.

Layout of `<log dir>/<topic>-<partition>/`:

    00000000000000000000.log         batches, byte for byte as appended
    00000000000000000000.index       sparse offset index (log.offset_index)
    00000000000000000000.timeindex   sparse time index (log.time_index)
    00000000000000000000.txnindex    aborted transactions whose marker is here (log.txn_index)
    00000000000000000000.snapshot    producer state (log.producer_state)
    leader-epoch-checkpoint          epoch -> start offset (log.leader_epoch_cache)
    recovery-point-offset-checkpoint offset below which everything is fsynced
    log-start-offset-checkpoint      first offset still visible (DeleteRecords / retention)

Difference from Kafka: Kafka keeps the recovery-point and log-start
checkpoints once per log *directory* for all partitions; we keep one of each
per *partition* directory, in the same text format (`0`, `1`, `<topic>
<partition> <offset>`), so a partition directory is self-contained.

Durability: appends do not fsync unless `flush.messages` / `flush.ms` say so
(replication is the durability mechanism, as in Kafka); rolls and `close`
flush. `flush` advances the recovery point.

Opening and crash recovery (`open`) are the log loader's (`log.log_loader`: the torn
tail cut, damaged or orphaned bytes set aside as `.stray` files, never deleted, the
leader epochs and the producer state rebuilt); compaction is the cleaner's
(`log.cleaner.clean_log`), which hands each cleaned segment back to `replace_segment`.

Corruption below the recovery point that happens while the log is open:
`read` checks each served batch's header (length, magic) -- a bad one raises
CorruptRecord and is logged as `log.corrupt_batch`, never served -- but does
not recompute CRCs, which would cost a pass over every fetched byte on the
hot path. Consumers verify CRCs themselves; `verify_segments()` (used by tests
and `raftka log dump`) checks every CRC on demand.

Other documented choices:
- `truncate_to(offset)` cuts at batch boundaries: a batch straddling `offset`
  goes whole and the log end becomes that batch's base offset (Kafka sets the
  log end to `offset` itself, leaving a gap). If that would leave nothing at
  or above the log start, the log restarts empty at `offset`.
- A follower append must start exactly at the log end, except on compacted
  topics where compaction legitimately leaves gaps (then >= log end).
- Deleted segments (retention, truncation, compaction) are renamed to
  `.deleted` and removed after `file.delete.delay.ms`, so file slices already
  handed to a fetch stay readable; `close` removes them at once.
- An empty closed segment (compaction can leave one) counts as expired for
  time retention.
- `segment.ms` counts from the wall-clock time of the segment's first append
  (`now_ms`); after a restart, from the first batch's maxTimestamp (Kafka's rule).

Transactions: every batch written (leader, follower, replay) goes through the
producer state, which tracks each producer's open transaction; a COMMIT/ABORT
marker (`append_marker` on the leader) ends it, and an ABORT of a non-empty
transaction adds an entry to the `.txnindex` of the segment holding the
marker. `first_unstable_offset` bounds the last stable offset (the broker takes
the min with its high watermark); `collect_aborted_txns` answers a
read_committed fetch. A `.txnindex` is rebuilt by the loader when its
segment was recovered or the file is missing or corrupt.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import structlog

from raftka.log.append_origin import AppendOrigin
from raftka.log.batch_header import (
    ATTR_CODEC_MASK,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BatchHeader,
    parse_header,
    set_base_offset,
    set_max_timestamp_and_crc,
    set_partition_leader_epoch,
    verify_crc,
)
from raftka.log.checkpoint import fsync_dir, write_offsets
from raftka.log.cleaner import CompactionStats, clean_log
from raftka.log.config import LONG_MAX, LogConfig
from raftka.log.control_record import ControlRecord, encode_marker
from raftka.log.errors import (
    CorruptRecord,
    InvalidRecord,
    LogError,
    OffsetOutOfRange,
    OutOfOrderSequence,
    RecordTooLarge,
)
from raftka.log.leader_epoch_cache import LeaderEpochCache
from raftka.log.log_loader import (
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    control_record,
    load_log,
    rebuild_producer_state,
    segment_index,
    set_segment_aside,
    track_batch,
)
from raftka.log.producer_state import ProducerStateManager
from raftka.log.record_batch import decode_batch, encode_batch
from raftka.log.record_validator import UNCOMPRESSED_BOUND_FACTOR, validate_records
from raftka.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_stem,
)
from raftka.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from raftka.log.txn_index import collect as collect_txn_entries

_log = structlog.get_logger(__name__)

# baseOffset .. magic: the bytes a leader rewrites (offset, leader epoch) ahead of the CRC.
_REWRITTEN_PREFIX = 17


class OffsetsNotContiguous(InvalidRecord):
    """A follower append whose offsets do not continue the log (Kafka: UnexpectedAppendOffset)."""


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime
    log_start_offset: int
    duplicate: bool
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class FileSlice:
    """Bytes [position, position + length) of a segment file: whole batches, ready for os.sendfile.

    `file` stays open until the segment is deleted (after `file.delete.delay.ms`) or the log is closed.
    """

    path: Path
    file: BinaryIO
    position: int
    length: int

    def read(self) -> bytes:
        return os.pread(self.file.fileno(), self.length, self.position)


@dataclass(frozen=True, slots=True)
class ReadInfo:
    slices: tuple[FileSlice, ...]
    first_offset: int  # base offset of the first batch returned (the requested offset if none)
    next_offset: int  # offset after the last batch returned (the requested offset if none)
    log_start_offset: int
    log_end_offset: int

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)

    def read_bytes(self) -> bytes:
        return b"".join(s.read() for s in self.slices)


@dataclass(frozen=True, slots=True)
class CorruptBatchReport:
    segment_base_offset: int
    path: Path
    error: str


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


class PartitionLog:
    """Append, read, truncate and retain one partition's segments.

    `open` loads it (`log.log_loader`); `compact` runs the cleaner over it (`log.cleaner`)."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager,
        now_ms: int,
    ) -> None:
        """Use `PartitionLog.open`."""
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self._segments = segments
        self.config = config
        self._log_start_offset = log_start_offset
        self._checkpointed: tuple[int, int] | None = None  # (recovery point, log start) on disk
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state
        self._recovery_point = self.log_end_offset
        self._last_flush_ms = now_ms
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._closed = False
        # Set by an owner that fsyncs rolled segments itself, off its event loop (the broker):
        # `roll` then calls it instead of fsyncing the old segment in place (see `flush_rolled`).
        self.on_roll: Callable[[], None] | None = None
        self._roll_flush_to = 0  # rolled segments below this offset still await their fsync
        self._checkpoint_lock = threading.Lock()

    # -- opening ------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: Path, topic: str, partition: int, config: LogConfig, *, now_ms: int | None = None,
        verify_flushed: bool = True,
    ) -> PartitionLog:
        """Open (or create) `<directory>/<topic>-<partition>/`, recovering from a crash if needed.

        Segments after the recovery point are recovered (torn tail cut, indexes rebuilt).
        With `verify_flushed`, the CRC of every batch below it is checked too: a corrupt
        batch in an already-flushed segment is reported loudly (`log.corrupt_batch`) and the
        log is cut there, so it is never served — a replica refetches the rest from its
        leader, exactly as after a torn write.
        """
        now = _now(now_ms)
        loaded = load_log(directory, topic, partition, config, verify_flushed=verify_flushed)
        log = cls(loaded.dir, topic, partition, config, loaded.segments, loaded.log_start_offset,
                  loaded.epoch_cache, loaded.producer_state, now)
        log._checkpointed = loaded.checkpointed
        log._write_checkpoints()
        _log.info(
            "log.opened",
            topic=topic,
            partition=partition,
            segments=len(loaded.segments),
            log_start_offset=loaded.log_start_offset,
            log_end_offset=log.log_end_offset,
            recovered=loaded.recovered,
        )
        return log

    def _replay_producer_state(self, from_offset: int) -> None:
        rebuild_producer_state(self._segments, self.producer_state, from_offset, self.topic, self.partition)

    def _control_record(self, buf: bytes | bytearray | memoryview, header: BatchHeader) -> ControlRecord | None:
        return control_record(buf, header, self.topic, self.partition)

    def _track(self, header: BatchHeader, control: ControlRecord | None, segment: LogSegment) -> None:
        track_batch(self.producer_state, header, control, segment)

    def _iter_headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Headers of every batch whose last offset is >= `offset`, in log order."""
        for segment in self._segments[self._segment_index(offset) :]:
            first = segment.find_batch(offset)
            if first is not None:
                yield from segment.iter_headers(first.position)

    # -- state ----------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A topic config change: takes effect from the next append / roll / retention run."""
        self._config = config
        for segment in getattr(self, "_segments", ()):
            segment.config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def _segment_index(self, offset: int) -> int:
        return segment_index(self._segments, offset)

    # -- appending ------------------------------------------------------------

    def append(
        self, batch_bytes: bytes | bytearray | memoryview, leader_epoch: int, *, now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT, first_header: BatchHeader | None = None,
    ) -> AppendInfo:
        """Append a producer's batches as leader: validate, dedupe, assign offsets, write once.

        Every record of every batch is walked first (`log.record_validator`).
        Raises CorruptRecord (bad length/CRC, undecodable compressed data),
        InvalidRecord (wrong magic, control batch, inconsistent counts, a
        malformed record: its `record_index` says which), RecordTooLarge (a
        batch above `max.message.bytes`, or inflating past its bound),
        InvalidProducerEpoch / OutOfOrderSequence. On any error nothing is
        written. A retried batch already in the log is not
        written again: the result has `duplicate=True` and the original offsets.
        `origin` (log/append_origin.py): CLIENT, or COORDINATOR for a coordinator's own
        write (TxnOffsetCommit), whose sequences are not checked. REPLICATION batches go
        through `append_as_follower`, which keeps their offsets. `first_header`: the first
        batch's header, if the caller parsed it from these bytes already (not parsed twice).
        """
        if origin is AppendOrigin.REPLICATION:
            raise ValueError(f"{self.topic}-{self.partition}: append() is the leader's; replicated batches "
                             "go through append_as_follower")
        self._check_open()
        now = _now(now_ms)
        view = memoryview(batch_bytes).cast("B")
        headers = self._validate(view, origin, first_header)
        target = self.config.target_codec
        if target is not None and any(h.attributes & ATTR_CODEC_MASK != target for h in headers):
            view = memoryview(self._recompress(view, headers, target))
            headers = self._validate(view, origin)
        headers, duplicate = self._dedupe(view, headers, origin.verifies_sequence)
        if not headers:
            assert duplicate is not None
            return AppendInfo(duplicate[0], duplicate[1], -1, self._log_start_offset, True, -1)
        first_offset = self.log_end_offset
        if self.config.log_append_time:
            written = self._write(self._rewrite_for_log_append_time(view, headers, first_offset, leader_epoch, now),
                                  now)
        else:
            written = self._write_rewritten(view, headers, first_offset, leader_epoch, now)
        if leader_epoch >= 0 and leader_epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(leader_epoch, first_offset)
        for header in written:
            self.producer_state.update(header)  # client batches: data only, no marker
        self._maybe_flush(now)
        return AppendInfo(
            first_offset=first_offset,
            last_offset=written[-1].last_offset,
            log_append_time=now if self.config.log_append_time else -1,
            log_start_offset=self._log_start_offset,
            duplicate=False,
            max_timestamp=max(h.max_timestamp for h in written),
        )

    def append_as_follower(
        self, batch_bytes: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> AppendInfo:
        """Append batches replicated from the leader, keeping their offsets and epochs.

        The first batch must start at the log end offset (or, for a compacted
        topic, beyond it: compaction leaves gaps); offsets must increase.
        Raises OffsetsNotContiguous otherwise, CorruptRecord / InvalidRecord for
        bad batches; nothing is written on any error.
        """
        self._check_open()
        now = _now(now_ms)
        buf = bytes(batch_bytes)
        headers = self._validate(buf, AppendOrigin.REPLICATION)
        expected = self.log_end_offset
        for header in headers:
            if header.base_offset < expected or (
                header.base_offset > expected and not self.config.compact
            ):
                raise OffsetsNotContiguous(
                    f"{self.topic}-{self.partition}: follower batch at position {header.position} has "
                    f"base offset {header.base_offset}, expected {expected}"
                    + (" or above" if self.config.compact else "")
                )
            expected = header.next_offset
        written = self._write(buf, now)
        for header in written:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(epoch, header.base_offset)
            self._track(header, self._control_record(buf, header), self.active_segment)
        self._maybe_flush(now)
        return AppendInfo(
            first_offset=written[0].base_offset,
            last_offset=written[-1].last_offset,
            log_append_time=-1,
            log_start_offset=self._log_start_offset,
            duplicate=False,
            max_timestamp=max(h.max_timestamp for h in written),
        )

    def append_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      leader_epoch: int, *, now_ms: int | None = None, transaction_version: int = 0) -> AppendInfo:
        """Append a COMMIT/ABORT marker as leader (WriteTxnMarkers).

        Raises InvalidProducerEpoch for an epoch older than the producer's and
        TransactionCoordinatorFenced for a coordinator epoch older than its last marker's;
        nothing is written then. A marker for a producer with no open transaction here is
        still written (it ends nothing and adds no index entry), as in Kafka."""
        self._check_open()
        now = _now(now_ms)
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch, transaction_version)
        first_offset = self.log_end_offset
        buf = encode_marker(producer_id=producer_id, producer_epoch=producer_epoch,
                            coordinator_epoch=coordinator_epoch, commit=commit, timestamp_ms=now,
                            base_offset=first_offset, partition_leader_epoch=leader_epoch)
        written = self._write(buf, now)
        if leader_epoch >= 0 and leader_epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(leader_epoch, first_offset)
        for header in written:
            self._track(header, self._control_record(buf, header), self.active_segment)
        self._maybe_flush(now)
        return AppendInfo(first_offset, written[-1].last_offset, -1, self._log_start_offset, False, now)

    # -- transactions: the last stable offset and the aborted transactions ----------

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet decided and replicated, or None
        (the last stable offset is the min of this and the high watermark)."""
        return self.producer_state.first_unstable_offset()

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's LSO: min(high watermark, first unstable offset), never below the log start."""
        unstable = self.first_unstable_offset()
        lso = high_watermark if unstable is None else min(high_watermark, unstable)
        return max(lso, min(self._log_start_offset, high_watermark))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions that may cover data in [fetch_offset, upper_bound): every
        `.txnindex` entry from the segment holding `fetch_offset` on, until one proves the rest
        cannot (Kafka's collectAbortedTransactions)."""
        found: list[AbortedTxn] = []
        for segment in self._segments[self._segment_index(fetch_offset) :]:
            if segment.txn_index is None:
                continue
            entries, complete = collect_txn_entries(segment.txn_index.entries, fetch_offset, upper_bound)
            found.extend(entries)
            if complete:
                break
        return found

    def _write_rewritten(self, view: memoryview, headers: list[BatchHeader], first_offset: int,
                         leader_epoch: int, now: int) -> list[BatchHeader]:
        """Write the batches with baseOffset and partitionLeaderEpoch rewritten, without copying
        their records: each batch is a fresh 17-byte prefix plus a view of the rest (both
        fields lie outside the CRC, so nothing else changes)."""
        pieces: list[bytes | bytearray | memoryview] = []
        final: list[BatchHeader] = []
        offset = first_offset
        position = 0
        for header in headers:
            start = header.position
            prefix = bytearray(view[start : start + _REWRITTEN_PREFIX])
            set_base_offset(prefix, 0, offset)
            set_partition_leader_epoch(prefix, 0, leader_epoch)
            pieces.append(prefix)
            pieces.append(view[start + _REWRITTEN_PREFIX : start + header.size])
            final.append(dataclasses.replace(header, base_offset=offset, partition_leader_epoch=leader_epoch,
                                             position=position))
            offset += header.last_offset_delta + 1
            position += header.size
        return self._write_pieces(pieces, final, position, now)

    def _recompress(self, view: memoryview, headers: list[BatchHeader], target: int) -> bytes:
        """Kafka's rule for a topic whose compression.type is a codec: a batch that arrives
        compressed otherwise is decoded and encoded again with the topic's codec (the records,
        their offsets deltas, timestamps and the producer id, epoch and sequence unchanged).
        The batches were validated first, so decoding them is bounded."""
        out = []
        for h in headers:
            if h.attributes & ATTR_CODEC_MASK == target:
                out.append(bytes(view[h.position : h.position + h.size]))
                continue
            batch = decode_batch(view, h.position, verify_crc=False)
            out.append(encode_batch(
                batch.records, base_offset=h.base_offset, compression=target, producer_id=h.producer_id,
                producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                partition_leader_epoch=h.partition_leader_epoch,
                log_append_time=bool(h.attributes & ATTR_TIMESTAMP_TYPE),
                transactional=bool(h.attributes & ATTR_TRANSACTIONAL), base_timestamp=h.base_timestamp,
                last_offset_delta=h.last_offset_delta))
        return b"".join(out)

    def _rewrite_for_log_append_time(self, view: memoryview, headers: list[BatchHeader], first_offset: int,
                                     leader_epoch: int, now: int) -> bytearray:
        """LogAppendTime changes maxTimestamp, inside the CRC: copy, rewrite, recompute the CRC."""
        buf = bytearray(b"".join(view[h.position : h.position + h.size] for h in headers))
        offset = first_offset
        position = 0
        for header in headers:
            set_base_offset(buf, position, offset)
            set_partition_leader_epoch(buf, position, leader_epoch)
            attributes = int.from_bytes(buf[position + 21 : position + 23], "big", signed=True)
            buf[position + 21 : position + 23] = (attributes | ATTR_TIMESTAMP_TYPE).to_bytes(2, "big", signed=True)
            set_max_timestamp_and_crc(buf, position, now)
            offset += header.last_offset_delta + 1
            position += header.size
        return buf

    def _validate(self, buf: bytes | bytearray | memoryview, origin: AppendOrigin,
                  first_header: BatchHeader | None = None) -> list[BatchHeader]:
        if not buf:
            raise InvalidRecord(f"{self.topic}-{self.partition}: append of 0 bytes, expected at least one batch")
        headers = []
        position = 0
        while position < len(buf):
            header = first_header if position == 0 and first_header is not None else parse_header(buf, position)
            if origin.validates_records:
                if header.size > self.config.max_message_bytes:
                    raise RecordTooLarge(
                        f"{self.topic}-{self.partition}: batch at position {position} is {header.size} bytes, "
                        f"above max.message.bytes {self.config.max_message_bytes}"
                    )
                if header.is_control:
                    raise InvalidRecord(
                        f"{self.topic}-{self.partition}: batch at position {position} is a control batch; "
                        "clients may not write control batches"
                    )
                if header.has_producer_id and header.base_sequence < 0:
                    raise InvalidRecord(
                        f"{self.topic}-{self.partition}: batch at position {position} has producer id "
                        f"{header.producer_id} but base sequence {header.base_sequence}, expected >= 0"
                    )
                if header.record_count != header.last_offset_delta + 1:
                    raise InvalidRecord(
                        f"{self.topic}-{self.partition}: batch at position {position} has record count "
                        f"{header.record_count} but last offset delta {header.last_offset_delta}, "
                        f"expected {header.record_count - 1}"
                    )
            verify_crc(buf, header)
            if origin.validates_records:
                # A CRC proves the bytes are the producer's, not that they parse: walk the
                # records so a malformed one is refused here, not stored to stop every
                # consumer at its offset (followers get only batches that passed this).
                validate_records(buf, header, max_uncompressed=self.max_uncompressed_batch_bytes,
                                 require_keys=self.config.compact,
                                 max_record_body=self.config.max_decompressed_message_bytes)
            headers.append(header)
            position += header.size
        return headers

    @property
    def max_uncompressed_batch_bytes(self) -> int:
        """How far a compressed batch from a client may inflate to be validated."""
        return UNCOMPRESSED_BOUND_FACTOR * self.config.max_message_bytes

    def _dedupe(
        self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader], verify_sequence: bool = True
    ) -> tuple[list[BatchHeader], tuple[int, int] | None]:
        """Drop batches the producer state says are retries; check sequences first (no side effects).

        Returns the batches to write and the (first, last) offsets of the duplicates, if any.
        """
        keep: list[BatchHeader] = []
        duplicate: tuple[int, int] | None = None
        seen: dict[int, BatchHeader] = {}
        for header in headers:
            if not header.has_producer_id:
                keep.append(header)
                continue
            previous = seen.get(header.producer_id)
            if previous is None:
                original = self.producer_state.check(header, verify_sequence=verify_sequence)
                if original is not None:
                    duplicate = original if duplicate is None else (duplicate[0], original[1])
                    continue
            elif header.producer_epoch != previous.producer_epoch or (verify_sequence and header.base_sequence != (
                (previous.last_sequence + 1) % (1 << 31)
            )):
                # Two batches of one producer in one append: the second must follow the first.
                raise OutOfOrderSequence(
                    f"producer {header.producer_id}: batch at position {header.position} has epoch "
                    f"{header.producer_epoch} sequence {header.base_sequence}, expected epoch "
                    f"{previous.producer_epoch} sequence {(previous.last_sequence + 1) % (1 << 31)}"
                )
            seen[header.producer_id] = header
            keep.append(header)
        return keep, duplicate

    def _write(self, buf: bytes | bytearray, now: int) -> list[BatchHeader]:
        """Roll if needed, write `buf` (whole batches, final offsets) to the active segment."""
        headers = []
        position = 0
        while position < len(buf):
            header = parse_header(buf, position)
            headers.append(header)
            position += header.size
        return self._write_pieces([buf], headers, len(buf), now)

    def _write_pieces(self, pieces: list, headers: list[BatchHeader], length: int, now: int) -> list[BatchHeader]:
        """Roll if needed, write `length` bytes of whole batches (final offsets) to the active segment."""
        segment = self.active_segment
        assert segment.index is not None and segment.time_index is not None
        if segment.size > 0 and (
            segment.size + length > self.config.segment_bytes
            or (segment.rolling_base_ms is not None and now - segment.rolling_base_ms > self.config.segment_ms)
            or segment.index.is_full
            or segment.time_index.is_full
            or headers[-1].last_offset - segment.base_offset > MAX_RELATIVE_OFFSET
        ):
            segment = self.roll(now_ms=now, first_offset=headers[0].base_offset)
        segment.append_pieces(pieces, headers, length, now)
        return headers

    def _maybe_flush(self, now: int) -> None:
        if self.log_end_offset - self._recovery_point >= self.config.flush_messages or (
            self.config.flush_ms != LONG_MAX and now - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush(now_ms=now)

    def roll(self, *, now_ms: int | None = None, first_offset: int | None = None) -> LogSegment:
        """Close the active segment and start a new one at the log end offset.

        A no-op when the active segment is empty. The old segment is flushed,
        its time index finalized, and the producer state snapshotted.
        """
        self._check_open()
        old = self.active_segment
        if old.size == 0:
            return old
        base = self.log_end_offset if first_offset is None else first_offset
        old.finalize_time_index()
        deferred = self.on_roll is not None
        if not deferred:
            old.flush()
        segment = self._new_segment(base)
        self._segments.append(segment)
        self.producer_state.take_snapshot(base)
        if deferred:
            # Up to `segment.bytes` to fsync: the owner calls `flush_rolled` in a worker thread.
            self._roll_flush_to = max(self._roll_flush_to, old.next_offset)
            assert self.on_roll is not None
            self.on_roll()
        else:
            self._recovery_point = old.next_offset
            self._write_checkpoints()
        _log.info("log.segment.rolled", topic=self.topic, partition=self.partition, base_offset=base)
        return segment

    def _new_segment(self, base: int) -> LogSegment:
        log_path = self.dir / (file_stem(base) + LOG_SUFFIX)
        if log_path.exists() and log_path.stat().st_size:  # not in the log, yet not ours to delete
            set_segment_aside(self.dir, base, "a new segment starts at its base offset")
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            (self.dir / (file_stem(base) + suffix)).unlink(missing_ok=True)
        segment = LogSegment(self.dir, base, self.config)
        segment.recover()  # opens empty indexes
        return segment

    # -- reading --------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> ReadInfo:
        """Whole batches from the one holding `offset`, as file slices.

        At most `max_bytes`, except that the first batch is always returned
        whole; batches starting at or beyond `max_offset` (exclusive, e.g. the
        high watermark) are left out. `offset == log_end_offset` gives an empty
        result. Raises OffsetOutOfRange outside [log_start_offset,
        log_end_offset], CorruptRecord if a batch header on disk is damaged.
        """
        self._check_open()
        start, end = self._log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRange(
                f"{self.topic}-{self.partition}: offset {offset} is outside the log range [{start}, {end}]"
            )
        slices: list[FileSlice] = []
        first_offset = next_offset = offset
        remaining = max_bytes
        cursor = offset
        for segment in self._segments[self._segment_index(offset) :]:
            try:
                found = segment.read(cursor, remaining, max_offset, min_one=not slices)
            except CorruptRecord as exc:
                _log.error(
                    "log.corrupt_batch",
                    topic=self.topic,
                    partition=self.partition,
                    segment=segment.log_path.name,
                    offset=cursor,
                    error=str(exc),
                )
                raise
            if found is None:
                continue
            if found.length:
                if not slices:
                    first_offset = found.first_offset
                slices.append(FileSlice(segment.log_path, segment.file, found.position, found.length))
                remaining -= found.length
                next_offset = cursor = found.next_offset
            if found.stopped or remaining <= 0:
                break
        return ReadInfo(tuple(slices), first_offset, next_offset, start, end)

    def read_bytes(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """`read`, with the bytes copied out."""
        return self.read(offset, max_bytes, max_offset=max_offset).read_bytes()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`, or None.

        Finds the first batch whose maxTimestamp >= `timestamp` through the
        time index and a header scan, then decodes that one batch (ListOffsets
        is not the hot path) to find the exact record, as Kafka does.
        """
        found = self.batch_for_timestamp(timestamp)
        return None if found is None else self.record_for_timestamp(*found, timestamp)

    def batch_for_timestamp(self, timestamp: int) -> tuple[LogSegment, BatchHeader] | None:
        """`offset_for_timestamp`'s first half, on the owner's thread: the first batch whose
        maxTimestamp >= `timestamp` (in-memory indexes and a few headers)."""
        self._check_open()
        for segment in self._segments:
            if segment.max_timestamp < timestamp:
                continue
            header = segment.find_by_timestamp(timestamp)
            if header is None or header.last_offset < self._log_start_offset:
                continue
            return segment, header
        return None

    def record_for_timestamp(self, segment: LogSegment, header: BatchHeader, timestamp: int) -> tuple[int, int]:
        """`offset_for_timestamp`'s second half: read (pread) and decode the batch found. Safe in
        a worker thread while the owner appends, provided nothing truncates or deletes the
        segment meanwhile (the caller's per-partition lock)."""
        log_start = self._log_start_offset
        batch = decode_batch(segment.read_bytes(header.position, header.size))
        for record in batch.records:
            record_ts = header.max_timestamp if header.is_log_append_time else record.timestamp
            if record_ts is not None and record_ts >= timestamp and record.offset >= log_start:
                return record.offset, record_ts
        return max(header.base_offset, log_start), header.max_timestamp

    def verify_segments(self) -> list[CorruptBatchReport]:
        """Check every batch's length, magic and CRC; report (and log) each segment's first bad batch."""
        self._check_open()
        reports = []
        for segment in self._segments:
            try:
                for _ in segment.iter_headers(verify=True):
                    pass
            except CorruptRecord as exc:
                _log.error(
                    "log.corrupt_batch",
                    topic=self.topic,
                    partition=self.partition,
                    segment=segment.log_path.name,
                    error=str(exc),
                )
                reports.append(CorruptBatchReport(segment.base_offset, segment.log_path, str(exc)))
        return reports

    # -- durability -----------------------------------------------------------

    @property
    def roll_flush_pending(self) -> bool:
        return self._roll_flush_to > self._recovery_point or self.epoch_cache.dirty

    def flush_rolled(self) -> None:
        """Write a deferred leader-epoch checkpoint, fsync the segments rolled since the last
        flush and advance the recovery point past them (Kafka's roll-time
        `flushUptoOffsetExclusive`, scheduled off the append path).

        Safe in a worker thread while the owner appends on its own thread: rolled segments
        are never written again, and the checkpoint files are written under a lock. The owner
        must not truncate, compact or delete this log concurrently (a per-partition lock)."""
        if self._closed:
            return
        self.epoch_cache.flush_deferred()
        target = self._roll_flush_to
        if target <= self._recovery_point:
            return
        for segment in list(self._segments):
            if self._recovery_point < segment.next_offset <= target:
                segment.flush()
        self._recovery_point = max(self._recovery_point, min(target, self.log_end_offset))
        self._write_checkpoints()

    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync every segment holding data above the recovery point, then advance it."""
        self._check_open()
        for segment in self._segments:
            if segment.next_offset > self._recovery_point or segment is self.active_segment:
                segment.flush()
        self.epoch_cache.flush_deferred()  # the epochs of what the recovery point now covers
        self._recovery_point = self.log_end_offset
        self._last_flush_ms = _now(now_ms)
        self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        """Make the recovery point and log start durable, unless the files already say so.

        Each write is two fsyncs; a new, empty partition has nothing to say that a missing
        file does not (creating a 1000-partition topic spent most of its time here), and
        a flush that moved nothing need not rewrite them.
        """
        with self._checkpoint_lock:  # `flush_rolled` may write them from a worker thread
            current = (self._recovery_point, self._log_start_offset)
            if current == self._checkpointed:
                return
            key = (self.topic, self.partition)
            self._checkpointed = None  # unknown until both writes are done
            write_offsets(self.dir / RECOVERY_POINT_FILE, {key: current[0]})
            write_offsets(self.dir / LOG_START_FILE, {key: current[1]})
            self._checkpointed = current

    def close(self) -> None:
        """Flush, finalize the indexes, write checkpoints and a producer snapshot, close files."""
        if self._closed:
            return
        self.active_segment.finalize_time_index()
        self.flush()
        self.producer_state.take_snapshot(self.log_end_offset)
        for _, segment in self._pending_deletes:
            segment.close_and_delete()
        self._pending_deletes.clear()
        for segment in self._segments:
            segment.close()
        self._closed = True
        _log.info("log.closed", topic=self.topic, partition=self.partition, log_end_offset=self.log_end_offset)

    def close_for_delete(self) -> None:
        """Close the files without flushing anything: the log is about to be deleted
        (Kafka's `closeHandlers` before renaming a deleted partition's directory)."""
        if self._closed:
            return
        for _, segment in self._pending_deletes:
            segment.close()
        self._pending_deletes.clear()
        for segment in self._segments:
            segment.close()
        self._closed = True

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"{self.topic}-{self.partition}: the log is closed")

    # -- truncation -----------------------------------------------------------

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> None:
        """Drop every batch at or after `offset` (a batch straddling it goes whole).

        No-op if `offset >= log_end_offset`; below the log start it empties the
        log and restarts it at `offset`. Trims the epoch cache and producer state.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"truncation offset {offset} is negative, expected >= 0")
        if offset >= self.log_end_offset:
            return
        straddling = next(self._iter_headers_from(offset), None)
        if offset < self._log_start_offset or (
            straddling is not None and straddling.base_offset < self._log_start_offset
        ):
            # Nothing visible would remain below the cut: start afresh at `offset` (Kafka's rule
            # for targets below the log start; here also for a batch straddling the log start).
            self.truncate_fully_and_start_at(offset, now_ms=now_ms)
            return
        now = _now(now_ms)
        old_end = self.log_end_offset
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._schedule_delete(self._segments.pop(), now, "truncated")
        if self._segments[0].base_offset >= offset:
            self._schedule_delete(self._segments.pop(), now, "truncated")
            self._segments.append(self._new_segment(offset))
        else:
            self.active_segment.truncate_to(offset)
        new_end = self.log_end_offset
        self.epoch_cache.truncate_from_end(new_end)
        self._recovery_point = min(self._recovery_point, new_end)
        self._roll_flush_to = min(self._roll_flush_to, new_end)
        self._replay_producer_state(self.producer_state.truncate_and_reload(self._log_start_offset, new_end))
        self._write_checkpoints()
        _log.info(
            "log.truncated", topic=self.topic, partition=self.partition, old_end=old_end, new_end=new_end
        )

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete everything and restart the log, empty, at `offset` (start = end = `offset`)."""
        self._check_open()
        now = _now(now_ms)
        while self._segments:
            self._schedule_delete(self._segments.pop(), now, "truncated_fully")
        self._segments.append(self._new_segment(offset))
        self._log_start_offset = offset
        self._recovery_point = offset
        self._roll_flush_to = min(self._roll_flush_to, offset)
        self.epoch_cache.clear()
        self.producer_state.delete_snapshots_below(offset + 1)
        self.producer_state.truncate_and_reload(offset, offset)
        self._write_checkpoints()
        _log.info("log.truncated_fully", topic=self.topic, partition=self.partition, start_offset=offset)

    # -- retention --------------------------------------------------------------

    def increment_log_start_offset(self, offset: int, *, now_ms: int | None = None) -> None:
        """Move the log start forward (DeleteRecords); whole segments below it are deleted.

        Raises OffsetOutOfRange above the log end offset. A lower offset is a no-op.
        """
        self._check_open()
        if offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"{self.topic}-{self.partition}: new log start offset {offset} is above "
                f"the log end offset {self.log_end_offset}"
            )
        if offset <= self._log_start_offset:
            return
        self._log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        self._write_checkpoints()
        self._delete_segments(_now(now_ms), retention=False)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention: delete closed segments past `retention.ms`, over `retention.bytes`,
        or entirely below the log start offset. Never the active segment. Returns how many.

        An empty closed segment (compaction can leave one) counts as expired.
        """
        self._check_open()
        return self._delete_segments(_now(now_ms), retention=True)

    def _delete_segments(self, now: int, *, retention: bool) -> int:
        self._purge_deleted(now)
        config = self.config
        total = self.size
        deleted = 0
        while len(self._segments) > 1:
            segment, following = self._segments[0], self._segments[1]
            reason = None
            if following.base_offset <= self._log_start_offset:
                reason = "log_start_offset"
            elif not (retention and config.delete):
                break
            elif config.retention_ms >= 0 and (
                segment.size == 0 or now - segment.largest_timestamp() > config.retention_ms
            ):
                reason = "retention_ms"
            elif config.retention_bytes >= 0 and total - segment.size >= config.retention_bytes:
                reason = "retention_bytes"
            if reason is None:
                break
            self._segments.pop(0)
            total -= segment.size
            self._schedule_delete(segment, now, reason)
            deleted += 1
        if deleted:
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            self.epoch_cache.truncate_from_start(self._log_start_offset)
            self.producer_state.delete_snapshots_below(self._log_start_offset)
            self._write_checkpoints()
        return deleted

    def _schedule_delete(self, segment: LogSegment, now: int, reason: str) -> None:
        """Rename the segment's files to `.deleted`; remove them after `file.delete.delay.ms`
        so file slices already handed to readers stay readable meanwhile."""
        _log.info(
            "log.segment.deleted",
            topic=self.topic,
            partition=self.partition,
            base_offset=segment.base_offset,
            bytes=segment.size,
            reason=reason,
        )
        segment.rename_with_suffix(DELETED_SUFFIX)
        if self.config.file_delete_delay_ms == 0:
            segment.close_and_delete()
        else:
            self._pending_deletes.append((now + self.config.file_delete_delay_ms, segment))

    def _purge_deleted(self, now: int) -> None:
        with self._checkpoint_lock:  # compaction may append from a worker thread
            due = [s for deadline, s in self._pending_deletes if deadline <= now]
            self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now]
        for segment in due:
            segment.close_and_delete()

    # -- compaction -------------------------------------------------------------

    def compact(self, now_ms: int | None = None) -> CompactionStats:
        """Compact the closed segments (policy `compact`): see `log.cleaner.clean_log`, which
        chooses the segments, cleans them and hands each cleaned file to `replace_segment`."""
        self._check_open()
        return clean_log(self, _now(now_ms))

    def replace_segment(self, segment: LogSegment, cleaned_path: Path, now_ms: int) -> None:
        """Swap the fsynced `.log.cleaned` file `cleaned_path` in for `segment` (same base offset,
        same offsets): it is renamed `.log.swap`, the old `.log` goes through `.deleted`, and the
        indexes are rebuilt (Kafka's replaceSegments). A crash at any step is finished or undone
        by `open`."""
        swap_path = self.dir / (file_stem(segment.base_offset) + LOG_SUFFIX + SWAP_SUFFIX)
        os.replace(cleaned_path, swap_path)
        fsync_dir(self.dir)
        log_path = segment.log_path
        # The aborted transactions stay valid (offsets are kept): the replacement gets them.
        aborted = list(segment.txn_index.entries) if segment.txn_index is not None else []
        segment.rename_with_suffix(DELETED_SUFFIX)  # the indexes go with it: they are rebuilt
        os.replace(swap_path, log_path)
        fsync_dir(self.dir)
        replacement = LogSegment(self.dir, segment.base_offset, self.config)
        replacement.recover()
        replacement.txn_index_rebuild = False
        assert replacement.txn_index is not None
        for entry in aborted:
            replacement.txn_index.append(entry)
        replacement.finalize_time_index()
        replacement.flush()
        # One store: a reader on another thread sees the old segment (its files stay open
        # until `file.delete.delay.ms`) or the new one, both whole.
        self._segments[self._segments.index(segment)] = replacement
        if self.config.file_delete_delay_ms == 0:
            segment.close_and_delete()
        else:
            with self._checkpoint_lock:
                self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))
