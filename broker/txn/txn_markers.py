"""The transaction coordinator's marker sender (Kafka's TransactionMarkerChannelManager).

After a PrepareCommit/PrepareAbort record is durable, the COMMIT/ABORT marker
must reach every partition of the transaction (`__consumer_offsets` ones
included). Each round groups the partitions still owed a marker by their
current leader (from the metadata image) and sends each leader ONE
WriteTxnMarkers v1 request carrying the markers of every transaction waiting on
it, over the inter-broker listener with its security (as the replica fetchers
connect). Per partition, the answer decides (docs/transactions.md):

- 0: done for that partition;
- 3, 6, 7, 19, 20, 56 (and a lost connection): retried after `retry.backoff.ms`,
  at whoever leads the partition by then;
- 47 INVALID_PRODUCER_EPOCH / 52 TRANSACTION_COORDINATOR_FENCED: a newer epoch or
  coordinator has moved on; this job is abandoned, as Kafka does;
- a partition whose topic was deleted needs no marker.

Once no partition is owed one, the coordinator writes CompleteCommit/CompleteAbort
(`on_done`). A job whose coordinator lost the `__transaction_state` partition, or
whose transaction moved on, is dropped (`is_current`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
import trio

from raftka.broker.net.peer_connections import PeerConnections
from raftka.broker.txn.txn_state import TV_2, TxnMetadata, TxnState
from raftka.client.protocol import ApiKey, ErrorCode

log = structlog.get_logger("broker.txn_markers")

RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms
REQUEST_TIMEOUT_S = 10.0
WRITE_TXN_MARKERS_VERSION = 2  # v2: each marker's transaction version (KIP-1228)
GIVE_UP = frozenset({int(ErrorCode.INVALID_PRODUCER_EPOCH), int(ErrorCode.TRANSACTION_COORDINATOR_FENCED)})


def _resent_v2_marker(job: MarkerJob, code: int) -> bool:
    """A transaction version 2 marker refused as not newer than the producer's epoch there is
    one this transaction already wrote (a resend after a lost answer or a coordinator move):
    the producer cannot have a newer epoch on that partition before this transaction
    completes, since its next transaction's partitions are added only after that."""
    return code == ErrorCode.INVALID_PRODUCER_EPOCH and job.meta.client_txn_version >= TV_2


@dataclass(eq=False)
class MarkerJob:
    meta: TxnMetadata  # in PrepareCommit or PrepareAbort
    partition_index: int  # its __transaction_state partition
    coordinator_epoch: int
    remaining: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.remaining:
            self.remaining = set(self.meta.partitions)

    @property
    def commit(self) -> bool:
        return self.meta.state is TxnState.PREPARE_COMMIT


