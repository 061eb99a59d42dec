"""Lets Spark find the `raftka` data source without `spark.dataSource.register`.

PySpark registers the `DefaultSource` of every importable top-level module
whose name starts with `pyspark_` when a session starts.
"""

from raftka.spark_source.data_source import RaftkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
