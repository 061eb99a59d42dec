"""ListOffsets' MAX_TIMESTAMP (-3, KIP-734): the record with the largest timestamp in a log.

Kafka's rule (UnifiedLog.fetchOffsetByTimestamp): take the first segment holding the largest
`maxTimestampSoFar`, find from the index position of its offset of max timestamp the first
batch whose maxTimestamp equals it, and answer that batch's first record carrying that
timestamp (`RecordBatch.offsetOfMaxTimestamp`; in a LogAppendTime batch every record carries
the batch's), with the batch's partition leader epoch. Control batches count, as in Kafka's
segments. Nothing is filtered by the log start offset; the caller applies the high watermark
or last stable offset. This belongs beside `PartitionLog.offset_for_timestamp`, in log/.

Split as that one is: `batch_with_max_timestamp` on the owner's thread (in-memory indexes and
a few headers, read through the segment's mmap, which only that thread may remap) and
`record_with_max_timestamp`, which reads (pread) and decodes the batch, in a worker thread
under the partition's lock (ReplicaManager.read_log).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftka.log.batch_header import BatchHeader
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import decode_batch
from raftka.log.segment import LogSegment


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int  # -1: unknown


def max_timestamp_and_offset(log: PartitionLog) -> TimestampAndOffset | None:
    """The record with the largest timestamp (the earliest of equals), or None for an empty log."""
    found = batch_with_max_timestamp(log)
    return None if found is None else record_with_max_timestamp(*found)


def batch_with_max_timestamp(log: PartitionLog) -> tuple[LogSegment, BatchHeader] | None:
    """The first batch of the first segment holding the log's largest timestamp whose
    maxTimestamp is that timestamp, or None for an empty log."""
    latest = None
    for segment in log.segments:
        if latest is None or segment.max_timestamp > latest.max_timestamp:
            latest = segment
    if latest is None or latest.size == 0:
        return None
    assert latest.index is not None
    position = latest.index.lookup(latest.offset_of_max_timestamp)[1]
    for header in latest.iter_headers(position):
        if header.max_timestamp == latest.max_timestamp:
            return latest, header
    return None


def record_with_max_timestamp(segment: LogSegment, header: BatchHeader) -> TimestampAndOffset | None:
    """The batch's first record carrying its maxTimestamp (pread and decoded: safe in a worker
    thread while the owner appends, not while anything truncates or deletes the segment)."""
    batch = decode_batch(segment.read_bytes(header.position, header.size))
    for record in batch.records:
        timestamp = header.max_timestamp if header.is_log_append_time else record.timestamp
        if timestamp == header.max_timestamp:
            epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else -1
            return TimestampAndOffset(header.max_timestamp, record.offset, epoch)
    return None
