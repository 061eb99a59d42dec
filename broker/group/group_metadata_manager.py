"""Reading and writing the `__consumer_offsets` partitions a coordinator leads.

`load_partition` replays a partition from its log start to its log end into
GroupStates (offset commits, group metadata and their tombstones, last record
wins — the same answer compaction would keep). Transactional offset commits
(TxnOffsetCommit's batches, bit 4) are held per producer until that producer's
COMMIT marker applies them or its ABORT marker drops them; the ones still
undecided at the log end are handed back as pending. `append_and_wait` writes
records with acks=all and waits until the ISR has them, so a commit that was
answered survives a coordinator failover.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence

import structlog
import trio

from raftka.broker.group.consumer_group_records import GROUP_METADATA as GROUP_METADATA_KIND
from raftka.broker.group.consumer_group_records import decode_record as decode_consumer_record
from raftka.broker.group.consumer_group_state import ConsumerGroupState
from raftka.broker.group.group_records import (
    ConsumerGroupKey,
    GroupKey,
    OffsetKey,
    ShareGroupKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from raftka.broker.group.group_state import CommittedOffset, GroupState
from raftka.broker.replication.partition import Partition
from raftka.log.append_origin import AppendOrigin
from raftka.log.batch_header import parse_header
from raftka.log.control_record import COMMIT, parse_control_key
from raftka.log.errors import LogError
from raftka.log.record_batch import DecodedBatch, Record, decode_batch, encode_batch

log = structlog.get_logger("broker.group_metadata")

OFFSETS_TOPIC = "__consumer_offsets"
MIN_WALL_CLOCK_MS = 978_307_200_000  # 2001-01-01: an earlier "timestamp" is no wall-clock time
LOAD_READ_BYTES = 1 << 20


async def load_partition(partition: Partition, new_group: Callable[[str], GroupState],
                         now_ms: float, pending_out: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]]
                         | None = None,
                         consumer_out: dict[str, ConsumerGroupState] | None = None,
                         new_consumer_group: Callable[[str], ConsumerGroupState] | None = None,
                         share_out: list[tuple[ShareGroupKey, bytes | None]] | None = None,
                         ) -> dict[str, GroupState]:
    """Every group stored in `partition`, rebuilt from its records. Yields to the event loop
    between reads so a big partition does not stall other requests.

    Unreadable data never blocks a load: a batch that does not decode (bad CRC,
    malformed records) is logged at error level (`group_metadata.corrupt_batch`)
    and skipped, and a read that fails (a damaged batch header: where the next
    batch starts is unknown) ends the load there (`group_metadata.unreadable_log`)
    with what was read so far: one bad batch costs the commits it held, never the
    whole partition's groups.

    KIP-848 consumer groups (records of key versions 3-8) are replayed into
    `new_consumer_group(group_id)` states, put in `consumer_out`, and take the offsets
    stored under their id; a group id's last written metadata (classic or consumer)
    says which protocol it runs, as a classic group taken over by a consumer member
    leaves its old metadata behind it.

    Share groups' records (key versions 10-15) are handed back in log order in `share_out`
    (key, value): the share group coordinator (broker/group/share_group_coordinator.py)
    replays them with the metadata image's topic ids.
    """
    groups: dict[str, GroupState] = {}
    metadata: dict[str, bytes | None] = {}
    consumer: dict[str, ConsumerGroupState] = {}
    in_txn: dict[int, list[Record]] = {}  # producer id -> its undecided transactional records
    async for batch in log_batches(partition):
        header = batch.header
        if header.is_control:  # a marker decides the producer's held records
            held = in_txn.pop(header.producer_id, [])
            if batch.records and _is_commit(batch.records[0]):
                for record in held:
                    _apply_record(groups, metadata, new_group, record, consumer, new_consumer_group, share_out)
            continue
        if header.is_transactional:
            in_txn.setdefault(header.producer_id, []).extend(batch.records)
            continue
        for record in batch.records:
            _apply_record(groups, metadata, new_group, record, consumer, new_consumer_group, share_out)
    for group_id, value in metadata.items():
        group = groups.get(group_id)
        if value is None or group is None:
            continue
        try:
            meta = decode_group_value(value)
        except ValueError as exc:
            log.warning("group_metadata.bad_group_value", group=group_id, error=str(exc))
            continue
        group.restore(protocol_type=meta.protocol_type, generation_id=meta.generation_id,
                      protocol_name=meta.protocol_name, leader_id=meta.leader_id, members=meta.members,
                      now_ms=now_ms,
                      state_timestamp_ms=state_timestamp(meta.state_timestamp_ms, now_ms))
    for group_id, cg in consumer.items():
        if cg.deleted or metadata.get(group_id):
            continue  # deleted, or a classic group (again) since
        classic = groups.pop(group_id, None)
        if classic is not None:
            cg.offsets.update(classic.offsets)
        if consumer_out is not None:
            consumer_out[group_id] = cg
    if pending_out is not None:
        for pid, records in in_txn.items():
            for record in records:
                decoded = _offset_record(record)
                if decoded is not None:
                    key, value = decoded
                    groups.get(key.group_id) or groups.setdefault(key.group_id, new_group(key.group_id))
                    pending_out.setdefault(pid, {}).setdefault(key.group_id, {})[(key.topic, key.partition)] = value
    # A group that was deleted (tombstones only) or emptied of everything is not kept.
    return {gid: g for gid, g in groups.items()
            if g.offsets or g.members or metadata.get(gid)
            or any(gid in by_group for by_group in (pending_out or {}).values())}


def state_timestamp(stored_ms: int, now_ms: float) -> float | None:
    """A group metadata record's state timestamp (wall-clock ms) on the coordinator's clock
    (`now_ms`, trio's); None when it has none (-1) or one that is no wall-clock time (raftka
    before issue 29 stored its monotonic clock there), so its offsets count from their commits."""
    if stored_ms < MIN_WALL_CLOCK_MS:
        return None
    return now_ms - (wall_clock_ms() - stored_ms)


def wall_clock_ms() -> float:
    return time.time() * 1000.0


def _is_commit(record: Record) -> bool:
    try:
        return parse_control_key(record.key) == COMMIT
    except LogError:
        return False


def _offset_record(record: Record) -> tuple[OffsetKey, CommittedOffset] | None:
    """(key, value) of an offset commit record; None for anything else or a malformed one."""
    if record.key is None or record.value is None:
        return None
    try:
        key = decode_key(record.key)
        if isinstance(key, OffsetKey):
            return key, decode_offset_value(record.value)
    except ValueError as exc:
        log.warning("group_metadata.bad_record", offset=record.offset, error=str(exc))
    return None


async def log_batches(partition: Partition) -> AsyncIterator[DecodedBatch]:
    """Every decodable batch of `partition` from its log start to its log end, for the
    coordinators' loads (groups here, transactions in broker/txn/txn_coordinator.py). Yields to
    the event loop between reads. A batch that does not decode is logged and skipped
    (`group_metadata.corrupt_batch`); a read that fails ends the iteration there
    (`group_metadata.unreadable_log`)."""
    offset = partition.log.log_start_offset
    end = partition.log_end_offset
    while offset < end:
        try:
            info = partition.read(offset, LOAD_READ_BYTES, committed_only=False)
            data = info.read_bytes()
        except LogError as exc:
            log.error("group_metadata.unreadable_log", topic=partition.topic, partition=partition.index,
                      offset=offset, log_end_offset=end, error=str(exc))
            return
        if not data or info.next_offset <= offset:
            return
        for batch in _decodable_batches(partition, data):
            yield batch
        offset = info.next_offset
        await trio.sleep(0)


def _decodable_batches(partition: Partition, data: bytes) -> Iterator[DecodedBatch]:
    """The batches of `data` (whole batches, as a read returns them) that decode; the others
    are logged loudly and skipped. A header that does not even parse ends the chunk."""
    position = 0
    while position < len(data):
        try:
            header = parse_header(data, position)
        except LogError as exc:
            log.error("group_metadata.corrupt_batch", topic=partition.topic, partition=partition.index,
                      position=position, error=str(exc), skipped="the rest of this read")
            return
        try:
            batch = decode_batch(data, position)
        except LogError as exc:
            log.error("group_metadata.corrupt_batch", topic=partition.topic, partition=partition.index,
                      offset=header.base_offset, last_offset=header.last_offset, error=str(exc),
                      skipped="this batch")
        else:
            yield batch
        position += header.size


def _apply_record(groups: dict[str, GroupState], metadata: dict[str, bytes | None],
                  new_group: Callable[[str], GroupState], record: Record,
                  consumer: dict[str, ConsumerGroupState],
                  new_consumer_group: Callable[[str], ConsumerGroupState] | None,
                  share_out: list[tuple[ShareGroupKey, bytes | None]] | None = None) -> None:
    if record.key is None:
        return
    try:
        key = decode_key(record.key)
        if isinstance(key, ShareGroupKey):
            if share_out is not None:
                share_out.append((key, record.value))
        elif isinstance(key, ConsumerGroupKey):
            if new_consumer_group is None:
                return
            cg = consumer.get(key.group_id)
            if cg is None:
                cg = consumer[key.group_id] = new_consumer_group(key.group_id)
            if key.kind == GROUP_METADATA_KIND and record.value is not None:
                cg.deleted = False
                metadata.pop(key.group_id, None)  # a consumer group now (it took over a classic one)
            cg.replay(decode_consumer_record(key.kind, key.member_id, record.value))
        elif isinstance(key, OffsetKey):
            group = groups.get(key.group_id) or groups.setdefault(key.group_id, new_group(key.group_id))
            tp = (key.topic, key.partition)
            if record.value is None:
                group.offsets.pop(tp, None)
            else:
                group.offsets[tp] = decode_offset_value(record.value)
        elif isinstance(key, GroupKey):
            groups.setdefault(key.group_id, new_group(key.group_id))
            metadata[key.group_id] = record.value
            if record.value is not None and key.group_id in consumer:
                consumer.pop(key.group_id)  # a classic group took the id over
            if record.value is None:  # DeleteGroups: its offsets were tombstoned before this
                groups[key.group_id].offsets.clear()
    except ValueError as exc:
        log.warning("group_metadata.bad_record", offset=record.offset, error=str(exc))


async def append_and_wait(partition: Partition, records: Sequence[tuple[bytes, bytes | None]],
                          timeout_s: float, *, producer: tuple[int, int] | None = None) -> None:
    """Append (key, value) records as one batch with acks=all and wait for the high watermark.
    `producer` (id, epoch): a transactional batch of that producer (TxnOffsetCommit; base
    sequence 0, not checked: Kafka's coordinator-origin write). Raises the partition's errors
    (NotLeaderOrFollower, NotEnoughReplicas, RequestTimedOut...) and the log's (47, 48)."""
    rows = [Record(key, value) for key, value in records]
    if producer is None:
        batch = encode_batch(rows)
    else:
        batch = encode_batch(rows, producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                             transactional=True)
    info = partition.append_as_leader(batch, -1, origin=AppendOrigin.COORDINATOR)
    await partition.wait_for_high_watermark(info.last_offset + 1, trio.current_time() + timeout_s)
