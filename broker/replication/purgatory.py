"""Delayed operations and the purgatory they wait in (Kafka's DelayedOperation and
DelayedOperationPurgatory).

A request whose answer depends on something still to happen (an acks=all produce
waiting for the ISR: broker/replication/delayed_produce.py) becomes a
`DelayedOperation`: it completes exactly once, either when `try_complete` finds its
conditions hold, or at its deadline, when it completes with what it has (Kafka's
expiration). Kafka's purgatory keeps a watch list per partition that appends and
high-watermark moves check; here the operation names the trio event that wakes
it (`wait_for_change`) and the purgatory re-checks it on each wake, under the
deadline. The purgatory knows what waits in it (`size`, Kafka's PurgatorySize).

A handler answers `DelayedResponse(purgatory, operation, respond)`: the dispatcher
(broker/kafka_apis.py) hands it to the connection as a `Deferred`, so the requests
after it are processed meanwhile and the answers still go back in request order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import trio


class DelayedOperation(ABC):
    """An operation that completes once: when its conditions hold, or at `deadline` (trio clock)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self._completed = False

    @property
    def is_completed(self) -> bool:
        return self._completed

    @abstractmethod
    def try_complete(self) -> bool:
        """Check the conditions; when they hold, return `force_complete()`. Never blocks."""

    @abstractmethod
    def on_complete(self) -> None:
        """Settle the operation's result (called once, by `force_complete`)."""

    @abstractmethod
    async def wait_for_change(self) -> None:
        """Return when a condition may have changed (the purgatory checks again)."""

    def force_complete(self) -> bool:
        """Complete now, whatever the conditions; False if it had already completed."""
        if self._completed:
            return False
        self._completed = True
        self.on_complete()
        return True


class DelayedOperationPurgatory:
    """Where delayed operations of one kind wait until they complete or expire."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._waiting: set[DelayedOperation] = set()

    @property
    def size(self) -> int:
        """How many operations wait here now."""
        return len(self._waiting)

    async def complete(self, operation: DelayedOperation) -> None:
        """Return once `operation` has completed: its conditions held, or its deadline passed.

        At the deadline the conditions are checked one last time (what became true meanwhile
        counts), then the operation is completed with what it has."""
        if operation.try_complete():
            return
        self._waiting.add(operation)
        try:
            with trio.move_on_at(operation.deadline):
                while not operation.is_completed:
                    await operation.wait_for_change()
                    operation.try_complete()
            if not operation.is_completed and not operation.try_complete():
                operation.force_complete()
        finally:
            self._waiting.discard(operation)


class DelayedResponse:
    """A handler's answer that waits in a purgatory: `finish()` returns the response message."""

    __slots__ = ("operation", "purgatory", "respond")

    def __init__(self, purgatory: DelayedOperationPurgatory, operation: DelayedOperation,
                 respond: Callable[[], Any]) -> None:
        self.purgatory, self.operation, self.respond = purgatory, operation, respond

    async def finish(self) -> Any:
        await self.purgatory.complete(self.operation)
        return self.respond()
