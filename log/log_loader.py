"""Opening one partition's log directory: crash recovery, then the state rebuilt from the data
(Kafka's LogLoader). Synchronous: no trio, no threads. `PartitionLog.open` calls `load_log`.

Crash recovery: first what a crash interrupted is finished or undone (`.swap` files are
swapped in; `.cleaned`, `.deleted` and checkpoint `.tmp` files are removed). Segments
entirely below the recovery point (flushed) keep their indexes, which are sanity-checked,
and by default (`verify_flushed=True`) every batch in them is CRC-checked as well: a
corrupt batch there is logged (`log.corrupt_batch`) and the log is cut at it like a torn
tail, so it is never served and a replica refetches the rest from its leader. Opening a
log therefore reads all of its data once. From the first segment that reaches past the
recovery point (or whose index is missing or inconsistent, or that failed the CRC check)
on, every batch is checked (length, magic, CRC, offset order); the log is cut at the first
bad byte (`log.recovery.truncated`), and the indexes are rebuilt from the scan. Nothing is
deleted on that guess (a flipped bit is not a torn write: good batches may follow): the
bytes cut are copied to `<segment>.log.cut-at-byte-<pos>.<hex>.stray` first, and the later
segments, which no longer continue the log, are renamed `<segment>.log.<hex>.stray`
(`log.recovery.segment_set_aside`). Kafka deletes them; we keep them for an operator
(`raftka storage strays`).

Rebuilt from the data: the leader-epoch cache from the batch headers of every recovered
segment (all of them if its checkpoint was corrupt), and the producer state by replaying
the log from the newest usable producer snapshot. A `.txnindex` to rebuild (its segment
was recovered, or the file is missing or corrupt) is rebuilt by that replay, from a
snapshot at or below its segment.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from raftka.log.batch_header import BatchHeader
from raftka.log.checkpoint import CorruptCheckpoint, fsync_dir, read_offsets
from raftka.log.config import LogConfig
from raftka.log.control_record import ControlRecord, read_control_record
from raftka.log.errors import CorruptRecord, LogError
from raftka.log.leader_epoch_cache import FILE_NAME as LEADER_EPOCH_FILE
from raftka.log.leader_epoch_cache import LeaderEpochCache
from raftka.log.offset_index import CorruptIndex
from raftka.log.producer_state import ProducerStateManager
from raftka.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    STRAY_FILE_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_stem,
    parse_file_stem,
)
from raftka.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What `load_log` found and rebuilt: everything a PartitionLog is made of."""

    dir: Path  # <directory>/<topic>-<partition>
    segments: list[LogSegment]  # at least one; the last is the active segment
    log_start_offset: int
    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager
    checkpointed: tuple[int, int] | None  # (recovery point, log start) the files say; None if corrupt
    recovered: bool  # some segment was scanned batch by batch (past the recovery point, or damaged)


