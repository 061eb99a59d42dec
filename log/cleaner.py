"""Log compaction: keep only the newest record of each key, drop expired tombstones.

This is the one place outside the SDK that decodes individual records (everywhere else
the broker moves batches as opaque bytes: README.md, docs/architecture.md). Its core is
pure: segment bytes in, segment bytes out (`aborted_batches`, `build_offset_map`,
`clean_segment`). `clean_log` drives one pass over a partition log (Kafka's
`Cleaner.clean`): it chooses the segments, cleans them and writes each changed one to a
fsynced `.log.cleaned` file, which the log swaps in (`PartitionLog.replace_segment`,
Kafka's `replaceSegments`: renamed `.log.swap`, the old `.log` through `.deleted`, the
indexes rebuilt; a crash at any step is finished or undone by the log loader).

Which segments: every closed one (never the active segment) up to the first whose max
timestamp is within `min.compaction.lag.ms` of now or that reaches past the first
unstable offset (an open transaction's data waits for its marker, as in Kafka, which
cleans below the last stable offset only).

Kafka semantics, with these documented differences:

- Records with a null key are invalid in a compacted topic (the leader refuses
  them on produce, as Kafka does: `log.record_validator`). If some got in anyway
  (written before that check, or before the topic became compacted), they are
  kept, never compacted away.
- A tombstone (null value) survives `delete.retention.ms` so consumers that are
  catching up still see the delete. Kafka measures that age from the segment
  file's last-modified time (or, since KIP-534, a delete horizon stamped into
  the batch); we use the batch's maxTimestamp, which travels with the data and
  does not change when files are copied or replicated.
- Offsets never move: a batch that loses records is re-encoded with its original
  baseOffset and lastOffsetDelta, so the offsets of the survivors, the next
  batch's offsets and the producer's sequence range are unchanged.
- A batch that loses every record is dropped, unless it is the newest batch of
  its producer: then an empty batch (no records, no compression) keeps the
  producer's last sequence and offsets in the log, as Kafka does, so producer
  state rebuilt from the log after a restart still recognises retries.

Transactions: the partition log cleans only below the last stable offset, and
passes the aborted transactions of the range (from its `.txnindex` files);
`aborted_batches` finds their data batches, which are dropped whatever their keys
(and never count as a key's newest record). A transaction marker stays while
any data of its transaction does; once none is left (the cleaner passes over
the segments in log order, carrying `MarkerState` from one to the next), the
first clean stamps the marker with a delete horizon (attribute bit 6,
`baseTimestamp` = now + `delete.retention.ms`, as Kafka's KIP-534 cleaner does) and a
clean after the horizon removes it, so a consumer that was reading the aborted
data still meets its marker. A removed marker is removed whole (never left as
an empty control batch, which aiokafka rejects under read_committed).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from raftka.log.batch_header import ATTR_DELETE_HORIZON, BatchHeader, iter_headers, update_crc
from raftka.log.record_batch import Record, decode_batch, encode_batch
from raftka.log.segment import CLEANED_SUFFIX, LOG_SUFFIX, LogSegment, file_stem
from raftka.log.txn_index import AbortedTxn

if TYPE_CHECKING:
    from raftka.log.partition_log import PartitionLog

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class CompactionStats:
    segments_cleaned: int
    bytes_before: int
    bytes_after: int
    keys: int


def clean_log(log: PartitionLog, now_ms: int) -> CompactionStats:
    """Compact the closed segments of `log` (policy `compact`): newest record per key, offsets
    kept; aborted transactional data goes, markers stay (see the module docstring). A no-op
    for a log whose policy is not `compact`. The caller holds the partition's lock: nothing
    else truncates, compacts or deletes `log` meanwhile (appends and reads may go on)."""
    config = log.config
    if not config.compact:
        return CompactionStats(0, 0, 0, 0)
    cleanable = cleanable_segments(log.segments[:-1], now_ms - config.min_compaction_lag_ms,
                                   config.min_compaction_lag_ms > 0, log.first_unstable_offset())
    if not cleanable:
        return CompactionStats(0, 0, 0, 0)
    buffers = [segment.read_bytes() for segment in cleanable]
    aborted = aborted_batches(buffers, log.collect_aborted_txns(cleanable[0].base_offset,
                                                                cleanable[-1].next_offset))
    offset_map = build_offset_map(buffers, aborted)
    producer_last_offsets = {
        pid: entry.batches[-1][3]
        for pid, entry in log.producer_state.producers().items()
        if entry.batches
    }
    cleaned_count = before = after = 0
    markers = MarkerState()  # carried through the segments in log order
    for segment, buf in zip(cleanable, buffers, strict=True):
        cleaned = clean_segment(
            buf,
            offset_map,
            now_ms=now_ms,
            delete_retention_ms=config.delete_retention_ms,
            tombstone_safe_before_ms=None,
            producer_last_offsets=producer_last_offsets,
            aborted=aborted,
            markers=markers,
        )
        before += len(buf)
        after += len(cleaned)
        if cleaned != buf:
            log.replace_segment(segment, write_cleaned(log.dir, segment.base_offset, cleaned), now_ms)
            cleaned_count += 1
    _log.info(
        "log.compacted",
        topic=log.topic,
        partition=log.partition,
        segments=cleaned_count,
        bytes_before=before,
        bytes_after=after,
        keys=len(offset_map),
    )
    return CompactionStats(cleaned_count, before, after, len(offset_map))


def cleanable_segments(closed: Iterable[LogSegment], horizon_ms: int, lag_applies: bool,
                       first_unstable_offset: int | None) -> list[LogSegment]:
    """The leading run of `closed` segments that may be cleaned: it stops at the first segment
    with a record newer than `horizon_ms` (if `lag_applies`) or reaching past the first
    unstable offset."""
    cleanable: list[LogSegment] = []
    for segment in closed:
        if lag_applies and segment.max_timestamp > horizon_ms:
            break
        if first_unstable_offset is not None and segment.next_offset > first_unstable_offset:
            break
        cleanable.append(segment)
    return cleanable


def write_cleaned(part_dir: Path, base_offset: int, cleaned: bytes) -> Path:
    """Write the cleaned bytes of the segment at `base_offset` to `<segment>.log.cleaned`,
    fsynced (a crash before the swap leaves it to be removed by the loader); returns its path."""
    path = part_dir / (file_stem(base_offset) + LOG_SUFFIX + CLEANED_SUFFIX)
    with open(path, "wb") as f:
        f.write(cleaned)
        f.flush()
        os.fsync(f.fileno())
    return path


@dataclass
class MarkerState:
    """Across the segments of one cleaning pass: the producers whose current transaction
    still has data in the cleaned log (its marker must stay)."""

    with_data: set[int] = field(default_factory=set)


def aborted_batches(segment_buffers: Iterable[bytes], aborted: Iterable[AbortedTxn]) -> frozenset[int]:
    """Base offsets of the transactional data batches in `segment_buffers` (log order) that
    belong to an aborted transaction, found as a read_committed consumer finds them: a
    producer is aborting from its entry's first offset until its next control batch."""
    pending = sorted(aborted, key=lambda t: t.first_offset)
    aborting: set[int] = set()
    found: set[int] = set()
    i = 0
    for buf in segment_buffers:
        for header in iter_headers(buf, verify=False):
            while i < len(pending) and pending[i].first_offset <= header.base_offset:
                aborting.add(pending[i].producer_id)
                i += 1
            if header.producer_id not in aborting:
                continue
            if header.is_control:
                aborting.discard(header.producer_id)
            elif header.is_transactional:
                found.add(header.base_offset)
    return frozenset(found)


