"""One partition replica hosted by this broker: its log, its role, its high watermark.

The replication state and every HW/ISR rule live in the pure core
`broker/replication/replica_state.py` (tested by the scenario files in
tests/unit/testdata/replica_state/). This shell owns the log, the clock and the
trio events: it feeds the core the log's offsets and the time, and acts on its
effects (assigning a new leader epoch in the log, waking acks=all waiters and
long-polls when the high watermark moves). Consumers read only below the HW,
and acks=all produces complete once it passes them.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
import trio

from raftka.broker.replication.replica_state import (
    AlterIsr,
    BecameFollower,
    BecameLeader,
    CanJoinIsr,
    Effect,
    HighWatermarkChanged,
    NotAReplica,
    PartitionAssignment,
    ReplicaState,
)
from raftka.client.protocol import ErrorCode
from raftka.log.append_origin import AppendOrigin
from raftka.log.batch_header import BatchHeader
from raftka.log.partition_log import AppendInfo, PartitionLog, ReadInfo
from raftka.raft_meta.metadata.image import PartitionImage

log = structlog.get_logger("broker.partition")


class VerificationGuard:
    """A KIP-890 verification in flight for one producer: the highest epoch asked about, and
    whether it is a transaction version 2 add (whose own epoch the previous markers carry)."""

    __slots__ = ("epoch", "supports_epoch_bump")

    def __init__(self, epoch: int, supports_epoch_bump: bool) -> None:
        self.epoch = epoch
        self.supports_epoch_bump = supports_epoch_bump


class PartitionError(Exception):
    """A request this replica cannot serve; `code` is the Kafka error code to answer."""

    code = int(ErrorCode.UNKNOWN_SERVER_ERROR)


class NotLeaderOrFollower(PartitionError):
    code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


class FencedLeaderEpoch(PartitionError):
    code = int(ErrorCode.FENCED_LEADER_EPOCH)


class UnknownLeaderEpoch(PartitionError):
    code = int(ErrorCode.UNKNOWN_LEADER_EPOCH)


class NotEnoughReplicas(PartitionError):
    code = int(ErrorCode.NOT_ENOUGH_REPLICAS)


class NotEnoughReplicasAfterAppend(PartitionError):
    code = int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


class RequestTimedOut(PartitionError):
    code = int(ErrorCode.REQUEST_TIMED_OUT)


def _now_ms() -> float:
    return trio.current_time() * 1000.0


MAX_VERIFICATION_GUARDS = 10_000  # per partition: bounds memory against many producers


class Partition:
    """A thin trio/file shell over `ReplicaState` (broker/replication/replica_state.py), which holds the
    replication state and makes every HW/ISR decision; this class feeds it the log's
    offsets and the clock, and turns its effects into log calls, events and wake-ups."""

    def __init__(self, topic: str, topic_id: str, index: int, local_id: int, plog: PartitionLog,
                 on_high_watermark: Callable[[], None] = lambda: None,
                 on_append: Callable[[], None] = lambda: None, high_watermark: int = 0,
                 lag_ms: float = 30_000) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.local_id = local_id
        self.log = plog
        # Never below the log start (Kafka's updateHighWatermark clamps it too): after DeleteRecords
        # and a crash, the checkpointed HW may be older than the log start checkpoint.
        self.state = ReplicaState(local_id, lag_ms, high_watermark=max(high_watermark, plog.log_start_offset),
                                  log_end_offset=plog.log_end_offset)
        # Replaced every time the high watermark moves: waiters hold the old one.
        self.hw_changed = trio.Event()
        self.detached = False  # no longer served here (reassigned away, or its topic deleted)
        self._on_high_watermark = on_high_watermark
        self._on_append = on_append
        # DeleteRecords: each follower's log start offset, from its fetches (leader side).
        self.follower_log_starts: dict[int, int] = {}
        self.log_start_changed = trio.Event()  # replaced whenever one of them moves
        # KIP-890: producer id -> the guard of its verification in flight (a marker voids it).
        self._verification_guards: dict[int, VerificationGuard] = {}

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leader={self.leader}, epoch={self.leader_epoch})"

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    # The metadata's view and the HW, read from the core.
    leader = property(lambda self: self.state.leader)
    leader_epoch = property(lambda self: self.state.leader_epoch)
    partition_epoch = property(lambda self: self.state.partition_epoch)
    replicas = property(lambda self: self.state.replicas)
    isr = property(lambda self: self.state.isr)
    pending_isr = property(lambda self: self.state.pending_isr)
    min_insync_replicas = property(lambda self: self.state.min_insync_replicas)
    followers = property(lambda self: self.state.followers)

    @property
    def high_watermark(self) -> int:
        return self.state.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: min(HW, first offset of the oldest transaction not yet decided and
        replicated). read_committed consumers read below it; it is the HW without transactions."""
        # The HW may have been restored (or moved) without a change event since the producer
        # state replayed its markers at open: let it forget the ones the HW has passed.
        self.log.producer_state.on_high_watermark(self.high_watermark)
        return self.log.last_stable_offset(self.high_watermark)

    @property
    def is_leader(self) -> bool:
        return self.state.is_leader

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    # -- metadata --------------------------------------------------------------

    def apply_image(self, image: PartitionImage, min_insync_replicas: int, now_ms: float,
                    ineligible: tuple[int, ...] = ()) -> tuple[bool, bool]:
        """Take the role, epochs and ISR the metadata says; returns (became leader, became follower).

        `ineligible`: the replicas whose broker is fenced or unregistered (KIP-841; see
        broker/replication/replica_state.py): never proposed for the ISR, never waited for outside it."""
        leo = self.log.log_end_offset
        # Where the epoch starts once `assign` below has run: its existing start if it is the
        # cache's latest epoch, else the log end.
        entries = self.log.epoch_cache.entries()
        epoch_start = entries[-1][1] if entries and entries[-1][0] == image.leader_epoch else leo
        effects = self.state.apply(
            PartitionAssignment(image.replicas, image.isr, image.leader, image.leader_epoch, image.partition_epoch,
                                ineligible),
            min_insync_replicas=min_insync_replicas, now_ms=now_ms, log_end_offset=leo,
            epoch_start_offset=epoch_start)
        became_leader = became_follower = False
        for effect in effects:
            if isinstance(effect, BecameLeader):
                became_leader = True
                # The new epoch starts at the current log end, whether or not we append soon.
                self.log.epoch_cache.assign(effect.leader_epoch, effect.epoch_start_offset)
                log.info("partition.became_leader", topic=self.topic, partition=self.index,
                         leader_epoch=self.leader_epoch, isr=list(self.isr), log_end_offset=leo,
                         high_watermark=self.high_watermark)
            elif isinstance(effect, BecameFollower):
                became_follower = True
                log.info("partition.became_follower", topic=self.topic, partition=self.index,
                         leader=self.leader, leader_epoch=self.leader_epoch)
        self._act(effects)
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

    def check_follower_epoch(self, current_leader_epoch: int = -1) -> None:
        """A consumer reading this follower (KIP-392): its leader epoch must be the current one."""
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            error = FencedLeaderEpoch if current_leader_epoch < self.leader_epoch else UnknownLeaderEpoch
            raise error(f"{self.topic}-{self.index}: request epoch {current_leader_epoch}; this follower's leader "
                        f"epoch is {self.leader_epoch}")
        if self.leader < 0:
            raise NotLeaderOrFollower(f"{self.topic}-{self.index}: no leader to follow")

    def append_as_leader(self, records: bytes | bytearray | memoryview, required_acks: int, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT,
                         first_header: BatchHeader | None = None) -> AppendInfo:
        """Append as leader (Kafka's Partition.appendRecordsToLeader): NotLeaderOrFollower,
        NotEnoughReplicas for acks=all below min.insync.replicas, else the log's errors.
        `first_header`: the first batch's header, if the caller parsed it already."""
        self.check_leader()
        refusal = self.state.append_refusal(required_acks)
        if refusal is not None:
            raise NotEnoughReplicas(f"{self.topic}-{self.index}: {refusal}")
        info = self.log.append(records, self.leader_epoch, origin=origin, first_header=first_header)
        if first_header is not None and first_header.is_transactional:
            # Its transaction is open here now: the verification is done (Kafka's UnifiedLog).
            self._verification_guards.pop(first_header.producer_id, None)
        if not info.duplicate:
            self._on_append()  # wake follower fetches waiting for new data
        self._act(self.state.on_append(self.log.log_end_offset, _now_ms()))
        return info

    def in_transaction(self, producer_id: int, producer_epoch: int | None = None) -> bool:
        """Whether the producer has an open transaction in this partition (with `producer_epoch`,
        one opened at that epoch: transaction version 2 bumps the epoch per transaction)."""
        entry = self.log.producer_state.producers().get(producer_id)
        return (entry is not None and entry.in_transaction
                and (producer_epoch is None or entry.epoch == producer_epoch))

    def verification_guard(self, producer_id: int, producer_epoch: int = -1,
                           supports_epoch_bump: bool = False) -> VerificationGuard:
        """Start a KIP-890 verification for the producer (Kafka's VerificationStateEntry).
        Concurrent verifications of one producer share the guard until a marker voids it
        (Kafka's maybeCreateVerificationStateEntry): a second produce in flight must not void
        the first. `supports_epoch_bump`: a transaction version 2 add."""
        guard = self._verification_guards.get(producer_id)
        if guard is None:
            if len(self._verification_guards) >= MAX_VERIFICATION_GUARDS:
                self._verification_guards.clear()  # stale ones only cost a retried verification
            guard = self._verification_guards[producer_id] = VerificationGuard(producer_epoch, supports_epoch_bump)
        guard.epoch = max(guard.epoch, producer_epoch)
        return guard

    def guard_holds(self, producer_id: int, guard: VerificationGuard) -> bool:
        """True if no marker for the producer landed since `guard` was taken."""
        return self._verification_guards.get(producer_id) is guard

    def append_marker_as_leader(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                                commit: bool, transaction_version: int = 0) -> AppendInfo:
        """WriteTxnMarkers: append a COMMIT/ABORT marker, replicated like any write (the caller
        waits for the HW as acks=all does). Raises the log's 47/52 errors for a stale marker
        (a transaction version 2 marker must carry a newer epoch than the producer's, KIP-1228)."""
        self.check_leader()
        refusal = self.state.append_refusal(-1)
        if refusal is not None:
            raise NotEnoughReplicas(f"{self.topic}-{self.index}: {refusal}")
        info = self.log.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, self.leader_epoch,
                                      transaction_version=transaction_version)
        guard = self._verification_guards.get(producer_id)
        # Transaction version 2 writes the previous transaction's markers at the bumped epoch
        # the next transaction runs at: such a marker leaves that transaction's verification
        # standing (Kafka's UnifiedLog, isV2NextTransactionStarted).
        if not (guard is not None and guard.supports_epoch_bump and guard.epoch == producer_epoch):
            self._verification_guards.pop(producer_id, None)
        self._on_append()
        self._act(self.state.on_append(self.log.log_end_offset, _now_ms()))
        return info

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: float) -> bool:
        """Record a follower's fetch (its log end is `fetch_offset`) and advance the HW.

        True if the follower may now join the ISR (an expansion is due)."""
        try:
            effects = self.state.on_fetch(replica_id, fetch_offset, now_ms)
        except NotAReplica as exc:
            raise NotLeaderOrFollower(f"{self.topic}-{self.index}: {exc}") from None
        self._act(effects)
        return any(isinstance(e, CanJoinIsr) for e in effects)

    def update_follower_log_start(self, replica_id: int, log_start_offset: int) -> None:
        """A follower's fetch carried its log start offset (DeleteRecords waits for it)."""
        if self.follower_log_starts.get(replica_id) != log_start_offset:
            self.follower_log_starts[replica_id] = log_start_offset
            event, self.log_start_changed = self.log_start_changed, trio.Event()
            event.set()

    def isr_changes(self, now_ms: float) -> AlterIsr | None:
        """The ISR change due now (then pending), if any; see ReplicaState.isr_changes."""
        change = None
        for effect in self.state.isr_changes(now_ms):
            if isinstance(effect, AlterIsr):
                change = effect
            else:
                self._act([effect])
        return change

    def alter_failed(self, new_isr: tuple[int, ...], now_ms: float) -> None:
        self._act(self.state.alter_failed(new_isr, now_ms))

    def detach(self) -> None:
        """This broker stops serving the partition: acks=all waiters get NOT_LEADER_OR_FOLLOWER
        now (the client retries on the new leader) instead of at their request timeout."""
        self.detached = True
        self._signal()

    def _act(self, effects: list[Effect]) -> None:
        if any(isinstance(e, HighWatermarkChanged) for e in effects):
            # Decided transactions whose marker the HW passed no longer hold the LSO back.
            self.log.producer_state.on_high_watermark(self.high_watermark)
            self._signal()

    def _signal(self) -> None:
        event, self.hw_changed = self.hw_changed, trio.Event()
        event.set()
        self._on_high_watermark()

    def check_replicated(self, offset: int, leader_epoch: int) -> bool:
        """Whether a write ending before `offset`, appended in `leader_epoch`, is replicated
        (Kafka's checkEnoughReplicasReachOffset): True once the HW reached it, False while it
        waits. Raises NotEnoughReplicasAfterAppend if the maximal ISR fell below
        min.insync.replicas before it was replicated, NotLeaderOrFollower if this replica
        stopped leading (or changed epoch, or was detached) before."""
        if self.high_watermark >= offset:
            refusal = self.state.replicated_refusal()
            if refusal is not None:
                raise NotEnoughReplicasAfterAppend(f"{self.topic}-{self.index}: {refusal}")
            return True
        if not self.is_leader or self.leader_epoch != leader_epoch or self.detached:
            raise NotLeaderOrFollower(f"{self.topic}-{self.index}: leadership moved while waiting for replication")
        return False

    def replication_timed_out(self, offset: int) -> RequestTimedOut:
        """The error for a write ending before `offset` still unreplicated at its deadline."""
        return RequestTimedOut(
            f"{self.topic}-{self.index}: offset {offset} not replicated to the ISR before the request timed out "
            f"(high watermark {self.high_watermark}, ISR {list(self.isr)})"
        )

    async def wait_for_high_watermark(self, offset: int, deadline: float) -> None:
        """Wait until the HW reaches `offset` (`check_replicated`'s errors).

        Raises RequestTimedOut at `deadline` (trio clock: the request's arrival plus its
        timeout, however long it queued behind others). Produce waits in the purgatory
        instead (broker/replication/delayed_produce.py), with the same answers.
        """
        epoch = self.leader_epoch
        with trio.move_on_at(deadline):
            while not self.check_replicated(offset, epoch):
                await self.hw_changed.wait()
            return
        raise self.replication_timed_out(offset)

    # -- follower side ---------------------------------------------------------------

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        self._act(self.state.on_leader_high_watermark(leader_high_watermark, self.log.log_end_offset))

    def truncate_to(self, offset: int) -> None:
        if offset < self.log.log_end_offset:
            log.warning("partition.truncated", topic=self.topic, partition=self.index,
                        from_offset=self.log.log_end_offset, to_offset=offset, leader_epoch=self.leader_epoch)
            self.log.truncate_to(offset)
        self.state.on_truncate(self.log.log_end_offset)

    def log_restarted(self) -> None:
        """The log was emptied and restarted at a later offset (`truncate_fully_and_start_at`)."""
        self.state.on_truncate(self.log.log_end_offset)

    # -- reads ---------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, committed_only: bool = True,
             read_committed: bool = False, before: int | None = None) -> ReadInfo:
        """Whole batches from `offset`; consumers see only offsets below the high watermark,
        read_committed ones (isolation_level 1) only below the last stable offset; none
        starting at or past `before` (a share fetch's last acquired offset + 1)."""
        limit = self.high_watermark if committed_only else None
        if read_committed:
            limit = self.last_stable_offset
        if before is not None:
            limit = before if limit is None else min(limit, before)
        return self.log.read(offset, max_bytes, max_offset=limit)
