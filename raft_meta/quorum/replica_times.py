"""The Raft leader's view of each follower's last fetch and last caught-up time (DescribeQuorum's
`last_fetch_timestamp` / `last_caught_up_timestamp`, in ms since the epoch), by Kafka's rule
(LeaderState.ReplicaState.updateFollowerState). Pure: the caller passes the clock.

pysyncobj's leader pushes AppendEntries; a follower's answer (`next_node_idx`: the index it
wants next, i.e. Kafka's fetch offset, when `success`) stands for Kafka's fetch. A follower is
caught up when its fetch offset reaches the leader's log end as of now, or, failing that, as of
its previous fetch (then it was caught up at that fetch's time). A failed consistency check is
a fetch whose offset is unknown: it moves only the fetch time. Times start at -1 (Kafka's
"never") for each new leader term.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicaTimes:
    term: int
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1  # the leader's log end offset when the last fetch came


def on_fetch(previous: ReplicaTimes | None, term: int, fetch_offset: int | None, leader_end: int,
             now_ms: int) -> ReplicaTimes:
    """The times after a fetch at `now_ms`: `fetch_offset` is the follower's log end offset (None
    if unknown), `leader_end` the leader's."""
    times = previous if previous is not None and previous.term == term else ReplicaTimes(term)
    caught_up, end_at_fetch = times.last_caught_up_ms, times.leader_end_at_last_fetch
    if fetch_offset is not None:
        if fetch_offset >= leader_end:
            caught_up = max(caught_up, now_ms)
        elif end_at_fetch > 0 and fetch_offset >= end_at_fetch:
            caught_up = max(caught_up, times.last_fetch_ms)
        end_at_fetch = leader_end
    return ReplicaTimes(term, max(times.last_fetch_ms, now_ms), caught_up, end_at_fetch)
