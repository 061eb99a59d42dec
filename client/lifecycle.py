"""A nursery an SDK object opens in `start()` and closes in `close()`.

trio wants a nursery's enter and exit in one task: `async with obj:` gives
that for free; callers using start()/close() directly must do the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

import trio

from raftka.client.errors import IllegalStateError

if TYPE_CHECKING:
    from raftka.client.cluster import Cluster
    from raftka.client.security import ClientSecurity


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


class ClusterClient:
    """What the SDK clients that own a nursery and a Cluster share: `async with`, the check that
    they are open, and the end of close() (the connections, then the nursery), which runs even
    while the caller is being cancelled."""

    _what = "client"  # in the error for a client used before start() or after close()
    _owner: OwnedNursery
    _cluster: Cluster | None
    _bootstrap: Any
    client_id: str
    retry_backoff_ms: int
    security: ClientSecurity | None

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _open_cluster(self, request_timeout_ms: int, **cluster_options: Any) -> None:
        """start(): the nursery, then a Cluster that has read the metadata once if a broker
        answered (Cluster.bootstrap_if_reachable; closed again on any other error)."""
        from raftka.client.cluster import Cluster

        if self._owner.open:
            return
        nursery = await self._owner.enter()
        self._cluster = Cluster(self._bootstrap, nursery, client_id=self.client_id,
                                request_timeout_ms=request_timeout_ms,
                                retry_backoff_ms=self.retry_backoff_ms, security=self.security,
                                **cluster_options)
        try:
            await self._cluster.bootstrap_if_reachable()
        except BaseException:
            await self.close()
            raise

    def _require_cluster(self) -> Cluster:
        if self._cluster is None:
            raise IllegalStateError(f"the {self._what} is not started or already closed")
        return self._cluster

    async def _close_cluster(self) -> None:
        if self._cluster is not None:
            with trio.CancelScope(shield=True):
                await self._cluster.aclose()
            self._cluster = None
        await self._owner.exit()