def build_offset_map(segment_buffers: Iterable[bytes], skip: Set[int] = frozenset()) -> dict[bytes, int]:
    """Map each key to the offset of its newest record across `segment_buffers`, in log order.

    Null keys are not in the map (such records are always kept). Control
    batches (transaction markers) carry no user keys and are skipped, as are
    the batches whose base offset is in `skip` (aborted transactional data).
    """
    offsets: dict[bytes, int] = {}
    for buf in segment_buffers:
        for header in iter_headers(buf):
            if header.is_control or header.base_offset in skip:
                continue
            for record in decode_batch(buf, header.position).records:
                if record.key is not None:
                    offsets[record.key] = record.offset
    return offsets


def clean_segment(
    buf: bytes,
    offset_map: dict[bytes, int],
    *,
    now_ms: int,
    delete_retention_ms: int,
    tombstone_safe_before_ms: int | None,
    producer_last_offsets: Mapping[int, int] | None = None,
    aborted: Set[int] = frozenset(),
    markers: MarkerState | None = None,
) -> bytes:
    """Return the compacted form of the whole batches in `buf`.

    A record survives if its key has no newer offset in `offset_map`. A
    surviving tombstone is dropped once its batch's maxTimestamp is below
    `now_ms - delete_retention_ms` and, if `tombstone_safe_before_ms` is
    given, its own timestamp is below that too.

    `producer_last_offsets` (producer id -> last offset of its newest batch,
    from the producer state) decides which emptied batches must stay as empty
    batches; without it, an emptied batch stays if it is its producer's newest
    batch within `buf`, which keeps at least as much.

    Batches whose base offset is in `aborted` (see `aborted_batches`) lose every
    record. With `markers` (the pass's state, carried across its segments in log
    order), a control batch whose transaction has no data left is stamped with a
    delete horizon, then removed once `now_ms` passes it; without it, control
    batches are kept. Batches that lose nothing are copied byte for byte.
    Raises CorruptRecord / InvalidRecord for malformed input (nothing is
    written then: the caller keeps its old segment).
    """
    headers = list(iter_headers(buf))
    if producer_last_offsets is None:
        newest: dict[int, int] = {}
        for header in headers:
            if header.has_producer_id:
                newest[header.producer_id] = header.last_offset
        producer_last_offsets = newest
    tombstone_horizon = now_ms - delete_retention_ms

    out: list[bytes] = []
    for header in headers:
        raw = buf[header.position : header.position + header.size]
        if header.is_control:
            if markers is None or header.producer_id in markers.with_data:
                if markers is not None:
                    markers.with_data.discard(header.producer_id)
                out.append(raw)
            elif not header.has_delete_horizon:
                out.append(_with_delete_horizon(buf, header, now_ms + delete_retention_ms))
            elif now_ms < header.base_timestamp:
                out.append(raw)
            continue
        records = decode_batch(buf, header.position).records
        expired = header.max_timestamp < tombstone_horizon
        kept = [] if header.base_offset in aborted else [
            r for r in records if _keep(r, offset_map, expired, tombstone_safe_before_ms)]
        if markers is not None and kept and header.is_transactional:
            markers.with_data.add(header.producer_id)
        if len(kept) == len(records):
            out.append(raw)
        elif kept:
            out.append(_reencode(header, kept))
        elif (
            header.has_producer_id
            and producer_last_offsets.get(header.producer_id) == header.last_offset
        ):
            out.append(_reencode(header, []))
    return b"".join(out)


