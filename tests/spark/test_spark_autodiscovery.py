"""format("raftka") works in a fresh SparkSession without spark.dataSource.register."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
try:
    spark.read.format("raftka").option("kafka.bootstrap.servers", "127.0.0.1:1") \
        .option("subscribe", "nothing").load().count()
except Exception as exc:
    print("ERROR:", exc)
finally:
    spark.stop()
"""


def test_the_source_is_found_by_name_alone(tmp_path):
    # As installed (no PYTHONPATH), from a folder that is not the repository.
    env = {"PATH": "/usr/bin:/bin", "PYSPARK_PYTHON": sys.executable, "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=240,
                         cwd=tmp_path)
    text = out.stdout + out.stderr
    assert "ERROR:" in out.stdout, text[-2000:]
    # Our own error (the bootstrap is unreachable) proves Spark loaded the raftka source.
    assert "Failed to find the data source" not in text and "DATA_SOURCE_NOT_FOUND" not in text, text[-2000:]
    assert "127.0.0.1:1" in out.stdout, out.stdout[-2000:]
