"""An application's test, written as a raftka user writes one: only the fixture, a real client."""

from confluent_kafka import Consumer, Producer
from log.names import topic_name  # the app's own log/ package

from client import APP_CLIENT  # the app's own client.py, beside raftka's raftka.client


def test_produce_and_consume(raftka_bootstrap):
    topic = topic_name()
    producer = Producer({"bootstrap.servers": raftka_bootstrap})
    producer.produce(topic, key=b"k", value=APP_CLIENT)
    assert producer.flush(15) == 0

    consumer = Consumer({"bootstrap.servers": raftka_bootstrap, "group.id": "app",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        msg = consumer.poll(20)
    finally:
        consumer.close()
    assert msg is not None and msg.error() is None
    assert (msg.key(), msg.value()) == (b"k", APP_CLIENT)
