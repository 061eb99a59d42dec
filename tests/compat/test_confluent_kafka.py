"""confluent-kafka (librdkafka) against a real raftka server: admin, produce, consume, offsets."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
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


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(admin: AdminClient, *topics: NewTopic) -> None:
    for future in admin.create_topics(list(topics), operation_timeout=TIMEOUT).values():
        future.result(TIMEOUT)


def create_error(admin: AdminClient, topic: NewTopic) -> KafkaError:
    future = admin.create_topics([topic], operation_timeout=TIMEOUT)[topic.topic]
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)
    return caught.value.args[0]


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions)


def produce(bootstrap: str, topic: str, messages: Sequence[Message], **config) -> list:
    """Send with librdkafka, wait for every delivery report; the reports' (partition, offset)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "partitioner": "murmur2_random",
                         "linger.ms": 5, **config})
    reports: list = [None] * len(messages)
    errors: list = []

    def on_delivery(index: int):
        def report(err, msg) -> None:
            if err is not None:
                errors.append((index, err))
            else:
                reports[index] = (msg.partition(), msg.offset())
        return report

    for index, message in enumerate(messages):
        while True:
            try:
                producer.produce(topic, key=message.key, value=message.value,
                                 headers=list(message.headers), on_delivery=on_delivery(index))
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
    remaining = producer.flush(TIMEOUT)
    assert remaining == 0, f"{remaining} messages still undelivered after {TIMEOUT}s"
    assert not errors, f"delivery failed: {errors[:5]}"
    return reports


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Consumed]:
    """assign() every partition from the beginning; read until `expected` messages arrived."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"compat-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    out: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + TIMEOUT
        while len(out) < expected and time.monotonic() < deadline:
            # Ask for no more than is missing: consume() returns as soon as it has that many.
            for msg in consumer.consume(min(expected - len(out), 2000), 0.5):
                assert msg.error() is None, f"consume error: {msg.error()}"
                out.append(Consumed(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                    tuple(msg.headers() or ()), msg.timestamp()[1]))
    finally:
        consumer.close()
    return out


# -- admin ------------------------------------------------------------------------


def test_admin_create_list_describe_delete(admin: AdminClient) -> None:
    create(admin, NewTopic("cf-admin-explicit", num_partitions=4, replication_factor=1,
                           config={"retention.ms": "3600000"}),
           NewTopic("cf-admin-defaults"))  # -1/-1: the broker's num.partitions, RF 1
    listed = admin.list_topics(timeout=TIMEOUT).topics
    assert {"cf-admin-explicit", "cf-admin-defaults"} <= set(listed)
    assert len(listed["cf-admin-explicit"].partitions) == 4
    assert len(listed["cf-admin-defaults"].partitions) == DEFAULT_PARTITIONS
    for meta in listed["cf-admin-explicit"].partitions.values():
        assert meta.error is None
        assert meta.replicas == [1] and meta.isrs == [1] and meta.leader == 1

    resource = ConfigResource("topic", "cf-admin-explicit")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    broker = ConfigResource("broker", "1")
    broker_configs = admin.describe_configs([broker])[broker].result(TIMEOUT)
    assert broker_configs["num.partitions"].value == str(DEFAULT_PARTITIONS)
    assert broker_configs["controller.quorum.secret"].is_sensitive

    for future in admin.create_partitions([NewPartitions("cf-admin-explicit", 6)],
                                          operation_timeout=TIMEOUT).values():
        future.result(TIMEOUT)
    assert partition_count(admin, "cf-admin-explicit") == 6

    for future in admin.delete_topics(["cf-admin-explicit", "cf-admin-defaults"],
                                      operation_timeout=TIMEOUT).values():
        future.result(TIMEOUT)
    remaining = set(admin.list_topics(timeout=TIMEOUT).topics)
    assert not {"cf-admin-explicit", "cf-admin-defaults"} & remaining


def test_admin_errors(admin: AdminClient) -> None:
    create(admin, NewTopic("cf-admin-exists", 1, 1))
    assert create_error(admin, NewTopic("cf-admin-exists", 1, 1)).code() == \
        KafkaError.TOPIC_ALREADY_EXISTS
    assert create_error(admin, NewTopic("bad name!", 1, 1)).code() == KafkaError.TOPIC_EXCEPTION
    assert create_error(admin, NewTopic("cf-too-many-replicas", 1, 3)).code() == \
        KafkaError.INVALID_REPLICATION_FACTOR
    # Shrinking is not allowed (INVALID_PARTITIONS), and the topic keeps its partition.
    future = admin.create_partitions([NewPartitions("cf-admin-exists", 1)])["cf-admin-exists"]
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)
    assert caught.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    future = admin.delete_topics(["cf-never-created"])["cf-never-created"]
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)
    assert caught.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert partition_count(admin, "cf-admin-exists") == 1
    assert "cf-too-many-replicas" not in admin.list_topics(timeout=TIMEOUT).topics


# -- produce / consume ----------------------------------------------------------------


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# 10 000 messages for one codec; the others at 3 000 keep the module quick (~1.5 s vs ~0.6 s each).
FULL_CODEC, FULL_COUNT, COUNT = "zstd", 10_000, 3_000


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_per_codec(admin: AdminClient, bootstrap: str, codec: str) -> None:
    topic, partitions = f"cf-rt-{codec}", 3
    create(admin, NewTopic(topic, partitions, 1))
    sent = make_messages(FULL_COUNT if codec == FULL_CODEC else COUNT, seed=CODECS.index(codec))
    reports = produce(bootstrap, topic, sent, **{"compression.type": codec})
    consumed = consume(bootstrap, topic, partitions, len(sent))
    check_round_trip(sent, consumed, partitions)
    # The delivery reports name exactly where each message was read back.
    by_value = {(c.partition, c.offset): c.value for c in consumed}
    assert all(by_value[report] == message.value for report, message in zip(reports, sent, strict=True))
    assert check_stored_batches(bootstrap, topic, range(partitions), codec, idempotent=True) > 0


def test_key_to_partition_agrees_with_java_partitioner(admin: AdminClient, bootstrap: str) -> None:
    topic, partitions = "cf-partitioner", 7
    create(admin, NewTopic(topic, partitions, 1))
    keys = [f"user-{i}".encode() for i in range(500)] + [b"", b"\x00\xff", "ключ".encode()]
    sent = [Message(key, b"v", ()) for key in keys]
    reports = produce(bootstrap, topic, sent)
    wrong = [(key, partition) for key, (partition, _offset) in zip(keys, reports, strict=True)
             if partition != partition_for_key(key, partitions)]
    assert not wrong, f"{len(wrong)} keys placed differently from murmur2, e.g. {wrong[:5]}"
    assert len({partition for partition, _ in reports}) == partitions


def test_list_offsets(admin: AdminClient, bootstrap: str) -> None:
    topic = "cf-offsets"
    create(admin, NewTopic(topic, 1, 1))
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    base = int(time.time() * 1000) - 100_000
    for i in range(10):  # explicit create times 1 s apart, in one batch or several
        producer.produce(topic, value=f"m{i}".encode(), timestamp=base + i * 1000)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cf-offsets"})
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.get_watermark_offsets(tp, timeout=TIMEOUT) == (0, 10)
        wanted = [TopicPartition(topic, 0, ts) for ts in
                  (base - 1, base, base + 1, base + 4500, base + 9000, base + 9001)]
        found = []
        for tp_ts in wanted:
            result = consumer.offsets_for_times([tp_ts], timeout=TIMEOUT)[0]
            assert result.error is None
            found.append(result.offset)
        # First offset with timestamp >= t; past the last one: the end (-1, "no such offset").
        assert found == [0, 0, 1, 5, 9, -1]
    finally:
        consumer.close()

