"""The Persister (broker/group/share_state_persister.py) against a real 3-node cluster: state
written through it survives a kill -9 of the share coordinator's broker and is read back
from the new leader of its `__share_group_state` partition.

The persister runs in the test process with a route of its own: FindCoordinator v6 key
type 2 to find the coordinator, then the state APIs over real sockets, so every call goes
over the wire and through the retries a failover needs (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a refused connection).
"""

from __future__ import annotations

import uuid

import pytest
import trio

from raftka.broker.group.share_partition_state import PersistedBatch, RecordState
from raftka.broker.group.share_persister import (
    PersisterError,
    ShareState,
    ShareStateKey,
    ShareStateSummary,
)
from raftka.broker.group.share_state_persister import ShareStatePersister
from raftka.client.admin import NewTopic
from raftka.client.blocking import Admin
from raftka.client.connection import BrokerConnection
from raftka.client.protocol import ApiKey, ErrorCode
from tests.compat.wire_client import WireConnection
from tests.integration.cluster_support import bootstrap_of, running_cluster, wait_partition

TOPIC = "orders"
STATE = "__share_group_state"
EXTRA = {"share.coordinator.state.topic.num.partitions": "1",
         "share.coordinator.snapshot.update.records.per.snapshot": "3"}


class FindCoordinatorRoute:
    """A client's route: FindCoordinator key type 2 through any live broker."""

    def __init__(self, nursery: trio.Nursery, bootstrap: list[tuple[str, int]]) -> None:
        self.nursery = nursery
        self.bootstrap = bootstrap
        self.endpoints: dict[int, tuple[str, int]] = {}
        self.conns: dict[int, BrokerConnection] = {}

    async def _any(self) -> BrokerConnection:
        for host, port in self.bootstrap:
            try:
                return await BrokerConnection.connect(self.nursery, host, port, request_timeout=5.0,
                                                      connect_timeout=2.0)
            except Exception:
                continue
        raise ConnectionError("no bootstrap broker answers")

    async def coordinator(self, key: ShareStateKey) -> int | None:
        conn = await self._any()
        try:
            answer = await conn.request(ApiKey.FIND_COORDINATOR, {"key_type": 2,
                                                                   "coordinator_keys": [key.coordinator_key]},
                                        version=6)
        finally:
            await conn.aclose()
        (found,) = answer.coordinators
        if found.error_code:
            return None
        self.endpoints[found.node_id] = (found.host, found.port)
        return found.node_id

    async def connection(self, node: int) -> BrokerConnection | None:
        conn = self.conns.get(node)
        if conn is None or conn.closed:
            host, port = self.endpoints[node]
            conn = self.conns[node] = await BrokerConnection.connect(self.nursery, host, port, request_timeout=5.0,
                                                                     connect_timeout=2.0, node_id=node)
        return conn

    async def drop(self, node: int) -> None:
        conn = self.conns.pop(node, None)
        if conn is not None:
            await conn.aclose()

    async def aclose(self) -> None:
        for node in list(self.conns):
            await self.drop(node)


