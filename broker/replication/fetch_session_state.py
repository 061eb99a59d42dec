"""Incremental fetch sessions (KIP-227) for follower fetches (sans-IO).

A follower that fetches many partitions from one leader would otherwise send
all of them, and get all of them back, on every fetch, though almost all are
idle. With a session the leader remembers the partitions and the follower's
position in each: a follower request lists only the partitions whose position
changed (and `forgotten_topics_data` for those it drops), and the response
lists only the partitions with records, an error, or a high watermark / log
start offset other than the one this session last sent.

Sessions are granted to followers only (replica_id >= 0). A consumer asking
for one (session_id 0, epoch 0) gets session_id 0 back, which tells any Kafka
client that the broker keeps no session for it: it goes on with full fetches.

Epochs, as in Kafka: a request with session_id 0 and epoch 0 creates a session
(the response carries its id), the next request of that session carries epoch
1, and so on (wrapping to 1); epoch -1 closes the session named and fetches in
full without one. An unknown id answers FETCH_SESSION_ID_NOT_FOUND, a wrong
epoch INVALID_FETCH_SESSION_EPOCH; the follower then starts a new session.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

from raftka.client.protocol import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class SessionPartition:
    """A partition a fetch answers for: the fetcher's stated position and, when a session
    keeps it across requests, what was last sent for it."""

    topic: str
    partition: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    sent_high_watermark: int = -2  # -2: never sent, so the first response includes it
    sent_log_start_offset: int = -2
    # The leader's Partition and its epoch when this session last resolved it, and when the
    # follower's (unchanged) position was last recorded: the idle partitions of a session
    # are then checked without a lookup (broker/handlers/fetch.py).
    leader: object = None
    leader_epoch: int = -1
    recorded_at: float = float("-inf")

    def update(self, fetch_offset: int, log_start_offset: int, partition_max_bytes: int,
               current_leader_epoch: int) -> None:
        self.fetch_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch

    def changed_since_sent(self, high_watermark: int, log_start_offset: int) -> bool:
        return high_watermark != self.sent_high_watermark or log_start_offset != self.sent_log_start_offset


@dataclass(slots=True)
class FetchSession:
    session_id: int
    replica_id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[tuple[str, int], SessionPartition] = field(default_factory=dict)
    last_used: float = 0.0


class SessionError(Exception):
    """A request named a session that is gone, or with the wrong epoch."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class FetchSessionCache:
    """The leader's sessions, least recently used first; full caches evict the oldest."""

    def __init__(self, max_sessions: int = 1000, idle_timeout_s: float = 120.0) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, replica_id: int, now: float) -> FetchSession:
        self._expire(now)
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        session_id = next(self._ids)
        if session_id > MAX_EPOCH:  # ids are int32 on the wire; never 0
            self._ids = itertools.count(1)
            session_id = next(self._ids)
        session = FetchSession(session_id, replica_id, epoch=next_epoch(INITIAL_EPOCH), last_used=now)
        self._sessions[session_id] = session
        return session

    def lookup(self, session_id: int, epoch: int, replica_id: int, now: float) -> FetchSession:
        """The session a request with (session_id, epoch > 0) continues; raises SessionError."""
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            raise SessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                               f"fetch session {session_id} is not known to this broker")
        if epoch != session.epoch:
            raise SessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                               f"fetch session {session_id}: epoch {epoch}, expected {session.epoch}")
        session.epoch = next_epoch(epoch)
        session.last_used = now
        self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def _expire(self, now: float) -> None:
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_used <= self.idle_timeout_s:
                return
            self._sessions.popitem(last=False)