def load_log(directory: Path, topic: str, partition: int, config: LogConfig, *,
             verify_flushed: bool = True) -> LoadedLog:
    """Open (or create) `<directory>/<topic>-<partition>/`: recover its segments, rebuild the
    leader epochs and the producer state (see the module docstring). Raises OSError if the
    directory cannot be read or written; damaged data is cut and set aside, never raised."""
    part_dir = Path(directory) / f"{topic}-{partition}"
    part_dir.mkdir(parents=True, exist_ok=True)
    finish_interrupted_operations(part_dir)
    key = (topic, partition)
    recovery_point, rp_clean = read_offset(part_dir / RECOVERY_POINT_FILE, key, 0)
    log_start, ls_clean = read_offset(part_dir / LOG_START_FILE, key, 0)
    # What the checkpoint files say (a missing file says the default), if they read cleanly.
    on_disk = (recovery_point, log_start) if rp_clean and ls_clean else None
    try:
        epoch_cache = LeaderEpochCache(part_dir / LEADER_EPOCH_FILE)
    except CorruptCheckpoint as exc:
        _log.warning("log.epoch_cache.corrupt", dir=str(part_dir), error=str(exc))
        (part_dir / LEADER_EPOCH_FILE).unlink()
        epoch_cache = LeaderEpochCache(part_dir / LEADER_EPOCH_FILE)
        recovery_point = 0  # rebuild the epochs from every batch header

    segments, recovering = _recover_segments(part_dir, topic, partition, config, recovery_point, epoch_cache,
                                             verify_flushed)
    if not segments:
        segment = LogSegment(part_dir, log_start, config)
        segment.recover()
        segments.append(segment)
    for segment in segments:
        if segment.next_offset > recovery_point:
            segment.flush()

    log_end = segments[-1].next_offset
    log_start = min(max(log_start, segments[0].base_offset), log_end)
    epoch_cache.truncate_from_end(log_end)
    epoch_cache.truncate_from_start(log_start)
    producer_state = ProducerStateManager(part_dir)
    rebuild = [s for s in segments if s.txn_index_rebuild]
    # A `.txnindex` to rebuild: replay from a snapshot at or below its segment, so every
    # transaction its markers end is known (the replay re-adds the entries of the others
    # only past their last one, see TransactionIndex.append).
    replay_from = producer_state.load(log_start, log_end, at_or_below=rebuild[0].base_offset if rebuild else None)
    rebuild_producer_state(segments, producer_state, replay_from, topic, partition)
    for segment in rebuild:
        segment.txn_index_rebuild = False
        if segment.txn_index is not None and segment.txn_index.entries:
            _log.info("log.txn_index.rebuilt", topic=topic, partition=partition,
                      segment=segment.log_path.name, entries=len(segment.txn_index.entries))
    return LoadedLog(part_dir, segments, log_start, epoch_cache, producer_state, on_disk, recovering)


def _recover_segments(part_dir: Path, topic: str, partition: int, config: LogConfig, recovery_point: int,
                      epoch_cache: LeaderEpochCache, verify_flushed: bool) -> tuple[list[LogSegment], bool]:
    """The segments that continue the log, in order, recovered where needed (and whether any was);
    the epochs of every recovered batch go into `epoch_cache`."""
    bases = sorted(
        base
        for p in part_dir.iterdir()
        if p.name.endswith(LOG_SUFFIX) and (base := parse_file_stem(p.name)) is not None
    )
    segments: list[LogSegment] = []
    recovering = False
    for i, base in enumerate(bases):
        segment = LogSegment(part_dir, base, config)
        segments.append(segment)
        if not recovering:
            try:
                segment.load()
                if segment.next_offset <= recovery_point:
                    if not verify_flushed or crc_valid(segment, topic, partition):
                        continue
                    recovering = True  # cut this flushed segment at its first bad batch
            except (CorruptIndex, LogError) as exc:
                _log.info("log.index.rebuild", segment=segment.log_path.name, reason=str(exc))
            else:
                recovering = True
        truncated = segment.recover(keep_cut=True)
        for header in segment.iter_headers():
            if header.partition_leader_epoch > epoch_cache.latest_epoch:
                epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        if i < len(bases) - 1:
            segment.finalize_time_index()
        if truncated:
            _log.warning(
                "log.recovery.truncated",
                topic=topic,
                partition=partition,
                segment=segment.log_path.name,
                bytes=truncated,
                valid_bytes=segment.size,
            )
            # The later segments no longer continue the log, but they may hold acknowledged
            # records (a flipped bit is not a torn write): set aside, never deleted. Their
            # indexes are derived from them and go.
            for later in bases[i + 1 :]:
                set_segment_aside(part_dir, later)
            break
    return segments, recovering


# -- the producer state, rebuilt from the batches -------------------------------------------


def segment_index(segments: Sequence[LogSegment], offset: int) -> int:
    """The index of the segment that holds `offset` (the first one if `offset` is below them all)."""
    return max(0, bisect_right([s.base_offset for s in segments], offset) - 1)


def rebuild_producer_state(segments: Sequence[LogSegment], producer_state: ProducerStateManager,
                           from_offset: int, topic: str, partition: int) -> None:
    """Replay the batches from `from_offset` into the producer state (and the markers'
    aborted transactions into their segments' `.txnindex`)."""
    for segment in segments[segment_index(segments, from_offset) :]:
        first = segment.find_batch(from_offset)
        if first is None:
            continue
        for header in segment.iter_headers(first.position):
            control = None
            if header.is_control:
                batch = segment.read_bytes(header.position, header.size)
                control = control_record(batch, dataclasses.replace(header, position=0), topic, partition)
            track_batch(producer_state, header, control, segment)


