"""Topic configs, AlterConfigs / IncrementalAlterConfigs and manual replica assignments through
the real clients' Admin APIs (confluent-kafka's AdminClient, kafka-python's KafkaAdminClient)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from raftka.raft_meta.config.kafka_broker_catalogue import KAFKA_BROKER_CONFIGS

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _result(future):
    return future.result(TIMEOUT)


def _error(future) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)
    return caught.value.args[0]


def _describe(admin: AdminClient, resource: ConfigResource) -> dict:
    return _result(admin.describe_configs([resource])[resource])


def test_create_topic_with_every_standard_config(admin: AdminClient) -> None:
    configs = {
        "compression.type": "zstd", "min.cleanable.dirty.ratio": "0.2", "max.compaction.lag.ms": "600000",
        "segment.jitter.ms": "1000", "message.timestamp.before.max.ms": "86400000",
        "message.timestamp.after.max.ms": "3600000", "preallocate": "false", "retention.ms": "3600000",
    }
    _result(admin.create_topics([NewTopic("cf-cfg-all", 1, 1, config=configs)],
                                operation_timeout=TIMEOUT)["cf-cfg-all"])
    described = _describe(admin, ConfigResource("topic", "cf-cfg-all"))
    for key, value in configs.items():
        assert described[key].value == value, key
        assert described[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["compression.gzip.level"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.parametrize(("config", "text"), [
    ({"min.insync.replicas": "2"}, "larger than its replication factor 1"),
    ({"min.cleanable.dirty.ratio": "7"}, "min.cleanable.dirty.ratio"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"no.such.config": "1"}, "Unknown topic config name"),
])
def test_create_topic_refuses_bad_configs_like_kafka(admin: AdminClient, config: dict, text: str) -> None:
    error = _error(admin.create_topics([NewTopic("cf-cfg-bad", 1, 1, config=config)],
                                       operation_timeout=TIMEOUT)["cf-cfg-bad"])
    assert error.code() == KafkaError.INVALID_CONFIG and text in error.str()
    assert "cf-cfg-bad" not in admin.list_topics(timeout=TIMEOUT).topics


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_incremental_and_legacy_alter_configs(admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("cf-cfg-alter", 1, 1, config={"retention.ms": "5000"})],
                                operation_timeout=TIMEOUT)["cf-cfg-alter"])
    resource = ConfigResource("topic", "cf-cfg-alter", incremental_configs=[
        ConfigEntry("segment.ms", "600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    _result(admin.incremental_alter_configs([resource])[resource])
    described = _describe(admin, ConfigResource("topic", "cf-cfg-alter"))
    assert described["segment.ms"].value == "600000"
    assert described["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["cleanup.policy"].value in ("delete,compact", "compact,delete")

    too_strict = ConfigResource("topic", "cf-cfg-alter", incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    error = _error(admin.incremental_alter_configs([too_strict])[too_strict])
    assert error.code() == KafkaError.INVALID_CONFIG and "replication factor 1" in error.str()

    legacy = ConfigResource("topic", "cf-cfg-alter", set_config={"max.message.bytes": "2000000"})
    _result(admin.alter_configs([legacy])[legacy])
    described = _describe(admin, ConfigResource("topic", "cf-cfg-alter"))
    assert described["max.message.bytes"].value == "2000000"
    assert described["segment.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value  # replaced as a whole


def test_dynamic_broker_configs(admin: AdminClient) -> None:
    # librdkafka refuses the empty (cluster-default) broker name locally; the unit tests cover it.
    own = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    _result(admin.incremental_alter_configs([own])[own])
    described = _describe(admin, ConfigResource("broker", "1"))
    assert described["log.retention.ms"].value == "86400000"
    assert described["unclean.leader.election.enable"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    static = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)])
    error = _error(admin.incremental_alter_configs([static])[static])
    assert error.code() == KafkaError.INVALID_REQUEST and "cannot be updated dynamically" in error.str()
    bad = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    assert _error(admin.incremental_alter_configs([bad])[bad]).code() == KafkaError.INVALID_CONFIG
    cleanup = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("unclean.leader.election.enable", None, incremental_operation=AlterConfigOpType.DELETE)])
    _result(admin.incremental_alter_configs([cleanup])[cleanup])
    after = _describe(admin, ConfigResource("broker", "1"))["log.retention.ms"]  # Kafka's key, no default
    assert (after.value, after.source) == (None, ConfigSource.DEFAULT_CONFIG.value)


def test_a_broker_describes_kafkas_whole_catalogue(admin: AdminClient) -> None:
    """Kafka 4.4's 350 broker keys, each with Kafka's default where raftka has no key of its own,
    read-only unless dynamic in Kafka, passwords sensitive (KIP-226's DescribeConfigs)."""
    described = _describe(admin, ConfigResource("broker", "1"))
    public = {k for k, found in KAFKA_BROKER_CONFIGS.items() if not found.internal}
    assert public <= set(described)
    background = described["background.threads"]
    assert (background.value, background.source, background.is_read_only) == (
        "10", ConfigSource.DEFAULT_CONFIG.value, False)
    shutdown = described["controlled.shutdown.enable"]
    assert (shutdown.value, shutdown.is_read_only) == ("true", True)
    password = described["ssl.keystore.password"]
    assert (password.value, password.is_sensitive) == (None, True)
    assert described["broker.id"].value == described["node.id"].value == "1"


def test_manual_replica_assignments(admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("cf-assign", 2, replica_assignment=[[1], [1]])],
                                operation_timeout=TIMEOUT)["cf-assign"])
    partitions = admin.list_topics("cf-assign", timeout=TIMEOUT).topics["cf-assign"].partitions
    assert sorted(partitions) == [0, 1] and all(p.replicas == [1] for p in partitions.values())

    error = _error(admin.create_topics([NewTopic("cf-assign-bad", 2, replica_assignment=[[1], [7]])],
                                       operation_timeout=TIMEOUT)["cf-assign-bad"])
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT and "broker 7" in error.str()

    _result(admin.create_partitions([NewPartitions("cf-assign", 3, replica_assignment=[[1]])],
                                    operation_timeout=TIMEOUT)["cf-assign"])
    assert len(admin.list_topics("cf-assign", timeout=TIMEOUT).topics["cf-assign"].partitions) == 3
    error = _error(admin.create_partitions([NewPartitions("cf-assign", 4, replica_assignment=[[5]])],
                                           operation_timeout=TIMEOUT)["cf-assign"])
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT


