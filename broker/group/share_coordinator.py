"""The share coordinator: the trio shell around broker/group/share_coordinator_state.py and
`__share_group_state` (KIP-932, Kafka's `ShareCoordinatorService`).

This broker coordinates the share partitions whose key (`"<group>:<topic id>:<partition>"`,
Kafka's `SharePartitionKey.asCoordinatorKey`, the topic id in Kafka's base64 form) hashes
to a `__share_group_state` partition it leads (Utils.abs(key.hashCode()) % the topic's
partition count). On becoming leader of one it replays it (requests meanwhile get
COORDINATOR_LOAD_IN_PROGRESS); on losing it, it drops that state and requests get
NOT_COORDINATOR.

Each call is decided by the pure core on the partition's state, its records written with
acks=all (`share.coordinator.write.timeout.ms`), then replayed, before the answer: one call
at a time per `__share_group_state` partition, so every decision sees every earlier write.
A failed write changes nothing (the core's state is only changed by replaying what is
durable) and answers NOT_COORDINATOR (leadership lost) or COORDINATOR_NOT_AVAILABLE
(not enough replicas, timed out), which the persister retries.

The topic is created on first use, with Kafka's configs (`shareGroupStateTopicConfigs`):
cleanup.policy=delete with retention.ms=-1 (Kafka prunes it with DeleteRecords below the
oldest snapshot still needed; raftka keeps it whole), compression.type=producer,
segment.bytes and min.insync.replicas from `share.coordinator.state.topic.*`.
"""

from __future__ import annotations

import functools
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
import trio

from raftka.broker.group.group_coordinator import CoordinatorError, InternalTopic, append_error_code
from raftka.broker.group.group_metadata_manager import append_and_wait, log_batches
from raftka.broker.group.group_records import partition_for_group
from raftka.broker.group.share_coordinator_records import decode_record, encode_record
from raftka.broker.group.share_coordinator_state import (
    Answer,
    ShareCoordinatorState,
    StateBatch,
)
from raftka.broker.group.share_persister import SHARE_STATE_TOPIC, ShareStateKey
from raftka.broker.replication.partition import Partition
from raftka.broker.replication.replica_manager import ReplicaManager
from raftka.client.protocol import ErrorCode
from raftka.raft_meta.config.node_config import NodeConfig
from raftka.raft_meta.metadata.image import MetadataDelta, MetadataImage

log = structlog.get_logger("broker.share_coordinator")

NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
NOT_AVAILABLE = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)


def partition_for_share(key: ShareStateKey, num_partitions: int) -> int:
    """Kafka's `ShareCoordinatorService.partitionFor`: Utils.abs(key.asCoordinatorKey().hashCode())
    % the partition count of `__share_group_state`."""
    return partition_for_group(key.coordinator_key, num_partitions)


def wall_ms() -> int:
    """Snapshot timestamps are wall-clock milliseconds, as Kafka stores them."""
    return int(time.time() * 1000)


@dataclass
class _Shard:
    token: int
    leader_epoch: int
    state: ShareCoordinatorState
    loaded: bool = False
    lock: trio.Lock = field(default_factory=trio.Lock)