class TxnMarkerSender:
    def __init__(self, replicas, on_done: Callable[[MarkerJob], Awaitable[bool]],
                 is_current: Callable[[MarkerJob], bool]) -> None:
        self.replicas = replicas
        self._on_done = on_done
        self._is_current = is_current
        self.jobs: dict[str, MarkerJob] = {}  # by transactional id: one decided transaction each
        self._wake = trio.Event()
        self._peers = PeerConnections(replicas, f"raftka-txn-coordinator-{replicas.node_id}", REQUEST_TIMEOUT_S)
        self._failing: set[int] = set()  # brokers whose last send failed (logged once, then debug)
        # One request in flight per broker, each on its own (a slow broker delays only its
        # partitions' markers); a broker that failed or asked for a retry waits out the backoff.
        self._in_flight: set[int] = set()
        self._retry_at: dict[int, float] = {}
        self._nursery: trio.Nursery | None = None

    def enqueue(self, job: MarkerJob) -> None:
        self.jobs[job.meta.transactional_id] = job
        self._wake.set()

    def drop_partition(self, index: int) -> None:
        for tid in [t for t, j in self.jobs.items() if j.partition_index == index]:
            del self.jobs[tid]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._peers.run)
            task_status.started()
            while True:
                self._wake = trio.Event()  # renewed first: a wake during the round is kept
                if not self.jobs:
                    await self._wake.wait()
                    continue
                if await self._round():
                    with trio.move_on_after(RETRY_BACKOFF_S):  # retry pacing, or news
                        await self._wake.wait()

    async def _round(self) -> bool:
        """Send what is owed, complete what is done. True if something waits for a retry."""
        for tid, job in list(self.jobs.items()):
            if not self._is_current(job):
                del self.jobs[tid]
        image = self.replicas.image
        by_leader: dict[int, list[tuple[MarkerJob, list[tuple[str, int]]]]] = {}
        waiting = False
        for job in list(self.jobs.values()):
            owed: dict[int, list[tuple[str, int]]] = {}
            for tp in sorted(job.remaining):
                topic = image.topic_by_name(tp[0])
                part = topic.partitions.get(tp[1]) if topic is not None else None
                if part is None:
                    job.remaining.discard(tp)  # deleted: no marker needed
                    continue
                if part.leader < 0 or not image.is_live(part.leader):
                    waiting = True
                    continue
                owed.setdefault(part.leader, []).append(tp)
            for leader, tps in owed.items():
                by_leader.setdefault(leader, []).append((job, tps))
        now = trio.current_time()
        for leader, work in by_leader.items():
            if leader in self._in_flight or self._retry_at.get(leader, 0.0) > now or self._nursery is None:
                waiting = True
                continue
            self._in_flight.add(leader)
            self._nursery.start_soon(self._send_task, leader, work)
        for tid, job in list(self.jobs.items()):
            if job.remaining or self.jobs.get(tid) is not job:
                continue
            if await self._on_done(job):
                if self.jobs.get(tid) is job:
                    del self.jobs[tid]
            else:
                waiting = True
        return waiting or any(j.remaining for j in self.jobs.values())

    async def _send_task(self, broker_id: int, work: list[tuple[MarkerJob, list[tuple[str, int]]]]) -> None:
        try:
            if not await self._send(broker_id, work):
                self._retry_at[broker_id] = trio.current_time() + RETRY_BACKOFF_S
        finally:
            self._in_flight.discard(broker_id)
            self._wake.set()

    async def _send(self, broker_id: int, work: list[tuple[MarkerJob, list[tuple[str, int]]]]) -> bool:
        """One WriteTxnMarkers to `broker_id`; False if it failed or a partition asked for a retry."""
        markers = []
        for job, tps in work:
            topics: dict[str, list[int]] = {}
            for topic, index in tps:
                topics.setdefault(topic, []).append(index)
            markers.append({"producer_id": job.meta.producer_id, "producer_epoch": job.meta.producer_epoch,
                            "transaction_result": job.commit, "coordinator_epoch": job.coordinator_epoch,
                            "transaction_version": TV_2 if job.meta.client_txn_version >= TV_2 else 0,
                            "topics": [{"name": t, "partition_indexes": p} for t, p in topics.items()]})
        try:
            conn = await self._peers.get(broker_id)
            if conn is None:
                return False
            response = await conn.request(ApiKey.WRITE_TXN_MARKERS, {"markers": markers},
                                          version=WRITE_TXN_MARKERS_VERSION)
        except Exception as exc:  # KafkaError, OSError, a malformed answer: retry at the next round
            (log.debug if broker_id in self._failing else log.info)(
                "txn_markers.send_failed", broker=broker_id, markers=len(markers), error=str(exc))
            self._failing.add(broker_id)
            await self._peers.drop(broker_id)
            return False
        self._failing.discard(broker_id)
        by_pid = {job.meta.producer_id: job for job, _ in work}
        done = True
        for result in response.markers:
            job = by_pid.get(result.producer_id)
            if job is None:
                continue
            for topic in result.topics:
                for part in topic.partitions:
                    tp = (topic.name, part.partition_index)
                    code = part.error_code
                    if code == 0 or _resent_v2_marker(job, code):
                        job.remaining.discard(tp)
                    elif code in GIVE_UP:
                        log.warning("txn_markers.abandoned", transactional_id=job.meta.transactional_id,
                                    producer_id=job.meta.producer_id, producer_epoch=job.meta.producer_epoch,
                                    topic=tp[0], partition=tp[1], error=ErrorCode(code).name)
                        if self.jobs.get(job.meta.transactional_id) is job:
                            del self.jobs[job.meta.transactional_id]
                    else:
                        done = False
                        log.debug("txn_markers.retry", broker=broker_id, topic=tp[0], partition=tp[1], error=code)
        return done
