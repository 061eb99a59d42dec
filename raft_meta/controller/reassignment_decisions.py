"""Partition reassignment (KIP-455) as pure decisions: (image, request) -> PartitionChange records.

Kafka's model, as KRaft's `PartitionReassignmentReplicas` / `PartitionReassignmentRevert` do it:

    start     target T on replicas R:  adding = T - R, removing = R - T, replicas = T + removing
              (the ISR is unchanged; the adding replicas become followers and catch up)
    complete  once every target replica is in the ISR (checked when the reassignment starts and
              on every ISR change the leader asks for): replicas = T, ISR = ISR ∩ T, adding =
              removing = (), and a new leader from T ∩ ISR if the leader is being removed
    cancel    (target None) replicas = R - adding, ISR = ISR - adding, back to the leader's
              original set; NO_REASSIGNMENT_IN_PROGRESS if nothing is moving
    replace   a new target over a running reassignment starts from the current replicas
              (which include the earlier adding ones), exactly as "start" above

Every record carries the partition epoch it was decided on, so `apply` rejects a decision
made on a stale image. The brokers do the rest from the metadata they apply: a broker newly
named in `replicas` opens the log and fetches as a follower; one no longer named detaches the
partition and deletes its log (broker/replication/replica_manager.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from raftka.client.protocol import ErrorCode
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.image import MetadataImage, PartitionImage
from raftka.raft_meta.metadata.records import NO_LEADER, PartitionChange

MAX_REASSIGNMENTS_PER_REQUEST = 10_000  # Kafka's MAX_RECORDS_PER_USER_OP: one record per partition


@dataclass(frozen=True)
class Reassignment:
    """One partition of an AlterPartitionReassignments request; `replicas` None cancels."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None


@dataclass(frozen=True)
class OngoingReassignment:
    """One row of ListPartitionReassignments."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True)
class ReassignmentDecision:
    records: tuple[PartitionChange, ...]
    errors: dict[tuple[str, int], ControllerError]
    warnings: tuple[tuple[str, dict], ...] = ()


def _check_target(image: MetadataImage, topic: str, partition: int, target: Sequence[int]) -> None:
    """Kafka's validateManualPartitionAssignment: non-empty, distinct, registered brokers."""
    where = f"{topic}-{partition}"
    if not target:
        raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{where}: the target replica list is empty")
    seen: set[int] = set()
    for broker in target:
        if broker in seen:
            raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                          f"{where}: the target {list(target)} names broker {broker} more than once")
        seen.add(broker)
        if broker not in image.brokers:
            raise ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                          f"{where}: the target {list(target)} names broker {broker}, which is not "
                                          f"registered (registered: {sorted(image.brokers)})")


def _leader_for(image: MetadataImage, leader: int, candidates: Iterable[int], isr: Sequence[int]) -> int:
    """Keep `leader` if it is among `candidates`, else the first live candidate in the ISR."""
    candidates = tuple(candidates)
    if leader in candidates:
        return leader
    for broker in candidates:
        if broker in isr and image.is_live(broker):
            return broker
    return NO_LEADER


def completed(image: MetadataImage, part: PartitionImage, isr: tuple[int, ...] | None = None,
              replicas: tuple[int, ...] | None = None, adding: tuple[int, ...] | None = None,
              removing: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """(replicas, ISR, leader) that finish the reassignment of `part` (with the given fields
    replaced), or None while a target replica is still out of the ISR (or no live target
    replica in the ISR could lead after the current leader leaves)."""
    replicas = part.replicas if replicas is None else replicas
    isr = part.isr if isr is None else isr
    adding = part.adding_replicas if adding is None else adding
    removing = part.removing_replicas if removing is None else removing
    if not adding and not removing:
        return None
    target = tuple(r for r in replicas if r not in removing)
    if not set(target) <= set(isr):
        return None
    new_isr = tuple(r for r in isr if r in target)
    leader = _leader_for(image, part.leader, target, new_isr)
    if leader == NO_LEADER and part.leader != NO_LEADER:
        return None  # the leader leaves and nobody live can take over: finish later
    return target, new_isr, leader


def completion_record(image: MetadataImage, topic_id: str, index: int, part: PartitionImage,
                      isr: tuple[int, ...]) -> PartitionChange | None:
    """The record for an ISR change of `part` to `isr` that also finishes its reassignment, or
    None if the change does not finish it (the caller then writes the plain ISR change)."""
    done = completed(image, part, isr=isr)
    if done is None:
        return None
    replicas, new_isr, leader = done
    return PartitionChange(topic_id, index, part.partition_epoch, leader=None if leader == part.leader else leader,
                           isr=new_isr, replicas=replicas, adding_replicas=(), removing_replicas=())


def _start(image: MetadataImage, topic_id: str, index: int, part: PartitionImage,
           target: tuple[int, ...]) -> PartitionChange | None:
    removing = tuple(r for r in part.replicas if r not in target)
    adding = tuple(r for r in target if r not in part.replicas)
    replicas = target + removing
    done = completed(image, part, replicas=replicas, adding=adding, removing=removing)
    if done is None and not adding and not removing:  # a reorder (or the same set): nothing moves
        done = (replicas, part.isr, part.leader)
    if done is not None:
        replicas, isr, leader = done
        adding = removing = ()
    else:
        isr, leader = part.isr, part.leader
    if (replicas, isr, leader, adding, removing) == (part.replicas, part.isr, part.leader, part.adding_replicas,
                                                     part.removing_replicas):
        return None
    return PartitionChange(topic_id, index, part.partition_epoch,
                           leader=None if leader == part.leader else leader,
                           isr=None if isr == part.isr else isr,
                           replicas=None if replicas == part.replicas else replicas,
                           adding_replicas=adding, removing_replicas=removing)


def _cancel(image: MetadataImage, topic_id: str, index: int, part: PartitionImage,
            warnings: list[tuple[str, dict]]) -> PartitionChange:
    name = image.topics[topic_id].name
    if not part.reassigning:
        raise ControllerError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"{name}-{index} has no reassignment in progress")
    replicas = tuple(r for r in part.replicas if r not in part.adding_replicas)
    isr = tuple(r for r in part.isr if r in replicas)
    unclean = not isr
    if unclean:
        # Only adding replicas were in sync: the original set has no clean member left (Kafka
        # then reverts uncleanly too). Restart from a live original replica.
        live = [r for r in replicas if image.is_live(r)]
        isr, leader = ((live[0],), live[0]) if live else ((replicas[0],), NO_LEADER)
        warnings.append(("partition.unclean_leader_elected",
                         {"topic": name, "partition": index, "leader": leader, "old_isr": list(part.isr),
                          "possible_data_loss": True, "cause": "reassignment_cancelled"}))
    else:
        leader = _leader_for(image, part.leader, replicas, isr)
    return PartitionChange(topic_id, index, part.partition_epoch, leader=None if leader == part.leader else leader,
                           isr=None if isr == part.isr else isr, replicas=replicas, unclean=unclean,
                           adding_replicas=(), removing_replicas=())


