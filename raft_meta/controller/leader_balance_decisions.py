"""Automatic preferred-leader balancing with Kafka's threshold (`auto.leader.rebalance.enable`,
`leader.imbalance.check.interval.seconds`, `leader.imbalance.per.broker.percentage`).

Every check interval the controller computes, per broker B, the share of the partitions whose
preferred replica (the first of `replicas`) is B that B does not lead. When that share is above
`leader.imbalance.per.broker.percentage` (Kafka's default 10 %), leadership of those partitions
moves back to B where B is live and in the ISR (Kafka's KafkaController rule). 0 balances every
partition at every check (what KRaft's controller does).
"""

from __future__ import annotations

from raftka.raft_meta.controller import controller_decisions as decide
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import PartitionChange


def imbalance(image: MetadataImage) -> dict[int, tuple[int, int]]:
    """Preferred broker -> (partitions it should lead but does not, partitions it should lead)."""
    counts: dict[int, list[int]] = {}
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if not part.replicas:
                continue
            entry = counts.setdefault(part.replicas[0], [0, 0])
            entry[1] += 1
            if part.leader != part.replicas[0]:
                entry[0] += 1
    return {b: (off, total) for b, (off, total) in counts.items()}


def rebalance_leaders(image: MetadataImage, percentage: int) -> decide.Decision:
    """Preferred-leader elections for the brokers whose imbalance is above `percentage`."""
    over = {b for b, (off, total) in imbalance(image).items() if off and off * 100 > percentage * total}
    records = [r for r in decide.preferred_leader_elections(image).records
               if isinstance(r, PartitionChange) and _preferred(image, r) in over]
    return decide.Decision(tuple(records))


def _preferred(image: MetadataImage, change: PartitionChange) -> int:
    part = image.partition(change.topic_id, change.partition)
    return -1 if part is None else part.replicas[0]
