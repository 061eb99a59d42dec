"""What a fresh Spark Python worker pays for before it can run the source: imports,
connections and metadata round trips (docs/performance.md, "Spark: the first query")."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
import trio

from raftka.client.cluster import Cluster
from raftka.spark_source.offset_ranges import OffsetRange
from raftka.spark_source.options import parse_options
from raftka.spark_source.range_reader import read_range
from tests.spark.spark_support import create_topic, produce

HEAVY = ("trio", "pyarrow", "structlog", "raftka.client.cluster", "raftka.spark_source.log_reader",
         "raftka.spark_source.range_reader", "raftka.spark_source.arrow_records")

# (what Spark's worker does, code run in a fresh interpreter, modules it must not import)
IMPORTS = [
    ("load(): create the source, ask its schema",
     "import pyspark_raftka as m; m.DefaultSource({'kafka.bootstrap.servers': 'h:1', 'subscribe': 't'}).schema()",
     HEAVY),
    ("unpickle a planned range and the reader",
     "import pickle; from raftka.spark_source.data_source import RaftkaBatchReader, RangePartition;"
     "from raftka.spark_source.offset_ranges import OffsetRange;"
     "from raftka.spark_source.options import parse_options;"
     "pickle.loads(pickle.dumps((RangePartition(OffsetRange('t', 0, 0, 1)),"
     " RaftkaBatchReader(parse_options({'kafka.bootstrap.servers': 'h:1', 'subscribe': 't'})))))",
     HEAVY),
    ("plan: the SDK, not the Arrow decoding",
     "import raftka.spark_source.log_reader",
     ("raftka.spark_source.range_reader", "raftka.spark_source.arrow_records", "pyarrow")),
]


@pytest.mark.parametrize("what,code,absent", IMPORTS, ids=[c[0] for c in IMPORTS])
def test_a_worker_imports_only_what_it_uses(what, code, absent) -> None:
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {absent!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", (what, out.stdout, out.stderr[-2000:])


async def test_a_range_read_does_not_wait_for_a_leader_the_first_refresh_finds(bootstrap) -> None:
    """A task's Cluster starts without the topic's metadata; finding the leader takes one
    refresh, not a retry backoff (set here to 10 minutes, so waiting it would time out)."""
    topic = "worker-startup"
    await trio.to_thread.run_sync(create_topic, bootstrap, topic, 1)
    await trio.to_thread.run_sync(lambda: produce(bootstrap, topic, 5, partitions=1, headers=False))
    options = parse_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic})
    batches: list[pa.RecordBatch] = []

    async def emit(batch: pa.RecordBatch) -> None:
        batches.append(batch)

    async with trio.open_nursery() as nursery:
        cluster = Cluster(bootstrap, nursery, retry_backoff_ms=600_000)
        try:
            await cluster.refresh_metadata()
            assert cluster.metadata.partitions_for(topic) is None
            with trio.fail_after(30):
                await read_range(cluster, options, OffsetRange(topic, 0, 0, 5), emit)
        finally:
            await cluster.aclose()
    assert sum(b.num_rows for b in batches) == 5


def test_a_python_worker_imports_pyspark_with_its_bytecode(spark) -> None:
    """Not from Spark's pyspark.zip, which every worker would compile again: a streaming
    source's worker has 10 s to connect back (tests/spark/spark_support.bytecode_spark_home)."""
    (where,) = set(spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect())
    assert ".zip" not in where and where.endswith("__init__.py"), where
