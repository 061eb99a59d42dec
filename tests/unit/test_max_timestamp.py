"""ListOffsets' MAX_TIMESTAMP lookup (broker/replication/max_timestamp.py) on real partition logs: scenario
tables of appended batches (per-record timestamps, leader epoch, segment size) and the record
Kafka's UnifiedLog names."""

from __future__ import annotations

import pytest

from raftka.broker.replication.max_timestamp import TimestampAndOffset, max_timestamp_and_offset
from raftka.log.compression import Compression
from raftka.log.record_batch import Record, encode_batch

from .conftest import make_batch


def batch(*timestamps: int, compression: int = 0) -> bytes:
    records = [Record(key=None, value=b"v%d" % i, timestamp=ts) for i, ts in enumerate(timestamps)]
    return encode_batch(records, base_timestamp=min(timestamps), compression=compression)


# (appended batches as (record timestamps, leader epoch), segment.bytes, expected answer)
SCENARIOS = {
    "empty log": ([], None, None),
    "one record": ([((1000,), 3)], None, TimestampAndOffset(1000, 0, 3)),
    "the largest wins, not the last": ([((1000,), 1), ((3000,), 2), ((2000,), 2)], None,
                                       TimestampAndOffset(3000, 1, 2)),
    "equals: the earliest": ([((3000,), 1), ((1000,), 1), ((3000,), 4)], None, TimestampAndOffset(3000, 0, 1)),
    "inside a batch: its first record with the max": ([((1000, 5000, 5000, 2000), 0)], None,
                                                      TimestampAndOffset(5000, 1, 0)),
    "batches after the max batch": ([((10,), 0), ((20, 90, 30), 5), ((40,), 6), ((50,), 6)], None,
                                    TimestampAndOffset(90, 2, 5)),
    # 80-byte segments: every batch rolls a new segment.
    "across segments": ([((1000,), 1), ((9000, 8000), 2), ((7000,), 3)], 80, TimestampAndOffset(9000, 1, 2)),
    "equal maxima in two segments: the first": ([((5000,), 1), ((5000,), 2)], 80, TimestampAndOffset(5000, 0, 1)),
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_max_timestamp_scenarios(open_log, scenario: str) -> None:
    appended, segment_bytes, expected = SCENARIOS[scenario]
    log = open_log(**({"segment_bytes": segment_bytes} if segment_bytes else {}))
    for timestamps, epoch in appended:
        log.append(batch(*timestamps), leader_epoch=epoch, now_ms=0)
    if segment_bytes:
        assert len(log.segments) > 1
    assert max_timestamp_and_offset(log) == expected


def test_compressed_batch(open_log) -> None:
    log = open_log()
    log.append(make_batch(2, timestamp=100), leader_epoch=0, now_ms=0)
    log.append(batch(300, 700, 500, compression=Compression.GZIP), leader_epoch=1, now_ms=0)
    assert max_timestamp_and_offset(log) == TimestampAndOffset(700, 3, 1)


def test_log_append_time_names_the_first_record_of_the_latest_batch(open_log) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    log.append(batch(1, 2), leader_epoch=0, now_ms=5_000)
    log.append(batch(3, 4, 5), leader_epoch=0, now_ms=9_000)
    log.append(batch(6), leader_epoch=0, now_ms=9_000)
    assert max_timestamp_and_offset(log) == TimestampAndOffset(9_000, 2, 0)
