"""Through Spark Connect (`SparkSession.builder.remote("local[2]")`: pyspark starts a local
Connect server), from a temp folder with no registration: the server's Python workers find
format("raftka"), and a batch read, a batch write and a stream come back exact.

Skipped when pyspark's Connect client libraries (pandas, grpcio, grpcio-status,
googleapis-common-protos) are not installed."""

from __future__ import annotations

import sys

import pytest

from tests.spark.spark_support import create_topic, produce
from tests.spark.standalone import ROWS, check_job, run_job


def _connect_available() -> bool:
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except Exception:
        return False
    return True


# A Spark job in a subprocess: minutes on a loaded machine (a deadline, not a threshold).
@pytest.mark.timeout(900)
@pytest.mark.skipif(not _connect_available(), reason="pyspark's Connect client libraries are missing")
def test_read_and_write_through_spark_connect(bootstrap, tmp_path) -> None:
    source, batch_out, stream_out = "connect-in", "connect-batch-out", "connect-stream-out"
    for topic in (source, batch_out, stream_out):
        create_topic(bootstrap, topic, 3)
    produced = produce(bootstrap, source, ROWS, headers=False)
    got = run_job(sys.executable, tmp_path / "job", {
        "master": "local[2]", "connect": True, "bootstrap": bootstrap, "source": source,
        "batch_out": batch_out, "stream_out": stream_out,
        "checkpoint": str(tmp_path / "checkpoint")})
    check_job(bootstrap, produced, got, [batch_out, stream_out])
    print(f"connect: session {got['session_s']:.1f} s, first query {got['first_query_s']:.1f} s")
