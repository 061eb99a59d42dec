"""Spark batch reads of the `raftka` data source: the first query of a session, and throughput.

First the cost a new user sees, in a child process so that the JVM is really new:
starting a `local[2]` session (JVM, Spark context, data-source discovery), then the
first query in it, reading 20 000 records of a 3-partition topic into Spark's `noop`
sink (`load()` plus the write: Spark's analysis, three Python worker pools started
and their imports, the planner's and tasks' connections), then the same read again,
warm; once with Spark's defaults and once with the JIT limited to C1
(`-XX:TieredStopAtLevel=1`, a setting for short sessions). Goal: first query <= 5 s.
The child also reports the CPU seconds its process tree (JVM, Python workers, the
broker) spent on the first query: on a shared machine that is the steadier figure.

Then throughput: 1 M records with 100-byte values (and 10-byte keys) in a
3-partition topic on one local raftka node (a real process), read with
`spark.read.format("raftka")` into the `noop` sink; plus the Arrow decoding alone
on one core (the source's own share of the work). Every read figure is the
best of `repeats` reads after one warm-up read. Goal: >= 500 000 rows/s.

And the sink: 1 M rows (`spark.range`, a 10-byte key and a 100-byte value each,
2 partitions) written with `df.write.format("raftka")` to a 3-partition topic,
once with the sink's defaults (Kafka's: idempotent, acks=all, 16 KiB batches,
key-hashed partitions) and once with `kafka.batch.size=262144`,
`kafka.linger.ms=20`; each write appends to a fresh topic, once. MB/s counts
the values' bytes.

    .venv/bin/python -m bench.spark_bench
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from raftka.client import AsyncAdmin, AsyncProducer, NewTopic
from raftka.testing.local_cluster import LocalCluster

TOPIC = "bench-spark"
FIRST_TOPIC = "bench-spark-first"
FIRST_ROWS = 20_000
PARTITIONS = 3
VALUE_SIZE = 100


@dataclass(frozen=True)
class Row:
    case: str
    rows: int
    seconds: float

    @property
    def rows_per_s(self) -> float | None:
        return self.rows / self.seconds if self.rows else None

    @property
    def mb_per_s(self) -> float | None:
        return self.rows * VALUE_SIZE / 1e6 / self.seconds if self.rows else None


async def _fill(bootstrap: str, count: int, topic: str = TOPIC) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    value = os.urandom(VALUE_SIZE)
    async with AsyncProducer(bootstrap, acks=1, batch_size=256 << 10, linger_ms=20) as producer:
        for start in range(0, count, 50_000):
            for i in range(start, min(count, start + 50_000)):
                producer.send_nowait(topic, value, key=b"key-%06d" % (i % 1_000_000),
                                     partition=i % PARTITIONS)
            await producer.flush()


def _spark(java_options: str = ""):
    from pyspark.sql import SparkSession

    from raftka.spark_source import RaftkaDataSource

    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    session = (builder.master("local[2]").appName("raftka-spark-bench")
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


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system) spent so far by `root` (default: this process) and
    every live descendant, from /proc (Linux)."""
    parents: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            parents[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree, frontier = {root or os.getpid()}, [root or os.getpid()]
    while frontier:
        frontier = [pid for pid, (ppid, _) in parents.items() if ppid in frontier and pid not in tree]
        tree.update(frontier)
    return sum(parents[pid][1] for pid in tree if pid in parents) / os.sysconf("SC_CLK_TCK")


def _first_query_child(bootstrap: str, broker_pid: int, java_options: str) -> None:
    """In a fresh process: session start, the first read of FIRST_TOPIC, the same read warm.
    Prints the seconds (and the first read's CPU seconds, broker included) as JSON."""
    def read(spark) -> float:
        start = time.perf_counter()
        (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", FIRST_TOPIC).load().write.format("noop").mode("overwrite").save())
        return time.perf_counter() - start

    start = time.perf_counter()
    spark = _spark(java_options)
    session = time.perf_counter() - start
    try:
        cpu = tree_cpu_seconds() + tree_cpu_seconds(broker_pid)
        first = read(spark)
        first_cpu = tree_cpu_seconds() + tree_cpu_seconds(broker_pid) - cpu
        warm = read(spark)
    finally:
        spark.stop()
    print(json.dumps({"session": session, "first": first, "first_cpu": first_cpu, "warm": warm}))


def _first_query(bootstrap: str, broker_pid: int, java_options: str = "") -> list[Row]:
    out = subprocess.run([sys.executable, "-m", "bench.spark_bench", "first-query", bootstrap,
                          str(broker_pid), java_options], capture_output=True, text=True, check=True,
                         timeout=600, cwd=Path(__file__).resolve().parents[1])
    got = json.loads(out.stdout.strip().splitlines()[-1])
    how = f" ({java_options})" if java_options else " (Spark's defaults)"
    return [Row(f"session start: JVM, SparkContext, data-source discovery{how}", 0, got["session"]),
            Row(f"  first query: {FIRST_ROWS:,} rows, load() + noop write "
                f"({got['first_cpu']:.1f} CPU s)", FIRST_ROWS, got["first"]),
            Row("  same read again (warm)", FIRST_ROWS, got["warm"])]


def _best_noop_write(df, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - start)
    return min(times)


def _writes(spark, bootstrap: str, count: int) -> list[Row]:
    """df.write.format("raftka") of `count` 100-byte rows, with the defaults and tuned."""
    df = spark.range(0, count, numPartitions=2).selectExpr(
        "format_string('key-%06d', id % 1000000) AS key",
        f"CAST(repeat('v', {VALUE_SIZE}) AS BINARY) AS value")
    out = []
    for label, options in (("defaults", {}),
                           ("kafka.batch.size=262144, kafka.linger.ms=20",
                            {"kafka.batch.size": "262144", "kafka.linger.ms": "20"})):
        topic = f"bench-spark-write-{len(out)}"
        trio.run(_create, bootstrap, topic)
        start = time.perf_counter()
        (df.write.format("raftka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).options(**options).mode("append").save())
        elapsed = time.perf_counter() - start
        written = (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                   .option("subscribe", topic).load().count())
        if written != count:
            raise RuntimeError(f"the sink wrote {written} rows to {topic}, expected {count}")
        out.append(Row(f"df.write raftka, local[2] ({label})", count, elapsed))
    return out


async def _create(bootstrap: str, topic: str) -> None:
    async with AsyncAdmin(bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])


def run(count: int = 1_000_000, repeats: int = 3) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="raftka-spark-bench-") as tmp:
        cluster = LocalCluster(Path(tmp), 1, extra_config={"num.partitions": str(PARTITIONS)})
        try:
            cluster.start_and_wait(60)
            bootstrap = cluster.bootstrap_servers
            trio.run(_fill, bootstrap, count)
            trio.run(_fill, bootstrap, FIRST_ROWS, FIRST_TOPIC)
            broker_pid = cluster.nodes[1].process.pid
            rows = (_first_query(bootstrap, broker_pid)
                    + _first_query(bootstrap, broker_pid, "-XX:TieredStopAtLevel=1"))
            spark = _spark()
            try:
                df = (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", TOPIC).load())
                if df.count() != count:
                    raise RuntimeError(f"the topic holds {df.count()} rows, expected {count}")
                rows.append(Row("spark.read raftka -> noop sink (local[2])", count,
                                _best_noop_write(df, repeats)))
                # 3 tasks on 2 cores run in two waves: does splitting into 6 ranges help?
                split = (spark.read.format("raftka").option("kafka.bootstrap.servers", bootstrap)
                         .option("subscribe", TOPIC).option("minPartitions", "6").load())
                rows.append(Row("  same, minPartitions=6", count, _best_noop_write(split, repeats)))
                rows += _writes(spark, bootstrap, count)
            finally:
                spark.stop()
            decode = min(_decode_only(bootstrap, count) for _ in range(repeats))
            rows.append(Row("fetch + Arrow decode only (1 core)", count, decode))
            return rows
        finally:
            cluster.stop(timeout=20)


def format_table(rows: list[Row]) -> str:
    lines = ["| case | rows | seconds | rows/s | MB/s |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        rate = "" if r.rows_per_s is None else f"{r.rows_per_s:,.0f}"
        mb = "" if r.mb_per_s is None else f"{r.mb_per_s:.1f}"
        count = f"{r.rows:,}" if r.rows else ""
        lines.append(f"| {r.case} | {count} | {r.seconds:.2f} | {rate} | {mb} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["first-query"]:
        _first_query_child(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "")
    else:
        print(format_table(run()))
