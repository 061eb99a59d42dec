"""Controller decisions as pure functions: (image, event) -> records to submit.

Nothing here has I/O, clocks or randomness of its own: the caller passes
`now`, new topic ids and placement start indexes. Every PartitionChange
carries the partition epoch it was decided on, so a decision made on a stale
image is rejected by `apply` rather than applied twice. Errors the requester
should see are raised as `ControllerError` with Kafka's error names.

Structured log events the caller should emit are returned, not logged
(e.g. an unclean election's possible data loss): see `Decision.warnings`.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from raftka.client.protocol import ErrorCode
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.controller.reassignment_decisions import completion_record
from raftka.raft_meta.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from raftka.raft_meta.metadata.records import (
    NO_LEADER,
    FenceBroker,
    MetadataRecord,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
)

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's block size for AllocateProducerIds
# The most metadata records one user request (CreateTopics, CreatePartitions, a Metadata
# request's auto-creations) may write: Kafka's QuorumController.MAX_RECORDS_PER_USER_OP.
# Over it the whole request is refused with POLICY_VIOLATION before anything is committed.
MAX_RECORDS_PER_USER_OP = 10_000
MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
UNCLEAN_KEY = "unclean.leader.election.enable"


@dataclass(frozen=True)
class Decision:
    """Records to submit, in order, plus warnings to log (event name, fields)."""

    records: tuple[MetadataRecord, ...] = ()
    warnings: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass
class _Builder:
    records: list[MetadataRecord] = field(default_factory=list)
    warnings: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def done(self) -> Decision:
        return Decision(tuple(self.records), tuple(self.warnings))


def _check_invariants(image: MetadataImage, decision: Decision) -> None:
    """Self-checks of a decision's partition records, on the partitions they leave behind
    (AssertionError names the broken one): a change is decided on the current partition
    epoch; replicas are distinct and non-empty; the ISR is a non-empty set of replicas; the
    leader is in the ISR (or there is none) and a newly elected leader is a live broker."""
    fenced = {b.broker_id: b.fenced for b in image.brokers.values()}
    parts: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], int]] = {}
    for record in decision.records:
        if isinstance(record, (FenceBroker, UnfenceBroker)):
            fenced[record.broker_id] = isinstance(record, FenceBroker)
        if isinstance(record, Partition):
            key, state, moved = (record.topic_id, record.partition), (record.replicas, record.isr, record.leader), True
        elif isinstance(record, PartitionChange):
            key = (record.topic_id, record.partition)
            current = image.partition(*key)
            if current is None or key in parts or record.partition_epoch != current.partition_epoch:
                raise AssertionError(f"{record}: not decided on the current partition epoch of {key}")
            state = (current.replicas if record.replicas is None else tuple(record.replicas),
                     current.isr if record.isr is None else tuple(record.isr),
                     current.leader if record.leader is None else record.leader)
            moved = record.leader is not None and record.leader != current.leader
        else:
            continue
        replicas, isr, leader = parts[key] = state
        if not replicas or len(set(replicas)) != len(replicas):
            raise AssertionError(f"{record}: replicas {list(replicas)} must be distinct and non-empty")
        if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
            raise AssertionError(f"{record}: ISR {list(isr)} must be a non-empty set of replicas {list(replicas)}")
        if leader != NO_LEADER and leader not in isr:
            raise AssertionError(f"{record}: leader {leader} is not in ISR {list(isr)}")
        if moved and leader != NO_LEADER and fenced.get(leader, True):
            raise AssertionError(f"{record}: elected leader {leader} is not a live broker")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _checked(
    decide: Callable[Concatenate[MetadataImage, _P], _R],
) -> Callable[Concatenate[MetadataImage, _P], _R]:
    """Run `_check_invariants` on what `decide(image, ...)` returns (a Decision, or a tuple
    that starts with one)."""

    @functools.wraps(decide)
    def wrapper(image: MetadataImage, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        result = decide(image, *args, **kwargs)
        _check_invariants(image, cast(Decision, result[0] if isinstance(result, tuple) else result))
        return result

    return wrapper


# --- replica placement -------------------------------------------------------


def _rack_interleaved(brokers: Sequence[BrokerRegistration]) -> list[BrokerRegistration]:
    """Brokers ordered so neighbours sit on different racks: r1b1, r2b1, r3b1, r1b2, ..."""
    by_rack: dict[str, list[BrokerRegistration]] = {}
    for broker in sorted(brokers, key=lambda b: b.broker_id):
        by_rack.setdefault(broker.rack or "", []).append(broker)
    racks = [by_rack[r] for r in sorted(by_rack)]
    ordered: list[BrokerRegistration] = []
    for i in range(max(len(r) for r in racks)):
        ordered.extend(rack[i] for rack in racks if i < len(rack))
    return ordered


def _check_replication_factor(rf: int, live: int) -> None:
    if rf < 1:
        raise ControllerError(ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {rf} must be >= 1")
    if rf > live:
        raise ControllerError(
            ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {rf} is larger than the {live} available brokers"
        )


def place_replicas(
    brokers: Sequence[BrokerRegistration],
    num_partitions: int,
    replication_factor: int,
    start: int = 0,
    first_partition: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists (leader first) for partitions first_partition.. of a topic.

    Leaders rotate over the brokers from `start`; followers are shifted per
    round so follower sets differ too (Kafka's scheme). With racks, each
    partition takes as many distinct racks as it can.
    """
    _check_replication_factor(replication_factor, len(brokers))
    ordered = _rack_interleaved(brokers)
    n = len(ordered)
    rack_aware = any(b.rack for b in ordered)
    result = []
    for index in range(first_partition, first_partition + num_partitions):
        first = (start + index) % n
        shift = (index // n) % (n - 1) if n > 1 else 0
        leader = ordered[first]
        candidates = [ordered[(first + 1 + (shift + j) % (n - 1)) % n] for j in range(n - 1)]
        chosen = [leader]
        if rack_aware:
            racks = {leader.rack}
            for broker in candidates:
                if len(chosen) < replication_factor and broker.rack not in racks:
                    chosen.append(broker)
                    racks.add(broker.rack)
        for broker in candidates:
            if len(chosen) < replication_factor and broker not in chosen:
                chosen.append(broker)
        result.append(tuple(b.broker_id for b in chosen))
    return result


# --- topics -----------------------------------------------------------------


def check_topic_name(name: str) -> None:
    if not name or name in (".", "..") or len(name) > MAX_TOPIC_NAME or not _LEGAL_TOPIC.match(name):
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} is invalid; expected 1-{MAX_TOPIC_NAME} characters of [a-zA-Z0-9._-], not '.' or '..'",
        )