def control_record(buf: bytes | bytearray | memoryview, header: BatchHeader, topic: str,
                   partition: int) -> ControlRecord | None:
    """The record of the control batch `header` (at `header.position` in `buf`); None (logged)
    if it does not parse: it then ends no transaction, as Kafka would not read it either."""
    if not header.is_control:
        return None
    try:
        return read_control_record(buf, header)
    except LogError as exc:
        _log.warning("log.control_record_unreadable", topic=topic, partition=partition,
                     offset=header.base_offset, error=str(exc))
        return None


def track_batch(producer_state: ProducerStateManager, header: BatchHeader, control: ControlRecord | None,
                segment: LogSegment) -> None:
    """Apply a written batch to the producer state; an aborted transaction goes to the index of
    `segment` (the one holding its marker)."""
    completed = producer_state.update(header, control)
    if completed is not None and completed.is_aborted:
        assert segment.txn_index is not None
        undecided = producer_state.first_undecided_offset()
        lso = undecided if undecided is not None else completed.last_offset + 1
        segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                            completed.last_offset, lso))


# -- files ------------------------------------------------------------------------------------


def set_segment_aside(part_dir: Path, base: int, reason: str = "it follows a segment cut by recovery") -> None:
    """Rename the segment's `.log` to `<name>.<hex>.stray` (kept for an operator: `raftka storage
    strays`) and remove its indexes, which are rebuilt from a log and useless without it."""
    log_path = part_dir / (file_stem(base) + LOG_SUFFIX)
    target = log_path.with_name(f"{log_path.name}.{uuid.uuid4().hex[:8]}{STRAY_FILE_SUFFIX}")
    size = log_path.stat().st_size
    os.replace(log_path, target)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        (part_dir / (file_stem(base) + suffix)).unlink(missing_ok=True)
    fsync_dir(part_dir)
    _log.warning("log.recovery.segment_set_aside", segment=log_path.name, renamed_to=target.name, bytes=size,
                 reason=reason, action="kept; see `raftka storage strays`")


def crc_valid(segment: LogSegment, topic: str, partition: int) -> bool:
    """Every batch of a flushed segment passes its CRC check (a failure is logged as an error)."""
    try:
        for _ in segment.iter_headers(verify=True):
            pass
    except CorruptRecord as exc:
        _log.error("log.corrupt_batch", topic=topic, partition=partition, segment=segment.log_path.name,
                   error=str(exc), action="log cut at the corrupt batch (the bytes cut are kept as a .stray file); "
                   "replicas refetch the rest")
        return False
    return True


def read_offset(path: Path, key: tuple[str, int], default: int) -> tuple[int, bool]:
    """(the offset for `key`, or `default`; False if the file is corrupt)."""
    try:
        offsets = read_offsets(path)
    except CorruptCheckpoint as exc:
        _log.warning("log.checkpoint.corrupt", path=str(path), error=str(exc))
        return default, False
    if offsets is None:
        return default, True
    return offsets.get(key, default), True


def finish_interrupted_operations(part_dir: Path) -> None:
    """Complete or undo what a crash interrupted: `.swap` files are swapped in,
    `.cleaned`, `.deleted` and checkpoint `.tmp` files are removed."""
    for path in sorted(part_dir.iterdir()):
        name = path.name
        if name.endswith(DELETED_SUFFIX) or name.endswith(CLEANED_SUFFIX):
            path.unlink(missing_ok=True)
        elif name.endswith("-checkpoint.tmp"):
            path.unlink(missing_ok=True)
        elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            base = parse_file_stem(name)
            if base is None:
                continue
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (part_dir / (file_stem(base) + suffix)).unlink(missing_ok=True)
            os.replace(path, part_dir / (file_stem(base) + LOG_SUFFIX))
            _log.warning("log.recovery.swap_completed", segment=file_stem(base) + LOG_SUFFIX)
    fsync_dir(part_dir)
