"""Offset and time index: lookups, sparseness, truncation, rebuild from the log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raftka.log.offset_index import CorruptIndex, OffsetIndex
from raftka.log.time_index import TimeIndex

from .conftest import make_batch


@pytest.fixture
def index(tmp_path: Path):
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    for offset, position in [(100, 0), (110, 500), (125, 1200), (140, 2000)]:
        idx.append(offset, position)
    yield idx
    idx.close()


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (100, (100, 0)),  # exact, first
        (110, (110, 500)),  # exact
        (111, (110, 500)),  # between entries
        (124, (110, 500)),
        (125, (125, 1200)),
        (99, (100, 0)),  # before the first: segment start
        (10, (100, 0)),
        (140, (140, 2000)),  # last
        (10_000, (140, 2000)),  # after the last
    ],
)
def test_offset_index_lookup(index: OffsetIndex, target: int, expected: tuple[int, int]) -> None:
    assert index.lookup(target) == expected


def test_offset_index_file_round_trip_and_truncate(index: OffsetIndex) -> None:
    assert index.path.stat().st_size == 0  # entries reach the file on flush or close
    index.flush()
    assert index.path.stat().st_size == 4 * 8
    again = OffsetIndex(index.path, 100, 1024)
    assert again.entries() == index.entries()
    again.close()
    index.truncate_to_offset(125)
    assert index.entries() == [(100, 0), (110, 500)]
    assert index.path.stat().st_size == 2 * 8
    index.truncate_to_position(500)
    assert index.entries() == [(100, 0)]
    assert index.lookup(130) == (100, 0)


def test_offset_index_rejects_out_of_order_and_full(tmp_path: Path, index: OffsetIndex) -> None:
    with pytest.raises(ValueError, match="must come after"):
        index.append(139, 3000)
    small = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 16)
    small.append(1, 10)
    small.append(2, 20)
    assert small.is_full
    with pytest.raises(ValueError, match="full"):
        small.append(3, 30)
    small.close()


def test_offset_index_bad_file_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(b"\x00" * 12)
    with pytest.raises(CorruptIndex, match="multiple"):
        OffsetIndex(path, 0, 1024)
    path.write_bytes(bytes.fromhex("00000005 00000010 00000003 00000020"))
    with pytest.raises(CorruptIndex, match="does not follow"):
        OffsetIndex(path, 0, 1024)


@pytest.mark.parametrize(
    ("target", "expected"),
    [(999, (-1, 0)), (1000, (1000, 3)), (1500, (1000, 3)), (2000, (2000, 9)), (2999, (2000, 9)), (9000, (5000, 20))],
)
def test_time_index_lookup(tmp_path: Path, target: int, expected: tuple[int, int]) -> None:
    idx = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 1200)
    assert idx.maybe_append(1000, 3)
    assert not idx.maybe_append(900, 5)  # timestamps only grow
    assert idx.maybe_append(2000, 9)
    assert idx.maybe_append(5000, 20)
    assert idx.lookup(target) == expected
    idx.flush()
    again = TimeIndex(idx.path, 0, 1200)
    assert again.entries() == [(1000, 3), (2000, 9), (5000, 20)]
    again.truncate_to_offset(9)
    assert again.entries() == [(1000, 3)]
    again.close()
    idx.close()


@pytest.mark.parametrize(
    ("entries", "corrupt"),
    [
        ([(1000, 3), (2000, 3)], False),  # the same offset again: a later batch reached a larger timestamp
        ([(1000, 3), (2000, 9)], False),
        ([(1000, 3), (1000, 9)], True),  # timestamps increase strictly
        ([(2000, 3), (1000, 9)], True),
        ([(1000, 9), (2000, 3)], True),  # offsets never go back
    ],
)
def test_time_index_file_order(tmp_path: Path, entries: list[tuple[int, int]], corrupt: bool) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(b"".join(t.to_bytes(8, "big", signed=True) + r.to_bytes(4, "big") for t, r in entries))
    if corrupt:
        with pytest.raises(CorruptIndex, match="does not follow"):
            TimeIndex(path, 0, 1200)
    else:
        assert TimeIndex(path, 0, 1200).entries() == entries
    path.write_bytes(b"\x00" * 8)
    with pytest.raises(CorruptIndex, match="multiple of the 12-byte entry"):
        TimeIndex(path, 0, 1200)


def test_sparse_interval_and_rebuild_equals_original(open_log, part_dir: Path) -> None:
    log = open_log(index_interval_bytes=300, segment_bytes=20_000)
    sizes = []
    for i in range(60):
        batch = make_batch(1 + i % 4, timestamp=1_000 + i * 10)
        sizes.append(len(batch))
        log.append(batch, 0, now_ms=0)
    log.roll(now_ms=0)
    first = log.segments[0]
    entries = first.index.entries()
    assert len(entries) > 3
    # Every entry points at a batch start holding that base offset, and entries are at
    # least index.interval.bytes apart (Kafka: more than the interval since the last entry).
    positions = [p for _, p in entries]
    for (offset, position) in entries:
        assert first.header_at(position).base_offset == offset
    for a, b in zip(positions, positions[1:], strict=False):
        assert b - a > 300
    assert positions[0] > 300
    times = first.time_index.entries()
    assert times[-1][0] == 1_000 + 59 * 10  # final entry holds the segment's max timestamp
    log.close()

    (part_dir / "00000000000000000000.index").unlink()
    (part_dir / "00000000000000000000.timeindex").write_bytes(b"junk")
    log = open_log(index_interval_bytes=300, segment_bytes=20_000)
    rebuilt = log.segments[0]
    assert rebuilt.index.entries() == entries
    assert rebuilt.time_index.entries() == times
    for offset in range(0, log.log_end_offset, 7):
        assert log.read(offset, 1).first_offset <= offset < log.read(offset, 1).next_offset


def test_indexes_hold_no_descriptor_and_write_on_flush_or_close(tmp_path: Path) -> None:
    """One descriptor per segment (the .log), as in Kafka: index files are opened only to write."""
    fds = len(os.listdir("/proc/self/fd"))
    indexes = [OffsetIndex(tmp_path / f"{i:020d}.index", i, 1024) for i in range(50)]
    times = [TimeIndex(tmp_path / f"{i:020d}.timeindex", i, 1200) for i in range(50)]
    for i, (index, time_index) in enumerate(zip(indexes, times, strict=True)):
        index.append(i + 1, 10)
        time_index.maybe_append(1000, i + 1)
    assert len(os.listdir("/proc/self/fd")) == fds
    assert indexes[0].path.stat().st_size == 0
    for index, time_index in zip(indexes, times, strict=True):
        index.close()
        time_index.close()
    assert indexes[0].path.stat().st_size == 8 and times[0].path.stat().st_size == 12
    assert OffsetIndex(indexes[0].path, 0, 1024).entries() == [(1, 10)]
    assert len(os.listdir("/proc/self/fd")) == fds


def test_a_truncation_reaches_the_file_at_once(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 1024)
    for offset in (1, 5, 9):
        index.append(offset, offset * 100)
    index.flush()
    index.truncate_to_offset(5)  # no flush: a crash now must not leave entries past the cut
    assert OffsetIndex(index.path, 0, 1024).entries() == [(1, 100)]
    index.append(7, 700)
    index.close()
    assert OffsetIndex(index.path, 0, 1024).entries() == [(1, 100), (7, 700)]
