"""Test-process logging: warnings and above only (the SDK logs connection details at debug)."""

from raftka.logging_setup import configure_logging

configure_logging(level="WARNING")

# `pytester` runs the pytest plugin's own sessions (tests/integration/test_pytest_plugin.py).
pytest_plugins = ["pytester"]

# An application's own test folder, run by tests/packaging/test_installed_wheel.py in a fresh
# venv against the built wheel; collected here its `client`/`log` modules would be ambiguous.
collect_ignore = ["packaging/app_template"]


# -- scheduling under pytest-xdist (`make test`: -n 4 --dist loadscope --no-loadscope-reorder) --
# The suite mostly waits (cluster starts, elections, Spark JVMs), so it runs on more workers
# than cores. xdist hands out work units in collection order: the longest tests come first
# and the many short unit tests fill the tail. A work unit (`work_unit`, our scheduler's scope)
# is one module (its module- and package-scoped clusters start once), the Spark package's tests
# that share the local SparkSession (one JVM, not one per worker), the Spark jobs (one after
# the other, beside the wheel's), or one test (chaos runs, unit tests). (xdist's own loadgroup cannot be used: pytest 9 ignores the node ids it edits.)
# The Spark jobs (CPU-heavy JVMs, whose Python workers must connect back in time) alternate
# with the waiting chaos runs and cluster tests, so that few of them run at once.
CHAOS = "tests/chaos/test_chaos_runs.py::test_"
SPARK_JOBS = ("tests/spark/test_spark_connect.py", "tests/spark/test_spark_autodiscovery.py",
              "tests/spark/test_spark_standalone.py")
SLOW_FIRST = (
    "tests/packaging/",
    CHAOS + "short_run_under_kill",
    CHAOS + "short_run_under_the_quorum",
    CHAOS + "corrupted",
    SPARK_JOBS[0],
    CHAOS + "group_consumers",
    CHAOS + "harness_reports",
    SPARK_JOBS[1],
    "tests/compat/test_security.py",
    "tests/integration/test_secure_cluster.py",
    SPARK_JOBS[2],
    "tests/integration/test_cluster_control.py",
    "tests/spark/",
    "tests/chaos/test_chaos_runs.py",
    "tests/integration/test_reassignment_cluster.py",
    "tests/integration/test_metadata_snapshots.py",
    "tests/integration/test_cluster_isr.py",
    "tests/compat/test_kafkajs.py",
    "tests/compat/",
    "tests/integration/",
    "tests/chaos/",
    "tests/unit/test_quorum_simulation.py",
    "tests/unit/test_config_decisions.py",
    "tests/unit/test_record_validator.py",
    "tests/unit/test_group_assignors.py",
)
FAST_LAST = ("tests/unit/", "tests/fuzz/")  # after everything else, new folders included
# Tests that are their own work unit: no costly module fixture, and some modules are long.
SPREAD = ("tests/chaos/test_chaos_runs.py", "tests/unit/", "tests/fuzz/")


def _slow_rank(nodeid: str) -> int:
    default = len(SLOW_FIRST) + nodeid.startswith(FAST_LAST)
    return next((i for i, prefix in enumerate(SLOW_FIRST) if nodeid.startswith(prefix)), default)


def work_unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path.startswith(SPREAD):
        return nodeid
    if path.startswith(SPARK_JOBS):
        return "tests/spark/ (Spark jobs in subprocesses, one at a time)"
    if path.startswith("tests/spark/"):
        return "tests/spark/ (the shared SparkSession)"
    return path


def pytest_collection_modifyitems(config, items) -> None:
    items.sort(key=lambda item: _slow_rank(item.nodeid))  # stable: each module stays in its order


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return WorkUnitScheduling(config, log)
