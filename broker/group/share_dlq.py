"""The share groups' dead-letter queue (KIP-1191, `share.version` 2): Kafka 4.4's
`ShareGroupDLQStateManager`, the writer the share partitions (broker/group/share_partition_manager.py)
hand their ARCHIVING records to (`SharePartitionState.take_dlq_runs`).

- A group has a DLQ when `share.version` is 2 (broker/features.py) and its group config
  `errors.deadletterqueue.topic.name` is set (`dlq_enabled`).
- The topic must be fit for it (`check_dlq_topic`, Kafka's checks and messages): not starting
  with `__`, starting with the broker's `errors.deadletterqueue.topic.name.prefix` (`dlq.`;
  empty: any name), and, if it exists, with the topic config
  `errors.deadletterqueue.group.enable=true`. A missing topic is created when the broker's
  `errors.deadletterqueue.auto.create.topics.enable` is true (the broker's defaults for
  partitions and replicas, with `errors.deadletterqueue.group.enable=true` and
  `message.timestamp.type=CreateTime`); else the write fails. The broker keys are read as
  Kafka's dynamic ones: this broker's own, the cluster-wide default, server.properties.
- One DLQ record per offset (`dlq_records`), to partition `source partition % DLQ partitions`,
  timestamped now, uncompressed, with the headers `__dlq.errors.topic`, `.partition`,
  `.offset`, `.group`, `.delivery.count` and `.message` (the reason), in that order. With the
  group config `errors.deadletterqueue.copy.record.enable` (false by default) the record's key
  and value are copied (read from the log in a worker thread; a record gone from the log is
  written with the headers only); its own headers never are.
- Records go out as Produce (acks=all) to the DLQ partition's leader over the inter-broker
  listener (this broker too), in requests of at most the topic's `max.message.bytes`.
  Retriable errors (no leader yet, a lost connection, the topic being created) are retried
  with a backoff doubling from `RETRY_BACKOFF_S` to `RETRY_BACKOFF_MAX_S`, `MAX_ATTEMPTS`
  times; then, and for any other error, `DlqError`. The caller archives the records either way
  (Kafka: "Failed to write to DLQ, proceeding to ARCHIVED regardless").
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
import trio

from raftka.broker.group.share_partition_state import DlqRun
from raftka.broker.net.peer_connections import PeerConnections
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.log.batch_header import parse_header
from raftka.log.partition_log import ReadInfo
from raftka.log.record_batch import Record, decode_batch, encode_batch
from raftka.raft_meta.config.config_catalogue import STORED_BROKER_CONFIGS
from raftka.raft_meta.controller.controller_decisions import NewTopic

log = structlog.get_logger("broker.share_dlq")

SHARE_VERSION_DLQ = 2  # Kafka's ShareVersion.SV_2: supportsShareGroupDLQ
TOPIC_NAME = "errors.deadletterqueue.topic.name"  # group config
COPY_RECORD = "errors.deadletterqueue.copy.record.enable"  # group config
GROUP_ENABLE = "errors.deadletterqueue.group.enable"  # topic config
AUTO_CREATE = "errors.deadletterqueue.auto.create.topics.enable"  # broker config
PREFIX = "errors.deadletterqueue.topic.name.prefix"  # broker config

HEADERS = ("__dlq.errors.topic", "__dlq.errors.partition", "__dlq.errors.offset", "__dlq.errors.group",
           "__dlq.errors.delivery.count", "__dlq.errors.message")

PRODUCE_VERSION = 9  # by topic name; Kafka 4.4 serves 3-13
REQUEST_TIMEOUT_S = 30.0
# About 26 s of retries (Kafka's: 5 attempts, 1 s doubling, about 31 s).
MAX_ATTEMPTS = 10
RETRY_BACKOFF_S = 0.2
RETRY_BACKOFF_MAX_S = 5.0
DEFAULT_MAX_MESSAGE_BYTES = 1048588
BATCH_OVERHEAD = 512  # a batch header and the records' varints, generously
RETRIABLE = frozenset(int(c) for c in (
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.THROTTLING_QUOTA_EXCEEDED))


class DlqError(Exception):
    """A DLQ write that did not happen (misconfigured, or retries exhausted)."""


def dlq_enabled(share_version: int, topic_name: str) -> bool:
    """Kafka's `SharePartition.isDLQEnabledForGroup`."""
    return share_version >= SHARE_VERSION_DLQ and bool(topic_name)


