"""kafka-python's transactional producer against raftka's transaction coordinator (issue #16):
commit and abort, seen by read_committed and read_uncommitted consumers."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey
from tests.compat.wire_client import WireConnection

TIMEOUT = 30.0

pytestmark = pytest.mark.skipif(ApiKey.WRITE_TXN_MARKERS not in ADVERTISED_VERSIONS,
                                reason="the partition side of transactions (WriteTxnMarkers) is not served")


def read_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]  # the LSO under read_committed
        values = []
        while consumer.position(tp) < end:
            for records in consumer.poll(timeout_ms=1000).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


def test_commit_and_abort(bootstrap: str) -> None:
    topic = "kp-txn-commit-abort"
    with WireConnection(bootstrap) as conn:
        assert conn.create_topic(topic, 1) == 0
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn-1", max_block_ms=60_000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"c1", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"a1", partition=0)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"c2", partition=0)
        producer.commit_transaction()
    finally:
        producer.close(timeout=TIMEOUT)
    assert read_all(bootstrap, topic, "read_committed") == [b"c1", b"c2"]
    assert read_all(bootstrap, topic, "read_uncommitted") == [b"c1", b"a1", b"c2"]
