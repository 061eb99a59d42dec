"""The raftka sink, as Spark's Kafka sink: batch and streaming writes read back exactly by
confluent-kafka (an independent client), and errors that fail the write naming the cause."""

from __future__ import annotations

import pytest

from tests.spark.spark_support import create_topic, produce, read_back


def _write(df, bootstrap: str, **options):
    writer = df.write.format("raftka").option("kafka.bootstrap.servers", bootstrap).mode("append")
    for name, value in options.items():
        writer = writer.option(name.replace("_", "."), value)
    writer.save()


def test_a_batch_write_is_read_back_exactly(spark, bootstrap) -> None:
    topic = "sink-batch"
    create_topic(bootstrap, topic, 3)
    rows = [(f"key-{i}", f"value-{i}".encode(), i % 3, [("i", str(i).encode()), ("none", None)])
            for i in range(300)]
    df = spark.createDataFrame(
        rows, "key string, value binary, partition int, "
              "headers array<struct<key:string,value:binary>>").repartition(4)
    _write(df, bootstrap, topic=topic)
    got = read_back(bootstrap, topic)
    assert len(got) == 300  # nothing lost, nothing twice
    expected = {(i % 3, f"key-{i}".encode(), f"value-{i}".encode(),
                 (("i", str(i).encode()), ("none", None))) for i in range(300)}
    assert {(r["partition"], r["key"], r["value"], tuple(r["headers"])) for r in got} == expected


def test_the_topic_column_routes_rows_and_the_option_beats_it(spark, bootstrap) -> None:
    create_topic(bootstrap, "sink-route-a", 1)
    create_topic(bootstrap, "sink-route-b", 1)
    create_topic(bootstrap, "sink-route-c", 1)
    df = spark.createDataFrame([(f"sink-route-{'ab'[i % 2]}", f"v{i}", None) for i in range(10)],
                               "topic string, value string, key string")
    _write(df, bootstrap)
    assert sorted(r["value"] for r in read_back(bootstrap, "sink-route-a")) == sorted(
        f"v{i}".encode() for i in range(0, 10, 2))
    assert len(read_back(bootstrap, "sink-route-b")) == 5
    assert all(r["key"] is None for r in read_back(bootstrap, "sink-route-b"))
    _write(df, bootstrap, topic="sink-route-c", kafka_acks="1", kafka_compression_type="zstd",
           kafka_linger_ms="50", kafka_batch_size="1000")
    assert len(read_back(bootstrap, "sink-route-c")) == 10
    assert len(read_back(bootstrap, "sink-route-a")) == 5


@pytest.mark.parametrize("options,columns,message", [
    ({"topic": "t", "kafka.key.serializer": "x"}, "value string", "kafka.key.serializer"),
    ({"topic": "t", "kafka.transactional.id": "x"}, "value string", "kafka.transactional.id"),
    ({"topic": "t", "kafka.sasl.mechanism": "PLAIN"}, "value string", "kafka.sasl.mechanism"),
    ({"topic": "t", "kafka.acks": "1", "kafka.enable.idempotence": "true"}, "value string",
     "kafka.enable.idempotence"),
    ({"topic": "t"}, "key string", "value"),
    ({"topic": "t"}, "value int", "column value"),
    ({}, "value string", "topic"),
    ({"topic": "t"}, "value string, headers array<string>", "column headers"),
], ids=["serializer", "transactional.id", "sasl", "idempotence-acks", "no-value", "value-int",
        "no-topic", "headers-type"])
def test_a_write_spark_cannot_do_fails_naming_the_cause(spark, bootstrap, options, columns,
                                                         message) -> None:
    df = spark.createDataFrame([], columns)
    with pytest.raises(Exception, match=message):
        _write(df, bootstrap, **{k.replace(".", "_"): v for k, v in options.items()})


def test_overwrite_is_refused(spark, bootstrap) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="overwrite"):
        (df.write.format("raftka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "t").mode("overwrite").save())


def test_a_row_without_a_topic_fails_the_task(spark, bootstrap) -> None:
    df = spark.createDataFrame([("sink-null-topic", "a"), (None, "b")], "topic string, value string")
    with pytest.raises(Exception, match="null topic"):
        _write(df, bootstrap)


def test_a_broker_error_fails_the_task_with_the_kafka_error(spark, bootstrap) -> None:
    topic = "sink-no-such-partition"
    create_topic(bootstrap, topic, 1)
    df = spark.createDataFrame([("v", 7)], "value string, partition int")
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PARTITION|does not exist"):
        _write(df, bootstrap, topic=topic)


def test_a_stream_written_and_restarted_from_its_checkpoint_is_exact(spark, bootstrap,
                                                                     tmp_path) -> None:
    source, sink = "sink-stream-in", "sink-stream-out"
    create_topic(bootstrap, source, 3)
    create_topic(bootstrap, sink, 3)
    first = produce(bootstrap, source, 90, headers=True)

    def run() -> None:
        query = (spark.readStream.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", source).option("startingOffsets", "earliest")
                 .option("includeHeaders", "true").load()
                 .selectExpr("key", "value", "partition", "headers")
                 .writeStream.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", sink).option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(240)
        assert query.exception() is None, query.exception()
        assert not query.isActive

    run()
    second = produce(bootstrap, source, 60, start=90, headers=True)
    run()  # resumes from the checkpoint: only the 60 new records
    got = read_back(bootstrap, sink)
    want = first + second
    assert len(got) == len(want)
    for p in range(3):
        # Each source partition went to the same sink partition, in order.
        assert [(r["key"], r["value"]) for r in got if r["partition"] == p] == [
            (r["key"], r["value"]) for r in sorted(want, key=lambda r: r["offset"])
            if r["partition"] == p]
