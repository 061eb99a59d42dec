"""format("raftka") with no registration, as installed (`make install`: editable), from a
temp folder: a local-mode job reads, writes a batch and runs a stream (spark_job.py).

Spark lists `pyspark_*` modules with pkgutil.iter_modules, which sees real files on
sys.path only; the editable install's import hook is invisible to it. The install's
`raftka-spark-discovery.pth` (build_support/raftka_build_backend.py) is what makes
this pass from outside the repository.
"""

from __future__ import annotations

import sys

import pytest

from tests.spark.spark_support import create_topic, produce
from tests.spark.standalone import ROWS, check_job, run_job


# A Spark job in a subprocess: minutes on a loaded machine (a deadline, not a threshold).
@pytest.mark.timeout(900)
def test_an_installed_raftka_is_found_by_name_from_any_folder(bootstrap, tmp_path) -> None:
    source, batch_out, stream_out = "discovery-in", "discovery-batch-out", "discovery-stream-out"
    for topic in (source, batch_out, stream_out):
        create_topic(bootstrap, topic, 3)
    produced = produce(bootstrap, source, ROWS, headers=False)
    got = run_job(sys.executable, tmp_path / "job", {
        "master": "local[2]", "bootstrap": bootstrap, "source": source, "batch_out": batch_out,
        "stream_out": stream_out, "checkpoint": str(tmp_path / "checkpoint")})
    # Local mode: the driver's JVM runs the tasks (the probe the standalone test relies on).
    assert got["task_jvms"] == [got["driver_jvm"]]
    check_job(bootstrap, produced, got, [batch_out, stream_out])


def test_the_editable_path_entry_exposes_the_shim_and_nothing_else() -> None:
    """The `.pth` of an editable install names a folder whose only importable name is
    `pyspark_raftka`, with no second copy of raftka's metadata (an egg-info) beside it."""
    import importlib.metadata
    import pkgutil
    import sysconfig
    from pathlib import Path

    pth = Path(sysconfig.get_paths()["purelib"]) / "raftka-spark-discovery.pth"
    if not pth.exists():
        pytest.skip("raftka is not installed editable here")
    folder = pth.read_text().strip()
    assert [m.name for m in pkgutil.iter_modules([folder])] == ["pyspark_raftka"]
    assert not list(importlib.metadata.distributions(path=[folder]))
