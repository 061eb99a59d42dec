"""The seam between share partitions, the group coordinator and the share coordinator
(KIP-932; Kafka's `Persister`, its `DefaultStatePersister` and the state APIs 83-87).

Three parts of the broker meet here:

- the **group coordinator** (ShareGroupHeartbeat) initializes the state of a share
  partition before it assigns it (`initialize`, with `share.auto.offset.reset`'s start
  offset) and deletes it with the group (`delete`);
- the **share partition manager** on a partition's leader (ShareFetch/ShareAcknowledge)
  reads the state when it first serves the partition (`read`) and writes every change
  before it answers (`write`);
- the **share coordinator** (the leader of the `__share_group_state` partition the key
  hashes to) owns the state and keeps it in that topic as ShareSnapshot/ShareUpdate
  records. `describe/alter/delete share group offsets` read its summary (`read_summary`).

`Persister` is the interface the first two use; the share coordinator's shell provides
the implementation (a client of Initialize/Read/Write/Delete/ReadSummaryShareGroupState
that finds the coordinator with FindCoordinator key type 2 and the key
`"<group>:<topic id>:<partition>"`, or a direct call when this broker is it). Errors are
Kafka's codes in `PersisterError`: COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR (retriable),
FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, GROUP_ID_NOT_FOUND.

Offsets and epochs follow Kafka's `ShareGroupState` messages: a start offset of -1 means
"initialized with no start offset yet"; `state_epoch` is raised by each `initialize` (an
alter or reset of the group's offsets) and fences writers holding an older one;
`leader_epoch` is the partition leader's epoch, fencing a deposed leader's writes.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass
from typing import Protocol

from raftka.broker.group.share_partition_state import PersistedBatch, RecordState

SHARE_STATE_TOPIC = "__share_group_state"


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """One share partition's state: a (group, topic id, partition)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def coordinator_key(self) -> str:
        """FindCoordinator's key for key type 2 (SHARE), as Kafka's `SharePartitionKey`: the topic
        id in Kafka's form (`Uuid.toString`, URL-safe base64 without padding), which the
        coordinator's partition is hashed from."""
        topic = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        return f"{self.group_id}:{topic}:{self.partition}"

    @classmethod
    def from_coordinator_key(cls, key: str) -> ShareStateKey:
        """Parse `coordinator_key` (Kafka's `SharePartitionKey.getInstance(String)`). Raises
        ValueError naming what is wrong."""
        parts = key.split(":")
        if len(parts) != 3 or not parts[0]:
            raise ValueError(f"share coordinator key {key[:200]!r}: expected <group>:<topic id>:<partition>")
        group, topic, partition = parts
        try:
            raw = base64.urlsafe_b64decode(topic + "=" * (-len(topic) % 4))
        except (binascii.Error, ValueError):
            raw = b""
        if len(topic) != 22 or len(raw) != 16:
            raise ValueError(f"share coordinator key {key[:200]!r}: topic id {topic[:40]!r} is not a Kafka Uuid "
                             "(22 characters of URL-safe base64)")
        if not partition.isdigit() or len(partition) > 10 or int(partition) > 2**31 - 1:
            raise ValueError(f"share coordinator key {key[:200]!r}: partition {partition[:20]!r} is not an int32 >= 0")
        return cls(group, uuid.UUID(bytes=raw), int(partition))


@dataclass(frozen=True, slots=True)
class ShareState:
    """What `read` returns: ReadShareGroupState's per-partition answer."""

    state_epoch: int
    start_offset: int
    batches: tuple[PersistedBatch, ...] = ()
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ShareStateSummary:
    """ReadShareGroupStateSummary's answer: what describe share group offsets shows."""

    state_epoch: int
    start_offset: int
    leader_epoch: int = -1
    delivery_complete_count: int = -1  # -1: unknown (a coordinator that does not count)


DELIVERY_COMPLETE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def delivery_complete_count(start_offset: int, batches: tuple[PersistedBatch, ...]) -> int:
    """Kafka's `deliveryCompleteCount` (KIP-1226): offsets at or past the start offset whose
    delivery is complete (ACKNOWLEDGED or ARCHIVED), which the share partition's leader
    writes with its state (WriteShareGroupState v1)."""
    return sum(max(0, b.last_offset - max(b.first_offset, start_offset) + 1)
               for b in batches if b.state in DELIVERY_COMPLETE)


def lag_wanted(start_offset: int, complete: int) -> bool:
    """Whether DescribeShareGroupOffsets v1 computes a partition's Lag (Kafka's
    `shouldComputeSharePartitionLag`): an initialized start offset and a known delivery
    complete count; the others answer Lag -1 without asking for the end offset."""
    return start_offset >= 0 and complete >= 0


def share_lag(start_offset: int, complete: int, end_offset: int) -> int:
    """DescribeShareGroupOffsets v1's Lag, as Kafka 4.4 computes it: the end offset (the
    next offset to be produced) minus the start offset minus the delivery complete count,
    not clamped; -1 where `lag_wanted` says no."""
    if not lag_wanted(start_offset, complete):
        return -1
    return end_offset - start_offset - complete


class PersisterError(Exception):
    """A Kafka error code from the share coordinator, with its message."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or str(code))
        self.code = code
        self.message = message


class Persister(Protocol):
    """Kafka's `Persister`, one partition per call (the shell may batch on the wire)."""

    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> None:
        """Create or replace the state: no batches, this start offset, this state epoch."""

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareState | None:
        """The state, None when the partition was never initialized. Records `leader_epoch`
        (a read with an older epoch than recorded is FENCED_LEADER_EPOCH)."""

    async def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[PersistedBatch, ...]) -> None:
        """Replace the in-flight batches and the start offset; durable when it returns."""

    async def read_summary(self, key: ShareStateKey, leader_epoch: int) -> ShareStateSummary | None:
        """The start offset and epochs without the batches; None when never initialized."""

    async def delete(self, key: ShareStateKey) -> None:
        """Forget the state (the group or its offsets for this topic were deleted)."""


__all__ = ["SHARE_STATE_TOPIC", "Persister", "PersisterError", "ShareState", "ShareStateKey",
           "ShareStateSummary"]
