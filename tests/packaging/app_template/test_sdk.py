"""raftka's own SDK from the app, by its public names, beside the app's `client` and `log`."""

import raftka
from raftka import Admin, Consumer, NewTopic, Producer, TopicPartition


def test_sdk_roundtrip(raftka_bootstrap, raftka_topic):
    topic = raftka_topic(partitions=2)
    with Producer(raftka_bootstrap) as producer:
        producer.send(topic, b"v", key=b"k", partition=1).result(15)
    with Consumer(raftka_bootstrap) as consumer:
        consumer.assign([TopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        records = consumer.poll(timeout_ms=10_000)
    assert [(r.key, r.value) for r in records[TopicPartition(topic, 1)]] == [(b"k", b"v")]
    with Admin(raftka_bootstrap) as admin:
        admin.create_topics([NewTopic(f"{topic}-b", 1, 1)])
        assert f"{topic}-b" in admin.list_topics()
    assert isinstance(raftka.KafkaError("x"), Exception)
