"""A nursery an SDK object opens in `start()` and closes in `close()`.

trio wants a nursery's enter and exit in one task: `async with obj:` gives
that for free; callers using start()/close() directly must do the same.
"""

from __future__ import annotations

from typing import Any

import trio


class OwnedNursery:
    def __init__(self) -> None:
        self._manager: Any = None
        self.nursery: trio.Nursery | None = None

    @property
    def open(self) -> bool:
        return self.nursery is not None

    async def enter(self) -> trio.Nursery:
        self._manager = trio.open_nursery()
        self.nursery = await self._manager.__aenter__()
        return self.nursery

    async def exit(self) -> None:
        """Cancel every task in the nursery and wait for them to end.

        Shielded: it must complete even while the caller is being cancelled, or trio's
        nursery stack is left corrupted (the nursery was entered in this task).
        """
        if self.nursery is None:
            return
        # Shield the nursery's own scope (not a new one: the nursery's exit must not happen
        # inside a child scope): its children are cancelled by it, outer cancellation waits.
        self.nursery.cancel_scope.cancel()
        self.nursery.cancel_scope.shield = True
        manager, self._manager, self.nursery = self._manager, None, None
        await manager.__aexit__(None, None, None)
