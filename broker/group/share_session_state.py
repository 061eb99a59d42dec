"""Share sessions (KIP-932): Kafka's `ShareSessionCache` and `ShareFetchContext`, with no I/O.

A share consumer keeps one share session with each partition leader it fetches from, keyed
by (group id, member id). The session remembers the partitions the member fetches there, so
a ShareFetch names only what changed: the partitions to add (`topics`) and to drop
(`forgotten_topics_data`); the broker fetches from all of the session's partitions.

Epochs (ShareFetch/ShareAcknowledge's `share_session_epoch`, as Kafka's `ShareRequestMetadata`)::

    ShareFetch epoch 0  -> a new session (one the member had is replaced), a FULL context:
                           acknowledgements in it are INVALID_REQUEST (nothing is acquired yet)
    epoch n > 0         -> an INCREMENTAL context of the member's session; the session expects
                           n, then n + 1 (wrapping to 1 after 2^31 - 1)
    epoch -1            -> the FINAL context: acknowledgements only (nothing is fetched),
                           then the session closes and the member's acquired records on its
                           partitions are released
    ShareAcknowledge epoch 0 -> INVALID_SHARE_SESSION_EPOCH (it cannot open a session)

An unknown session is SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH.
At most `group.share.max.share.sessions` (2000) sessions per broker: a new session beyond
that is SHARE_SESSION_LIMIT_REACHED (Kafka 4.4 evicts none). A session belongs to the
connection that opened it; when that connection closes, its sessions go (Kafka 4.4's
`ShareSessionCache` connection listener) and their members' records are released.

An answer names only the partitions with records, an error, or acknowledgements in this
request (Kafka 4.4 answers a share fetch that acquired nothing with no partitions, full or
incremental); an incremental one also names once more a partition whose last answer was an
error (Kafka's `CachedSharePartition.maybeUpdateResponseData`).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from raftka.client.protocol import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
MAX_SHARE_SESSIONS_DEFAULT = 2000  # group.share.max.share.sessions

TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """Kafka's `ShareRequestMetadata.nextEpoch`: 1 after the largest int32, never 0 or -1."""
    return 1 if epoch >= MAX_EPOCH or epoch < 0 else epoch + 1


@dataclass(frozen=True, slots=True)
class ShareSessionKey:
    group_id: str
    member_id: str


@dataclass(slots=True)
class ShareSession:
    key: ShareSessionKey
    epoch: int  # the epoch the next request must carry
    connection_id: str
    # The partitions fetched, in the order they were added; True: to be named in the next
    # answer (its last one was an error).
    partitions: dict[TopicIdPartition, bool] = field(default_factory=dict)


class ContextKind(enum.Enum):
    FULL = "full"
    INCREMENTAL = "incremental"
    FINAL = "final"


@dataclass(frozen=True, slots=True)
class ShareFetchContext:
    """What one ShareFetch does: its kind, the session (None once FINAL removed it: `closed`
    then holds it), and the partitions to fetch from (none for FINAL)."""

    kind: ContextKind
    session: ShareSession | None
    partitions: tuple[TopicIdPartition, ...]
    closed: ShareSession | None = None

    def include(self, tp: TopicIdPartition, has_records: bool, error: int, acknowledged: bool) -> bool:
        """Whether the response names `tp` (see the module docstring)."""
        return has_records or bool(error) or acknowledged or self.owes(tp)

    def sent(self, tp: TopicIdPartition, error: int = 0) -> None:
        """The response named `tp`; after an error it is named once more when the error is
        gone (Kafka's `requiresUpdateInResponse`)."""
        if self.session is not None and tp in self.session.partitions:
            self.session.partitions[tp] = bool(error)

    def owes(self, tp: TopicIdPartition) -> bool:
        """Whether an incremental answer must name `tp` without news (see `sent`)."""
        return (self.kind is ContextKind.INCREMENTAL and self.session is not None
                and self.session.partitions.get(tp, False))


class ShareSessionError(Exception):
    """A request's session cannot be used: Kafka's error code and why."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = int(error_code)


class ShareSessionCache:
    """The broker's share sessions, at most `max_sessions` (see the module docstring)."""

    def __init__(self, max_sessions: int = MAX_SHARE_SESSIONS_DEFAULT) -> None:
        if max_sessions < 1:
            raise ValueError(f"group.share.max.share.sessions must be >= 1, got {max_sessions}")
        self.max_sessions = max_sessions
        self._sessions: dict[ShareSessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: ShareSessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def new_context(self, key: ShareSessionKey, epoch: int, to_fetch: list[TopicIdPartition],
                    forgotten: list[TopicIdPartition], acknowledging: bool, connection_id: str,
                    ) -> ShareFetchContext:
        """A ShareFetch's context (Kafka's `SharePartitionManager.newContext`); raises
        ShareSessionError."""
        if epoch == FINAL_EPOCH:
            session = self._sessions.pop(key, None)
            if session is None:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, _not_found(key))
            return ShareFetchContext(ContextKind.FINAL, None, (), closed=session)
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise ShareSessionError(ErrorCode.INVALID_REQUEST,
                                        "a ShareFetch opening a share session (epoch 0) carries acknowledgements: "
                                        "nothing is acquired in a new session")
            self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                        f"this broker holds {len(self._sessions)} share sessions, the limit "
                                        f"(group.share.max.share.sessions={self.max_sessions})")
            session = ShareSession(key, next_epoch(INITIAL_EPOCH), connection_id,
                                   dict.fromkeys(to_fetch, False))
            self._sessions[key] = session
            return ShareFetchContext(ContextKind.FULL, session, tuple(session.partitions))
        session = self._continue(key, epoch)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in to_fetch:
            session.partitions.setdefault(tp, False)
        return ShareFetchContext(ContextKind.INCREMENTAL, session, tuple(session.partitions))

    def acknowledge_context(self, key: ShareSessionKey, epoch: int) -> tuple[ShareSession, bool]:
        """A ShareAcknowledge's session and whether it closes it (epoch -1: the caller
        releases the member's records after the acknowledgements); raises ShareSessionError."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    "ShareAcknowledge cannot open a share session (epoch 0)")
        if epoch == FINAL_EPOCH:
            session = self._sessions.pop(key, None)
            if session is None:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, _not_found(key))
            return session, True
        return self._continue(key, epoch), False

    def remove(self, key: ShareSessionKey) -> ShareSession | None:
        """Drop the session (its member left the group); the caller releases its records."""
        return self._sessions.pop(key, None)

    def connection_closed(self, connection_id: str) -> list[ShareSession]:
        """Drop the sessions opened on a connection that closed; the caller releases their
        members' records."""
        gone = [s for s in self._sessions.values() if s.connection_id == connection_id]
        for session in gone:
            del self._sessions[session.key]
        return gone

    def _continue(self, key: ShareSessionKey, epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, _not_found(key))
        if epoch != session.epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"share session of member {key.member_id!r} in group {key.group_id!r}: "
                                    f"epoch {epoch}, expected {session.epoch}")
        session.epoch = next_epoch(epoch)
        return session


def _not_found(key: ShareSessionKey) -> str:
    return f"no share session of member {key.member_id!r} in group {key.group_id!r} on this broker"
