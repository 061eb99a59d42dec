"""THE `Persister` (broker/group/share_persister.py): Kafka's `DefaultStatePersister`, one share
partition per call.

A `CoordinatorRoute` finds the share partition's coordinator and connects to it. In a broker
(`BrokerRoute`) that is Kafka's persister's way: the leader of the `__share_group_state`
partition the key hashes to, from the metadata (the topic is created on first use), over
the inter-broker listener (one connection per peer, as the transaction marker sender); a
client outside the brokers may route with FindCoordinator key type 2 instead. When the
coordinator is this broker, the persister calls it directly; otherwise it sends it the
state API (83-87).

NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS (and a lost
connection) are retried, with a backoff from `RETRY_BACKOFF_S` doubling up to
`RETRY_BACKOFF_MAX_S`, at most `MAX_ATTEMPTS` times (about 10 s: a coordinator failover
takes a leader election and a reload); then, and for every other error, `PersisterError`
carries Kafka's code and message.

`write` merges the batches into the stored ones as Kafka's coordinator does (cut at the
start offset; where they overlap, the higher delivery count wins, then the higher state):
Kafka's share partitions send only what changed. Sending the whole in-flight window
(`SharePartitionState.persisted_batches()`) therefore replaces it, since a record's delivery
count and state only grow while it is in flight.

`read` answers None for a share partition that was never initialized (the coordinator's
INVALID_REQUEST "Read operation on uninitialized share partition not allowed."), and
`read_summary` for one whose summary is Kafka's "nothing here" (start offset -1, epochs 0);
a share partition initialized at state epoch 0 with no start offset reads the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog
import trio

from raftka.broker.group.group_coordinator import CoordinatorError
from raftka.broker.group.share_coordinator import ShareCoordinator
from raftka.broker.group.share_coordinator_state import (
    READ_UNINITIALIZED,
    UNINITIALIZED_START_OFFSET,
    Answer,
    ShareGroupOffset,
    StateBatch,
)
from raftka.broker.group.share_partition_state import PersistedBatch, RecordState
from raftka.broker.group.share_persister import (
    SHARE_STATE_TOPIC,
    PersisterError,
    ShareState,
    ShareStateKey,
    ShareStateSummary,
    delivery_complete_count,
)
from raftka.broker.net.peer_connections import PeerConnections
from raftka.client.protocol import ApiKey, ErrorCode

log = structlog.get_logger("broker.share_persister")

REQUEST_TIMEOUT_S = 10.0
MAX_ATTEMPTS = 15
RETRY_BACKOFF_S = 0.05
RETRY_BACKOFF_MAX_S = 1.0
RETRIABLE = frozenset({int(ErrorCode.NOT_COORDINATOR), int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                       int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)})
NOT_AVAILABLE = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)

# The versions this persister sends (Kafka 4.4's newest).
VERSIONS = {ApiKey.INITIALIZE_SHARE_GROUP_STATE: 0, ApiKey.READ_SHARE_GROUP_STATE: 0,
            ApiKey.WRITE_SHARE_GROUP_STATE: 1, ApiKey.DELETE_SHARE_GROUP_STATE: 0,
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: 1}


class CoordinatorRoute(Protocol):
    """How a persister reaches share coordinators."""

    async def coordinator(self, key: ShareStateKey) -> int | None:
        """The node id of the key's coordinator now; None when there is none (no live leader)."""

    async def connection(self, node: int) -> Any:
        """A connection (`BrokerConnection`) to `node`, or None; may raise what connecting raises."""

    async def drop(self, node: int) -> None:
        """Forget the connection to `node` after an error."""


class BrokerRoute:
    """A broker's route: the metadata image and its peer connections (Kafka's
    `ShareCoordinatorMetadataCacheHelper`)."""

    def __init__(self, coordinator: ShareCoordinator, replicas) -> None:
        self.share_coordinator = coordinator
        self.replicas = replicas
        self._peers = PeerConnections(replicas, f"raftka-share-persister-{replicas.node_id}", REQUEST_TIMEOUT_S)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._peers.run(task_status=task_status)

    async def coordinator(self, key: ShareStateKey) -> int | None:
        try:
            await self.share_coordinator.ensure_topic()
            index = self.share_coordinator.partition_for(key)
        except CoordinatorError:
            return None
        except Exception as exc:  # the topic's creation failed (another broker created it: fine)
            log.debug("share_persister.topic_not_ready", error=str(exc))
            return None
        image = self.replicas.image
        topic = image.topic_by_name(SHARE_STATE_TOPIC)
        part = topic.partitions.get(index) if topic is not None else None
        if part is None or part.leader < 0 or not image.is_live(part.leader):
            return None
        return part.leader

    async def connection(self, node: int) -> Any:
        return await self._peers.get(node)

    async def drop(self, node: int) -> None:
        await self._peers.drop(node)