def check_dlq_topic(group_id: str, name: str, prefix: str, exists: bool, enabled_on_topic: bool,
                    auto_create: bool) -> str:
    """Why `name` cannot be the group's DLQ topic now ('' if it can): Kafka's
    `ProduceRequestHandler.validateDlqTopic`, in its order and words."""
    if not name:
        return f"Configured DLQ topic name in share group: {group_id} is empty."
    if name.startswith("__"):
        return f"Configured DLQ topic name in share group: {group_id} cannot start with __, topic: {name}."
    if exists and not enabled_on_topic:
        return f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, topic: {name}."
    if not exists and not auto_create:
        return (f"DLQ topic does not exist and auto create is disabled on cluster for share group: {group_id}, "
                f"topic: {name}.")
    if prefix and not name.startswith(prefix):
        return (f"Configured DLQ topic name does not comply with the DLQ topic prefix in share group: {group_id}, "
                f"topic: {name}, prefix: {prefix}.")
    return ""


def dlq_records(group_id: str, topic: str, partition: int, run: DlqRun,
                originals: Mapping[int, tuple[bytes | None, bytes | None]], now_ms: int) -> list[Record]:
    """The DLQ records of `run`, one per offset: the original key and value where `originals`
    has them (copy enabled), and the context headers."""
    out = []
    for offset in range(run.first_offset, run.last_offset + 1):
        key, value = originals.get(offset, (None, None))
        values = (topic, str(partition), str(offset), group_id, str(run.delivery_count), run.reason.value)
        headers = tuple((name, text.encode()) for name, text in zip(HEADERS, values, strict=True))
        out.append(Record(key, value, headers, now_ms))
    return out


def chunks(records: Sequence[Record], max_bytes: int) -> list[list[Record]]:
    """`records` cut into produce requests of at most about `max_bytes` each (a record larger
    than that goes alone, and the DLQ topic refuses it)."""
    out: list[list[Record]] = []
    size = 0
    for record in records:
        body = (len(record.key or b"") + len(record.value or b"")
                + sum(len(k) + len(v or b"") + 8 for k, v in record.headers) + 24)
        if not out or size + body > max_bytes - BATCH_OVERHEAD:
            out.append([])
            size = 0
        out[-1].append(record)
        size += body
    return out


def originals_from(info: ReadInfo, first: int, last: int) -> dict[int, tuple[bytes | None, bytes | None]]:
    """The (key, value) of each record at `first`..`last` in the batches `info` read (control
    batches skipped). Reads and decodes: call it in a worker thread."""
    data = info.read_bytes()
    out: dict[int, tuple[bytes | None, bytes | None]] = {}
    pos = 0
    while pos < len(data):
        header = parse_header(data, pos)
        if not header.is_control and header.last_offset >= first and header.base_offset <= last:
            for record in decode_batch(data, pos).records:
                if record.offset is not None and first <= record.offset <= last:
                    out[record.offset] = (record.key, record.value)
        pos += header.size
    return out


