"""broker/net/peer_connections.py: the pool closes every connection when cancelled, even when a
connection is dropped while another one closes (a node stopped with SIGTERM while its transaction
markers were failing over exited with RuntimeError, "dictionary changed size during iteration")."""

from __future__ import annotations

import trio

from raftka.broker.net.peer_connections import PeerConnections


class ClosingConnection:
    """What the pool uses of a BrokerConnection when it ends: `closed` and `aclose()`, which takes
    a moment (it waits for its reader task)."""

    def __init__(self, node_id: int, closing: trio.Event, closed: list[int]) -> None:
        self.node_id, self.closing, self.log = node_id, closing, closed
        self.closed = False

    async def aclose(self) -> None:
        self.closing.set()
        await trio.sleep(0.01)
        self.closed = True
        self.log.append(self.node_id)


def test_a_drop_while_the_pool_closes_its_connections() -> None:
    closed: list[int] = []

    async def main() -> None:
        pool = PeerConnections(replicas=None, client_id="test", request_timeout=1.0)
        closing = trio.Event()

        async def drop_one_while_closing() -> None:  # a marker send failing over, not cancelled
            await closing.wait()
            await pool.drop(2)

        async with trio.open_nursery() as outer:
            outer.start_soon(drop_one_while_closing)
            async with trio.open_nursery() as inner:
                await inner.start(pool.run)
                pool._conns.update({1: ClosingConnection(1, closing, closed),
                                    2: ClosingConnection(2, trio.Event(), closed)})
                inner.cancel_scope.cancel()

    trio.run(main)
    assert sorted(closed) == [1, 2]
