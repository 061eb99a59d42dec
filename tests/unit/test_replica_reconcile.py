"""The replica manager's reconcile task: the publisher records, the task applies, in order.

A real ReplicaManager on real log directories, fed committed records through the real
`apply_entry`; the partition locks are held by the test to freeze file work at a chosen point.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from raftka.broker.replication.partition import NotLeaderOrFollower
from raftka.broker.replication.replica_manager import ReplicaManager, UnknownTopicOrPartition
from raftka.log.config import LogConfig
from raftka.log.partition_log import PartitionLog
from raftka.log.partition_metadata import read_topic_id, write_topic_id
from raftka.raft_meta.config.node_config import parse_node_config, parse_properties
from raftka.raft_meta.metadata.apply import apply_entry
from raftka.raft_meta.metadata.records import (
    Partition,
    PartitionChange,
    RegisterBroker,
    RemoveTopic,
    Topic,
)
from tests.support import wait_until_async

from .conftest import make_batch

PROPERTIES = """\
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
controller.quorum.secret=reconcile-test-s3cret
log.dirs={log_dir}
"""

ID_1 = "00000000-0000-4000-8000-000000000001"
ID_2 = "00000000-0000-4000-8000-000000000002"
ID_B = "00000000-0000-4000-8000-0000000000bb"


class Feed:
    """Committed records -> image -> `publish`, as the metadata loader does."""

    def __init__(self, manager: ReplicaManager) -> None:
        self.manager = manager
        self.image = manager.image
        self.offset = 0

    def commit(self, *records) -> None:
        for record in records:
            self.offset += 1
            self.image, deltas = apply_entry(self.image, record, self.offset)
            for delta in deltas:
                assert delta.accepted, delta.reason
                self.manager.publish(delta, self.image)

    def topic(self, name: str, topic_id: str, partitions: int, replicas: tuple[int, ...] = (1,)) -> None:
        self.commit(Topic(name, topic_id), *(
            Partition(topic_id, p, replicas, replicas, replicas[0]) for p in range(partitions)))


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def started(log_dir: Path, nursery: trio.Nursery):
    config = parse_node_config(parse_properties(PROPERTIES.format(log_dir=log_dir)), env={})
    manager = ReplicaManager(config)
    leadership: list[tuple[str, int, bool]] = []
    manager.add_leadership_listener(lambda p, lead: leadership.append((p.topic, p.index, lead)))

    async def alter_partition(partition, isr) -> None:
        raise AssertionError("no ISR change expected")

    await nursery.start(manager.run, alter_partition)
    feed = Feed(manager)
    feed.commit(RegisterBroker(1, "inc-1", (("PLAINTEXT", "127.0.0.1", 9092),)),
                RegisterBroker(2, "inc-2", (("PLAINTEXT", "127.0.0.1", 1),)))
    await manager.catch_up()
    await manager.wait_reconciled()
    yield manager, feed, leadership
    manager.close()


def _dirs(log_dir: Path) -> list[str]:
    return sorted(p.name for p in log_dir.iterdir() if p.is_dir())


async def test_publish_does_no_file_work_and_the_partition_is_retriable_until_open(started, log_dir: Path) -> None:
    manager, feed, _ = started
    feed.topic("big", ID_1, 3)
    # The publisher returned without touching the disk: the log is not open yet, and a
    # request gets Kafka's retriable NOT_LEADER_OR_FOLLOWER, not a stall.
    assert not (log_dir / "big-0").exists()
    with pytest.raises(NotLeaderOrFollower):
        manager.get_leader("big", 0)
    with pytest.raises(UnknownTopicOrPartition):
        manager.get_leader("nope", 0)
    await manager.wait_reconciled()
    assert [manager.get_leader("big", p).index for p in range(3)] == [0, 1, 2]
    assert read_topic_id(log_dir / "big-2") == ID_1


async def test_delete_then_recreate_ends_with_a_fresh_empty_log(started, log_dir: Path) -> None:
    manager, feed, _ = started
    feed.topic("t", ID_1, 1)
    await manager.wait_reconciled()
    manager.get_leader("t", 0).append_as_leader(make_batch(5), 1)
    assert manager.get("t", 0).log_end_offset == 5
    feed.commit(RemoveTopic(ID_1))
    feed.topic("t", ID_2, 1)
    await manager.wait_reconciled()
    partition = manager.get_leader("t", 0)
    assert (partition.topic_id, partition.log_end_offset) == (ID_2, 0)
    assert read_topic_id(log_dir / "t-0") == ID_2
    await wait_until_async(lambda: _dirs(log_dir) == ["t-0"], timeout=10,
                           what="the old incarnation's -delete directory to be removed")


async def test_recreate_while_the_first_open_waits_opens_only_the_new_incarnation(started, log_dir: Path) -> None:
    manager, feed, _ = started
    async with manager._locks.hold([("t", 0)]):  # freeze file work on t-0 (e.g. a slow open)
        feed.topic("t", ID_1, 1)
        await trio.testing.wait_all_tasks_blocked()
        feed.commit(RemoveTopic(ID_1))
        with pytest.raises(UnknownTopicOrPartition):
            manager.get("t", 0)
        feed.topic("t", ID_2, 1)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(NotLeaderOrFollower):
            manager.get("t", 0)
    await manager.wait_reconciled()
    partition = manager.get_leader("t", 0)
    assert (partition.topic_id, partition.log_end_offset) == (ID_2, 0)
    assert read_topic_id(log_dir / "t-0") == ID_2
    await wait_until_async(lambda: _dirs(log_dir) == ["t-0"], timeout=10,
                           what="no directory left but the new incarnation's")


async def test_role_changes_apply_in_order_while_logs_are_still_opening(started) -> None:
    manager, feed, leadership = started
    feed.topic("a", ID_1, 1, replicas=(1, 2))
    await manager.wait_reconciled()
    assert leadership == [("a", 0, True)]
    async with manager._locks.hold([("b", 0)]):  # b-0's open cannot finish meanwhile
        feed.topic("b", ID_B, 1)
        await trio.testing.wait_all_tasks_blocked()
        feed.commit(PartitionChange(ID_1, 0, partition_epoch=0, leader=2),
                    PartitionChange(ID_1, 0, partition_epoch=1, leader=1))
        await trio.testing.wait_all_tasks_blocked()
        # Both changes applied (the second one last), though b-0 is still opening.
        a = manager.partitions[("a", 0)]
        assert (a.leader, a.leader_epoch, a.partition_epoch) == (1, 2, 2)
        assert leadership[1:] and leadership[-1] == ("a", 0, True)
        with pytest.raises(NotLeaderOrFollower):
            manager.get("b", 0)
    await manager.wait_reconciled()
    assert manager.get_leader("b", 0).topic_id == ID_B


async def test_deleting_a_topic_renames_then_removes_its_directories(started, log_dir: Path) -> None:
    manager, feed, leadership = started
    feed.topic("gone", ID_1, 130)  # more than one batch of file work
    await manager.wait_reconciled()
    assert len(manager.partitions) == 130
    feed.commit(RemoveTopic(ID_1))
    with pytest.raises(UnknownTopicOrPartition):  # detached at once
        manager.get("gone", 7)
    await manager.wait_reconciled()
    assert not manager.partitions
    assert leadership.count(("gone", 7, False)) == 1
    await wait_until_async(lambda: _dirs(log_dir) == [], timeout=10, what="the -delete dirs to go")


def test_roll_defers_its_fsync_to_flush_rolled(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path, "r", 0, LogConfig(segment_bytes=1024))
    rolls: list[int] = []
    plog.on_roll = lambda: rolls.append(plog.log_end_offset)
    for _ in range(20):
        plog.append(make_batch(1, value_size=200), 0)
    assert rolls, "the appends rolled at least one segment"
    assert plog.recovery_point == 0 and plog.roll_flush_pending  # no fsync in the append path
    plog.flush_rolled()
    assert not plog.roll_flush_pending
    assert plog.recovery_point == plog.segments[-1].base_offset
    # A truncation below a pending roll flush never lets it claim unflushed data.
    plog.append(make_batch(1, value_size=900), 0)
    plog.append(make_batch(1, value_size=900), 0)
    plog.truncate_to(plog.recovery_point - 1)
    for _ in range(3):
        plog.append(make_batch(1, value_size=10), 0)
    plog.flush_rolled()
    assert plog.recovery_point <= plog.segments[-1].base_offset or plog.recovery_point == plog.log_end_offset
    plog.close()


def _epoch_file(log_dir: Path, name: str) -> str:
    path = log_dir / name / "leader-epoch-checkpoint"
    return path.read_text() if path.exists() else ""


async def test_the_leader_epoch_checkpoint_is_written_by_the_flush_task(started, log_dir: Path) -> None:
    manager, feed, _ = started
    feed.topic("e", ID_1, 1, replicas=(1, 2))
    await manager.wait_reconciled()
    await wait_until_async(lambda: _epoch_file(log_dir, "e-0").splitlines()[2:] == ["0 0"], timeout=10,
                           what="epoch 0 in the checkpoint file")
    feed.commit(PartitionChange(ID_1, 0, partition_epoch=0, leader=2),
                PartitionChange(ID_1, 0, partition_epoch=1, leader=1))
    await wait_until_async(lambda: _epoch_file(log_dir, "e-0").splitlines()[2:] == ["2 0"], timeout=10,
                           what="the new leader epoch in the checkpoint file")


async def test_a_followers_truncation_runs_in_a_worker_thread(started, log_dir: Path) -> None:
    manager, feed, _ = started
    feed.topic("f", ID_1, 1, replicas=(2, 1))  # broker 2 leads; this one follows
    await manager.wait_reconciled()
    partition = manager.partitions[("f", 0)]
    partition.log.append_as_follower(make_batch(3))
    assert partition.log_end_offset == 3
    partition.log.epoch_cache.assign(0, 0)  # as if the batch carried epoch 0
    # The epoch cache's change is noted from the worker thread, for the flush task.
    assert await manager.truncate(partition, 0, partition.leader_epoch)
    assert partition.log_end_offset == 0 and partition.log.epoch_cache.entries() == []
    await wait_until_async(lambda: _epoch_file(log_dir, "f-0").splitlines()[1:] == ["0"], timeout=10,
                           what="the emptied epoch cache written")


HEX = "0123456789abcdef" * 2


async def test_catch_up_sets_strays_aside_and_keeps_what_it_cannot_explain(tmp_path: Path,
                                                                           nursery: trio.Nursery) -> None:
    """#27: the wrong guesses fed to the start-up paths are all kept. Strays are renamed `-stray`
    with their bytes; the metadata dir (here a partition-like `meta-0` inside the log dir), the
    metadata log and names that merely look deleted are never touched; only a directory in
    Kafka's exact `-delete` form is removed, and a stray is never opened as a partition."""
    log_dir = tmp_path / "data"
    for name, topic_id in [("gone-0", ID_B), ("t-0", ID_1), ("live-0", ID_B)]:
        PartitionLog.open(log_dir, name.rsplit("-", 1)[0], 0, LogConfig()).close()
        write_topic_id(log_dir / name, topic_id)
    live = PartitionLog.open(log_dir, "live", 0, LogConfig())
    live.append(make_batch(5), 0, now_ms=0)
    live.close()
    gone_bytes = {p.name: p.read_bytes() for p in (log_dir / "gone-0").iterdir()}
    meta = log_dir / "meta-0"  # metadata.log.dir, named like a partition
    kept = [meta / "__cluster_metadata-0", log_dir / "__cluster_metadata-0", log_dir / "x-delete",
            log_dir / "notes-0-delete", log_dir / f"keep-0.{HEX}-stray", log_dir / "keep-0.abc-delete"]
    for d in kept:
        d.mkdir(parents=True)
        (d / "raft.journal").write_bytes(b"acknowledged")
    doomed = log_dir / f"old-0.{HEX}-delete"  # a deletion a crash interrupted: proven garbage
    doomed.mkdir()

    config = parse_node_config(parse_properties(PROPERTIES.format(log_dir=log_dir) + f"metadata.log.dir={meta}\n"),
                               env={})
    manager = ReplicaManager(config)

    async def alter_partition(partition, isr) -> None:
        raise AssertionError("no ISR change expected")

    await nursery.start(manager.run, alter_partition)
    feed = Feed(manager)
    feed.commit(RegisterBroker(1, "inc-1", (("PLAINTEXT", "127.0.0.1", 9092),)))
    feed.topic("t", ID_2, 1)  # re-created: t-0 on disk holds ID_1
    feed.topic("live", ID_B, 1)
    feed.topic("keep", ID_1, 1)  # a stray keep-0.<hex>-stray is no keep-0
    with capture_logs() as logs:
        await manager.catch_up()
        await manager.wait_reconciled()
    try:
        renamed = {e["dir"]: e for e in logs if e["event"] == "log.stray_renamed"}
        assert sorted(renamed) == [str(log_dir / "gone-0"), str(log_dir / "t-0")]
        gone = log_dir / renamed[str(log_dir / "gone-0")]["renamed_to"]
        assert {n: (gone / n).read_bytes() for n in gone_bytes} == gone_bytes
        assert read_topic_id(log_dir / renamed[str(log_dir / "t-0")]["renamed_to"]) == ID_1
        assert all((d / "raft.journal").read_bytes() == b"acknowledged" for d in kept)
        assert sorted(manager.partitions) == [("keep", 0), ("live", 0), ("t", 0)]
        assert manager.get("live", 0).log_end_offset == 5  # an assigned partition's data is kept
        assert (manager.get("t", 0).topic_id, manager.get("t", 0).log_end_offset) == (ID_2, 0)
        assert manager.get("keep", 0).log.dir == log_dir / "keep-0"
        await wait_until_async(lambda: not doomed.exists(), timeout=10, what="the -delete leftover removed")
        assert all(d.is_dir() for d in kept) and gone.is_dir()
    finally:
        manager.close()


