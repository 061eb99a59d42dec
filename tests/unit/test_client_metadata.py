"""The SDK's metadata cache, fed real decoded MetadataResponses."""

from __future__ import annotations

from raftka.client.metadata import ClusterMetadata
from raftka.client.protocol import ApiKey, decode_response, encode_response
from raftka.client.records import TopicPartition


def response(topics: list[dict], brokers: list[tuple[int, int]] | None = None,
             controller: int = 1):
    body = {
        "brokers": [{"node_id": n, "host": "127.0.0.1", "port": p}
                    for n, p in (brokers or [(1, 9092), (2, 9093)])],
        "cluster_id": "c-1",
        "controller_id": controller,
        "topics": topics,
    }
    frame = encode_response(5, ApiKey.METADATA, 8, body)
    return decode_response(ApiKey.METADATA, 8, frame[4:])[1]


def topic(name: str, leaders: dict[int, tuple[int, int]], error: int = 0) -> dict:
    return {"name": name, "error_code": error, "partitions": [
        {"partition_index": p, "leader_id": leader, "leader_epoch": epoch,
         "replica_nodes": [1, 2], "isr_nodes": [leader] if leader >= 0 else [],
         "error_code": 0}
        for p, (leader, epoch) in leaders.items()]}


def test_first_update_fills_brokers_topics_and_leaders() -> None:
    meta = ClusterMetadata().updated(response([topic("a", {0: (1, 3), 1: (2, 5)})]),
                                     all_topics=True)
    assert sorted(meta.brokers) == [1, 2] and meta.brokers[2].port == 9093
    assert meta.controller_id == 1 and meta.cluster_id == "c-1"
    assert meta.partitions_for("a") == [0, 1]
    assert meta.leader_for(TopicPartition("a", 1)) == 2
    assert meta.partition(TopicPartition("a", 0)).leader_epoch == 3
    assert meta.partition(TopicPartition("a", 0)).replicas == (1, 2)
    assert meta.partitions_for("missing") is None


def test_stale_leader_epoch_does_not_replace_a_newer_one() -> None:
    meta = ClusterMetadata().updated(response([topic("a", {0: (1, 5)})]), all_topics=True)
    stale = meta.updated(response([topic("a", {0: (2, 4)})]), all_topics=True)
    assert stale.leader_for(TopicPartition("a", 0)) == 1
    newer = meta.updated(response([topic("a", {0: (2, 6)})]), all_topics=True)
    assert newer.leader_for(TopicPartition("a", 0)) == 2


def test_partial_refresh_keeps_other_topics_full_refresh_replaces() -> None:
    meta = ClusterMetadata().updated(
        response([topic("a", {0: (1, 0)}), topic("b", {0: (2, 0)})]), all_topics=True)
    partial = meta.updated(response([topic("a", {0: (2, 1)})]), all_topics=False)
    assert partial.partitions_for("b") == [0]
    assert partial.leader_for(TopicPartition("a", 0)) == 2
    full = meta.updated(response([topic("a", {0: (1, 0)})]), all_topics=True)
    assert full.partitions_for("b") is None


def test_topic_errors_are_recorded_and_forget_the_topic() -> None:
    meta = ClusterMetadata().updated(response([topic("a", {0: (1, 0)})]), all_topics=True)
    gone = meta.updated(response([topic("a", {}, error=3)]), all_topics=False)
    assert gone.partitions_for("a") is None and gone.topic_errors == {"a": 3}
    back = gone.updated(response([topic("a", {0: (1, 0)})]), all_topics=False)
    assert "a" not in back.topic_errors


def test_leaderless_partitions_are_not_available() -> None:
    meta = ClusterMetadata().updated(response([topic("a", {0: (-1, 0), 1: (2, 0)})]),
                                     all_topics=True)
    assert meta.available_partitions_for("a") == [1]
    assert meta.leader_for(TopicPartition("a", 0)) is None


def test_without_leader_marks_partitions_unknown_until_refresh() -> None:
    meta = ClusterMetadata().updated(response([topic("a", {0: (1, 0), 1: (2, 0)})]),
                                     all_topics=True)
    marked = meta.without_leader([TopicPartition("a", 0), TopicPartition("zz", 0)])
    assert marked.leader_for(TopicPartition("a", 0)) is None
    assert marked.leader_for(TopicPartition("a", 1)) == 2
    assert meta.leader_for(TopicPartition("a", 0)) == 1  # the old view is untouched
