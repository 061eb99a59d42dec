"""Observers of the metadata quorum (broker-only nodes: pysyncobj read-only peers), in one
process on real sockets: they follow the committed log without a vote, cannot submit, and a
voter serves a bounded number of them without keeping the connections of those that left
(pysyncobj keeps one per reconnect for good)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from raftka.raft_meta.metadata.records import Config
from raftka.raft_meta.quorum.quorum import Quorum, QuorumSettings, SubmitError, open_quorum
from raftka.testing.local_cluster import free_low_port
from tests.support import wait_until_async

pytestmark = pytest.mark.timeout(120)

SECRET = "quorum-observer-test-secret"


def _connections(voter: Quorum) -> int:
    return len(voter._sync._SyncObj__transport._connections)  # what the fix bounds


async def _follows(observer: Quorum, offset: int) -> None:
    await wait_until_async(lambda: observer.last_offset >= offset, timeout=30,
                           what=f"the observer to apply offset {offset}")


async def _observe(node_id: int, voters: dict[int, str], directory: Path, release: trio.Event,
                   task_status=trio.TASK_STATUS_IGNORED) -> None:
    async with open_quorum(node_id, voters, SECRET, directory, observer=True) as observer:
        task_status.started(observer)
        await release.wait()


async def test_observers_follow_the_log_are_bounded_and_leave_nothing_behind(tmp_path: Path) -> None:
    voters = {1: f"127.0.0.1:{free_low_port(set())}"}
    settings = QuorumSettings(max_observers=1)
    async with open_quorum(1, voters, SECRET, tmp_path / "voter", settings=settings) as voter:
        first = await voter.submit(Config("cluster", "", "a", "1"))
        async with trio.open_nursery() as nursery:
            leave_2, leave_3 = trio.Event(), trio.Event()
            observer = await nursery.start(_observe, 2, voters, tmp_path / "o2", leave_2)
            assert observer.observer and not observer.is_leader
            await _follows(observer, first)
            assert observer.leader_id == 1
            assert voter.status().observers == 1 and observer.status().observers == 0
            with pytest.raises(SubmitError, match="NOT_LEADER"):
                await observer.submit(Config("cluster", "", "b", "1"))
            # A second observer is one too many: refused at its handshake, it gets nothing.
            refused = await nursery.start(_observe, 3, voters, tmp_path / "o3", leave_3)
            second = await voter.submit(Config("cluster", "", "c", "1"))
            await _follows(observer, second)
            with trio.move_on_after(2):  # it retries every connectionRetryTime (0.5 s) meanwhile
                await _follows(refused, second)
            assert refused.last_offset < second
            # The first observer gone, the refused one gets its turn.
            leave_2.set()
            await _follows(refused, second)
            leave_3.set()
        # Observers that come and go cost the voter nothing once gone.
        for n in range(4, 8):
            async with open_quorum(n, voters, SECRET, tmp_path / f"o{n}", observer=True) as passing:
                await _follows(passing, second)
        await wait_until_async(lambda: _connections(voter) == 0, timeout=30,
                               what="the voter to drop the connections of observers that left")


async def test_an_observer_behind_the_last_compaction_gets_the_dump_then_records(tmp_path: Path) -> None:
    voters = {1: f"127.0.0.1:{free_low_port(set())}"}
    settings = QuorumSettings(snapshot_max_record_bytes=256)
    async with open_quorum(1, voters, SECRET, tmp_path / "voter", settings=settings) as voter:
        for i in range(40):
            await voter.submit(Config("cluster", "", f"k{i}", "1"))
        await wait_until_async(lambda: voter.snapshot_offset > 0, timeout=30, what="a snapshot on the voter")
        async with open_quorum(2, voters, SECRET, tmp_path / "o2", observer=True) as observer:
            await _follows(observer, voter.last_offset)
            assert observer.dump_loads >= 1  # the leader's dump, not records from offset 1
            after = await voter.submit(Config("cluster", "", "after", "1"))
            await _follows(observer, after)
            snapshot, _ = observer.read_from(1)
            assert snapshot is not None and snapshot.image is not None
            assert snapshot.image.configs[("cluster", "")]["k39"] == "1"
