"""The server-side assignors of KIP-848 consumer groups: `uniform` and `range`.

The group coordinator runs one of them (`group.consumer.assignors`, Kafka's default
order: uniform first) whenever the group epoch moves past the target assignment
epoch. Both are pure, deterministic functions of

- the members' subscriptions (member id -> subscribed topic names),
- the subscribed topics' metadata (topic name -> `TopicMeta`: id and partition count),
- the previous target assignment (member id -> topic id -> partitions),

and return the new target assignment (member id -> topic id -> partitions; every
member present, possibly empty). Topics are keyed by id, as on the wire, so a topic
deleted and created again under the same name is a different topic.

- uniform (Kafka's `UniformAssignor`): balanced and sticky. A member keeps the
  partitions it had in the previous target that it still subscribes to; the rest go,
  topic by topic (topics with the fewest subscribers first), to the eligible member
  holding the fewest; then partitions move, along chains of members subscribed to the
  topic each passes on, from the most to the least loaded until no chain narrows the gap (so with identical subscriptions every member
  holds `n // m` or `n // m + 1` partitions, as Kafka's optimized builder does).
  Ties go to the smaller member id.
- range (Kafka's `RangeAssignor`): per topic, the members subscribed to it sorted by
  member id share contiguous ranges, the first `n % m` getting one more. Not sticky
  across membership changes (Kafka 3.8's sticky variant of range is not modelled).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """A topic as the metadata image has it (Kafka's `TopicMetadata`)."""

    topic_id: str
    name: str
    partitions: int
    # Per partition, the racks of its replicas' brokers (those that have one), in Java's
    # String order (Kafka's `partitionRacks`, sorted as its topic hash takes them); () when no
    # broker has a rack. Only the metadata hash (broker/group/metadata_hash.py) reads them.
    racks: tuple[tuple[str, ...], ...] = ()
    # Its metadata hash when already computed (the coordinator computes it off the event loop);
    # None: computed when needed. Not part of what the topic is.
    hash: int | None = field(default=None, compare=False)

    def partition_racks(self, partition: int) -> tuple[str, ...]:
        return self.racks[partition] if partition < len(self.racks) else ()


# member id -> topic id -> partitions
TargetAssignment = dict[str, dict[str, frozenset[int]]]
Assignor = Callable[[Mapping[str, tuple[str, ...]], Mapping[str, TopicMeta],
                     Mapping[str, Mapping[str, frozenset[int]]]], TargetAssignment]


def _freeze(plan: Mapping[str, Mapping[str, set[int]]]) -> TargetAssignment:
    return {m: {t: frozenset(ps) for t, ps in sorted(topics.items()) if ps} for m, topics in plan.items()}


def range_assign(members: Mapping[str, tuple[str, ...]], topics: Mapping[str, TopicMeta],
                 previous: Mapping[str, Mapping[str, frozenset[int]]]) -> TargetAssignment:
    del previous  # range is a function of the subscriptions alone
    plan: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for name in sorted(topics):
        meta = topics[name]
        subscribers = sorted(m for m, subscribed in members.items() if name in subscribed)
        if not subscribers or meta.partitions <= 0:
            continue
        quota, extra = divmod(meta.partitions, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = quota + (1 if i < extra else 0)
            if size:
                plan[member][meta.topic_id] = set(range(start, start + size))
            start += size
    return _freeze(plan)


def uniform_assign(members: Mapping[str, tuple[str, ...]], topics: Mapping[str, TopicMeta],
                   previous: Mapping[str, Mapping[str, frozenset[int]]]) -> TargetAssignment:
    by_id = {meta.topic_id: meta for meta in topics.values()}
    eligible: dict[str, list[str]] = {  # topic id -> members subscribed to it, sorted
        meta.topic_id: sorted(m for m, subscribed in members.items() if name in subscribed)
        for name, meta in topics.items()}
    owner: dict[tuple[str, int], str] = {}
    held: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    # 1. Stickiness: keep what the previous target gave, where it is still valid.
    for member in sorted(members):
        for topic_id, partitions in sorted(previous.get(member, {}).items()):
            meta = by_id.get(topic_id)
            if meta is None or member not in eligible[topic_id]:
                continue
            for p in sorted(partitions):
                if p < meta.partitions and (topic_id, p) not in owner:
                    owner[(topic_id, p)] = member
                    held[member].add((topic_id, p))
    # 2. The unassigned partitions go to the least loaded eligible member; the topics with
    # the fewest subscribers first, so they do not end up stacked on a few members.
    order = sorted(by_id, key=lambda t: (len(eligible[t]), by_id[t].name))
    for topic_id in order:
        if not eligible[topic_id]:
            continue
        for p in range(by_id[topic_id].partitions):
            if (topic_id, p) in owner:
                continue
            member = min(eligible[topic_id], key=lambda m: (len(held[m]), m))
            owner[(topic_id, p)] = member
            held[member].add((topic_id, p))
    # 3. Balance: move partitions along a chain of members (each passing one partition to
    # the next, which subscribes to its topic) from a most loaded member to one holding at
    # least two fewer, until there is no such chain. Each chain lowers the sum of squared
    # loads, so this ends; intermediate members keep their load.
    while (path := _balancing_path(held, eligible)) is not None:
        for giver, taker, tp in path:
            held[giver].remove(tp)
            held[taker].add(tp)
    plan: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for member, tps in held.items():
        for topic_id, p in tps:
            plan[member].setdefault(topic_id, set()).add(p)
    return _freeze(plan)


def _balancing_path(held: Mapping[str, set[tuple[str, int]]], eligible: Mapping[str, list[str]]
                    ) -> list[tuple[str, str, tuple[str, int]]] | None:
    """The moves (giver, taker, partition) of a shortest chain from the most loaded member
    that has one to a member with at least two partitions fewer (the least loaded such,
    then the nearest, then the smallest id); None when the loads cannot be evened out more."""
    for donor in sorted(held, key=lambda m: (-len(held[m]), m)):
        via: dict[str, tuple[str, tuple[str, int]] | None] = {donor: None}
        frontier = [donor]
        while frontier:
            following = []
            for giver in frontier:
                for tp in sorted(held[giver], reverse=True):  # a giver keeps its lowest partitions
                    for taker in eligible[tp[0]]:
                        if taker not in via:
                            via[taker] = (giver, tp)
                            following.append(taker)
            frontier = following
        receivers = [m for m in via if len(held[donor]) - len(held[m]) >= 2]
        if not receivers:
            continue
        receiver = min(receivers, key=lambda m: (len(held[m]), m))
        path = []
        while (step := via[receiver]) is not None:
            giver, tp = step
            path.append((giver, receiver, tp))
            receiver = giver
        return path[::-1]
    return None


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
