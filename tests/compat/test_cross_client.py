"""What one client writes, the other reads back exactly: librdkafka <-> kafka-python, every codec.

Snappy is the interesting one: librdkafka writes raw snappy blocks, kafka-python
the xerial framing; both go through raftka untouched and must be readable by
the other client.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat import test_confluent_kafka as librdkafka
from tests.compat import test_kafka_python as kafka_python
from tests.compat.messages import check_round_trip, check_stored_batches, make_messages

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COUNT = 2_000
PARTITIONS = 4


@pytest.fixture(scope="module", autouse=True)
def _codecs(kafka_python_codecs: None) -> None:
    """kafka-python may use snappy and lz4 in every test here."""


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produces_kafka_python_consumes(admin: AdminClient, bootstrap: str,
                                                  codec: str) -> None:
    topic = f"x-cf-to-kp-{codec}"
    librdkafka.create(admin, NewTopic(topic, PARTITIONS, 1))
    sent = make_messages(COUNT, seed=200 + CODECS.index(codec))
    librdkafka.produce(bootstrap, topic, sent, **{"compression.type": codec})
    consumed = kafka_python.consume(bootstrap, topic, PARTITIONS, len(sent))
    check_round_trip(sent, consumed, PARTITIONS)
    assert check_stored_batches(bootstrap, topic, range(PARTITIONS), codec) > 0


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produces_confluent_consumes(admin: AdminClient, bootstrap: str,
                                                  codec: str) -> None:
    topic = f"x-kp-to-cf-{codec}"
    librdkafka.create(admin, NewTopic(topic, PARTITIONS, 1))
    sent = make_messages(COUNT, seed=300 + CODECS.index(codec))
    kafka_python.produce(bootstrap, topic, sent,
                         compression_type=None if codec == "none" else codec)
    consumed = librdkafka.consume(bootstrap, topic, PARTITIONS, len(sent))
    check_round_trip(sent, consumed, PARTITIONS)
    assert check_stored_batches(bootstrap, topic, range(PARTITIONS), codec) > 0
