"""One consumer's membership in a KIP-848 group (`group_protocol="consumer"`), client side.

Kafka's next-generation consumer protocol as its AsyncKafkaConsumer speaks it: the
coordinator computes the assignment and the member only heartbeats
(ConsumerGroupHeartbeat). Owned by AsyncConsumer, which runs `heartbeat_loop` in its
nursery and, from `poll()`, reconciles towards `target` (revoke first, then assign) and
calls `reconciled()` so the next heartbeat reports what it owns now.

- Join: epoch 0 with a member id the client made (KIP-1082), the subscribed topic names,
  the rebalance timeout, `group.remote.assignor` (None: the broker's default) and the
  owned partitions (none). The answer carries the member epoch, the heartbeat interval
  the member keeps to from then on, and (when it changed) the target assignment by
  topic id, resolved through the metadata.
- Every heartbeat reports the owned partitions; the broker moves the member's epoch on
  once it no longer reports the partitions it must give up.
- FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the group went on without this member: its
  partitions are lost (`ownership_lost`, no commit) and it rejoins with epoch 0 and the
  same member id.
- Leave: epoch -1 (-2 for a static member, which keeps its assignment for a session).

The offsets API is GroupMembership's: OffsetCommit carries the member epoch in its
generation field (`generation_id` is the member epoch here); STALE_MEMBER_EPOCH (the
epoch moved while the commit was out) is retried with the new one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

import trio

from raftka.client.cluster import Cluster
from raftka.client.errors import NO_ANSWER, KafkaError, error_for_code
from raftka.client.group_membership import COORDINATOR_ERRORS, GroupMembership, OffsetAndMetadata
from raftka.client.protocol import ApiKey, ErrorCode, request_class
from raftka.client.records import TopicPartition
from raftka.client.sdk_log import get_logger

log = get_logger("raftka.client.group")

ConsumerGroupHeartbeatRequest = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
REJOIN_CODES = frozenset(int(c) for c in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID))
STALE_MEMBER_EPOCH = int(ErrorCode.STALE_MEMBER_EPOCH)


def resolve_assignment(by_id: Mapping[uuid.UUID, Iterable[int]], name_of: Callable[[uuid.UUID], str | None],
                       ) -> tuple[frozenset[TopicPartition], frozenset[uuid.UUID]]:
    """The assigned partitions by name, and the topic ids the metadata does not know yet."""
    resolved: set[TopicPartition] = set()
    unknown: set[uuid.UUID] = set()
    for topic_id, partitions in by_id.items():
        name = name_of(topic_id)
        if name is None:
            unknown.add(topic_id)
        else:
            resolved.update(TopicPartition(name, p) for p in partitions)
    return frozenset(resolved), frozenset(unknown)


def reconciliation(owned: Iterable[TopicPartition], target: Iterable[TopicPartition],
                   ) -> tuple[set[TopicPartition], list[TopicPartition]]:
    """(revoked, added): what to give up first, then what to start (sorted)."""
    owned, target = set(owned), set(target)
    return owned - target, sorted(target - owned)


class ConsumerMembership(GroupMembership):
    """A KIP-848 member: the same surface AsyncConsumer uses for GroupMembership."""

    # The heartbeat's API; a share group member (client/share_membership.py) sends its own.
    heartbeat_api = ApiKey.CONSUMER_GROUP_HEARTBEAT

    def __init__(self, cluster: Cluster, group_id: str, *, remote_assignor: str | None = None,
                 rebalance_timeout_ms: int = 300000, retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30000, group_instance_id: str | None = None) -> None:
        super().__init__(cluster, group_id, rebalance_timeout_ms=rebalance_timeout_ms,
                         retry_backoff_ms=retry_backoff_ms, request_timeout_ms=request_timeout_ms,
                         group_instance_id=group_instance_id)
        if remote_assignor is not None and not remote_assignor:
            raise ValueError("group_remote_assignor is empty; expected None (the broker's default) "
                             "or an assignor name such as 'uniform' or 'range'")
        self.remote_assignor = remote_assignor
        self.member_id = str(uuid.uuid4())  # KIP-1082: the client names itself
        self.needs_rejoin = False
        self.active = False  # subscribed: heartbeats run
        # The target assignment the coordinator sent last, by name, until poll() reconciled it.
        self.target: frozenset[TopicPartition] | None = None
        self._target_ids: dict[uuid.UUID, list[int]] = {}
        self._unresolved: frozenset[uuid.UUID] = frozenset()
        self._topics: Callable[[], Sequence[str]] = tuple
        self._owned: Callable[[], Iterable[TopicPartition]] = tuple
        self._poke = trio.Event()
        self._lock = trio.Lock()  # one heartbeat (or the leave) out at a time
        self.heartbeat_interval_ms = 0  # the broker's group.consumer.heartbeat.interval.ms, once known

    def attach(self, topics: Callable[[], Sequence[str]], owned: Callable[[], Iterable[TopicPartition]]) -> None:
        """Where the subscription and the owned partitions are read from at each heartbeat."""
        self._topics, self._owned = topics, owned

    @property
    def joining(self) -> bool:
        """True until the member has an epoch, and while an assignment awaits reconciliation."""
        return self.active and (self.generation_id <= 0 or self.target is not None)

    def request_rejoin(self, reason: str) -> None:
        """The subscription changed (or a new one started): tell the coordinator now."""
        if not self.active:
            log.info("group.joining", group=self.group_id, member=self.member_id, reason=reason)
        self.active = True
        self._poke.set()

    def _reset_generation(self, reason: str) -> None:
        """Fenced or forgotten: whatever is owned is lost; rejoin with epoch 0, same member id."""
        log.info("group.member_fenced", group=self.group_id, member=self.member_id,
                 epoch=self.generation_id, reason=reason)
        self.generation_id = -1
        self.target, self._target_ids, self._unresolved = None, {}, frozenset()
        self.ownership_lost = True
        self.wake.set()
        self._poke.set()

    def reconciled(self) -> None:
        """poll() applied `target`: the next heartbeat (now) reports the new ownership."""
        self.target = None
        self._poke.set()

    # --- heartbeats ---------------------------------------------------------------
    def _owned_by_id(self) -> list[dict] | None:
        """The owned partitions by topic id; None while an owned topic's id is unknown."""
        by_topic: dict[str, list[int]] = {}
        for tp in self._owned():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out = []
        for topic, partitions in sorted(by_topic.items()):
            topic_id = self.cluster.metadata.topic_id(topic)
            if topic_id is None:
                return None
            out.append({"topic_id": topic_id, "partitions": sorted(partitions)})
        return out

    async def _request(self, epoch: int):
        owned = [] if epoch == JOIN_EPOCH else self._owned_by_id()
        if owned is None:
            await self.cluster.refresh_metadata([tp.topic for tp in self._owned()])
            owned = self._owned_by_id()
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.group_instance_id, rack_id=None,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=sorted(self._topics()), subscribed_topic_regex=None,
            server_assignor=self.remote_assignor, topic_partitions=owned)

    async def heartbeat_once(self) -> None:
        if not self.active or self.fatal is not None:
            return
        async with self._lock:
            if not self.active:
                return
            epoch = self.generation_id if self.generation_id > 0 else JOIN_EPOCH
            if epoch == JOIN_EPOCH and not self._topics():
                # Kafka refuses a first heartbeat without topic names (INVALID_REQUEST). A pattern
                # subscription joins once poll() has matched a topic; request_rejoin() pokes then.
                return
            try:
                node = await self.coordinator()
                request = await self._request(epoch)
                response = await self.cluster.send_to(node, self.heartbeat_api, request)
            except NO_ANSWER as exc:
                self.coordinator_dead(str(exc))
                return
            except KafkaError as exc:
                log.info("group.heartbeat_failed", group=self.group_id, error=str(exc))
                return
            if self.active:
                await self._handle(response, epoch)

    async def _handle(self, response, sent_epoch: int) -> None:
        code = response.error_code
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead(ErrorCode(code).name)
            return
        if code in REJOIN_CODES:
            self._reset_generation(ErrorCode(code).name)
            return
        if code:
            # UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
            # INVALID_REQUEST, authorization and version errors: Kafka's consumer gives up on them.
            self.fatal = error_for_code(code, f"ConsumerGroupHeartbeat for group {self.group_id!r}: "
                                              f"{response.error_message or ErrorCode(code).name}")
            log.warning("group.heartbeat_fatal", group=self.group_id, member=self.member_id, error=str(self.fatal))
            self.wake.set()
            return
        if response.member_id:
            self.member_id = response.member_id
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
        if sent_epoch == JOIN_EPOCH or response.member_epoch != self.generation_id:
            log.info("group.member_epoch", group=self.group_id, member=self.member_id,
                     epoch=response.member_epoch)
        self.generation_id = response.member_epoch
        if response.assignment is not None:
            self._target_ids = {t.topic_id: list(t.partitions) for t in response.assignment.topic_partitions}
            self._unresolved = frozenset(self._target_ids)
        if self._unresolved:
            await self._resolve_target()

    async def _resolve_target(self) -> None:
        target, unknown = resolve_assignment(self._target_ids, self.cluster.metadata.topic_name)
        if unknown:
            # In the heartbeat task: a cluster that stopped answering since must not end it.
            await self.cluster.refresh_metadata_if_reachable(self._topics())
            target, unknown = resolve_assignment(self._target_ids, self.cluster.metadata.topic_name)
        if unknown:
            # Kafka's consumer waits for the metadata too: the next heartbeat tries again.
            log.info("group.assignment_unresolved", group=self.group_id, topic_ids=len(unknown))
        self._unresolved = unknown
        if target != self.target:
            self.target = target
            log.info("group.target_assignment", group=self.group_id, member=self.member_id,
                     epoch=self.generation_id, partitions=[f"{tp.topic}-{tp.partition}" for tp in sorted(target)])
            self.wake.set()

    def _interval(self) -> float:
        if self.generation_id <= 0 or self.heartbeat_interval_ms <= 0:
            return self.retry_backoff  # joining: ask again soon
        return self.heartbeat_interval_ms / 1000

    async def heartbeat_loop(self) -> None:
        while True:
            with trio.move_on_after(self._interval()):
                await self._poke.wait()
            self._poke = trio.Event()
            await self.heartbeat_once()

    async def leave(self) -> None:
        """Leave with epoch -1 (a static member: -2, keeping its assignment for a session)."""
        self.active = False
        self.target = None
        if self.generation_id <= 0:
            self.generation_id = -1
            return
        epoch = LEAVE_EPOCH if self.group_instance_id is None else STATIC_LEAVE_EPOCH
        async with self._lock:
            try:
                node = await self.coordinator()
                response = await self.cluster.send_to(node, self.heartbeat_api, self._leave_request(epoch))
                log.info("group.left", group=self.group_id, member=self.member_id, epoch=epoch,
                         error=ErrorCode(response.error_code).name)
            except KafkaError as exc:
                log.info("group.leave_failed", group=self.group_id, error=str(exc))
        self.generation_id = -1

    def _leave_request(self, epoch: int):
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.group_instance_id, rack_id=None, rebalance_timeout_ms=-1,
            subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=None)

    # --- offsets --------------------------------------------------------------------
    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], *, as_member: bool = True) -> None:
        """GroupMembership.commit with the member epoch; STALE_MEMBER_EPOCH retried with the current one."""
        deadline = trio.current_time() + self.request_timeout
        while True:
            try:
                return await super().commit(offsets, as_member=as_member)
            except KafkaError as exc:
                if exc.code != STALE_MEMBER_EPOCH or trio.current_time() > deadline:
                    raise
            self._poke.set()
            await trio.sleep(self.retry_backoff)


__all__ = ["ConsumerMembership", "reconciliation", "resolve_assignment"]