def alter_partition_reassignments(image: MetadataImage, requests: Sequence[Reassignment],
                                  allow_replication_factor_change: bool = True) -> ReassignmentDecision:
    """One AlterPartitionReassignments request: a record per partition that changes, and the
    error of each partition refused (by (topic, partition)). A partition named twice is
    INVALID_REQUEST. `allow_replication_factor_change` False (v1's field, KIP-860) refuses a
    target whose size differs from the current target's with INVALID_REPLICATION_FACTOR."""
    if len(requests) > MAX_REASSIGNMENTS_PER_REQUEST:
        raise ControllerError(ErrorCode.POLICY_VIOLATION, f"{len(requests)} partitions in one reassignment request; at most "
                                                          f"{MAX_REASSIGNMENTS_PER_REQUEST} (Kafka's MAX_RECORDS_PER_USER_OP)")
    counts: dict[tuple[str, int], int] = {}
    for r in requests:
        counts[(r.topic, r.partition)] = counts.get((r.topic, r.partition), 0) + 1
    records: list[PartitionChange] = []
    errors: dict[tuple[str, int], ControllerError] = {}
    warnings: list[tuple[str, dict]] = []
    for r in requests:
        key = (r.topic, r.partition)
        try:
            if counts[key] > 1:
                raise ControllerError(ErrorCode.INVALID_REQUEST, f"{r.topic}-{r.partition} is named more than once")
            topic = image.topic_by_name(r.topic)
            part = None if topic is None else topic.partitions.get(r.partition)
            if topic is None or part is None:
                raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{r.topic}-{r.partition} does not exist")
            if r.replicas is None:
                records.append(_cancel(image, topic.topic_id, r.partition, part, warnings))
                continue
            target = tuple(r.replicas)
            _check_target(image, r.topic, r.partition, target)
            if not allow_replication_factor_change and len(target) != len(part.target_replicas):
                raise ControllerError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                              f"{r.topic}-{r.partition}: the target {list(target)} changes the replication "
                                              f"factor from {len(part.target_replicas)} and the request does not allow it")
            change = _start(image, topic.topic_id, r.partition, part, target)
            if change is not None:
                records.append(change)
        except ControllerError as exc:
            errors[key] = exc
    return ReassignmentDecision(tuple(records), errors, tuple(warnings))


def list_partition_reassignments(image: MetadataImage,
                                 partitions: Iterable[tuple[str, int]] | None = None) -> list[OngoingReassignment]:
    """The reassignments in progress, by topic name and partition; `partitions` None: all of them.
    Named partitions that do not exist, or are not moving, are left out (as Kafka does)."""
    if partitions is None:
        wanted = [(name, index) for name in sorted(image.topic_ids)
                  for index in sorted(image.topics[image.topic_ids[name]].partitions)]
    else:
        wanted = list(dict.fromkeys(partitions))
    out = []
    for name, index in wanted:
        topic = image.topic_by_name(name)
        part = None if topic is None else topic.partitions.get(index)
        if part is not None and part.reassigning:
            out.append(OngoingReassignment(name, index, part.replicas, part.adding_replicas, part.removing_replicas))
    return out


def pending_completions(image: MetadataImage) -> tuple[PartitionChange, ...]:
    """Moves that can finish now without an ISR change: every target replica was already in
    sync but no live target replica could take over the leadership then (it was fenced); the
    controller checks this on every policing tick."""
    records = []
    for topic_id, topic in image.topics.items():
        for index, part in topic.partitions.items():
            if part.reassigning:
                change = completion_record(image, topic_id, index, part, part.isr)
                if change is not None:
                    records.append(change)
    return tuple(records)
