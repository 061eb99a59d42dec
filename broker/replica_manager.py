"""The partitions this broker hosts, kept in step with the metadata image.

`publish(delta, image)` is a metadata publisher (synchronous, called after
every applied record): it opens the logs of partitions assigned to this
broker, hands each its role and epochs, starts or stops replica fetchers,
and deletes the logs of removed topics. Handlers find partitions here.

`run()` owns the background work: the replica fetchers, ISR maintenance
(shrink after `replica.lag.time.max.ms`, expand when a follower catches up,
both through AlterPartition at the controller) and the high-watermark
checkpoint (`replication-offset-checkpoint` in every log dir).
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import structlog
import trio

from raftka.broker.partition import NotLeaderOrFollower, Partition
from raftka.broker.replica_fetcher import ReplicaFetcherManager
from raftka.broker.topic_config import TopicConfig, effective_topic_config
from raftka.log.checkpoint import read_offsets, write_offsets
from raftka.log.partition_log import PartitionLog
from raftka.raft_meta.controller_errors import ControllerError
from raftka.raft_meta.image import MetadataDelta, MetadataImage
from raftka.raft_meta.node_config import NodeConfig

log = structlog.get_logger("broker.replica_manager")

HW_CHECKPOINT = "replication-offset-checkpoint"
HW_CHECKPOINT_INTERVAL_S = 5.0

AlterPartition = Callable[[Partition, tuple[int, ...]], Awaitable[None]]


class UnknownTopicOrPartition(Exception):
    code = 3


def _now_ms() -> float:
    return trio.current_time() * 1000.0


class ReplicaManager:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.image = MetadataImage()
        self.fetchers = ReplicaFetcherManager(self)
        self._alter_partition: AlterPartition | None = None
        # Set whenever any partition's high watermark or role changes (consumer long-polls).
        self._data_event = trio.Event()
        # Set whenever a leader appends (follower long-polls).
        self._append_event = trio.Event()
        self._isr_wake = trio.Event()
        self._checkpointed_hw = self._read_hw_checkpoints()
        self._leadership_listeners: list[Callable[[Partition, bool], None]] = []
        self._settings_cache: dict[tuple[tuple[str, str], ...], TopicConfig] = {}

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
        self.image = image
        if not delta.accepted:
            return
        for topic in delta.removed_topics:
            self._remove_topic(topic.name, [p for (t, p) in self.partitions if t == topic.name])
        touched = set(delta.partitions)
        if not delta.partitions:
            # A topic-level change: all its partitions. (A partition record names its topic
            # too, but touches only its own partition: re-applying the whole topic for each
            # of a new topic's N partition records made creating it O(N^2).)
            for topic_id in delta.topics:
                topic = image.topics.get(topic_id)
                if topic is not None:
                    touched.update((topic_id, p) for p in topic.partitions)
        for kind, name in delta.configs:
            topic = image.topic_by_name(name) if kind == "topic" else None
            if topic is not None:
                touched.update((topic.topic_id, p) for p in topic.partitions)
        if delta.brokers:  # a leader's endpoint may have changed (re-registration)
            touched.update((p.topic_id, p.index) for p in self.partitions.values()
                           if p.leader in delta.brokers and not p.is_leader)
        for topic_id, index in sorted(touched):
            self._apply_partition(image, topic_id, index)

    def _apply_partition(self, image: MetadataImage, topic_id: str, index: int) -> None:
        topic = image.topics.get(topic_id)
        if topic is None:
            return
        part_image = topic.partitions.get(index)
        key = (topic.name, index)
        if part_image is None or self.node_id not in part_image.replicas:
            partition = self.partitions.get(key)
            if partition is not None:  # reassigned away (not produced by the controller yet)
                self.fetchers.remove(partition)
            return
        settings = self._topic_settings(image.configs.get(("topic", topic.name), {}))
        partition = self.partitions.get(key)
        if partition is None:
            plog = PartitionLog.open(self._dir_for(key), topic.name, index, settings.log)
            partition = Partition(topic.name, topic_id, index, self.node_id, plog, self._wake,
                                  on_append=self._wake_append,
                                  high_watermark=self._checkpointed_hw.get(key, 0))
            self.partitions[key] = partition
        else:
            partition.log.config = settings.log
        was_leader = partition.is_leader
        became_leader, became_follower = partition.apply_image(part_image, settings.min_insync_replicas,
                                                               _now_ms())
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

    def _dir_for(self, key: tuple[str, int]) -> Path:
        """The log dir holding this partition: where it already is, else the least loaded."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        name = f"{key[0]}-{key[1]}"
        for d in self.log_dirs:
            if (d / name).is_dir():
                return d
        # Least loaded by the partitions hosted now (globbing every dir per new partition
        # made creating a big topic quadratic).
        hosted = {d: 0 for d in self.log_dirs}
        for partition in self.partitions.values():
            parent = partition.log.dir.parent
            if parent in hosted:
                hosted[parent] += 1
        return min(self.log_dirs, key=lambda d: hosted[d])

    def _remove_topic(self, name: str, indexes: list[int]) -> None:
        for index in indexes:
            partition = self.partitions.pop((name, index))
            self.fetchers.remove(partition)
            if partition.is_leader:
                self._notify_leadership(partition, False)
            directory = partition.log.dir
            partition.log.close()
            # Kafka renames to `-delete` then deletes asynchronously; a removed topic's data is gone.
            shutil.rmtree(directory, ignore_errors=True)
            log.info("partition.deleted", topic=name, partition=index)
        self._wake()

    # -- lookups -------------------------------------------------------------------

    def get(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is not None:
            return partition
        topic_image = self.image.topic_by_name(topic)
        if topic_image is None or index not in topic_image.partitions:
            raise UnknownTopicOrPartition(f"{topic}-{index} does not exist")
        raise NotLeaderOrFollower(f"{topic}-{index} is not hosted by broker {self.node_id}")

    def get_leader(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        partition = self.get(topic, index)
        partition.check_leader(current_leader_epoch)
        return partition

    def leader_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            return None
        return broker.listener(self.config.inter_broker_listener_name) or (
            (broker.listeners[0][1], broker.listeners[0][2]) if broker.listeners else None)

    # -- replication bookkeeping (leader side) -----------------------------------------

    def record_follower_fetch(self, partition: Partition, replica_id: int, fetch_offset: int) -> None:
        partition.update_follower_fetch(replica_id, fetch_offset, _now_ms())
        # Only a fetch from outside the ISR can make a new ISR candidate (a rising high
        # watermark only makes joining harder), so ISR members skip the check.
        if replica_id not in partition.isr and partition.isr_candidates_to_add():
            self._isr_wake.set()

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
            nursery.start_soon(self._isr_loop)
            nursery.start_soon(self._checkpoint_loop)
            nursery.start_soon(self._log_cleanup_loop)
            task_status.started()

    async def _isr_loop(self) -> None:
        interval = self.config.replica_lag_time_max_ms / 2000.0
        while True:
            with trio.move_on_after(interval):
                await self._isr_wake.wait()
            self._isr_wake = trio.Event()
            now = _now_ms()
            for partition in list(self.partitions.values()):
                lagging = partition.isr_members_lagging(now, self.config.replica_lag_time_max_ms)
                adding = partition.isr_candidates_to_add()
                if not lagging and not adding:
                    continue
                new_isr = tuple(sorted((set(partition.isr) - set(lagging)) | set(adding)))
                if lagging:
                    log.warning("isr.shrink", topic=partition.topic, partition=partition.index,
                                removed=lagging, isr=list(new_isr))
                if adding:
                    log.info("isr.expand", topic=partition.topic, partition=partition.index,
                             added=adding, isr=list(new_isr))
                await self._request_isr(partition, new_isr)

    async def _request_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        assert self._alter_partition is not None
        partition.pending_isr = new_isr
        try:
            await self._alter_partition(partition, new_isr)
        except ControllerError as exc:
            log.info("isr.change_refused", topic=partition.topic, partition=partition.index,
                     error=exc.name, reason=exc.message)
            if partition.pending_isr == new_isr:
                partition.pending_isr = None
        # On success the committed PartitionChange reaches us through `publish`, which
        # clears `pending_isr` and installs the new ISR.

    async def _checkpoint_loop(self) -> None:
        while True:
            await trio.sleep(HW_CHECKPOINT_INTERVAL_S)
            # Collected on the trio thread (partitions change there), written (fsync) off it.
            try:
                await trio.to_thread.run_sync(self._write_hw_checkpoints, self._collect_high_watermarks())
            except OSError as exc:  # e.g. EMFILE: the next round retries; never end the broker
                log.warning("hw_checkpoint.write_failed", error=str(exc),
                            retry_in_s=HW_CHECKPOINT_INTERVAL_S)

    async def _log_cleanup_loop(self) -> None:
        """Retention (and compaction, for compacted topics) every `log.retention.check.interval.ms`.

        Leaders and followers clean their own logs, as in Kafka. Compaction runs on the event
        loop between requests: fine for the segment sizes raftka targets today, a dedicated
        cleaner thread with a lock on the log is the next step if it ever shows in latency.
        """
        interval = self.config.log_retention_check_interval_ms / 1000.0
        while True:
            await trio.sleep(interval)
            self.clean_logs()

    def clean_logs(self, now_ms: int | None = None) -> None:
        for partition in list(self.partitions.values()):
            plog = partition.log
            try:
                if plog.config.delete:
                    deleted = plog.delete_old_segments(now_ms)
                    if deleted:
                        log.info("log.retention_deleted", topic=partition.topic, partition=partition.index,
                                 segments=deleted, log_start_offset=plog.log_start_offset)
                if plog.config.compact and self.config.log_cleaner_enable:
                    plog.compact(now_ms)
            except Exception:
                log.exception("log.cleanup_failed", topic=partition.topic, partition=partition.index)

    def _read_hw_checkpoints(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for d in self.log_dirs:
            path = d / HW_CHECKPOINT
            if path.exists():
                try:
                    out.update(read_offsets(path) or {})
                except (OSError, ValueError) as exc:
                    log.warning("hw_checkpoint.unreadable", path=str(path), error=str(exc))
        return out

    def _collect_high_watermarks(self) -> dict[Path, dict[tuple[str, int], int]]:
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
        for key, partition in self.partitions.items():
            by_dir.setdefault(partition.log.dir.parent, {})[key] = partition.high_watermark
        return by_dir

    @staticmethod
    def _write_hw_checkpoints(by_dir: dict[Path, dict[tuple[str, int], int]]) -> None:
        for d, offsets in by_dir.items():
            if d.is_dir():
                write_offsets(d / HW_CHECKPOINT, offsets)

    def checkpoint_high_watermarks(self) -> None:
        self._write_hw_checkpoints(self._collect_high_watermarks())

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        try:
            self.checkpoint_high_watermarks()
        except OSError as exc:
            log.warning("hw_checkpoint.failed", error=str(exc))
        for partition in self.partitions.values():
            try:
                partition.log.close()
            except Exception:
                log.exception("partition.close_failed", topic=partition.topic, partition=partition.index)
        self.partitions.clear()