def check_min_isr(topic: str, configs: Mapping[str, str], rf: int | None) -> None:
    """Kafka refuses a topic whose min.insync.replicas exceeds its replication factor."""
    raw = configs.get("min.insync.replicas")
    if raw is None or rf is None:
        return
    try:
        value = int(raw)
    except ValueError:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"min.insync.replicas {raw!r} of topic {topic!r} is not an "
                                                        "integer") from None
    if value > rf:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"min.insync.replicas {value} of topic {topic!r} is larger than its "
                                                        f"replication factor {rf}; expected at most the replication factor "
                                                        "(acks=all writes could never succeed)")


def _bad_assignment(message: str) -> ControllerError:
    return ControllerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def check_manual_assignment(
    image: MetadataImage, topic: str, replicas_by_partition: Sequence[tuple[int, ...]], first_partition: int,
    replication_factor: int | None,
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(replicas, ISR) per partition of a manual assignment, by Kafka's rules: every list
    non-empty, without duplicates, of registered brokers, all of one length (that of the
    topic's existing partitions, when given), with at least one unfenced broker (the ISR is the
    unfenced ones, the leader the first of them). Else INVALID_REPLICA_ASSIGNMENT."""
    out: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for offset, replicas in enumerate(replicas_by_partition):
        index = first_partition + offset
        replicas = tuple(replicas)
        if not replicas:
            raise _bad_assignment(f"partition {topic}-{index}: the replica list is empty; expected broker ids")
        if len(set(replicas)) != len(replicas):
            raise _bad_assignment(f"partition {topic}-{index}: the manual partition assignment {list(replicas)} "
                                  "contains duplicate broker ids")
        unknown = [b for b in replicas if b not in image.brokers]
        if unknown:
            raise _bad_assignment(f"partition {topic}-{index}: the manual partition assignment includes broker "
                                  f"{unknown[0]}, but no such broker is registered (registered: "
                                  f"{sorted(image.brokers)})")
        expected = replication_factor if replication_factor is not None else len(out[0][0]) if out else None
        if expected is not None and len(replicas) != expected:
            raise _bad_assignment(f"partition {topic}-{index}: the manual partition assignment has "
                                  f"{len(replicas)} replica(s); expected {expected}, like the topic's other partitions")
        isr = tuple(b for b in replicas if image.is_live(b))
        if not isr:
            raise _bad_assignment(f"partition {topic}-{index}: all brokers of the manual partition assignment "
                                  f"{list(replicas)} are fenced")
        out.append((replicas, isr))
    return out


@dataclass(frozen=True)
class NewTopic:
    """One topic of a CreateTopics request. None: the controller's num.partitions /
    default.replication.factor."""

    name: str
    num_partitions: int | None = None
    replication_factor: int | None = None
    configs: Mapping[str, str] = field(default_factory=dict)
    # Manual replica assignment (CreateTopics `assignments`): partition index -> broker ids.
    # With it, num_partitions and replication_factor must be None.
    assignments: Mapping[int, tuple[int, ...]] | None = None


def _over_records_cap(what: str, records: int) -> ControllerError:
    return ControllerError(
        ErrorCode.POLICY_VIOLATION,
        f"{what} would write {records} metadata records; one request may write at most "
        f"{MAX_RECORDS_PER_USER_OP} (Kafka's MAX_RECORDS_PER_USER_OP), so nothing was created",
    )


class _WholeRequest(Exception):
    """Carries a ControllerError that refuses the whole request out of a per-topic try block."""

    def __init__(self, error: ControllerError) -> None:
        super().__init__(error.message)
        self.error = error


def _duplicates(names: Iterable[str]) -> set[str]:
    counts = Counter(names)
    return {name for name, n in counts.items() if n > 1}


@_checked
def create_topics(
    image: MetadataImage,
    topics: Sequence[NewTopic],
    topic_id: Callable[[int], str],
    default_partitions: int = 1,
    default_replication_factor: int = 1,
    start: int = 0,
    request_ids: Mapping[str, str] | None = None,
) -> tuple[Decision, dict[str, ControllerError]]:
    """One CreateTopics request, one user operation: a Topic record and one Partition record
    per partition (all replicas in sync) for every topic that can be created, and the error of
    each topic that cannot (by name; a name given twice is INVALID_REQUEST, as in Kafka).

    The records of all the request's topics count against MAX_RECORDS_PER_USER_OP together;
    over it the whole request is refused (POLICY_VIOLATION, raised) before any replica is
    placed, so even a request for millions of partitions is answered at once.
    `topic_id(i)` is the id for `topics[i]`, asked for only for a topic that is created (a
    refused request of 10 000 topics draws no ids); leaders rotate from `start + i`.
    """
    errors: dict[str, ControllerError] = {}
    twice = _duplicates(t.name for t in topics)
    live = image.live_brokers()
    planned: list[tuple[int, NewTopic, int, int, list[tuple[tuple[int, ...], tuple[int, ...]]] | None]] = []
    records_needed = 0
    for i, topic in enumerate(topics):
        partitions = default_partitions if topic.num_partitions is None else topic.num_partitions
        rf = default_replication_factor if topic.replication_factor is None else topic.replication_factor
        manual: list[tuple[tuple[int, ...], tuple[int, ...]]] | None = None
        if topic.assignments is not None and records_needed + 1 + len(topic.assignments) > MAX_RECORDS_PER_USER_OP:
            # refused before checking each assigned partition: the cap bounds this request's work too
            raise _over_records_cap(f"creating topic {topic.name!r} with {len(topic.assignments)} manually "
                                    "assigned partitions", records_needed + 1 + len(topic.assignments))
        try:
            if topic.name in twice:
                raise ControllerError(ErrorCode.INVALID_REQUEST, f"topic {topic.name!r} is named more than once in the request")
            check_topic_name(topic.name)
            if topic.name in image.topic_ids:
                raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists "
                                                                      f"({_layout(image.topic_by_name(topic.name))})")
            if topic.assignments is not None:
                if topic.num_partitions is not None or topic.replication_factor is not None:
                    raise ControllerError(ErrorCode.INVALID_REQUEST, "both num_partitions or replication_factor and a manual "
                                                                     "replica assignment were given; expected -1 for both "
                                                                     "with an assignment")
                indexes = sorted(topic.assignments)
                if indexes != list(range(len(indexes))) or not indexes:
                    raise _bad_assignment(f"topic {topic.name!r}: partitions {indexes} of the manual assignment "
                                          "should be a consecutive 0-based integer sequence")
                manual = check_manual_assignment(image, topic.name, [topic.assignments[p] for p in indexes], 0, None)
                partitions, rf = len(manual), len(manual[0][0])
            if partitions < 1:
                raise ControllerError(ErrorCode.INVALID_PARTITIONS, f"number of partitions {partitions} must be >= 1")
            if manual is None:
                _check_replication_factor(rf, len(live))
            check_min_isr(topic.name, topic.configs, rf)
        except ControllerError as exc:
            errors[topic.name] = exc
            continue
        planned.append((i, topic, partitions, rf, manual))
        records_needed += 1 + partitions
    if records_needed > MAX_RECORDS_PER_USER_OP:
        raise _over_records_cap(f"creating {len(planned)} topic(s) with {records_needed - len(planned)} partitions",
                                records_needed)
    records: list[MetadataRecord] = []
    for i, topic, partitions, rf, manual in planned:
        new_id = topic_id(i)
        request_id = (request_ids or {}).get(topic.name)
        records.append(Topic(topic.name, new_id, tuple(sorted(topic.configs.items())), request_id=request_id))
        if manual is not None:
            records.extend(Partition(new_id, index, replicas, isr, isr[0])
                           for index, (replicas, isr) in enumerate(manual))
            continue
        for index, replicas in enumerate(place_replicas(live, partitions, rf, start + i)):
            records.append(Partition(new_id, index, replicas, replicas, replicas[0]))
    return Decision(tuple(records)), errors


def _layout(topic: TopicImage | None) -> str:
    if topic is None or not topic.partitions:
        return "no partitions"
    rf = len(next(iter(topic.partitions.values())).replicas)
    return f"{len(topic.partitions)} partitions, replication factor {rf}"


def create_topic(
    image: MetadataImage,
    name: str,
    num_partitions: int,
    replication_factor: int,
    topic_id: str,
    configs: Mapping[str, str] | None = None,
    start: int = 0,
    request_id: str | None = None,
) -> Decision:
    """`create_topics` for one topic; its error is raised."""
    decision, errors = create_topics(image, [NewTopic(name, num_partitions, replication_factor, dict(configs or {}))],
                                     lambda _: topic_id, start=start,
                                     request_ids=None if request_id is None else {name: request_id})
    if name in errors:
        raise errors[name]
    return decision


@_checked
def create_partitions_batch(
    image: MetadataImage, totals: Sequence[tuple[str, int]], start: int = 0,
    assignments: Mapping[str, Sequence[tuple[int, ...]]] | None = None,
) -> tuple[Decision, dict[str, ControllerError]]:
    """One CreatePartitions request, one user operation: grow each named topic to its total.

    Like `create_topics`: per-topic errors by name (a name given twice is INVALID_REQUEST), and
    the new Partition records of all topics together are capped by MAX_RECORDS_PER_USER_OP
    (POLICY_VIOLATION for the whole request, raised before any placement).
    `assignments`: a topic's manual replica lists for its new partitions, one per partition
    (checked by `check_manual_assignment`, of the topic's replication factor).
    """
    errors: dict[str, ControllerError] = {}
    twice = _duplicates(name for name, _ in totals)
    live = image.live_brokers()
    planned: list[tuple[TopicImage, int, int, list[tuple[tuple[int, ...], tuple[int, ...]]] | None]] = []
    records_needed = 0
    for name, total in totals:
        try:
            if name in twice:
                raise ControllerError(ErrorCode.INVALID_REQUEST, f"topic {name!r} is named more than once in the request")
            topic = image.topic_by_name(name)
            if topic is None:
                raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            current = len(topic.partitions)
            if total <= current:
                raise ControllerError(ErrorCode.INVALID_PARTITIONS,
                                              f"topic {name!r} has {current} partitions; asked for {total}, expected more")
            rf = len(topic.partitions[0].replicas) if topic.partitions else 1
            manual = None
            if assignments is not None and name in assignments:
                given = list(assignments[name])
                if records_needed + len(given) > MAX_RECORDS_PER_USER_OP:
                    over = _over_records_cap(f"adding {len(given)} manually assigned partitions to {name!r}",
                                             records_needed + len(given))
                    raise _WholeRequest(over)
                if len(given) != total - current:
                    raise _bad_assignment(f"topic {name!r}: attempted to add {total - current} additional "
                                          f"partition(s), but {len(given)} assignment(s) were given")
                manual = check_manual_assignment(image, name, given, current, rf)
            else:
                _check_replication_factor(rf, len(live))
        except _WholeRequest as whole:
            raise whole.error from None
        except ControllerError as exc:
            errors[name] = exc
            continue
        planned.append((topic, total, rf, manual))
        records_needed += total - current
    if records_needed > MAX_RECORDS_PER_USER_OP:
        raise _over_records_cap(f"adding {records_needed} partitions to {len(planned)} topic(s)", records_needed)
    records: list[MetadataRecord] = []
    for topic, total, rf, manual in planned:
        current = len(topic.partitions)
        if manual is not None:
            records.extend(Partition(topic.topic_id, current + i, replicas, isr, isr[0])
                           for i, (replicas, isr) in enumerate(manual))
            continue
        assignment = place_replicas(live, total - current, rf, start, first_partition=current)
        records.extend(Partition(topic.topic_id, current + i, r, r, r[0]) for i, r in enumerate(assignment))
    return Decision(tuple(records)), errors


def create_partitions(image: MetadataImage, name: str, total: int, start: int = 0) -> Decision:
    """`create_partitions_batch` for one topic; its error is raised."""
    decision, errors = create_partitions_batch(image, [(name, total)], start)
    if name in errors:
        raise errors[name]
    return decision


def delete_topic(image: MetadataImage, name: str, request_id: str | None = None) -> Decision:
    topic = image.topic_by_name(name)
    if topic is None:
        raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    return Decision((RemoveTopic(topic.topic_id, request_id=request_id),))


# --- elections ----------------------------------------------------------------


def unclean_allowed(image: MetadataImage, topic_name: str, broker_default: bool) -> bool:
    """Topic config beats the cluster-wide dynamic config beats server.properties."""
    for value in (image.topic_config(topic_name, UNCLEAN_KEY), image.cluster_config(UNCLEAN_KEY)):
        if value is not None:
            return value.strip().lower() == "true"
    return broker_default


def _live_ids(image: MetadataImage) -> set[int]:
    return {b.broker_id for b in image.live_brokers()}


def _rebalance_partition(
    builder: _Builder,
    image: MetadataImage,
    topic_id: str,
    index: int,
    part: PartitionImage,
    live: set[int],
    leaving: int | None,
    unclean_default: bool,
) -> None:
    """Drop `leaving` from the ISR / leadership and elect a leader from `live` if needed."""
    isr = tuple(r for r in part.isr if r != leaving)
    keep_last = not isr  # the last ISR member stays: it is the only clean leader candidate
    if keep_last:
        isr = part.isr
    leader = part.leader
    if leader == leaving or leader == NO_LEADER or leader not in live:
        clean = [r for r in part.replicas if r in isr and r in live and r != leaving]
        name = image.topics[topic_id].name
        if clean:
            leader = clean[0]
        elif unclean_allowed(image, name, unclean_default):
            dirty = [r for r in part.replicas if r in live and r != leaving]
            if dirty:
                leader, isr = dirty[0], (dirty[0],)
                builder.warnings.append(
                    ("partition.unclean_leader_elected", {"topic": name, "partition": index, "leader": leader,
                                                          "old_isr": list(part.isr), "possible_data_loss": True})
                )
                builder.records.append(PartitionChange(topic_id, index, part.partition_epoch, leader=leader, isr=isr, unclean=True))
                return
            leader = NO_LEADER
        else:
            leader = NO_LEADER
    if leader == part.leader and isr == part.isr:
        return
    builder.records.append(
        PartitionChange(topic_id, index, part.partition_epoch, leader=None if leader == part.leader else leader,
                        isr=None if isr == part.isr else isr)
    )


def _partitions(image: MetadataImage) -> Iterable[tuple[str, int, PartitionImage]]:
    for name in sorted(image.topic_ids):
        topic_id = image.topic_ids[name]
        for index, part in sorted(image.topics[topic_id].partitions.items()):
            yield topic_id, index, part


@_checked
def fence_broker(image: MetadataImage, broker_id: int, unclean_default: bool) -> Decision:
    """Session expired: fence it, move its leaderships, drop it from ISRs (keeping a last member)."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise ControllerError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered")
    builder = _Builder()
    if not broker.fenced:
        builder.records.append(FenceBroker(broker_id, broker.epoch))
    live = _live_ids(image) - {broker_id}
    for topic_id, index, part in _partitions(image):
        if broker_id in part.isr or part.leader == broker_id:
            _rebalance_partition(builder, image, topic_id, index, part, live, broker_id, unclean_default)
    return builder.done()


@_checked
def controlled_shutdown(image: MetadataImage, broker_id: int, broker_epoch: int, unclean_default: bool) -> Decision:
    """A broker asks to shut down: move its leaderships and ISR memberships first, then fence it.

    The broker may stop once these records are committed (it leads nothing).
    Unclean elections are not made for a planned shutdown.
    """
    check_broker_epoch(image, broker_id, broker_epoch)
    builder = _Builder()
    live = _live_ids(image) - {broker_id}
    for topic_id, index, part in _partitions(image):
        if broker_id in part.isr or part.leader == broker_id:
            _rebalance_partition(builder, image, topic_id, index, part, live, broker_id, False)
    if not image.brokers[broker_id].fenced:
        builder.records.append(FenceBroker(broker_id, broker_epoch))
    return builder.done()


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> BrokerRegistration:
    """The broker's registration, if `broker_epoch` is its current epoch; else the Kafka error."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise ControllerError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered")
    if broker.epoch != broker_epoch:
        raise ControllerError(
            ErrorCode.STALE_BROKER_EPOCH, f"broker {broker_id} sent epoch {broker_epoch}; its registered epoch is {broker.epoch}"
        )
    return broker


@_checked
def register_broker(
    image: MetadataImage,
    broker_id: int,
    incarnation_id: str,
    listeners: tuple[tuple[str, str, int], ...],
    rack: str | None,
    session_alive: bool,
    request_id: str | None = None,
    unclean_default: bool = False,
) -> Decision:
    """A broker (re)registers. Another live incarnation with the same id is refused.

    A new incarnation replacing a registration is a restart: what the old process led or held
    in ISRs moves first, in the same decision, as a fence would (Kafka's unclean-shutdown
    handling on registration). Otherwise a broker killed and restarted before its death was
    noticed kept its leaderships at the old leader epoch, with its log reloaded from disk under
    an ISR that still counted it. After a controlled shutdown there is nothing left to move."""
    existing = image.brokers.get(broker_id)
    if existing is not None and existing.incarnation_id != incarnation_id and session_alive and not existing.fenced:
        raise ControllerError(
            ErrorCode.DUPLICATE_BROKER_REGISTRATION,
            f"broker {broker_id} is registered by live incarnation {existing.incarnation_id}; got {incarnation_id}",
        )
    builder = _Builder()
    if existing is not None and existing.incarnation_id != incarnation_id:
        live = _live_ids(image) - {broker_id}
        for topic_id, index, part in _partitions(image):
            if broker_id in part.isr or part.leader == broker_id:
                _rebalance_partition(builder, image, topic_id, index, part, live, broker_id, unclean_default)
    builder.records.append(RegisterBroker(broker_id, incarnation_id, tuple(listeners), rack, request_id=request_id))
    return builder.done()


@_checked
def broker_heartbeat(
    image: MetadataImage, broker_id: int, broker_epoch: int, caught_up: bool, unclean_default: bool
) -> Decision:
    """A heartbeat: a fenced broker that has caught up with the metadata log is unfenced,
    and leaderless partitions it can lead get it as leader."""
    broker = check_broker_epoch(image, broker_id, broker_epoch)
    if not broker.fenced or not caught_up:
        return Decision()
    builder = _Builder([UnfenceBroker(broker_id, broker_epoch)])
    live = _live_ids(image) | {broker_id}
    for topic_id, index, part in _partitions(image):
        if not part.has_leader and broker_id in part.replicas:
            _rebalance_partition(builder, image, topic_id, index, part, live, None, unclean_default)
    return builder.done()


def expired_brokers(image: MetadataImage, last_heartbeat: Mapping[int, float], now: float, session_timeout_ms: int) -> list[int]:
    """Unfenced brokers whose last heartbeat is older than the session timeout (missing = never)."""
    limit = session_timeout_ms / 1000.0
    return [
        b.broker_id for b in image.live_brokers()
        if now - last_heartbeat.get(b.broker_id, float("-inf")) > limit
    ]


def brokers_to_probe(
    image: MetadataImage,
    last_heard: Mapping[int, float],
    hinted: Collection[int],
    last_probe: Mapping[int, float],
    in_flight: Collection[int],
    now: float,
    quiet_after_s: float,
    min_gap_s: float,
) -> list[int]:
    """Unfenced brokers whose process the controller should probe now (see `liveness_probe`).

    A broker qualifies when its control connection ended (`hinted`), or when this controller
    has not heard from it for `quiet_after_s` (missing from `last_heard` = never: a new
    controller probes at once the brokers that have not reached it yet, so one that died
    with the old controller is found without waiting out a session). Rate limits: never
    two probes of one broker at a time, hinted probes at least `min_gap_s` apart, and a
    quiet broker (e.g. a paused one whose port still accepts) once per `quiet_after_s`.
    """
    due = []
    for broker in image.live_brokers():
        b = broker.broker_id
        if b in in_flight:
            continue
        since_probe = now - last_probe.get(b, float("-inf"))
        if b in hinted:
            if since_probe >= min_gap_s:
                due.append(b)
        elif now - last_heard.get(b, float("-inf")) > quiet_after_s and since_probe > max(quiet_after_s, min_gap_s):
            due.append(b)
    return due


def fence_gone_broker(image: MetadataImage, broker_id: int, broker_epoch: int, unclean_default: bool) -> Decision:
    """A probe proved the process of registration `broker_epoch` gone: fence it as a session
    expiry would. Nothing if that registration was replaced (a restarted incarnation must not
    be fenced by a probe of its predecessor), is already fenced, or is unknown."""
    broker = image.brokers.get(broker_id)
    if broker is None or broker.epoch != broker_epoch or broker.fenced:
        return Decision()
    return fence_broker(image, broker_id, unclean_default)


@_checked
def alter_partition(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    topic_id: str,
    partition: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[int],
) -> Decision:
    """ISR shrink/expand requested by the partition leader, validated against its epochs."""
    check_broker_epoch(image, broker_id, broker_epoch)
    part = image.partition(topic_id, partition)
    if part is None:
        raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic_id}/{partition} does not exist")
    if part.leader != broker_id:
        raise ControllerError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {broker_id} is not the leader of {topic_id}/{partition} (leader {part.leader})")
    if leader_epoch != part.leader_epoch:
        raise ControllerError(ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch}; current leader epoch is {part.leader_epoch}")
    if partition_epoch != part.partition_epoch:
        raise ControllerError(ErrorCode.INVALID_UPDATE_VERSION, f"partition epoch {partition_epoch}; current partition epoch is {part.partition_epoch}")
    isr = tuple(new_isr)
    if broker_id not in isr or len(set(isr)) != len(isr) or not set(isr) <= set(part.replicas):
        raise ControllerError(
            ErrorCode.INVALID_REQUEST, f"ISR {list(isr)} must be distinct replicas of {list(part.replicas)} including leader {broker_id}"
        )
    ineligible = [r for r in isr if r not in part.isr and not image.is_live(r)]
    if ineligible:
        raise ControllerError(ErrorCode.INELIGIBLE_REPLICA, f"replicas {ineligible} are fenced or unregistered and cannot join the ISR")
    if isr == part.isr:
        return Decision()
    if part.reassigning:  # every target replica in sync: the same record finishes the reassignment
        finished = completion_record(image, topic_id, partition, part, isr)
        if finished is not None:
            return Decision((finished,))
    return Decision((PartitionChange(topic_id, partition, part.partition_epoch, isr=isr),))


@_checked
def preferred_leader_elections(image: MetadataImage) -> Decision:
    """Move leadership back to the first replica where it is live and in sync."""
    builder = _Builder()
    for topic_id, index, part in _partitions(image):
        preferred = part.replicas[0]
        if part.leader != preferred and preferred in part.isr and image.is_live(preferred):
            builder.records.append(PartitionChange(topic_id, index, part.partition_epoch, leader=preferred))
    return builder.done()


def allocate_producer_ids(image: MetadataImage, broker_id: int, broker_epoch: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> Decision:
    check_broker_epoch(image, broker_id, broker_epoch)
    return Decision((ProducerIds(broker_id, broker_epoch, image.next_producer_id, size),))


# --- ElectLeaders ---------------------------------------------------------------

PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1


def _elect_one(image: MetadataImage, topic: TopicImage, index: int, part: PartitionImage,
               election_type: int) -> tuple[PartitionChange | None, ControllerError | None]:
    name = f"{topic.name}-{index}"
    if election_type == PREFERRED_ELECTION:
        preferred = part.replicas[0]
        if part.leader == preferred:
            return None, ControllerError(ErrorCode.ELECTION_NOT_NEEDED, f"{name}: the preferred replica {preferred} "
                                                                        "already leads")
        if preferred not in part.isr or not image.is_live(preferred):
            return None, ControllerError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                                 f"{name}: the preferred replica {preferred} is "
                                                 f"{'not in the ISR ' + str(list(part.isr)) if preferred not in part.isr else 'fenced'}")
        return PartitionChange(topic.topic_id, index, part.partition_epoch, leader=preferred), None
    if part.has_leader and image.is_live(part.leader):
        return None, ControllerError(ErrorCode.ELECTION_NOT_NEEDED, f"{name}: replica {part.leader} leads already")
    clean = [r for r in part.replicas if r in part.isr and image.is_live(r)]
    if clean:
        return PartitionChange(topic.topic_id, index, part.partition_epoch, leader=clean[0]), None
    dirty = [r for r in part.replicas if image.is_live(r)]
    if not dirty:
        return None, ControllerError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"{name}: no replica of "
                                                                      f"{list(part.replicas)} is live")
    return PartitionChange(topic.topic_id, index, part.partition_epoch, leader=dirty[0], isr=(dirty[0],),
                           unclean=True), None


@_checked
def elect_leaders(
    image: MetadataImage, election_type: int, partitions: Sequence[tuple[str, int]] | None
) -> tuple[Decision, dict[tuple[str, int], ControllerError | None]]:
    """ElectLeaders, one user operation. PREFERRED: the first replica leads again where it is
    live and in sync. UNCLEAN: a leaderless partition gets a leader, from the ISR if one is live,
    else any live replica (possible data loss: a warning, as `fence_broker` logs it).
    `partitions` None means every partition; then, as in Kafka, only the partitions that were
    not ELECTION_NOT_NEEDED are reported. Errors per partition (by (topic, index)); over
    MAX_RECORDS_PER_USER_OP the whole request is refused (POLICY_VIOLATION, raised)."""
    if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
        raise ControllerError(ErrorCode.INVALID_REQUEST, f"election type {election_type}; expected 0 (preferred) or "
                                                         "1 (unclean)")
    every = partitions is None
    wanted = [(name, index) for name in sorted(image.topic_ids)
              for index in sorted(image.topics[image.topic_ids[name]].partitions)] if partitions is None else list(partitions)
    builder = _Builder()
    results: dict[tuple[str, int], ControllerError | None] = {}
    for name, index in wanted:
        topic = image.topic_by_name(name)
        part = topic.partitions.get(index) if topic is not None else None
        if topic is None or part is None:
            results[(name, index)] = ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}-{index} "
                                                                                           "does not exist")
            continue
        if (name, index) in results:
            continue  # named twice: elected once
        change, error = _elect_one(image, topic, index, part, election_type)
        if every and error is not None and error.name == "ELECTION_NOT_NEEDED":
            continue
        results[(name, index)] = error
        if change is not None:
            builder.records.append(change)
            if change.unclean:
                builder.warnings.append(("partition.unclean_leader_elected", {
                    "topic": name, "partition": index, "leader": change.leader, "old_isr": list(part.isr),
                    "possible_data_loss": True, "requested": True}))
    if len(builder.records) > MAX_RECORDS_PER_USER_OP:
        raise _over_records_cap(f"electing leaders of {len(builder.records)} partitions", len(builder.records))
    return builder.done(), results
