"""Helpers shared by tests: waiting on conditions with deadlines, free ports."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


# A condition met within milliseconds on an idle machine (a log line through the node's pipe, a
# connection noticed) can take seconds on CI's loaded 2 cores: the default deadline allows for it.
DEFAULT_WAIT_S = 30.0


def wait_until(predicate: Callable[[], T], timeout: float = DEFAULT_WAIT_S, interval: float = 0.02,
               what: str = "condition") -> T:
    """Poll `predicate` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:  # the predicate may fail until the condition holds
            last_exc = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}") from last_exc
        time.sleep(interval)


async def wait_until_async(predicate: Callable[[], object], timeout: float, what: str = "condition") -> None:
    """`wait_until` for trio tests: poll `predicate` (no exceptions expected) under a deadline."""
    import trio

    try:
        with trio.fail_after(timeout):
            while not predicate():
                await trio.sleep(0.02)  # polling a condition under a deadline
    except trio.TooSlowError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (bind to 0 and release)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
