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
        try:
            from raftka.spark_source.data_source import RaftkaDataSource
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] in ("pyspark", "pyarrow", "numpy"):
                raise ModuleNotFoundError(
                    f"raftka's Spark source needs {exc.name.split('.')[0]}, which is not installed: "
                    "pip install 'raftka[spark]'", name=exc.name) from exc
            raise

        return RaftkaDataSource
    raise AttributeError(f"module 'spark_source' has no attribute {name!r}")
