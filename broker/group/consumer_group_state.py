"""One KIP-848 consumer group (`group.protocol=consumer`), as a pure state machine.

The coordinator computes the assignment; members only heartbeat
(ConsumerGroupHeartbeat). Driven by `heartbeat(...)` and timers (`tick(now_ms)` at
`next_deadline_ms()`); it reads no clock and does no I/O. Every change is expressed
as Kafka 4.4's `__consumer_offsets` records (`ConsumerGroupMetadata`,
`ConsumerGroupMemberMetadata`, `ConsumerGroupTargetAssignmentMetadata`/`Member`,
`ConsumerGroupCurrentMemberAssignment`), which the methods return and apply through `replay`
— the same `replay` a new coordinator uses to load the group — so what is stored is exactly
what is served. (`ConsumerGroupPartitionMetadata`, which older data holds, is replayed and
tombstoned by the next heartbeat, as Kafka 4.4 does.)

Epochs (Kafka's names):

- group epoch: bumped when membership or a subscription changes, or the metadata of a
  subscribed topic does: its record carries the subscribed topics' metadata hash (Kafka
  4.4's, KIP-1101: broker/group/metadata_hash.py; ids, names, partition counts, racks), and
  a heartbeat that finds another hash bumps it. A group loaded from records without the hash
  (0) therefore bumps once, as a Kafka 4.0 group does on Kafka 4.4.
- assignment epoch: the group epoch the target assignment was computed at (and when, wall
  clock). When the group epoch is ahead, the next heartbeat runs the server-side assignor
  (`group.consumer.assignors`; the members' most requested one, else the first). When the
  last member leaves, it moves to the group epoch with it (Kafka's consumerGroupFenceMembers).
- member epoch: the target epoch a member has reconciled to. 0 joins, -1 leaves,
  -2 is a static member's temporary leave (it keeps its assignment for a session).

A member's reconciliation towards its target (Kafka's `CurrentAssignmentBuilder`)::

                      target epoch moves; partitions to revoke
        STABLE ─────────────────────────────────────────────────> UNREVOKED_PARTITIONS
          ^  ^                                                          │
          │  │   the member no longer reports them as owned:           │
          │  └── towards the target (more to revoke: stays, its epoch) ┘
          │
          │ released by their previous owners
        UNRELEASED_PARTITIONS  <── target has partitions another member still owns

Revocation comes first: a member keeps its epoch until it stops owning the partitions
it must give up (or its rebalance timeout fences it). Partitions still owned by another
member (assigned to it or pending its revocation) are handed out only once released;
meanwhile the member is at the target epoch in UNRELEASED_PARTITIONS.

Fencing: a heartbeat with an epoch ahead of the member's, or behind it (unless it is
the previous epoch and the reported partitions are a subset of the assignment: the
answer bumping the epoch was lost), gets FENCED_MEMBER_EPOCH; an unknown member id
UNKNOWN_MEMBER_ID. A fenced member rejoins with epoch 0 and the same member id
(KAFKA-19233: epoch 0 is always accepted). Sessions expire after
`group.consumer.session.timeout.ms`; a member stuck in UNREVOKED_PARTITIONS past its
rebalance timeout is removed. Static members (`group.instance.id`): a new process
with the same instance id takes over a member that left with epoch -2 (its
assignment included, no epoch bump); while that member is still in, its instance id
is UNRELEASED_INSTANCE_ID; a request naming the instance with another member id is
FENCED_INSTANCE_ID.

Regex subscriptions (SubscribedTopicRegex, KIP-848): a member's subscription is its topic
names and the topics its regex matches (broker/group/topic_regex.py: RE2/J's syntax, a
whole-name match; INVALID_REGULAR_EXPRESSION for what RE2 refuses). The group's regexes are
resolved against the `topics` a heartbeat brings, as Kafka 4.4 does (`maybeUpdateRegularExpressions`,
`handleRegularExpressionsResult`): after the heartbeat that needs it (a regex no member used
before; topics created since the last resolution; `group.consumer.regex.refresh.interval.ms`
elapsed), never sooner than 10 s after the last one. Its records come after the heartbeat's,
as Kafka's asynchronous resolution writes them: one ConsumerGroupRegularExpression record per
regex (its topics, the metadata image version and wall-clock time of the resolution), then a
group epoch bump if a regex's topics changed. A new coordinator replays them, so it assigns
what the old one did. A member joining with a regex the group already resolved bumps the group
epoch at once; a regex no member uses any more is tombstoned. A deleted topic leaves the
subscription metadata at the next heartbeat.

Offset commits (`validate_commit`): at the member epoch; an older one only for partitions the
member holds since that epoch or before (Kafka 4.4's assignment epochs, KIP-1251: each held
partition's epoch, kept through reconciliation, 0 after a static member's temporary leave).

A new group starts at group epoch 1 and target assignment epoch 1 (Kafka 4.4's `ModernGroup`),
in memory only: its first member's bump writes epoch 2.

Classic members (KIP-848's online migration, `migration_policy`): `upgrade_from` takes a
non-empty classic group's members over (each keeps its assignment, at the classic generation
as its member epoch, its JoinGroup protocols and session timeout kept as ClassicMemberMetadata).
Classic members then speak JoinGroup (`classic_join`: answered at once, the member epoch as
the generation), SyncGroup (`classic_sync`: its assignment as ConsumerProtocol bytes), Heartbeat
(`classic_heartbeat`: REBALANCE_IN_PROGRESS while the group epoch is ahead of it or it has
partitions to revoke or to receive) and LeaveGroup (`classic_leave`); a SyncGroup is due within
the rebalance timeout after a JoinGroup, a JoinGroup within it after a REBALANCE_IN_PROGRESS,
else the member is removed. When the last consumer-protocol member is fenced (or a classic
process takes its static place) and only classic members remain, the group is tombstoned and
`downgraded` holds the classic group's members.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from raftka.broker.group.consumer_assignors import ASSIGNORS, TopicMeta
from raftka.broker.group.group_state import CommittedOffset, GroupState, Member
from raftka.broker.group.metadata_hash import subscription_hash
from raftka.broker.group.topic_regex import (
    InvalidTopicRegex,
    compile_topic_regex,
    invalid_regex_message,
    matching_topics,
)
from raftka.client.group_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from raftka.client.protocol import ErrorCode
from raftka.client.records import TopicPartition

NONE = int(ErrorCode.NONE)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
UNKNOWN_MEMBER_ID = int(ErrorCode.UNKNOWN_MEMBER_ID)
FENCED_MEMBER_EPOCH = int(ErrorCode.FENCED_MEMBER_EPOCH)
UNRELEASED_INSTANCE_ID = int(ErrorCode.UNRELEASED_INSTANCE_ID)
FENCED_INSTANCE_ID = int(ErrorCode.FENCED_INSTANCE_ID)
UNSUPPORTED_ASSIGNOR = int(ErrorCode.UNSUPPORTED_ASSIGNOR)
GROUP_MAX_SIZE_REACHED = int(ErrorCode.GROUP_MAX_SIZE_REACHED)
STALE_MEMBER_EPOCH = int(ErrorCode.STALE_MEMBER_EPOCH)
UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)
INVALID_REGULAR_EXPRESSION = int(ErrorCode.INVALID_REGULAR_EXPRESSION)
GROUP_ID_NOT_FOUND = int(ErrorCode.GROUP_ID_NOT_FOUND)
ILLEGAL_GENERATION = int(ErrorCode.ILLEGAL_GENERATION)
REBALANCE_IN_PROGRESS = int(ErrorCode.REBALANCE_IN_PROGRESS)
MEMBER_ID_REQUIRED = int(ErrorCode.MEMBER_ID_REQUIRED)
INCONSISTENT_GROUP_PROTOCOL = int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# The `group.version` feature level this serves (1: the KIP-848 consumer protocol), for the
# finalized features of ApiVersions v3+ (Kafka 4 finalizes it by default).
GROUP_VERSION = 1

DEFAULT_ASSIGNORS = ("uniform", "range")  # group.consumer.assignors
# Members of this protocol commit with OffsetCommit v9+ (Kafka answers older ones UNSUPPORTED_VERSION).
FIRST_MEMBER_EPOCH_COMMIT_VERSION = 9
SESSION_TIMEOUT_MS = 45_000  # group.consumer.session.timeout.ms
HEARTBEAT_INTERVAL_MS = 5_000  # group.consumer.heartbeat.interval.ms
# Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: a group's regexes are resolved at most this often.
REGEX_MIN_REFRESH_INTERVAL_MS = 10_000
# group.consumer.regex.refresh.interval.ms: they are resolved again after this even without new topics.
REGEX_REFRESH_INTERVAL_MS = 600_000
# Kafka's ModernGroup: a new group's epoch and target assignment epoch (in memory, not written).
INITIAL_GROUP_EPOCH = 1

# topic id -> partitions
Partitions = Mapping[str, frozenset[int]]


class MemberState(enum.IntEnum):
    """Kafka's `MemberState` and its byte in ConsumerGroupCurrentMemberAssignmentValue."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


