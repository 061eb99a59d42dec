"""DescribeTopicPartitions' pure core (broker/handlers/describe_topic_partitions.py): which topics a
request selects and how a page is cut, as Kafka 4.4's handler and KRaftMetadataCache do."""

from __future__ import annotations

import uuid

import pytest

from raftka.broker.handlers.describe_topic_partitions import describe_page, select_topics
from raftka.client.protocol import ErrorCode
from raftka.raft_meta.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionImage,
    TopicImage,
)

COUNTS = {"a": 3, "b": 1, "c": 4}  # topic -> partitions


def _image() -> MetadataImage:
    brokers = {1: BrokerRegistration(1, "i1", 1, (("PLAINTEXT", "127.0.0.1", 9092),), None, fenced=False),
               2: BrokerRegistration(2, "i2", 2, (("PLAINTEXT", "127.0.0.1", 9093),), None, fenced=True)}
    topics, ids = {}, {}
    for name, count in COUNTS.items():
        topic_id = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
        # Partition 1 of each topic is led by broker 3, which is not registered.
        parts = {i: PartitionImage(replicas=(1, 2, 3), isr=(1,), leader=3 if i == 1 else 1, leader_epoch=i,
                                   partition_epoch=0) for i in range(count)}
        topics[topic_id] = TopicImage(name, topic_id, parts)
        ids[name] = topic_id
    return MetadataImage(brokers=brokers, topics=topics, topic_ids=ids)


def _pages(page) -> tuple[list[tuple[str, list[int]]], tuple[str, int] | None]:
    return [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page.topics], page.next_cursor


@pytest.mark.parametrize(("names", "cursor", "selected"), [
    ([], None, ["a", "b", "c"]),
    ([], ("b", 0), ["b", "c"]),
    ([], ("bb", 3), ["c"]),  # the all-topics form takes any cursor
    (["c", "a", "c", "zz"], None, ["a", "c", "zz"]),  # sorted, deduplicated, unknown kept
    (["c", "a"], ("c", 2), ["c"]),
    (["c", "a"], ("b", 0), None),  # the cursor's topic must be among the named ones
    (["a"], ("", 0), None),  # as Kafka: even an empty cursor topic must be named
])
def test_select_topics(names, cursor, selected) -> None:
    assert select_topics(_image(), names, cursor) == selected


@pytest.mark.parametrize(("topics", "cursor", "limit", "answered", "next_cursor"), [
    (["a", "b", "c"], None, 2000, [("a", [0, 1, 2]), ("b", [0]), ("c", [0, 1, 2, 3])], None),
    # cut inside a topic: the cursor points at its first partition left out
    (["a", "b", "c"], None, 2, [("a", [0, 1])], ("a", 2)),
    (["a", "b", "c"], ("a", 2), 2, [("a", [2]), ("b", [0])], ("c", 0)),  # full at a boundary
    (["c"], ("c", 0), 2, [("c", [0, 1])], ("c", 2)),
    (["c"], ("c", 2), 2, [("c", [2, 3])], None),  # exactly the rest: no cursor
    (["a", "b", "c"], None, 4, [("a", [0, 1, 2]), ("b", [0])], ("c", 0)),
    # an unknown topic costs nothing and is answered when named
    (["a", "nope", "c"], None, 3, [("a", [0, 1, 2])], ("nope", 0)),
    (["a", "nope", "c"], None, 4, [("a", [0, 1, 2]), ("nope", []), ("c", [0])], ("c", 1)),
    (["c"], ("c", 9), 2, [("c", [])], None),  # a cursor past the end: the topic, empty
    (["a", "b"], None, 0, [], ("a", 0)),
])
def test_describe_page(topics, cursor, limit, answered, next_cursor) -> None:
    page = describe_page(_image(), topics, cursor, limit, report_unknown=True)
    assert _pages(page) == (answered, next_cursor)


def test_unknown_topics_answer_their_error_or_are_left_out() -> None:
    named = describe_page(_image(), ["bad name", "nope"], None, 10, report_unknown=True)
    assert [(t["name"], t["error_code"], t["topic_id"].int) for t in named.topics] == [
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION, 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)]
    assert describe_page(_image(), ["nope"], None, 10, report_unknown=False).topics == []


def test_partition_fields() -> None:
    [topic] = describe_page(_image(), ["a"], None, 10, report_unknown=True).topics
    assert topic["error_code"] == 0 and topic["topic_id"] == uuid.uuid5(uuid.NAMESPACE_URL, "a")
    assert not topic["is_internal"]
    first, unled = topic["partitions"][:2]
    assert first == {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                     "replica_nodes": [1, 2, 3], "isr_nodes": [1], "eligible_leader_replicas": [],
                     "last_known_elr": [], "offline_replicas": [2, 3]}  # 2 fenced, 3 unregistered
    assert unled["leader_id"] == -1 and unled["leader_epoch"] == 1  # its leader is not registered