class ShareStatePersister:
    """Implements `Persister`: the broker's (`ctx.share_persister`, built by `for_broker`), or a
    client's with any `CoordinatorRoute` (`local` None: every call goes over the wire)."""

    def __init__(self, route: CoordinatorRoute, local: ShareCoordinator | None = None, node_id: int = -1,
                 attempts: int = MAX_ATTEMPTS) -> None:
        self.route = route
        self.local = local
        self.node_id = node_id
        self.attempts = attempts

    @classmethod
    def for_broker(cls, coordinator: ShareCoordinator, replicas) -> ShareStatePersister:
        return cls(BrokerRoute(coordinator, replicas), coordinator, replicas.node_id)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the route's connections (a `BrokerRoute`'s peers) until cancelled."""
        run = getattr(self.route, "run", None)
        if run is not None:
            await run(task_status=task_status)
        else:
            task_status.started()

    # --- Persister ---------------------------------------------------------------------------
    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> None:
        await self._call(key, ApiKey.INITIALIZE_SHARE_GROUP_STATE,
                         {"state_epoch": state_epoch, "start_offset": start_offset},
                         lambda c: c.initialize(key, state_epoch, start_offset))

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareState | None:
        try:
            answer = await self._call(key, ApiKey.READ_SHARE_GROUP_STATE, {"leader_epoch": leader_epoch},
                                      lambda c: c.read(key, leader_epoch))
        except PersisterError as exc:
            if exc.code == ErrorCode.INVALID_REQUEST and exc.message == READ_UNINITIALIZED:
                return None
            raise
        state = answer.state
        assert state is not None
        return ShareState(state.state_epoch, state.start_offset, _persisted(state.batches, key), leader_epoch)

    async def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[PersistedBatch, ...]) -> None:
        rows = tuple(StateBatch(b.first_offset, b.last_offset, int(b.state), b.delivery_count) for b in batches)
        complete = delivery_complete_count(start_offset, batches)
        body = {"state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start_offset,
                "delivery_complete_count": complete,
                "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                   "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                  for b in rows]}
        await self._call(key, ApiKey.WRITE_SHARE_GROUP_STATE, body,
                         lambda c: c.write(key, state_epoch, leader_epoch, start_offset, rows, complete))

    async def read_summary(self, key: ShareStateKey, leader_epoch: int) -> ShareStateSummary | None:
        answer = await self._call(key, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, {"leader_epoch": leader_epoch},
                                  lambda c: c.read_summary(key))
        state = answer.state
        assert state is not None
        if (state.start_offset, state.state_epoch, state.leader_epoch) == (UNINITIALIZED_START_OFFSET, 0, 0):
            return None
        return ShareStateSummary(state.state_epoch, state.start_offset, state.leader_epoch,
                                 state.delivery_complete_count)

    async def delete(self, key: ShareStateKey) -> None:
        await self._call(key, ApiKey.DELETE_SHARE_GROUP_STATE, {},
                         lambda c: c.delete(key))

    # --- finding the coordinator and asking it -------------------------------------------------
    async def _call(self, key: ShareStateKey, api: ApiKey, partition_fields: dict[str, Any],
                    local: Callable[[ShareCoordinator], Awaitable[Answer]]) -> Answer:
        """The coordinator's answer (error 0), retrying the retriable errors; PersisterError else."""
        backoff = RETRY_BACKOFF_S
        answer = Answer(NOT_AVAILABLE, "no attempt made")
        for attempt in range(self.attempts):
            if attempt:
                await trio.sleep(backoff)  # a retry's backoff, as Kafka's persister waits
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
            try:
                leader = await self.route.coordinator(key)
            except Exception as exc:  # no broker reachable to ask, a malformed answer
                log.info("share_persister.lookup_failed", key=key.coordinator_key, error=str(exc))
                leader = None
            if leader is None:
                answer = Answer(NOT_AVAILABLE, f"the {SHARE_STATE_TOPIC} partition for {key.coordinator_key!r} "
                                               "has no live leader")
            elif leader == self.node_id and self.local is not None:
                answer = await local(self.local)
            else:
                answer = await self._remote(leader, key, api, partition_fields)
            if answer.error not in RETRIABLE:
                break
        if answer.error:
            if answer.error in RETRIABLE:
                log.info("share_persister.gave_up", key=key.coordinator_key, api=api.name, attempts=self.attempts,
                         error=answer.error, message=answer.message)
            raise PersisterError(answer.error, answer.message or "")
        return answer

    async def _remote(self, node: int, key: ShareStateKey, api: ApiKey, partition_fields: dict[str, Any]) -> Answer:
        body = {"group_id": key.group_id, "topics": [
            {"topic_id": key.topic_id, "partitions": [{"partition": key.partition, **partition_fields}]}]}
        try:
            conn = await self.route.connection(node)
            if conn is None:
                return Answer(NOT_AVAILABLE, f"broker {node} has no endpoint")
            response = await conn.request(api, body, version=VERSIONS[api])
        except Exception as exc:  # connection refused or lost, timeout, a malformed answer
            log.info("share_persister.request_failed", broker=node, api=api.name, key=key.coordinator_key,
                     error=str(exc))
            await self.route.drop(node)
            return Answer(NOT_AVAILABLE, f"asking broker {node}: {exc}")
        for topic in response.results if response is not None else ():
            for part in topic.partitions:
                if topic.topic_id == key.topic_id and part.partition == key.partition:
                    return _answer(api, part)
        return Answer(int(ErrorCode.UNKNOWN_SERVER_ERROR),
                      f"broker {node} answered {api.name} without {key.coordinator_key!r}")


def _answer(api: ApiKey, part) -> Answer:
    if part.error_code:
        return Answer(part.error_code, part.error_message)
    if api == ApiKey.READ_SHARE_GROUP_STATE:
        batches = tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                        for b in part.state_batches)
        return Answer(state=ShareGroupOffset(0, part.state_epoch, -1, part.start_offset, batches=batches))
    if api == ApiKey.READ_SHARE_GROUP_STATE_SUMMARY:
        return Answer(state=ShareGroupOffset(0, part.state_epoch, part.leader_epoch, part.start_offset,
                                             part.delivery_complete_count))
    return Answer()


def _persisted(batches: tuple[StateBatch, ...], key: ShareStateKey) -> tuple[PersistedBatch, ...]:
    try:
        return tuple(PersistedBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
                     for b in batches)
    except ValueError as exc:
        raise PersisterError(int(ErrorCode.UNKNOWN_SERVER_ERROR),
                             f"the state of {key.coordinator_key!r} holds a delivery state this broker does not "
                             f"know: {exc}") from None
