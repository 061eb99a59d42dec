"""One consumer group's membership, as a pure state machine (Kafka's classic protocol).

Driven by requests (`join`, `sync`, `heartbeat`, `leave`, `validate_commit`)
and timers (`tick(now_ms)` at `next_deadline_ms()`); it never reads a clock, never sleeps and
does no I/O. JoinGroup and SyncGroup answers are often delayed until other
members act, so the methods return `Reply` values: answers owed to members
whose requests are parked in the caller (the coordinator shell), keyed by
member id and kind ("join" / "sync").

States (Kafka's names, shown by DescribeGroups)::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable --join/leave/expiry--> PreparingRebalance
    PreparingRebalance --everyone gone--> Empty;  DeleteGroups: Empty --> Dead

Static membership (KIP-345): a member joining with a `group.instance.id` skips
MEMBER_ID_REQUIRED. When a known instance id joins again with no member id (a
restarted process), it takes over the old member's place under a new member id
— in a Stable group without a rebalance if its subscription is unchanged (it
gets its previous assignment back from SyncGroup) — and the old member id is
fenced: any request carrying the instance id with another member id gets
FENCED_INSTANCE_ID. Static members send no LeaveGroup on shutdown, so they leave
by session timeout; a rebalance does not drop a static member that has not
rejoined yet (its session timeout or the sync deadline does). LeaveGroup v3 may
name a static member by instance id alone (admin removal).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from raftka.broker.invariants import checked
from raftka.client.group_protocol import PROTOCOL_TYPE, decode_subscription
from raftka.client.protocol import ErrorCode

NONE = int(ErrorCode.NONE)
UNKNOWN_MEMBER_ID = int(ErrorCode.UNKNOWN_MEMBER_ID)
ILLEGAL_GENERATION = int(ErrorCode.ILLEGAL_GENERATION)
REBALANCE_IN_PROGRESS = int(ErrorCode.REBALANCE_IN_PROGRESS)
MEMBER_ID_REQUIRED = int(ErrorCode.MEMBER_ID_REQUIRED)
INCONSISTENT_GROUP_PROTOCOL = int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
COORDINATOR_NOT_AVAILABLE = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
FENCED_INSTANCE_ID = int(ErrorCode.FENCED_INSTANCE_ID)


class GroupPhase(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    assignment: bytes = b""
    deadline_ms: float = 0.0
    awaiting_join: bool = False  # a JoinGroup is parked until the join phase completes
    awaiting_sync: bool = False  # a SyncGroup is parked until the leader's assignment arrives
    synced: bool = False  # sent SyncGroup in this generation

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


@dataclass(frozen=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinMember, ...] = ()
    # JoinGroup v9+ (KIP-814): a static leader that rejoined a Stable group gets the members
    # but must not compute a new assignment.
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    # SyncGroup v5+ (KIP-559): the group's protocol type and name, on success only.
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class Reply:
    """An answer owed to the parked `kind` request ("join" or "sync") of `member_id`."""

    kind: str
    member_id: str
    result: JoinResult | SyncResult


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


def _new_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


def _subscribed_topics(protocol_type: str | None, metadata: bytes) -> object:
    """What a protocol's metadata subscribes to, for deciding whether a restarted static member
    changed anything. For the "consumer" protocol that is the topic set: owned partitions and
    generation (cooperative-sticky, Subscription v1+) naturally differ after a restart."""
    if protocol_type == PROTOCOL_TYPE:
        try:
            return frozenset(decode_subscription(metadata).topics)
        except ValueError:
            pass
    return metadata


def same_subscription(protocol_type: str | None, old: tuple[tuple[str, bytes], ...],
                      new: tuple[tuple[str, bytes], ...]) -> bool:
    """True when `new` offers the same protocols, in the same order, subscribing to the same things."""
    if [name for name, _ in old] != [name for name, _ in new]:
        return False
    return all(_subscribed_topics(protocol_type, a) == _subscribed_topics(protocol_type, b)
               for (_, a), (_, b) in zip(old, new, strict=True))


@dataclass
class GroupState:
    group_id: str
    initial_rebalance_delay_ms: int = 0
    new_member_id: Callable[[str], str] = _new_member_id
    phase: GroupPhase = GroupPhase.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, not yet joined, and when they lapse.
    pending_members: dict[str, float] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    join_deadline_ms: float = 0.0  # the rebalance timeout of the current join phase
    initial_delay_until_ms: float = 0.0  # an empty group waits this long for more members
    rebalance_started_ms: float = 0.0
    sync_deadline_ms: float = 0.0
    # Bumped when membership changes without a new generation (a static member replaced in a
    # Stable group), so the coordinator knows to persist it.
    revision: int = 0
    # When the group last changed phase, on the clock of the `now_ms` it is given (Kafka's
    # currentStateTimestamp; its metadata record stores it as wall-clock time): an Empty group's
    # offsets expire counting from it (broker/group/offset_expiration.py).
    state_timestamp_ms: float | None = None

    # --- queries -----------------------------------------------------------
    @property
    def is_empty(self) -> bool:
        return not self.members

    def describe_phase(self) -> str:
        return self.phase.value

    def _check_invariants(self) -> None:
        """Self-checks after every request and tick (AssertionError names the broken one): an
        Empty or Dead group has no members; a group with members has one of them as leader
        (and none without); no JoinGroup is parked in a Stable group, and SyncGroups are
        parked only while the leader's assignment is awaited (CompletingRebalance)."""
        where = f"group {self.group_id!r} ({self.phase.value}, generation {self.generation_id})"
        if self.members and self.phase in (GroupPhase.EMPTY, GroupPhase.DEAD):
            raise AssertionError(f"{where}: has members {sorted(self.members)}")
        if (self.leader_id is None) if self.members else (self.leader_id is not None):
            raise AssertionError(f"{where}: leader {self.leader_id!r} with members {sorted(self.members)}")
        if self.leader_id is not None and self.leader_id not in self.members:
            raise AssertionError(f"{where}: leader {self.leader_id!r} is not a member of {sorted(self.members)}")
        parked_join = sorted(m.member_id for m in self.members.values() if m.awaiting_join)
        if parked_join and self.phase is GroupPhase.STABLE:
            raise AssertionError(f"{where}: JoinGroup parked for {parked_join}")
        parked_sync = sorted(m.member_id for m in self.members.values() if m.awaiting_sync)
        if parked_sync and self.phase is not GroupPhase.COMPLETING_REBALANCE:
            raise AssertionError(f"{where}: SyncGroup parked for {parked_sync}")

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        """The member id currently registered for `group_instance_id` (None if unknown)."""
        if group_instance_id is None:
            return None
        for member in self.members.values():
            if member.group_instance_id == group_instance_id:
                return member.member_id
        return None

    def _fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A request naming a static instance under another member id comes from a fenced
        (replaced) process: KIP-345 tells it to shut down instead of rejoining."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def _supported_protocols(self) -> set[str] | None:
        if not self.members:
            return None
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets)

    def _accepts(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        if not protocols or not protocol_type:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        supported = self._supported_protocols() or set()
        return any(name in supported for name, _ in protocols)

    def _select_protocol(self) -> str | None:
        """Each member votes for its first preference among the protocols all support (Kafka's rule)."""
        supported = self._supported_protocols()
        if not supported:
            return None
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name, _ in member.protocols if name in supported)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        order = [name for name, _ in first.protocols]
        return max(votes, key=lambda name: (votes[name], -order.index(name) if name in order else 0))

    # --- JoinGroup -----------------------------------------------------------
    @checked
    def join(self, member_id: str, *, client_id: str, client_host: str, session_timeout_ms: int,
             rebalance_timeout_ms: int, protocol_type: str, protocols: Iterable[tuple[str, bytes]],
             now_ms: float, require_known_member_id: bool = False,
             group_instance_id: str | None = None,
             support_skipping_assignment: bool = False) -> tuple[str, list[Reply]]:
        """Handle a JoinGroup. Returns the member id whose "join" reply the caller waits for
        (it may already be among the replies) and every reply now owed."""
        protocols = tuple((name, bytes(meta)) for name, meta in protocols)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has no rebalance timeout
            rebalance_timeout_ms = session_timeout_ms
        if self.phase is GroupPhase.DEAD:
            return member_id, [Reply("join", member_id, JoinResult(COORDINATOR_NOT_AVAILABLE, member_id))]
        if not self._accepts(protocol_type, protocols):
            return member_id, [Reply("join", member_id, JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id))]
        if not member_id:
            new_id = self.new_member_id(group_instance_id or client_id)
            if group_instance_id is not None:
                old_id = self.static_member_id(group_instance_id)
                if old_id is not None:
                    return new_id, self._replace_static_member(
                        old_id, new_id, client_id=client_id, client_host=client_host,
                        session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
                        protocols=protocols, now_ms=now_ms,
                        support_skipping_assignment=support_skipping_assignment)
                # A static member is known by its instance id: no MEMBER_ID_REQUIRED round trip.
            elif require_known_member_id:
                self.pending_members[new_id] = now_ms + session_timeout_ms
                return new_id, [Reply("join", new_id, JoinResult(MEMBER_ID_REQUIRED, new_id))]
            member_id = new_id
        elif self._fenced(member_id, group_instance_id):
            return member_id, [Reply("join", member_id, JoinResult(FENCED_INSTANCE_ID, member_id))]
        elif member_id in self.pending_members and group_instance_id is None:
            del self.pending_members[member_id]
        elif member_id not in self.members or (
                group_instance_id is not None and self.static_member_id(group_instance_id) is None):
            # An unknown id, or a static member whose instance was removed meanwhile: start afresh.
            return member_id, [Reply("join", member_id, JoinResult(UNKNOWN_MEMBER_ID, member_id))]

        replies: list[Reply] = []
        member = self.members.get(member_id)
        if member is None:
            member = Member(member_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                            protocol_type, protocols, group_instance_id)
            if not self.members:
                self.protocol_type = protocol_type
            self.members[member_id] = member
            if self.leader_id is None:
                self.leader_id = member_id
            member.awaiting_join = True
            member.deadline_ms = now_ms + session_timeout_ms
            if self.phase is GroupPhase.PREPARING_REBALANCE:
                self._extend_initial_delay(now_ms)
            else:
                replies += self._prepare_rebalance(now_ms)
            replies += self._maybe_complete_join(now_ms)
            return member_id, replies

        if member.awaiting_join:  # a retried JoinGroup replaces the parked one
            replies.append(Reply("join", member_id, JoinResult(REBALANCE_IN_PROGRESS, member_id)))
        changed = member.protocols != protocols
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.deadline_ms = now_ms + session_timeout_ms
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            member.awaiting_join = True
            replies += self._maybe_complete_join(now_ms)
        elif (self.phase is GroupPhase.COMPLETING_REBALANCE and not changed) or (
                self.phase is GroupPhase.STABLE and not changed and member_id != self.leader_id):
            # A member that lost our JoinGroup answer: give it the current generation again.
            replies.append(Reply("join", member_id, self._join_result(member_id)))
        else:
            member.awaiting_join = True
            replies += self._prepare_rebalance(now_ms)
            replies += self._maybe_complete_join(now_ms)
        return member_id, replies

    def _replace_static_member(self, old_id: str, new_id: str, *, client_id: str, client_host: str,
                               session_timeout_ms: int, rebalance_timeout_ms: int,
                               protocols: tuple[tuple[str, bytes], ...], now_ms: float,
                               support_skipping_assignment: bool = False) -> list[Reply]:
        """A known static instance joined again without a member id (its process restarted):
        the new member id takes the old one's place, keeping its assignment."""
        old = self.members.pop(old_id)
        replies: list[Reply] = []
        # Fence the old process at once if it has a request parked here.
        if old.awaiting_join:
            replies.append(Reply("join", old_id, JoinResult(FENCED_INSTANCE_ID, old_id)))
        if old.awaiting_sync:
            replies.append(Reply("sync", old_id, SyncResult(FENCED_INSTANCE_ID)))
        unchanged = same_subscription(self.protocol_type, old.protocols, protocols)
        member = dataclasses.replace(
            old, member_id=new_id, client_id=client_id, client_host=client_host,
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            protocols=protocols, deadline_ms=now_ms + session_timeout_ms, awaiting_join=False,
            awaiting_sync=False)
        self.members[new_id] = member
        previous_leader = self.leader_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.revision += 1
        if self.phase is GroupPhase.STABLE and unchanged and support_skipping_assignment:
            # JoinGroup v9+ (KIP-814): a replaced leader gets the members and SkipAssignment,
            # so that it knows the group without handing out a new assignment.
            result = self._join_result(new_id)
            return replies + [Reply("join", new_id, dataclasses.replace(
                result, skip_assignment=new_id == self.leader_id))]
        if self.phase is GroupPhase.STABLE and unchanged:
            # No rebalance: the member syncs and gets its old assignment back. The answer names
            # the previous leader id so that a replaced leader does not compute an assignment
            # that a Stable group would never hand out (Kafka does the same).
            return replies + [Reply("join", new_id, JoinResult(
                NONE, new_id, self.generation_id, self.protocol_name, previous_leader or "", ()))]
        member.awaiting_join = True
        if self.phase is not GroupPhase.PREPARING_REBALANCE:
            replies += self._prepare_rebalance(now_ms)
        return replies + self._maybe_complete_join(now_ms)

    def _extend_initial_delay(self, now_ms: float) -> None:
        if self.initial_delay_until_ms > now_ms:
            limit = self.rebalance_started_ms + self._max_rebalance_timeout()
            self.initial_delay_until_ms = min(now_ms + self.initial_rebalance_delay_ms, limit)

    def _max_rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _prepare_rebalance(self, now_ms: float) -> list[Reply]:
        replies: list[Reply] = []
        if self.phase is GroupPhase.COMPLETING_REBALANCE:
            # Members waiting for an assignment that will never come: rejoin.
            for member in self.members.values():
                if member.awaiting_sync:
                    member.awaiting_sync = False
                    replies.append(Reply("sync", member.member_id, SyncResult(REBALANCE_IN_PROGRESS)))
        was_empty = self.phase is GroupPhase.EMPTY
        self.phase = GroupPhase.PREPARING_REBALANCE
        self.state_timestamp_ms = now_ms
        self.rebalance_started_ms = now_ms
        self.join_deadline_ms = now_ms + self._max_rebalance_timeout()
        self.initial_delay_until_ms = now_ms + self.initial_rebalance_delay_ms if was_empty else now_ms
        return replies

    def _all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def _maybe_complete_join(self, now_ms: float) -> list[Reply]:
        if self.phase is not GroupPhase.PREPARING_REBALANCE:
            return []
        if not self.members:
            return self._complete_join(now_ms)
        if self._all_joined() and now_ms >= self.initial_delay_until_ms:
            return self._complete_join(now_ms)
        return []

    def _complete_join(self, now_ms: float) -> list[Reply]:
        replies: list[Reply] = []
        # Dynamic members that did not rejoin are gone; static ones stay until their session
        # expires (KIP-345: a restarting static member must not cost a rebalance).
        for member in [m for m in self.members.values()
                       if not m.awaiting_join and m.group_instance_id is None]:
            replies += self._remove_member(member.member_id)
        self.pending_members.clear()
        if self.members and not any(m.awaiting_join for m in self.members.values()):
            # Only absent static members are left: nobody could lead. Wait for them to
            # rejoin or for their sessions to expire.
            self.join_deadline_ms = now_ms + max(m.session_timeout_ms for m in self.members.values())
            return replies
        self.generation_id += 1
        if not self.members:
            self.phase = GroupPhase.EMPTY
            self.state_timestamp_ms = now_ms
            self.protocol_name = None
            self.leader_id = None
            return replies
        leader = self.members.get(self.leader_id or "")
        if leader is None or not leader.awaiting_join:
            self.leader_id = next(m.member_id for m in self.members.values() if m.awaiting_join)
        self.protocol_name = self._select_protocol()
        self.phase = GroupPhase.COMPLETING_REBALANCE
        self.state_timestamp_ms = now_ms
        self.sync_deadline_ms = now_ms + self._max_rebalance_timeout()
        for member in self.members.values():
            member.awaiting_join = False
            member.synced = False
            member.assignment = b""
            member.deadline_ms = now_ms + member.session_timeout_ms
        for member_id in self.members:
            replies.append(Reply("join", member_id, self._join_result(member_id)))
        return replies

    def _join_result(self, member_id: str) -> JoinResult:
        members: tuple[JoinMember, ...] = ()
        if member_id == self.leader_id:
            members = tuple(JoinMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                            for m in self.members.values())
        return JoinResult(NONE, member_id, self.generation_id, self.protocol_name, self.leader_id or "",
                          members)

    # --- SyncGroup ------------------------------------------------------------
    @checked
    def sync(self, member_id: str, generation_id: int, assignments: dict[str, bytes],
             now_ms: float, group_instance_id: str | None = None, *, protocol_type: str | None = None,
             protocol_name: str | None = None) -> list[Reply]:
        """Handle a SyncGroup; the caller waits for the ("sync", member_id) reply. v5+ requests
        name the protocol type and name the member believes in: a mismatch with the group's is
        INCONSISTENT_GROUP_PROTOCOL (None: not checked)."""
        if self._fenced(member_id, group_instance_id):
            return [Reply("sync", member_id, SyncResult(FENCED_INSTANCE_ID))]
        member = self.members.get(member_id)
        if member is None or self.phase in (GroupPhase.EMPTY, GroupPhase.DEAD):
            return [Reply("sync", member_id, SyncResult(UNKNOWN_MEMBER_ID))]
        if generation_id != self.generation_id:
            return [Reply("sync", member_id, SyncResult(ILLEGAL_GENERATION))]
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
                protocol_name is not None and protocol_name != self.protocol_name):
            return [Reply("sync", member_id, SyncResult(INCONSISTENT_GROUP_PROTOCOL))]
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            return [Reply("sync", member_id, SyncResult(REBALANCE_IN_PROGRESS))]
        member.deadline_ms = now_ms + member.session_timeout_ms
        member.synced = True
        if self.phase is GroupPhase.STABLE:
            return [Reply("sync", member_id, self._synced(member.assignment))]
        replies: list[Reply] = []
        if member.awaiting_sync:
            replies.append(Reply("sync", member_id, SyncResult(REBALANCE_IN_PROGRESS)))
        member.awaiting_sync = True
        if member_id == self.leader_id:
            for m in self.members.values():
                m.assignment = bytes(assignments.get(m.member_id, b""))
            self.phase = GroupPhase.STABLE
            self.state_timestamp_ms = now_ms
            for m in self.members.values():
                if m.awaiting_sync:
                    m.awaiting_sync = False
                    replies.append(Reply("sync", m.member_id, self._synced(m.assignment)))
        return replies

    def _synced(self, assignment: bytes) -> SyncResult:
        return SyncResult(NONE, assignment, self.protocol_type, self.protocol_name)

    # --- Heartbeat / LeaveGroup ---------------------------------------------------
    @checked
    def heartbeat(self, member_id: str, generation_id: int, now_ms: float,
                  group_instance_id: str | None = None) -> int:
        if self._fenced(member_id, group_instance_id):
            return FENCED_INSTANCE_ID
        member = self.members.get(member_id)
        if member is None or self.phase in (GroupPhase.EMPTY, GroupPhase.DEAD):
            return UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ILLEGAL_GENERATION
        member.deadline_ms = now_ms + member.session_timeout_ms
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    @checked
    def leave(self, member_id: str, now_ms: float,
              group_instance_id: str | None = None) -> tuple[int, list[Reply]]:
        """LeaveGroup for one member. A static member may be named by its instance id alone
        (LeaveGroup v3, as admin tools do); naming it with a stale member id is fenced."""
        if group_instance_id is not None:
            current = self.static_member_id(group_instance_id)
            if current is None:
                return UNKNOWN_MEMBER_ID, []
            if member_id and member_id != current:
                return FENCED_INSTANCE_ID, []
            member_id = current
        elif member_id in self.pending_members:
            del self.pending_members[member_id]
            return NONE, self._maybe_complete_join(now_ms)
        if member_id not in self.members:
            return UNKNOWN_MEMBER_ID, []
        replies = self._remove_member(member_id)
        replies += self._after_departure(now_ms)
        return NONE, replies

    def _remove_member(self, member_id: str) -> list[Reply]:
        member = self.members.pop(member_id)
        replies: list[Reply] = []
        if member.awaiting_join:
            replies.append(Reply("join", member_id, JoinResult(UNKNOWN_MEMBER_ID, member_id)))
        if member.awaiting_sync:
            replies.append(Reply("sync", member_id, SyncResult(UNKNOWN_MEMBER_ID)))
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return replies

    def _after_departure(self, now_ms: float) -> list[Reply]:
        if self.phase in (GroupPhase.STABLE, GroupPhase.COMPLETING_REBALANCE):
            replies = self._prepare_rebalance(now_ms)
            return replies + self._maybe_complete_join(now_ms)
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            return self._maybe_complete_join(now_ms)
        return []

    # --- timers -------------------------------------------------------------------
    def next_deadline_ms(self) -> float | None:
        """When `tick` next has something to do (None: nothing is timed). The shell sets one
        timer at this instant, so a session expires exactly at its deadline (Kafka's timer
        wheel), not at the next periodic tick. Only deadlines `tick` acts on count: a member
        parked in JoinGroup has none (the rebalance timeout bounds it), and the initial
        rebalance delay only once every known member has joined."""
        deadlines = list(self.pending_members.values())
        deadlines += [m.deadline_ms for m in self.members.values() if not m.awaiting_join]
        if self.phase is GroupPhase.PREPARING_REBALANCE:
            deadlines.append(self.join_deadline_ms)
            if self._all_joined():
                deadlines.append(self.initial_delay_until_ms)
        elif self.phase is GroupPhase.COMPLETING_REBALANCE:
            deadlines.append(self.sync_deadline_ms)
        return min(deadlines, default=None)

    @checked
    def tick(self, now_ms: float) -> tuple[list[Reply], list[str]]:
        """Expire sessions and phase deadlines. Returns the replies owed and the ids of the
        members removed (session expiry or a missed rebalance)."""
        replies: list[Reply] = []
        before = set(self.members)
        for member_id, deadline in list(self.pending_members.items()):
            if now_ms >= deadline:
                del self.pending_members[member_id]
        for member in list(self.members.values()):
            # A parked JoinGroup keeps a member alive; the rebalance timeout bounds it instead.
            if not member.awaiting_join and now_ms >= member.deadline_ms:
                replies += self._remove_member(member.member_id)
                replies += self._after_departure(now_ms)
        if self.phase is GroupPhase.PREPARING_REBALANCE and now_ms >= self.join_deadline_ms:
            replies += self._complete_join(now_ms)
        elif self.phase is GroupPhase.COMPLETING_REBALANCE and now_ms >= self.sync_deadline_ms:
            for member in [m for m in self.members.values() if not m.synced]:
                replies += self._remove_member(member.member_id)
            replies += self._prepare_rebalance(now_ms)
            replies += self._maybe_complete_join(now_ms)
        else:
            replies += self._maybe_complete_join(now_ms)
        return replies, sorted(before - set(self.members))

    # --- offsets ------------------------------------------------------------------
    @checked
    def validate_commit(self, member_id: str, generation_id: int, now_ms: float,
                        group_instance_id: str | None = None) -> int:
        """The error for an OffsetCommit from this member and generation (NONE to accept).

        generation -1 with no member id is a "simple" commit (assign() consumers, admin
        tools): allowed only while the group has no members.
        """
        if self.phase is GroupPhase.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and not member_id:
            return NONE if not self.members else ILLEGAL_GENERATION
        if self._fenced(member_id, group_instance_id):
            return FENCED_INSTANCE_ID
        member = self.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ILLEGAL_GENERATION
        if self.phase is GroupPhase.COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        member.deadline_ms = now_ms + member.session_timeout_ms
        return NONE

    # --- failover -----------------------------------------------------------------
    @checked
    def restore(self, *, protocol_type: str | None, generation_id: int, protocol_name: str | None,
                leader_id: str | None, members: Iterable[Member], now_ms: float,
                state_timestamp_ms: float | None = None) -> None:
        """Install the group as last persisted (a new coordinator loading it): Stable with its
        members, whose sessions start now, or Empty; `state_timestamp_ms` is when it entered
        that state (None: the record did not say)."""
        self.protocol_type = protocol_type or None
        self.generation_id = generation_id
        self.protocol_name = protocol_name
        self.members = {}
        for member in members:
            member.deadline_ms = now_ms + member.session_timeout_ms
            member.synced = True
            self.members[member.member_id] = member
        self.leader_id = leader_id if leader_id in self.members else next(iter(self.members), None)
        self.phase = GroupPhase.STABLE if self.members else GroupPhase.EMPTY
        self.state_timestamp_ms = state_timestamp_ms

    @checked
    def adopt(self, *, generation_id: int, members: Iterable[Member], now_ms: float) -> None:
        """A consumer group converted back (KIP-848's downgrade): Stable at its group epoch as
        the generation, with its classic members and their assignments (Kafka's
        `ClassicGroup.fromConsumerGroup`); `rebalance` follows once that is stored."""
        self.restore(protocol_type=PROTOCOL_TYPE, generation_id=generation_id, protocol_name=None,
                     leader_id=None, members=members, now_ms=now_ms, state_timestamp_ms=now_ms)
        self.protocol_name = self._select_protocol()

    @checked
    def rebalance(self, now_ms: float) -> list[Reply]:
        """Kafka's `prepareRebalance` of a Stable group (after a downgrade): every member joins again."""
        return self._prepare_rebalance(now_ms) + self._maybe_complete_join(now_ms)

    @checked
    def mark_dead(self) -> list[Reply]:
        replies: list[Reply] = []
        for member_id in list(self.members):
            replies += self._remove_member(member_id)
        self.phase = GroupPhase.DEAD
        return replies
