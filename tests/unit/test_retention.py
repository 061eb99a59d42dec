"""Retention (time, size, log start) and compaction through the partition log."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.log.errors import OffsetOutOfRange
from raftka.log.record_batch import iter_batches

from .conftest import make_batch

HOUR = 3_600_000


def records(log) -> list[tuple[int, bytes | None, bytes | None]]:
    data = log.read_bytes(log.log_start_offset, 10**9)
    return [(r.offset, r.key, r.value) for b in iter_batches(data) for r in b.records]


def fill(log, batches: int, *, start_ts: int = 0, step_ts: int = 1000, epoch_every: int = 0) -> None:
    keys = [b"k0", b"k1"] if log.config.compact else None  # a compacted topic refuses null keys
    for i in range(batches):
        epoch = i // epoch_every if epoch_every else 0
        log.append(make_batch(2, keys=keys, timestamp=start_ts + i * step_ts), epoch, now_ms=0)


def test_retention_by_time(open_log, part_dir: Path) -> None:
    log = open_log(segment_bytes=400, retention_ms=HOUR)
    fill(log, 20, start_ts=0, step_ts=HOUR // 10, epoch_every=5)
    segments = list(log.segments)
    assert len(segments) >= 4
    # At now = 2h, batches with timestamps < 1h are expired: only segments entirely older go.
    now = 2 * HOUR
    expired = [s for s in segments[:-1] if now - s.max_timestamp > HOUR]
    assert 0 < len(expired) < len(segments) - 1
    assert log.delete_old_segments(now) == len(expired)
    assert log.segments[0].base_offset == segments[len(expired)].base_offset
    assert log.log_start_offset == log.segments[0].base_offset
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    assert log.read(log.log_start_offset, 1).first_offset == log.log_start_offset
    assert log.epoch_cache.entries()[0][1] == log.log_start_offset
    # Files are renamed, then removed after file.delete.delay.ms.
    assert not (part_dir / "00000000000000000000.log").exists()
    assert (part_dir / "00000000000000000000.log.deleted").exists()
    log.delete_old_segments(now + 60_000)
    assert not list(part_dir.glob("*.deleted"))
    # Far in the future everything closed expires, the active segment stays.
    end = log.log_end_offset
    log.delete_old_segments(100 * HOUR)
    assert len(log.segments) == 1 and log.log_end_offset == end
    assert log.log_start_offset == log.active_segment.base_offset
    log.close()
    again = open_log(segment_bytes=400, retention_ms=HOUR)
    assert (again.log_start_offset, again.log_end_offset) == (log.log_start_offset, end)


def test_retention_forever_and_compact_only(open_log) -> None:
    forever = open_log(segment_bytes=400, retention_ms=-1, retention_bytes=-1)
    fill(forever, 20)
    assert forever.delete_old_segments(10**15) == 0


def test_retention_by_bytes(open_log) -> None:
    log = open_log(segment_bytes=400, retention_bytes=1000, retention_ms=-1, file_delete_delay_ms=0)
    fill(log, 30)
    assert log.size > 2000
    deleted = log.delete_old_segments(0)
    assert deleted > 0
    assert log.size <= 1000 + log.segments[0].size  # Kafka's rule: stop once removing one more would go below
    assert log.size - log.segments[0].size < 1000
    assert log.log_start_offset == log.segments[0].base_offset


def test_compact_policy_ignores_retention(open_log) -> None:
    log = open_log(segment_bytes=400, retention_ms=1, retention_bytes=0, cleanup_policy="compact")
    fill(log, 20)
    assert log.delete_old_segments(10**15) == 0


def test_increment_log_start_offset(open_log) -> None:
    log = open_log(segment_bytes=400, file_delete_delay_ms=0)
    fill(log, 20, epoch_every=4)
    second = log.segments[1]
    target = second.base_offset + 3
    log.increment_log_start_offset(target)
    assert log.log_start_offset == target
    assert log.segments[0] is second  # the segment below the start went
    with pytest.raises(OffsetOutOfRange):
        log.read(target - 1, 100)
    assert log.read(target, 1).first_offset <= target  # the batch holding it is served whole
    assert log.epoch_cache.entries()[0][1] == target
    with pytest.raises(OffsetOutOfRange):
        log.increment_log_start_offset(log.log_end_offset + 1)
    log.close()
    assert open_log(segment_bytes=400).log_start_offset == target


def keyed(key: bytes, value: bytes | None, ts: int = 0) -> bytes:
    return make_batch([value], keys=[key], timestamp=ts)


def test_compaction_keeps_newest_per_key_with_offsets(open_log) -> None:
    log = open_log(segment_bytes=300, cleanup_policy="compact", file_delete_delay_ms=0)
    written = []
    for i in range(40):
        key = b"k%d" % (i % 5)
        info = log.append(keyed(key, b"v%d" % i), 0, now_ms=0)
        written.append((info.first_offset, key, b"v%d" % i))
    end = log.log_end_offset
    active_base = log.active_segment.base_offset
    stats = log.compact(now_ms=0)
    assert stats.segments_cleaned > 0 and stats.bytes_after < stats.bytes_before
    assert log.log_end_offset == end
    newest_closed = {}
    for offset, key, _ in written:
        if offset < active_base:
            newest_closed[key] = offset
    expected = [
        w for w in written if w[0] >= active_base or newest_closed[w[1]] == w[0]
    ]
    assert records(log) == expected
    # every original offset still resolves to the batch holding it or the next survivor
    for offset in range(end):
        info = log.read(offset, 1)
        assert info.first_offset >= offset or info.next_offset > offset
    log.close()
    again = open_log(segment_bytes=300, cleanup_policy="compact")
    assert records(again) == expected
    assert again.verify_segments() == []


def test_tombstones_survive_delete_retention(open_log) -> None:
    day = 24 * HOUR
    log = open_log(segment_bytes=300, cleanup_policy="compact", delete_retention_ms=day, file_delete_delay_ms=0)
    t0 = 10 * day
    log.append(keyed(b"a", b"1", t0), 0, now_ms=t0)
    log.append(keyed(b"b", b"1", t0), 0, now_ms=t0)
    log.append(keyed(b"a", None, t0), 0, now_ms=t0)  # tombstone
    log.roll(now_ms=t0)
    log.append(keyed(b"c", b"1", t0), 0, now_ms=t0)
    log.compact(now_ms=t0 + day - 1)
    assert records(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    log.compact(now_ms=t0 + day + 1)
    assert records(log) == [(1, b"b", b"1"), (3, b"c", b"1")]
    assert log.log_end_offset == 4


def test_min_compaction_lag(open_log) -> None:
    log = open_log(segment_bytes=10**6, cleanup_policy="compact", min_compaction_lag_ms=1000)
    log.append(keyed(b"a", b"1", 100), 0, now_ms=0)
    log.append(keyed(b"a", b"2", 100), 0, now_ms=0)
    log.roll(now_ms=0)
    log.append(keyed(b"a", b"3", 5000), 0, now_ms=0)
    log.append(keyed(b"a", b"4", 5000), 0, now_ms=0)
    log.roll(now_ms=0)
    log.append(keyed(b"z", b"1", 9000), 0, now_ms=0)
    log.compact(now_ms=3000)  # only the first segment is old enough
    assert [v for _, _, v in records(log)] == [b"2", b"3", b"4", b"1"]
    log.compact(now_ms=10_000)
    assert [v for _, _, v in records(log)] == [b"4", b"1"]


def test_compact_delete_does_both(open_log) -> None:
    log = open_log(segment_bytes=300, cleanup_policy="compact,delete", retention_ms=HOUR, file_delete_delay_ms=0)
    for i in range(30):
        log.append(keyed(b"k%d" % (i % 3), b"v%d" % i, ts=i * HOUR // 10), 0, now_ms=0)
    before = log.size
    log.compact(now_ms=0)
    assert log.size < before
    after_compaction = records(log)
    assert len({k for _, k, _ in after_compaction}) == 3
    deleted = log.delete_old_segments(3 * HOUR + HOUR // 2)
    assert deleted > 0 and log.log_start_offset > 0
    assert all(offset >= log.log_start_offset for offset, _, _ in records(log))


def test_delete_only_policy_does_not_compact(open_log) -> None:
    log = open_log(segment_bytes=300)
    for i in range(10):
        log.append(keyed(b"k", b"v%d" % i), 0, now_ms=0)
    assert log.compact(now_ms=0).segments_cleaned == 0
    assert len(records(log)) == 10
