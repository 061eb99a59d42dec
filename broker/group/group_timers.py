"""One timer per consumer group, firing at the group's next deadline (trio shell).

The group state machine says when it next has something to do
(`GroupState.next_deadline_ms`); the coordinator sets that instant here after
every request that changes a group, and `run` calls back at exactly that
instant (trio's clock, in milliseconds). This replaces a periodic tick, which
made a 6 s session expire 6.0-6.1 s after the last heartbeat; Kafka's timer
expires it at the deadline.

Timers live in a heap with lazy deletion: `set` pushes a new entry and records
the key's current deadline; entries that no longer match are dropped when
they surface. The callback returns the key's next deadline (or None).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable

import trio

# A deadline the callback returns at or before the instant it ran for is re-fired this much
# later, so a state machine that failed to move on cannot spin the event loop.
MIN_REFIRE_MS = 1.0


def now_ms() -> float:
    return trio.current_time() * 1000.0


class DeadlineTimers:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str]] = []
        self._due: dict[str, float] = {}
        self._order = itertools.count()
        self._sleeping_until = math.inf
        self._wake = trio.Event()

    def set(self, key: str, deadline_ms: float | None) -> None:
        """(Re)schedule `key` at `deadline_ms` (trio clock, ms); None cancels its timer."""
        if deadline_ms is None:
            self._due.pop(key, None)
            return
        if self._due.get(key) == deadline_ms:
            return
        self._due[key] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, next(self._order), key))
        if deadline_ms < self._sleeping_until:
            self._wake.set()

    def deadline(self, key: str) -> float | None:
        """When `key`'s timer fires (None: no timer)."""
        return self._due.get(key)

    def __len__(self) -> int:
        return len(self._due)

    def _earliest(self) -> float:
        while self._heap:
            deadline, _, key = self._heap[0]
            if self._due.get(key) == deadline:
                return deadline
            heapq.heappop(self._heap)  # superseded or cancelled
        return math.inf

    async def run(self, on_due: Callable[[str, float], float | None]) -> None:
        """Forever: at each key's deadline, call `on_due(key, now_ms)` (now_ms >= the
        deadline) and schedule the key at the deadline it returns."""
        while True:
            earliest = self._earliest()
            self._wake = trio.Event()
            self._sleeping_until = earliest
            if earliest / 1000.0 > trio.current_time():  # the comparison the firing loop makes
                with trio.move_on_at(earliest / 1000.0):
                    await self._wake.wait()
            self._sleeping_until = -math.inf  # awake: `set` need not wake us
            now = trio.current_time()
            while (deadline := self._earliest()) / 1000.0 <= now:
                _, _, key = heapq.heappop(self._heap)
                del self._due[key]
                fired_at = max(deadline, now * 1000.0)
                following = on_due(key, fired_at)
                if following is not None and following <= fired_at:
                    following = fired_at + MIN_REFIRE_MS
                self.set(key, following)
            await trio.lowlevel.checkpoint()
