"""kafka-python against a real raftka server: admin, produce (idempotent by default), consume, offsets."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from raftka.client.partitioner import partition_for_key
from tests.compat.conftest import DEFAULT_PARTITIONS
from tests.compat.messages import (
    Consumed,
    Message,
    check_round_trip,
    check_stored_batches,
    make_messages,
)

TIMEOUT = 20.0


@pytest.fixture(scope="module", autouse=True)
def _codecs(kafka_python_codecs: None) -> None:
    """Every test here may use snappy and lz4."""


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        yield client
    finally:
        client.close()


def partition_count(admin: KafkaAdminClient, topic: str) -> int:
    (described,) = admin.describe_topics([topic])
    assert described["error_code"] == 0, described
    return len(described["partitions"])


def produce(bootstrap: str, topic: str, messages: Sequence[Message], **config) -> list:
    """Send with kafka-python's defaults (idempotent, murmur2 partitioner) and acks=all;
    every message's (partition, offset)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **config)
    try:
        assert producer.config["enable_idempotence"], "kafka-python should default to idempotence"
        futures = [producer.send(topic, key=m.key, value=m.value, headers=list(m.headers))
                   for m in messages]
        producer.flush(TIMEOUT)
        return [(meta.partition, meta.offset) for meta in (f.get(TIMEOUT) for f in futures)]
    finally:
        producer.close(TIMEOUT)


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Consumed]:
    """assign() every partition from the beginning; read until `expected` messages arrived."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", group_id=None)
    out: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + TIMEOUT
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(500, max_records=5000).values():
                out.extend(Consumed(r.partition, r.offset, r.key, r.value, tuple(r.headers),
                                    r.timestamp) for r in records)
    finally:
        consumer.close()
    # poll() groups by partition; restore per-partition order only (what the check needs).
    return sorted(out, key=lambda c: (c.partition, c.offset))


# -- admin ------------------------------------------------------------------------


def test_admin_create_list_describe_delete(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("kp-admin-explicit", 4, 1, topic_configs={"retention.ms": "3600000"}),
                         NewTopic("kp-admin-defaults", -1, -1)])
    assert {"kp-admin-explicit", "kp-admin-defaults"} <= set(admin.list_topics())
    assert partition_count(admin, "kp-admin-explicit") == 4
    assert partition_count(admin, "kp-admin-defaults") == DEFAULT_PARTITIONS
    (described,) = admin.describe_topics(["kp-admin-explicit"])
    for partition in described["partitions"]:
        assert partition["error_code"] == 0
        assert partition["leader_id"] == 1 and partition["replica_nodes"] == [1]

    resource = ConfigResource(ConfigResourceType.TOPIC, "kp-admin-explicit")
    modified = admin.describe_configs([resource])["topic"]["kp-admin-explicit"]
    assert set(modified) == {"retention.ms"}, "only the topic's own override is 'modified'"
    assert modified["retention.ms"]["value"] == "3600000"
    everything = admin.describe_configs([resource], config_filter="all")["topic"]["kp-admin-explicit"]
    assert everything["cleanup.policy"]["value"] == "delete"
    assert everything["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"

    admin.create_partitions({"kp-admin-explicit": NewPartitions(6)})
    assert partition_count(admin, "kp-admin-explicit") == 6

    admin.delete_topics(["kp-admin-explicit", "kp-admin-defaults"])
    assert not {"kp-admin-explicit", "kp-admin-defaults"} & set(admin.list_topics())


def test_admin_errors(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("kp-admin-exists", 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("kp-admin-exists", 1, 1)])
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic("bad name!", 1, 1)])
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics([NewTopic("kp-too-many-replicas", 1, 3)])
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kp-admin-exists": NewPartitions(1)})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["kp-never-created"])
    assert partition_count(admin, "kp-admin-exists") == 1
    assert "kp-too-many-replicas" not in admin.list_topics()


# -- produce / consume ----------------------------------------------------------------


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# 10 000 messages for one codec; the others at 3 000 keep the module quick (~1.5 s vs ~0.6 s each).
FULL_CODEC, FULL_COUNT, COUNT = "snappy", 10_000, 3_000  # snappy: xerial framing


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_per_codec(admin: KafkaAdminClient, bootstrap: str, codec: str) -> None:
    topic, partitions = f"kp-rt-{codec}", 3
    admin.create_topics([NewTopic(topic, partitions, 1)])
    sent = make_messages(FULL_COUNT if codec == FULL_CODEC else COUNT, seed=100 + CODECS.index(codec))
    reports = produce(bootstrap, topic, sent, compression_type=None if codec == "none" else codec)
    consumed = consume(bootstrap, topic, partitions, len(sent))
    check_round_trip(sent, consumed, partitions)
    by_position = {(c.partition, c.offset): c.value for c in consumed}
    assert all(by_position[report] == message.value
               for report, message in zip(reports, sent, strict=True))
    assert check_stored_batches(bootstrap, topic, range(partitions), codec, idempotent=True) > 0


def test_key_to_partition_agrees_with_java_partitioner(admin: KafkaAdminClient,
                                                       bootstrap: str) -> None:
    topic, partitions = "kp-partitioner", 7
    admin.create_topics([NewTopic(topic, partitions, 1)])
    keys = [f"user-{i}".encode() for i in range(500)] + [b"", b"\x00\xff", "ключ".encode()]
    reports = produce(bootstrap, topic, [Message(key, b"v", ()) for key in keys])
    wrong = [(key, partition) for key, (partition, _offset) in zip(keys, reports, strict=True)
             if partition != partition_for_key(key, partitions)]
    assert not wrong, f"{len(wrong)} keys placed differently from murmur2, e.g. {wrong[:5]}"
    assert len({partition for partition, _ in reports}) == partitions


def test_list_offsets(admin: KafkaAdminClient, bootstrap: str) -> None:
    topic = "kp-offsets"
    admin.create_topics([NewTopic(topic, 2, 1)])
    base = int(time.time() * 1000) - 100_000
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(10):
            producer.send(topic, value=f"m{i}".encode(), partition=0, timestamp_ms=base + i * 1000)
        producer.flush(TIMEOUT)
    finally:
        producer.close(TIMEOUT)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 0}
        found = {}
        for ts in (base - 1, base, base + 1, base + 4500, base + 9000, base + 9001):
            answer = consumer.offsets_for_times({tp0: ts})[tp0]
            found[ts - base] = None if answer is None else (answer.offset, answer.timestamp)
        assert found == {-1: (0, base), 0: (0, base), 1: (1, base + 1000),
                         4500: (5, base + 5000), 9000: (9, base + 9000), 9001: None}
        assert consumer.offsets_for_times({tp1: base})[tp1] is None  # empty partition
    finally:
        consumer.close()
