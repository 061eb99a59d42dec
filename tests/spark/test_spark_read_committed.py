"""kafka.isolation.level with Spark: read_committed stops at the last stable offset and drops
aborted transactions and markers; read_uncommitted (Spark's default) returns them all."""

from __future__ import annotations

from raftka.client.blocking import Producer
from tests.spark.spark_support import create_topic


def _values(spark, bootstrap: str, topic: str, **options: str) -> list[bytes]:
    reader = (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted(bytes(r.value) for r in reader.load().collect())


def test_read_committed_batch_read(spark, bootstrap) -> None:
    topic = "txn-read-committed"
    create_topic(bootstrap, topic, 2)
    with Producer(bootstrap, transactional_id="spark-txn") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, b"c%d" % i, partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, b"a%d" % i, partition=i % 2)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"late", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"open", partition=1)  # still open while Spark reads
        producer.flush()
        committed = _values(spark, bootstrap, topic, **{"kafka.isolation.level": "read_committed"})
        assert committed == [b"c0", b"c1", b"c2", b"c3", b"late"]
        everything = _values(spark, bootstrap, topic)
        assert everything == sorted([b"c0", b"c1", b"c2", b"c3", b"a0", b"a1", b"a2", b"late",
                                     b"open"])
        producer.abort_transaction()
