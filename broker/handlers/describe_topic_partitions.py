"""DescribeTopicPartitions (key 75, KIP-966): what Kafka 3.8+'s `kafka-topics --describe` sends
(it falls back to Metadata, printing `Elr: N/A`, where the API is missing). Answered from the
broker's metadata image, a page at a time, as Kafka 4.4's DescribeTopicPartitionsRequestHandler
and KRaftMetadataCache do:

- the topics are the named ones (deduplicated), or every topic when none is named, keeping only
  names >= the cursor's topic, in name order. A cursor naming a topic the list leaves out is an
  INVALID_REQUEST for every named topic;
- the page holds at most min(`max.request.partition.size.limit` (2000),
  `response_partition_limit`) partitions; the cursor's topic starts at the cursor's partition,
  every other topic at 0. A topic cut short ends the page with `next_cursor` at its first
  partition left out; a page full at a topic boundary ends with `next_cursor` at the next topic's
  partition 0 (whether it exists or not). A topic the image lacks costs nothing: named, it
  answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name);
- ACLs: DESCRIBE on each topic. A named topic denied answers TOPIC_AUTHORIZATION_FAILED (zero
  id, after the others: its existence is not disclosed); the all-topics form leaves it out. Each
  answered topic carries its authorized operations;
- raftka has no ELR (KIP-966's eligible leader replicas): both ELR lists are empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftka.broker import acl_checks
from raftka.broker import authorized_operations as authz
from raftka.broker.context import BrokerContext
from raftka.broker.handlers.metadata import ZERO_UUID, topic_uuid
from raftka.broker.topic_names import INTERNAL_TOPICS, topic_name_error
from raftka.client.protocol import ErrorCode
from raftka.client.protocol.api_keys import ApiKey
from raftka.client.protocol.messages import response_class
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.security.acls import AclOperation

DescribeTopicPartitionsResponse = response_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS)

# Kafka's `max.request.partition.size.limit` (default 2000): the most partitions one answer holds,
# whatever the request's `response_partition_limit` asks.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
NO_LEADER_ID = -1


@dataclass(frozen=True)
class Page:
    topics: list[dict]  # the answered topics, in order
    next_cursor: tuple[str, int] | None  # (topic, partition) to ask from next, None when done


def select_topics(image: MetadataImage, names: list[str], cursor: tuple[str, int] | None) -> list[str] | None:
    """The topics to describe, sorted (every topic when `names` is empty), or None when a cursor
    names a topic the requested list leaves out (Kafka: InvalidRequestException)."""
    floor = cursor[0] if cursor is not None else ""
    candidates = names if names else image.topic_ids
    selected = sorted({n for n in candidates if n >= floor})
    if names and cursor is not None and cursor[0] not in selected:
        return None
    return selected


def describe_page(image: MetadataImage, topics: list[str], cursor: tuple[str, int] | None, limit: int,
                  *, report_unknown: bool) -> Page:
    """One page over `topics` (sorted, the caller may DESCRIBE them all), at most `limit` partitions.

    A topic the image lacks is answered with its error when `report_unknown` (the named form),
    left out otherwise; it uses none of the budget."""
    remaining = limit
    answered: list[dict] = []
    for name in topics:
        if remaining == 0:  # full at a topic boundary: the next page starts at this topic
            return Page(answered, (name, 0))
        if remaining < 0:
            break
        topic = image.topic_by_name(name)
        if topic is None:
            if report_unknown:
                code = ErrorCode.INVALID_TOPIC_EXCEPTION if topic_name_error(name) else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                answered.append(_topic(name, code, ZERO_UUID, []))
            continue
        start = cursor[1] if cursor is not None and name == cursor[0] else 0
        # As Kafka: the partition ids of a topic are 0..count-1, so the count bounds the page.
        upper = min(len(topic.partitions), start + remaining)
        partitions = [_partition(image, index, topic.partitions[index])
                      for index in range(start, upper) if index in topic.partitions]
        answered.append(_topic(name, 0, topic_uuid(topic), partitions))
        if upper < len(topic.partitions):
            return Page(answered, (name, upper))
        remaining -= len(partitions)
    return Page(answered, None)


def _topic(name: str, error_code: int, topic_id, partitions: list[dict]) -> dict:
    return {"error_code": error_code, "name": name, "topic_id": topic_id,
            "is_internal": name in INTERNAL_TOPICS, "partitions": partitions,
            "topic_authorized_operations": authz.OMITTED}


def _partition(image: MetadataImage, index: int, part) -> dict:
    return {
        "error_code": 0,
        "partition_index": index,
        # Kafka answers no leader (-1) for a leader the image has no registration of.
        "leader_id": part.leader if part.leader in image.brokers else NO_LEADER_ID,
        "leader_epoch": part.leader_epoch,
        "replica_nodes": list(part.replicas),
        "isr_nodes": list(part.isr),
        "eligible_leader_replicas": [],
        "last_known_elr": [],
        "offline_replicas": [r for r in part.replicas if not image.is_live(r)],
    }


async def handle(ctx: BrokerContext, header, request, conn=None):
    image: MetadataImage = ctx.image
    names = [t.name for t in request.topics]
    cursor = (request.cursor.topic_name, request.cursor.partition_index) if request.cursor is not None else None
    selected = select_topics(image, names, cursor)
    if selected is None:
        return DescribeTopicPartitionsResponse(
            throttle_time_ms=0, next_cursor=None,
            topics=[_topic(n, ErrorCode.INVALID_REQUEST, ZERO_UUID, []) | {"is_internal": False} for n in names])
    denied = acl_checks.topics_denied(ctx, conn, AclOperation.DESCRIBE, selected, log_denied=bool(names))
    limit = min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit)
    page = describe_page(image, [n for n in selected if n not in denied], cursor, limit, report_unknown=bool(names))
    for topic in page.topics:
        topic["topic_authorized_operations"] = authz.authorized_operations(ctx, conn, authz.TOPIC, topic["name"])
    refused = [_topic(n, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID, []) | {"is_internal": False}
               for n in sorted(denied)] if names else []
    next_cursor = None if page.next_cursor is None else {
        "topic_name": page.next_cursor[0], "partition_index": page.next_cursor[1]}
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=page.topics + refused, next_cursor=next_cursor)