def topic_id_of(cluster, topic: str) -> uuid.UUID:
    with WireConnection(bootstrap_of(cluster).split(",")[0]) as conn:
        meta = conn.request(ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
    return meta.topics[0].topic_id


def batch(first: int, last: int, state: RecordState, count: int) -> PersistedBatch:
    return PersistedBatch(first, last, state, count)


def test_state_written_through_the_persister_survives_a_kill_of_its_coordinator(tmp_path):
    with running_cluster(tmp_path, 3, extra=EXTRA) as cluster:
        with Admin(bootstrap_of(cluster)) as admin:
            admin.create_topics([NewTopic(TOPIC, 2, 3)])
        wait_partition(cluster, TOPIC, lambda p: p.leader >= 0 and len(p.isr) == 3, what="orders' full ISR")
        topic_id = topic_id_of(cluster, TOPIC)
        key = ShareStateKey("workers", topic_id, 1)
        other = ShareStateKey("workers", topic_id, 0)
        bootstrap = [("127.0.0.1", node.client_port) for node in cluster.nodes.values()]
        written = (batch(12, 14, RecordState.ACKNOWLEDGED, 1), batch(15, 15, RecordState.AVAILABLE, 2),
                   batch(16, 19, RecordState.ARCHIVED, 5))

        async def before_the_kill() -> int:
            async with trio.open_nursery() as nursery:
                route = FindCoordinatorRoute(nursery, bootstrap)
                persister = ShareStatePersister(route)
                assert await persister.read(key, 0) is None  # never initialized
                assert await persister.read_summary(key, 0) is None
                await persister.initialize(key, 1, 10)
                await persister.initialize(other, 1, 0)
                # Five writes: snapshots every 3 updates, so the reload replays both kinds.
                await persister.write(key, 1, 0, 10, (batch(10, 11, RecordState.ACKNOWLEDGED, 1),))
                await persister.write(key, 1, 0, 12, (batch(12, 13, RecordState.AVAILABLE, 1),))
                await persister.write(key, 1, 0, 12, written[:1])
                await persister.write(key, 1, 0, 12, written[1:2])
                await persister.write(key, 1, 0, 12, written[2:])
                await persister.write(other, 1, 0, 3, ())
                await persister.delete(other)
                assert await persister.read(key, 0) == ShareState(1, 12, written, 0)
                coordinator = await route.coordinator(key)
                assert coordinator is not None
                await route.aclose()
                nursery.cancel_scope.cancel()
                return coordinator

        coordinator = trio.run(before_the_kill)
        cluster.kill(coordinator)
        wait_partition(cluster, STATE, lambda p: p.leader not in (-1, coordinator), exclude={coordinator},
                       what=f"a new leader of {STATE}-0")
        bootstrap = [("127.0.0.1", n.client_port) for i, n in cluster.nodes.items() if i != coordinator]

        async def after_the_kill() -> None:
            async with trio.open_nursery() as nursery:
                route = FindCoordinatorRoute(nursery, bootstrap)
                persister = ShareStatePersister(route)
                # The new leader loads the partition; the persister retries until it answers.
                assert await persister.read(key, 1) == ShareState(1, 12, written, 1)
                assert await route.coordinator(key) not in (None, coordinator)
                # Delivery complete counts 3 then 4 at one start offset: the coordinator keeps the larger.
                assert await persister.read_summary(key, 1) == ShareStateSummary(1, 12, 1, 4)
                assert await persister.read(other, 1) is None  # its deletion was replayed too
                # The leader epoch the read recorded fences a deposed share-partition leader.
                with pytest.raises(PersisterError) as fenced:
                    await persister.write(key, 1, 0, 12, ())
                assert fenced.value.code == ErrorCode.FENCED_LEADER_EPOCH
                with pytest.raises(PersisterError) as stale:
                    await persister.write(key, 0, 1, 12, ())
                assert stale.value.code == ErrorCode.FENCED_STATE_EPOCH
                # And the new coordinator takes writes.
                await persister.write(key, 1, 1, 16, (batch(16, 16, RecordState.ACKNOWLEDGED, 6),))
                state = await persister.read(key, 1)
                assert state == ShareState(1, 16, (batch(16, 16, RecordState.ACKNOWLEDGED, 6),
                                                   batch(17, 19, RecordState.ARCHIVED, 5)), 1)
                await route.aclose()
                nursery.cancel_scope.cancel()

        trio.run(after_the_kill)


def test_the_persister_raises_kafkas_errors_and_gives_up_without_a_coordinator(tmp_path):
    with running_cluster(tmp_path, 3, extra=EXTRA) as cluster:
        bootstrap = [("127.0.0.1", node.client_port) for node in cluster.nodes.values()]
        unknown = ShareStateKey("workers", uuid.uuid4(), 0)

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                route = FindCoordinatorRoute(nursery, bootstrap)
                with pytest.raises(PersisterError) as missing:
                    await ShareStatePersister(route).initialize(unknown, 0, 0)
                assert missing.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                # No broker to ask: COORDINATOR_NOT_AVAILABLE once the attempts are used up.
                nowhere = FindCoordinatorRoute(nursery, [("127.0.0.1", 1)])
                with pytest.raises(PersisterError) as gone:
                    await ShareStatePersister(nowhere, attempts=3).read(unknown, 0)
                assert gone.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
                await route.aclose()
                nursery.cancel_scope.cancel()

        trio.run(main)