class DlqWriter:
    """Writes DLQ records for this broker's share partitions (`ctx.shares.dlq`)."""

    def __init__(self, replicas, controller, node_id: int, raw_config: Mapping[str, str]) -> None:
        self.replicas = replicas
        self.controller = controller
        self.node_id = node_id
        self.raw_config = raw_config
        self._peers = PeerConnections(replicas, f"raftka-share-dlq-{node_id}", REQUEST_TIMEOUT_S)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._peers.run(task_status=task_status)

    def broker_setting(self, key: str) -> str:
        """A dynamic broker key's value: this broker's own, the cluster-wide default,
        server.properties, Kafka's default."""
        configs = self.replicas.image.configs
        for resource in (("broker", str(self.node_id)), ("cluster", "")):
            value = configs.get(resource, {}).get(key)
            if value is not None:
                return value
        return self.raw_config.get(key, STORED_BROKER_CONFIGS[key].default)

    async def write(self, group_id: str, name: str, topic: str, partition: int, run: DlqRun,
                    originals: Mapping[int, tuple[bytes | None, bytes | None]]) -> None:
        """Write `run`'s DLQ records to `name`; DlqError if that cannot be done."""
        records = dlq_records(group_id, topic, partition, run, originals, int(time.time() * 1000))
        backoff = RETRY_BACKOFF_S
        why = "no attempt made"
        sent = 0  # the records already written (a request of several went through)
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                await trio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
            image = self.replicas.image
            found = image.topic_by_name(name)
            enabled = image.topic_config(name, GROUP_ENABLE) == "true"
            auto_create = self.broker_setting(AUTO_CREATE).lower() == "true"
            problem = check_dlq_topic(group_id, name, self.broker_setting(PREFIX), found is not None, enabled,
                                      auto_create)
            if problem:
                raise DlqError(problem)
            if found is None:
                why = await self._create(name)  # then wait for it in the metadata
                continue
            if not found.partitions:
                why = f"DLQ topic partition count could not be found for share group {group_id} with DLQ topic {name}."
                continue
            index = partition % len(found.partitions)
            leader = found.partitions[index].leader if index in found.partitions else -1
            if leader < 0 or not image.is_live(leader):
                why = (f"DLQ topic partition leader node for share group {group_id} with DLQ topic {name} and "
                       f"partition {index} could not be found.")
                continue
            max_bytes = int(image.topic_config(name, "max.message.bytes")
                            or self.raw_config.get("message.max.bytes", DEFAULT_MAX_MESSAGE_BYTES))
            for chunk in chunks(records[sent:], max_bytes):
                code, why = await self._produce(leader, name, index, chunk)
                if code:
                    break
                sent += len(chunk)
            else:
                return
            if code not in RETRIABLE:
                raise DlqError(why)
        raise DlqError(f"Exhausted max retries to produce to DLQ topic without success: {why}")

    async def _create(self, name: str) -> str:
        """Ask the controller for the DLQ topic: '' (created, or being created by another
        broker: TOPIC_ALREADY_EXISTS) or why not, for a retry (the controller unreachable,
        THROTTLING_QUOTA_EXCEEDED); DlqError for Kafka's other errors (not retried)."""
        try:
            [result] = await self.controller.create_topics([NewTopic(
                name, None, None, {GROUP_ENABLE: "true", "message.timestamp.type": "CreateTime"})])
        except Exception as exc:  # the controller unreachable, a timeout
            return f"Unable to create DLQ topic {name}: {exc}"
        error = result.error
        if error is None or error.name == "TOPIC_ALREADY_EXISTS":
            log.info("share_dlq.topic_created", topic=name)
            return ""
        why = f"Unable to create DLQ topic {name}: {error.name} {error.message}"
        if error.name == "THROTTLING_QUOTA_EXCEEDED":
            return why
        raise DlqError(why)

    async def _produce(self, leader: int, name: str, index: int, records: list[Record]) -> tuple[int, str]:
        batch = await trio.to_thread.run_sync(encode_batch, records)  # up to max.message.bytes of it
        body: dict[str, Any] = {"transactional_id": None, "acks": -1, "timeout_ms": int(REQUEST_TIMEOUT_S * 1000),
                                "topic_data": [{"name": name, "partition_data": [
                                    {"index": index, "records": batch}]}]}
        try:
            conn = await self._peers.get(leader)
            if conn is None:
                return int(ErrorCode.NETWORK_EXCEPTION), f"broker {leader} has no endpoint"
            response = await conn.request(ApiKey.PRODUCE, body, version=PRODUCE_VERSION)
        except Exception as exc:  # connection refused or lost, a timeout, a malformed answer
            await self._peers.drop(leader)
            return int(ErrorCode.NETWORK_EXCEPTION), f"producing to broker {leader}: {exc}"
        for topic in response.responses if response is not None else ():
            for part in topic.partition_responses:
                if topic.name == name and part.index == index:
                    return part.error_code, (f"Unable to produce to DLQ topic {name}-{index}: error {part.error_code} "
                                             f"{getattr(part, 'error_message', None) or ''}").strip()
        return int(ErrorCode.UNKNOWN_SERVER_ERROR), f"broker {leader} answered Produce without {name}-{index}"
