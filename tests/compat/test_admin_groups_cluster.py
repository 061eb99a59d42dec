"""ListGroups v4+ (states), DescribeCluster, OffsetDelete and authorized operations through
confluent-kafka's AdminClient (and kafka-python's KafkaAdminClient where it differs)."""

from __future__ import annotations

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    TopicPartition,
)
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from tests.support import wait_until

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _make_topic(admin: AdminClient, name: str, partitions: int = 2) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=TIMEOUT)[name].result(TIMEOUT)


def _commit_offsets(admin: AdminClient, group: str, topic: str) -> None:
    """An Empty group with committed offsets (AlterConsumerGroupOffsets = OffsetCommit, no member)."""
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)])

    def committed() -> bool:  # the first FindCoordinator creates __consumer_offsets: NOT_COORDINATOR meanwhile
        result = admin.alter_consumer_group_offsets([request])[group].result(TIMEOUT)
        return all(tp.error is None for tp in result.topic_partitions)

    wait_until(committed, timeout=30.0, interval=0.2)


def _listed(admin: AdminClient, **kwargs) -> dict:
    result = admin.list_consumer_groups(request_timeout=TIMEOUT, **kwargs).result(TIMEOUT)
    return {g.group_id: g for g in result.valid}


def test_list_groups_states_and_filter(admin: AdminClient) -> None:
    _make_topic(admin, "cf-lg")
    _commit_offsets(admin, "cf-lg-empty", "cf-lg")
    listed = _listed(admin)
    assert listed["cf-lg-empty"].state == ConsumerGroupState.EMPTY  # was UNKNOWN (ListGroups v2 has no state)
    assert "cf-lg-empty" in _listed(admin, states={ConsumerGroupState.EMPTY})
    assert "cf-lg-empty" not in _listed(admin, states={ConsumerGroupState.STABLE})


def test_describe_cluster_and_authorized_operations(admin: AdminClient, server) -> None:
    described = admin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT).result(TIMEOUT)
    assert [n.id for n in described.nodes] == [1]
    assert described.controller.id == 1 and described.cluster_id
    assert set(described.authorized_operations) == {
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}
    plain = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert plain.authorized_operations is None

    _make_topic(admin, "cf-authz")
    _commit_offsets(admin, "cf-authz-group", "cf-authz")
    group = admin.describe_consumer_groups(["cf-authz-group"], include_authorized_operations=True,
                                           request_timeout=TIMEOUT)["cf-authz-group"].result(TIMEOUT)
    assert set(group.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
    assert group.state == ConsumerGroupState.EMPTY


def test_kafka_python_metadata_authorized_operations(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        client.create_topics([__import__("kafka.admin", fromlist=["NewTopic"]).NewTopic("kp-authz", 1, 1)])
        [topic] = client.describe_topics(["kp-authz"])
        # kafka-python decodes the bit field into operation names; READ..ALTER_CONFIGS for a topic
        assert set(topic["authorized_operations"]) >= {"READ", "WRITE", "DESCRIBE", "ALTER_CONFIGS"}
    finally:
        client.close()


def _committed(admin: AdminClient, group: str) -> set[tuple[str, int, int]]:
    found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                              request_timeout=TIMEOUT)[group].result(TIMEOUT)
    return {(tp.topic, tp.partition, tp.offset) for tp in found.topic_partitions if tp.offset >= 0}


def test_offset_delete(admin: AdminClient, bootstrap: str) -> None:
    """OffsetDelete through kafka-python (confluent-kafka's Python AdminClient has no call for it)."""
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError

    _make_topic(admin, "cf-od")
    _make_topic(admin, "cf-od-other")
    _commit_offsets(admin, "cf-od-group", "cf-od")
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cf-od-live", "session.timeout.ms": 6000,
                         "enable.auto.commit": False})
    try:
        result = client.delete_group_offsets("cf-od-group", [KpTopicPartition("cf-od", 0)])
        assert result == {KpTopicPartition("cf-od", 0): NoError}
        assert _committed(admin, "cf-od-group") == {("cf-od", 1, 7)}

        with pytest.raises(GroupIdNotFoundError):
            client.delete_group_offsets("cf-od-nobody", [KpTopicPartition("cf-od", 0)])

        # A member subscribed to cf-od: its offsets stay (GROUP_SUBSCRIBED_TO_TOPIC); cf-od-other's go.
        consumer.subscribe(["cf-od"])
        wait_until(lambda: consumer.poll(0.1) is None and bool(consumer.assignment()), timeout=30.0)
        consumer.commit(offsets=[TopicPartition("cf-od", 0, 3), TopicPartition("cf-od-other", 0, 4)],
                        asynchronous=False)
        result = client.delete_group_offsets("cf-od-live", [KpTopicPartition("cf-od", 0),
                                                            KpTopicPartition("cf-od-other", 0)])
        assert result == {KpTopicPartition("cf-od", 0): GroupSubscribedToTopicError,
                          KpTopicPartition("cf-od-other", 0): NoError}
        assert _committed(admin, "cf-od-live") == {("cf-od", 0, 3)}
    finally:
        consumer.close()
        client.close()
