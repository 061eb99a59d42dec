"""ListOffsets by leader: the one routine the consumer, `raftka groups` and the Spark source share.

A partition's offsets can only be listed by its leader, so partitions are grouped by the
leader the cluster's metadata names and each leader gets one ListOffsets request for its
share. A target is Kafka's: EARLIEST (-2), LATEST (-1: the high watermark, as read
uncommitted) or a timestamp in ms, answered with the first offset whose record timestamp is
at or after it, or -1 when no record is that recent (Kafka's answer, passed on as is).

`list_offsets_once` makes one round and reports what failed; `list_offsets` retries the
retriable failures (connection lost, no answer in time, leader moved or unknown) after a
metadata refresh until every partition has its offset, and raises a partition's non-retriable
error. A cluster that does not answer at all is waited out until the timeout (KafkaTimeoutError).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import trio

from raftka.client.cluster import Cluster
from raftka.client.errors import NO_ANSWER, KafkaError, KafkaTimeoutError, error_for_code
from raftka.client.protocol import ApiKey, ErrorCode, ListOffsetsRequest
from raftka.client.records import TopicPartition

EARLIEST = -2
LATEST = -1


@dataclass
class ListOffsetsRound:
    """What one round answered: the offsets found and, per partition, why not."""

    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    failed: dict[TopicPartition, KafkaError] = field(default_factory=dict)


def request_for(targets: Mapping[TopicPartition, int], isolation_level: int = 0) -> ListOffsetsRequest:
    """One ListOffsets request (consumer replica id -1) for `targets`; `isolation_level` 1
    (read_committed, v2+) makes LATEST the last stable offset instead of the high watermark."""
    topics: dict[str, list[dict]] = {}
    for tp, target in targets.items():
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "timestamp": target})
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level,
                              topics=[{"name": t, "partitions": p} for t, p in topics.items()])


def by_leader(cluster: Cluster, tps: list[TopicPartition]
              ) -> tuple[dict[int, list[TopicPartition]], list[TopicPartition]]:
    """`tps` grouped by their leader's node id in the cluster's metadata, and those without one."""
    out: dict[int, list[TopicPartition]] = {}
    leaderless: list[TopicPartition] = []
    for tp in tps:
        leader = cluster.metadata.leader_for(tp)
        if leader is None:
            leaderless.append(tp)
        else:
            out.setdefault(leader, []).append(tp)
    return out, leaderless


async def list_offsets_once(cluster: Cluster, targets: Mapping[TopicPartition, int], *,
                            isolation_level: int = 0) -> ListOffsetsRound:
    """One request per leader known to the cluster's metadata (no refresh, no retry)."""
    result = ListOffsetsRound()
    groups, leaderless = by_leader(cluster, list(targets))
    for tp in leaderless:
        result.failed[tp] = error_for_code(ErrorCode.LEADER_NOT_AVAILABLE, f"ListOffsets for {tp}: no known leader")
    for node_id, tps in groups.items():
        try:
            response = await cluster.send_to(node_id, ApiKey.LIST_OFFSETS,
                                             request_for({tp: targets[tp] for tp in tps},
                                                         isolation_level))
        except NO_ANSWER as exc:  # connection lost or no answer in time: retriable
            result.failed.update((tp, exc) for tp in tps)
            continue
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if tp not in targets:
                    continue
                if p.error_code:
                    result.failed[tp] = error_for_code(p.error_code, f"ListOffsets for {tp}")
                else:
                    result.offsets[tp] = p.offset
        for tp in tps:  # a leader that left a partition out of its answer
            if tp not in result.offsets and tp not in result.failed:
                result.failed[tp] = error_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                   f"ListOffsets for {tp}: not in node {node_id}'s answer")
    return result


async def list_offsets(cluster: Cluster, targets: Mapping[TopicPartition, int], *,
                       timeout: float | None = None, isolation_level: int = 0,
                       ) -> dict[TopicPartition, int]:
    """The offset for every partition's target. Partitions whose leader is unknown trigger a
    metadata refresh first; retriable failures are retried every `cluster.retry_backoff`
    seconds after a refresh, until `timeout` seconds have passed (then KafkaTimeoutError) or,
    with None, until the caller's cancel scope ends it. A non-retriable error is raised."""
    deadline = None if timeout is None else trio.current_time() + timeout
    result: dict[TopicPartition, int] = {}
    pending = dict(targets)
    while True:
        if any(cluster.metadata.leader_for(tp) is None for tp in pending):
            # No answer: the round below reports those partitions as failed; retried.
            await cluster.refresh_metadata_if_reachable({tp.topic for tp in pending})
        answer = await list_offsets_once(cluster, pending, isolation_level=isolation_level)
        for tp, offset in answer.offsets.items():
            result[tp] = offset
            del pending[tp]
        for error in answer.failed.values():
            if not (error.retriable or error.invalid_metadata):
                raise error
        if not pending:
            return result
        if deadline is not None and trio.current_time() > deadline:
            raise KafkaTimeoutError(f"could not list offsets for {sorted(pending)} within {timeout:.3g} s")
        await trio.sleep(cluster.retry_backoff)
        await cluster.refresh_metadata_if_reachable({tp.topic for tp in pending})