def test_kafka_python_alter_configs(bootstrap: str) -> None:
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic

    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        client.create_topics([KpNewTopic("kp-cfg-alter", 1, 1, topic_configs={"compression.type": "gzip"})])
        client.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-cfg-alter",
                                               configs={"retention.ms": "120000"})])
        described = client.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "kp-cfg-alter")])
        values = described["topic"]["kp-cfg-alter"]
        assert values["retention.ms"]["value"] == "120000"
        assert values["compression.type"]["value"] == "gzip"
    finally:
        client.close()


def test_topic_compression_type_recompresses_like_kafka(admin: AdminClient, bootstrap: str) -> None:
    """librdkafka sends gzip; the topic says zstd: the broker stores zstd and consumers read the same records."""
    from confluent_kafka import Consumer, Producer

    from tests.compat.messages import check_stored_batches

    _result(admin.create_topics([NewTopic("cf-cfg-zstd", 1, 1, config={"compression.type": "zstd"})],
                                operation_timeout=TIMEOUT)["cf-cfg-zstd"])
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "gzip", "linger.ms": 20,
                         "enable.idempotence": True})
    values = [b"payload-%d-" % i * 30 for i in range(200)]
    for value in values:
        producer.produce("cf-cfg-zstd", value=value, key=b"k")
    assert producer.flush(TIMEOUT) == 0
    assert check_stored_batches(bootstrap, "cf-cfg-zstd", [0], "zstd") >= 1
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cf-cfg-zstd-reader",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["cf-cfg-zstd"])
        got: list[bytes] = []
        while len(got) < len(values):
            msg = consumer.poll(TIMEOUT)
            assert msg is not None and msg.error() is None
            got.append(msg.value())
        assert got == values
    finally:
        consumer.close()


def test_describe_configs_synonyms_like_kafka(admin: AdminClient) -> None:
    """librdkafka asks for synonyms; the chains and sources are Kafka's (ConfigHelper)."""
    create = admin.create_topics([NewTopic("cf-cfg-synonyms", 1, 1, config={"max.message.bytes": "2000000"})])
    _result(create["cf-cfg-synonyms"])
    described = _describe(admin, ConfigResource("topic", "cf-cfg-synonyms"))
    chain = [(s.name, s.value, ConfigSource(s.source)) for s in described["max.message.bytes"].synonyms.values()]
    assert chain == [("max.message.bytes", "2000000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
                     ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG)]
    segment = described["segment.bytes"]
    assert segment.source == ConfigSource.DEFAULT_CONFIG.value
    assert [(s.name, s.value) for s in segment.synonyms.values()] == [("log.segment.bytes", segment.value)]
    assert described["retention.ms"].synonyms == {}  # log.retention.ms is not set: no chain, as on Kafka
    # the cluster-wide min.insync.replicas written with the cluster, which the topic inherits
    min_isr = described["min.insync.replicas"]
    assert min_isr.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value and min_isr.value == "1"
    broker = _describe(admin, ConfigResource("broker", "1"))
    assert broker["min.insync.replicas"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
