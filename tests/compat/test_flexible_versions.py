"""APIs whose newest Kafka 4.4 versions only change the encoding (flexible versions), on a real
broker at those versions: OffsetForLeaderEpoch v4, DescribeConfigs v4, CreatePartitions v2-3
(v3 may answer THROTTLING_QUOTA_EXCEEDED, which raftka never does), DeleteGroups v2,
OffsetCommit v8 and DeleteTopics v4."""

from __future__ import annotations

import pytest

from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.test_kafka44_apis import _coordinator_ready
from tests.compat.wire_client import WireConnection, values_batch


def test_offset_for_leader_epoch_v4(bootstrap: str) -> None:
    topic = "fv-epochs"
    with WireConnection(bootstrap) as conn:
        assert conn.create_topic(topic) in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
        assert conn.produce(topic, 0, values_batch([b"a", b"b", b"c"])).error_code == 0
        [answer] = conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                             "leader_epoch": 0}]}]}).topics
    [part] = answer.partitions
    assert (answer.topic, part.partition, part.error_code, part.leader_epoch) == (topic, 0, 0, 0)
    assert part.end_offset == 3


def test_describe_configs_v4(bootstrap: str) -> None:
    topic = "fv-configs"
    with WireConnection(bootstrap) as conn:
        assert conn.create_topic(topic, configs={"retention.ms": "12345"}) in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
        [result] = conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]}],
            "include_synonyms": True, "include_documentation": True}).results
    assert (result.error_code, result.resource_name) == (0, topic)
    [entry] = result.configs
    assert (entry.name, entry.value, entry.config_source) == ("retention.ms", "12345", 1)  # DYNAMIC_TOPIC_CONFIG


@pytest.mark.parametrize("version", [2, 3])
def test_create_partitions_flexible(bootstrap: str, version: int) -> None:
    topic = f"fv-grow-{version}"
    with WireConnection(bootstrap) as conn:
        assert conn.create_topic(topic) == 0
        [result] = conn.request(ApiKey.CREATE_PARTITIONS, version, {
            "topics": [{"name": topic, "count": 3, "assignments": None}], "timeout_ms": 15000,
            "validate_only": False}).results
        assert (result.name, result.error_code) == (topic, 0)
        [metadata] = conn.request(ApiKey.METADATA, 1, {"topics": [{"name": topic}]}).topics
    assert len(metadata.partitions) == 3


def test_delete_groups_v2(bootstrap: str) -> None:
    _coordinator_ready(bootstrap, "fv-no-such-group")
    with WireConnection(bootstrap) as conn:
        [result] = conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["fv-no-such-group"]}).results
    assert result.group_id == "fv-no-such-group"
    assert result.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_offset_commit_v8_and_fetch(bootstrap: str) -> None:
    topic, group = "fv-commits", "fv-committer"
    _coordinator_ready(bootstrap, group)
    with WireConnection(bootstrap) as conn:
        assert conn.create_topic(topic) in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
        [committed] = conn.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
                 "committed_metadata": "m"}]}]}).topics
        assert [(p.partition_index, p.error_code) for p in committed.partitions] == [(0, 0)]
        fetched = conn.fetch_offsets(group, topic, [0])
    [part] = fetched.topics[0].partitions
    assert (part.committed_offset, part.metadata) == (42, "m")


def test_delete_topics_v4(bootstrap: str) -> None:
    topic = "fv-doomed"
    with WireConnection(bootstrap) as conn:
        assert conn.create_topic(topic) == 0
        [result] = conn.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [topic, "fv-never-was"],
                                                          "timeout_ms": 15000}).responses[:1]
        assert (result.name, result.error_code) == (topic, 0)
        [metadata] = conn.request(ApiKey.METADATA, 4, {"topics": [{"name": topic}],
                                                       "allow_auto_topic_creation": False}).topics
    assert metadata.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
