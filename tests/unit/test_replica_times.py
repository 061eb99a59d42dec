"""The Raft leader's fetch and caught-up times per follower (raft_meta/quorum/replica_times.py):
scenario tables of follower answers, checked against Kafka's LeaderState rule."""

from __future__ import annotations

import pytest

from raftka.raft_meta.quorum.replica_times import ReplicaTimes, on_fetch

# (fetches as (term, follower fetch offset or None, leader log end, now ms), expected times)
SCENARIOS = {
    "first fetch, caught up": ([(3, 10, 10, 1000)], ReplicaTimes(3, 1000, 1000, 10)),
    "first fetch, behind: never caught up": ([(3, 5, 10, 1000)], ReplicaTimes(3, 1000, -1, 10)),
    "reaches the end the leader had at its previous fetch: caught up then": (
        [(3, 5, 10, 1000), (3, 10, 12, 1500)], ReplicaTimes(3, 1500, 1000, 12)),
    "still short of the previous end: no change": (
        [(3, 5, 10, 1000), (3, 8, 12, 1500)], ReplicaTimes(3, 1500, -1, 12)),
    "unknown offset (failed consistency check): only the fetch time moves": (
        [(3, 10, 10, 1000), (3, None, 12, 1500)], ReplicaTimes(3, 1500, 1000, 10)),
    "a new term starts over": ([(3, 10, 10, 1000), (4, 5, 12, 1500)], ReplicaTimes(4, 1500, -1, 12)),
    "times never go back": ([(3, 10, 10, 2000), (3, 11, 11, 1500)], ReplicaTimes(3, 2000, 2000, 11)),
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_replica_times(scenario: str) -> None:
    fetches, expected = SCENARIOS[scenario]
    times = None
    for term, fetch_offset, leader_end, now_ms in fetches:
        times = on_fetch(times, term, fetch_offset, leader_end, now_ms)
    assert times == expected
