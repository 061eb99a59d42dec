"""Partition assignors run by the group leader: Kafka's `range`, `roundrobin` and
`cooperative-sticky` (client/sticky_assignor.py).

Both are deterministic functions of (members' subscriptions, partition counts),
computed exactly as the Java client and librdkafka do, so a raftka member and a
librdkafka member in one group agree whoever leads:

- range: per topic, members subscribed to it sorted by member id; partitions
  split into contiguous ranges, the first `n % members` members getting one extra.
- roundrobin: all (topic, partition) pairs sorted, dealt in turn to the sorted
  members, skipping members not subscribed to the pair's topic.
"""

from __future__ import annotations

from collections.abc import Mapping

from raftka.client.group_protocol import Subscription
from raftka.client.records import TopicPartition
from raftka.client.sticky_assignor import cooperative_sticky_assign

Assignments = dict[str, list[TopicPartition]]


def range_assign(subscriptions: Mapping[str, Subscription], partitions: Mapping[str, int]) -> Assignments:
    out: Assignments = {m: [] for m in subscriptions}
    for topic in sorted({t for s in subscriptions.values() for t in s.topics}):
        count = partitions.get(topic, 0)
        members = sorted(m for m, s in subscriptions.items() if topic in s.topics)
        if not members or count <= 0:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per + (1 if i < extra else 0)
            out[member] += [TopicPartition(topic, p) for p in range(start, start + n)]
            start += n
    return out


def roundrobin_assign(subscriptions: Mapping[str, Subscription], partitions: Mapping[str, int]
                      ) -> Assignments:
    out: Assignments = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return out
    topics = sorted({t for s in subscriptions.values() for t in s.topics})
    i = 0
    for topic in topics:
        for p in range(partitions.get(topic, 0)):
            for _ in range(len(members)):
                member = members[i % len(members)]
                i += 1
                if topic in subscriptions[member].topics:
                    out[member].append(TopicPartition(topic, p))
                    break
    return out


ASSIGNORS = {"range": range_assign, "roundrobin": roundrobin_assign,
             "cooperative-sticky": cooperative_sticky_assign}
# Assignors whose plans follow KIP-429 (never hand a partition straight from one member to
# another), so members keep what they own while rejoining. A consumer rebalances
# cooperatively only when every assignor it offers is one of these (Kafka's rule).
COOPERATIVE = frozenset({"cooperative-sticky"})


def is_cooperative(names) -> bool:
    names = list(names)
    return bool(names) and all(name in COOPERATIVE for name in names)


def assignor(name: str):
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown partition assignor {name!r}; expected one of {sorted(ASSIGNORS)}") from None