async def test_a_topic_with_a_249_character_name_is_renamed_for_deletion(started, log_dir: Path) -> None:
    """Kafka caps the renamed directory's name at 255 bytes; a longer one fails to rename."""
    manager, feed, _ = started
    name = "t" * 249
    feed.topic(name, ID_1, 1)
    await manager.wait_reconciled()
    with capture_logs() as logs:
        feed.commit(RemoveTopic(ID_1))
        await manager.wait_reconciled()
    assert not [e for e in logs if e["event"] == "partition.rename_failed"]
    await wait_until_async(lambda: _dirs(log_dir) == [], timeout=10, what="the -delete dir to go")


async def test_a_truncation_worked_out_at_an_epoch_the_partition_left_cuts_nothing(started) -> None:
    """#27, truncation to the leader epoch fed a wrong guess: the follower worked out where to cut
    at leader epoch 0 (from broker 2's OffsetsForLeaderEpoch answer), and before the cut could take
    the partition's lock this broker was elected leader. Cutting now would remove the new leader's
    own acknowledged records; Kafka's fetcher drops such an answer, and so does ours."""
    manager, feed, _ = started
    feed.topic("f", ID_1, 1, replicas=(2, 1))  # broker 2 leads at epoch 0; this one follows
    await manager.wait_reconciled()
    partition = manager.partitions[("f", 0)]
    partition.log.append_as_follower(make_batch(3))
    done: list[bool] = []
    async with trio.open_nursery() as nursery:
        async with manager._locks.hold([partition.key]):  # e.g. a flush holds the lock
            nursery.start_soon(lambda: _record(done, manager.truncate(partition, 0, 0)))
            await trio.testing.wait_all_tasks_blocked()
            feed.commit(PartitionChange(ID_1, 0, partition_epoch=0, leader=1))  # elected meanwhile
            await manager.wait_reconciled()
            assert partition.is_leader and partition.leader_epoch == 1
    assert done == [False]
    assert partition.log_end_offset == 3


