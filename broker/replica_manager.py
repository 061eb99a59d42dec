"""The partitions this broker hosts, kept in step with the metadata image.

`publish(delta, image)` is a metadata publisher (synchronous, called after
every applied record): it opens the logs of partitions assigned to this
broker, hands each its role and epochs, and deletes the logs of removed
topics. Handlers find partitions here; the high watermark and acks=all
waits live on each `Partition`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import structlog
import trio

from broker.partition import NotLeaderOrFollower, Partition
from broker.topic_config import effective_topic_config
from log.partition_log import PartitionLog
from raft_meta.image import MetadataDelta, MetadataImage
from raft_meta.node_config import NodeConfig

log = structlog.get_logger("broker.replica_manager")


class UnknownTopicOrPartition(Exception):
    code = 3


class ReplicaManager:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_dirs = [Path(d) for d in config.log_dirs]
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.image = MetadataImage()
        # Set whenever any partition's high watermark moves (long-poll fetches wait on it).
        self._data_event = trio.Event()

    # -- metadata publisher ------------------------------------------------------

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        if not delta.accepted:
            return
        for topic in delta.removed_topics:
            self._remove_topic(topic.name, [p for (t, p) in self.partitions if t == topic.name])
        touched = set(delta.partitions)
        for topic_id in delta.topics:
            topic = image.topics.get(topic_id)
            if topic is not None:
                touched.update((topic_id, p) for p in topic.partitions)
        if delta.configs:
            for kind, name in delta.configs:
                topic = image.topic_by_name(name) if kind == "topic" else None
                if topic is not None:
                    touched.update((topic.topic_id, p) for p in topic.partitions)
        for topic_id, index in sorted(touched):
            self._apply_partition(image, topic_id, index)

    def _apply_partition(self, image: MetadataImage, topic_id: str, index: int) -> None:
        topic = image.topics.get(topic_id)
        if topic is None:
            return
        part_image = topic.partitions.get(index)
        if part_image is None or self.node_id not in part_image.replicas:
            return
        key = (topic.name, index)
        settings = effective_topic_config(self.config, image.configs.get(("topic", topic.name), {}))
        partition = self.partitions.get(key)
        if partition is None:
            plog = PartitionLog.open(self._dir_for(key), topic.name, index, settings.log)
            partition = Partition(topic.name, topic_id, index, self.node_id, plog, self._wake)
            # A single-replica leader's HW is its log end; otherwise start from the checkpoint (issue 5).
            self.partitions[key] = partition
        else:
            partition.log.config = settings.log
        partition.apply_image(part_image, settings.min_insync_replicas)
        self._wake()

    def _dir_for(self, key: tuple[str, int]) -> Path:
        """The log dir holding this partition: where it already is, else the least loaded."""
        name = f"{key[0]}-{key[1]}"
        for d in self.log_dirs:
            if (d / name).is_dir():
                return d
        return min(self.log_dirs, key=lambda d: sum(1 for _ in d.glob("*-*")) if d.is_dir() else 0)

    def _remove_topic(self, name: str, indexes: list[int]) -> None:
        for index in indexes:
            partition = self.partitions.pop((name, index))
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

    # -- waiting for data ------------------------------------------------------------

    def _wake(self) -> None:
        event, self._data_event = self._data_event, trio.Event()
        event.set()

    def data_event(self) -> trio.Event:
        """An event set the next time any hosted partition's high watermark or role changes."""
        return self._data_event

    def notify_data(self) -> None:
        self._wake()

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        for partition in self.partitions.values():
            try:
                partition.log.close()
            except Exception:
                log.exception("partition.close_failed", topic=partition.topic, partition=partition.index)
        self.partitions.clear()
