"""The controller loop on a real single-voter quorum in this process (the one-node cluster path)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from raftka.raft_meta.config.node_config import parse_node_config
from raftka.raft_meta.controller.controller import Controller
from raftka.raft_meta.controller.controller_decisions import NewTopic
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.metadata_loader import ClusterIdMismatch, MetadataLoader
from raftka.raft_meta.metadata.records import ControllerClaim, RecordBatch, Topic, decode_record
from raftka.raft_meta.quorum.quorum import SubmitError, open_quorum, open_quorum_from_config
from raftka.testing.local_cluster import free_low_port
from tests.support import wait_until_async

pytestmark = pytest.mark.timeout(60)
L = (("PLAINTEXT", "127.0.0.1", 9092),)


def _config(tmp_path: Path, **extra: str):
    port = free_low_port(set())
    props = {
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:{port}",
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "controller.quorum.secret": "controller-test-secret",
        "log.dirs": str(tmp_path / "data"),
        "broker.session.timeout.ms": "600",
        "broker.heartbeat.interval.ms": "100",
        "default.replication.factor": "2",
        "num.partitions": "2",
        **extra,
    }
    return parse_node_config(props, env={})


async def test_controller_registers_places_fences_and_unfences(tmp_path: Path) -> None:
    config = _config(tmp_path)
    async with open_quorum_from_config(config) as quorum, trio.open_nursery() as nursery:
        loader = MetadataLoader(quorum, "AAAAAAAAAAAAAAAAAAAAAA")
        published = []
        loader.add_publisher(lambda delta, image: published.append(delta.offset))
        await nursery.start(loader.run)
        controller = Controller(config, quorum, loader)
        await nursery.start(controller.run)
        with trio.fail_after(15):
            epoch = await loader.wait_active_controller()
        assert epoch >= 1 and loader.image.controller.node_id == 1

        epochs = {b: await controller.register_broker(b, f"inc{b}", L, None) for b in (1, 2, 3)}
        assert all(loader.image.brokers[b].fenced for b in epochs)
        with pytest.raises(ControllerError) as info:
            await controller.create_topic("t")
        assert info.value.name == "INVALID_REPLICATION_FACTOR"  # nobody is unfenced yet

        for b, e in epochs.items():
            reply = await controller.heartbeat(b, e, metadata_offset=loader.image.offset)
            assert not reply.fenced
        topic_id = await controller.create_topic("t")
        parts = loader.image.topics[topic_id].partitions
        assert len(parts) == 2 and all(len(p.replicas) == 2 for p in parts.values())
        assert published == sorted(published) and published[-1] == loader.image.offset

        # Broker 1 stops heartbeating: fenced, its leaderships move with a bumped leader epoch.
        led_by_1 = [i for i, p in parts.items() if p.leader == 1]
        assert led_by_1

        async def keep_alive() -> None:
            while True:
                for b in (2, 3):
                    await controller.heartbeat(b, epochs[b], loader.image.offset)
                await trio.sleep(0.1)

        nursery.start_soon(keep_alive)
        await wait_until_async(lambda: loader.image.brokers[1].fenced, 10, "broker 1 fenced")
        await wait_until_async(lambda: all(loader.image.partition(topic_id, i).leader != 1 for i in led_by_1), 10, "leaders moved")
        for i in led_by_1:
            part = loader.image.partition(topic_id, i)
            assert part.leader_epoch == 1 and 1 not in part.isr

        # It heartbeats again caught up: unfenced.
        reply = await controller.heartbeat(1, epochs[1], loader.image.offset)
        assert not reply.fenced and not loader.image.brokers[1].fenced

        # AlterPartition with a stale partition epoch is refused; with the right one it applies.
        part = loader.image.partition(topic_id, led_by_1[0])
        with pytest.raises(ControllerError) as info:
            await controller.alter_partition(part.leader, epochs[part.leader], topic_id, led_by_1[0],
                                             part.leader_epoch, part.partition_epoch - 1, part.isr)
        assert info.value.name == "INVALID_UPDATE_VERSION"

        # Controlled shutdown of broker 2: it ends up leading nothing.
        reply = await controller.heartbeat(2, epochs[2], loader.image.offset, want_shutdown=True)
        assert reply.shutdown_ready
        assert all(p.leader != 2 for p in loader.image.topics[topic_id].partitions.values())
        nursery.cancel_scope.cancel()


async def test_cluster_id_mismatch_is_refused(tmp_path: Path) -> None:
    port = free_low_port(set())
    voters = {1: f"127.0.0.1:{port}"}
    async with open_quorum(1, voters, "controller-test-secret", tmp_path) as quorum:
        with trio.fail_after(15):
            while not quorum.is_leader:
                await quorum.wait_state_change()
        await quorum.submit(ControllerClaim(1, quorum.term, "BBBBBBBBBBBBBBBBBBBBBB"))
        loader = MetadataLoader(quorum, "AAAAAAAAAAAAAAAAAAAAAA")
        with pytest.raises(ClusterIdMismatch, match="formatted for cluster 'AAAAAAAAAAAAAAAAAAAAAA'"):
            with trio.fail_after(10):
                await loader.run()


async def test_restart_from_snapshot_keeps_records_and_offsets(tmp_path: Path) -> None:
    from raftka.raft_meta.metadata.records import Config
    from raftka.raft_meta.quorum.quorum import QuorumSettings

    port = free_low_port(set())
    voters = {1: f"127.0.0.1:{port}"}
    settings = QuorumSettings(log_compaction_min_entries=10)
    dump = tmp_path / "__cluster_metadata-0" / "raft.dump"
    async with open_quorum(1, voters, "controller-test-secret", tmp_path, settings=settings) as quorum:
        offsets = []
        with trio.fail_after(20):
            while not quorum.is_leader:
                await quorum.wait_state_change()
            for i in range(40):
                offsets.append(await quorum.submit(Config("cluster", "", f"k{i}", str(i))))
            while not dump.exists():  # compaction runs in the tick thread after >10 entries
                await trio.sleep(0.05)
        before = [(r.offset, r.raw) for r in quorum.records_from(0)]
    assert [o for o, _ in before] == offsets
    async with open_quorum(1, voters, "controller-test-secret", tmp_path, settings=settings) as quorum:
        with trio.fail_after(20):
            await quorum.wait_beyond(offsets[-1] - 1)
        assert [(r.offset, r.raw) for r in quorum.records_from(0)] == before
        assert [r.offset for r in quorum.records_from(offsets[20])] == offsets[20:]


async def test_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    import socket

    from raftka.raft_meta.quorum.quorum import QuorumError, QuorumSettings

    port = free_low_port(set())
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with pytest.raises(QuorumError, match=f"could not bind 127.0.0.1:{port}"):
            async with open_quorum(1, {1: f"127.0.0.1:{port}"}, "controller-test-secret", tmp_path, settings=QuorumSettings(max_bind_retries=1)):
                pass
    with pytest.raises(QuorumError, match="secret is empty"):
        async with open_quorum(1, {1: f"127.0.0.1:{port}"}, "", tmp_path):
            pass


class HeldCommits:
    """The real quorum, except that the controller's entries wait at `gate` before they are
    submitted: a commit as slow as the test wants. `fail_with` makes the held entry fail
    (as pysyncobj reports a dropped entry) instead of committing when the gate opens."""

    def __init__(self, quorum) -> None:
        self._quorum = quorum
        self.gate = trio.Event()
        self.held = 0  # entries waiting at the gate now
        self.fail_with: str | None = None

    def __getattr__(self, name: str):
        return getattr(self._quorum, name)

    async def submit(self, record, timeout: float = 5.0) -> int:
        self.held += 1
        try:
            with trio.move_on_after(timeout) as scope:
                await self.gate.wait()
        finally:
            self.held -= 1
        if scope.cancelled_caught:
            raise SubmitError("TIMEOUT", f"held for {timeout} s")
        if self.fail_with is not None:
            raise SubmitError(self.fail_with)
        return await self._quorum.submit(record, timeout)


def _topic_records(quorum, name: str, after: int) -> list:
    return [r for c in quorum.records_from(after + 1) for r in _flatten(c.decode())
            if isinstance(r, Topic) and r.name == name]


def _flatten(record) -> list:
    return [decode_record(raw) for raw in record.records] if isinstance(record, RecordBatch) else [record]


async def test_a_slow_commit_answers_request_timed_out_and_a_retry_sees_its_outcome(tmp_path: Path) -> None:
    config = _config(tmp_path, **{"default.replication.factor": "1"})
    async with open_quorum_from_config(config) as quorum, trio.open_nursery() as nursery:
        loader = MetadataLoader(quorum, "AAAAAAAAAAAAAAAAAAAAAA")
        await nursery.start(loader.run)
        held = HeldCommits(quorum)
        controller = Controller(config, held, loader)
        await nursery.start(controller.run)
        with trio.fail_after(15):
            await loader.wait_active_controller()
        held.gate.set()
        epoch = await controller.register_broker(1, "inc1", L, None)
        assert not (await controller.heartbeat(1, epoch, loader.image.offset)).fenced
        held.gate = trio.Event()  # from here on the controller's commits are slow
        start = loader.image.offset

        # The commit is pending at the request's deadline: REQUEST_TIMED_OUT, never NOT_CONTROLLER.
        with pytest.raises(ControllerError) as info:
            await controller.create_topics([NewTopic("slow", 3, 1)], timeout_ms=100)
        assert info.value.name == "REQUEST_TIMED_OUT" and "still waiting for the commit of Topic" in info.value.message
        assert held.held == 1 and "slow" not in loader.image.topic_ids
        # A retry while it is pending waits for it instead of deciding on an image without it:
        # it times out too, and submits nothing of its own.
        with pytest.raises(ControllerError) as info:
            await controller.create_topics([NewTopic("slow", 5, 1)], timeout_ms=100)
        assert info.value.name == "REQUEST_TIMED_OUT" and "an earlier metadata change" in info.value.message
        assert held.held == 1

        # The first commit completes: a retry answers TOPIC_ALREADY_EXISTS with the real layout.
        held.gate.set()
        [result] = await controller.create_topics([NewTopic("slow", 5, 1)], timeout_ms=30_000)
        assert result.error is not None and result.error.name == "TOPIC_ALREADY_EXISTS"
        assert "3 partitions, replication factor 1" in result.error.message
        assert len(loader.image.topic_by_name("slow").partitions) == 3
        assert len(_topic_records(quorum, "slow", start)) == 1

        # A pending commit that then fails: the retry creates the topic.
        held.gate, held.fail_with = trio.Event(), "DISCARDED"
        with pytest.raises(ControllerError) as info:
            await controller.create_topics([NewTopic("dropped", 2, 1)], timeout_ms=100)
        assert info.value.name == "REQUEST_TIMED_OUT"
        held.gate.set()
        await wait_until_async(lambda: held.held == 0, 10, "the held entry's failure")
        held.fail_with = None
        [result] = await controller.create_topics([NewTopic("dropped", 2, 1)], timeout_ms=30_000)
        assert result.error is None and loader.image.topic_ids["dropped"] == result.topic_id
        assert len(loader.image.topic_by_name("dropped").partitions) == 2
        nursery.cancel_scope.cancel()


async def test_a_slow_commit_is_never_answered_not_controller(tmp_path: Path, monkeypatch) -> None:
    """A call without a deadline of its own (here the one-topic `create_topic`) waits
    DEFAULT_COMMIT_WAIT_S for its commit; a commit still pending then is REQUEST_TIMED_OUT
    (it used to be NOT_CONTROLLER: "could not commit Topic ...: TIMEOUT")."""
    from raftka.raft_meta.controller import controller as controller_module

    monkeypatch.setattr(controller_module, "DEFAULT_COMMIT_WAIT_S", 0.5, raising=False)
    config = _config(tmp_path, **{"default.replication.factor": "1"})
    async with open_quorum_from_config(config) as quorum, trio.open_nursery() as nursery:
        loader = MetadataLoader(quorum, "AAAAAAAAAAAAAAAAAAAAAA")
        await nursery.start(loader.run)
        held = HeldCommits(quorum)
        controller = Controller(config, held, loader)
        await nursery.start(controller.run)
        with trio.fail_after(15):
            await loader.wait_active_controller()
        held.gate.set()
        epoch = await controller.register_broker(1, "inc1", L, None)
        assert not (await controller.heartbeat(1, epoch, loader.image.offset)).fenced
        held.gate = trio.Event()
        with pytest.raises(ControllerError) as info:
            with trio.fail_after(30):
                await controller.create_topic("slow", 1, 1)
        assert info.value.name == "REQUEST_TIMED_OUT", info.value
        held.gate.set()
        await wait_until_async(lambda: "slow" in loader.image.topic_ids, 10, "the slow topic committed")
        nursery.cancel_scope.cancel()
