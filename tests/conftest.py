"""The suite's pytest configuration: test-process logging (warnings and above only: the SDK logs
connection details at debug), timeouts that end even a test hung in C, and xdist's work units."""

import faulthandler
import os
import time

import pytest
from xdist.scheduler import LoadScopeScheduling

from raftka.cli.logging_setup import configure_logging

configure_logging(level="WARNING")

# `pytester` runs the pytest plugin's own sessions (tests/integration/test_pytest_plugin.py).
pytest_plugins = ["pytester"]

# An application's own test folder, run by tests/packaging/test_installed_wheel.py in a fresh
# venv against the built wheel; collected here its `client`/`log` modules would be ambiguous.
collect_ignore = ["packaging/app_template"]


# -- timeouts: every test ends within its timeout, even inside a C call --
# pytest-timeout's signal method fails a test that outlives its timeout and runs its teardown
# (clusters and JVMs stopped), but a test blocked in C (librdkafka, a JVM bridge) never sees the
# signal. So each test also gets a hard stop a little after its timeout: faulthandler's
# watchdog, a C thread that fires even while the hung call holds the GIL (a Python timer thread,
# pytest-timeout's thread method, then never runs), dumps every thread's stack to the real
# stderr (an xdist worker's stdout is /dev/null) and ends the process. xdist reports the test
# as crashed, and our scheduler hands the rest of its work unit to the replacement worker.
# pytest-timeout and pytest's faulthandler plugin cancel timers at every failure (for pdb's
# sake): the hard stop is armed again for the rest of the test (its teardown, given at least
# TEARDOWN_AFTER_FAILURE_S) unless pdb is in use. A pytester session run inside a test cancels
# it too; the test's teardown arms it again.
TEARDOWN_AFTER_FAILURE_S = 30.0
_TIMEOUT_DUMP_FD = pytest.StashKey[int]()
_deadline: float | None = None  # the running test's hard stop, while its timeout runs
_interacting = False  # inside pytest_exception_interact


def pytest_configure(config) -> None:
    config.stash[_TIMEOUT_DUMP_FD] = os.dup(2)  # pytest's capture redirects fd 2 during tests


def pytest_unconfigure(config) -> None:
    faulthandler.cancel_dump_traceback_later()
    os.close(config.stash[_TIMEOUT_DUMP_FD])


def _hard_stop_after(timeout: float) -> float:
    return timeout + max(timeout / 5, 5.0)


def _arm(config) -> None:
    if _deadline is not None:
        faulthandler.dump_traceback_later(max(_deadline - time.monotonic(), 0.001), exit=True,
                                          file=config.stash[_TIMEOUT_DUMP_FD])


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # a hook of pytest-timeout
def pytest_timeout_set_timer(item, settings) -> None:
    global _deadline
    _deadline = time.monotonic() + _hard_stop_after(settings.timeout)
    _arm(item.config)  # and pytest-timeout sets its own timer


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # a hook of pytest-timeout
def pytest_timeout_cancel_timer(item) -> None:
    global _deadline
    faulthandler.cancel_dump_traceback_later()  # and pytest-timeout cancels its own timer
    if not _interacting:
        _deadline = None  # the end of the span it bounds


@pytest.hookimpl(wrapper=True)
def pytest_exception_interact(node, call, report):
    global _deadline, _interacting
    _interacting = True
    try:
        return (yield)
    finally:
        _interacting = False
        if _deadline is not None and not node.config.getoption("usepdb"):
            _deadline = max(_deadline, time.monotonic() + TEARDOWN_AFTER_FAILURE_S)
            _arm(node.config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item) -> None:
    _arm(item.config)


def pytest_enter_pdb() -> None:
    global _deadline
    _deadline = None


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
    "tests/integration/test_readme_layouts.py",  # the documented layouts: 3 nodes, kill and restart each
    "tests/chaos/test_restart_soak.py",
    CHAOS + "short_run_under_the_quorum",
    "tests/integration/test_rolling_restart.py",
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
    "tests/differential/test_against_kafka.py",  # a Kafka 4.4 JVM beside raftka
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
SPREAD = ("tests/chaos/test_chaos_runs.py", "tests/integration/test_readme_layouts.py", "tests/unit/",
          "tests/fuzz/")


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


class WorkUnitScheduling(LoadScopeScheduling):
    """xdist's loadscope scheduling over our work units, surviving a lost worker.

    A worker is lost when a test hangs in a C call (librdkafka, a JVM bridge): pytest-timeout's
    thread method dumps the stacks and ends the worker with os._exit, and xdist reports the
    test it was running as failed and starts a replacement. xdist's own `remove_node` then puts
    back every work unit the lost worker was ever given, finished ones and the crashed test
    included; the replacement is sent a finished unit, an empty list of tests, so no test
    report ever comes to ask for more work, and the run waits forever with every worker idle.
    Here only the lost worker's unfinished tests go back, first in the queue, without the test
    that was running (reported failed once, never run again)."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)

    def remove_node(self, node) -> str | None:
        workload = self.assigned_work.pop(node)
        unfinished = {scope: [nodeid for nodeid, done in unit.items() if not done]
                      for scope, unit in workload.items()}
        unfinished = {scope: nodeids for scope, nodeids in unfinished.items() if nodeids}
        if not unfinished:
            return None
        # A worker runs its tests in the order they were sent: the first unfinished one crashed.
        crashed_scope, (crashitem, *rest) = next(iter(unfinished.items()))
        unfinished[crashed_scope] = rest
        for scope, nodeids in reversed(unfinished.items()):
            if nodeids:
                self.workqueue[scope] = dict.fromkeys(nodeids, False)
                self.workqueue.move_to_end(scope, last=False)
        for other in self.nodes:
            self._reschedule(other)
        return crashitem

    def add_node_collection(self, node, collection) -> None:
        super().add_node_collection(node, collection)
        if node not in self.registered_collections:
            # A replacement that collected other tests than the run's (xdist logs the
            # difference) cannot be given any: shut it down, or the run waits for it.
            node.shutdown()

    def _reschedule(self, node) -> None:
        if node not in self.registered_collections:
            return  # still collecting (a replacement): `schedule` comes again when it is done
        super()._reschedule(node)


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    return WorkUnitScheduling(config, log)
