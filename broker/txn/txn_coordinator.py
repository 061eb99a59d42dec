"""The transaction coordinator: the trio shell around broker/txn/txn_state.py and `__transaction_state`.

This broker coordinates the transactional ids that hash (Kafka's rule) to a
`__transaction_state` partition it leads; that partition's leader epoch is the
`coordinator_epoch` its markers carry. On becoming leader of one it replays it
(requests for its ids get COORDINATOR_LOAD_IN_PROGRESS meanwhile), then resends
the markers of every transaction found in PrepareCommit/PrepareAbort; on losing
it, it drops those ids and their marker jobs, and requests get NOT_COORDINATOR.

Every state change is one record written with acks=all before the request is
answered (a write in flight marks the id `pending`: CONCURRENT_TRANSACTIONS
meanwhile). After a PrepareCommit/PrepareAbort is durable the marker sender
(broker/txn/txn_markers.py) writes the markers and then the CompleteCommit/
CompleteAbort record. A timer task aborts expired transactions every
`transaction.abort.timed.out.transaction.cleanup.interval.ms` and removes ids idle
for `transactional.id.expiration.ms`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
import trio

from raftka.broker.group.group_coordinator import CoordinatorError, InternalTopic, append_error_code
from raftka.broker.group.group_metadata_manager import append_and_wait, log_batches
from raftka.broker.replication.partition import Partition
from raftka.broker.replication.replica_manager import ReplicaManager
from raftka.broker.txn import txn_state as ts
from raftka.broker.txn.txn_markers import MarkerJob, TxnMarkerSender
from raftka.broker.txn.txn_records import (
    TRANSACTION_STATE_TOPIC,
    TxnLogValue,
    decode_txn_key,
    decode_txn_value,
    partition_for_txn,
    txn_key,
    txn_value,
)
from raftka.broker.txn.txn_state import Decision, TxnMetadata, TxnState
from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config.node_config import NodeConfig

log = structlog.get_logger("broker.txn_coordinator")

WRITE_TIMEOUT_S = 5.0  # Kafka appends with request.timeout.ms
# raftka's bound on one transaction's partition set (its record must stay one small batch).
MAX_PARTITIONS_PER_TXN = 10_000

NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
LOAD_IN_PROGRESS = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
NOT_AVAILABLE = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)


def wall_ms() -> int:
    """Transaction timestamps are wall-clock milliseconds, as Kafka stores and shows them."""
    return int(time.time() * 1000)


@dataclass
class _Load:
    token: int
    coordinator_epoch: int
    loaded: bool = False


@dataclass(frozen=True)
class InitResult:
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


class TxnCoordinator:
    def __init__(self, config: NodeConfig, replicas: ReplicaManager,
                 create_topic: Callable[[int, int, dict[str, str]], Awaitable[None]],
                 next_producer_id: Callable[[], Awaitable[int]]) -> None:
        self.config = config
        self.replicas = replicas
        self._topic = InternalTopic(TRANSACTION_STATE_TOPIC, replicas, config.node_id)
        self._create_topic = create_topic
        self._next_producer_id = next_producer_id
        self.txns: dict[str, TxnMetadata] = {}
        self._loads: dict[int, _Load] = {}
        self._tokens = 0
        self._load_send, self._load_recv = trio.open_memory_channel[tuple[Partition, int]](math.inf)
        self.markers = TxnMarkerSender(replicas, self._on_markers_done, self._job_current)
        self._nursery: trio.Nursery | None = None

    # --- leadership of __transaction_state partitions -------------------------------------
    def on_leadership(self, partition: Partition, is_leader: bool) -> None:
        """ReplicaManager leadership listener (synchronous): start or drop a load."""
        if partition.topic != TRANSACTION_STATE_TOPIC:
            return
        self._tokens += 1
        self._drop_partition(partition.index)
        if is_leader:
            self._loads[partition.index] = _Load(self._tokens, partition.leader_epoch)
            self._load_send.send_nowait((partition, self._tokens))
        else:
            self._loads.pop(partition.index, None)

    def _drop_partition(self, index: int) -> None:
        count = self._topic.partition_count()
        dropped = [tid for tid in self.txns if count and partition_for_txn(tid, count) == index]
        for tid in dropped:
            del self.txns[tid]
        self.markers.drop_partition(index)
        if dropped:
            log.info("txn.partition_unloaded", partition=index, transactional_ids=len(dropped))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.markers.run)
            nursery.start_soon(self._every, self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                               self.abort_timed_out)
            nursery.start_soon(self._every, self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                               self.remove_expired)
            task_status.started()
            async for partition, token in self._load_recv:
                nursery.start_soon(self._load, partition, token)

    async def _load(self, partition: Partition, token: int) -> None:
        started = trio.current_time()
        try:
            loaded = await load_txn_partition(partition)
        except Exception:
            log.exception("txn.load_failed", partition=partition.index)
            return
        load = self._loads.get(partition.index)
        if load is None or load.token != token:
            return  # leadership moved while loading
        self.txns.update(loaded)
        load.loaded = True
        resumed = 0
        for meta in loaded.values():
            if meta.state in ts.PREPARED:
                self.markers.enqueue(MarkerJob(meta, partition.index, load.coordinator_epoch))
                resumed += 1
        log.info("txn.partition_loaded", partition=partition.index, transactional_ids=len(loaded),
                 markers_resumed=resumed, coordinator_epoch=load.coordinator_epoch,
                 seconds=round(trio.current_time() - started, 3))

    # --- lookup ------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return partition_for_txn(transactional_id, self._topic.existing_partition_count())

    async def ensure_topic(self) -> None:
        """Create `__transaction_state` if missing (the first FindCoordinator does, as in Kafka).
        The replication factor is capped by the live brokers, as for `__consumer_offsets`, and
        min.insync.replicas by the replication factor (a one-broker cluster still works)."""
        if self._topic.partition_count():
            return
        live = len(self.replicas.image.live_brokers())
        rf = max(1, min(self.config.transaction_state_log_replication_factor, live))
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(min(self.config.transaction_state_log_min_isr, rf)),
            "segment.bytes": str(self.config.transaction_state_log_segment_bytes),
        }
        await self._create_topic(self.config.transaction_state_log_num_partitions, rf, configs)

    def _owned(self, transactional_id: str) -> tuple[int, _Load]:
        """(partition index, its load) if this broker coordinates `transactional_id`, else
        CoordinatorError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...)."""
        index = self.partition_for(transactional_id)
        return index, self._topic.check_served(index, self._loads.get(index), f" (transactional id {transactional_id!r})")

    def _meta(self, transactional_id: str) -> TxnMetadata | None:
        self._owned(transactional_id)
        return self.txns.get(transactional_id)

    # --- writes ------------------------------------------------------------------------------
    async def _write(self, decision: Decision) -> int:
        """Persist `decision.write` with acks=all, then make it the id's metadata (and start its
        markers). The error code the request gets for the write (0 once durable)."""
        new = decision.write
        assert new is not None
        tid = new.transactional_id
        try:
            index, load = self._owned(tid)
        except CoordinatorError as exc:
            return exc.code
        before = self.txns.get(tid)
        self.txns[tid] = dataclasses.replace(before or new, pending=new.state)
        code = 0
        try:
            partition = self.replicas.partitions.get((TRANSACTION_STATE_TOPIC, index))
            if partition is None or not partition.is_leader or partition.leader_epoch != load.coordinator_epoch:
                code = NOT_COORDINATOR
            else:
                await append_and_wait(partition, [(txn_key(tid), encode_metadata(new))], WRITE_TIMEOUT_S)
        except Exception as exc:
            code = append_error_code(exc)
            log.info("txn.write_failed", transactional_id=tid, state=new.state.display_name, error=str(exc))
        if self._loads.get(index) is not load:
            return NOT_COORDINATOR  # leadership moved during the write: the new leader replays it
        if code:
            if before is None:
                self.txns.pop(tid, None)
            else:
                self.txns[tid] = before
            return code
        if new.state is TxnState.DEAD:
            self.txns.pop(tid, None)
        else:
            self.txns[tid] = new
        log.debug("txn.state_written", transactional_id=tid, producer_id=new.producer_id,
                 producer_epoch=new.producer_epoch, state=new.state.display_name,
                 partitions=len(new.partitions))
        if decision.send_markers:
            self.markers.enqueue(MarkerJob(new, index, load.coordinator_epoch))
        return 0

    async def _decide(self, decision: Decision) -> int:
        if decision.write is None:
            return decision.error
        code = await self._write(decision)
        return code or decision.retry_error

    # --- the client APIs ---------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> InitResult:
        kwargs = dict(expected_pid=producer_id, expected_epoch=producer_epoch,
                      max_timeout_ms=self.config.transaction_max_timeout_ms)
        new_pid: int | None = None
        while True:
            try:
                meta = self._meta(transactional_id) if transactional_id else None
            except CoordinatorError as exc:
                return InitResult(exc.code)
            try:
                decision = ts.init_producer_id(meta, transactional_id, timeout_ms, now_ms=wall_ms(),
                                               new_producer_id=new_pid, **kwargs)
                break
            except ts.NeedProducerId:
                try:
                    new_pid = await self._next_producer_id()
                except Exception as exc:
                    log.warning("txn.producer_id_unavailable", error=str(exc))
                    return InitResult(NOT_AVAILABLE)
        code = await self._decide(decision)
        if code:
            return InitResult(code)
        current = self.txns.get(transactional_id)
        if current is None:
            return InitResult(NOT_COORDINATOR)
        return InitResult(0, current.producer_id, current.producer_epoch)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: frozenset[tuple[str, int]], client_txn_version: int = ts.TV_1) -> int:
        try:
            meta = self._meta(transactional_id) if transactional_id else None
        except CoordinatorError as exc:
            return exc.code
        if meta is not None and len(meta.partitions | partitions) > MAX_PARTITIONS_PER_TXN:
            log.warning("txn.too_many_partitions", transactional_id=transactional_id,
                        partitions=len(meta.partitions | partitions), limit=MAX_PARTITIONS_PER_TXN)
            return int(ErrorCode.INVALID_REQUEST)
        return await self._decide(ts.add_partitions(meta, transactional_id, producer_id, producer_epoch,
                                                    partitions, wall_ms(), client_txn_version))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: frozenset[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        try:
            meta = self._meta(transactional_id) if transactional_id else None
        except CoordinatorError as exc:
            return exc.code, {}
        return ts.verify_partitions(meta, transactional_id, producer_id, producer_epoch, partitions)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      client_txn_version: int = ts.TV_1) -> InitResult:
        """EndTxn: the error, and (transaction version 2) the producer id/epoch to go on with."""
        new_pid: int | None = None
        while True:
            try:
                meta = self._meta(transactional_id) if transactional_id else None
            except CoordinatorError as exc:
                return InitResult(exc.code)
            try:
                decision = ts.end_txn(meta, transactional_id, producer_id, producer_epoch, commit, wall_ms(),
                                      client_txn_version, new_pid)
                break
            except ts.NeedProducerId:  # the epoch overflows at this commit/abort (transaction version 2)
                try:
                    new_pid = await self._next_producer_id()
                except Exception as exc:
                    log.warning("txn.producer_id_unavailable", error=str(exc))
                    return InitResult(NOT_AVAILABLE)
        code = await self._decide(decision)
        if code:
            return InitResult(code)
        if decision.write is not None:
            log.debug("txn.ended", transactional_id=transactional_id, producer_id=producer_id,
                      producer_epoch=producer_epoch, committed=commit, client_txn_version=client_txn_version)
            pid, epoch = ts.end_txn_answer(decision.write)
            return InitResult(0, pid, epoch)
        current = self.txns.get(transactional_id)  # a retry: the id/epoch as they are now
        if current is None:
            return InitResult(NOT_COORDINATOR)
        return InitResult(0, current.producer_id, current.producer_epoch)

    def describe(self, transactional_id: str) -> tuple[int, TxnMetadata | None]:
        try:
            meta = self._meta(transactional_id)
        except CoordinatorError as exc:
            return exc.code, None
        if meta is None or meta.state is TxnState.DEAD:
            return int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND), None
        return 0, meta

    def list_transactions(self) -> tuple[int, list[TxnMetadata]]:
        """Every transaction this broker coordinates (COORDINATOR_LOAD_IN_PROGRESS while any
        partition loads, as in Kafka); Dead ones are never listed."""
        if any(not load.loaded for load in self._loads.values()):
            return LOAD_IN_PROGRESS, []
        return 0, [m for m in self.txns.values() if m.state is not TxnState.DEAD]

    # --- markers ------------------------------------------------------------------------------
    def _job_current(self, job: MarkerJob) -> bool:
        """Is `job` still this coordinator's business (same leadership, same transaction)?"""
        load = self._loads.get(job.partition_index)
        current = self.txns.get(job.meta.transactional_id)
        return (load is not None and load.loaded and load.coordinator_epoch == job.coordinator_epoch
                and current is not None and current.state is job.meta.state
                and current.producer_id == job.meta.producer_id
                and current.producer_epoch == job.meta.producer_epoch)

    async def _on_markers_done(self, job: MarkerJob) -> bool:
        """Every marker of `job` is written: record the completion. False to retry later."""
        if not self._job_current(job):
            return True
        current = self.txns[job.meta.transactional_id]
        if current.pending is not None:
            return False
        code = await self._write(Decision(write=ts.complete(current, wall_ms())))
        if code in (0, NOT_COORDINATOR):
            return True
        log.info("txn.complete_retry", transactional_id=job.meta.transactional_id, error=code)
        return False

    # --- timers ---------------------------------------------------------------------------------
    async def _every(self, interval_ms: int, action: Callable[[int], Awaitable[None]]) -> None:
        while True:
            await trio.sleep(interval_ms / 1000.0)  # Kafka's periodic scheduler, not synchronisation
            await action(wall_ms())

    async def abort_timed_out(self, now_ms: int) -> None:
        for tid in list(self.txns):
            meta = self.txns.get(tid)  # re-read: an earlier write in this loop yielded
            decision = ts.timed_out(meta, now_ms) if meta is not None else None
            if decision is None or not self._serves(tid):
                continue
            assert meta is not None
            log.info("txn.timed_out", transactional_id=tid, producer_id=meta.producer_id,
                     producer_epoch=meta.producer_epoch, started_ms=meta.start_ms, timeout_ms=meta.timeout_ms)
            await self._write(decision)

    async def remove_expired(self, now_ms: int) -> None:
        for tid in list(self.txns):
            meta = self.txns.get(tid)  # re-read: an earlier write in this loop yielded
            if (meta is None or not ts.expired(meta, now_ms, self.config.transactional_id_expiration_ms)
                    or not self._serves(tid)):
                continue
            code = await self._write(Decision(write=meta.to(TxnState.DEAD, now_ms)))
            if code == 0:
                log.info("txn.id_expired", transactional_id=tid, producer_id=meta.producer_id)

    def _serves(self, transactional_id: str) -> bool:
        try:
            self._owned(transactional_id)
            return True
        except CoordinatorError:
            return False