class ShareCoordinator:
    def __init__(self, config: NodeConfig, replicas: ReplicaManager,
                 create_topic: Callable[[int, int, dict[str, str]], Awaitable[None]]) -> None:
        self.config = config
        self.replicas = replicas
        self._topic = InternalTopic(SHARE_STATE_TOPIC, replicas, config.node_id)
        self._create_topic = create_topic
        self._shards: dict[int, _Shard] = {}
        self._tokens = 0
        self._load_send, self._load_recv = trio.open_memory_channel[tuple[Partition, int]](math.inf)
        self._cleanup_send, self._cleanup_recv = trio.open_memory_channel[frozenset[uuid.UUID]](math.inf)

    # --- leadership of __share_group_state partitions -------------------------------------
    def on_leadership(self, partition: Partition, is_leader: bool) -> None:
        """ReplicaManager leadership listener (synchronous): start or drop a load."""
        if partition.topic != SHARE_STATE_TOPIC:
            return
        self._tokens += 1
        dropped = self._shards.pop(partition.index, None)
        if dropped is not None and dropped.state.offsets:
            log.info("share_coordinator.partition_unloaded", partition=partition.index,
                     share_partitions=len(dropped.state.offsets))
        if is_leader:
            self._shards[partition.index] = _Shard(
                self._tokens, partition.leader_epoch,
                ShareCoordinatorState(self.config.share_coordinator_snapshot_update_records_per_snapshot))
            self._load_send.send_nowait((partition, self._tokens))

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Metadata publisher (synchronous): the share partitions of deleted topics are
        tombstoned (Kafka's `maybeCleanupShareState`), by the task `run` starts."""
        deleted = frozenset(uuid.UUID(t.topic_id) for t in delta.removed_topics if t.name != SHARE_STATE_TOPIC)
        if deleted:
            self._cleanup_send.send_nowait(deleted)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._cleanup_loop)
            task_status.started()
            async for partition, token in self._load_recv:
                nursery.start_soon(self._load, partition, token)

    async def _cleanup_loop(self) -> None:
        async for deleted in self._cleanup_recv:
            for index, shard in list(self._shards.items()):
                if not shard.loaded:
                    continue  # keeps that state: every call on a deleted topic is UNKNOWN_TOPIC_OR_PARTITION
                answer = await self._write_locked(index, shard, functools.partial(_cleanup, deleted))
                if answer.error:
                    log.warning("share_coordinator.cleanup_failed", partition=index, error=answer.error,
                                message=answer.message)
                elif answer.records:
                    log.info("share_coordinator.deleted_topics_cleaned", partition=index,
                             share_partitions=len(answer.records))

    async def _load(self, partition: Partition, token: int) -> None:
        started = trio.current_time()
        state = ShareCoordinatorState(self.config.share_coordinator_snapshot_update_records_per_snapshot)
        try:
            async for batch in log_batches(partition):
                if batch.header.is_control:
                    continue
                for record in batch.records:
                    if record.key is None:
                        continue
                    try:
                        decoded = decode_record(record.key, record.value)
                    except ValueError as exc:
                        log.warning("share_coordinator.bad_record", partition=partition.index,
                                    offset=record.offset, error=str(exc))
                        continue
                    if decoded is not None:
                        state.replay(decoded)
        except Exception:
            log.exception("share_coordinator.load_failed", partition=partition.index)
            return
        shard = self._shards.get(partition.index)
        if shard is None or shard.token != token:
            return  # leadership moved while loading
        shard.state = state
        shard.loaded = True
        log.info("share_coordinator.partition_loaded", partition=partition.index,
                 share_partitions=len(state.offsets), leader_epoch=shard.leader_epoch,
                 seconds=round(trio.current_time() - started, 3))

    # --- lookup ------------------------------------------------------------------------------
    def partition_for(self, key: ShareStateKey) -> int:
        return partition_for_share(key, self._topic.existing_partition_count())

    async def ensure_topic(self) -> None:
        """Create `__share_group_state` if missing (the first lookup does, as in Kafka). The
        replication factor is capped by the live brokers and min.insync.replicas by it, as for
        `__transaction_state`."""
        if self._topic.partition_count():
            return
        live = len(self.replicas.image.live_brokers())
        rf = max(1, min(self.config.share_coordinator_state_topic_replication_factor, live))
        await self._create_topic(self.config.share_coordinator_state_topic_num_partitions, rf,
                                 state_topic_configs(self.config, rf))

    def _shard(self, index: int) -> _Shard:
        return self._topic.check_served(index, self._shards.get(index))

    def _topic_partitions(self, topic_id: uuid.UUID) -> int | None:
        topic = self.replicas.image.topics.get(str(topic_id))
        return None if topic is None else len(topic.partitions)

    # --- the state APIs ------------------------------------------------------------------------
    async def _call(self, key: ShareStateKey, decide: Callable[[ShareCoordinatorState, int | None, int], Answer],
                    ) -> Answer:
        """Decide on the key's shard, write what the decision writes, replay it, answer."""
        try:
            index = self.partition_for(key)
            shard = self._shard(index)
        except CoordinatorError as exc:
            return Answer(exc.code, str(exc))
        return await self._write_locked(
            index, shard, lambda state, now: decide(state, self._topic_partitions(key.topic_id), now))

    async def _write_locked(self, index: int, shard: _Shard,
                            decide: Callable[[ShareCoordinatorState, int], Answer]) -> Answer:
        """Under the shard's lock: decide, write the decision's records with acks=all, replay them."""
        async with shard.lock:
            if self._shards.get(index) is not shard:
                return Answer(NOT_COORDINATOR, f"{SHARE_STATE_TOPIC}-{index} moved away")
            answer = decide(shard.state, wall_ms())
            if not answer.records:
                return answer
            partition = self.replicas.partitions.get((SHARE_STATE_TOPIC, index))
            if partition is None or not partition.is_leader or partition.leader_epoch != shard.leader_epoch:
                return Answer(NOT_COORDINATOR, f"{SHARE_STATE_TOPIC}-{index} is no longer led here")
            try:
                await append_and_wait(partition, [encode_record(r) for r in answer.records],
                                      self.config.share_coordinator_write_timeout_ms / 1000.0)
            except Exception as exc:
                log.info("share_coordinator.write_failed", partition=index, error=str(exc))
                return Answer(append_error_code(exc), f"writing {SHARE_STATE_TOPIC}-{index} failed: {exc}")
            if self._shards.get(index) is not shard:
                return Answer(NOT_COORDINATOR, f"{SHARE_STATE_TOPIC}-{index} moved away during the write")
            for record in answer.records:
                shard.state.replay(record)
        return answer

    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> Answer:
        return await self._call(key, lambda s, parts, now: s.initialize(key, state_epoch, start_offset, now, parts))

    async def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[StateBatch, ...], delivery_complete_count: int = -1) -> Answer:
        return await self._call(key, lambda s, parts, now: s.write(key, state_epoch, leader_epoch, start_offset,
                                                                    batches, now, parts, delivery_complete_count))

    async def read(self, key: ShareStateKey, leader_epoch: int) -> Answer:
        return await self._call(key, lambda s, parts, now: s.read(key, leader_epoch, now, parts))

    async def read_summary(self, key: ShareStateKey) -> Answer:
        return await self._call(key, lambda s, parts, now: s.read_summary(key, parts))

    async def delete(self, key: ShareStateKey) -> Answer:
        return await self._call(key, lambda s, parts, now: s.delete(key, parts))


def _cleanup(deleted: frozenset[uuid.UUID], state: ShareCoordinatorState, _now_ms: int) -> Answer:
    return Answer(records=state.cleanup_topics(deleted))


def state_topic_configs(config: NodeConfig, replication_factor: int) -> dict[str, str]:
    """Kafka's `shareGroupStateTopicConfigs`, min.insync.replicas capped by the replication factor."""
    return {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "compression.type": "producer",
        "segment.bytes": str(config.share_coordinator_state_topic_segment_bytes),
        "min.insync.replicas": str(min(config.share_coordinator_state_topic_min_isr, replication_factor)),
    }
