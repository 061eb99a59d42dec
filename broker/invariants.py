"""Self-checks of the pure cores: `checked` runs an object's `_check_invariants()` after a
method (a transition), which raises AssertionError naming the broken invariant. The checks
are cheap (a few set operations over a partition's replicas or a group's members)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def checked(method: F) -> F:
    """Run `self._check_invariants()` after `method` returns (not after it raises)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        self._check_invariants()
        return result

    return wrapper  # type: ignore[return-value]
