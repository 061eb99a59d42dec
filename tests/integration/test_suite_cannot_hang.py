"""A test that hangs, in Python or inside a C call that no signal ends (holding the GIL or not),
fails within its timeout, and the xdist run goes on to its end (issue #27): a pytest run in a
subprocess with the suite's own conftest.py and timeout method (pyproject.toml), as `make test`
runs (`-n 2 --dist loadscope --no-loadscope-reorder`). Each hung test takes its worker down,
with its stacks on stderr; the replacement must get the lost worker's remaining tests, and only
those."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_TIMEOUT_S = 5
RUN_BOUND_S = 240  # the inner run's own bound, so that this test can never hang

# Each module is one work unit. Both quick modules are dealt out first, one to each worker, so
# that each worker has finished a unit when its hung test takes it down.
MODULES = {
    "test_a_quick": "def test_quick():\n    pass\n",
    "test_b_quick": "def test_quick():\n    pass\n",
    "test_c_blocked_in_c": '''
import ctypes


def test_before():
    pass


def test_blocked_in_c():
    # Locking a mutex this thread holds: a wait inside C that no signal ends, as librdkafka's
    # condition waits, so pytest-timeout's signal method could never interrupt it.
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


def test_after():
    pass
''',
    "test_d_blocked_holding_the_gil": '''
import ctypes


def test_blocked_holding_the_gil():
    # The same wait through PyDLL, which keeps the GIL: no Python thread runs again.
    libc = ctypes.PyDLL(None)
    mutex = ctypes.create_string_buffer(64)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


def test_after():
    pass
''',
    "test_e_plain_hang": '''
import threading


def test_before():
    pass


def test_waits_forever():
    threading.Event().wait()


def test_after():
    pass
''',
}


def _suite_timeout_method() -> str:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return options.get("timeout_method", "signal")


HUNG = {"test_c_blocked_in_c": "test_blocked_in_c", "test_d_blocked_holding_the_gil": "test_blocked_holding_the_gil",
        "test_e_plain_hang": "test_waits_forever"}


def test_hung_tests_fail_within_their_timeout_and_the_run_completes(pytester) -> None:
    pytester.makeini(f"[pytest]\ntimeout = {TEST_TIMEOUT_S}\ntimeout_method = {_suite_timeout_method()}\n")
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(**MODULES)

    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadscope", "--no-loadscope-reorder",
                                           "-p", "no:randomly", "-p", "no:cacheprovider", timeout=RUN_BOUND_S)

    output = result.stdout.str()
    result.assert_outcomes(passed=7, failed=3)  # each passing test ran once, each hung one failed once
    for module, test in HUNG.items():
        assert f"crashed while running '{module}.py::{test}'" in output, output
        assert f" in {test}\n" in result.stderr.str(), result.stderr.str()  # its stack, from faulthandler
