"""`queued.max.request.bytes`: one budget for the bytes every Kafka connection of the
broker holds in requests partly received or not yet processed.

A connection reserves the bytes of each `receive` before making it (the window)
and gives back what did not arrive; the bytes of a whole request go back once
its handler has returned. When the budget is spent a connection stops reading,
leaving the bytes in the kernel (TCP backpressure), until memory is released.

Two rules keep this from becoming a weapon or a deadlock:

- Windows grow with what a request has really sent (`receive_window`): a
  connection that announces a 100 MiB request and sends nothing holds a few
  KiB of the budget, not 100 MiB (reserving the whole request at its size
  prefix, as Kafka's MemoryPool does, would let one 4-byte message stall every
  client).
- The connection with the oldest request in progress may always read, past
  the budget: each request that has started can finish, so requests partly
  read by several connections never wait on one another forever. The budget
  is therefore exceeded by at most one request (`socket.request.max.bytes`),
  as Kafka's non-strict pool is.
"""

from __future__ import annotations

import trio

from raftka.client.protocol import FrameDecoder

# The largest single receive; a request's first receive is at most FIRST_WINDOW bytes and each
# next one at most what the request has already delivered (TCP's slow start, in spirit).
RECEIVE_CHUNK = 256 * 1024
FIRST_WINDOW = 16 * 1024


def receive_window(decoder: FrameDecoder) -> int:
    """How many bytes a connection should ask the socket for next: the rest of the size
    prefix, or the rest of the request plus the next prefix, bounded as above."""
    missing = decoder.missing
    size = decoder.frame_size
    if size is None:
        return missing
    received = size - missing
    return min(missing + 4, RECEIVE_CHUNK, max(FIRST_WINDOW, received))


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
