"""Metadata snapshots on real quorums in this process: the metadata dir stays bounded after many
topics are created and deleted, a restart loads the snapshot and the tail, and a voter that was
down while snapshots were taken catches up from the leader's full dump to the same image."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import trio

from raftka.raft_meta.config.node_config import parse_node_config
from raftka.raft_meta.controller.controller import Controller
from raftka.raft_meta.metadata.image import SnapshotLoaded
from raftka.raft_meta.metadata.metadata_loader import MetadataLoader
from raftka.raft_meta.metadata.records import Config
from raftka.raft_meta.metadata.snapshot import image_digest
from raftka.raft_meta.quorum.quorum import (
    METADATA_SUBDIR,
    QuorumSettings,
    open_quorum,
    open_quorum_from_config,
)
from raftka.testing.local_cluster import free_low_port
from tests.support import wait_until_async

pytestmark = pytest.mark.timeout(120)
CLUSTER = "AAAAAAAAAAAAAAAAAAAAAA"
SECRET = "controller-test-secret"
L = (("PLAINTEXT", "127.0.0.1", 9092),)


def _dir_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


@contextlib.asynccontextmanager
async def _controller_node(config):
    """A 1-voter quorum, its loader (deltas recorded) and the real controller."""
    async with open_quorum_from_config(config) as quorum, trio.open_nursery() as nursery:
        loader = MetadataLoader(quorum, CLUSTER)
        deltas: list = []
        loader.add_publisher(lambda delta, image: deltas.append(delta))
        await nursery.start(loader.run)
        controller = Controller(config, quorum, loader)
        await nursery.start(controller.run)
        with trio.fail_after(15):
            await loader.wait_active_controller()
        yield quorum, loader, controller, deltas
        nursery.cancel_scope.cancel()


async def test_1000_topics_created_and_deleted_leave_a_bounded_dir_and_a_restart_loads_the_snapshot(
        tmp_path: Path) -> None:
    port = free_low_port(set())
    config = parse_node_config({
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:{port}",
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "controller.quorum.secret": SECRET,
        "log.dirs": str(tmp_path / "data"),
        "num.partitions": "3",
        "broker.liveness.probe.enable": "false",  # nothing listens on the broker's port here
        "broker.session.timeout.ms": "600000",
        "metadata.log.max.record.bytes.between.snapshots": "65536",
    }, env={})
    metadata_dir = tmp_path / "data" / METADATA_SUBDIR
    cycles = 1000
    async with _controller_node(config) as (quorum, loader, controller, _):
        epoch = await controller.register_broker(1, "inc-1", L, None)
        await controller.heartbeat(1, epoch, metadata_offset=loader.image.offset)
        first_snapshot = None
        for i in range(cycles):
            await controller.create_topic(f"topic-{i}")
            await controller.delete_topic(f"topic-{i}")
            if i == cycles // 2:
                first_snapshot = quorum.snapshot_offset
        await controller.create_topic("kept", configs={"retention.ms": "1000"})
        last = quorum.last_offset
        # Snapshots were taken all along; the log holds only the records after the latest one.
        assert 0 < first_snapshot < quorum.snapshot_offset <= last
        tail = quorum.records_from(0)
        assert all(r.offset > quorum.snapshot_offset for r in tail) and len(tail) < 200
        expected = image_digest(loader.image)
    size = _dir_bytes(metadata_dir)
    assert size <= 5 * 1024 * 1024, f"metadata dir is {size} bytes after {cycles} create/delete cycles"

    async with _controller_node(config) as (quorum, loader, controller, deltas):
        await loader.wait_for_offset(last)
        assert quorum.dump_loads == 1  # the dump (snapshot + tail), then only the journal's tail
        # The loader started from the snapshot: one delta for it, then only the records after it.
        assert isinstance(deltas[0].record, SnapshotLoaded) and deltas[0].offset >= first_snapshot
        assert len(deltas) < 400
        image = await loader.wait_for_offset(last)
        kept = image.topic_by_name("kept")
        assert kept is not None and len(kept.partitions) == 3 and image.topic_config("kept", "retention.ms") == "1000"
        assert image.topic_by_name("topic-0") is None and len(image.topics) == 1
        at_last = image if image.offset == last else None
        if at_last is not None:
            assert image_digest(at_last) == expected
        # Offsets go on from where they were: never from 0.
        await controller.create_topic("after-restart")
        assert quorum.last_offset > last and loader.image.topic_by_name("after-restart") is not None


async def _until_leader(quorums) -> object:
    async def any_leader():
        return next((q for q in quorums if q.is_leader), None)

    with trio.fail_after(20):
        while (leader := await any_leader()) is None:
            await trio.sleep(0.05)
    return leader


async def test_a_voter_down_while_snapshots_are_taken_catches_up_from_the_leaders_dump(tmp_path: Path) -> None:
    ports = [free_low_port(set())]
    while len(ports) < 3:
        port = free_low_port(set(ports))
        if port not in ports:
            ports.append(port)
    voters = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(ports)}
    settings = QuorumSettings(snapshot_max_record_bytes=2048, log_compaction_min_entries=50)

    def node(nid: int):
        return open_quorum(nid, voters, SECRET, tmp_path / f"n{nid}", settings=settings)

    async with contextlib.AsyncExitStack() as stack:
        nursery = await stack.enter_async_context(trio.open_nursery())
        quorums, loaders = {}, {}
        for nid in (1, 2, 3):
            quorums[nid] = await stack.enter_async_context(node(nid))
        for nid, quorum in quorums.items():
            loaders[nid] = MetadataLoader(quorum, CLUSTER)
            await nursery.start(loaders[nid].run)

        async def submit_many(prefix: str, count: int) -> None:
            for i in range(count):
                leader = await _until_leader([quorums[n] for n in quorums if n in running])
                with contextlib.suppress(Exception):  # a retry carries the same request id
                    await leader.submit(Config("cluster", "", f"{prefix}-{i % 7}", f"{prefix}-{i}" * 4,
                                               request_id=f"{prefix}-{i}"))

        running = {1, 2, 3}
        await submit_many("before", 5)  # a few records: below the snapshot size, nobody dumps yet
        await wait_until_async(lambda: quorums[3].last_offset >= quorums[1].last_offset > 0, 10, "voter 3 has them")
        down_at = quorums[3].last_offset

        # Stop a follower (keep the leader so no election is needed for the writes that follow).
        leader = await _until_leader(list(quorums.values()))
        victim = next(n for n in (3, 2, 1) if quorums[n] is not leader)
        assert quorums[victim].dump_loads == 0
        nursery.cancel_scope.cancel()  # the loaders, then every voter (the two others restart below)

    async with contextlib.AsyncExitStack() as stack:
        nursery = await stack.enter_async_context(trio.open_nursery())
        survivors = [n for n in (1, 2, 3) if n != victim]
        quorums = {n: await stack.enter_async_context(node(n)) for n in survivors}
        running = set(survivors)
        await submit_many("while-down", 300)  # many snapshots and dumps on the two that run
        leader = await _until_leader(list(quorums.values()))
        assert leader.snapshot_offset > down_at

        quorums[victim] = await stack.enter_async_context(node(victim))
        running.add(victim)
        loaders = {}
        for nid, quorum in quorums.items():
            loaders[nid] = MetadataLoader(quorum, CLUSTER)
            await nursery.start(loaders[nid].run)
        await submit_many("after", 3)

        def converged() -> bool:
            offsets = {q.last_offset for q in quorums.values()} | {ld.image.offset for ld in loaders.values()}
            return len(offsets) == 1

        await wait_until_async(converged, 20, "every voter and loader at the same offset")
        # The victim's journal ended long before the leader's log starts: it got the full dump.
        assert quorums[victim].dump_loads >= 1
        assert quorums[victim].snapshot_offset > down_at
        images = [loaders[n].image for n in (1, 2, 3)]
        assert len({image_digest(image) for image in images}) == 1
        assert images[0].cluster_config("while-down-6") is not None
        nursery.cancel_scope.cancel()
