"""The "cooperative-sticky" partition assignor (KIP-54 stickiness, KIP-429 cooperation).

Run by the group leader over every member's Subscription. Each member reports
the partitions it owns now (Subscription v1+) and the generation it owned them
in (v2+). The plan:

1. **Owners.** A partition claimed by several members goes to the claim with the
   highest generation; claims tied on generation are all void (a member that
   lost its membership may still list what it used to own).
2. **Keep.** Every valid claim (the owner still subscribes to the topic and the
   partition still exists) stays where it is.
3. **Place.** Unclaimed partitions go, the most constrained first (fewest members
   subscribed to their topic), to the eligible member with the fewest partitions.
4. **Balance.** While some member has at least two more partitions than an
   eligible member, move one over — a partition it was just given in step 3
   before one it owned. Each move lowers the sum of squared loads, so this ends;
   with identical subscriptions it ends with loads differing by at most one, and
   only members above their share lose owned partitions.
5. **Cooperate.** A partition that changes owner is left out of this round: its
   current owner sees it missing from its assignment, revokes just that, and
   rejoins; the next round (where nobody claims it) hands it to its new member.

Deterministic for given inputs (members and partitions are visited in sorted
order), so a raftka leader and a librdkafka follower never disagree about
what one plan means. It is not the same algorithm as the Java client's or
librdkafka's, and does not need to be: only the leader's plan is used, and any
member's plan respects the same ownership contract.
"""

from __future__ import annotations

from collections.abc import Mapping

from raftka.client.group_protocol import Subscription
from raftka.client.records import TopicPartition

Assignments = dict[str, list[TopicPartition]]


def current_owners(subscriptions: Mapping[str, Subscription]) -> dict[TopicPartition, str]:
    """Who owns each claimed partition: the claim of the highest generation; ties void them all."""
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member in sorted(subscriptions):
        sub = subscriptions[member]
        for tp in set(sub.owned_partitions):
            claim = best.get(tp)
            if claim is None or sub.generation_id > claim[0]:
                best[tp] = (sub.generation_id, [member])
            elif sub.generation_id == claim[0]:
                claim[1].append(member)
    return {tp: members[0] for tp, (_, members) in best.items() if len(members) == 1}


def sticky_assign(subscriptions: Mapping[str, Subscription], partitions: Mapping[str, int],
                  owners: Mapping[TopicPartition, str] | None = None) -> Assignments:
    """A balanced assignment that keeps every partition with its current owner where it can."""
    members = sorted(subscriptions)
    if owners is None:
        owners = current_owners(subscriptions)
    topics = sorted({t for s in subscriptions.values() for t in s.topics})
    eligible: dict[TopicPartition, list[str]] = {}
    for topic in topics:
        subscribers = [m for m in members if topic in subscriptions[m].topics]
        for p in range(max(0, partitions.get(topic, 0))):
            eligible[TopicPartition(topic, p)] = subscribers
    load: dict[str, list[TopicPartition]] = {m: [] for m in members}
    kept: set[TopicPartition] = set()
    for tp in sorted(eligible):
        owner = owners.get(tp)
        if owner is not None and owner in load and tp.topic in subscriptions[owner].topics:
            load[owner].append(tp)
            kept.add(tp)
    unclaimed = sorted((tp for tp in eligible if tp not in kept), key=lambda tp: (len(eligible[tp]), tp))
    for tp in unclaimed:
        if eligible[tp]:
            load[min(eligible[tp], key=lambda m: (len(load[m]), m))].append(tp)
    while (move := _next_move(load, eligible, kept)) is not None:
        tp, source, target = move
        load[source].remove(tp)
        load[target].append(tp)
    return {m: sorted(tps) for m, tps in load.items()}


def _next_move(load: dict[str, list[TopicPartition]], eligible: Mapping[TopicPartition, list[str]],
               kept: set[TopicPartition]) -> tuple[TopicPartition, str, str] | None:
    """One move from the most loaded member possible to a member with 2+ fewer partitions."""
    for source in sorted(load, key=lambda m: (-len(load[m]), m)):
        # Partitions placed in this round move before owned ones (that costs no stickiness).
        for tp in sorted(load[source], key=lambda tp: (tp in kept, tp)):
            target = min(eligible[tp], key=lambda m: (len(load[m]), m))
            if len(load[target]) + 1 < len(load[source]):
                return tp, source, target
    return None


def cooperative_sticky_assign(subscriptions: Mapping[str, Subscription], partitions: Mapping[str, int],
                              ) -> Assignments:
    """sticky_assign, minus the partitions changing owner this round (KIP-429's first phase)."""
    owners = current_owners(subscriptions)
    plan = sticky_assign(subscriptions, partitions, owners)
    # A claim the owner no longer may hold (topic unsubscribed) still withholds the partition:
    # the owner consumes it until it has revoked it.
    return {m: [tp for tp in tps if owners.get(tp, m) == m] for m, tps in plan.items()}
