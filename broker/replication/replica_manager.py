"""The partitions this broker hosts, kept in step with the metadata image.

`publish(delta, image)` is a metadata publisher (synchronous, called after
every applied record): it opens the logs of partitions assigned to this
broker, hands each its role and epochs, starts or stops replica fetchers,
and deletes the logs of removed topics. Handlers find partitions here.

`run()` owns the background work: the replica fetchers, ISR maintenance
(shrink after `replica.lag.time.max.ms`, expand when a follower catches up,
both through AlterPartition at the controller), the reconcile task, and the
LogManager's loops (broker/replication/log_manager.py: log dirs, file work in
worker threads, retention and compaction, the high-watermark checkpoint).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
import trio

from raftka.broker.metrics import BrokerMetrics
from raftka.broker.replication.log_manager import (
    OPEN_FAILED,
    RECONCILE_BATCH,
    RECONCILE_RETRY_S,
    LogManager,
)
from raftka.broker.replication.partition import NotLeaderOrFollower, Partition
from raftka.broker.replication.purgatory import DelayedOperationPurgatory
from raftka.broker.replication.replica_fetcher import ReplicaFetcherManager
from raftka.broker.replication.replication_quota import ReplicationQuotas
from raftka.client.protocol import ErrorCode
from raftka.log.append_origin import AppendOrigin
from raftka.log.partition_log import PartitionLog
from raftka.raft_meta.config.node_config import NodeConfig
from raftka.raft_meta.config.topic_configs import (
    TopicConfig,
    effective_topic_config,
    topic_overrides,
)
from raftka.raft_meta.controller.controller_errors import ControllerError
from raftka.raft_meta.metadata.image import MetadataDelta, MetadataImage, PartitionImage

if TYPE_CHECKING:
    from raftka.broker.replication.append import AppendResult, Records
    from raftka.broker.txn.txn_verification import TxnOperation, TxnVerifier

log = structlog.get_logger("broker.replica_manager")

AlterPartition = Callable[[Partition, tuple[int, ...]], Awaitable[None]]
T = TypeVar("T")
L = TypeVar("L")


class UnknownTopicOrPartition(Exception):
    code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def _now_ms() -> float:
    return trio.current_time() * 1000.0


class ReplicaManager:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Directories, file work in worker threads, the background loops and the HW checkpoint.
        self.log_manager = LogManager(config, self.partitions, self._assigned_if_caught_up)
        self.log_dirs = self.log_manager.log_dirs
        self.image = MetadataImage()
        self.fetchers = ReplicaFetcherManager(self)
        self.metrics = BrokerMetrics()  # counters for the metrics endpoint (broker/metrics.py)
        self.quotas = ReplicationQuotas.from_config(config)  # KIP-73 throttles (broker/replication/replication_quota.py)
        self._alter_partition: AlterPartition | None = None
        # Set whenever any partition's high watermark or role changes (consumer long-polls).
        self._data_event = trio.Event()
        # Set whenever a leader appends (follower long-polls).
        self._append_event = trio.Event()
        self._isr_wake = trio.Event()
        self._leadership_listeners: list[Callable[[Partition, bool], None]] = []
        self._settings_cache: dict[tuple[tuple[str, str], ...], TopicConfig] = {}
        self._caught_up = False  # see catch_up
        self._deferral_logged = False
        # The reconcile task's state (see publish / _reconcile_loop).
        self._pending: set[tuple[str, int]] = set()  # touched since the last pass
        self._opening: dict[tuple[str, int], str] = {}  # queued to open -> topic id
        self._file_jobs: deque[tuple[str, Any]] = deque()  # ("open", (key, id)) / ("delete", log)
        self._file_wake = trio.Event()
        self._file_busy = False
        self._installed = trio.Event()  # set (and replaced) by each publish and each batch of logs opened
        self._work = trio.Event()
        self._idle = True
        self._idle_event = trio.Event()
        self._locks = self.log_manager.locks
        self.produce_purgatory = DelayedOperationPurgatory("Produce")  # acks=all waits (delayed_produce.py)

    def add_leadership_listener(self, listener: Callable[[Partition, bool], None]) -> None:
        """`listener(partition, is_leader)` after this broker starts or stops leading a partition
        (a new leader epoch counts as a new start). Called synchronously from `publish`: keep it quick,
        hand longer work to a task."""
        self._leadership_listeners.append(listener)

    def _notify_leadership(self, partition: Partition, is_leader: bool) -> None:
        for listener in self._leadership_listeners:
            try:
                listener(partition, is_leader)
            except Exception:
                log.exception("leadership_listener.failed", topic=partition.topic, partition=partition.index)

    # -- metadata publisher ------------------------------------------------------

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Record the desired state: the latest image and the partitions this delta touched.

        Called on the event loop after every committed record; it does no file work. The
        reconcile task (`_reconcile_loop`) applies the changes: roles and epochs of open
        partitions at once, log opening and deletion in worker threads."""
        self.image = image
        event, self._installed = self._installed, trio.Event()
        event.set()
        if not self._caught_up:
            if not self._deferral_logged:
                self._deferral_logged = True
                log.info("replicas.roles_deferred", node_id=self.node_id, metadata_offset=image.offset,
                         reason="metadata not yet caught up with the quorum")
            return
        if not delta.accepted:
            return
        touched: set[tuple[str, int]] = set()
        for topic in delta.removed_topics:
            touched.update(key for key in self.partitions if key[0] == topic.name)
            touched.update(key for key in self._opening if key[0] == topic.name)
        for topic_id, index in delta.partitions:
            topic = image.topics.get(topic_id)
            if topic is not None:
                touched.add((topic.name, index))
        if not delta.partitions:
            # A topic-level change: all its partitions. (A partition record names its topic
            # too, but touches only its own partition: re-applying the whole topic for each
            # of a new topic's N partition records made creating it O(N^2).)
            for topic_id in delta.topics:
                topic = image.topics.get(topic_id)
                if topic is not None:
                    touched.update((topic.name, p) for p in topic.partitions)
        for kind, name in delta.configs:
            topic = image.topic_by_name(name) if kind == "topic" else None
            if topic is not None:
                touched.update((name, p) for p in topic.partitions)
            elif kind == "cluster" or (kind == "broker" and name == str(self.node_id)):
                touched.update(self.partitions)  # a dynamic broker default: every hosted partition
        if delta.brokers:
            # As follower: a leader's endpoint may have changed (re-registration). As leader: a
            # follower fenced (shutting down, or its process gone) or unfenced changes what the
            # HW and the ISR may wait for (KIP-841), at once.
            touched.update(p.key for p in self.partitions.values()
                           if (p.is_leader and not delta.brokers.isdisjoint(p.replicas))
                           or (p.leader in delta.brokers and not p.is_leader))
        if touched:
            self._want(touched)

    def _want(self, keys: set[tuple[str, int]]) -> None:
        self._pending |= keys
        self._idle = False
        self._work.set()

    async def catch_up(self) -> None:
        """Take partition roles for the first time, from the current image.

        Until this is called, `publish` only records the image: what a node replays from the
        metadata log at start passes through epochs the cluster has long left (its topic
        creation may make it leader at epoch 0), and acting on those would lead, and accept
        writes, at a stale epoch. The node calls this once its image includes its own
        registration, a record the quorum committed after everything it knew then (Kafka
        brokers likewise start their publishers only after catching up with the metadata log).

        First, partition directories the image does not give this broker (a topic deleted
        while it was down), or that hold an earlier incarnation of a topic re-created under
        the same name, are renamed aside with Kafka's `-stray` suffix and kept (in a worker
        thread; log/strays.py): an inference from the image is no proof that the data is
        garbage, so an operator decides (`raftka storage strays`). The log dirs, the metadata
        dir and its `__cluster_metadata-0` are never strays. Then every assigned partition is
        handed to the reconcile task; `wait_reconciled` waits for their logs to be open."""
        await self.log_manager.move_strays_aside(self._assigned(self.image))
        image = self.image
        self._caught_up = True
        log.info("replicas.caught_up", node_id=self.node_id, metadata_offset=image.offset)
        self._want({(topic.name, index) for topic in image.topics.values() for index in topic.partitions})

    async def wait_reconciled(self) -> None:
        """Return once every change published so far is applied (logs open, deletions renamed)."""
        while not self._idle:
            event = self._idle_event
            await event.wait()

    async def wait_topics_ready(self, names: list[str], timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until the image has these topics and every partition of
        theirs assigned to this broker is open here; True if they are. CreateTopics and
        CreatePartitions answer after this, so a client that writes at once on a one-node
        cluster finds its partitions ready (elsewhere it gets retriable errors meanwhile)."""
        with trio.move_on_after(timeout_s):
            while not self._topics_ready(names):
                await self._installed.wait()
            return True
        return False

    def _topics_ready(self, names: list[str]) -> bool:
        for name in names:
            topic = self.image.topic_by_name(name)
            if topic is None:
                return False
            for index, part in topic.partitions.items():
                if self.node_id in part.replicas:
                    hosted = self.partitions.get((name, index))
                    if hosted is None or hosted.topic_id != topic.topic_id:
                        return False
        return True

    def assigned_partitions(self) -> dict[tuple[str, int], str]:
        """(topic, partition) -> topic id of every partition the current image gives this broker."""
        return self._assigned(self.image)

    def _assigned_if_caught_up(self) -> dict[tuple[str, int], str] | None:
        """What the image assigns this broker, once caught up; None before (not known yet)."""
        return self._assigned(self.image) if self._caught_up else None

    def _assigned(self, image: MetadataImage) -> dict[tuple[str, int], str]:
        """(topic, partition) -> topic id, for every partition the image gives this broker."""
        return {(topic.name, index): topic_id
                for topic_id, topic in image.topics.items()
                for index, part in topic.partitions.items() if self.node_id in part.replicas}

    def _desired(self, image: MetadataImage, key: tuple[str, int]) -> tuple[str | None, PartitionImage | None]:
        """(topic id, partition image) if the image assigns `key` to this broker; the topic id
        alone if the topic exists but this broker is not a replica; (None, None) if it is gone."""
        topic = image.topic_by_name(key[0])
        if topic is None:
            return None, None
        part_image = topic.partitions.get(key[1])
        if part_image is None or self.node_id not in part_image.replicas:
            return topic.topic_id, None
        return topic.topic_id, part_image

    # -- the reconcile task ------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        """Apply the recorded changes, in the order they were published.

        Each pass takes every partition touched since the last one and compares it with the
        latest image: roles and epochs of open partitions are applied at once (on the event
        loop, no file work), a partition of a removed (or re-created) topic is detached at
        once, and file work is queued for `_file_loop`: close the old log and rename it, open
        (or create) a newly assigned one. A pass never waits for file work, so role changes
        never wait behind opening 2000 logs."""
        while True:
            if not self._pending:
                self._check_idle()
                await self._work.wait()
            self._work = trio.Event()
            try:
                self._reconcile_pending()
            except Exception:  # one bad pass must not end reconciliation for good
                log.exception("replicas.reconcile_failed")
                await trio.sleep(RECONCILE_RETRY_S)

    def _check_idle(self) -> None:
        if not self._pending and not self._file_jobs and not self._file_busy:
            self._idle = True
            event, self._idle_event = self._idle_event, trio.Event()
            event.set()

    def _reconcile_pending(self) -> None:
        keys, self._pending = self._pending, set()
        image = self.image
        doomed: list[PartitionLog] = []
        opens: list[tuple[str, Any]] = []
        for key in sorted(keys):
            topic_id, part_image = self._desired(image, key)
            partition = self.partitions.get(key)
            if partition is not None and partition.topic_id != topic_id:
                doomed.append(self._detach(partition).log)  # removed, or an earlier incarnation
                log.info("partition.deleted", topic=key[0], partition=key[1])
                partition = None
            if partition is not None:
                if part_image is not None:
                    self._apply_role(partition, image, part_image)
                else:  # reassigned away: stop serving it and delete its log, as Kafka's StopReplica does
                    doomed.append(self._detach(partition).log)
                    log.info("partition.reassigned_away", topic=key[0], partition=key[1], node_id=self.node_id)
            elif part_image is not None and self._opening.get(key) != topic_id:
                assert topic_id is not None
                self._opening[key] = topic_id
                opens.append(("open", (key, topic_id)))
        if doomed:
            self._wake()
        # Deletions first: a re-created topic's log opens only once the old directory has
        # been renamed away.
        self._file_jobs.extend(("delete", plog) for plog in doomed)
        self._file_jobs.extend(opens)
        if self._file_jobs:
            self._file_wake.set()

    async def _file_loop(self) -> None:
        """The queued file work, in order, in batches: consecutive opens (or deletions), up
        to `RECONCILE_BATCH` of them, go to one worker-thread call."""
        while True:
            if not self._file_jobs:
                self._file_busy = False
                self._check_idle()
                await self._file_wake.wait()
                self._file_wake = trio.Event()
                continue
            self._file_busy = True
            kind = self._file_jobs[0][0]
            batch = []
            while self._file_jobs and self._file_jobs[0][0] == kind and len(batch) < RECONCILE_BATCH:
                batch.append(self._file_jobs.popleft()[1])
            try:
                if kind == "open":
                    await self._open_batch(batch)
                else:
                    await self.log_manager.delete_logs(batch)
            except Exception:
                log.exception("replicas.file_work_failed", kind=kind, partitions=len(batch))
                await trio.sleep(RECONCILE_RETRY_S)

    def _detach(self, partition: Partition) -> Partition:
        """Stop serving a partition at once (requests get UNKNOWN_TOPIC_OR_PARTITION); its files go later."""
        del self.partitions[partition.key]
        partition.detach()
        self.fetchers.remove(partition)
        if partition.is_leader:
            self._notify_leadership(partition, False)
        return partition

    def _apply_role(self, partition: Partition, image: MetadataImage, part_image: PartitionImage) -> None:
        settings = self._topic_settings(topic_overrides(image, self.node_id, partition.topic))
        partition.log.config = settings.log
        was_leader = partition.is_leader
        ineligible = tuple(r for r in part_image.replicas if not image.is_live(r))
        became_leader, became_follower = partition.apply_image(part_image, settings.min_insync_replicas,
                                                               _now_ms(), ineligible)
        if became_leader:
            self._notify_leadership(partition, True)
        elif was_leader and not partition.is_leader:
            self._notify_leadership(partition, False)
        if partition.is_leader:
            self.fetchers.remove(partition)
        elif part_image.leader >= 0:
            self.fetchers.add(partition, restart=became_follower)
        else:
            self.fetchers.remove(partition)
        self._wake()
        self._wake_append()

    async def _open_batch(self, batch: list[tuple[tuple[str, int], str]]) -> None:
        """Open (or create) a batch of logs in one worker-thread call, then install the ones the
        latest image still assigns here; a log opened for a topic deleted meanwhile is deleted."""
        image = self.image
        jobs = []
        for key, topic_id in batch:
            if key in self.partitions or self._desired(image, key)[0] != topic_id:
                self._opened(key, topic_id)
                continue  # installed meanwhile, or deleted / re-created before we got to it
            settings = self._topic_settings(topic_overrides(image, self.node_id, key[0]))
            jobs.append((key, topic_id, self.log_manager.dir_for(key), settings.log))
        if not jobs:
            return
        opened = await self.log_manager.open_logs(jobs)
        image = self.image
        stale: list[PartitionLog] = []
        failed = []
        for (key, topic_id, _, _), plog in zip(jobs, opened, strict=True):
            self._opened(key, topic_id)
            if plog is OPEN_FAILED:
                failed.append((key, topic_id))
                continue
            if plog is None:
                continue  # another incarnation's directory: logged by LogManager.open_logs
            _, part_image = self._desired(image, key)
            if key in self.partitions or part_image is None or self._desired(image, key)[0] != topic_id:
                stale.append(plog)
                continue
            settings = self._topic_settings(topic_overrides(image, self.node_id, key[0]))
            plog.config = settings.log
            plog.on_roll = plog.epoch_cache.on_deferred = functools.partial(self.log_manager.request_flush, key)
            partition = Partition(key[0], topic_id, key[1], self.node_id, plog, self._wake,
                                  on_append=self._wake_append,
                                  high_watermark=self.log_manager.take_checkpointed_high_watermark(key),
                                  lag_ms=self.config.replica_lag_time_max_ms)
            self.partitions[key] = partition
            self._apply_role(partition, image, part_image)
        event, self._installed = self._installed, trio.Event()
        event.set()
        if stale:
            await self.log_manager.delete_logs(stale)
        if failed:  # e.g. EMFILE: try again after a pause, unless the image moved on meanwhile
            await trio.sleep(RECONCILE_RETRY_S)
            for key, topic_id in failed:
                if key not in self.partitions and self._desired(self.image, key)[0] == topic_id \
                        and self._opening.get(key) != topic_id:
                    self._opening[key] = topic_id
                    self._file_jobs.append(("open", (key, topic_id)))
            self._file_wake.set()

    def _opened(self, key: tuple[str, int], topic_id: str) -> None:
        if self._opening.get(key) == topic_id:
            del self._opening[key]

    # -- file work on a hosted partition (worker threads, under the LogManager's lock) ----------

    async def delete_records(self, partition: Partition, offset: int) -> None:
        """DeleteRecords on the leader: move the log start to `offset` (whole segments below it
        go; the checkpoint is written) in a worker thread under the partition's lock, then wake
        the fetches so followers hear of the new log start at once."""
        async with self._locks.hold([partition.key]):
            await trio.to_thread.run_sync(partition.log.increment_log_start_offset, offset)
        self._wake()

    async def truncate(self, partition: Partition, offset: int, leader_epoch: int) -> bool:
        """Truncate a follower's log in a worker thread under the partition's lock; `offset` was
        worked out at `leader_epoch`. False (nothing cut) if, by the time the lock is held, the
        partition was deleted, or this broker leads it, or its leader epoch moved: the offset
        belongs to an epoch it has left, and cutting by it could remove acknowledged records."""
        async with self._locks.hold([partition.key]):
            if self.partitions.get(partition.key) is not partition:
                return False  # deleted meanwhile
            if partition.is_leader or partition.leader_epoch != leader_epoch:
                log.info("partition.truncation_skipped", topic=partition.topic, partition=partition.index,
                         offset=offset, asked_at_leader_epoch=leader_epoch, leader_epoch=partition.leader_epoch,
                         is_leader=partition.is_leader)
                return False
            await trio.to_thread.run_sync(partition.truncate_to, offset)
            return True

    async def read_log(self, partition: Partition, locate: Callable[[PartitionLog], L | None],
                       read: Callable[[L], T]) -> T | None:
        """A lookup in the log's files (ListOffsets by timestamp) under the partition's lock, so no
        truncation, retention or close runs under it: `locate(log)` on this thread (in-memory
        indexes and batch headers, as a fetch reads them), then `read(found)` (reading and
        decoding a batch) in a worker thread; None if nothing was located.
        NotLeaderOrFollower if the partition was deleted or replaced while waiting for the lock."""
        async with self._locks.hold([partition.key]):
            if self.partitions.get(partition.key) is not partition:
                raise NotLeaderOrFollower(f"{partition.topic}-{partition.index} is no longer hosted by "
                                          f"broker {self.node_id}")
            found = locate(partition.log)
            if found is None:
                return None
            return await trio.to_thread.run_sync(read, found)

    def _topic_settings(self, topic_configs: Mapping[str, str]) -> TopicConfig:
        """The effective config for a topic's overrides, parsed once per distinct set of them
        (parsing a LogConfig per partition dominated applying a 1000-partition topic)."""
        key = tuple(sorted(topic_configs.items()))
        settings = self._settings_cache.get(key)
        if settings is None:
            if len(self._settings_cache) >= 1024:
                self._settings_cache.clear()
            settings = self._settings_cache[key] = effective_topic_config(self.config, topic_configs)
        return settings

    # -- lookups -------------------------------------------------------------------

    def get(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        topic_image = self.image.topic_by_name(topic)
        if topic_image is None or index not in topic_image.partitions:
            raise UnknownTopicOrPartition(f"{topic}-{index} does not exist")
        if partition is not None and partition.topic_id == topic_image.topic_id:
            return partition
        # Assigned but its log not open yet (or an earlier incarnation not yet deleted): Kafka's
        # answer for a partition the metadata knows and this broker does not serve. Retriable.
        raise NotLeaderOrFollower(f"{topic}-{index} is not hosted by broker {self.node_id}"
                                  + (" yet" if (topic, index) in self._opening else ""))

    def get_leader(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        partition = self.get(topic, index)
        partition.check_leader(current_leader_epoch)
        return partition

    async def append_records(self, entries: Sequence[tuple[tuple[str, int], Records | None]], *,
                             required_acks: int, timeout_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT,
                             transactional_id: str | None = None,
                             verifier: TxnVerifier | None = None,
                             txn_operation: TxnOperation | None = None) -> AppendResult:
        """Append to the partitions this broker leads: broker/replication/append.py."""
        # Imported here, not at the top: broker/errors.py (which append.py uses) imports this module.
        from raftka.broker.replication import append

        return await append.append_records(self.get_leader, entries, required_acks=required_acks,
                                           timeout_ms=timeout_ms, origin=origin, transactional_id=transactional_id,
                                           verifier=verifier, metrics=self.metrics,
                                           **({"txn_operation": txn_operation} if txn_operation is not None else {}))

    def leader_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            return None
        return broker.listener(self.config.inter_broker_listener_name) or (
            (broker.listeners[0][1], broker.listeners[0][2]) if broker.listeners else None)

    # -- replication bookkeeping (leader side) -----------------------------------------

    def record_follower_fetch(self, partition: Partition, replica_id: int, fetch_offset: int) -> None:
        if partition.update_follower_fetch(replica_id, fetch_offset, _now_ms()):
            self._isr_wake.set()  # a follower may join the ISR: expand now, not at the next tick

    # -- waiting for data ------------------------------------------------------------

    def _wake(self) -> None:
        event, self._data_event = self._data_event, trio.Event()
        event.set()

    def _wake_append(self) -> None:
        event, self._append_event = self._append_event, trio.Event()
        event.set()

    def data_event(self) -> trio.Event:
        """Set the next time any hosted partition's high watermark or role changes."""
        return self._data_event

    def append_event(self) -> trio.Event:
        """Set the next time a leader appends (or any role changes)."""
        return self._append_event

    def notify_appended(self) -> None:
        self._wake_append()

    # -- background work -----------------------------------------------------------------

    async def run(self, alter_partition: AlterPartition, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._alter_partition = alter_partition
        async with trio.open_nursery() as nursery:
            await nursery.start(self.fetchers.run)
            await nursery.start(self.log_manager.run)
            nursery.start_soon(self._isr_loop)
            nursery.start_soon(self._reconcile_loop)
            nursery.start_soon(self._file_loop)
            task_status.started()

    async def _isr_loop(self) -> None:
        interval = self.config.replica_lag_time_max_ms / 2000.0
        while True:
            with trio.move_on_after(interval):
                await self._isr_wake.wait()
            self._isr_wake = trio.Event()
            now = _now_ms()
            for partition in list(self.partitions.values()):
                change = partition.isr_changes(now)  # recorded as pending in the partition
                if change is None:
                    continue
                if change.removed:
                    self.metrics.isr_shrinks += 1
                    log.warning("isr.shrink", topic=partition.topic, partition=partition.index,
                                removed=list(change.removed), isr=list(change.new_isr))
                if change.added:
                    self.metrics.isr_expands += 1
                    log.info("isr.expand", topic=partition.topic, partition=partition.index,
                             added=list(change.added), isr=list(change.new_isr))
                await self._request_isr(partition, change.new_isr)

    async def _request_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        assert self._alter_partition is not None
        try:
            await self._alter_partition(partition, new_isr)
        except ControllerError as exc:
            log.info("isr.change_refused", topic=partition.topic, partition=partition.index,
                     error=exc.name, reason=exc.message)
            partition.alter_failed(new_isr, _now_ms())
        # On success the committed PartitionChange reaches us through `publish`, which
        # clears the pending change and installs the new ISR.

    # -- lifecycle -------------------------------------------------------------------

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.checkpoint_high_watermarks()

    def close(self) -> None:
        self.log_manager.close()
        self.partitions.clear()