def encode_metadata(meta: TxnMetadata) -> bytes | None:
    """The record value for `meta` (None: a tombstone, for Dead)."""
    if meta.state is TxnState.DEAD:
        return None
    value = TxnLogValue(meta.producer_id, meta.producer_epoch, meta.timeout_ms, int(meta.state),
                        meta.partitions, meta.update_ms, meta.start_ms, meta.last_producer_id,
                        meta.next_producer_id, meta.client_txn_version)
    return txn_value(value, partitions_null=meta.state is TxnState.EMPTY)


async def load_txn_partition(partition: Partition) -> dict[str, TxnMetadata]:
    """Every transactional id stored in `partition` (last record wins; a tombstone removes).
    An undecodable batch or record is logged and skipped; an unreadable log ends the load
    there, as for `__consumer_offsets` (broker/group/group_metadata_manager.py)."""
    txns: dict[str, TxnMetadata] = {}
    async for batch in log_batches(partition):
        if batch.header.is_control:
            continue
        for record in batch.records:
            if record.key is None:
                continue
            try:
                tid = decode_txn_key(record.key)
                if record.value is None:
                    txns.pop(tid, None)
                    continue
                v = decode_txn_value(record.value)
                txns[tid] = ts.from_log(tid, v.producer_id, v.producer_epoch, v.timeout_ms, v.status,
                                        v.partitions, v.update_ms, v.start_ms,
                                        previous_producer_id=v.previous_producer_id,
                                        next_producer_id=v.next_producer_id,
                                        client_txn_version=v.client_txn_version)
            except ValueError as exc:
                log.warning("txn.bad_record", partition=partition.index, offset=record.offset, error=str(exc))
    return txns
