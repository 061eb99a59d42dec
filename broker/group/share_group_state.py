"""A share group's membership (KIP-932's ShareGroupHeartbeat), as a pure state machine.

The coordinator shell will own the clock, the metadata image and `__consumer_offsets`;
this core takes `now_ms` and the topics (name -> partition count) on every call and
returns the answer owed. Kafka's `GroupMetadataManager.shareGroupHeartbeat` rules:

Group states (ShareGroupDescribe's names)::

    Empty --a member joins (epoch 0)--> Stable --the last member leaves or times out--> Empty
    (Dead: deleted by the shell, never reached here)

A member's epoch::

    (new) --heartbeat epoch 0--> member epoch = target assignment epoch --heartbeat--> ...
      ... --heartbeat epoch -1 (leave), or no heartbeat for group.share.session.timeout.ms--> (gone)

- The group epoch is bumped when a member joins or leaves, when a member's subscribed
  topics change, and when the partition counts of the subscribed topics change (the
  subscription metadata). When it passes the target assignment's epoch, the target is
  recomputed with `share_assignor.assign` (Kafka's `simple` assignor) at the group epoch.
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

Not modelled here: persistence (ShareGroupMemberMetadata, ShareGroupMetadata, target
assignment records in `__consumer_offsets`), the share-state initialization that makes a
partition assignable (the caller passes only assignable partitions), the asynchronous
assignment of `share.assignment.interval.ms`, and the per-group config overrides (the
caller passes the effective `ShareGroupConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from raftka.broker.group import share_assignor
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
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    # Partition counts of the subscribed topics when the group epoch was last set.
    subscription_metadata: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def heartbeat(self, request: Heartbeat, partitions: Mapping[str, int], now_ms: int) -> HeartbeatResponse:
        """Answer one ShareGroupHeartbeat. `partitions`: topic name -> partition count (the
        assignable partitions of the topics that exist)."""
        invalid = self._invalid(request)
        if invalid:
            return HeartbeatResponse(INVALID_REQUEST, invalid, request.member_id, request.member_epoch)
        if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if request.member_id not in self.members:
                return self._error(UNKNOWN_MEMBER_ID, request, f"member {request.member_id!r} is not in group "
                                                              f"{self.group_id!r}")
            self._remove(request.member_id, partitions)
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
            topics = frozenset(request.subscribed_topic_names)
            bump |= topics != member.subscribed_topic_names
            member.subscribed_topic_names = topics
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        member.client_id, member.client_host = request.client_id, request.client_host
        self.members[member.member_id] = member
        metadata = self._subscription_metadata(partitions)
        if bump or metadata != self.subscription_metadata:
            self.subscription_metadata = metadata
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

    def expire_sessions(self, partitions: Mapping[str, int], now_ms: int) -> list[str]:
        """Remove the members whose session ran out by `now_ms`; their ids, in order."""
        gone = sorted(m.member_id for m in self.members.values() if m.session_deadline_ms <= now_ms)
        for member_id in gone:
            self._remove(member_id, partitions)
        return gone

    # -- internals -------------------------------------------------------------------------

    def _invalid(self, request: Heartbeat) -> str:
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

    def _remove(self, member_id: str, partitions: Mapping[str, int]) -> None:
        del self.members[member_id]
        self.target.pop(member_id, None)
        self.subscription_metadata = self._subscription_metadata(partitions)
        self.group_epoch += 1

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
