"""One local SparkSession for the whole tests/spark package, and one raftka node.

The session is the expensive part (~10 s): it is created once and shared.
The node (one broker, retention checked every 500 ms so the failOnDataLoss
tests see segments deleted quickly) is shared too; tests use their own
topic names.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from raftka.testing.local_cluster import LocalCluster
from tests.integration.cluster_support import running_cluster
from tests.spark.spark_support import bytecode_spark_home

RETENTION_CHECK = {"log.retention.check.interval.ms": "500"}
# test_spark_read_committed.py's transactions: a small __transaction_state on one node.
TRANSACTIONS = {"transaction.state.log.num.partitions": "3", "transaction.state.log.replication.factor": "1",
                "transaction.state.log.min.isr": "1"}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    from pyspark.sql import SparkSession

    from raftka.spark_source import RaftkaDataSource

    # Python workers must import our packages with this same interpreter, and pyspark with
    # its bytecode (a streaming source's worker has 10 s to connect back).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_HOME"] = str(bytecode_spark_home(tmp_path_factory.mktemp("spark")))
    session = (SparkSession.builder.master("local[2]").appName("raftka-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "2g")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(RaftkaDataSource)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("raftka-node"), nodes=1,
                         extra={**RETENTION_CHECK, **TRANSACTIONS}) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def bootstrap(node: LocalCluster) -> str:
    return node.bootstrap_servers
