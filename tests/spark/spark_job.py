"""A Spark job that uses format("raftka") with no registration, as a user's script would.

Run as `python spark_job.py '<json args>'` by the tests, with the interpreter of the
install under test, from a temporary folder (never the repository): it must find
the source through Spark's own discovery. Args: master, bootstrap, source (a topic
to read), batch_out / stream_out (topics to write, or null), checkpoint.
Prints one JSON line: timings, and the rows the batch read returned.
"""

import json
import os
import sys
import time

from pyspark.sql import SparkSession


def java_ancestor() -> int:
    """The pid of the nearest ancestor process that is a JVM."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        if stat[stat.index("(") + 1:stat.rindex(")")] == "java":
            return pid
        pid = int(stat[stat.rindex(")") + 2:].split()[1])
    return -1


def main(args: dict) -> dict:
    python = sys.executable
    os.environ["PYSPARK_PYTHON"] = python
    started = time.perf_counter()
    connect = bool(args.get("connect"))  # Spark Connect: the master runs in a Connect server
    builder = SparkSession.builder
    builder = builder.remote(args["master"]) if connect else builder.master(args["master"])
    spark = (builder.appName("raftka-spark-job")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.pyspark.python", python)
             .config("spark.executor.memory", "1g").config("spark.cores.max", "2")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    if not connect:
        spark.sparkContext.setLogLevel("ERROR")
    out = {"session_s": time.perf_counter() - started}
    kafka = {"kafka.bootstrap.servers": args["bootstrap"]}
    out["stages"] = {}
    mark = [time.perf_counter()]

    def stage(name: str) -> None:  # seconds per stage, also on stderr as the job goes
        now = time.perf_counter()
        out["stages"][name] = round(now - mark[0], 1)
        mark[0] = now
        print(f"spark_job: {name} {out['stages'][name]} s", file=sys.stderr, flush=True)
    try:
        def read():
            df = spark.read.format("raftka").options(**kafka).option("subscribe", args["source"])
            return df.load()

        started = time.perf_counter()
        rows = read().select("partition", "offset", "value").collect()
        out["first_query_s"] = time.perf_counter() - started
        out["rows"] = sorted([r.partition, r.offset, bytes(r.value).decode()] for r in rows)
        started = time.perf_counter()
        out["warm_count"] = read().count()
        out["warm_query_s"] = time.perf_counter() - started
        # Which JVMs ran Python tasks: an executor's, not the driver's, on a cluster.
        if not connect:  # a Connect client has no SparkContext
            out["task_jvms"] = sorted(set(spark.sparkContext.parallelize(range(4), 4)
                                          .map(lambda _: java_ancestor()).collect()))
            out["driver_jvm"] = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        stage("reads")
        if args.get("batch_out"):
            (read().select("key", "value", "partition").write.format("raftka").options(**kafka)
             .option("topic", args["batch_out"]).mode("append").save())
            stage("batch write")
        if args.get("stream_out"):
            query = (spark.readStream.format("raftka").options(**kafka)
                     .option("subscribe", args["source"]).option("startingOffsets", "earliest")
                     .load().select("key", "value", "partition")
                     .writeStream.format("raftka").options(**kafka)
                     .option("topic", args["stream_out"])
                     .option("checkpointLocation", args["checkpoint"])
                     .trigger(availableNow=True).start())
            query.awaitTermination(300)
            if query.exception() is not None:
                raise RuntimeError(f"the streaming query failed: {query.exception()}")
            out["stream_batches"] = len(query.recentProgress)
            stage("stream")
    finally:
        spark.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