def _keep(
    record: Record,
    offset_map: Mapping[bytes, int],
    tombstone_expired: bool,
    tombstone_safe_before_ms: int | None,
) -> bool:
    if record.key is None:
        return True
    newest = offset_map.get(record.key)
    if newest is not None and record.offset < newest:
        return False
    if record.value is None and tombstone_expired:
        safe = tombstone_safe_before_ms is None or (
            record.timestamp is not None and record.timestamp < tombstone_safe_before_ms
        )
        return not safe
    return True


def _with_delete_horizon(buf: bytes, header: BatchHeader, horizon_ms: int) -> bytes:
    """The control batch at `header` with attribute bit 6 set and `baseTimestamp` = `horizon_ms`
    (Kafka's delete horizon); maxTimestamp is unchanged, so time retention and the time index
    are not moved. (Its one record's timestamp now reads as the horizon: Kafka keeps it with a
    negative delta; nothing reads a marker's record timestamp.)"""
    out = bytearray(buf[header.position : header.position + header.size])
    attributes = header.attributes | ATTR_DELETE_HORIZON
    out[21:23] = attributes.to_bytes(2, "big", signed=True)
    out[27:35] = horizon_ms.to_bytes(8, "big", signed=True)
    update_crc(out)
    return bytes(out)


def _reencode(header: BatchHeader, records: list[Record]) -> bytes:
    """Encode `records` in place of `header`'s batch, preserving every batch-level field."""
    # Decoded records carry absolute offsets and timestamps, so offsets never
    # move; LogAppendTime records carry the batch's maxTimestamp, so it is kept;
    # an empty batch takes base_timestamp as its maxTimestamp, the original one.
    return encode_batch(
        records,
        base_offset=header.base_offset,
        # An empty batch has nothing to compress (Kafka writes it uncompressed too).
        compression=header.compression if records else 0,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        log_append_time=header.is_log_append_time,
        transactional=header.is_transactional,
        base_timestamp=header.max_timestamp,
        last_offset_delta=header.last_offset_delta,
    )
