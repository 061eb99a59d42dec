"""Streaming reads: availableNow into parquet with a checkpoint, restarts, replays."""

from __future__ import annotations

from pathlib import Path

from pyspark.errors import StreamingQueryException

from raftka.client.blocking import Admin
from tests.spark.spark_support import create_topic, produce
from tests.support import wait_until


def _stream(spark, bootstrap: str, topic: str, **options: str):
    reader = (spark.readStream.format("raftka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _run_to_parquet(spark, bootstrap: str, topic: str, out: Path, checkpoint: Path,
                    **options: str) -> list[int]:
    """Run an availableNow query to the end; the input row count of each micro-batch."""
    df = _stream(spark, bootstrap, topic, **options).selectExpr(
        "CAST(key AS STRING) AS key", "partition", "offset")
    query = (df.writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the availableNow query did not finish in 120 s"
        assert query.exception() is None, query.exception()
        return [p["numInputRows"] for p in query.recentProgress]
    finally:
        query.stop()


def _parquet_rows(spark, out: Path) -> list[tuple[int, int, str]]:
    rows = spark.read.parquet(str(out)).collect()
    return sorted((r.partition, r.offset, r.key) for r in rows)


def test_available_now_rate_limit_restart_and_new_partitions(spark, bootstrap, tmp_path) -> None:
    topic = "stream-events"
    create_topic(bootstrap, topic, 3)
    first = produce(bootstrap, topic, 90, headers=False)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    batches = _run_to_parquet(spark, bootstrap, topic, out, checkpoint,
                              maxOffsetsPerTrigger="20")
    assert sum(batches) == 90
    assert len([n for n in batches if n]) >= 5 and max(batches) <= 20
    assert _parquet_rows(spark, out) == sorted(
        (r["partition"], r["offset"], r["key"].decode()) for r in first)

    # More data, in a partition that did not exist before too: the restarted
    # query resumes exactly where it stopped (no gap, no duplicate).
    with Admin(bootstrap) as admin:
        admin.create_partitions({topic: 4})
        wait_until(lambda: len(admin.describe_topics([topic])[0].partitions) == 4
                   and all(p.leader >= 0 for p in admin.describe_topics([topic])[0].partitions),
                   timeout=30, what="the 4th partition")
    second = produce(bootstrap, topic, 40, start=90, partitions=4, headers=False)
    batches = _run_to_parquet(spark, bootstrap, topic, out, checkpoint)
    assert sum(batches) == 40
    rows = _parquet_rows(spark, out)
    assert rows == sorted((r["partition"], r["offset"], r["key"].decode())
                          for r in first + second)
    assert any(p == 3 for p, _, _ in rows)


def test_crash_mid_query_replays_the_same_range(spark, bootstrap, tmp_path) -> None:
    topic = "stream-crash"
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, 60, headers=False)
    checkpoint = tmp_path / "checkpoint"
    seen: dict[int, list[list[tuple[int, int]]]] = {}
    crash = {"armed": True}

    def sink(batch_df, batch_id: int) -> None:
        rows = sorted((r.partition, r.offset) for r in batch_df.collect())
        seen.setdefault(batch_id, []).append(rows)
        if batch_id == 1 and crash["armed"]:
            crash["armed"] = False
            raise RuntimeError("simulated crash in the middle of micro-batch 1")

    def run() -> BaseException | None:
        query = (_stream(spark, bootstrap, topic, maxOffsetsPerTrigger="25").writeStream
                 .foreachBatch(sink).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        try:
            try:
                assert query.awaitTermination(120), "the query did not finish in 120 s"
            except StreamingQueryException as exc:
                return exc
            return query.exception()
        finally:
            query.stop()

    assert run() is not None  # the crash stopped the query during batch 1
    assert run() is None  # the restart finishes
    assert len(seen[1]) == 2 and seen[1][0] == seen[1][1] and seen[1][0]
    delivered = [row for batch_id in sorted(seen) for row in seen[batch_id][-1]]
    assert sorted(delivered) == sorted((p, o) for p in range(3) for o in range(20))
    assert len(delivered) == len(set(delivered)) == 60


def test_default_start_is_latest(spark, bootstrap, tmp_path) -> None:
    topic = "stream-latest"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, 5, partitions=1, headers=False)
    got: list[int] = []
    query = (spark.readStream.format("raftka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).load()
             .writeStream.foreachBatch(lambda df, _id: got.append(df.count()))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the query did not finish in 120 s"
        assert query.exception() is None
    finally:
        query.stop()
    assert sum(got) == 0  # what existed before the query started is not read