async def test_a_log_read_waits_for_the_lock_and_reads_in_a_worker_thread(started) -> None:
    """ListOffsets by timestamp (ReplicaManager.read_log): the batch is located on the trio thread,
    read and decoded in a worker thread, both under the partition's lock (no truncation meanwhile)."""
    manager, feed, _ = started
    feed.topic("r", ID_1, 1)
    await manager.wait_reconciled()
    partition = manager.get_leader("r", 0)
    threads: list[threading.Thread] = []

    def locate(log: PartitionLog) -> PartitionLog:
        threads.append(threading.current_thread())
        return log

    def read(log: PartitionLog) -> int:
        threads.append(threading.current_thread())
        return log.log_end_offset

    done: list[int] = []
    async with trio.open_nursery() as nursery:
        async with manager._locks.hold([partition.key]):  # e.g. a truncation holds the lock
            nursery.start_soon(lambda: _record(done, manager.read_log(partition, locate, read)))
            await trio.testing.wait_all_tasks_blocked()
            assert threads == []
    assert done == [0]
    assert threads[0] is threading.main_thread() and threads[1] is not threading.main_thread()
    assert await manager.read_log(partition, lambda log: None, read) is None  # nothing located: no read


async def _record(out: list, awaitable) -> None:
    out.append(await awaitable)


