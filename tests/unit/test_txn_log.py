"""Transactions in the log: markers, the producer state's open transactions, the last stable
offset, the `.txnindex` (written, collected, truncated, rebuilt) and the snapshot versions."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from raftka.log.append_origin import AppendOrigin
from raftka.log.batch_header import parse_header
from raftka.log.config import LogConfig
from raftka.log.control_record import (
    ABORT,
    COMMIT,
    ControlRecord,
    encode_marker,
    read_control_record,
)
from raftka.log.errors import InvalidProducerEpoch, InvalidTxnState, TransactionCoordinatorFenced
from raftka.log.partition_log import PartitionLog
from raftka.log.producer_state import (
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)
from raftka.log.record_batch import Record, encode_batch
from raftka.log.txn_index import AbortedTxn, CorruptTxnIndex, collect, decode_entries

P1, P2 = 1000, 2000


def txn_batch(pid: int, seq: int, count: int = 1, *, epoch: int = 0, transactional: bool = True) -> bytes:
    return encode_batch([Record(b"k%d" % i, b"v") for i in range(count)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=transactional)


# -- the marker batch -------------------------------------------------------------------

@pytest.mark.parametrize(("commit", "kind", "key"), [(False, ABORT, b"\0\0\0\0"), (True, COMMIT, b"\0\0\0\1")])
def test_marker_layout(commit: bool, kind: int, key: bytes) -> None:
    buf = encode_marker(producer_id=P1, producer_epoch=3, coordinator_epoch=7, commit=commit, timestamp_ms=5)
    header = parse_header(buf)
    # Kafka's EndTransactionMarker: 78 bytes, batchLength 66, attributes 0x30, baseSequence -1.
    assert (len(buf), header.batch_length, header.attributes, header.base_sequence) == (78, 66, 0x30, -1)
    assert (header.producer_id, header.producer_epoch, header.record_count) == (P1, 3, 1)
    assert read_control_record(buf, header) == ControlRecord(kind, 7)
    assert key in buf  # aiokafka spots ABORT by these exact key bytes


# -- the .txnindex entries ---------------------------------------------------------------

def test_txn_index_entry_is_kafkas_34_bytes() -> None:
    entry = AbortedTxn(P1, 10, 20, 21)
    assert entry.encode() == struct.pack(">hqqqq", 0, P1, 10, 20, 21)
    assert decode_entries(entry.encode() * 1) == [entry]


@pytest.mark.parametrize(("data", "error"), [
    (b"\0" * 33, "multiple of 34"),
    (struct.pack(">hqqqq", 1, P1, 0, 1, 2), "version 1"),
    (struct.pack(">hqqqq", 0, P1, 0, 5, 6) + struct.pack(">hqqqq", 0, P2, 0, 5, 6), "not above"),
])
def test_txn_index_refuses_bad_files(data: bytes, error: str) -> None:
    with pytest.raises(CorruptTxnIndex, match=error):
        decode_entries(data)


ENTRIES = [AbortedTxn(P1, 0, 4, 5), AbortedTxn(P2, 3, 9, 10), AbortedTxn(P1, 12, 15, 30)]


@pytest.mark.parametrize(("fetch_offset", "upper_bound", "pids", "complete"), [
    (0, 3, [P1], True),  # the first entry's LSO (5) is at or above the bound: stop there
    (5, 9, [P2], True),  # P1's first txn ended before 5; P2's covers [3, 9]
    (10, 12, [], True),  # P1's second starts at 12: not below the bound; its LSO 30 >= 12 stops
    (10, 20, [P1], True),
    (10, 31, [P1], False),  # no entry reaches the bound: the next segment may hold more
    (16, 40, [], False),
])
def test_collect_aborted(fetch_offset: int, upper_bound: int, pids: list[int], complete: bool) -> None:
    found, done = collect(ENTRIES, fetch_offset, upper_bound)
    assert ([e.producer_id for e in found], done) == (pids, complete)


# -- the producer state's transactions, as a table -----------------------------------------
# Each step: ("data", pid, offset, transactional) / ("marker", pid, offset, commit) / ("hw", offset);
# then the expected (ongoing first offsets, first unstable offset).

SCENARIOS = {
    "no transactions": ([("data", P1, 0, False)], [], None),
    "open": ([("data", P1, 0, True), ("data", P1, 1, True)], [0], 0),
    "two open, oldest wins": ([("data", P1, 3, True), ("data", P2, 5, True)], [3, 5], 3),
    "committed, marker not yet replicated": ([("data", P1, 3, True), ("marker", P1, 4, True)], [], 3),
    "committed and replicated": ([("data", P1, 3, True), ("marker", P1, 4, True), ("hw", 5)], [], None),
    "hw not past the marker": ([("data", P1, 3, True), ("marker", P1, 4, False), ("hw", 4)], [], 3),
    "marker without a transaction": ([("marker", P1, 0, False), ("hw", 1)], [], None),
    "second txn after the first": ([("data", P1, 0, True), ("marker", P1, 1, True), ("hw", 2),
                                    ("data", P1, 2, True)], [2], 2),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_producer_state_transactions(tmp_path: Path, name: str) -> None:
    steps, ongoing, unstable = SCENARIOS[name]
    manager = ProducerStateManager(tmp_path)
    for step in steps:
        if step[0] == "hw":
            manager.on_high_watermark(step[1])
            continue
        kind, pid, offset, flag = step
        if kind == "data":
            buf = bytearray(txn_batch(pid, 0, transactional=flag))
            struct.pack_into(">q", buf, 0, offset)
            manager.update(parse_header(buf))
        else:
            buf = encode_marker(producer_id=pid, producer_epoch=0, coordinator_epoch=0, commit=flag,
                                timestamp_ms=0, base_offset=offset)
            header = parse_header(buf)
            manager.update(header, read_control_record(buf, header))
    assert (sorted(manager.ongoing_transactions()), manager.first_unstable_offset()) == (ongoing, unstable)


def test_snapshot_v2_keeps_the_open_transaction_and_v1_still_loads() -> None:
    entry = ProducerEntry(P1, 2, ((0, 0, 7, 7),), 99, coordinator_epoch=4, current_txn_first_offset=7)
    assert decode_snapshot(encode_snapshot(8, {P1: entry})) == (8, {P1: entry})
    # A version 1 file (before transactions): the same entry without the two new fields.
    from crc32c import crc32c
    body = struct.pack(">qI", 8, 1) + struct.pack(">qhqB", P1, 2, 99, 1) + struct.pack(">iiqq", 0, 0, 7, 7)
    v1 = struct.pack(">4sHI", b"RKPS", 1, crc32c(body)) + body
    assert decode_snapshot(v1) == (8, {P1: ProducerEntry(P1, 2, ((0, 0, 7, 7),), 99)})


# -- the partition log ------------------------------------------------------------------------

@pytest.fixture
def plog(tmp_path: Path):
    logs: list[PartitionLog] = []

    def open_log(**config) -> PartitionLog:
        log = PartitionLog.open(tmp_path, "t", 0, LogConfig(**config), now_ms=0)
        logs.append(log)
        return log

    yield open_log
    for log in logs:
        log.close()


def _aborted_then_committed(log: PartitionLog) -> None:
    log.append(txn_batch(P1, 0, 3), 0)  # 0-2, P1's txn
    log.append(txn_batch(P2, 0, 2), 0)  # 3-4, P2's txn
    log.append_marker(P1, 0, 1, False, 0)  # 5: ABORT P1
    log.append(encode_batch([Record(b"x", b"y")]), 0)  # 6: plain record
    log.append_marker(P2, 0, 1, True, 0)  # 7: COMMIT P2


def test_abort_writes_the_index_and_lso_follows_the_open_transactions(plog) -> None:
    log = plog()
    log.append(txn_batch(P1, 0, 3), 0)
    assert log.last_stable_offset(3) == 0
    log.append(txn_batch(P2, 0, 2), 0)
    log.append_marker(P1, 0, 1, False, 0)
    # P2's transaction (from 3) is still open: the entry's LSO is 3, and so is the log's.
    assert log.active_segment.txn_index.entries == [AbortedTxn(P1, 0, 5, 3)]
    assert log.last_stable_offset(6) == 0  # the abort is not replicated yet (HW 6 passes it: see below)
    log.producer_state.on_high_watermark(6)
    assert log.last_stable_offset(6) == 3
    log.append(encode_batch([Record(b"x", b"y")]), 0)
    log.append_marker(P2, 0, 1, True, 0)
    log.producer_state.on_high_watermark(8)
    assert log.last_stable_offset(8) == 8
    assert log.collect_aborted_txns(0, 8) == [AbortedTxn(P1, 0, 5, 3)]
    assert log.collect_aborted_txns(6, 8) == []


def test_txn_index_survives_a_restart_and_is_rebuilt_when_deleted(plog, tmp_path: Path) -> None:
    log = plog(segment_bytes=200)
    _aborted_then_committed(log)
    log.roll()
    log.append(txn_batch(P1, 3, 1), 0)  # 8: P1 again, aborted in the next segment
    log.append_marker(P1, 0, 1, False, 0)  # 9
    expected = [AbortedTxn(P1, 0, 5, 3), AbortedTxn(P1, 8, 9, 10)]
    assert log.collect_aborted_txns(0, 10) == expected
    log.close()
    files = sorted(p.name for p in (tmp_path / "t-0").glob("*.txnindex"))
    assert len(files) >= 2
    reopened = plog(segment_bytes=200)
    assert reopened.collect_aborted_txns(0, 10) == expected
    reopened.close()
    for name in files:
        (tmp_path / "t-0" / name).unlink()
    rebuilt = plog(segment_bytes=200)
    assert rebuilt.collect_aborted_txns(0, 10) == expected
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.txnindex")) == files


def test_truncation_drops_index_entries_and_reopens_the_transaction(plog) -> None:
    log = plog()
    _aborted_then_committed(log)
    log.truncate_to(5)  # the ABORT marker goes: P1's transaction is open again
    assert log.active_segment.txn_index.entries == []
    assert sorted(log.producer_state.ongoing_transactions()) == [0, 3]
    assert log.last_stable_offset(5) == 0


def test_follower_builds_the_same_index(plog, tmp_path: Path) -> None:
    leader = plog()
    _aborted_then_committed(leader)
    follower = PartitionLog.open(tmp_path / "replica", "t", 0, LogConfig(), now_ms=0)
    try:
        follower.append_as_follower(leader.read_bytes(0, 1 << 20))
        assert follower.active_segment.txn_index.entries == leader.active_segment.txn_index.entries
        assert follower.producer_state.producers()[P2].coordinator_epoch == 1
    finally:
        follower.close()


@pytest.mark.parametrize(("epoch", "coordinator_epoch", "error"), [
    (0, 5, InvalidProducerEpoch),  # the producer is at epoch 1 now
    (1, 2, TransactionCoordinatorFenced),  # the last marker came from coordinator epoch 3
])
def test_stale_markers_are_refused(plog, epoch: int, coordinator_epoch: int, error: type) -> None:
    log = plog()
    log.append(txn_batch(P1, 0, 1, epoch=1), 0)
    log.append_marker(P1, 1, 3, True, 0)
    end = log.log_end_offset
    with pytest.raises(error):
        log.append_marker(P1, epoch, coordinator_epoch, False, 0)
    assert log.log_end_offset == end


def test_plain_batch_while_a_transaction_is_open_is_invalid_txn_state(plog) -> None:
    log = plog()
    log.append(txn_batch(P1, 0, 1), 0)
    with pytest.raises(InvalidTxnState):
        log.append(txn_batch(P1, 1, 1, transactional=False), 0)
    log.append_marker(P1, 0, 0, True, 0)
    log.append(txn_batch(P1, 1, 1, transactional=False), 0)  # sequences continue after the txn


def test_coordinator_write_skips_the_sequence_check(plog) -> None:
    log = plog()
    log.append(txn_batch(P1, 0, 1), 0)
    log.append(txn_batch(P1, 0, 1), 0, origin=AppendOrigin.COORDINATOR)  # TxnOffsetCommit's batch: seq 0 again
    assert log.log_end_offset == 2


def _keyed(key: bytes, value: bytes, *, pid: int = -1, seq: int = -1, transactional: bool = False) -> bytes:
    return encode_batch([Record(key, value)], producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                        base_sequence=seq, transactional=transactional)


def _values(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None, bool]]:
    from raftka.log.record_batch import iter_batches
    return [(r.offset, r.key, r.value, b.header.is_control)
            for b in iter_batches(log.read_bytes(log.log_start_offset, 1 << 20)) for r in b.records]


def test_compaction_drops_aborted_data_keeps_markers_and_stops_at_the_lso(plog) -> None:
    log = plog(cleanup_policy="compact", min_compaction_lag_ms=0)
    log.append(_keyed(b"a", b"old"), 0)  # 0
    log.append(_keyed(b"a", b"aborted", pid=P1, seq=0, transactional=True), 0)  # 1
    log.append_marker(P1, 0, 0, False, 0)  # 2: ABORT
    log.append(_keyed(b"b", b"b1"), 0)  # 3
    log.roll()
    log.append(_keyed(b"b", b"open", pid=P2, seq=0, transactional=True), 0)  # 4: still open
    log.append(_keyed(b"b", b"b2"), 0)  # 5
    log.roll()
    log.append(_keyed(b"z", b"z"), 0)  # 6, active segment
    log.producer_state.on_high_watermark(7)  # everything replicated: the ABORT is decided
    log.compact(now_ms=0)
    kept = _values(log)
    # a=old survives (the aborted a is not its newest value), the aborted record is gone, the
    # marker stays; the second segment (from the open transaction on) is not cleaned, so b1's
    # newer value b2 beyond the LSO does not remove it either.
    assert [(o, k, v) for o, k, v, control in kept if not control] == [
        (0, b"a", b"old"), (3, b"b", b"b1"), (4, b"b", b"open"), (5, b"b", b"b2"), (6, b"z", b"z")]
    assert [o for o, _, _, control in kept if control] == [2]
    assert log.collect_aborted_txns(0, 7) == [AbortedTxn(P1, 1, 2, 3)]


def test_a_marker_outlives_its_data_by_delete_retention_ms(plog) -> None:
    day = 86_400_000
    log = plog(cleanup_policy="compact", min_compaction_lag_ms=0, delete_retention_ms=day)
    log.append(_keyed(b"a", b"aborted", pid=P1, seq=0, transactional=True), 0)  # 0
    log.append_marker(P1, 0, 0, False, 0)  # 1: ABORT, its data goes at the first clean
    log.append(_keyed(b"b", b"kept", pid=P2, seq=0, transactional=True), 0)  # 2
    log.append_marker(P2, 0, 0, True, 0)  # 3: COMMIT, its data stays: so does the marker
    log.roll()
    log.append(_keyed(b"z", b"z"), 0)  # 4
    log.producer_state.on_high_watermark(5)

    def markers() -> list[tuple[int, bool]]:
        from raftka.log.record_batch import iter_batches
        return [(b.header.base_offset, b.header.has_delete_horizon)
                for b in iter_batches(log.read_bytes(0, 1 << 20)) if b.header.is_control]

    log.compact(now_ms=1_000)  # the ABORT's data is gone: its marker gets a horizon
    assert markers() == [(1, True), (3, False)]
    log.compact(now_ms=1_000 + day - 1)  # before the horizon: still there
    assert markers() == [(1, True), (3, False)]
    log.compact(now_ms=1_000 + day)  # the horizon passed: the marker goes
    assert markers() == [(3, False)]
    assert [(o, v) for o, _, v, control in _values(log) if not control] == [(2, b"kept"), (4, b"z")]
