"""raftka on a real Spark standalone cluster: a master and a worker from the installed
pyspark, executors in their own JVMs and Python workers, the job started from a temp
folder with no registration. Batch read, batch write and a streaming query (raftka to
raftka, checkpoint in a temp dir) come back exact, read by confluent-kafka."""

from __future__ import annotations

import sys

import pytest

from tests.spark.spark_support import create_topic, produce
from tests.spark.standalone import ROWS, check_job, run_job, standalone_cluster


# A Spark job in a subprocess: minutes on a loaded machine (a deadline, not a threshold).
@pytest.mark.timeout(900)
def test_read_and_write_on_a_standalone_cluster(bootstrap, tmp_path) -> None:
    source = "standalone-in"
    create_topic(bootstrap, source, 3)
    for out in ("standalone-batch-out", "standalone-stream-out"):
        create_topic(bootstrap, out, 3)
    produced = produce(bootstrap, source, ROWS, headers=False)
    with standalone_cluster(tmp_path / "spark", sys.executable) as cluster:
        got = run_job(sys.executable, tmp_path / "job", {
            "master": cluster.master_url, "bootstrap": bootstrap, "source": source,
            "batch_out": "standalone-batch-out", "stream_out": "standalone-stream-out",
            "checkpoint": str(tmp_path / "checkpoint")})
        # The tasks ran in executors' Python workers, started by the worker's executor JVM.
        assert got["task_jvms"] and got["driver_jvm"] not in got["task_jvms"], got
        assert list(cluster.worker_dir.glob("app-*/*/stderr")), "no executor was started"
    check_job(bootstrap, produced, got, ["standalone-batch-out", "standalone-stream-out"])
    print(f"standalone: session {got['session_s']:.1f} s, first query {got['first_query_s']:.1f} s, "
          f"warm count {got['warm_query_s']:.1f} s")
