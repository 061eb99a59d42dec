"""Issue #18's protocol parity seen through kafka-python: init_transactions finds the
transaction coordinator, and a commit to a topic that does not exist is refused and not stored."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata

TIMEOUT = 20.0


def test_init_transactions_finds_the_transaction_coordinator(bootstrap: str) -> None:
    """Issue #16: init_transactions succeeds (it used to raise TransactionalIdAuthorizationFailed)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn-init",
                             max_block_ms=60_000)
    try:
        producer.init_transactions()
    finally:
        producer.close(timeout=TIMEOUT)


def test_commit_to_unknown_topic_is_refused_and_not_stored(bootstrap: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-commit-unknown",
                             enable_auto_commit=False)
    try:
        tp = TopicPartition("kp-no-such-topic", 0)
        # commit() retries this error until its timeout, as against Kafka: ask asynchronously
        # and look at the first answer (a fresh broker's coordinator may still be loading).
        deadline = time.monotonic() + TIMEOUT
        while True:
            answers: list = []
            consumer.commit_async({tp: OffsetAndMetadata(123, "", -1)},
                                  callback=lambda offsets, result, out=answers: out.append(result))
            while not answers and time.monotonic() < deadline:
                consumer.poll(timeout_ms=50)
            assert answers, f"no answer to the commit within {TIMEOUT}s"
            if isinstance(answers[0], (CoordinatorLoadInProgressError, NotCoordinatorError)) \
                    and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            break
        assert isinstance(answers[0], UnknownTopicOrPartitionError), answers[0]
        assert consumer.committed(tp) is None, "an offset for a missing topic was stored"
    finally:
        consumer.close()
