"""A share group's membership (KIP-932's ShareGroupHeartbeat), as a pure state machine.

The coordinator shell will own the clock, the metadata image and `__consumer_offsets`;
this core takes `now_ms` and the topics (name -> partition count) on every call and
returns the answer owed. Kafka's `GroupMetadataManager.shareGroupHeartbeat` rules:

Group states (ShareGroupDescribe's names)::

    Empty --a member joins (epoch 0)--> Stable --the last member leaves or times out--> Empty
    (Dead: deleted by the shell, never reached here)

A new group starts at group epoch 1 and target assignment epoch 1 (Kafka 4.4's `ModernGroup`),
in memory only: its first member's join writes epoch 2.

A member's epoch::

    (new) --heartbeat epoch 0--> member epoch = target assignment epoch --heartbeat--> ...
      ... --heartbeat epoch -1 (leave), or no heartbeat for group.share.session.timeout.ms--> (gone)

- The group epoch is bumped when a member joins or leaves, when a member's subscribed
  topics change, when the metadata of the subscribed topics changes, and when more of
  their partitions became assignable (share state initialized; Kafka's
  `initializedAssignmentPending`). The metadata is Kafka 4.4's subscribed-topics metadata
  hash (KIP-1101, broker/group/metadata_hash.py: topic ids, names, partition counts,
  racks), kept in the ShareGroupMetadata record with the epoch: partitions added, a topic
  deleted or recreated, a rack moved bump the epoch at the next heartbeat. A group loaded
  from a record without the hash (0: raftka before it, Kafka 4.0) therefore bumps once at
  its first heartbeat, as on Kafka 4.4. A leave or an expiry writes the next epoch with the
  hash of the subscriptions that remain (Kafka's `shareGroupFenceMember`). When the group
  epoch passes the target assignment's epoch, the target is recomputed with
  `share_assignor.assign` (Kafka's `simple` assignor) at the group epoch. The last
  member's leave moves the target assignment epoch to the new group epoch too.
- Share groups have no revocation phase (a partition may have several readers), so a
  member reconciles at once: on any heartbeat with an older epoch it moves to the target
  assignment epoch and its target partitions. Other members learn theirs on their next
  heartbeat (every `group.share.heartbeat.interval.ms`, 5 s).
- A leave is answered with member epoch -1 and nothing else. An unknown group with
  epoch > 0 is the shell's GROUP_ID_NOT_FOUND, as is a group id taken by another type.
- The response carries the assignment when the member joined (epoch 0) or its
  partitions changed; otherwise none (null on the wire).
- Epoch checks (`throwIfShareGroupMemberEpochIsInvalid`): a greater epoch than the
  coordinator's, or a smaller one that is not the member's previous epoch (a lost
  response), is FENCED_MEMBER_EPOCH; an unknown member with epoch > 0 is UNKNOWN_MEMBER_ID;
  a new member beyond `group.share.max.size` (200) is GROUP_MAX_SIZE_REACHED.
- Request checks (INVALID_REQUEST, Kafka 4.4's order and messages): an empty member id,
  group id or rack id, a null or empty subscription on join, an epoch below -1.
- A member gone (left or timed out) leaves its records to be released by the
  share-partitions (`SharePartitionState.release_member`): `leave` and `expire_sessions`
  name it.

Persistence: `records()` is the group as Kafka's `__consumer_offsets` records (the
ShareGroup* records of broker/group/share_group_records.py, keyed by record type and
member); the shell takes it before and after a change and writes `changes(before, after)`
(tombstones of the members gone first, then the new values in Kafka's order: member
metadata, group epoch, target member, target epoch, current assignment, state partitions).
`replay` rebuilds a group from them after a coordinator restart or move; sessions are
not stored and start again (`restart_sessions`), as in Kafka.

Share-state initialization (Kafka's ShareGroupStatePartitionMetadata): a partition is
assignable once its share state is initialized through the persister. `to_initialize`
names the subscribed partitions not initialized yet with the start offset to initialize
them at (Kafka's `buildInitializeShareGroupStateRequest`: -1, "resolve
share.auto.offset.reset on first use", for a topic the group sees for the first time; 0 for
a new partition of a topic it already has, so that records produced to it before it is
first read are delivered); the shell marks them `initializing`, calls the persister,
then marks those that succeeded `initialized`. `assignable` is what the assignor may hand
out: for each topic the partitions 0..n-1 that are all initialized.

Not modelled here: the asynchronous assignment of `share.assignment.interval.ms`, and the
per-group config overrides (the caller passes the effective `ShareGroupConfig`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from raftka.broker.group import share_assignor
from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.consumer_group_state import INITIAL_GROUP_EPOCH
from raftka.broker.group.metadata_hash import subscription_hash
from raftka.broker.group.share_assignor import TopicPartition
from raftka.client.protocol import ErrorCode

NONE = int(ErrorCode.NONE)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
UNKNOWN_MEMBER_ID = int(ErrorCode.UNKNOWN_MEMBER_ID)
FENCED_MEMBER_EPOCH = int(ErrorCode.FENCED_MEMBER_EPOCH)
GROUP_MAX_SIZE_REACHED = int(ErrorCode.GROUP_MAX_SIZE_REACHED)

LEAVE_GROUP_MEMBER_EPOCH = -1
ASSIGNOR_NAME = "simple"

# Kafka's GroupCoordinatorConfig defaults for share groups.
SESSION_TIMEOUT_MS_DEFAULT = 45_000     # group.share.session.timeout.ms
HEARTBEAT_INTERVAL_MS_DEFAULT = 5_000   # group.share.heartbeat.interval.ms
MAX_SIZE_DEFAULT = 200                  # group.share.max.size


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = SESSION_TIMEOUT_MS_DEFAULT
    heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS_DEFAULT
    max_size: int = MAX_SIZE_DEFAULT


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """ShareGroupHeartbeat's request fields (None: not sent, i.e. unchanged)."""

    member_id: str
    member_epoch: int
    subscribed_topic_names: tuple[str, ...] | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: int = NONE
    message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: frozenset[TopicPartition] | None = None  # None: unchanged, not sent


