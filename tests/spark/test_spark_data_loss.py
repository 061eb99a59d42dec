"""failOnDataLoss both ways after retention deletes the oldest segments."""

from __future__ import annotations

import json
import shutil

import pytest
from pyspark.errors import StreamingQueryException

from raftka.client.blocking import Admin, Consumer
from raftka.client.records import TopicPartition
from tests.spark.spark_support import create_topic, produce
from tests.support import wait_until

TOPIC = "lossy"
# Tiny segments and retention: the broker (retention checked every 500 ms)
# deletes the oldest closed segments as soon as more data arrives.
CONFIGS = {"segment.bytes": "1024", "retention.bytes": "2048"}


@pytest.fixture(scope="module")
def lossy(bootstrap: str) -> tuple[int, int]:
    """(log start, high watermark) of TOPIC/0 once retention has deleted data."""
    create_topic(bootstrap, TOPIC, 1, CONFIGS)
    # Separate rounds give separate batches (~1.3 KB each), so segments roll;
    # one producer batch holding everything would stay in the active segment.
    for round_ in range(8):
        produce(bootstrap, TOPIC, 10, start=10 * round_, partitions=1, headers=False,
                value_size=100)
    tp = TopicPartition(TOPIC, 0)
    with Consumer(bootstrap) as consumer:
        start = wait_until(lambda: consumer.beginning_offsets([tp])[tp], timeout=30,
                           what="retention to delete the first segment")
        return start, consumer.end_offsets([tp])[tp]


def _batch(spark, bootstrap: str, fail: str):
    return (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC).option("failOnDataLoss", fail)
            .option("startingOffsets", json.dumps({TOPIC: {"0": 0}})).load())


def test_batch_fails_on_data_loss_by_default(spark, bootstrap, lossy) -> None:
    start, _ = lossy
    assert start > 0
    with pytest.raises(Exception, match=r"offsets 0\.\.\d+ of lossy/0 were deleted.*failOnDataLoss"
                       ) as caught:
        _batch(spark, bootstrap, "true").collect()
    assert "DataLossError" in str(caught.value) and "ExceptionGroup" not in str(caught.value)


def test_batch_skips_lost_data_when_asked(spark, bootstrap, lossy) -> None:
    start, end = lossy
    offsets = sorted(r.offset for r in _batch(spark, bootstrap, "false").select("offset")
                     .collect())
    # Everything still there, from the (possibly later) log start, nothing twice.
    assert offsets and offsets[0] >= start and offsets == list(range(offsets[0], end))


def test_stream_fails_or_skips_per_option(spark, bootstrap, lossy, tmp_path) -> None:
    _, end = lossy

    def run(fail: str) -> tuple[BaseException | None, list[int]]:
        got: list[int] = []
        query = (spark.readStream.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", TOPIC).option("failOnDataLoss", fail)
                 .option("startingOffsets", json.dumps({TOPIC: {"0": 0}})).load()
                 .writeStream.foreachBatch(
                     lambda df, _id: got.extend(r.offset for r in df.select("offset").collect()))
                 .option("checkpointLocation", str(tmp_path / fail))
                 .trigger(availableNow=True).start())
        try:
            try:
                assert query.awaitTermination(120), "the query did not finish in 120 s"
            except StreamingQueryException as exc:
                return exc, got
            return query.exception(), got
        finally:
            query.stop()

    error, got = run("true")
    assert error is not None and "failOnDataLoss" in str(error) and not got
    error, got = run("false")
    assert error is None and got and sorted(got) == list(range(min(got), end))


def test_deleted_topic_fails_or_is_skipped_per_option(spark, bootstrap, tmp_path) -> None:
    topic = "doomed"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, 10, partitions=1, headers=False)

    def run(fail: str, checkpoint) -> tuple[BaseException | None, int]:
        got: list[int] = []
        query = (spark.readStream.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest")
                 .option("failOnDataLoss", fail).load()
                 .writeStream.foreachBatch(lambda df, _id: got.append(df.count()))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        try:
            try:
                assert query.awaitTermination(120), "the query did not finish in 120 s"
            except StreamingQueryException as exc:
                return exc, sum(got)
            return query.exception(), sum(got)
        finally:
            query.stop()

    assert run("true", tmp_path / "a") == (None, 10)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    with Admin(bootstrap) as admin:
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), timeout=30, what="the deletion")
    error, rows = run("true", tmp_path / "a")
    assert error is not None and "doomed/0 is gone" in str(error) and rows == 0
    assert run("false", tmp_path / "b") == (None, 0)
