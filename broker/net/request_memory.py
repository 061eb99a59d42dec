"""`queued.max.request.bytes`: one budget for the bytes every Kafka connection of the
broker holds in requests partly received or not yet processed.

A connection asks the kernel how many bytes are waiting (FIONREAD), reserves
them, then receives them; a whole request's bytes go back once its handler has
returned. When the budget is spent a connection stops reading, leaving the
bytes in the kernel (TCP backpressure), until memory is released.

Two rules keep this from becoming a weapon or a deadlock:

- Only bytes that have arrived are reserved. Kafka's MemoryPool reserves a
  whole request when its size prefix arrives, so one connection announcing a
  100 MiB request and sending nothing more holds 100 MiB of the budget and can
  stall every client for `connections.max.idle.ms`; here it holds 4 bytes, and
  an idle connection holds none.
- The connection with the oldest request in progress may always read, past
  the budget: each request that has started can finish, so requests partly
  read by several connections never wait on one another forever. The budget
  is therefore exceeded by at most one request (`socket.request.max.bytes`)
  plus one receive, as Kafka's non-strict pool is by one request.
"""

from __future__ import annotations

import trio


class RequestMemoryPool:
    """A byte budget shared by connections (`capacity=None`: no limit, only accounting)."""

    def __init__(self, capacity: int | None) -> None:
        if capacity is not None and capacity <= 0:
            raise ValueError(f"capacity must be > 0 or None, got {capacity}")
        self.capacity = capacity
        self.used = 0
        self.waiting = 0
        self._requests: dict[object, None] = {}  # owners with a request in progress, oldest first
        self._changed = trio.lowlevel.ParkingLot()

    def may_reserve(self, owner: object, size: int) -> bool:
        if self.capacity is None or self.used + size <= self.capacity or self.used == 0:
            return True
        return next(iter(self._requests), None) is owner  # the oldest request may always finish

    async def reserve(self, owner: object, size: int) -> None:
        """Take `size` bytes for `owner`, waiting while the budget is spent."""
        if not self.may_reserve(owner, size):
            self.waiting += 1
            try:
                while not self.may_reserve(owner, size):
                    await self._changed.park()
            finally:
                self.waiting -= 1
        self.used += size

    def release(self, size: int) -> None:
        if size:
            self.used -= size
            if self._changed:
                self._changed.unpark_all()

    def request_started(self, owner: object) -> None:
        """`owner` began receiving a request (its size prefix arrived); idempotent."""
        self._requests.setdefault(owner, None)

    def request_finished(self, owner: object) -> None:
        """`owner`'s request in progress is complete, or its connection closed."""
        if self._requests.pop(owner, 0) is None and self._changed:
            self._changed.unpark_all()  # another request may now be the oldest
