"""One partition replica hosted by this broker: its log, its role, its high watermark.

The role (leader or follower), leader epoch and ISR come only from the
metadata image (`apply_image`). As leader, the high watermark is the minimum
log-end offset over the ISR — including replicas whose addition to the ISR
is still being committed (Kafka's "maximal ISR"), so the HW never runs ahead
of a replica that may become leader. Consumers read only below it, and
acks=all produces complete once it passes them. As follower, the high
watermark is the leader's, capped at the local log end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog
import trio

from raftka.log.partition_log import AppendInfo, PartitionLog, ReadInfo
from raftka.raft_meta.image import PartitionImage

log = structlog.get_logger("broker.partition")


class PartitionError(Exception):
    """A request this replica cannot serve; `code` is the Kafka error code to answer."""

    code = -1


class NotLeaderOrFollower(PartitionError):
    code = 6


class FencedLeaderEpoch(PartitionError):
    code = 74


class UnknownLeaderEpoch(PartitionError):
    code = 75


class NotEnoughReplicas(PartitionError):
    code = 19


class NotEnoughReplicasAfterAppend(PartitionError):
    code = 20


class RequestTimedOut(PartitionError):
    code = 7


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of a follower replica (times in ms of the caller's clock)."""

    log_end_offset: int = -1  # unknown until its first fetch at this leader epoch
    last_caught_up_ms: float = 0.0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: float = 0.0


