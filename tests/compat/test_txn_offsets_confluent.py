"""confluent-kafka (librdkafka): offsets committed inside a transaction
(`send_offsets_to_transaction`) become the group's offsets only if the transaction commits,
and a read_committed consumer of the group resumes from them (issue #16, partition side:
TxnOffsetCommit, the markers in `__consumer_offsets`, OffsetFetch require_stable)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.compat.server_process import running_server
from tests.compat.wire_client import WireConnection, values_batch

TIMEOUT = 60.0
SOURCE = "txo-source"
SINK = "txo-sink"
SINK_848 = "txo-sink-848"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("txn-offsets"), properties={
        "transaction.state.log.num.partitions": "2",
        "offsets.topic.num.partitions": "2",
    }) as server:
        with WireConnection(server.bootstrap, timeout=TIMEOUT) as conn:
            assert conn.create_topic(SOURCE) == 0
            assert conn.create_topic(SINK) == 0
            assert conn.create_topic(SINK_848) == 0
            assert conn.produce(SOURCE, 0, values_batch([b"in-%d" % i for i in range(6)])).error_code == 0
        yield server.bootstrap


def _consumer(bootstrap: str, group: str, protocol: str = "classic") -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "group.protocol": protocol})


def _poll(consumer: Consumer, count: int) -> list:
    messages = []
    deadline = time.monotonic() + TIMEOUT
    while len(messages) < count:
        assert time.monotonic() < deadline, f"only {len(messages)} of {count} messages"
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            messages.append(message)
    return messages


def _transform(bootstrap: str, group: str, tid: str, count: int, commit: bool,
               protocol: str = "classic", sink: str = SINK) -> list[bytes]:
    """Consume `count` inputs, produce them transformed and send the offsets in one transaction."""
    consumer = _consumer(bootstrap, group, protocol)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    try:
        consumer.subscribe([SOURCE])
        producer.init_transactions(TIMEOUT)
        messages = _poll(consumer, count)
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, b"out-" + message.value(), partition=0)
        producer.send_offsets_to_transaction([TopicPartition(SOURCE, 0, messages[-1].offset() + 1)],
                                             consumer.consumer_group_metadata(), TIMEOUT)
        # Delivered before the outcome, so an aborted run leaves its outputs in the log too
        # (abort_transaction would otherwise purge the ones not yet sent).
        assert producer.flush(TIMEOUT) == 0
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
        return [m.value() for m in messages]
    finally:
        consumer.close()


def test_offsets_sent_to_a_transaction_count_only_once_it_commits(bootstrap: str) -> None:
    group = "txo-group"
    assert _transform(bootstrap, group, "txo-1", 2, commit=True) == [b"in-0", b"in-1"]
    # The aborted transaction's offsets are dropped: the next run starts after in-1 again.
    assert _transform(bootstrap, group, "txo-1", 2, commit=False) == [b"in-2", b"in-3"]
    assert _transform(bootstrap, group, "txo-1", 2, commit=True) == [b"in-2", b"in-3"]
    check = _consumer(bootstrap, group)
    try:
        committed = check.committed([TopicPartition(SOURCE, 0)], timeout=TIMEOUT)
        assert committed[0].offset == 4
    finally:
        check.close()
    # The sink under read_committed: the committed outputs only (offsets 0-1, then 6-7: the
    # aborted copies at 3-4 and the markers at 2, 5 and 8 are never delivered).
    reader = _consumer(bootstrap, "txo-sink-reader")
    try:
        reader.assign([TopicPartition(SINK, 0, 0)])
        assert [(m.offset(), m.value()) for m in _poll(reader, 4)] == [
            (0, b"out-in-0"), (1, b"out-in-1"), (6, b"out-in-2"), (7, b"out-in-3")]
    finally:
        reader.close()


def test_a_consumer_protocol_member_sends_offsets_to_a_transaction(bootstrap: str) -> None:
    """KIP-848 (group.protocol=consumer): the member's TxnOffsetCommit is checked against the
    consumer group (member id, member epoch) and becomes that group's offset on commit."""
    group = "txo-group-848"
    kw = {"protocol": "consumer", "sink": SINK_848}
    assert _transform(bootstrap, group, "txo-848", 2, commit=True, **kw) == [b"in-0", b"in-1"]
    assert _transform(bootstrap, group, "txo-848", 2, commit=False, **kw) == [b"in-2", b"in-3"]
    assert _transform(bootstrap, group, "txo-848", 2, commit=True, **kw) == [b"in-2", b"in-3"]
    check = _consumer(bootstrap, group, "consumer")
    try:
        assert check.committed([TopicPartition(SOURCE, 0)], timeout=TIMEOUT)[0].offset == 4
    finally:
        check.close()
