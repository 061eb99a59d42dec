"""Fetching from the closest replica (KIP-392): which replica a consumer should read from.

With `replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`, a
leader answers a consumer's Fetch (v11+, which carries the client's `client.rack`) whose
rack differs from its own with `preferred_read_replica` = an in-sync follower in the
client's rack that already has the fetch offset, and no records; the client then fetches
from that follower, which serves consumers up to its high watermark. Kafka's rule
(RackAwareReplicaSelector): no rack, or the leader in the client's rack, means the leader;
among several same-rack followers, the one with the highest log end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NO_PREFERRED_REPLICA = -1


def preferred_read_replica(client_rack: str, leader: int, isr: tuple[int, ...],
                           follower_log_ends: Mapping[int, int], fetch_offset: int,
                           rack_of: Callable[[int], str | None]) -> int:
    """The follower a consumer in `client_rack` should fetch from, or NO_PREFERRED_REPLICA (the leader).

    `follower_log_ends`: each follower's log end as the leader last saw it; `rack_of(b)` is
    the rack of a live broker, None for a broker without a rack or not live."""
    if not client_rack or rack_of(leader) == client_rack:
        return NO_PREFERRED_REPLICA
    candidates = [(end, -b) for b, end in follower_log_ends.items()
                  if b in isr and b != leader and end >= fetch_offset and rack_of(b) == client_rack]
    return -max(candidates)[1] if candidates else NO_PREFERRED_REPLICA
