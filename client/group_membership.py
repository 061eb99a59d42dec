"""One consumer's membership in a group: find the coordinator, join, sync, heartbeat,
commit and fetch offsets, leave — Kafka's classic protocol, client side.

Owned by AsyncConsumer, which runs `ensure_active()` in its nursery (started by `poll()`)
whenever `needs_rejoin` is set (a heartbeat answered REBALANCE_IN_PROGRESS, the
generation became stale, the subscription changed) and runs `heartbeat_loop`
in its nursery. Coordinator errors (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, a dead connection) send it back to
FindCoordinator, then retry.

Static membership (KIP-345): with a `group_instance_id` every request names the
instance, the first JoinGroup needs no MEMBER_ID_REQUIRED round trip, and
`leave()` sends no LeaveGroup (a restarted process takes its place without a
rebalance; a gone one leaves at its session timeout). FENCED_INSTANCE_ID — another
process took this instance id — is fatal: `fatal` holds it and every later call
raises it.

Cooperative rebalancing (KIP-429) when every assignor offered is cooperative:
JoinGroup carries the partitions owned now (Subscription v2: owned partitions and
their generation) and the consumer keeps them while the join is out.
`ownership_lost` is set when the member id or generation is reset (the group
moved on without us): whatever the consumer holds is then no longer its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio

from raftka.client.assignors import assignor, is_cooperative
from raftka.client.cluster import Cluster
from raftka.client.errors import NO_ANSWER, KafkaError, KafkaTimeoutError, error_for_code
from raftka.client.group_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from raftka.client.protocol import (
    ApiKey,
    ErrorCode,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from raftka.client.records import TopicPartition
from raftka.client.sdk_log import get_logger

log = get_logger("raftka.client.group")

COORDINATOR_ERRORS = frozenset(int(c) for c in (
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
REJOIN_ERRORS = frozenset(int(c) for c in (
    ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID))


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


FENCED_INSTANCE_ID = int(ErrorCode.FENCED_INSTANCE_ID)
UNSTABLE_OFFSET_COMMIT = int(ErrorCode.UNSTABLE_OFFSET_COMMIT)


class CommitFailedError(KafkaError):
    """The group rebalanced before the commit: the partitions may belong to another member now."""

    name = "COMMIT_FAILED"


class GroupMembership:
    def __init__(self, cluster: Cluster, group_id: str, *, session_timeout_ms: int = 45000,
                 rebalance_timeout_ms: int = 300000, heartbeat_interval_ms: int = 3000,
                 assignors: Sequence[str] = ("range", "roundrobin"), retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30000, group_instance_id: str | None = None) -> None:
        if not group_id:
            raise ValueError("group_id is empty; expected the consumer group's name")
        for name in assignors:
            assignor(name)  # fail early on a typo
        if group_instance_id is not None and not group_instance_id:
            raise ValueError("group_instance_id is empty; expected None (dynamic member) or a name")
        self.cluster = cluster
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.assignors = tuple(assignors)
        self.cooperative = is_cooperative(self.assignors)
        self.group_instance_id = group_instance_id
        self.ownership_lost = False
        self.fatal: KafkaError | None = None
        self.retry_backoff = retry_backoff_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.leader_id = ""
        self.coordinator_id: int | None = None
        self.needs_rejoin = True
        self.wake = trio.Event()  # set when a rebalance is needed, so poll() can return early
        self._joining = False  # heartbeats pause while JoinGroup/SyncGroup are out
        # read_committed consumers (KIP-447): OffsetFetch v7+ asks for stable offsets, and the
        # coordinator answers UNSTABLE_OFFSET_COMMIT while a transactional commit is pending.
        self.require_stable = False

    def _reset_generation(self, reason: str) -> None:
        """The coordinator no longer knows this member/generation: join afresh, owning nothing."""
        if self.generation_id >= 0 or self.member_id:
            log.info("group.generation_reset", group=self.group_id, member=self.member_id,
                     generation=self.generation_id, reason=reason)
        self.member_id, self.generation_id = "", -1
        self.ownership_lost = True

    def _fence(self, what: str) -> KafkaError:
        self.fatal = error_for_code(
            FENCED_INSTANCE_ID, f"{what} for group {self.group_id!r}: another consumer with "
            f"group_instance_id {self.group_instance_id!r} replaced this one")
        log.warning("group.fenced", group=self.group_id, instance=self.group_instance_id,
                    member=self.member_id)
        self.wake.set()
        return self.fatal

    def request_rejoin(self, reason: str) -> None:
        if not self.needs_rejoin:
            log.info("group.rejoin_needed", group=self.group_id, reason=reason)
        self.needs_rejoin = True
        self.wake.set()

    # --- coordinator ---------------------------------------------------------
    async def coordinator(self, timeout: float | None = None) -> int:
        """The coordinator's node id, looked up (FindCoordinator) until `timeout` seconds
        (default: the request timeout) have passed; at least one lookup is made."""
        if self.coordinator_id is not None:
            return self.coordinator_id
        timeout = self.request_timeout if timeout is None else timeout
        deadline = trio.current_time() + timeout
        while True:
            try:
                response = await self.cluster.send_any(ApiKey.FIND_COORDINATOR,
                                                       FindCoordinatorRequest(key=self.group_id, key_type=0))
                if response.error_code == 0:
                    if self.cluster.metadata.broker(response.node_id) is None:
                        await self.cluster.refresh_metadata()
                    self.coordinator_id = response.node_id
                    return response.node_id
                error = error_for_code(response.error_code, f"FindCoordinator for group {self.group_id!r}")
                if not error.retriable:
                    raise error
            except NO_ANSWER:
                pass
            if trio.current_time() >= deadline:
                raise KafkaTimeoutError(f"no coordinator for group {self.group_id!r} within {timeout:.3g}s")
            await trio.sleep(self.retry_backoff)

    def coordinator_dead(self, reason: str) -> None:
        if self.coordinator_id is not None:
            log.info("group.coordinator_lost", group=self.group_id, node=self.coordinator_id, reason=reason)
        self.coordinator_id = None

    async def _send(self, api_key: ApiKey, request, timeout: float | None = None):
        """Send to the coordinator; coordinator errors and requests without an answer (a dead
        connection, a timeout) are retried after rediscovery until `timeout` seconds (default:
        the request timeout) have passed, then KafkaTimeoutError; at least one try is made.
        Returns the response (other errors are the caller's)."""
        timeout = self.request_timeout if timeout is None else timeout
        deadline = trio.current_time() + timeout
        while True:
            node = await self.coordinator(max(0.0, deadline - trio.current_time()))
            try:
                response = await self.cluster.send_to(node, api_key, request)
                code = _error_of(response)
                if code not in COORDINATOR_ERRORS:
                    return response
                self.coordinator_dead(ErrorCode(code).name)
            except NO_ANSWER as exc:
                self.coordinator_dead(str(exc))
            if trio.current_time() >= deadline:
                raise KafkaTimeoutError(f"group {self.group_id!r}: {api_key.name} got no answer from a "
                                        f"coordinator within {timeout:.3g}s")
            await trio.sleep(self.retry_backoff)

    # --- join / sync -----------------------------------------------------------
    @property
    def joining(self) -> bool:
        """True while JoinGroup/SyncGroup are out."""
        return self._joining

    async def ensure_active(self, topics: Sequence[str], partition_counts: Callable,
                            owned: Callable[[], Sequence[TopicPartition]] = tuple,
                            ) -> list[TopicPartition]:
        """Join and sync until this member has an assignment for the current generation.
        `owned()` is what the member consumes now (sent only when rebalancing cooperatively)."""
        if self.fatal is not None:
            raise self.fatal
        self._joining = True
        try:
            return await self._join_and_sync(topics, partition_counts, owned)
        finally:
            self._joining = False

    def _subscription(self, topics: Sequence[str], owned: Callable[[], Sequence[TopicPartition]]) -> bytes:
        if not self.cooperative:
            return encode_subscription(Subscription(tuple(sorted(topics))))
        mine = () if self.ownership_lost else tuple(sorted(owned()))
        return encode_subscription(Subscription(tuple(sorted(topics)), None, mine, self.generation_id),
                                   version=2)

    async def _join_and_sync(self, topics: Sequence[str], partition_counts: Callable,
                             owned: Callable[[], Sequence[TopicPartition]]) -> list[TopicPartition]:
        while True:
            self.needs_rejoin = False
            self.wake = trio.Event()
            subscription = self._subscription(topics, owned)
            request = JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE,
                protocols=[{"name": name, "metadata": subscription} for name in self.assignors])
            response = await self._send(ApiKey.JOIN_GROUP, request)
            code = response.error_code
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            if code == FENCED_INSTANCE_ID:
                raise self._fence("JoinGroup")
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self._reset_generation(ErrorCode(code).name)
                continue
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if code:
                raise error_for_code(code, f"JoinGroup for group {self.group_id!r}")
            self.member_id = response.member_id
            self.generation_id = response.generation_id
            self.protocol = response.protocol_name
            self.leader_id = response.leader
            assignments: dict[str, bytes] = {}
            # JoinGroup v9+: a static leader that rejoined a Stable group keeps the assignment.
            if self.member_id == self.leader_id and not response.skip_assignment:
                assignments = await self._assign(response, partition_counts)
            sync = await self._send(ApiKey.SYNC_GROUP, SyncGroupRequest(
                group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id,
                group_instance_id=self.group_instance_id,
                assignments=[{"member_id": m, "assignment": a} for m, a in assignments.items()]))
            if sync.error_code == FENCED_INSTANCE_ID:
                raise self._fence("SyncGroup")
            if sync.error_code in REJOIN_ERRORS:
                if sync.error_code != ErrorCode.REBALANCE_IN_PROGRESS:
                    self._reset_generation(ErrorCode(sync.error_code).name)
                continue
            if sync.error_code:
                raise error_for_code(sync.error_code, f"SyncGroup for group {self.group_id!r}")
            if self.needs_rejoin:
                continue
            assigned = list(decode_assignment(bytes(sync.assignment)).partitions)
            log.info("group.assigned", group=self.group_id, generation=self.generation_id,
                     member=self.member_id, partitions=[f"{tp.topic}-{tp.partition}" for tp in assigned])
            return assigned

    async def _assign(self, response, partition_counts) -> dict[str, bytes]:
        subscriptions = {m.member_id: decode_subscription(bytes(m.metadata)) for m in response.members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        counts = await partition_counts(topics)
        plan = assignor(response.protocol_name)(subscriptions, counts)
        log.info("group.leader_assigned", group=self.group_id, generation=response.generation_id,
                 protocol=response.protocol_name, members=len(plan))
        return {m: encode_assignment(Assignment(tuple(tps))) for m, tps in plan.items()}

    # --- heartbeats -------------------------------------------------------------
    async def heartbeat_once(self) -> None:
        # Heartbeats continue while a rejoin is pending (they keep the session alive until
        # the rebalance timeout, as in Kafka) but pause while JoinGroup/SyncGroup are out.
        if self.generation_id < 0 or self._joining or self.fatal is not None:
            return
        try:
            node = await self.coordinator()
            response = await self.cluster.send_to(node, ApiKey.HEARTBEAT, HeartbeatRequest(
                group_id=self.group_id, generation_id=self.generation_id, member_id=self.member_id,
                group_instance_id=self.group_instance_id))
        except NO_ANSWER as exc:
            self.coordinator_dead(str(exc))
            return
        except KafkaError as exc:
            log.info("group.heartbeat_failed", group=self.group_id, error=str(exc))
            return
        code = response.error_code
        if self._joining:
            return  # a join started while this heartbeat was out; its answer is stale
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead(ErrorCode(code).name)
        elif code == FENCED_INSTANCE_ID:
            self._fence("Heartbeat")
        elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self._reset_generation(ErrorCode(code).name)
            self.request_rejoin(ErrorCode(code).name)
        elif code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("REBALANCE_IN_PROGRESS")

    async def heartbeat_loop(self) -> None:
        while True:
            await trio.sleep(self.heartbeat_interval_ms / 1000)
            await self.heartbeat_once()

    async def leave(self) -> None:
        """Leave the group (LeaveGroup). A static member only forgets its member id: Kafka's
        clients never send LeaveGroup for one, so a restart within the session timeout costs
        the group no rebalance."""
        if not self.member_id:
            return
        if self.group_instance_id is not None:
            log.info("group.static_member_stopped", group=self.group_id, member=self.member_id,
                     instance=self.group_instance_id)
            self.member_id, self.generation_id = "", -1
            return
        try:
            node = await self.coordinator()
            await self.cluster.send_to(node, ApiKey.LEAVE_GROUP, LeaveGroupRequest(
                group_id=self.group_id, member_id=self.member_id,
                members=[{"member_id": self.member_id, "group_instance_id": None}]))
            log.info("group.left", group=self.group_id, member=self.member_id)
        except KafkaError as exc:
            log.info("group.leave_failed", group=self.group_id, error=str(exc))
        self.member_id, self.generation_id = "", -1

    # --- offsets ------------------------------------------------------------------
    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], *, as_member: bool = True) -> None:
        """Commit `offsets`; raises CommitFailedError if the group moved to another generation."""
        if not offsets:
            return
        topics: dict[str, list[dict]] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
        generation, member = (self.generation_id, self.member_id) if as_member else (-1, "")
        request = OffsetCommitRequest(
            group_id=self.group_id, generation_id_or_member_epoch=generation, member_id=member,
            group_instance_id=self.group_instance_id if as_member else None, retention_time_ms=-1,
            topics=[{"name": t, "partitions": p} for t, p in topics.items()])
        response = await self._send(ApiKey.OFFSET_COMMIT, request)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code == 0:
                    continue
                if p.error_code == FENCED_INSTANCE_ID:
                    raise self._fence("OffsetCommit")
                if p.error_code in REJOIN_ERRORS:
                    # Only if the member is still the one that sent it (Kafka's generationUnchanged):
                    # a commit that was out while a join moved the generation on says nothing
                    # about the new one.
                    if as_member and (self.generation_id, self.member_id) == (generation, member):
                        if p.error_code != ErrorCode.REBALANCE_IN_PROGRESS:
                            self._reset_generation(ErrorCode(p.error_code).name)
                        self.request_rejoin(ErrorCode(p.error_code).name)
                    raise CommitFailedError(
                        f"commit for group {self.group_id!r} refused ({ErrorCode(p.error_code).name}): "
                        "the group rebalanced; the partitions may now belong to another member",
                        code=p.error_code)
                raise error_for_code(p.error_code, f"OffsetCommit {t.name}/{p.partition_index}")

    async def fetch_offsets(self, tps: Sequence[TopicPartition], timeout: float | None = None,
                            ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of `tps` (None: nothing committed). Retried until `timeout`
        seconds (default: the request timeout) have passed; then KafkaTimeoutError, or the
        coordinator's last (retriable) error."""
        timeout = self.request_timeout if timeout is None else timeout
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = OffsetFetchRequest(group_id=self.group_id, require_stable=self.require_stable,
                                     topics=[{"name": t, "partition_indexes": p}
                                             for t, p in topics.items()])
        deadline = trio.current_time() + timeout
        while True:
            response = await self._send(ApiKey.OFFSET_FETCH, request, max(0.0, deadline - trio.current_time()))
            unstable = response.error_code == UNSTABLE_OFFSET_COMMIT or any(
                p.error_code == UNSTABLE_OFFSET_COMMIT for t in response.topics for p in t.partitions)
            if unstable and trio.current_time() < deadline:
                await trio.sleep(self.retry_backoff)  # the commit's marker is on its way
                continue
            if response.error_code in COORDINATOR_ERRORS and trio.current_time() < deadline:
                self.coordinator_dead(ErrorCode(response.error_code).name)
                await trio.sleep(self.retry_backoff)
                continue
            if response.error_code:
                raise error_for_code(response.error_code, f"OffsetFetch for group {self.group_id!r}")
            out: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(tps)
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for_code(p.error_code, f"OffsetFetch {t.name}/{p.partition_index}")
                    if p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata or "", p.committed_leader_epoch)
            return out


def _error_of(response) -> int:
    """The coordinator-level error of a group response (OffsetCommit has only per-partition codes)."""
    code = getattr(response, "error_code", 0) or 0
    if code:
        return code
    for t in getattr(response, "topics", None) or []:
        for p in getattr(t, "partitions", None) or []:
            if getattr(p, "error_code", 0) in COORDINATOR_ERRORS:
                return p.error_code
    return 0
