"""Kafka's `SimpleAssignor` for share groups (`group.share.assignors=simple`), as a pure function.

In a share group a partition may be read by several members at once (each record is
locked to one member by the share-partition, see `share_partition_state.py`), so the
assignor balances *assignments* rather than partitions:

- Sharing: with M members and P partitions, each partition goes to
  ceil(M / P) members (1 when there are more partitions than members). Every member
  of 3 on a 1-partition topic reads that partition; 2 members on 5 partitions split them.
- Balance: the M members share the ceil(M / P) * P assignments as evenly as possible:
  member i (in member-id order) is due ceil(T(i+1)/M) - ceil(Ti/M) of the T.
- Stickiness: a member keeps what it had (of what it still subscribes to) while that
  fits its quota and the partition's sharing; only the rest is handed out, to the
  members still below their quota, round-robin in member-id order. When no member
  below quota can take a partition (each already has it), it stays under-shared: a
  small imbalance Kafka tolerates too.
- Balance comes before stickiness.
- All members subscribed to the same topics (homogeneous): balanced over all the
  partitions at once. Otherwise (heterogeneous): balanced topic by topic among that
  topic's subscribers, and combined.

Kafka's builders iterate hash maps; here members and partitions are taken in sorted
order, so an assignment is a function of its inputs (the scenario tests rely on it).
Not modelled: only partitions whose share state is initialized are assignable in
Kafka (`isPartitionAssignable`); the caller passes the partitions it may assign.
"""

from __future__ import annotations

from collections.abc import Mapping

TopicPartition = tuple[str, int]
Assignment = dict[str, frozenset[TopicPartition]]


def assign(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
           current: Mapping[str, frozenset[TopicPartition]]) -> Assignment:
    """The target assignment: member id -> its partitions.

    `subscriptions`: member id -> subscribed topic names; `partitions`: topic name ->
    partition count for the topics that exist (others are ignored); `current`: the
    previous target assignment, for stickiness.
    """
    members = sorted(subscriptions)
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    topic_sets = {subscriptions[m] for m in members}
    if len(topic_sets) <= 1:
        groups = [(members, sorted(topic_sets.pop() if topic_sets else ()))]
    else:
        topics = sorted({t for m in members for t in subscriptions[m]})
        groups = [([m for m in members if t in subscriptions[m]], [t]) for t in topics]
    for group_members, topics in groups:
        targets = [(t, p) for t in topics if t in partitions for p in range(partitions[t])]
        kept = {m: {tp for tp in current.get(m, ()) if tp[0] in topics} for m in group_members}
        for member, tps in _balance(group_members, targets, kept).items():
            out[member] |= tps
    return {m: frozenset(tps) for m, tps in out.items()}


def _balance(members: list[str], targets: list[TopicPartition],
             current: Mapping[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    result: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members or not targets:
        return result
    n_members, n_partitions = len(members), len(targets)
    sharing = -(-n_members // n_partitions)
    total = sharing * n_partitions
    quota = {m: -(-total * (i + 1) // n_members) - -(-total * i // n_members) for i, m in enumerate(members)}
    holders: dict[TopicPartition, int] = {tp: 0 for tp in targets}
    # Stickiness within the quotas and the sharing.
    for m in members:
        for tp in sorted(current.get(m, ())):
            if tp in holders and holders[tp] < sharing and len(result[m]) < quota[m]:
                result[m].add(tp)
                holders[tp] += 1
    # Hand out the rest round-robin to the members below quota.
    cursor = 0
    for tp in targets:
        while holders[tp] < sharing:
            for step in range(n_members):
                m = members[(cursor + step) % n_members]
                if len(result[m]) < quota[m] and tp not in result[m]:
                    result[m].add(tp)
                    holders[tp] += 1
                    cursor = (cursor + step + 1) % n_members
                    break
            else:
                break  # nobody below quota can take it: tolerated under-sharing
    return result
