"""One partition replica hosted by this broker: its log, its role, its high watermark.

The role (leader or follower), leader epoch and ISR come only from the
metadata image (`apply_image`). As leader, the high watermark is the minimum
log-end offset over the ISR; consumers read only below it, and acks=all
produces complete once it passes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog
import trio

from log.partition_log import AppendInfo, PartitionLog, ReadInfo
from raft_meta.image import PartitionImage

log = structlog.get_logger("broker.partition")


class PartitionError(Exception):
    """A request this replica cannot serve; `code` is the Kafka error code to answer."""

    code = -1

    def __init__(self, message: str) -> None:
        super().__init__(message)


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
    """What the leader knows of a follower replica."""

    log_end_offset: int = 0
    last_caught_up_ms: float = 0.0


class Partition:
    def __init__(self, topic: str, topic_id: str, index: int, local_id: int, plog: PartitionLog,
                 on_high_watermark: Callable[[], None] = lambda: None) -> None:
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
        self.min_insync_replicas = 1
        self.high_watermark = 0
        self.followers: dict[int, ReplicaState] = {}
        # Replaced every time the high watermark moves: waiters hold the old one.
        self.hw_changed = trio.Event()
        self._on_high_watermark = on_high_watermark

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leader={self.leader}, epoch={self.leader_epoch})"

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    # -- metadata --------------------------------------------------------------

    def apply_image(self, image: PartitionImage, min_insync_replicas: int) -> None:
        """Take the role, epochs and ISR the metadata says."""
        was_leader, old_epoch = self.is_leader, self.leader_epoch
        self.leader = image.leader
        self.leader_epoch = image.leader_epoch
        self.partition_epoch = image.partition_epoch
        self.replicas = image.replicas
        self.isr = image.isr
        self.min_insync_replicas = min_insync_replicas
        if self.is_leader and (not was_leader or old_epoch != self.leader_epoch):
            self.followers = {r: ReplicaState() for r in self.replicas if r != self.local_id}
            log.info("partition.became_leader", topic=self.topic, partition=self.index,
                     leader_epoch=self.leader_epoch, isr=list(self.isr))
        elif not self.is_leader:
            self.followers = {}
        if self.is_leader:
            self.maybe_advance_high_watermark()

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
        self.maybe_advance_high_watermark()
        return info

    def maybe_advance_high_watermark(self) -> bool:
        """HW = min log-end offset over the ISR; never moves backwards. True if it moved."""
        ends = [self.log.log_end_offset]
        for replica in self.isr:
            if replica != self.local_id:
                state = self.followers.get(replica)
                ends.append(state.log_end_offset if state is not None else 0)
        new_hw = min(ends)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self._signal()
            return True
        return False

    def _signal(self) -> None:
        event, self.hw_changed = self.hw_changed, trio.Event()
        event.set()
        self._on_high_watermark()

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> None:
        """Wait until the HW reaches `offset` (acks=all purgatory).

        Raises RequestTimedOut after `timeout_s`, NotLeaderOrFollower if this
        replica stops leading meanwhile.
        """
        with trio.move_on_after(timeout_s):
            while self.high_watermark < offset:
                if not self.is_leader:
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
            f"{self.topic}-{self.index}: offset {offset} not replicated to the ISR within {timeout_s:.1f}s"
        )

    # -- reads ---------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, committed_only: bool = True) -> ReadInfo:
        """Whole batches from `offset`; consumers see only offsets below the high watermark."""
        limit = self.high_watermark if committed_only else None
        return self.log.read(offset, max_bytes, max_offset=limit)
