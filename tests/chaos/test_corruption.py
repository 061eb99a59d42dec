"""The corrupt nemesis's damage on real segment files: raftka's log finds it on open, and the
harness finds raftka's report of it in a JSON log."""

from __future__ import annotations

import json
import random

import pytest
import structlog

from raftka.chaos.corruption import closed_segments, corrupt_segment, detection_in_log
from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.record_batch import Record, encode_batch

CONFIG = LogConfig(segment_bytes=1024)


def write_log(data_dir, partition: int = 0, batches: int = 40) -> None:
    plog = PartitionLog.open(data_dir, "chaos", partition, CONFIG, now_ms=1000)
    for i in range(batches):
        plog.append(encode_batch([Record(key=None, value=str(i).encode() * 10)]), 0, now_ms=1000 + i)
    plog.close()


@pytest.mark.parametrize("kind,seed", [("flip", 1), ("flip", 2), ("truncate", 3), ("truncate", 4)])
def test_damage_to_a_closed_segment_is_found_on_open_and_the_log_cut_before_it(tmp_path, kind, seed):
    write_log(tmp_path)
    before = closed_segments(tmp_path, "chaos")
    assert len(before) >= 2 and all(p == 0 for p, _ in before)
    done = corrupt_segment(tmp_path, "chaos", kind, random.Random(seed))
    assert done is not None and done.kind == kind and done.partition == 0
    assert done.segment != sorted((tmp_path / "chaos-0").glob("*.log"))[-1].name, "only closed segments"
    with structlog.testing.capture_logs() as logs:
        plog = PartitionLog.open(tmp_path, "chaos", 0, CONFIG, now_ms=5000)
    try:
        assert plog.log_end_offset == done.batch_base_offset, (done, logs)
    finally:
        plog.close()
    reported = [e for e in logs if e["event"] in ("log.corrupt_batch", "log.recovery.truncated")]
    assert reported and reported[0]["partition"] == 0, logs


def test_corrupt_segment_without_closed_segments_does_nothing(tmp_path):
    write_log(tmp_path, batches=2)  # one segment, the active one
    assert corrupt_segment(tmp_path, "chaos", "flip", random.Random(0)) is None
    with pytest.raises(ValueError, match="meteor"):
        corrupt_segment(tmp_path, "chaos", "meteor", random.Random(0))


def test_detection_is_read_from_the_json_log_after_the_restart_only(tmp_path):
    log = tmp_path / "server.log"
    old = {"event": "log.corrupt_batch", "level": "error", "topic": "chaos", "partition": 1}
    log.write_text(json.dumps(old) + "\n")
    restart_at = log.stat().st_size
    assert detection_in_log(log, restart_at, "chaos", 1) is None
    with open(log, "a") as f:
        f.write("not json at all log.\n")
        f.write(json.dumps({"event": "log.recovery.truncated", "topic": "chaos", "partition": 0}) + "\n")
        f.write(json.dumps({"event": "log.corrupt_batch", "topic": "other", "partition": 1}) + "\n")
    assert detection_in_log(log, restart_at, "chaos", 1) is None
    with open(log, "a") as f:
        f.write(json.dumps(old) + "\n")
    assert detection_in_log(log, restart_at, "chaos", 1) == old
    assert detection_in_log(log, restart_at, "chaos", 0)["event"] == "log.recovery.truncated"
    assert detection_in_log(tmp_path / "missing.log", 0, "chaos", 0) is None
