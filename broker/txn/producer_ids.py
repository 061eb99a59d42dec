"""Producer ids for InitProducerId, handed out from blocks the controller allocates.

Each block is committed to the metadata quorum before any id in it is used,
so ids stay unique across restarts and failovers (a restarted broker gets a
fresh block; unused ids of the old one are simply skipped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


class ProducerIdManager:
    def __init__(self, allocate_block: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._allocate_block = allocate_block
        self._next = 0
        self._end = 0
        self._lock = trio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                first, size = await self._allocate_block()
                self._next, self._end = first, first + size
            pid = self._next
            self._next += 1
            return pid