# --- the group's records (Kafka's ShareGroup* records; None is a tombstone) -------------------

@dataclass(frozen=True, slots=True)
class MemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class StatePartitions:
    initializing: frozenset[TopicPartition]
    initialized: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class MemberMetadataRecord:  # ShareGroupMemberMetadata (10)
    member_id: str
    metadata: MemberMetadata | None


@dataclass(frozen=True, slots=True)
class GroupEpochRecord:  # ShareGroupMetadata (11)
    epoch: int | None
    metadata_hash: int = 0  # the subscribed topics' metadata hash (KIP-1101); 0 in older records


@dataclass(frozen=True, slots=True)
class TargetEpochRecord:  # ShareGroupTargetAssignmentMetadata (12)
    epoch: int | None


@dataclass(frozen=True, slots=True)
class TargetMemberRecord:  # ShareGroupTargetAssignmentMember (13)
    member_id: str
    partitions: frozenset[TopicPartition] | None


@dataclass(frozen=True, slots=True)
class CurrentAssignmentRecord:  # ShareGroupCurrentMemberAssignment (14)
    member_id: str
    assignment: CurrentAssignment | None


@dataclass(frozen=True, slots=True)
class StatePartitionsRecord:  # ShareGroupStatePartitionMetadata (15)
    value: StatePartitions | None


ShareGroupRecord = (MemberMetadataRecord | GroupEpochRecord | TargetEpochRecord | TargetMemberRecord
                    | CurrentAssignmentRecord | StatePartitionsRecord)
RecordKey = tuple[int, str]  # (Kafka's record type, member id or "")

# Kafka's order within one write: values, then the group-level tombstones last.
_VALUE_ORDER = (10, 11, 13, 12, 14, 15)
_MEMBER_TOMBSTONE_ORDER = (14, 13, 10)


def changes(before: Mapping[RecordKey, ShareGroupRecord],
            after: Mapping[RecordKey, ShareGroupRecord]) -> list[ShareGroupRecord]:
    """The records that turn the group `before` into the group `after` (both `records()`):
    the tombstones of the members gone, then the values that changed, in Kafka's order."""
    out: list[ShareGroupRecord] = []
    gone = sorted({member for kind, member in before if member and (kind, member) not in after})
    for member in gone:
        for kind in _MEMBER_TOMBSTONE_ORDER:
            if (kind, member) in before:
                out.append(_tombstone(kind, member))
    for kind in _VALUE_ORDER:
        for key in sorted(k for k in after if k[0] == kind):
            if before.get(key) != after[key]:
                out.append(after[key])
    for kind in (12, 15, 11):  # group-level records gone (only when the whole group is)
        if (kind, "") in before and (kind, "") not in after:
            out.append(_tombstone(kind, ""))
    return out


