"""Crash recovery on open: torn tails, garbage, flipped bits, lost or broken indexes, swaps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from raftka.log.batch_header import iter_headers
from raftka.log.checkpoint import read_offsets

from .conftest import PARTITION, TOPIC, crash, make_batch

SEG0 = "00000000000000000000"


def snapshot_dir(part_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in part_dir.iterdir()}


def restore_dir(part_dir: Path, files: dict[str, bytes]) -> None:
    shutil.rmtree(part_dir)
    part_dir.mkdir()
    for name, data in files.items():
        (part_dir / name).write_bytes(data)


def crashed_log(open_log, flushed: int, unflushed: list[bytes]):
    """A log with `flushed` batches below the recovery point and `unflushed` after it, then a crash."""
    log = open_log(index_interval_bytes=100)
    for i in range(flushed):
        log.append(make_batch(1 + i % 3), 0, now_ms=0)
    log.flush()
    boundary = log.active_segment.size
    end_offset = log.log_end_offset
    for batch in unflushed:
        log.append(batch, 1, now_ms=0)
    crash(log)
    return boundary, end_offset


def test_torn_last_batch_at_every_byte(open_log, part_dir: Path) -> None:
    last = make_batch(2)
    boundary, flushed_end = crashed_log(open_log, 6, [make_batch(1), last])
    files = snapshot_dir(part_dir)
    full = files[SEG0 + ".log"]
    last_start = len(full) - len(last)
    expected_end = flushed_end + 1
    for cut in range(last_start, len(full)):
        restore_dir(part_dir, files)
        (part_dir / (SEG0 + ".log")).write_bytes(full[:cut])
        log = open_log(index_interval_bytes=100)
        assert log.log_end_offset == expected_end, cut
        assert log.read_bytes(0, 10**6) == full[:last_start], cut
        assert log.active_segment.size == last_start
        crash(log)
    # and a cut inside the flushed part's last batch would be caught by the tail scan too
    assert boundary < last_start


def test_garbage_after_the_last_batch_is_truncated(open_log, part_dir: Path) -> None:
    crashed_log(open_log, 5, [make_batch(3)])
    path = part_dir / (SEG0 + ".log")
    good = path.read_bytes()
    fake_header = bytearray(make_batch(1))
    fake_header[30] ^= 0xFF  # plausible header, wrong CRC
    path.write_bytes(good + bytes(fake_header) + b"\x00\x01garbage" * 10)
    with capture_logs() as logs:
        log = open_log(index_interval_bytes=100)
    assert path.stat().st_size == len(good)
    assert log.read_bytes(0, 10**6) == good
    (event,) = [e for e in logs if e["event"] == "log.recovery.truncated"]
    assert event["bytes"] == len(fake_header) + 90 and event["log_level"] == "warning"
    assert log.append(make_batch(1), 1, now_ms=0).first_offset == log.log_end_offset - 1


def test_flipped_bit_in_the_tail_truncates_from_that_batch(open_log, part_dir: Path) -> None:
    tail = [make_batch(2) for _ in range(4)]
    _, flushed_end = crashed_log(open_log, 5, tail)
    path = part_dir / (SEG0 + ".log")
    data = bytearray(path.read_bytes())
    third = len(data) - 2 * len(tail[0])
    data[third + 65] ^= 0x04  # inside the records of the third unflushed batch
    path.write_bytes(bytes(data))
    log = open_log(index_interval_bytes=100)
    assert log.log_end_offset == flushed_end + 4
    assert path.stat().st_size == third
    headers = list(iter_headers(log.read_bytes(0, 10**6), verify=True))
    assert headers[-1].next_offset == flushed_end + 4
    # the epoch cache forgot nothing that survived and kept nothing that did not
    assert log.epoch_cache.entries() == [(0, 0), (1, flushed_end)]


@pytest.mark.parametrize("damage", ["deleted", "odd_size", "points_past_end", "time_deleted"])
def test_broken_index_is_rebuilt(open_log, part_dir: Path, damage: str) -> None:
    log = open_log(index_interval_bytes=150, segment_bytes=3000)
    for i in range(80):
        log.append(make_batch(1 + i % 4, timestamp=100 * i), 0, now_ms=0)
    assert len(log.segments) > 2
    expected = [(o, log.read(o, 1).first_offset) for o in range(0, log.log_end_offset)]
    entries = [s.index.entries() for s in log.segments]
    log.close()
    index = part_dir / (SEG0 + ".index")
    if damage == "deleted":
        index.unlink()
    elif damage == "odd_size":
        index.write_bytes(index.read_bytes() + b"\x01\x02\x03")
    elif damage == "points_past_end":
        index.write_bytes(index.read_bytes()[:-8] + (10**6).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    else:
        (part_dir / (SEG0 + ".timeindex")).unlink()
    log = open_log(index_interval_bytes=150, segment_bytes=3000)
    assert [s.index.entries() for s in log.segments] == entries
    assert [(o, log.read(o, 1).first_offset) for o in range(0, log.log_end_offset)] == expected
    assert log.offset_for_timestamp(100 * 40) is not None
    assert log.offset_for_timestamp(100 * 40)[1] == 100 * 40


def test_unflushed_segments_after_a_torn_one_are_set_aside(open_log, part_dir: Path) -> None:
    log = open_log(segment_bytes=400)
    for _ in range(12):
        log.append(make_batch(2), 0, now_ms=0)
    segments = [s.base_offset for s in log.segments]
    assert len(segments) >= 3
    crash(log)
    # Pretend the crash happened before the last roll's flush: recovery point back to 0,
    # and the second segment torn; everything after it must go.
    (part_dir / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    second = part_dir / f"{segments[1]:020d}.log"
    whole = second.read_bytes()
    second.write_bytes(whole[:-5])
    later = {f"{b:020d}.log": (part_dir / f"{b:020d}.log").read_bytes() for b in segments[2:]}
    log = open_log(segment_bytes=400)
    assert [s.base_offset for s in log.segments] == segments[:2]
    assert not (part_dir / f"{segments[2]:020d}.log").exists()
    assert log.log_end_offset == log.segments[1].next_offset
    # Out of the log, not deleted: each later segment and the torn batch's bytes are kept (#27).
    strays = {p.name: p.read_bytes() for p in part_dir.glob("*.stray")}
    assert {n.split(".log.")[0] + ".log": b for n, b in strays.items() if ".cut-at-byte-" not in n} == later
    (cut,) = [b for n, b in strays.items() if ".cut-at-byte-" in n]
    assert whole[:-5].endswith(cut)
    assert not list(part_dir.glob(f"{segments[2]:020d}.*index"))  # derived files go


def test_interrupted_compaction_files_are_finished_or_removed(open_log, part_dir: Path) -> None:
    log = open_log(segment_bytes=400)
    for _ in range(12):
        log.append(make_batch(2), 0, now_ms=0)
    original = log.read_bytes(0, 10**6)
    log.close()
    seg0 = part_dir / (SEG0 + ".log")
    swap = part_dir / (SEG0 + ".log.swap")
    swap.write_bytes(seg0.read_bytes())  # the cleaned copy (here: unchanged) made it to .swap
    seg0.write_bytes(b"\x00" * 10)  # and the old file is trash
    (part_dir / (SEG0 + ".index")).write_bytes(b"\x00" * 8)
    (part_dir / "00000000000000000012.log.cleaned").write_bytes(b"partial")
    (part_dir / "00000000000000000004.log.deleted").write_bytes(b"old")
    log = open_log(segment_bytes=400)
    assert log.read_bytes(0, 10**6) == original
    leftovers = [p.name for p in part_dir.iterdir() if p.suffix in (".swap", ".cleaned", ".deleted")]
    assert leftovers == []


def test_checkpoints_are_written_only_when_they_change(open_log, part_dir: Path) -> None:
    recovery = part_dir / "recovery-point-offset-checkpoint"
    log = open_log()
    # A new, empty log has nothing to checkpoint that a missing file does not say (0).
    assert not recovery.exists() and not (part_dir / "log-start-offset-checkpoint").exists()
    log.append(make_batch(3), 0, now_ms=0)
    log.flush()
    assert read_offsets(recovery) == {(TOPIC, PARTITION): 3}
    inode = recovery.stat().st_ino
    log.flush()  # nothing moved: the file is not replaced
    assert recovery.stat().st_ino == inode
    crash(log)
    recovery.write_text("garbage\n")
    with capture_logs() as logs:
        reopened = open_log()
    assert "log.checkpoint.corrupt" in [e["event"] for e in logs]
    assert reopened.log_end_offset == 3
    assert read_offsets(recovery) == {(TOPIC, PARTITION): 3}  # a corrupt file is rewritten


def test_start_up_clean_up_keeps_what_it_cannot_explain(open_log, part_dir: Path) -> None:
    """#27: the clean-up at open removes only the suffixes it can prove are garbage (`.deleted`,
    `.cleaned`, `-checkpoint.tmp`); it is fed names that merely resemble them, stray files, an
    unparseable `.swap` and in-range producer snapshots, and keeps every one. A corrupt
    leader-epoch checkpoint is rebuilt from the batches, which all stay."""
    log = open_log(segment_bytes=400)
    for i in range(12):
        log.append(make_batch(2, producer_id=7, producer_epoch=0, base_sequence=2 * i), 0, now_ms=0)
    log.producer_state.take_snapshot(log.log_end_offset)
    data = log.read_bytes(0, 10**6)
    end = log.log_end_offset
    log.close()
    kept = {
        "00000000000000000004.log.0badc0de.stray": b"set aside by an earlier recovery",
        "00000000000000000004.log.cut-at-byte-9.0badc0de.stray": b"cut bytes",
        "notes.log.swap": b"not a segment's swap",
        "notes.deleted.txt": b"an operator's file",
        "partition.metadata.tmp": b"version: 0\n",
        "leader-epoch-checkpoint.tmp.bak": b"x",
    }
    for name, body in kept.items():
        (part_dir / name).write_bytes(body)
    snapshots = sorted(p.name for p in part_dir.glob("*.snapshot"))
    assert snapshots
    (part_dir / "leader-epoch-checkpoint").write_text("0\n1\nnot numbers\n")  # corrupt
    with capture_logs() as logs:
        log = open_log(segment_bytes=400)
    assert any(e["event"] == "log.epoch_cache.corrupt" for e in logs)
    assert log.read_bytes(0, 10**6) == data and log.log_end_offset == end
    assert log.epoch_cache.latest_epoch == 0
    assert {name: (part_dir / name).read_bytes() for name in kept} == kept
    assert sorted(p.name for p in part_dir.glob("*.snapshot")) == snapshots  # in range: kept
    # the producer state came back from them: a retried batch is still a duplicate
    assert log.append(make_batch(2, producer_id=7, producer_epoch=0, base_sequence=22), 0, now_ms=0).duplicate


def test_a_new_segment_sets_aside_a_file_already_at_its_name(open_log, part_dir: Path) -> None:
    """#27: a roll creates `<log end>.log`; a file already there is in no segment list, but it is
    not proven garbage either (an operator's copy, a leftover of a tool): it is set aside, kept."""
    log = open_log()
    log.append(make_batch(2), 0, now_ms=0)
    planted = part_dir / f"{log.log_end_offset:020d}.log"
    planted.write_bytes(b"someone else's bytes")
    log.roll(now_ms=0)
    (kept,) = part_dir.glob(f"{planted.name}.*.stray")
    assert kept.read_bytes() == b"someone else's bytes"
    assert [s.base_offset for s in log.segments] == [0, 2] and log.segments[1].size == 0
