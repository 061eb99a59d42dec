"""raftka's PySpark Python Data Source (batch + streaming), see data_source.py.

    from raftka.spark_source import RaftkaDataSource
    spark.dataSource.register(RaftkaDataSource)

Importing this package does not import pyspark; `RaftkaDataSource` does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RaftkaDataSource"]


def __getattr__(name: str) -> Any:
    if name == "RaftkaDataSource":
        from raftka.spark_source.data_source import RaftkaDataSource

        return RaftkaDataSource
    raise AttributeError(f"module 'spark_source' has no attribute {name!r}")