def _tombstone(kind: int, member_id: str) -> ShareGroupRecord:
    match kind:
        case 10:
            return MemberMetadataRecord(member_id, None)
        case 11:
            return GroupEpochRecord(None)
        case 12:
            return TargetEpochRecord(None)
        case 13:
            return TargetMemberRecord(member_id, None)
        case 14:
            return CurrentAssignmentRecord(member_id, None)
    return StatePartitionsRecord(None)


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    subscribed_topic_names: frozenset[str] = frozenset()
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: frozenset[TopicPartition] = frozenset()
    session_deadline_ms: int = 0


@dataclass(slots=True)
class ShareGroupState:
    group_id: str
    config: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    group_epoch: int = INITIAL_GROUP_EPOCH
    assignment_epoch: int = INITIAL_GROUP_EPOCH
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    # The subscribed topics' metadata hash the group epoch was last set with (KIP-1101).
    metadata_hash: int = 0
    # The assignable partition counts of the subscribed topics when the group epoch was last
    # set (in memory only: more initialized partitions bump the epoch).
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    # Share-state initialization (ShareGroupStatePartitionMetadata).
    initializing: set[TopicPartition] = field(default_factory=set)
    initialized: set[TopicPartition] = field(default_factory=set)
    deleted: bool = False  # replayed a group tombstone

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def heartbeat(self, request: Heartbeat, partitions: Mapping[str, int], now_ms: int,
                  topics: Mapping[str, TopicMeta]) -> HeartbeatResponse:
        """Answer one ShareGroupHeartbeat. `partitions`: topic name -> partition count (the
        assignable partitions of the topics that exist); `topics`: the metadata image's topics
        (what the metadata hash is computed from)."""
        invalid = self.request_error(request)
        if invalid:
            return HeartbeatResponse(INVALID_REQUEST, invalid, request.member_id, request.member_epoch)
        if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if request.member_id not in self.members:
                return self._error(UNKNOWN_MEMBER_ID, request, f"member {request.member_id!r} is not in group "
                                                              f"{self.group_id!r}")
            self._remove(request.member_id, partitions, topics)
            return HeartbeatResponse(member_id=request.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
        member = self.members.get(request.member_id)
        if member is None:
            if request.member_epoch != 0:
                return self._error(UNKNOWN_MEMBER_ID, request, f"member {request.member_id!r} is not in group "
                                                              f"{self.group_id!r}")
            if len(self.members) >= self.config.max_size:
                return self._error(GROUP_MAX_SIZE_REACHED, request, f"the share group has reached its maximum "
                                                                   f"capacity of {self.config.max_size} members")
            member = ShareMember(request.member_id)
            bump = True
        else:
            fenced = _fenced(member, request.member_epoch)
            if fenced:
                return self._error(FENCED_MEMBER_EPOCH, request, fenced)
            bump = False
        if request.subscribed_topic_names is not None:
            subscribed = frozenset(request.subscribed_topic_names)
            bump |= subscribed != member.subscribed_topic_names
            member.subscribed_topic_names = subscribed
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        member.client_id, member.client_host = request.client_id, request.client_host
        self.members[member.member_id] = member
        metadata = self._subscription_metadata(partitions)
        metadata_hash = subscription_hash(self.subscribed_topics(), topics)
        if bump or metadata != self.subscription_metadata or metadata_hash != self.metadata_hash:
            self.subscription_metadata, self.metadata_hash = metadata, metadata_hash
            self.group_epoch += 1
        if self.group_epoch > self.assignment_epoch:
            self._update_target(partitions)
        before = member.assignment
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
            member.assignment = self.target.get(member.member_id, frozenset())
        member.session_deadline_ms = now_ms + self.config.session_timeout_ms
        send = request.member_epoch == 0 or member.assignment != before
        return HeartbeatResponse(member_id=member.member_id, member_epoch=member.member_epoch,
                                 heartbeat_interval_ms=self.config.heartbeat_interval_ms,
                                 assignment=member.assignment if send else None)

    def next_session_deadline(self) -> int | None:
        return min((m.session_deadline_ms for m in self.members.values()), default=None)

    def expire_sessions(self, partitions: Mapping[str, int], now_ms: int,
                        topics: Mapping[str, TopicMeta]) -> list[str]:
        """Remove the members whose session ran out by `now_ms`; their ids, in order."""
        gone = sorted(m.member_id for m in self.members.values() if m.session_deadline_ms <= now_ms)
        for member_id in gone:
            self._remove(member_id, partitions, topics)
        return gone

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    # -- share-state initialization ----------------------------------------------------------

    def to_initialize(self, topics: Iterable[str], partitions: Mapping[str, int]) -> dict[TopicPartition, int]:
        """The partitions of `topics` (existing ones) whose share state is not initialized,
        each with the start offset to initialize it at."""
        known = {t for t, _ in self.initialized}
        return {(t, p): (0 if t in known else -1)
                for t in sorted(set(topics)) if t in partitions for p in range(partitions[t])
                if (t, p) not in self.initialized}

    def mark_initializing(self, tps: Iterable[TopicPartition]) -> None:
        self.initializing.update(tps)

    def mark_initialized(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        self.initializing -= tps
        self.initialized |= tps

    def forget_topics(self, existing: Mapping[str, int]) -> None:
        """Drop the initialization state of partitions that no longer exist (a deleted topic)."""
        def alive(tp: TopicPartition) -> bool:
            return tp[1] < existing.get(tp[0], 0)
        self.initializing = {tp for tp in self.initializing if alive(tp)}
        self.initialized = {tp for tp in self.initialized if alive(tp)}

    def offsets_reset(self, initialized: Iterable[TopicPartition] = (),
                      deleted: Iterable[TopicPartition] = ()) -> int:
        """AlterShareGroupOffsets (partitions re-initialized) or DeleteShareGroupOffsets (their
        state deleted) on an empty group: the group epoch is bumped, so a share partition
        holding the old state epoch is fenced; the new epoch (the state epoch to use)."""
        self.group_epoch += 1
        gone = set(deleted)
        self.initializing -= gone
        self.initialized -= gone
        self.mark_initialized(initialized)
        return self.group_epoch

    def assignable(self, partitions: Mapping[str, int]) -> dict[str, int]:
        """topic -> n: its partitions 0..n-1 are initialized (what the assignor may hand out)."""
        out = {}
        for topic, count in partitions.items():
            n = 0
            while n < count and (topic, n) in self.initialized:
                n += 1
            if n:
                out[topic] = n
        return out

    # -- records -------------------------------------------------------------------------------

    def records(self) -> dict[RecordKey, ShareGroupRecord]:
        """The group as its live `__consumer_offsets` records (empty before the first join).
        The epochs are written from the first join on (Kafka's first ShareGroupMetadata is the
        join's, with the metadata hash), not for share state initialized before it."""
        out: dict[RecordKey, ShareGroupRecord] = {}
        if self.group_epoch != INITIAL_GROUP_EPOCH:
            out[(11, "")] = GroupEpochRecord(self.group_epoch, self.metadata_hash)
            out[(12, "")] = TargetEpochRecord(self.assignment_epoch)
        for m in self.members.values():
            out[(10, m.member_id)] = MemberMetadataRecord(m.member_id, MemberMetadata(
                m.rack_id, m.client_id, m.client_host, tuple(sorted(m.subscribed_topic_names))))
            out[(14, m.member_id)] = CurrentAssignmentRecord(m.member_id, CurrentAssignment(
                m.member_epoch, m.previous_member_epoch, m.assignment))
        for member_id, tps in self.target.items():
            out[(13, member_id)] = TargetMemberRecord(member_id, tps)
        if self.initializing or self.initialized:
            out[(15, "")] = StatePartitionsRecord(StatePartitions(frozenset(self.initializing),
                                                                  frozenset(self.initialized)))
        return out

    def deletion_records(self) -> list[ShareGroupRecord]:
        """The tombstones that delete the group (DeleteGroups)."""
        return changes(self.records(), {})

    def replay(self, record: ShareGroupRecord) -> None:
        """Apply one record read back from `__consumer_offsets` (a coordinator's load)."""
        match record:
            case GroupEpochRecord(epoch, metadata_hash):
                if epoch is None:
                    self.deleted = True
                    self.group_epoch = self.assignment_epoch = INITIAL_GROUP_EPOCH
                    self.metadata_hash = 0
                    self.members.clear()
                    self.target.clear()
                    self.initializing.clear()
                    self.initialized.clear()
                else:
                    self.deleted = False
                    self.group_epoch, self.metadata_hash = epoch, metadata_hash
            case TargetEpochRecord(epoch):
                self.assignment_epoch = INITIAL_GROUP_EPOCH if epoch is None else epoch
            case MemberMetadataRecord(member_id, None):
                self.members.pop(member_id, None)
            case MemberMetadataRecord(member_id, meta):
                assert meta is not None
                member = self.members.setdefault(member_id, ShareMember(member_id))
                member.rack_id, member.client_id, member.client_host = meta.rack_id, meta.client_id, meta.client_host
                member.subscribed_topic_names = frozenset(meta.subscribed_topic_names)
            case TargetMemberRecord(member_id, None):
                self.target.pop(member_id, None)
            case TargetMemberRecord(member_id, tps):
                assert tps is not None
                self.target[member_id] = tps
            case CurrentAssignmentRecord(member_id, None):
                pass  # the member's metadata tombstone removes it
            case CurrentAssignmentRecord(member_id, a):
                assert a is not None
                member = self.members.setdefault(member_id, ShareMember(member_id))
                member.member_epoch, member.previous_member_epoch = a.member_epoch, a.previous_member_epoch
                member.assignment = a.partitions
            case StatePartitionsRecord(None):
                self.initializing.clear()
                self.initialized.clear()
                if self.group_epoch == INITIAL_GROUP_EPOCH:  # a group no member joined: deleted
                    self.deleted = True
            case StatePartitionsRecord(value):
                assert value is not None
                self.deleted = False
                self.initializing, self.initialized = set(value.initializing), set(value.initialized)

    def restart_sessions(self, partitions: Mapping[str, int], now_ms: int) -> None:
        """After a load: every member's session starts again, and the assignable partitions are
        taken as they are now (the metadata hash is the stored one: the first heartbeat bumps
        the epoch if the subscribed topics changed meanwhile, or the record had none)."""
        for m in self.members.values():
            m.session_deadline_ms = now_ms + self.config.session_timeout_ms
        self.subscription_metadata = self._subscription_metadata(partitions)

    # -- internals -------------------------------------------------------------------------

    def request_error(self, request: Heartbeat) -> str:
        """Kafka 4.4's `throwIfShareGroupHeartbeatRequestIsInvalid`, in its order and words."""
        if not request.member_id.strip():
            return "MemberId can't be empty."
        if not self.group_id.strip():
            return "GroupId can't be empty."
        if request.rack_id is not None and not request.rack_id.strip():
            return "RackId can't be empty."
        if request.member_epoch == 0 and not request.subscribed_topic_names:
            return "SubscribedTopicNames must be set in first request."
        if request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            return "MemberEpoch is invalid."
        return ""

    def _error(self, code: int, request: Heartbeat, message: str) -> HeartbeatResponse:
        return HeartbeatResponse(code, message, request.member_id, request.member_epoch)

    def _remove(self, member_id: str, partitions: Mapping[str, int], topics: Mapping[str, TopicMeta]) -> None:
        del self.members[member_id]
        self.target.pop(member_id, None)
        self.subscription_metadata = self._subscription_metadata(partitions)
        self.metadata_hash = subscription_hash(self.subscribed_topics(), topics)
        self.group_epoch += 1
        if not self.members:  # Kafka's shareGroupFenceMember: the last member's leave moves the target too
            self.assignment_epoch = self.group_epoch

    def _subscription_metadata(self, partitions: Mapping[str, int]) -> dict[str, int]:
        subscribed = {t for m in self.members.values() for t in m.subscribed_topic_names}
        return {t: partitions[t] for t in sorted(subscribed) if t in partitions}

    def _update_target(self, partitions: Mapping[str, int]) -> None:
        subscriptions = {m.member_id: m.subscribed_topic_names for m in self.members.values()}
        self.target = share_assignor.assign(subscriptions, partitions, self.target)
        self.assignment_epoch = self.group_epoch


def _fenced(member: ShareMember, epoch: int) -> str:
    """Why `epoch` is fenced for this member, or ''."""
    if epoch > member.member_epoch:
        return (f"the share group member has a greater member epoch ({epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}); it must abandon all its partitions and rejoin")
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        return (f"the share group member has a smaller member epoch ({epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}); it must abandon all its partitions and rejoin")
    return ""