# --- records: Kafka's ConsumerGroup* record types; `None` values are tombstones ----------

@dataclass(frozen=True)
class GroupEpochRecord:
    """ConsumerGroupMetadataKey/Value: the group epoch and the subscribed topics' metadata hash
    (Kafka 4.4's tagged MetadataHash, KIP-1101: broker/group/metadata_hash.py; 0 in a record
    written without it). `epoch` None deletes the group."""

    epoch: int | None
    metadata_hash: int = 0


@dataclass(frozen=True)
class SubscriptionMetadataRecord:
    """ConsumerGroupPartitionMetadataKey/Value: the subscribed topics' metadata, as Kafka before
    4.1 and raftka before the metadata hash wrote it. Only replayed now, and tombstoned (None) by
    the next heartbeat, as Kafka 4.4 does; a group's deletion tombstones it too."""

    topics: tuple[TopicMeta, ...] | None


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """ConsumerGroupMemberMetadataValue's ClassicMemberMetadata: a member that speaks the classic
    protocol (JoinGroup/SyncGroup/Heartbeat) in a consumer group, its session timeout and its
    JoinGroup protocols (name, ConsumerProtocol subscription bytes)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class MemberMetadata:
    """ConsumerGroupMemberMetadataValue."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    subscribed_topic_regex: str | None = None
    classic: ClassicMemberMetadata | None = None  # None: the member uses the consumer protocol


@dataclass(frozen=True)
class MemberMetadataRecord:
    member_id: str
    metadata: MemberMetadata | None


@dataclass(frozen=True)
class TargetAssignmentEpochRecord:
    """ConsumerGroupTargetAssignmentMetadataKey/Value: the epoch of the target assignment and when
    it was computed (Kafka 4.4's tagged AssignmentTimestamp, wall-clock ms; 0 when the group
    empties or is converted, or in a record written without it)."""

    epoch: int | None
    timestamp_ms: int = 0


@dataclass(frozen=True)
class TargetAssignmentMemberRecord:
    member_id: str
    partitions: Partitions | None


@dataclass(frozen=True)
class MemberAssignment:
    """ConsumerGroupCurrentMemberAssignmentValue: where a member's reconciliation stands."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # Kafka 4.4's assignment epochs (KIP-1251, the records' tagged AssignmentEpochs): the epoch at
    # which the member was given each partition it holds, assigned or pending revocation. Kept to
    # the partitions held; one not given here counts at the member epoch (0 at most), as Kafka
    # reads a record written without them.
    epochs: Mapping[tuple[str, int], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        default = max(self.member_epoch, 0)
        object.__setattr__(self, "epochs", {
            (t, p): self.epochs.get((t, p), default)
            for held in (self.assigned, self.pending_revocation)
            for t, ps in sorted(held.items()) for p in sorted(ps)})

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def assignment_epoch(self, topic_id: str, p: int) -> int | None:
        """The epoch the member holds the partition since; None if it holds it not."""
        return self.epochs.get((topic_id, p))


@dataclass(frozen=True)
class CurrentAssignmentRecord:
    member_id: str
    assignment: MemberAssignment | None


@dataclass(frozen=True)
class RegexResolution:
    """ConsumerGroupRegularExpressionValue: the topics a regex matched, the version (offset) of
    the metadata image it was resolved against and when (wall-clock ms)."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass(frozen=True)
class RegexResolutionRecord:
    """ConsumerGroupRegularExpressionKey/Value (record type 16); `resolution` None is a tombstone."""

    regex: str
    resolution: RegexResolution | None


@dataclass(frozen=True)
class MetadataVersion:
    """The metadata image a heartbeat runs against: its offset (a resolution's version) and the
    offset at which the coordinator last saw topics created (Kafka's `lastMetadataImageWithNewTopics`;
    -1: none seen)."""

    offset: int = 0
    new_topics_offset: int = -1


GroupRecord = (GroupEpochRecord | SubscriptionMetadataRecord | MemberMetadataRecord
               | TargetAssignmentEpochRecord | TargetAssignmentMemberRecord | CurrentAssignmentRecord
               | RegexResolutionRecord)


# --- requests and answers -------------------------------------------------------------------