class Partition:
    def __init__(self, topic: str, topic_id: str, index: int, local_id: int, plog: PartitionLog,
                 on_high_watermark: Callable[[], None] = lambda: None,
                 on_append: Callable[[], None] = lambda: None, high_watermark: int = 0) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.local_id = local_id
        self.log = plog
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_isr: tuple[int, ...] | None = None  # an AlterPartition in flight
        self.min_insync_replicas = 1
        self.high_watermark = min(high_watermark, plog.log_end_offset)
        self.followers: dict[int, ReplicaState] = {}
        self.became_leader_ms = 0.0
        # Replaced every time the high watermark moves: waiters hold the old one.
        self.hw_changed = trio.Event()
        self._on_high_watermark = on_high_watermark
        self._on_append = on_append

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leader={self.leader}, epoch={self.leader_epoch})"

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    # -- metadata --------------------------------------------------------------

    def apply_image(self, image: PartitionImage, min_insync_replicas: int, now_ms: float) -> tuple[bool, bool]:
        """Take the role, epochs and ISR the metadata says; returns (became leader, became follower)."""
        was_leader, old_epoch, old_leader = self.is_leader, self.leader_epoch, self.leader
        self.leader = image.leader
        self.leader_epoch = image.leader_epoch
        self.partition_epoch = image.partition_epoch
        self.replicas = image.replicas
        self.isr = image.isr
        self.pending_isr = None
        self.min_insync_replicas = min_insync_replicas
        new_term = old_epoch != self.leader_epoch or old_leader != self.leader
        became_leader = self.is_leader and (not was_leader or new_term)
        became_follower = not self.is_leader and self.leader >= 0 and (was_leader or new_term)
        if became_leader:
            # Followers get a fresh lag clock: a new leader cannot know how far they are.
            self.followers = {r: ReplicaState(last_caught_up_ms=now_ms) for r in self.replicas if r != self.local_id}
            self.became_leader_ms = now_ms
            # The new epoch starts at the current log end, whether or not we append soon.
            self.log.epoch_cache.assign(self.leader_epoch, self.log.log_end_offset)
            log.info("partition.became_leader", topic=self.topic, partition=self.index,
                     leader_epoch=self.leader_epoch, isr=list(self.isr), log_end_offset=self.log_end_offset,
                     high_watermark=self.high_watermark)
        elif self.is_leader:
            for r in self.replicas:
                if r != self.local_id and r not in self.followers:
                    self.followers[r] = ReplicaState(last_caught_up_ms=now_ms)
        elif became_follower:
            self.followers = {}
            log.info("partition.became_follower", topic=self.topic, partition=self.index,
                     leader=self.leader, leader_epoch=self.leader_epoch)
        if self.is_leader:
            self.maybe_advance_high_watermark()
        self._signal()  # waiters re-check their conditions (role changes included)
        return became_leader, became_follower

    # -- leader side -------------------------------------------------------------

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise the Kafka error a client gets for addressing this replica as leader."""
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise FencedLeaderEpoch(
                    f"{self.topic}-{self.index}: request epoch {current_leader_epoch} is older than "
                    f"the current leader epoch {self.leader_epoch}"
                )
            if current_leader_epoch > self.leader_epoch:
                raise UnknownLeaderEpoch(
                    f"{self.topic}-{self.index}: request epoch {current_leader_epoch} is newer than "
                    f"this broker's leader epoch {self.leader_epoch}"
                )
        if not self.is_leader:
            raise NotLeaderOrFollower(
                f"{self.topic}-{self.index}: broker {self.local_id} is not the leader (leader is {self.leader})"
            )

    def append_as_leader(self, records: bytes | bytearray | memoryview, required_acks: int) -> AppendInfo:
        self.check_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicas(
                f"{self.topic}-{self.index}: ISR {list(self.isr)} is smaller than "
                f"min.insync.replicas {self.min_insync_replicas}"
            )
        info = self.log.append(records, self.leader_epoch)
        if not info.duplicate:
            self._on_append()  # wake follower fetches waiting for new data
        self.maybe_advance_high_watermark()
        return info

    def _hw_replicas(self) -> set[int]:
        members = set(self.isr)
        if self.pending_isr is not None:
            members |= set(self.pending_isr)
        return members

    def maybe_advance_high_watermark(self) -> bool:
        """HW = min log-end offset over the (maximal) ISR; never moves backwards. True if it moved."""
        new_hw = self.log.log_end_offset
        for replica in self._hw_replicas():
            if replica != self.local_id:
                state = self.followers.get(replica)
                new_hw = min(new_hw, state.log_end_offset if state is not None else -1)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self._signal()
            return True
        return False

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: float) -> None:
        """Record a follower's fetch (its log end is `fetch_offset`) and advance the HW."""
        state = self.followers.get(replica_id)
        if state is None:
            raise NotLeaderOrFollower(
                f"{self.topic}-{self.index}: broker {replica_id} is not a replica (replicas {list(self.replicas)})"
            )
        leader_leo = self.log.log_end_offset
        if fetch_offset > leader_leo:
            return  # a divergent follower: the read answers OFFSET_OUT_OF_RANGE and it truncates
        # Caught up now, or caught up to where the leader was at its previous fetch (Kafka's rule).
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = now_ms
        elif state.last_fetch_leader_leo >= 0 and fetch_offset >= state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.last_fetch_leader_leo = leader_leo
        state.last_fetch_ms = now_ms
        state.log_end_offset = fetch_offset
        self.maybe_advance_high_watermark()

    def isr_candidates_to_add(self) -> list[int]:
        """Followers outside the ISR that have caught up with the HW and the current epoch."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        epoch_start = self._epoch_start_offset()
        return [r for r, s in self.followers.items()
                if r not in self.isr and s.log_end_offset >= max(self.high_watermark, epoch_start)]

    def isr_members_lagging(self, now_ms: float, lag_max_ms: int) -> list[int]:
        """ISR followers that have not caught up within `replica.lag.time.max.ms`."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        return [r for r in self.isr
                if r != self.local_id and r in self.followers
                and now_ms - self.followers[r].last_caught_up_ms > lag_max_ms]

    def _epoch_start_offset(self) -> int:
        for epoch, start in reversed(self.log.epoch_cache.entries()):
            if epoch == self.leader_epoch:
                return start
        return 0

    def _signal(self) -> None:
        event, self.hw_changed = self.hw_changed, trio.Event()
        event.set()
        self._on_high_watermark()

    async def wait_for_high_watermark(self, offset: int, deadline: float) -> None:
        """Wait until the HW reaches `offset` (acks=all purgatory).

        Raises RequestTimedOut at `deadline` (trio clock: the request's arrival plus its
        timeout, however long it queued behind others), NotLeaderOrFollower if this
        replica stops leading meanwhile, NotEnoughReplicasAfterAppend if the
        ISR fell below min.insync.replicas before the write was replicated.
        """
        epoch = self.leader_epoch
        with trio.move_on_at(deadline):
            while self.high_watermark < offset:
                if not self.is_leader or self.leader_epoch != epoch:
                    raise NotLeaderOrFollower(
                        f"{self.topic}-{self.index}: leadership moved while waiting for replication"
                    )
                await self.hw_changed.wait()
            if len(self.isr) < self.min_insync_replicas:
                raise NotEnoughReplicasAfterAppend(
                    f"{self.topic}-{self.index}: ISR shrank to {list(self.isr)} below "
                    f"min.insync.replicas {self.min_insync_replicas} while waiting"
                )
            return
        raise RequestTimedOut(
            f"{self.topic}-{self.index}: offset {offset} not replicated to the ISR before the request timed out "
            f"(high watermark {self.high_watermark}, ISR {list(self.isr)})"
        )

    # -- follower side ---------------------------------------------------------------

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        if new_hw != self.high_watermark:
            self.high_watermark = new_hw
            self._signal()

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            log.warning("partition.truncated", topic=self.topic, partition=self.index,
                        from_offset=self.log.log_end_offset, to_offset=offset, leader_epoch=self.leader_epoch)
            self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    # -- reads ---------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, committed_only: bool = True) -> ReadInfo:
        """Whole batches from `offset`; consumers see only offsets below the high watermark."""
        limit = self.high_watermark if committed_only else None
        return self.log.read(offset, max_bytes, max_offset=limit)
