"""Partition reassignment over a Cluster: AlterPartitionReassignments and
ListPartitionReassignments (Kafka keys 45/46, KIP-455). Used by `raftka reassign`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from raftka.client.cluster import Cluster
from raftka.client.errors import KafkaError, error_for_code
from raftka.client.protocol import ApiKey, request_class

AlterPartitionReassignmentsRequest = request_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
ListPartitionReassignmentsRequest = request_class(ApiKey.LIST_PARTITION_REASSIGNMENTS)

DEFAULT_TIMEOUT_MS = 60000  # Kafka's default for both requests


@dataclass(frozen=True)
class OngoingReassignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def _by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return topics


async def alter_partition_reassignments(
    cluster: Cluster, reassignments: Mapping[tuple[str, int], Sequence[int] | None],
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[tuple[str, int], KafkaError | None]:
    """Start (replicas) or cancel (None) reassignments; the outcome per (topic, partition).
    A whole-request refusal (authorization, no controller) is raised."""
    topics: dict[str, list[dict]] = {}
    for (topic, partition), replicas in reassignments.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "replicas": None if replicas is None else list(replicas)})
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=timeout_ms, allow_replication_factor_change=True,
        topics=[{"name": name, "partitions": parts} for name, parts in topics.items()])
    response = await cluster.send_any(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request)
    if response.error_code:
        raise error_for_code(response.error_code, f"AlterPartitionReassignments: {response.error_message or ''}")
    out: dict[tuple[str, int], KafkaError | None] = {}
    for topic in response.responses:
        for p in topic.partitions:
            out[(topic.name, p.partition_index)] = (
                None if not p.error_code else error_for_code(p.error_code, p.error_message or ""))
    return out


async def list_partition_reassignments(
    cluster: Cluster, partitions: Iterable[tuple[str, int]] | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> dict[tuple[str, int], OngoingReassignment]:
    """The reassignments in progress (of `partitions`, or all)."""
    topics = None if partitions is None else [
        {"name": name, "partition_indexes": indexes} for name, indexes in _by_topic(partitions).items()]
    response = await cluster.send_any(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                      ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=topics))
    if response.error_code:
        raise error_for_code(response.error_code, f"ListPartitionReassignments: {response.error_message or ''}")
    return {(t.name, p.partition_index): OngoingReassignment(tuple(p.replicas), tuple(p.adding_replicas),
                                                              tuple(p.removing_replicas))
            for t in response.topics for p in t.partitions}


# kafka-reassign-partitions' throttle keys: broker rates (bytes/s) and the topic replica lists.
THROTTLE_RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLED_REPLICAS_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


async def alter_configs_incrementally(
    cluster: Cluster, changes: Mapping[tuple[int, str], Mapping[str, str | None]],
) -> None:
    """One IncrementalAlterConfigs for several resources: (resource type, name) -> {key: value to
    SET, or None to DELETE}. Raises the first refused resource's error, naming it."""
    request = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)(resources=[
        {"resource_type": kind, "resource_name": name, "configs": [
            {"name": key, "value": value, "config_operation": 1 if value is None else 0}
            for key, value in ops.items()]}
        for (kind, name), ops in changes.items()], validate_only=False)
    response = await cluster.send_any(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
    for result in response.responses:
        if result.error_code:
            what = f"topic {result.resource_name!r}" if result.resource_type == TOPIC_RESOURCE \
                else f"broker {result.resource_name}"
            raise error_for_code(result.error_code, f"altering configs of {what}: {result.error_message or ''}")
