"""The log loader on its own: what `load_log` reports and rebuilds, before a PartitionLog exists.

Crash recovery itself (torn tails, flipped bits, indexes, swaps, strays) is exercised through
`PartitionLog.open` in test_recovery.py and test_corrupt_segment.py; these tests hold the seam:
the loader reports what it found, rebuilds the epochs and the producer state from the data, and
leaves the checkpoint files to the log it hands over to.
"""

from __future__ import annotations

from pathlib import Path

from raftka.log.config import LogConfig
from raftka.log.log_loader import LOG_START_FILE, RECOVERY_POINT_FILE, load_log
from raftka.log.partition_log import PartitionLog

from .conftest import PARTITION, TOPIC, crash, make_batch

PID = 7


def test_a_new_directory_loads_as_one_empty_segment(tmp_path: Path) -> None:
    loaded = load_log(tmp_path, TOPIC, PARTITION, LogConfig())
    assert loaded.dir == tmp_path / f"{TOPIC}-{PARTITION}"
    assert [(s.base_offset, s.size) for s in loaded.segments] == [(0, 0)]
    assert (loaded.log_start_offset, loaded.checkpointed, loaded.recovered) == (0, (0, 0), False)
    for segment in loaded.segments:
        segment.close()


def test_an_unflushed_tail_is_recovered_and_the_epochs_and_producers_rebuilt_from_it(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, TOPIC, PARTITION, LogConfig(segment_bytes=300), now_ms=0)
    log.on_roll = lambda: None  # as the broker does: a roll's fsync is deferred, the recovery point stays
    log.append(make_batch(2), 0, now_ms=0)
    log.flush()
    for epoch, seq in ((3, 0), (3, 2), (5, 4)):  # rolls: the last segments are past the recovery point
        log.append(make_batch(2, value_size=100, producer_id=PID, producer_epoch=0, base_sequence=seq), epoch,
                   now_ms=0)
    assert len(log.segments) > 2 and log.recovery_point == 2
    crash(log)
    (tmp_path / f"{TOPIC}-{PARTITION}" / "leader-epoch-checkpoint").unlink()  # only the batches say the epochs

    loaded = load_log(tmp_path, TOPIC, PARTITION, LogConfig(segment_bytes=300))
    assert loaded.recovered
    assert loaded.checkpointed == (2, 0)  # what the files said: the open rewrites them only if it moves
    assert loaded.segments[-1].next_offset == 8
    assert loaded.epoch_cache.entries() == [(3, 2), (5, 6)]  # from the recovered segments' headers
    entry = loaded.producer_state.producers()[PID]
    assert (entry.batches[-1][1], entry.batches[-1][3]) == (5, 7)  # last sequence, last offset
    for segment in loaded.segments:
        segment.close()


def test_the_loader_leaves_the_checkpoints_to_the_log(tmp_path: Path) -> None:
    """A corrupt checkpoint is reported as unknown (None) and not rewritten by the loader;
    `PartitionLog.open` writes the offsets it then holds."""
    log = PartitionLog.open(tmp_path, TOPIC, PARTITION, LogConfig(), now_ms=0)
    log.append(make_batch(3), 0, now_ms=0)
    log.close()
    part_dir = tmp_path / f"{TOPIC}-{PARTITION}"
    (part_dir / RECOVERY_POINT_FILE).write_text("garbage\n")

    loaded = load_log(tmp_path, TOPIC, PARTITION, LogConfig())
    assert (loaded.checkpointed, loaded.recovered) == (None, True)  # recovery point unknown: all rechecked
    assert (part_dir / RECOVERY_POINT_FILE).read_text() == "garbage\n"
    for segment in loaded.segments:
        segment.close()

    reopened = PartitionLog.open(tmp_path, TOPIC, PARTITION, LogConfig(), now_ms=0)
    assert (part_dir / RECOVERY_POINT_FILE).read_text().splitlines()[2:] == [f"{TOPIC} {PARTITION} 3"]
    assert (part_dir / LOG_START_FILE).read_text().splitlines()[2:] == [f"{TOPIC} {PARTITION} 0"]
    reopened.close()
