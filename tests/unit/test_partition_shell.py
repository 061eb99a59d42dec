"""broker/replication/partition.py, the shell over broker/replication/replica_state.py, on a real PartitionLog.

The rules themselves are in the scenario files (test_replica_state_scenarios.py); these
check that the shell feeds the core the log's offsets and the clock, assigns the leader
epoch in the log, and wakes high-watermark waiters. pytest-trio's autojump clock drives the time.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from raftka.broker.replication.partition import NotEnoughReplicas, NotLeaderOrFollower, Partition
from raftka.raft_meta.metadata.image import PartitionImage

from .conftest import make_batch


def _now_ms() -> float:
    return trio.current_time() * 1000.0


async def test_follower_catching_up_under_load_holds_the_high_watermark(open_log, autojump_clock) -> None:
    """KAFKA-7128: before the core, the HW ran with the leader's log end when the ISR was the
    leader alone, and a follower one fetch behind under steady load never reached it."""
    p = Partition("t", "tid", 0, 1, open_log())
    p.apply_image(PartitionImage((1, 2), (1,), 1, 1, 0), 1, _now_ms())
    assert p.log.epoch_cache.entries() == [(1, 0)]
    p.append_as_leader(make_batch(10), 1)
    assert p.high_watermark == 10  # follower 2 not caught up since the election: no wait
    p.update_follower_fetch(2, 10, _now_ms())
    await trio.sleep(1)
    p.append_as_leader(make_batch(10), 1)  # leo 20
    assert p.high_watermark == 10  # 2 is caught up: the HW waits for it
    await trio.sleep(1)
    p.append_as_leader(make_batch(10), 1)  # leo 30, before the follower's next fetch
    joinable = p.update_follower_fetch(2, 20, _now_ms())
    assert p.high_watermark == 20
    assert joinable is True  # at the HW and past the epoch start: an expansion is due


async def test_acks_all_waiter_wakes_when_the_follower_fetch_moves_the_high_watermark(open_log, autojump_clock) -> None:
    p = Partition("t", "tid", 0, 1, open_log())
    p.apply_image(PartitionImage((1, 2), (1, 2), 1, 1, 0), 2, _now_ms())
    info = p.append_as_leader(make_batch(5), -1)
    done = trio.Event()

    async def waiter() -> None:
        await p.wait_for_high_watermark(info.last_offset + 1, trio.current_time() + 30)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        p.update_follower_fetch(2, 5, _now_ms())
        await done.wait()
    assert p.high_watermark == 5


async def test_acks_all_waiter_wakes_when_the_image_fences_the_follower_it_waits_for(open_log,
                                                                                     autojump_clock) -> None:
    """#27: follower 3 left the ISR (a controlled shutdown) right after it caught up, so the
    HW waits for it (KAFKA-7128) until replica.lag.time.max.ms runs out, 30 s. The image that
    fences it wakes the waiter at once: a fenced replica is not eligible (KIP-841)."""
    p = Partition("t", "tid", 0, 1, open_log())
    p.apply_image(PartitionImage((1, 2, 3), (1, 2, 3), 1, 1, 0), 2, _now_ms())
    p.append_as_leader(make_batch(5), -1)
    p.update_follower_fetch(2, 5, _now_ms())
    p.update_follower_fetch(3, 5, _now_ms())
    p.apply_image(PartitionImage((1, 2, 3), (1, 2), 1, 1, 1), 2, _now_ms())  # 3 out of the ISR, not fenced yet
    info = p.append_as_leader(make_batch(5), -1)
    p.update_follower_fetch(2, 10, _now_ms())
    assert p.high_watermark == 5  # 3 is caught up and eligible: it holds the HW
    started = trio.current_time()
    done = trio.Event()

    async def waiter() -> None:
        await p.wait_for_high_watermark(info.last_offset + 1, started + 30)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        p.apply_image(PartitionImage((1, 2, 3), (1, 2), 1, 1, 1), 2, _now_ms(), ineligible=(3,))
        await done.wait()
    assert p.high_watermark == 10 and trio.current_time() == started


async def test_min_insync_and_roles_come_from_the_core(open_log, autojump_clock) -> None:
    p = Partition("t", "tid", 0, 1, open_log())
    p.apply_image(PartitionImage((1, 2), (1,), 1, 1, 0), 2, _now_ms())
    with pytest.raises(NotEnoughReplicas, match=r"ISR \[1\] is smaller than min.insync.replicas 2"):
        p.append_as_leader(make_batch(1), -1)
    with pytest.raises(NotLeaderOrFollower, match="broker 3 is not a follower"):
        p.update_follower_fetch(3, 0, _now_ms())
    became_leader, became_follower = p.apply_image(PartitionImage((1, 2), (2,), 2, 2, 1), 2, _now_ms())
    assert (became_leader, became_follower, p.is_leader) == (False, True, False)
    with pytest.raises(NotLeaderOrFollower):
        p.check_leader()



def test_high_watermark_never_starts_below_the_log_start(open_log) -> None:
    """DeleteRecords then a crash: the log start checkpoint (6) is newer than the HW checkpoint
    (0). Kafka clamps the HW to the log start; a new leader must not report HW 0 < start 6."""
    log = open_log()
    log.append(make_batch(10), 0, now_ms=0)
    log.increment_log_start_offset(6)
    p = Partition("t", "tid", 0, 1, log, high_watermark=0)
    assert p.high_watermark == 6
    p.update_follower_log_start(2, 6)
    assert p.follower_log_starts == {2: 6}
async def test_acks_all_waiter_gets_not_leader_at_once_when_the_partition_is_detached(open_log,
                                                                                       autojump_clock) -> None:
    """Reassigned away (or its topic deleted): the waiter must not sit until its request timeout
    (30 s of librdkafka stalls, seen in the reassignment test) but answer NOT_LEADER_OR_FOLLOWER."""
    p = Partition("t", "tid", 0, 1, open_log())
    p.apply_image(PartitionImage((1, 2), (1, 2), 1, 1, 0), 2, _now_ms())
    info = p.append_as_leader(make_batch(5), -1)
    started = trio.current_time()
    async with trio.open_nursery() as nursery:

        async def waiter() -> None:
            with pytest.raises(NotLeaderOrFollower, match="leadership moved"):
                await p.wait_for_high_watermark(info.last_offset + 1, started + 30)

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        p.detach()  # without it the waiter would get RequestTimedOut at started + 30 (virtual time)
