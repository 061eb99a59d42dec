"""Collapse a repeated log line into one line per interval with a count.

A producer retrying one partition for 30 s (the ISR too small for
min.insync.replicas, a leader that is away) would otherwise log one
`producer.retry` line per attempt, every retry.backoff.ms. The first
occurrence of a key is logged at once; further ones within `interval_ms` are
counted, and the next line logged for that key says how many were folded into
it (`repeated=N`). Pure: the caller passes the clock.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass
class RepeatThrottle:
    interval_ms: int = 5000
    max_keys: int = 1024  # bounded: oldest keys are forgotten first
    _last: dict[Hashable, tuple[int, int]] = field(default_factory=dict)  # key -> (logged_at, folded)

    def admit(self, key: Hashable, now_ms: int) -> int | None:
        """None: fold this occurrence (count it). An int: log it now, saying it stands for
        this many earlier occurrences folded since the last line for `key` (0 = first)."""
        previous = self._last.get(key)
        if previous is not None and now_ms - previous[0] < self.interval_ms:
            self._last[key] = (previous[0], previous[1] + 1)
            return None
        folded = previous[1] if previous is not None else 0
        self._last.pop(key, None)
        if len(self._last) >= self.max_keys:
            self._last.pop(next(iter(self._last)))
        self._last[key] = (now_ms, 0)
        return folded
