"""PartitionLog: append, read, roll, reopen, validation, follower appends, idempotence."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftka.log.batch_header import iter_headers, parse_header
from raftka.log.config import LogConfig
from raftka.log.errors import (
    CorruptRecord,
    InvalidRecord,
    OffsetOutOfRange,
    OutOfOrderSequence,
    RecordTooLarge,
)
from raftka.log.partition_log import OffsetsNotContiguous, PartitionLog
from raftka.log.record_batch import decode_batch, iter_batches
from raftka.log.segment import TAIL_PREAD_BYTES

from .conftest import make_batch


def dir_sizes(part_dir: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in part_dir.iterdir() if p.suffix in (".log", ".index", ".timeindex")}


def test_append_assigns_contiguous_offsets_and_rewrites_epoch(open_log) -> None:
    log = open_log()
    expected_first = 0
    for i in range(40):
        count = 1 + i % 5
        info = log.append(make_batch(count), leader_epoch=7, now_ms=0)
        assert (info.first_offset, info.last_offset) == (expected_first, expected_first + count - 1)
        assert not info.duplicate and info.log_append_time == -1 and info.log_start_offset == 0
        expected_first += count
    assert log.log_end_offset == expected_first
    data = log.read_bytes(0, 10**9)
    next_offset = 0
    for header in iter_headers(data, verify=True):  # CRC still valid after the rewrite
        assert header.base_offset == next_offset
        assert header.partition_leader_epoch == 7
        next_offset = header.next_offset
    assert next_offset == expected_first
    records = [r for b in iter_batches(data) for r in b.records]
    assert [r.offset for r in records] == list(range(expected_first))
    assert log.epoch_cache.entries() == [(7, 0)]


def test_read_whole_batches_max_bytes_max_offset(open_log) -> None:
    log = open_log()
    sizes = []
    for _ in range(10):
        batch = make_batch(3)
        sizes.append(len(batch))
        log.append(batch, 0, now_ms=0)
    size = sizes[0]
    # max_bytes smaller than a batch: still one whole batch
    info = log.read(0, 1)
    assert (info.first_offset, info.next_offset, info.size) == (0, 3, size)
    # exactly two batches fit; 2.5 batches -> two
    assert log.read(0, 2 * size).next_offset == 6
    assert log.read(0, 2 * size + size // 2).next_offset == 6
    # an offset inside a batch starts from that batch
    info = log.read(4, 10**6)
    assert info.first_offset == 3 and info.next_offset == 30
    assert parse_header(info.read_bytes()).base_offset == 3
    # max_offset (exclusive) stops before batches starting at/after it
    assert log.read(0, 10**6, max_offset=9).next_offset == 9
    assert log.read(0, 10**6, max_offset=10).next_offset == 12
    assert log.read(9, 10**6, max_offset=9).size == 0
    # at the log end: empty; beyond or below: out of range
    empty = log.read(30, 10**6)
    assert empty.slices == () and empty.next_offset == 30
    with pytest.raises(OffsetOutOfRange, match=r"offset 31 is outside the log range \[0, 30\]"):
        log.read(31, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)
    # slices are sendfile-able byte ranges of the segment file
    info = log.read(3, 10**6)
    (piece,) = info.slices
    with open(piece.path, "rb") as f:
        f.seek(piece.position)
        assert f.read(piece.length) == info.read_bytes()


def test_read_spans_segments(open_log) -> None:
    log = open_log(segment_bytes=400)
    for _ in range(20):
        log.append(make_batch(2), 0, now_ms=0)
    assert len(log.segments) > 3
    info = log.read(0, 10**6)
    assert info.next_offset == 40 and len(info.slices) == len(log.segments)
    assert [h.base_offset for h in iter_headers(info.read_bytes())] == list(range(0, 40, 2))


def test_roll_by_size_and_time_names_files(open_log, part_dir: Path) -> None:
    log = open_log(segment_bytes=1000, segment_ms=60_000)
    batch = make_batch(4)
    per_segment = 1000 // len(batch)
    for _ in range(per_segment + 1):
        log.append(batch, 0, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 4 * per_segment]
    log.append(batch, 0, now_ms=59_999)  # not yet
    assert len(log.segments) == 2
    log.append(batch, 0, now_ms=60_000 + 1)  # the second segment got its first batch at 0
    assert len(log.segments) == 3
    names = sorted(p.name for p in part_dir.glob("*.log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    assert all(len(n) == 24 for n in names)
    assert (part_dir / f"{log.active_segment.base_offset:020d}.index").exists()


def test_reopen_after_close_gives_identical_state(open_log) -> None:
    log = open_log(segment_bytes=2000, index_interval_bytes=200)
    for i in range(50):
        log.append(make_batch(1 + i % 3, timestamp=5000 + i), leader_epoch=i // 20, now_ms=0)
    before = (
        log.log_start_offset,
        log.log_end_offset,
        [(s.base_offset, s.size, s.next_offset, s.max_timestamp) for s in log.segments],
        [s.index.entries() for s in log.segments],
        log.epoch_cache.entries(),
        log.read_bytes(0, 10**9),
    )
    log.close()
    again = open_log(segment_bytes=2000, index_interval_bytes=200)
    after = (
        again.log_start_offset,
        again.log_end_offset,
        [(s.base_offset, s.size, s.next_offset, s.max_timestamp) for s in again.segments],
        [s.index.entries() for s in again.segments],
        again.epoch_cache.entries(),
        again.read_bytes(0, 10**9),
    )
    assert after == before
    first_of_epoch_1 = sum(1 + i % 3 for i in range(20))
    first_of_epoch_2 = sum(1 + i % 3 for i in range(40))
    assert before[4] == [(0, 0), (1, first_of_epoch_1), (2, first_of_epoch_2)]
    info = again.append(make_batch(2), 2, now_ms=0)
    assert info.first_offset == before[1]


@pytest.mark.parametrize("damage", ["too_large", "flipped_bit", "wrong_magic", "truncated", "control"])
def test_bad_batches_write_nothing(open_log, part_dir: Path, damage: str) -> None:
    log = open_log(max_message_bytes=2000)
    log.append(make_batch(2), 0, now_ms=0)
    good = make_batch(2)
    sizes = dir_sizes(part_dir)
    if damage == "too_large":
        bad, error = make_batch(1, value_size=3000), RecordTooLarge
    elif damage == "flipped_bit":
        raw = bytearray(good)
        raw[-3] ^= 0x10
        bad, error = bytes(raw), CorruptRecord
    elif damage == "wrong_magic":
        raw = bytearray(good)
        raw[16] = 1
        bad, error = bytes(raw), InvalidRecord
    elif damage == "truncated":
        bad, error = good[:-1], CorruptRecord
    else:
        raw = bytearray(good)
        raw[22] |= 0x20
        bad, error = bytes(raw), (CorruptRecord, InvalidRecord)
    with pytest.raises(error):
        log.append(good + bad, 0, now_ms=0)  # a good batch first: it must not be written either
    assert dir_sizes(part_dir) == sizes
    assert log.log_end_offset == 2


def test_log_append_time(open_log) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    info = log.append(make_batch(3, timestamp=5), 0, now_ms=123_456)
    assert info.log_append_time == 123_456 and info.max_timestamp == 123_456
    header = next(iter_headers(log.read_bytes(0, 1000), verify=True))
    assert header.is_log_append_time and header.max_timestamp == 123_456
    assert log.offset_for_timestamp(123_000) == (0, 123_456)


def test_offset_for_timestamp(open_log) -> None:
    log = open_log(segment_bytes=600, index_interval_bytes=100)
    for i in range(30):
        log.append(make_batch(2, timestamp=1000 + 100 * i), 0, now_ms=0)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (2, 1100)
    assert log.offset_for_timestamp(2450) == (30, 2500)
    assert log.offset_for_timestamp(3900) == (58, 3900)
    assert log.offset_for_timestamp(3901) is None


def test_follower_append_keeps_offsets_and_epochs(open_log) -> None:
    leader = open_log()
    for epoch in (1, 1, 3, 3, 4):
        leader.append(make_batch(2), epoch, now_ms=0)
    data = leader.read_bytes(0, 10**6)
    follower = PartitionLog.open(leader.dir.parent / "replica", "t", 0, LogConfig(), now_ms=0)
    try:
        with pytest.raises(OffsetsNotContiguous, match="expected 0"):
            follower.append_as_follower(data[len(make_batch(2)) :])
        info = follower.append_as_follower(data)
        assert (info.first_offset, info.last_offset) == (0, 9)
        assert follower.read_bytes(0, 10**6) == data
        assert follower.epoch_cache.entries() == [(1, 0), (3, 4), (4, 8)]
        assert follower.epoch_cache.end_offset_for_epoch(2, follower.log_end_offset) == (1, 4)
        with pytest.raises(OffsetsNotContiguous):
            follower.append_as_follower(data)
    finally:
        follower.close()


def test_truncate_to_trims_segments_epochs_and_reads(open_log, part_dir: Path) -> None:
    log = open_log(segment_bytes=500)
    for i in range(30):
        log.append(make_batch(2), leader_epoch=i // 10, now_ms=0)
    assert len(log.segments) > 3
    log.truncate_to(25)  # inside the batch [24, 25]: the batch goes whole
    assert log.log_end_offset == 24
    assert log.epoch_cache.entries() == [(0, 0), (1, 20)]
    assert [h.base_offset for h in iter_headers(log.read_bytes(0, 10**6))][-1] == 22
    assert all(s.base_offset < 24 for s in log.segments)
    info = log.append(make_batch(1), 5, now_ms=0)
    assert info.first_offset == 24
    assert log.epoch_cache.entries() == [(0, 0), (1, 20), (5, 24)]
    log.truncate_to(log.segments[1].base_offset)
    assert log.log_end_offset == log.active_segment.next_offset
    log.close()
    again = open_log(segment_bytes=500)
    assert again.log_end_offset == log.log_end_offset
    assert not list(part_dir.glob("*.deleted"))


def test_truncate_fully_and_start_at(open_log) -> None:
    log = open_log(segment_bytes=500)
    for _ in range(20):
        log.append(make_batch(2, producer_id=1, producer_epoch=0, base_sequence=2 * _), 0, now_ms=0)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert len(log.segments) == 1 and log.segments[0].base_offset == 1000
    assert log.producer_state.producers() == {}
    assert log.epoch_cache.entries() == []
    assert log.append(make_batch(1), 2, now_ms=0).first_offset == 1000
    with pytest.raises(OffsetOutOfRange):
        log.read(999, 100)


def test_flush_messages_advances_recovery_point(open_log) -> None:
    log = open_log(flush_messages=5)
    log.append(make_batch(3), 0, now_ms=0)
    assert log.recovery_point == 0
    log.append(make_batch(3), 0, now_ms=0)
    assert log.recovery_point == 6
    timed = open_log(flush_ms=1000)
    timed.append(make_batch(1), 0, now_ms=500)
    assert timed.recovery_point == 6  # same directory, reopened: everything flushed at open
    timed.append(make_batch(1), 0, now_ms=999)
    assert timed.recovery_point == 6
    timed.append(make_batch(1), 0, now_ms=1000)
    assert timed.recovery_point == 9


def idempotent(seq: int, count: int = 2, epoch: int = 0, pid: int = 42) -> bytes:
    return make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_idempotent_duplicate_and_out_of_order(open_log, part_dir: Path) -> None:
    log = open_log(segment_bytes=400)
    offsets = []
    for seq in range(0, 20, 2):
        offsets.append(log.append(idempotent(seq), 0, now_ms=0))
    sizes = dir_sizes(part_dir)
    dup = log.append(idempotent(16), 0, now_ms=0)  # a retry of a batch among the last five
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (16, 17)
    assert dir_sizes(part_dir) == sizes and log.log_end_offset == 20
    with pytest.raises(OutOfOrderSequence):
        log.append(idempotent(30), 0, now_ms=0)
    assert dir_sizes(part_dir) == sizes
    # Two batches of one producer in one append must be in sequence.
    with pytest.raises(OutOfOrderSequence):
        log.append(idempotent(20) + idempotent(23), 0, now_ms=0)
    info = log.append(idempotent(20) + idempotent(22), 0, now_ms=0)
    assert (info.first_offset, info.last_offset) == (20, 23)


@pytest.mark.parametrize("clean", [True, False])
def test_idempotence_survives_reopen(open_log, clean: bool) -> None:
    from .conftest import crash

    log = open_log(segment_bytes=400)
    for seq in range(0, 30, 2):
        log.append(idempotent(seq), 0, now_ms=0)
    assert len(log.segments) > 2  # snapshots were taken at rolls
    if clean:
        log.close()
    else:
        log.flush()
        crash(log)
    again = open_log(segment_bytes=400)
    dup = again.append(idempotent(26), 0, now_ms=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (26, 27)
    with pytest.raises(OutOfOrderSequence):
        again.append(idempotent(40), 0, now_ms=0)
    assert again.append(idempotent(30), 0, now_ms=0).first_offset == 30


def test_verify_segments_reports_flipped_bit(open_log, part_dir: Path) -> None:
    log = open_log()
    for _ in range(5):
        log.append(make_batch(2), 0, now_ms=0)
    assert log.verify_segments() == []
    log.close()
    path = part_dir / "00000000000000000000.log"
    raw = bytearray(path.read_bytes())
    raw[len(make_batch(2)) + 70] ^= 1  # a record byte of the second batch
    path.write_bytes(bytes(raw))
    # With verification off, flushed segments are trusted on open (not rescanned) ...
    again = open_log(verify_flushed=False)
    assert again.log_end_offset == 10
    (report,) = again.verify_segments()
    assert report.segment_base_offset == 0 and "CRC" in report.error
    # A damaged header is never served.
    raw[len(make_batch(2)) + 16] = 9
    os.pwrite(again.segments[0].file.fileno(), bytes(raw), 0)
    with pytest.raises(CorruptRecord):
        again.read(2, 10**6)
    assert decode_batch(again.read_bytes(0, 1)).header.base_offset == 0


def test_config_change_reaches_segments(open_log) -> None:
    log = open_log()
    log.append(make_batch(1), 0, now_ms=0)
    log.config = LogConfig(segment_bytes=100, index_interval_bytes=1)
    assert log.active_segment.config.index_interval_bytes == 1
    log.append(make_batch(1), 0, now_ms=0)
    assert len(log.segments) == 2  # the new segment.bytes applied


def test_damaged_header_read_is_logged(open_log) -> None:
    from structlog.testing import capture_logs

    log = open_log()
    for _ in range(3):
        log.append(make_batch(2), 0, now_ms=0)
    size = len(make_batch(2))
    os.pwrite(log.segments[0].file.fileno(), b"\x07", size + 16)  # magic of the second batch
    with capture_logs() as logs, pytest.raises(CorruptRecord, match="magic 7"):
        log.read(0, 10**6)
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["log.corrupt_batch"]
    assert log.read(0, size).size == size  # the batch before it is still served


def test_tail_reads_between_appends_match_a_fresh_read(open_log) -> None:
    """A follower reads each batch right after it is appended: headers near the end, past
    the segment's mapping, are read with pread; headers further back renew the mapping.
    Both must give what a fresh full read gives."""
    log = open_log()
    for _ in range(8):  # > TAIL_PREAD_BYTES, so reading from 0 maps the segment
        log.append(make_batch(4, value_size=4000), 0, now_ms=0)
    assert log.segments[0].size > TAIL_PREAD_BYTES
    assert log.read(0, 10**6).next_offset == 32
    for i in range(1, 30):
        info = log.append(make_batch(1 + i % 3, value_size=1000 * (i % 4)), 0, now_ms=0)
        tail = log.read(info.first_offset, 10**6)
        assert (tail.first_offset, tail.next_offset) == (info.first_offset, info.last_offset + 1)
        assert parse_header(tail.read_bytes()).base_offset == info.first_offset
        inside = log.read(info.last_offset, 10**6)  # an offset inside the new batch
        assert inside.first_offset == info.first_offset
    whole = log.read(0, 10**9)
    assert whole.read_bytes() == log.read_bytes(0, 10**9)
    assert [h.base_offset for h in iter_headers(whole.read_bytes())] == [
        h.base_offset for h in iter_headers(log.read_bytes(0, 10**9))]
    # damage in a batch appended after the mapping is caught on that path too
    segment = log.segments[-1]
    size = len(make_batch(2))
    log.read(0, 10**6)
    log.append(make_batch(2), 0, now_ms=0)
    os.pwrite(segment.file.fileno(), b"\x07", segment.size - size + 16)
    with pytest.raises(CorruptRecord, match="magic 7"):
        log.read(log.log_end_offset - 2, 10**6)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5)),
        st.tuples(st.just("roll"), st.just(0)),
        st.tuples(st.just("truncate"), st.integers(0, 100)),
        st.tuples(st.just("start"), st.integers(0, 100)),
        st.tuples(st.just("reopen"), st.integers(0, 2)),  # close / flush+crash / crash
    ),
    max_size=25,
)


@settings(max_examples=int(os.environ.get("LOG_MODEL_EXAMPLES", "30")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_model_based_operations(steps) -> None:
    """Random appends/rolls/truncations/start moves/reopens agree with a list-of-batches model."""
    from .conftest import crash

    config = LogConfig(segment_bytes=300, index_interval_bytes=64, file_delete_delay_ms=0)
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog.open(Path(tmp), "m", 0, config, now_ms=0)
        batches: list[tuple[int, int]] = []  # (base offset, count)
        start = end = 0
        try:
            for op, arg in steps:
                if op == "append":
                    info = log.append(make_batch(arg), 0, now_ms=0)
                    assert info.first_offset == end
                    batches.append((end, arg))
                    end += arg
                elif op == "roll":
                    log.roll(now_ms=0)
                elif op == "truncate" and end > start:
                    target = start + arg * (end - start) // 100
                    log.truncate_to(target)
                    cut = next((b for b in batches if b[0] + b[1] - 1 >= target), None)
                    if cut is not None and cut[0] < start:  # nothing visible would remain
                        batches, start, end = [], target, target
                    elif cut is not None:
                        batches = batches[: batches.index(cut)]
                        end = cut[0]  # a straddling batch goes whole
                elif op == "start" and end > start:
                    target = start + arg * (end - start) // 100
                    log.increment_log_start_offset(target)
                    start = max(start, target)
                elif op == "reopen":
                    if arg == 0:
                        log.close()
                    else:
                        if arg == 1:
                            log.flush()
                        crash(log)  # unflushed bytes survive in the page cache: recovery rescans them
                    log = PartitionLog.open(Path(tmp), "m", 0, config, now_ms=0)
                assert (log.log_start_offset, log.log_end_offset) == (start, end)
                visible = [b for b in batches if b[0] + b[1] - 1 >= start]
                got = [(h.base_offset, h.record_count) for h in iter_headers(log.read_bytes(start, 10**9), verify=True)]
                assert got == visible
        finally:
            if not log._closed:
                log.close()
