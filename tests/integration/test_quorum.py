"""The metadata quorum in real processes on loopback: 3 voters (kill -9, restart) and 1 voter."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.quorum_procs import Voter, active_epoch, make_voters

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def voters3(tmp_path: Path):
    voters = make_voters(3, tmp_path)
    try:
        for voter in voters:
            voter.start()
        yield voters
    finally:
        for voter in voters:
            voter.stop()


def _active(voters: list[Voter], timeout: float, exclude: Voter | None = None, above: int = -1) -> tuple[Voter, int]:
    """Wait until some voter reports itself active controller with epoch > `above`."""
    candidates = [v for v in voters if v is not exclude]

    def found(_events):
        best = max(((active_epoch(v) or -1, v) for v in candidates), key=lambda pair: pair[0])
        return best if best[0] > above else None

    epoch, voter = candidates[0].wait_for(found, timeout, "an active controller")
    return voter, epoch


def _keys_acked(voter: Voter, prefix: str):
    return [e["key"] for e in voter.drain() if e["event"] == "ack" and e["key"].startswith(prefix)]


def test_three_voters_survive_leader_kill_and_catch_up(voters3: list[Voter]) -> None:
    leader, epoch = _active(voters3, 20)

    # Records committed in the same order everywhere.
    follower = next(v for v in voters3 if v is not leader)
    follower.send("submit a 20")  # through a follower: forwarded to the leader
    follower.wait_for(lambda _: len(_keys_acked(follower, "a-")) == 20, 20, "20 acks")
    expected = [f"a-{i}" for i in range(20)]
    for voter in voters3:
        voter.wait_for(lambda _, v=voter: v.committed_keys() == expected, 10, "all 20 committed in order")
    logs = [[(e["offset"], e["key"]) for e in v.drain() if e["event"] == "committed"] for v in voters3]
    assert logs[0] == logs[1] == logs[2]  # same records at the same offsets everywhere

    # The leader's view of each follower (DescribeQuorum): fetched and caught up within the last
    # few heartbeats, in ms since the epoch.
    followers = {str(v.node_id) for v in voters3 if v is not leader}
    times = _status(leader)
    assert set(times["fetch_times"]) == followers
    for fetched, caught_up in times["fetch_times"].values():
        assert times["now_ms"] - 5000 < caught_up <= fetched <= times["now_ms"]

    # kill -9 the leader: another is elected, nothing committed is lost.
    leader.kill()
    survivors = [v for v in voters3 if v is not leader]
    new_leader, new_epoch = _active(survivors, 20, above=epoch)
    assert new_leader is not leader and new_epoch > epoch
    new_leader.send("submit b 10")
    new_leader.wait_for(lambda _: len(_keys_acked(new_leader, "b-")) == 10, 20, "10 acks after the kill")
    # The new leader has never heard from the killed voter in its term: no times for it (-1).
    assert set(_status(new_leader)["fetch_times"]) == {str(v.node_id) for v in survivors if v is not new_leader}
    after = expected + [f"b-{i}" for i in range(10)]
    for voter in survivors:
        voter.wait_for(lambda _, v=voter: v.committed_keys() == after, 10, "old and new records in order")
    final = [(e["offset"], e["key"]) for e in survivors[0].drain() if e["event"] == "committed"]

    # The killed voter restarts from its journal and catches up; replays are not duplicated.
    leader.start()
    leader.wait_for(lambda _: leader.committed_keys() == after, 20, "restarted voter caught up")
    assert [(e["offset"], e["key"]) for e in leader.drain() if e["event"] == "committed"] == final


def _status(voter: Voter) -> dict:
    """The voter's next `status` answer."""
    before = len([e for e in voter.drain() if e["event"] == "status"])
    voter.send("status")
    return voter.wait_for(lambda events: ([e for e in events if e["event"] == "status"][before:] or [None])[0],
                          10, "a status answer")


def test_single_voter_quorum(tmp_path: Path) -> None:
    (voter,) = make_voters(1, tmp_path)
    try:
        voter.start()
        _active([voter], 20)
        voter.send("submit solo 5")
        voter.wait_for(lambda _: voter.committed_keys() == [f"solo-{i}" for i in range(5)], 20, "5 committed")
        voter.wait_for(lambda _: len(_keys_acked(voter, "solo-")) == 5, 20, "5 acks")
        offsets = [e["offset"] for e in voter.drain() if e["event"] == "ack"]
        assert offsets == sorted(offsets) and len(set(offsets)) == 5
        # Restart: the journal replays the same records at the same offsets.
        voter.stop()
        voter.start()
        voter.wait_for(lambda _: voter.committed_keys() == [f"solo-{i}" for i in range(5)], 20, "replayed after restart")
        replayed = [e["offset"] for e in voter.drain() if e["event"] == "committed"]
        assert replayed == offsets
    finally:
        voter.stop()
