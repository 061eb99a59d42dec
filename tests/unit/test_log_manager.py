"""The LogManager on its own: a real manager on real log directories with real partition logs,
driven without a ReplicaManager (it is handed the hosted partitions and what the image assigns).
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from structlog.testing import capture_logs

from raftka.broker.replication.log_manager import HW_CHECKPOINT, OPEN_FAILED, LogManager
from raftka.broker.replication.partition import Partition
from raftka.log.checkpoint import read_offsets, write_offsets
from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.partition_metadata import read_topic_id, write_topic_id
from raftka.raft_meta.config.node_config import NodeConfig, parse_node_config, parse_properties
from raftka.raft_meta.metadata.image import PartitionImage
from tests.support import wait_until_async

from .conftest import make_batch
from .test_replica_reconcile import HEX, ID_1, ID_2, PROPERTIES


def _config(*log_dirs: Path) -> NodeConfig:
    return parse_node_config(parse_properties(PROPERTIES.format(log_dir=",".join(map(str, log_dirs)))), env={})


def _host(partitions: dict, log_dir: Path, topic: str, index: int = 0, config: LogConfig | None = None,
          high_watermark: int = 0) -> Partition:
    plog = PartitionLog.open(log_dir, topic, index, config or LogConfig())
    partition = Partition(topic, ID_1, index, 1, plog, high_watermark=high_watermark)
    partitions[(topic, index)] = partition
    return partition


def test_a_partition_stays_in_its_log_dir_and_a_new_one_goes_to_the_least_loaded(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    partitions: dict = {}
    manager = LogManager(_config(a, b), partitions, lambda: None)
    PartitionLog.open(b, "old", 0, LogConfig()).close()
    assert manager.dir_for(("old", 0)) == b  # where its data already is, though b is not less loaded
    _host(partitions, a, "x")
    _host(partitions, a, "y")
    _host(partitions, b, "z")
    assert manager.dir_for(("new", 0)) == b  # a hosts two, b one
    _host(partitions, b, "w")
    _host(partitions, b, "v")
    assert manager.dir_for(("new", 0)) == a
    for partition in partitions.values():
        partition.log.close()


async def test_the_high_watermark_checkpoint_hands_over_to_the_hosted_partition(tmp_path: Path) -> None:
    """Read at start; a partition installed takes its value and from then on writes its own; one
    not open yet keeps the checkpointed value while assigned (or while nothing is known), and
    is dropped once the image no longer assigns it."""
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    checkpoint = log_dir / HW_CHECKPOINT
    write_offsets(checkpoint, {("open", 0): 4, ("waiting", 0): 5, ("gone", 0): 7})
    partitions: dict = {}
    assigned: dict | None = None
    manager = LogManager(_config(log_dir), partitions, lambda: assigned)
    manager.checkpoint_high_watermarks()
    assert read_offsets(checkpoint) == {("open", 0): 4, ("waiting", 0): 5, ("gone", 0): 7}

    hw = manager.take_checkpointed_high_watermark(("open", 0))
    assert (hw, manager.take_checkpointed_high_watermark(("never", 0))) == (4, 0)
    partition = _host(partitions, log_dir, "open", high_watermark=hw)
    partition.apply_image(PartitionImage((1,), (1,), leader=1, leader_epoch=0, partition_epoch=0), 1, 0.0)
    partition.append_as_leader(make_batch(9), 1)  # the only replica: the high watermark follows at once
    assert partition.high_watermark == 9
    assigned = {("open", 0): ID_1, ("waiting", 0): ID_1}
    manager.checkpoint_high_watermarks()
    assert read_offsets(checkpoint) == {("open", 0): 9, ("waiting", 0): 5}
    manager.close()
    assert partition.log._closed


def test_retention_goes_on_past_a_log_that_fails(tmp_path: Path) -> None:
    log_dir = tmp_path / "data"
    partitions: dict = {}
    manager = LogManager(_config(log_dir), partitions, lambda: None)
    config = LogConfig(segment_bytes=200, retention_ms=1_000)
    broken = _host(partitions, log_dir, "broken", config=config)
    kept = _host(partitions, log_dir, "kept", config=config)
    for _ in range(5):
        kept.log.append(make_batch(1, value_size=150, timestamp=0), 0, now_ms=0)
    assert len(kept.log.segments) == 5
    broken.log.close()  # every call on it now raises
    with capture_logs() as logs:
        manager.clean_logs(now_ms=10_000)
    assert [(e["event"], e["topic"]) for e in logs if e["log_level"] == "error"] == [("log.cleanup_failed", "broken")]
    assert len(kept.log.segments) == 1 and kept.log.log_start_offset == 4
    kept.log.close()


async def test_logs_open_and_delete_in_worker_threads_under_their_locks(tmp_path: Path,
                                                                        nursery: trio.Nursery) -> None:
    """Opening writes the topic id and refuses another incarnation's directory; deleting renames
    to Kafka's `-delete` form and the delete loop removes it (a crash's leftover too), while a
    stray and a name that only looks deleted are kept."""
    log_dir = tmp_path / "data"
    manager = LogManager(_config(log_dir), {}, lambda: None)
    PartitionLog.open(log_dir, "other", 0, LogConfig()).close()
    write_topic_id(log_dir / "other-0", ID_2)
    leftover = log_dir / f"old-0.{HEX}-delete"
    kept = [log_dir / f"keep-0.{HEX}-stray", log_dir / "keep-0.abc-delete"]
    for d in [leftover, *kept]:
        d.mkdir()

    jobs = [(("t", 0), ID_1, log_dir, LogConfig()), (("other", 0), ID_1, log_dir, LogConfig())]
    result: list = []

    async def open_them() -> None:
        result.extend(await manager.open_logs(jobs))

    async with manager.locks.hold([("t", 0)]):  # e.g. a flush holds t-0's lock: the open waits
        nursery.start_soon(open_them)
        await trio.testing.wait_all_tasks_blocked()
        assert not result and not (log_dir / "t-0").exists()
    await wait_until_async(lambda: result, timeout=10, what="the logs opened")
    plog, refused = result
    assert refused is None  # another topic id's directory: never opened as this partition
    assert read_topic_id(log_dir / "t-0") == ID_1 and read_topic_id(log_dir / "other-0") == ID_2
    assert OPEN_FAILED not in result

    await nursery.start(manager.run)
    await manager.delete_logs([plog])
    assert not (log_dir / "t-0").exists()
    await wait_until_async(lambda: not leftover.exists() and not any(log_dir.glob("t-0.*-delete")), timeout=10,
                           what="the renamed directory and the leftover removed")
    assert all(d.is_dir() for d in kept) and (log_dir / "other-0").is_dir()