@dataclass(frozen=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat request. None fields did not change since the last one."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None  # TopicPartitions
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_regex: str | None = None  # "" clears it
    # With an authorizer: may this member DESCRIBE the topic? A regex's matches are filtered
    # by it when this heartbeat resolves the group's regexes (Kafka's
    # `filterTopicDescribeAuthorizedTopics`: the context of the member that triggered it).
    may_describe: Callable[[str], bool] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: unchanged, not sent


@dataclass
class ConsumerMember:
    member_id: str
    metadata: MemberMetadata = field(default_factory=MemberMetadata)
    assignment: MemberAssignment = field(default_factory=MemberAssignment)
    session_deadline_ms: float = math.inf
    # Set while the member is in UNREVOKED_PARTITIONS: (deadline, the epoch it must leave).
    rebalance_deadline: tuple[float, int] | None = None
    # A classic member: SyncGroup due after its JoinGroup, JoinGroup due after a
    # REBALANCE_IN_PROGRESS (each within its rebalance timeout, or it is removed).
    sync_deadline_ms: float | None = None
    join_deadline_ms: float | None = None

    @property
    def uses_classic(self) -> bool:
        return self.metadata.classic is not None

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def instance_id(self) -> str | None:
        return self.metadata.instance_id


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _norm(partitions: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in sorted(partitions.items()) if ps}


def _contains(partitions: Partitions, topic_id: str, p: int) -> bool:
    return p in partitions.get(topic_id, ())


def _is_subset(owned: Partitions | None, assigned: Partitions) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def reconcile(assignment: MemberAssignment, target_epoch: int, target: Partitions,
              owned_elsewhere: Callable[[str, int], bool], owned: Partitions | None) -> MemberAssignment:
    """Kafka's `CurrentAssignmentBuilder.build`: the member's next step towards `target`.
    `owned`: what the member reported owning (None: not reported, assumed unchanged);
    `owned_elsewhere(topic_id, p)`: another member still holds that partition."""
    def owns_any(revoking: Partitions) -> bool:
        if owned is None:
            return True
        return any(_contains(revoking, t, p) for t, ps in owned.items() for p in ps)

    def next_assignment(member_epoch: int) -> MemberAssignment:
        current = assignment.assigned
        kept: dict[str, set[int]] = {}
        revoking: dict[str, set[int]] = {}
        adding: dict[str, set[int]] = {}
        unreleased = False
        for topic_id in sorted(set(target) | set(current)):
            want, have = target.get(topic_id, frozenset()), current.get(topic_id, frozenset())
            kept[topic_id] = set(have & want)
            revoking[topic_id] = set(have - want)
            free = {p for p in want - have if not owned_elsewhere(topic_id, p)}
            unreleased |= len(free) < len(want - have)
            adding[topic_id] = free
        new_kept, new_revoking = _norm(kept), _norm(revoking)
        # What the member keeps or revokes keeps its assignment epoch; what it gets is at the target epoch.
        # (One it was revoking and gets back is given anew.)
        epochs = {**dict.fromkeys(((t, p) for t, ps in adding.items() for p in ps), target_epoch),
                  **{(t, p): assignment.epochs[(t, p)] for t, ps in current.items() for p in ps}}
        if new_revoking and owns_any(new_revoking):
            return MemberAssignment(member_epoch, assignment.member_epoch, MemberState.UNREVOKED_PARTITIONS,
                                    new_kept, new_revoking, epochs)
        merged = _norm({t: kept.get(t, set()) | adding.get(t, set()) for t in set(kept) | set(adding)})
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return MemberAssignment(target_epoch, assignment.member_epoch, state, merged, {}, epochs)

    match assignment.state:
        case MemberState.STABLE:
            if assignment.member_epoch != target_epoch:
                return next_assignment(assignment.member_epoch)
            return assignment
        case MemberState.UNREVOKED_PARTITIONS:
            if owns_any(assignment.pending_revocation):
                return assignment
            # Revoked: towards the target; a member with more to revoke keeps its epoch.
            return next_assignment(assignment.member_epoch)
        case _:  # UNRELEASED_PARTITIONS
            return next_assignment(assignment.member_epoch)


@dataclass
class ConsumerGroupState:
    group_id: str
    assignors: tuple[str, ...] = DEFAULT_ASSIGNORS
    session_timeout_ms: int = SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
    max_size: int = 2**31 - 1  # group.consumer.max.size
    group_epoch: int = INITIAL_GROUP_EPOCH
    assignment_epoch: int = INITIAL_GROUP_EPOCH
    assignment_timestamp_ms: int = 0  # when the target was computed (wall clock; 0: unknown)
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    # The subscribed topics' metadata hash the group epoch was last bumped with (KIP-1101).
    metadata_hash: int = 0
    # A ConsumerGroupPartitionMetadata record (older data) is in the log, not yet tombstoned
    # (Kafka's hasSubscriptionMetadataRecord).
    has_partition_metadata_record: bool = False
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    deleted: bool = False
    regex_refresh_interval_ms: int = REGEX_REFRESH_INTERVAL_MS  # group.consumer.regex.refresh.interval.ms
    # What the current heartbeat resolves regexes against: (image version, wall-clock ms); the
    # wall clock stamps a target assignment too.
    _regex_clock: tuple[MetadataVersion, float] = field(default=(MetadataVersion(), 0.0), repr=False, compare=False)
    # The members' regexes resolved against the metadata image (ConsumerGroupRegularExpression
    # records, replayed).
    resolved_regexes: dict[str, RegexResolution] = field(default_factory=dict)
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    classic_max_size: int = 2**31 - 1  # group.max.size: a downgrade must fit in it
    # Set when the group converted back into a classic group (the last consumer-protocol
    # member left): the classic members, as the classic group takes them. The group is
    # deleted (its tombstones are among the records that set this).
    downgraded: list[Member] | None = None

    # --- queries ------------------------------------------------------------------------
    @property
    def is_empty(self) -> bool:
        return not self.members

    def describe_state(self) -> str:
        """Kafka's ConsumerGroupState names (DescribeGroups, ConsumerGroupDescribe, ListGroups)."""
        if self.deleted:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.assignment.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def preferred_assignor(self) -> str:
        """The server assignor most members ask for; the first configured if none asks."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.metadata.server_assignor is not None:
                counts[m.metadata.server_assignor] = counts.get(m.metadata.server_assignor, 0) + 1
        if not counts:
            return self.assignors[0]
        order = {name: i for i, name in enumerate(self.assignors)}
        return min(counts, key=lambda n: (-counts[n], order.get(n, len(order)), n))

    def member_topics(self, member: ConsumerMember) -> tuple[str, ...]:
        """The member's subscription: its topic names and its regex's resolved matches."""
        regex = member.metadata.subscribed_topic_regex
        resolution = self.resolved_regexes.get(regex) if regex else None
        matched = resolution.topics if resolution is not None else frozenset()
        if not matched:
            return member.metadata.subscribed_topic_names
        return tuple(sorted(set(member.metadata.subscribed_topic_names) | matched))

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in self.member_topics(m)}

    def subscribed_regexes(self) -> set[str]:
        return {m.metadata.subscribed_topic_regex for m in self.members.values()
                if m.metadata.subscribed_topic_regex}

    def _owned_elsewhere(self, member_id: str) -> Callable[[str, int], bool]:
        held: set[tuple[str, int]] = set()
        for m in self.members.values():
            if m.member_id == member_id:
                continue
            for partitions in (m.assignment.assigned, m.assignment.pending_revocation):
                held.update((t, p) for t, ps in partitions.items() for p in ps)
        return lambda t, p: (t, p) in held

    # --- replay: the one way state changes --------------------------------------------------
    def replay(self, record: GroupRecord) -> None:
        """Apply one record (what a new coordinator does when it loads the group)."""
        match record:
            case GroupEpochRecord(epoch, metadata_hash):
                if epoch is None:
                    self.deleted = True
                else:
                    self.group_epoch, self.metadata_hash = epoch, metadata_hash
            case SubscriptionMetadataRecord(topics):
                self.has_partition_metadata_record = topics is not None
            case MemberMetadataRecord(member_id, metadata):
                if metadata is None:
                    self.members.pop(member_id, None)
                else:
                    self.members.setdefault(member_id, ConsumerMember(member_id)).metadata = metadata
            case TargetAssignmentEpochRecord(epoch, timestamp_ms):
                self.assignment_epoch = epoch if epoch is not None else 0
                self.assignment_timestamp_ms = timestamp_ms
            case TargetAssignmentMemberRecord(member_id, partitions):
                if partitions is None:
                    self.target.pop(member_id, None)
                else:
                    self.target[member_id] = _norm(partitions)
            case CurrentAssignmentRecord(member_id, assignment):
                member = self.members.get(member_id)
                if assignment is None:
                    if member is not None:
                        member.assignment = MemberAssignment()
                elif member is None:
                    self.members[member_id] = ConsumerMember(member_id, assignment=assignment)
                else:
                    member.assignment = assignment
            case RegexResolutionRecord(regex, resolution):
                if resolution is None:
                    self.resolved_regexes.pop(regex, None)
                else:
                    self.resolved_regexes[regex] = resolution

    def _write(self, out: list[GroupRecord], record: GroupRecord) -> None:
        out.append(record)
        self.replay(record)

    # --- heartbeat ----------------------------------------------------------------------
    def _validate(self, hb: Heartbeat) -> None:
        """Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`."""
        if hb.instance_id == "":
            raise HeartbeatError(INVALID_REQUEST, "InstanceId can't be empty.")
        if hb.rack_id == "":
            raise HeartbeatError(INVALID_REQUEST, "RackId can't be empty.")
        if hb.member_epoch > 0 or hb.member_epoch == LEAVE_EPOCH:
            if not hb.member_id:
                raise HeartbeatError(INVALID_REQUEST, "MemberId can't be empty.")
        elif hb.member_epoch == JOIN_EPOCH:
            if hb.rebalance_timeout_ms == -1:
                raise HeartbeatError(INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if hb.owned is None or any(hb.owned.values()):
                raise HeartbeatError(INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if not hb.subscribed_topic_names and not hb.subscribed_topic_regex:
                raise HeartbeatError(INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be "
                                     "set in first request.")
        elif hb.member_epoch == STATIC_LEAVE_EPOCH:
            if not hb.member_id:
                raise HeartbeatError(INVALID_REQUEST, "MemberId can't be empty.")
            if hb.instance_id is None:
                raise HeartbeatError(INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise HeartbeatError(INVALID_REQUEST, f"MemberEpoch {hb.member_epoch} is invalid; expected "
                                 "0 (join), -1 (leave), -2 (static leave) or a positive epoch.")
        if hb.server_assignor is not None and hb.server_assignor not in self.assignors:
            raise HeartbeatError(UNSUPPORTED_ASSIGNOR, f"ServerAssignor {hb.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(self.assignors)}.")
        if hb.subscribed_topic_regex:
            try:
                compile_topic_regex(hb.subscribed_topic_regex)
            except InvalidTopicRegex as exc:
                raise HeartbeatError(INVALID_REGULAR_EXPRESSION,
                                     invalid_regex_message(hb.subscribed_topic_regex, exc)) from None

    def heartbeat(self, hb: Heartbeat, topics: Mapping[str, TopicMeta], now_ms: float,
                  new_member_id: Callable[[], str] | None = None, *,
                  image: MetadataVersion = MetadataVersion(),
                  wall_ms: float | None = None) -> tuple[HeartbeatResult, list[GroupRecord]]:
        """Handle a ConsumerGroupHeartbeat. `topics`: the metadata image's topics by name;
        `new_member_id`: for a v0 join without a member id; `image` and `wall_ms` (the wall
        clock; default `now_ms`): for regex resolutions. Returns the answer and the records to
        persist before sending it (already applied here)."""
        self._regex_clock = (image, now_ms if wall_ms is None else wall_ms)
        out: list[GroupRecord] = []
        try:
            self._validate(hb)
            if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(hb, topics, out), out
            if hb.member_epoch == JOIN_EPOCH and not hb.member_id:
                if new_member_id is None:
                    raise HeartbeatError(INVALID_REQUEST, "MemberId can't be empty.")
                hb = replace(hb, member_id=new_member_id())
            return self._heartbeat(hb, topics, now_ms, out), out
        except HeartbeatError as exc:
            return HeartbeatResult(exc.code, str(exc)), out

    def _member_for(self, hb: Heartbeat, out: list[GroupRecord]) -> ConsumerMember:
        joining = hb.member_epoch == JOIN_EPOCH
        known = hb.member_id in self.members
        if joining and not known and len(self.members) >= self.max_size:
            raise HeartbeatError(GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                 f"capacity of {self.max_size} members.")
        if hb.instance_id is None:
            member = self.members.get(hb.member_id)
            if member is None:
                if not joining:
                    raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of "
                                         f"group {self.group_id}.")
                return ConsumerMember(hb.member_id)
            self._check_epoch(member, hb)
            return member
        existing = self.static_member(hb.instance_id)
        if joining:
            if existing is None:
                if known:  # the member id is taken by a dynamic member
                    raise HeartbeatError(FENCED_INSTANCE_ID, f"Member {hb.member_id} has no instance id "
                                         f"{hb.instance_id}.")
                return ConsumerMember(hb.member_id)
            if existing.member_id == hb.member_id:
                return existing  # a fenced static member rejoining
            if existing.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(UNRELEASED_INSTANCE_ID, f"Static member {hb.member_id} with instance id "
                                     f"{hb.instance_id} cannot join the group because the instance id is "
                                     f"owned by member {existing.member_id}.")
            return self._replace_static(existing, hb.member_id, out)
        if existing is None:
            raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
        if existing.member_id != hb.member_id:
            raise HeartbeatError(FENCED_INSTANCE_ID, f"Static member {hb.member_id} with instance id "
                                 f"{hb.instance_id} was fenced by member {existing.member_id}.")
        self._check_epoch(existing, hb)
        return existing

    @staticmethod
    def _check_epoch(member: ConsumerMember, hb: Heartbeat) -> None:
        received, current = hb.member_epoch, member.member_epoch
        if received == JOIN_EPOCH:
            return  # a fenced member rejoining (KAFKA-19233)
        if received > current:
            raise HeartbeatError(FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                                 f"({received}) than the one known by the group coordinator ({current}). "
                                 "The member must abandon all its partitions and rejoin.")
        if received < current and (received != member.assignment.previous_member_epoch
                                   or not _is_subset(hb.owned, member.assignment.assigned)):
            raise HeartbeatError(FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                                 f"({received}) than the one known by the group coordinator ({current}). "
                                 "The member must abandon all its partitions and rejoin.")

    def _replace_static(self, old: ConsumerMember, member_id: str, out: list[GroupRecord]) -> ConsumerMember:
        """A restarted static member takes over the one that left with epoch -2: its
        assignment and target move to the new member id, at epoch 0; no epoch bump."""
        target = self.target.get(old.member_id, {})
        assignment = replace(old.assignment, member_epoch=0, previous_member_epoch=0,
                             pending_revocation={}, state=MemberState.STABLE)
        self._remove_records(old.member_id, out)
        self._write(out, MemberMetadataRecord(member_id, old.metadata))
        self._write(out, TargetAssignmentMemberRecord(member_id, target))
        self._write(out, CurrentAssignmentRecord(member_id, assignment))
        member = self.members[member_id]
        member.session_deadline_ms = old.session_deadline_ms
        return member

    def _remove_records(self, member_id: str, out: list[GroupRecord]) -> None:
        self._write(out, CurrentAssignmentRecord(member_id, None))
        self._write(out, TargetAssignmentMemberRecord(member_id, None))
        self._write(out, MemberMetadataRecord(member_id, None))

    def _heartbeat(self, hb: Heartbeat, topics: Mapping[str, TopicMeta], now_ms: float,
                   out: list[GroupRecord]) -> HeartbeatResult:
        member = self._member_for(hb, out)
        before = member.assignment
        is_new = member.member_id not in self.members
        old = member.metadata
        metadata = replace(
            old,
            instance_id=hb.instance_id if hb.instance_id is not None else old.instance_id,
            rack_id=hb.rack_id if hb.rack_id is not None else old.rack_id,
            rebalance_timeout_ms=hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1
            else old.rebalance_timeout_ms,
            server_assignor=hb.server_assignor if hb.server_assignor is not None else old.server_assignor,
            subscribed_topic_names=tuple(sorted(set(hb.subscribed_topic_names)))
            if hb.subscribed_topic_names is not None else old.subscribed_topic_names,
            subscribed_topic_regex=(hb.subscribed_topic_regex or None) if hb.subscribed_topic_regex is not None
            else old.subscribed_topic_regex,
            client_id=hb.client_id, client_host=hb.client_host, classic=None)
        member, resolve = self._update_member(member.member_id, is_new, old, metadata, topics, out)
        self._reconcile(member, hb.owned if hb.member_epoch != JOIN_EPOCH else {}, now_ms, out)
        self._resolve_regexes(topics, resolve, hb.may_describe, out)
        member.session_deadline_ms = now_ms + self.session_timeout_ms
        full = hb.member_epoch == JOIN_EPOCH or (
            hb.rebalance_timeout_ms != -1 and hb.owned is not None
            and (hb.subscribed_topic_names is not None or hb.subscribed_topic_regex is not None))
        changed = member.assignment.assigned != before.assigned
        return HeartbeatResult(NONE, None, member.member_id, member.member_epoch, self.heartbeat_interval_ms,
                               dict(member.assignment.assigned) if full or changed else None)

    def _metadata_hash(self, topics: Mapping[str, TopicMeta]) -> int:
        """The hash of the subscribed topics' metadata (Kafka's `computeMetadataHash`)."""
        return subscription_hash(self.subscribed_topics(), topics)

    def _bump(self, topics: Mapping[str, TopicMeta], out: list[GroupRecord]) -> None:
        """The next group epoch, with the subscribed topics' metadata hash."""
        self._write(out, GroupEpochRecord(self.group_epoch + 1, self._metadata_hash(topics)))

    def _update_member(self, member_id: str, is_new: bool, old: MemberMetadata, metadata: MemberMetadata,
                       topics: Mapping[str, TopicMeta], out: list[GroupRecord]) -> tuple[ConsumerMember, bool]:
        """Write a member's new metadata; bump the group epoch when its topic names or regex, the
        group's assignor (Kafka's hasPreferredServerAssignorChanged) or the subscribed topics
        moved, and compute the new target. (the member, whether the group's regexes are to be
        resolved after this request)."""
        bump = False
        assignor = self.preferred_assignor()
        if is_new or metadata != old:
            self._write(out, MemberMetadataRecord(member_id, metadata))
            bump = metadata.subscribed_topic_names != old.subscribed_topic_names
        regex_bump, resolve = self._update_regex(old.subscribed_topic_regex, metadata.subscribed_topic_regex, out)
        bump |= regex_bump or self.preferred_assignor() != assignor
        # Kafka's updateSubscriptionMetadata: a changed metadata hash bumps the epoch too; an
        # older ConsumerGroupPartitionMetadata record is tombstoned.
        bump |= self._metadata_hash(topics) != self.metadata_hash
        if bump:
            self._bump(topics, out)
        if self.has_partition_metadata_record:
            self._write(out, SubscriptionMetadataRecord(None))
        if self.group_epoch > self.assignment_epoch:
            self._compute_target(topics, out)
        return self.members[member_id], resolve

    def _update_regex(self, old: str | None, new: str | None, out: list[GroupRecord]) -> tuple[bool, bool]:
        """A member's regex changed from `old` to `new` (its metadata already written); Kafka's
        `maybeUpdateRegularExpressions`. Tombstones `old` if no member uses it any more.
        (bump, resolve): bump the group epoch (a regex dropped, or one the group has resolved
        already taken up); resolve the group's regexes after this heartbeat (a regex new to the group).
        "" and null both mean no regex (librdkafka sends "" when it has none)."""
        old, new = old or None, new or None
        if old == new:
            return False, False
        if old is not None and old not in self.subscribed_regexes():
            self._write(out, RegexResolutionRecord(old, None))
        if new is None:
            return True, False
        if sum(m.metadata.subscribed_topic_regex == new for m in self.members.values()) == 1:
            return False, True
        return new in self.resolved_regexes, False

    def _resolve_regexes(self, topics: Mapping[str, TopicMeta], required: bool,
                         may_describe: Callable[[str], bool] | None, out: list[GroupRecord]) -> None:
        """Resolve the group's regexes if due (Kafka's refresh conditions: never within 10 s of the
        last resolution; then when a regex is new to the group, topics were created since, or
        `regex_refresh_interval_ms` elapsed) and write what Kafka's `handleRegularExpressionsResult`
        writes: every regex's resolution, then a group epoch bump if a regex's topics changed.
        With an authorizer, the matches are the topics the member that triggered it may describe."""
        regexes = self.subscribed_regexes()
        if not regexes:
            return
        image, wall_ms = self._regex_clock
        previous = next(iter(self.resolved_regexes.values()), None)
        last_ms = previous.timestamp_ms if previous is not None else -math.inf
        if wall_ms <= last_ms + REGEX_MIN_REFRESH_INTERVAL_MS:
            return
        required |= len(regexes) != len(self.resolved_regexes)
        required |= (previous.version if previous is not None else 0) < image.new_topics_offset
        required |= wall_ms > last_ms + self.regex_refresh_interval_ms
        if not required:
            return
        bump = False
        for regex in sorted(regexes):
            names = matching_topics(regex, topics)
            if may_describe is not None:
                names = frozenset(filter(may_describe, names))
            before = self.resolved_regexes.get(regex)
            bump |= names != (before.topics if before is not None else frozenset())
            self._write(out, RegexResolutionRecord(regex, RegexResolution(names, image.offset, int(wall_ms))))
        bump |= self._metadata_hash(topics) != self.metadata_hash
        if bump:
            self._bump(topics, out)

    def _drop_unused_regexes(self, regexes: Iterable[str | None], out: list[GroupRecord]) -> None:
        """Tombstone the resolutions of these regexes that no member uses any more (Kafka's
        `maybeDeleteResolvedRegularExpressions`)."""
        used = self.subscribed_regexes()
        for regex in sorted({r for r in regexes if r} - used):
            self._write(out, RegexResolutionRecord(regex, None))

    def _compute_target(self, topics: Mapping[str, TopicMeta], out: list[GroupRecord]) -> None:
        assign = ASSIGNORS[self.preferred_assignor()]
        subscriptions = {m.member_id: self.member_topics(m) for m in self.members.values()}
        metadata = {name: topics[name] for name in sorted(self.subscribed_topics()) if name in topics}
        new = assign(subscriptions, metadata, self.target)
        for member_id in sorted(new):
            if self.target.get(member_id) != new[member_id]:
                self._write(out, TargetAssignmentMemberRecord(member_id, new[member_id]))
        for member_id in sorted(set(self.target) - set(new)):
            self._write(out, TargetAssignmentMemberRecord(member_id, None))
        self._write(out, TargetAssignmentEpochRecord(self.group_epoch, int(self._regex_clock[1])))

    def _reconcile(self, member: ConsumerMember, owned: Partitions | None, now_ms: float,
                   out: list[GroupRecord]) -> None:
        before = member.assignment
        if before.is_reconciled_to(self.assignment_epoch):
            return
        after = reconcile(before, self.assignment_epoch, self.target.get(member.member_id, {}),
                          self._owned_elsewhere(member.member_id), owned)
        if after == before:
            return
        self._write(out, CurrentAssignmentRecord(member.member_id, after))
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            timeout = max(member.metadata.rebalance_timeout_ms, 0)
            member.rebalance_deadline = (now_ms + timeout, after.member_epoch)
        else:
            member.rebalance_deadline = None

    # --- leaving -----------------------------------------------------------------------
    def _leave(self, hb: Heartbeat, topics: Mapping[str, TopicMeta], out: list[GroupRecord]) -> HeartbeatResult:
        if hb.instance_id is None:
            member = self.members.get(hb.member_id)
            if member is None:
                raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of "
                                     f"group {self.group_id}.")
        else:
            member = self.static_member(hb.instance_id)
            if member is None:
                raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
            if member.member_id != hb.member_id:
                raise HeartbeatError(FENCED_INSTANCE_ID, f"Static member {hb.member_id} with instance id "
                                     f"{hb.instance_id} was fenced by member {member.member_id}.")
            if hb.member_epoch == STATIC_LEAVE_EPOCH:
                # A temporary leave: the assignment stays for a session, no epoch bump.
                # Kafka's resetAssignedPartitionsEpochsToZero: whoever takes its place next holds them from 0.
                self._write(out, CurrentAssignmentRecord(member.member_id, replace(
                    member.assignment, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={},
                    epochs=dict.fromkeys(member.assignment.epochs, 0))))
                member.rebalance_deadline = None
                return HeartbeatResult(NONE, None, member.member_id, STATIC_LEAVE_EPOCH)
        self.fence(member.member_id, topics, out)
        return HeartbeatResult(NONE, None, member.member_id, hb.member_epoch)

    def fence(self, member_id: str, topics: Mapping[str, TopicMeta], out: list[GroupRecord]) -> None:
        """Remove a member (left, session expired, missed its rebalance timeout) and bump the
        group epoch; the next heartbeat recomputes the target without it. When it was the last
        member on the consumer protocol and the policy allows, the group converts back into
        a classic group instead (`downgraded`)."""
        if self._downgrade_allowed(member_id):
            self.downgraded = self._classic_members(member_id, topics)
            out += self.deletion_records()
            return
        member = self.members.get(member_id)
        self._remove_records(member_id, out)
        self._drop_unused_regexes([member.metadata.subscribed_topic_regex] if member else [], out)
        self._bump_after_leaving(topics, out)

    def _bump_after_leaving(self, topics: Mapping[str, TopicMeta], out: list[GroupRecord]) -> None:
        """Kafka's `consumerGroupFenceMembers` after it removed members: the next group epoch; when
        no member is left, the target assignment moves to it too (its timestamp 0)."""
        self._bump(topics, out)
        if not self.members:
            self._write(out, TargetAssignmentEpochRecord(self.group_epoch))

    def deletion_records(self) -> list[GroupRecord]:
        """The tombstones that delete this (empty) group's metadata, as Kafka writes them when
        a group is deleted or converted; its offsets are separate records."""
        out: list[GroupRecord] = []
        members = sorted(self.members)
        for member_id in members:  # in Kafka's order (ConsumerGroup.createGroupTombstoneRecords)
            self._write(out, CurrentAssignmentRecord(member_id, None))
        for member_id in members:
            self._write(out, TargetAssignmentMemberRecord(member_id, None))
        self._write(out, TargetAssignmentEpochRecord(None))
        for member_id in members:
            self._write(out, MemberMetadataRecord(member_id, None))
        self._drop_unused_regexes(list(self.resolved_regexes), out)
        self._write(out, SubscriptionMetadataRecord(None))
        self._write(out, GroupEpochRecord(None))
        return out

    # --- timers ------------------------------------------------------------------------
    def start_timers(self, now_ms: float) -> None:
        """A coordinator that just loaded the group (Kafka's `onLoaded`): every member's
        session starts now, and a member that was asked to revoke gets its rebalance timeout
        again, from now."""
        for member in self.members.values():
            member.session_deadline_ms = now_ms + self._session_timeout(member)
            member.rebalance_deadline = None
            if member.assignment.state is MemberState.UNREVOKED_PARTITIONS:
                timeout = max(member.metadata.rebalance_timeout_ms, 0)
                member.rebalance_deadline = (now_ms + timeout, member.member_epoch)

    def next_deadline_ms(self) -> float | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [m.rebalance_deadline[0] for m in self.members.values() if m.rebalance_deadline]
        deadlines += [d for m in self.members.values() for d in (m.sync_deadline_ms, m.join_deadline_ms)
                      if d is not None]
        finite = [d for d in deadlines if d != math.inf]
        return min(finite, default=None)

    def tick(self, now_ms: float, topics: Mapping[str, TopicMeta]) -> tuple[list[str], list[GroupRecord]]:
        """Expire sessions and rebalance timeouts. Returns the members removed and the records."""
        out: list[GroupRecord] = []
        removed: list[str] = []
        for member in sorted(self.members.values(), key=lambda m: m.member_id):
            expired = now_ms >= member.session_deadline_ms
            stuck = (member.rebalance_deadline is not None and now_ms >= member.rebalance_deadline[0]
                     and member.member_epoch == member.rebalance_deadline[1])
            late = any(d is not None and now_ms >= d for d in (member.sync_deadline_ms, member.join_deadline_ms))
            if expired or stuck or late:
                self.fence(member.member_id, topics, out)
                removed.append(member.member_id)
                if self.deleted:  # converted into a classic group
                    break
        return removed, out

    # --- offsets ------------------------------------------------------------------------
    def validate_commit(self, member_id: str, member_epoch: int, api_version: int,
                        transactional: bool = False,
                        partitions: Iterable[tuple[str | None, int]] = ()) -> int:
        """Kafka's `ConsumerGroup.validateOffsetCommit`: epoch -1 (admin, assign()) only while
        the group is empty; otherwise the member must be known (an empty id too is an unknown
        member), commit with OffsetCommit v9+ and its member epoch as the generation id. An
        older epoch (Kafka 4.4's `createAssignmentEpochValidator`, KIP-1251) is accepted if the
        member holds every one of `partitions` ((topic id, partition); None: a topic without
        one) since that epoch or before: a commit sent just before its epoch moved on."""
        if member_epoch < 0 and not self.members:
            return NONE
        if transactional and member_epoch < 0 and not member_id:
            return NONE
        member = self.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if not transactional and not member.uses_classic and api_version < FIRST_MEMBER_EPOCH_COMMIT_VERSION:
            return UNSUPPORTED_VERSION
        # A classic member's generation is its member epoch (Kafka's validateMemberEpoch).
        stale = ILLEGAL_GENERATION if member.uses_classic else STALE_MEMBER_EPOCH
        if member_epoch > member.member_epoch:
            return stale
        if member_epoch < member.member_epoch:
            for topic_id, p in partitions:
                since = member.assignment.assignment_epoch(topic_id, p) if topic_id is not None else None
                if since is None or member_epoch < since:
                    return stale
        return NONE

    def validate_fetch(self, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9+ (Kafka's `ConsumerGroup.validateOffsetFetch`): no member id and epoch
        -1 is an admin's or a classic consumer's fetch; anything else must be a known member at
        its current epoch (an empty id or epoch -1 included). Kafka 4.4 answers a null id with
        an epoch UNKNOWN_SERVER_ERROR (a NullPointerException); raftka, UNKNOWN_MEMBER_ID."""
        if member_id is None and member_epoch < 0:
            return NONE
        member = self.members.get(member_id) if member_id is not None else None
        if member is None:
            return UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ILLEGAL_GENERATION if member.uses_classic else STALE_MEMBER_EPOCH
        return NONE

    # --- classic members, and the migration between protocols (KIP-848) -------------------
    # A consumer group may hold members that speak the classic protocol: the members of a
    # classic group it was upgraded from, and classic consumers that join it later. Their
    # JoinGroup is answered at once from the server-side assignment (their member epoch is
    # the generation), their SyncGroup with their assignment in ConsumerProtocol bytes, and
    # their Heartbeat with REBALANCE_IN_PROGRESS while they have partitions to give up or
    # to receive, so that they join again (Kafka's GroupMetadataManager.classicGroup*ToConsumerGroup).

    def _session_timeout(self, member: ConsumerMember) -> int:
        classic = member.metadata.classic
        return classic.session_timeout_ms if classic is not None else self.session_timeout_ms

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's `supportsClassicProtocols`: the "consumer" protocol type, and a protocol every
        classic member supports (any, in a group without members)."""
        names = set(names)
        if protocol_type != PROTOCOL_TYPE:
            return False
        if not self.members:
            return bool(names)
        classic = [m.metadata.classic for m in self.members.values() if m.metadata.classic is not None]
        return any(all(name in {n for n, _ in c.protocols} for c in classic) for name in names)

    def _topic_ids(self, topics: Mapping[str, TopicMeta], tps: Iterable[TopicPartition]) -> dict[str, frozenset[int]]:
        by_id: dict[str, set[int]] = {}
        for tp in tps:
            meta = topics.get(tp.topic)
            if meta is not None:  # a topic the metadata does not know is dropped, as Kafka does
                by_id.setdefault(meta.topic_id, set()).add(tp.partition)
        return _norm(by_id)

    @staticmethod
    def _topic_names(partitions: Partitions, topics: Mapping[str, TopicMeta]) -> tuple[TopicPartition, ...]:
        names = {m.topic_id: m.name for m in topics.values()}
        return tuple(TopicPartition(names[t], p) for t, ps in sorted(partitions.items()) if t in names
                     for p in sorted(ps))

    def classic_assignment(self, member: ConsumerMember, partitions: Partitions,
                           topics: Mapping[str, TopicMeta]) -> bytes:
        """`partitions` as ConsumerProtocol assignment bytes, at the version of the member's
        first protocol's subscription (Kafka's `prepareAssignment`)."""
        classic = member.metadata.classic
        version = _subscription_version(classic.protocols[0][1]) if classic and classic.protocols else 0
        return encode_assignment(Assignment(self._topic_names(partitions, topics), None), version)

    def _classic_member(self, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's `validateConsumerGroupMember` and `throwIfMemberDoesNotUseClassicProtocol`."""
        if instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {self.group_id}.")
        else:
            member = self.static_member(instance_id)
            if member is None:
                raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member "
                                     f"of group {self.group_id}.")
            if member.member_id != member_id:
                raise HeartbeatError(FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                     f"{instance_id} was fenced by member {member.member_id}.")
        if not member.uses_classic:
            raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
        return member

    @staticmethod
    def _check_generation(member: ConsumerMember, generation_id: int) -> None:
        if generation_id != member.member_epoch:
            raise HeartbeatError(ILLEGAL_GENERATION, f"The request generation id {generation_id} is not equal to "
                                 f"the member epoch {member.member_epoch} of member {member.member_id}.")

    def _must_rejoin(self, member: ConsumerMember, now_ms: float, message: str) -> None:
        """REBALANCE_IN_PROGRESS; the member must join again within its rebalance timeout."""
        if member.join_deadline_ms is None:
            member.join_deadline_ms = now_ms + max(member.metadata.rebalance_timeout_ms, 0)
        raise HeartbeatError(REBALANCE_IN_PROGRESS, message)

    def classic_join(self, join: ClassicJoin, topics: Mapping[str, TopicMeta], now_ms: float,
                     new_member_id: Callable[[], str], *,
                     wall_ms: float | None = None) -> tuple[ClassicJoinResult, list[GroupRecord]]:
        """A JoinGroup to this (non-empty) consumer group (Kafka's `classicGroupJoinToConsumerGroup`):
        the member's subscription and owned partitions come from its first protocol's metadata;
        the answer is immediate, the generation its member epoch, no members (it is no leader).
        `wall_ms`: the wall clock (default `now_ms`), for a target assignment's timestamp."""
        self._regex_clock = (self._regex_clock[0], now_ms if wall_ms is None else wall_ms)
        out: list[GroupRecord] = []
        member_id = join.member_id or new_member_id()
        try:
            if len(self.members) >= self.max_size and member_id not in self.members:
                raise HeartbeatError(GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                     f"capacity of {self.max_size} members.")
            if not self.supports_classic_protocols(join.protocol_type, (n for n, _ in join.protocols)):
                raise HeartbeatError(INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
            if not join.member_id and join.instance_id is None and join.require_known_member_id:
                return ClassicJoinResult(MEMBER_ID_REQUIRED, member_id), out
            try:
                subscription = decode_subscription(join.protocols[0][1])
            except ValueError as exc:
                raise HeartbeatError(INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s subscription is "
                                     f"malformed: {exc}.") from None
            replaced = self.static_member(join.instance_id) if not join.member_id else None
            member = self._classic_join_member(join, member_id, out)
            result = self._classic_update(member, join, subscription, topics, now_ms, out)
            if replaced is not None and not replaced.uses_classic and self._all_classic_downgradable():
                # A classic process took the place of the last static member on the consumer
                # protocol (Kafka's validateOnlineDowngradeWithReplacedMember): a classic group again.
                self.downgraded = self._classic_members(None, topics)
                out += self.deletion_records()
            return result, out
        except HeartbeatError as exc:
            return ClassicJoinResult(exc.code, member_id, error_message=str(exc)), out

    def _classic_join_member(self, join: ClassicJoin, member_id: str, out: list[GroupRecord]) -> ConsumerMember:
        if join.instance_id is None:
            # An unknown member id joins as a new member (a classic member fenced meanwhile), as in Kafka.
            return self.members.get(member_id) or ConsumerMember(member_id)
        existing = self.static_member(join.instance_id)
        if not join.member_id:  # a static member (re)starting: it takes the instance's place
            if existing is None:
                return ConsumerMember(member_id)
            return self._replace_static(existing, member_id, out)
        if existing is None:
            raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Instance id {join.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise HeartbeatError(FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{join.instance_id} was fenced by member {existing.member_id}.")
        return existing

    def _classic_update(self, member: ConsumerMember, join: ClassicJoin, subscription: Subscription,
                        topics: Mapping[str, TopicMeta],
                        now_ms: float, out: list[GroupRecord]) -> ClassicJoinResult:
        is_new = member.member_id not in self.members
        old = member.metadata
        metadata = replace(
            old, instance_id=join.instance_id if join.instance_id is not None else old.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else old.rack_id,
            rebalance_timeout_ms=join.rebalance_timeout_ms if join.rebalance_timeout_ms != -1
            else old.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            client_id=join.client_id, client_host=join.client_host,
            classic=ClassicMemberMetadata(join.session_timeout_ms, tuple(join.protocols)))
        # A classic member keeps the regex it had (none); regexes are resolved after a ConsumerGroupHeartbeat.
        member, _ = self._update_member(member.member_id, is_new, old, metadata, topics, out)
        self._reconcile(member, self._topic_ids(topics, subscription.owned_partitions), now_ms, out)
        member.join_deadline_ms = None
        member.sync_deadline_ms = now_ms + max(join.rebalance_timeout_ms, 0)
        member.session_deadline_ms = now_ms + join.session_timeout_ms
        return ClassicJoinResult(NONE, member.member_id, member.member_epoch, join.protocols[0][0])

    def classic_sync(self, member_id: str, instance_id: str | None, generation_id: int, now_ms: float,
                     protocol_type: str | None = None, protocol_name: str | None = None, *,
                     topics: Mapping[str, TopicMeta]) -> ClassicSyncResult:
        """A SyncGroup (Kafka's `classicGroupSyncToConsumerGroup`): the member's current
        assignment, unless the group moved on since it joined (REBALANCE_IN_PROGRESS)."""
        try:
            member = self._classic_member(member_id, instance_id)
            self._check_generation(member, generation_id)
            classic = member.metadata.classic
            assert classic is not None
            name = classic.protocols[0][0]
            if protocol_type is not None and protocol_type != PROTOCOL_TYPE:
                raise HeartbeatError(INCONSISTENT_GROUP_PROTOCOL, f"The protocol type {protocol_type} from member "
                                     f"{member_id} request is not equal to the group protocol type {PROTOCOL_TYPE}.")
            if protocol_name is not None and protocol_name != name:
                raise HeartbeatError(INCONSISTENT_GROUP_PROTOCOL, f"The protocol name {protocol_name} from member "
                                     f"{member_id} request is not equal to the protocol name {name} returned in "
                                     "the join response.")
            if self.group_epoch > member.member_epoch and member.assignment.state is not MemberState.UNREVOKED_PARTITIONS:
                self._must_rejoin(member, now_ms, f"A new rebalance is triggered in group {self.group_id} and member "
                                  f"{member.member_id} should rejoin to catch up.")
        except HeartbeatError as exc:
            return ClassicSyncResult(exc.code, str(exc))
        member.sync_deadline_ms = None
        member.session_deadline_ms = now_ms + classic.session_timeout_ms
        return ClassicSyncResult(NONE, None, self.classic_assignment(member, member.assignment.assigned, topics),
                                 protocol_type, protocol_name)

    def classic_heartbeat(self, member_id: str, instance_id: str | None, generation_id: int,
                          now_ms: float) -> tuple[int, str | None]:
        """A Heartbeat (Kafka's `classicGroupHeartbeatToConsumerGroup`): REBALANCE_IN_PROGRESS
        when the group epoch moved past the member's, when it must revoke partitions, or when
        partitions it waits for were released: it joins again to reconcile."""
        try:
            member = self._classic_member(member_id, instance_id)
            self._check_generation(member, generation_id)
            member.session_deadline_ms = now_ms + self._session_timeout(member)
            state = member.assignment.state
            if (member.member_epoch < self.group_epoch or state is MemberState.UNREVOKED_PARTITIONS
                    or (state is MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(member))):
                self._must_rejoin(member, now_ms, f"A new rebalance is triggered in group {self.group_id} and "
                                  f"member {member.member_id} should rejoin to catch up.")
        except HeartbeatError as exc:
            return exc.code, str(exc)
        return NONE, None

    def _waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Kafka's `waitingOnUnreleasedPartition`: a partition of its target another member still holds."""
        held = self._owned_elsewhere(member.member_id)
        assigned = member.assignment.assigned
        return any(held(t, p) for t, ps in self.target.get(member.member_id, {}).items() for p in ps
                   if p not in assigned.get(t, frozenset()))

    def classic_leave(self, members: Iterable[tuple[str, str | None]],
                      topics: Mapping[str, TopicMeta]) -> tuple[list[int], list[str], list[GroupRecord]]:
        """A LeaveGroup (Kafka's `classicGroupLeaveToConsumerGroup`): (error per member, the member
        ids removed, records). One group epoch bump for all who left."""
        out: list[GroupRecord] = []
        codes: list[int] = []
        removed: list[str] = []
        for member_id, instance_id in members:
            try:
                if instance_id is None:
                    member = self._classic_member(member_id, None)
                else:
                    static = self.static_member(instance_id)
                    if static is None:
                        raise HeartbeatError(UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    # An admin may remove a static member by its instance id alone.
                    member = self._classic_member(member_id or static.member_id, instance_id)
            except HeartbeatError as exc:
                codes.append(exc.code)
                continue
            self._remove_records(member.member_id, out)
            self._drop_unused_regexes([member.metadata.subscribed_topic_regex], out)
            removed.append(member.member_id)
            codes.append(NONE)
        if removed:
            self._bump_after_leaving(topics, out)
        return codes, removed, out

    # --- the conversions ---------------------------------------------------------------------
    def _downgrade_allowed(self, leaving: str) -> bool:
        """Kafka's `validateOnlineDowngradeWithFencedMembers`: `leaving` is the last member on the
        consumer protocol, classic members remain, the policy allows a downgrade and they fit
        in a classic group."""
        member = self.members.get(leaving)
        others = [m for m in self.members.values() if m.member_id != leaving]
        return (member is not None and not member.uses_classic and bool(others)
                and all(m.uses_classic for m in others) and downgrade_enabled(self.migration_policy)
                and len(others) <= self.classic_max_size)

    def _all_classic_downgradable(self) -> bool:
        return (bool(self.members) and all(m.uses_classic for m in self.members.values())
                and downgrade_enabled(self.migration_policy) and len(self.members) <= self.classic_max_size)

    def _classic_members(self, leaving: str | None, topics: Mapping[str, TopicMeta]) -> list[Member]:
        """The classic group's members after a downgrade (Kafka's `ClassicGroup.fromConsumerGroup`):
        each keeps its JoinGroup protocols and gets its target assignment."""
        out = []
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            classic = m.metadata.classic
            if m.member_id == leaving or classic is None:
                continue
            out.append(Member(
                m.member_id, m.metadata.client_id, m.metadata.client_host, classic.session_timeout_ms,
                m.metadata.rebalance_timeout_ms, PROTOCOL_TYPE, classic.protocols, m.instance_id,
                assignment=self.classic_assignment(m, self.target.get(m.member_id, {}), topics)))
        return out

    def upgrade_from(self, classic: GroupState, topics: Mapping[str, TopicMeta], now_ms: float) -> list[GroupRecord]:
        """Take over a non-empty classic group's members (Kafka's `ConsumerGroup.fromClassicGroup`):
        each keeps its last assignment, as its target too, at the classic generation, Stable;
        the records are Kafka's `createConsumerGroupRecords`. Raises HeartbeatError
        (GROUP_ID_NOT_FOUND) when the group cannot be upgraded."""
        refusal = upgrade_refusal(classic, self.migration_policy, self.max_size)
        if refusal is not None:
            raise HeartbeatError(GROUP_ID_NOT_FOUND, refusal)
        gid, generation = classic.group_id, classic.generation_id
        members: list[tuple[Member, MemberMetadata, Partitions]] = []
        for cm in sorted(classic.members.values(), key=lambda m: m.member_id):
            try:
                assignment = decode_assignment(cm.assignment)
                # A group still in its first join has no protocol yet: the member's first one.
                raw = cm.metadata_for(classic.protocol_name) or (cm.protocols[0][1] if cm.protocols else b"")
                subscription = decode_subscription(raw)
            except ValueError:
                raise HeartbeatError(GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group "
                                     "because the embedded consumer protocol is malformed.") from None
            if assignment.user_data:
                raise HeartbeatError(GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid} to consumer group "
                                     "because an unsupported custom assignor is in use. Please refer to the "
                                     "documentation or switch to a default assignor before re-attempting the upgrade.")
            metadata = MemberMetadata(
                cm.group_instance_id, subscription.rack_id, cm.client_id, cm.client_host,
                tuple(sorted(set(subscription.topics))), cm.rebalance_timeout_ms,
                classic=ClassicMemberMetadata(cm.session_timeout_ms, tuple(cm.protocols)))
            members.append((cm, metadata, self._topic_ids(topics, assignment.partitions)))
        out: list[GroupRecord] = []
        for cm, metadata, _ in members:
            self._write(out, MemberMetadataRecord(cm.member_id, metadata))
        self._write(out, GroupEpochRecord(generation, self._metadata_hash(topics)))
        for cm, _, partitions in members:
            self._write(out, TargetAssignmentMemberRecord(cm.member_id, partitions))
        self._write(out, TargetAssignmentEpochRecord(generation))
        for cm, _, partitions in members:
            self._write(out, CurrentAssignmentRecord(cm.member_id, MemberAssignment(
                generation, generation, MemberState.STABLE, partitions, {})))
        self.offsets.update(classic.offsets)
        for cm, _, _ in members:
            self.members[cm.member_id].session_deadline_ms = now_ms + cm.session_timeout_ms
        return out


def upgrade_enabled(policy: str) -> bool:
    return policy in ("upgrade", "bidirectional")


def downgrade_enabled(policy: str) -> bool:
    return policy in ("downgrade", "bidirectional")


def upgrade_refusal(classic: GroupState, policy: str, consumer_max_size: int) -> str | None:
    """Kafka's `validateOnlineUpgrade` for a non-empty classic group a ConsumerGroupHeartbeat
    joins: the message of its GROUP_ID_NOT_FOUND, or None when it may be upgraded."""
    gid = classic.group_id
    if not upgrade_enabled(policy):
        return f"Cannot upgrade classic group {gid} to consumer group because online upgrade is disabled."
    if classic.protocol_type != PROTOCOL_TYPE:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group does not use the "
                "consumer embedded protocol.")
    if len(classic.members) > consumer_max_size:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds the "
                "consumer group maximum size.")
    return None


def _subscription_version(metadata: bytes) -> int:
    return int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0


@dataclass(frozen=True)
class ClassicJoin:
    """A JoinGroup request to a consumer group."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = False


@dataclass(frozen=True)
class ClassicJoinResult:
    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_name: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class ClassicSyncResult:
    error_code: int
    error_message: str | None = None
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
