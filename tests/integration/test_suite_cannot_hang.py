"""A test that hangs, in Python or inside a C call that no signal ends (holding the GIL or not),
or in its teardown after a failure, fails, and the xdist run goes on to its end (issue #27): a
pytest run in a subprocess with the suite's own conftest.py and timeout method (pyproject.toml),
as `make test` runs (`-n 2 --dist loadscope --no-loadscope-reorder`). A Python-level hang fails
at its timeout; the others meet conftest's hard stop, which takes the worker down with the
stacks on stderr, and the replacement must get the lost worker's remaining tests, only those."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_TIMEOUT_S = 5
RUN_BOUND_S = 240  # the inner run's own bound, so that this test can never hang

# Each module is one work unit, dealt out in this order: one worker gets test_a_quick and then
# test_c_hangs, the other test_b_quick and then test_d_teardown_hangs. So each worker is lost
# with a finished unit behind it and nothing left in the queue, as at the end of `make test`,
# and in test_c_hangs a replacement is lost in turn before one runs the unit's last tests.
MODULES = {
    "test_a_quick": "def test_quick():\n    pass\n",
    "test_b_quick": "def test_quick():\n    pass\n",
    "test_c_hangs": '''
import ctypes
import threading


def test_before():
    pass


def test_blocked_in_c():
    # Locking a mutex this thread holds: a wait inside C that no signal ends, as librdkafka's
    # condition waits, so pytest-timeout's signal method could never interrupt it.
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


def test_blocked_holding_the_gil():
    # The same wait through PyDLL, which keeps the GIL: no Python thread runs again.
    libc = ctypes.PyDLL(None)
    mutex = ctypes.create_string_buffer(64)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


def test_waits_forever():
    threading.Event().wait()


def test_after():
    pass
''',
    "test_d_teardown_hangs": '''
import threading

import pytest


@pytest.fixture
def hangs_at_teardown():
    yield
    threading.Event().wait()


def test_fails(hangs_at_teardown):
    # A failure cancels the timer (pytest-timeout does, for pdb): the teardown is bounded still.
    assert False, "fails on purpose"
''',
}
# Ended by the hard stop, which takes the worker down: nodeid, and the function it hangs in.
HARD_STOPPED = {"test_c_hangs.py::test_blocked_in_c": "test_blocked_in_c",
                "test_c_hangs.py::test_blocked_holding_the_gil": "test_blocked_holding_the_gil",
                "test_d_teardown_hangs.py::test_fails": "hangs_at_teardown"}


def _suite_timeout_method() -> str:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return options.get("timeout_method", "signal")


def _run_pytest(directory: Path, *args: str) -> pytest.RunResult:
    """pytest in its own process group, killed whole (a lost worker hung in C included) if the
    run outlasts RUN_BOUND_S, which fails the test instead of hanging it."""
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=directory, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=RUN_BOUND_S)
        ended = True
    except subprocess.TimeoutExpired:
        ended = False
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    if not ended:
        out, err = process.communicate()
        pytest.fail(f"the pytest run did not end within {RUN_BOUND_S}s:\n{out}\n{err}")
    return pytest.RunResult(process.returncode, out.splitlines(), err.splitlines(), time.monotonic() - started)


def test_hung_tests_fail_within_their_timeout_and_the_run_completes(pytester) -> None:
    pytester.makeini(f"[pytest]\ntimeout = {TEST_TIMEOUT_S}\ntimeout_method = {_suite_timeout_method()}\n")
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(**MODULES)

    result = _run_pytest(pytester.path, "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder",
                         "-p", "no:randomly", "-p", "no:cacheprovider", f"--basetemp={pytester.path / 'tmp'}")

    output = result.stdout.str()
    # Each passing test ran once; each hung test failed once, test_fails twice (its call, then
    # the crash in its teardown).
    result.assert_outcomes(passed=4, failed=5)
    assert f"Timeout (>{TEST_TIMEOUT_S:.1f}s)" in output  # test_waits_forever: the signal got through
    for nodeid, function in HARD_STOPPED.items():
        assert f"crashed while running '{nodeid}'" in output, output
        assert f" in {function}\n" in result.stderr.str(), result.stderr.str()  # the stack, from faulthandler