async def test_the_high_watermark_checkpoint_keeps_partitions_not_open_yet(tmp_path: Path,
                                                                           nursery: trio.Nursery) -> None:
    """#27: `replication-offset-checkpoint` is rewritten every few seconds from the hosted
    partitions. Before catch-up none is open: the file must keep their high watermarks (a crash
    then would restart them at 0), and drop only what the caught-up image no longer assigns."""
    from raftka.log.checkpoint import read_offsets, write_offsets

    log_dir = tmp_path / "data"
    log_dir.mkdir()
    checkpoint = log_dir / "replication-offset-checkpoint"
    kept = PartitionLog.open(log_dir, "kept", 0, LogConfig())
    kept.append(make_batch(6), 0, now_ms=0)
    kept.close()
    write_offsets(checkpoint, {("kept", 0): 5, ("gone", 0): 7})
    config = parse_node_config(parse_properties(PROPERTIES.format(log_dir=log_dir)), env={})
    manager = ReplicaManager(config)
    manager.checkpoint_high_watermarks()  # not caught up: nothing hosted yet
    assert read_offsets(checkpoint) == {("kept", 0): 5, ("gone", 0): 7}

    async def alter_partition(partition, isr) -> None:
        raise AssertionError("no ISR change expected")

    await nursery.start(manager.run, alter_partition)
    feed = Feed(manager)
    feed.commit(RegisterBroker(1, "inc-1", (("PLAINTEXT", "127.0.0.1", 9092),)))
    feed.topic("kept", ID_1, 1, replicas=(2, 1))
    async with manager._locks.hold([("kept", 0)]):  # its open waits
        await manager.catch_up()
        await trio.testing.wait_all_tasks_blocked()
        manager.checkpoint_high_watermarks()
        assert read_offsets(checkpoint) == {("kept", 0): 5}
    await manager.wait_reconciled()
    assert manager.partitions[("kept", 0)].high_watermark == 5
    manager.close()
