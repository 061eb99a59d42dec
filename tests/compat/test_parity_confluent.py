"""Kafka parity seen through confluent-kafka (librdkafka): the behaviours of issue #18 that
real clients act on — commits to unknown partitions, keyless records on compacted topics,
transactions until they exist, and a deleted-and-re-created topic under a running producer."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT = 20.0
COORDINATOR_NOT_READY = (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                         KafkaError.COORDINATOR_NOT_AVAILABLE)


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _create(admin: AdminClient, *topics: NewTopic) -> None:
    for future in admin.create_topics(list(topics), operation_timeout=TIMEOUT).values():
        future.result(TIMEOUT)


def test_commit_to_unknown_topic_is_refused_per_partition_and_not_stored(bootstrap: str) -> None:
    admin = _admin(bootstrap)
    _create(admin, NewTopic("cf-commit-known", 1, 1))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cf-commit-unknown",
                         "enable.auto.commit": False})
    try:
        # A fresh broker creates __consumer_offsets on the first FindCoordinator and answers
        # retriable errors while it loads: commit to the known partition alone until it lands.
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                consumer.commit(offsets=[TopicPartition("cf-commit-known", 0, 6)], asynchronous=False)
                break
            except KafkaException as exc:
                if exc.args[0].code() not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        wanted = [TopicPartition("cf-no-such-topic", 0, 123), TopicPartition("cf-commit-known", 0, 7),
                  TopicPartition("cf-commit-known", 5, 9)]  # partition 5 does not exist
        answered = {(tp.topic, tp.partition): tp for tp in consumer.commit(offsets=wanted, asynchronous=False)}
        assert answered[("cf-commit-known", 0)].error is None
        assert answered[("cf-no-such-topic", 0)].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert answered[("cf-commit-known", 5)].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    except KafkaException as exc:  # librdkafka may raise the first partition error instead
        assert exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    try:
        committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(wanted, timeout=TIMEOUT)}
        assert committed[("cf-no-such-topic", 0)] < 0, "an offset for a missing topic was stored"
        assert committed[("cf-commit-known", 5)] < 0, "an offset for a missing partition was stored"
        assert committed[("cf-commit-known", 0)] == 7
    finally:
        consumer.close()


def test_admin_alter_offsets_for_unknown_topic_is_refused(bootstrap: str) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = _admin(bootstrap)
    request = ConsumerGroupTopicPartitions("cf-alter-unknown", [TopicPartition("cf-alter-no-topic", 0, 42)])
    future = admin.alter_consumer_group_offsets([request])["cf-alter-unknown"]
    try:
        result = future.result(TIMEOUT)
        errors = [tp.error for tp in result.topic_partitions]
        assert errors and errors[0] is not None and errors[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("cf-alter-unknown", [TopicPartition("cf-alter-no-topic", 0)])]
    )["cf-alter-unknown"].result(TIMEOUT)
    assert [tp.offset for tp in listed.topic_partitions] == [-1001]  # OFFSET_INVALID: nothing stored


def test_compacted_topic_refuses_keyless_records(bootstrap: str) -> None:
    admin = _admin(bootstrap)
    topic = "cf-compacted-keys"
    _create(admin, NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"}))
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "message.send.max.retries": 0})
    outcomes: list = []
    producer.produce(topic, value=b"no key", on_delivery=lambda err, msg: outcomes.append(("nokey", err)))
    producer.flush(TIMEOUT)
    producer.produce(topic, key=b"k", value=b"keyed", on_delivery=lambda err, msg: outcomes.append(("key", err)))
    assert producer.flush(TIMEOUT) == 0
    result = dict(outcomes)
    assert result["nokey"] is not None and result["nokey"].code() == KafkaError.INVALID_RECORD, result
    assert result["key"] is None, result


def test_init_transactions_finds_the_transaction_coordinator(bootstrap: str) -> None:
    """FindCoordinator(transaction) and InitProducerId with a transactional id (issue #16):
    init_transactions succeeds (it used to fail at once with TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cf-txn-init"})
    producer.init_transactions(60.0)
    producer.flush(TIMEOUT)


def _wait_partitions(admin: AdminClient, topic: str, count: int | None) -> None:
    """Until `topic` has `count` partitions (None: until it is gone), with a deadline."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        # All topics: naming one would let the admin handle (a producer inside) auto-create it.
        listed = admin.list_topics(timeout=TIMEOUT).topics.get(topic)
        exists = listed is not None and listed.error is None
        if (count is None and not exists) or (count is not None and exists and len(listed.partitions) == count):
            return
        time.sleep(0.05)
    raise AssertionError(f"{topic} did not reach {count} partitions in {TIMEOUT}s")


def test_producer_survives_topic_deleted_and_recreated_smaller(bootstrap: str) -> None:
    """Produce continuously; delete the 10-partition topic and re-create it with 3 partitions.
    librdkafka notices the re-creation only through a new topic id (Metadata v10+) and trusts
    leader epochs only from v9: every message must end with a delivery report (delivered, or
    an error), and what is produced after the re-creation is delivered."""
    import threading

    admin = _admin(bootstrap)
    topic = "cf-recreated"
    _create(admin, NewTopic(topic, 10, 1))
    _wait_partitions(admin, topic, 10)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "allow.auto.create.topics": False, "topic.metadata.refresh.interval.ms": 1000})
    reports: list[tuple[int, KafkaError | None]] = []
    phase = {"now": 0}
    stop = threading.Event()

    def run() -> None:
        i = 0
        while not stop.is_set():
            sent_in = phase["now"]
            try:
                producer.produce(topic, key=str(i).encode(), value=b"v",
                                 on_delivery=lambda err, msg, p=sent_in: reports.append((p, err)))
                i += 1
            except BufferError:
                pass
            producer.poll(0.002)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + TIMEOUT
        while not any(err is None for _, err in reports) and time.monotonic() < deadline:
            time.sleep(0.05)
        for future in admin.delete_topics([topic], operation_timeout=TIMEOUT).values():
            future.result(TIMEOUT)
        _wait_partitions(admin, topic, None)
        _create(admin, NewTopic(topic, 3, 1))
        _wait_partitions(admin, topic, 3)
        phase["now"] = 1  # produced from here on: after the re-creation
        deadline = time.monotonic() + 2 * TIMEOUT
        while sum(1 for p, err in reports if p == 1 and err is None) < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        worker.join(TIMEOUT)
    remaining = producer.flush(TIMEOUT)
    after = [err for p, err in reports if p == 1]
    assert remaining == 0, f"{remaining} messages neither delivered nor failed (a silent stall)"
    assert sum(1 for err in after if err is None) >= 200, \
        f"after the re-creation: {len(after)} reports, errors {[e for e in after if e][:3]}"
