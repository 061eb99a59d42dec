"""An acks=all produce waiting for the ISR (Kafka's DelayedProduce).

Its batches are appended; each partition's write waits until the high watermark
passes it (`Partition.check_replicated`). A partition is settled when it is
replicated (no error), or when its leadership moved (NOT_LEADER_OR_FOLLOWER) or
the ISR fell below min.insync.replicas before it was replicated
(NOT_ENOUGH_REPLICAS_AFTER_APPEND). The operation completes when every partition
is settled, or at the request's deadline, when those still waiting get
REQUEST_TIMED_OUT. It waits in the replica manager's produce purgatory
(broker/replication/purgatory.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftka.broker.errors import error_code_for
from raftka.broker.replication.partition import Partition
from raftka.broker.replication.purgatory import DelayedOperation


@dataclass
class PartitionResponse:
    """One partition's Produce answer (Kafka's PartitionResponse)."""

    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: list[dict] | None = None
    error_message: str | None = None

    def fail(self, exc: Exception) -> None:
        self.error_code = error_code_for(exc)
        self.error_message = str(exc)


@dataclass
class ReplicationWait:
    """One partition's write, waiting until the high watermark reaches `offset`."""

    partition: Partition
    offset: int  # the write's last offset + 1
    leader_epoch: int  # the epoch it was appended in
    response: PartitionResponse
    pending: bool = True


class DelayedProduce(DelayedOperation):
    def __init__(self, waits: list[ReplicationWait], deadline: float) -> None:
        super().__init__(deadline)
        self.waits = waits

    def try_complete(self) -> bool:
        for wait in self.waits:
            if not wait.pending:
                continue  # settled once, settled for good (as in Kafka)
            try:
                wait.pending = not wait.partition.check_replicated(wait.offset, wait.leader_epoch)
            except Exception as exc:
                wait.response.fail(exc)
                wait.pending = False
        if any(wait.pending for wait in self.waits):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for wait in self.waits:
            if wait.pending:  # the deadline passed first
                wait.response.fail(wait.partition.replication_timed_out(wait.offset))
                wait.pending = False

    async def wait_for_change(self) -> None:
        # Until the first partition still waiting is settled the operation cannot complete,
        # so its high-watermark event (also set on role changes and detach) is the one to wait on.
        await next(wait for wait in self.waits if wait.pending).partition.hw_changed.wait()
