"""Spark batch-read throughput of the `raftka` data source.

1 M records with 100-byte values (and 10-byte keys) in a 3-partition topic on
one local raftka node (a real process), read with `spark.read.format("raftka")`
into Spark's `noop` sink on a `local[2]` session; plus the Arrow decoding
alone on one core (the source's own share of the work). Every figure is the
best of `repeats` reads after one warm-up read. Goal: >= 500 000 rows/s.

    .venv/bin/python -m bench.spark_bench
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from raftka.client import AsyncAdmin, AsyncProducer, NewTopic
from raftka.client.local_cluster import LocalCluster

TOPIC = "bench-spark"
PARTITIONS = 3
VALUE_SIZE = 100


@dataclass(frozen=True)
class Row:
    case: str
    rows: int
    seconds: float

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds


async def _fill(bootstrap: str, count: int) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    value = os.urandom(VALUE_SIZE)
    async with AsyncProducer(bootstrap, acks=1, batch_size=256 << 10, linger_ms=20) as producer:
        for start in range(0, count, 50_000):
            for i in range(start, min(count, start + 50_000)):
                producer.send_nowait(TOPIC, value, key=b"key-%06d" % (i % 1_000_000),
                                     partition=i % PARTITIONS)
            await producer.flush()


def _spark():
    from pyspark.sql import SparkSession

    from raftka.spark_source import RaftkaDataSource

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("raftka-spark-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "2g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(RaftkaDataSource)
    return session


def _decode_only(bootstrap: str, count: int) -> float:
    """Seconds to fetch and decode every record on one core, no Spark."""
    from raftka.spark_source.offset_ranges import OffsetRange
    from raftka.spark_source.options import parse_options
    from raftka.spark_source.range_reader import iter_range_batches

    options = parse_options({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC})
    start = time.perf_counter()
    got = 0
    for p in range(PARTITIONS):
        size = len(range(p, count, PARTITIONS))  # record i went to partition i % PARTITIONS
        for batch in iter_range_batches(options, OffsetRange(TOPIC, p, 0, size)):
            got += batch.num_rows
    elapsed = time.perf_counter() - start
    if got != count:
        raise RuntimeError(f"decode-only read {got} rows, expected {count}")
    return elapsed


def _best_noop_write(df, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - start)
    return min(times)


def run(count: int = 1_000_000, repeats: int = 3) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="raftka-spark-bench-") as tmp:
        cluster = LocalCluster(Path(tmp), 1, extra_config={"num.partitions": str(PARTITIONS)})
        try:
            cluster.start_and_wait(60)
            bootstrap = cluster.bootstrap_servers
            trio.run(_fill, bootstrap, count)
            spark = _spark()
            try:
                df = (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", TOPIC).load())
                if df.count() != count:
                    raise RuntimeError(f"the topic holds {df.count()} rows, expected {count}")
                rows = [Row("spark.read raftka -> noop sink (local[2])", count,
                            _best_noop_write(df, repeats))]
                # 3 tasks on 2 cores run in two waves: does splitting into 6 ranges help?
                split = (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                         .option("subscribe", TOPIC).option("minPartitions", "6").load())
                rows.append(Row("  same, minPartitions=6", count, _best_noop_write(split, repeats)))
            finally:
                spark.stop()
            decode = min(_decode_only(bootstrap, count) for _ in range(repeats))
            rows.append(Row("fetch + Arrow decode only (1 core)", count, decode))
            return rows
        finally:
            cluster.stop(timeout=20)


def format_table(rows: list[Row]) -> str:
    lines = ["| case | rows | seconds | rows/s |", "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.case} | {r.rows:,} | {r.seconds:.2f} | {r.rows_per_s:,.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run()))
