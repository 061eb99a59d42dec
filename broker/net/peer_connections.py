"""Kafka-protocol connections from this broker to its peers, one per peer broker.

Used by the broker-to-broker requests of transactions: the coordinator's
WriteTxnMarkers (broker/txn/txn_markers.py) and the partition leaders' KIP-890
AddPartitionsToTxn `verify_only` (broker/txn/txn_verification.py). Each dials the
peer's inter-broker listener with that listener's security
(`inter_broker_security`, as the replica fetchers do). A connection is opened on
first use (one at a time per peer, however many tasks ask at once) and dropped by
the caller after an error; the next use dials again.
"""

from __future__ import annotations

import trio

from raftka.broker.net.tls import inter_broker_security
from raftka.client.connection import BrokerConnection


class PeerConnections:
    def __init__(self, replicas, client_id: str, request_timeout: float) -> None:
        self.replicas = replicas
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._conns: dict[int, BrokerConnection] = {}
        self._locks: dict[int, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the connections' reader tasks until cancelled; then close every connection."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                # A snapshot: `drop` may run while a close waits (a full-cluster SIGTERM showed it).
                conns, self._conns = list(self._conns.values()), {}
                for conn in conns:
                    with trio.CancelScope(shield=True):
                        await conn.aclose()

    async def get(self, broker_id: int) -> BrokerConnection | None:
        """The connection to `broker_id` (None if it has no endpoint in the image or this pool is
        not running). Raises what BrokerConnection.connect raises."""
        async with self._locks.setdefault(broker_id, trio.Lock()):
            conn = self._conns.get(broker_id)
            if conn is not None and not conn.closed:
                return conn
            endpoint = self.replicas.leader_endpoint(broker_id)
            if endpoint is None or self._nursery is None:
                return None
            conn = await BrokerConnection.connect(
                self._nursery, endpoint[0], endpoint[1], client_id=self.client_id,
                request_timeout=self.request_timeout, node_id=broker_id,
                security=inter_broker_security(self.replicas.config))
            self._conns[broker_id] = conn
            return conn

    async def drop(self, broker_id: int) -> None:
        """Close the connection to `broker_id` after an error (the next `get` dials again)."""
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            await conn.aclose()
