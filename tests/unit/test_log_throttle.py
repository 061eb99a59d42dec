"""client/log_throttle.py: a repeated log line is folded into one line per interval with a count."""

from __future__ import annotations

import pytest

from raftka.client.log_throttle import RepeatThrottle


@pytest.mark.parametrize(("steps", "expected"), [
    # (key, now_ms) -> admit()'s answer; interval 1000 ms
    ([("a", 0)], [0]),
    ([("a", 0), ("a", 100), ("a", 999)], [0, None, None]),
    ([("a", 0), ("a", 100), ("a", 200), ("a", 1000)], [0, None, None, 2]),
    ([("a", 0), ("b", 10), ("a", 20), ("b", 1010)], [0, 0, None, 0]),
    ([("a", 0), ("a", 1000), ("a", 1500), ("a", 2000)], [0, 0, None, 1]),
])
def test_admit(steps, expected) -> None:
    throttle = RepeatThrottle(interval_ms=1000)
    assert [throttle.admit(key, now) for key, now in steps] == expected


def test_keys_are_bounded() -> None:
    throttle = RepeatThrottle(interval_ms=1000, max_keys=3)
    for i in range(10):
        throttle.admit(i, 0)
    assert len(throttle._last) == 3
