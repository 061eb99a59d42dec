"""The SDK's view of the cluster: brokers, topics, partitions, leaders (pure).

`ClusterMetadata` is immutable; `updated(response, ...)` returns the next
view. Two rules borrowed from the Java client:

- a partition whose leader epoch in the response is *older* than the one
  already known keeps the known entry (a lagging broker must not move a
  client back to a stale leader);
- a refresh for some topics leaves the other topics alone; a refresh for
  all topics (request topics = null) replaces the topic set.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from raftka.client.records import TopicPartition


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 while there is no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: Mapping[int, PartitionInfo]
    is_internal: bool = False
    topic_id: uuid.UUID | None = None  # Metadata v10+ (None before, or for the null id)


def _frozen(d: dict) -> Mapping:
    return MappingProxyType(d)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: Mapping[int, BrokerInfo] = field(default_factory=lambda: _frozen({}))
    topics: Mapping[str, TopicInfo] = field(default_factory=lambda: _frozen({}))
    # Topics the last refresh reported an error for (e.g. 3 UNKNOWN_TOPIC_OR_PARTITION).
    topic_errors: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    controller_id: int = -1
    cluster_id: str | None = None

    # --- queries ---------------------------------------------------------
    def partitions_for(self, topic: str) -> list[int] | None:
        """Sorted partition ids of `topic`, or None if the topic is unknown."""
        info = self.topics.get(topic)
        return None if info is None else sorted(info.partitions)

    def available_partitions_for(self, topic: str) -> list[int]:
        """Partitions of `topic` that currently have a leader."""
        info = self.topics.get(topic)
        if info is None:
            return []
        return sorted(p for p, part in info.partitions.items() if part.leader >= 0)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        info = self.topics.get(tp.topic)
        return None if info is None else info.partitions.get(tp.partition)

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The leader's node id, or None when unknown or leaderless."""
        part = self.partition(tp)
        if part is None or part.leader < 0:
            return None
        return part.leader

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.brokers.get(node_id)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.topics.get(topic)
        return None if info is None else info.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the known topic with this id (None if none is known)."""
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info.name
        return None

    # --- updates ---------------------------------------------------------
    def updated(self, response: Any, *, all_topics: bool) -> ClusterMetadata:
        """The view after a MetadataResponse (a decoded message or anything with
        the same attributes). `all_topics` says the request asked for every topic."""
        brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
            for b in response.brokers
        }
        topics: dict[str, TopicInfo] = {} if all_topics else dict(self.topics)
        errors: dict[str, int] = {} if all_topics else dict(self.topic_errors)
        for t in response.topics:
            if t.error_code:
                # An errored topic is gone or not ready: forget what we knew.
                errors[t.name] = t.error_code
                topics.pop(t.name, None)
                continue
            errors.pop(t.name, None)
            known = self.topics.get(t.name)
            parts: dict[int, PartitionInfo] = {}
            for p in t.partitions:
                new = PartitionInfo(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    leader_epoch=getattr(p, "leader_epoch", -1),
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    offline_replicas=tuple(getattr(p, "offline_replicas", ()) or ()),
                    error_code=p.error_code,
                )
                old = known.partitions.get(p.partition_index) if known else None
                if old is not None and 0 <= new.leader_epoch < old.leader_epoch:
                    new = old  # stale answer from a lagging broker
                parts[p.partition_index] = new
            topic_id = getattr(t, "topic_id", None)
            topics[t.name] = TopicInfo(t.name, _frozen(parts), getattr(t, "is_internal", False),
                                       topic_id if topic_id and topic_id.int else None)
        return replace(
            self,
            brokers=_frozen(brokers),
            topics=_frozen(topics),
            topic_errors=_frozen(errors),
            controller_id=getattr(response, "controller_id", -1),
            cluster_id=getattr(response, "cluster_id", None),
        )

    def without_leader(self, tps: Iterable[TopicPartition]) -> ClusterMetadata:
        """The view with these partitions' leaders marked unknown (after a
        NOT_LEADER_OR_FOLLOWER, until the refresh arrives)."""
        topics = dict(self.topics)
        for tp in tps:
            info = topics.get(tp.topic)
            if info is None or tp.partition not in info.partitions:
                continue
            parts = dict(info.partitions)
            parts[tp.partition] = replace(parts[tp.partition], leader=-1)
            topics[tp.topic] = replace(info, partitions=_frozen(parts))
        return replace(self, topics=_frozen(topics))
