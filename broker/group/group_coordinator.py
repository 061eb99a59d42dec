"""The group coordinator: the trio shell around GroupState and `__consumer_offsets`.

This broker coordinates the groups whose id hashes (Kafka's rule) to a
`__consumer_offsets` partition it leads. On becoming leader of one it loads
that partition (requests for its groups get COORDINATOR_LOAD_IN_PROGRESS
meanwhile); on losing it, it drops those groups and parked requests get
NOT_COORDINATOR, so clients look the coordinator up again.

Parked JoinGroup/SyncGroup requests wait on events keyed by
(group, kind, member); the pure state machine says whom to answer. Each group
has one timer (broker/group/group_timers.py) at its next deadline (sessions,
rebalance and sync deadlines), set again after every request that changes it.
Offset commits and group metadata (after each completed rebalance and when a
group empties) are written with acks=all before they are acknowledged.

KIP-848 consumer groups (`consumer_groups`, broker/group/consumer_group_state.py) share the
partitions, loads, timers and offsets code: a ConsumerGroupHeartbeat runs the core and
writes the records it returns (Kafka's ConsumerGroup* records) with acks=all before
answering. An empty classic group is taken over by a consumer-protocol member (its
offsets kept); an empty consumer group by a classic JoinGroup.

Groups move between the protocols online as in Kafka (KIP-848), as
`group.consumer.migration.policy` allows (disabled, upgrade, downgrade, bidirectional): a
ConsumerGroupHeartbeat joining a non-empty classic group of protocol type "consumer" converts
it into a consumer group whose classic members keep their assignment (the core's
`upgrade_from`); their JoinGroup/SyncGroup/Heartbeat/LeaveGroup then go to the consumer
group's core (`classic_join` ...). When the last consumer-protocol member leaves and classic
members remain, the group converts back into a classic group (`downgraded`), which
rebalances. A refused upgrade is GROUP_ID_NOT_FOUND with Kafka's message; a refused
downgrade leaves a consumer group of classic members.
"""

from __future__ import annotations

import base64
import math
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import structlog
import trio

from raftka.broker.errors import error_code_for
from raftka.broker.group.consumer_assignors import TopicMeta
from raftka.broker.group.consumer_group_records import encode_record
from raftka.broker.group.consumer_group_state import (
    DEFAULT_ASSIGNORS,
    HEARTBEAT_INTERVAL_MS,
    REGEX_REFRESH_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    ClassicJoin,
    ConsumerGroupState,
    GroupRecord,
    Heartbeat,
    HeartbeatError,
    HeartbeatResult,
    MetadataVersion,
)
from raftka.broker.group.group_metadata_manager import (
    OFFSETS_TOPIC,
    append_and_wait,
    load_partition,
    wall_clock_ms,
)
from raftka.broker.group.group_records import (
    GroupMetadata,
    group_key,
    group_value,
    offset_key,
    offset_value,
    partition_for_group,
)
from raftka.broker.group.group_state import (
    CommittedOffset,
    GroupPhase,
    GroupState,
    JoinResult,
    Reply,
    SyncResult,
)
from raftka.broker.group.group_timers import DeadlineTimers
from raftka.broker.group.group_timers import now_ms as _now_ms
from raftka.broker.group.metadata_hash import with_hash
from raftka.broker.group.offset_expiration import Expiry, expire_classic, expire_consumer
from raftka.broker.group.share_group_coordinator import ShareGroupCoordinator
from raftka.broker.group.txn_offsets_state import PendingTxnOffsets, validate_txn_commit
from raftka.broker.replication.partition import NotLeaderOrFollower, Partition, PartitionError
from raftka.broker.replication.replica_manager import ReplicaManager
from raftka.client.group_protocol import PROTOCOL_TYPE, decode_subscription
from raftka.client.protocol import ErrorCode
from raftka.log.errors import LogError
from raftka.raft_meta.config.node_config import NodeConfig
from raftka.raft_meta.metadata.image import BrokerRegistration, TopicImage

log = structlog.get_logger("broker.group_coordinator")

COMMIT_TIMEOUT_S = 5.0  # Kafka's offsets.commit.timeout.ms

NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
LOAD_IN_PROGRESS = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
NOT_AVAILABLE = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
INVALID_SESSION_TIMEOUT = int(ErrorCode.INVALID_SESSION_TIMEOUT)
GROUP_ID_NOT_FOUND = int(ErrorCode.GROUP_ID_NOT_FOUND)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
NON_EMPTY_GROUP = int(ErrorCode.NON_EMPTY_GROUP)
INVALID_GROUP_ID = int(ErrorCode.INVALID_GROUP_ID)


# OffsetCommit v9+ answers a member's commit to an unknown group GROUP_ID_NOT_FOUND (older
# versions ILLEGAL_GENERATION), for both protocols (Kafka's OffsetMetadataManager).
FIRST_GROUP_NOT_FOUND_COMMIT_VERSION = 9
# TxnOffsetCommit answers a consumer-protocol member's stale epoch STALE_MEMBER_EPOCH from v6 (Kafka 4.4).
FIRST_STALE_EPOCH_TXN_COMMIT_VERSION = 6


class CoordinatorError(Exception):
    """A group request this broker cannot serve now; `code` is the Kafka error to answer."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def kafka_uuid() -> str:
    """A member id as Kafka's `Uuid.randomUuid().toString()`: 16 random bytes, URL-safe
    base64 without padding."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()


def _persist_mark(group: GroupState) -> tuple[int, str, int]:
    """What a stored group metadata record reflects; a new mark means write again."""
    return group.generation_id, group.phase.value, group.revision


def append_error_code(exc: BaseException) -> int:
    """Kafka's mapping of a failed `__consumer_offsets` append to the error a group client acts on."""
    if isinstance(exc, NotLeaderOrFollower):
        return NOT_COORDINATOR
    if isinstance(exc, PartitionError):
        return NOT_AVAILABLE  # not enough replicas, timed out: retry, maybe at a new coordinator
    return int(ErrorCode.UNKNOWN_SERVER_ERROR)


class _Loading(Protocol):
    loaded: bool


_L = TypeVar("_L", bound=_Loading)


class InternalTopic:
    """The lookups the coordinators of an internal topic share (`__consumer_offsets`,
    `__transaction_state`, `__share_group_state`): its partition count in the current metadata
    image, and whether this broker serves one of its partitions now."""

    def __init__(self, name: str, replicas: ReplicaManager, node_id: int) -> None:
        self.name = name
        self.replicas = replicas
        self.node_id = node_id

    def partition_count(self) -> int:
        """The topic's partition count, 0 while it does not exist."""
        topic = self.replicas.image.topic_by_name(self.name)
        return len(topic.partitions) if topic is not None else 0

    def existing_partition_count(self) -> int:
        """The partition count a key is hashed over (CoordinatorError while the topic is missing)."""
        count = self.partition_count()
        if not count:
            raise CoordinatorError(NOT_AVAILABLE, f"{self.name} does not exist yet")
        return count

    def leads_in_image(self, index: int) -> bool:
        """Whether the metadata image names this broker the partition's leader."""
        topic = self.replicas.image.topic_by_name(self.name)
        part = topic.partitions.get(index) if topic is not None else None
        return part is not None and part.leader == self.node_id

    def check_served(self, index: int, load: _L | None, whose: str = "") -> _L:
        """`load` if this broker leads partition `index` and has loaded it (`load` is None when it
        does not lead it), else CoordinatorError; `whose` ends the NOT_COORDINATOR message."""
        if load is None and self.leads_in_image(index):
            # The metadata already names this broker (FindCoordinator answered with it) but its
            # replica manager has not made it leader yet: a retriable "not yet", as while loading.
            raise CoordinatorError(LOAD_IN_PROGRESS, f"{self.name}-{index} is becoming led here")
        if load is None:
            raise CoordinatorError(NOT_COORDINATOR, f"broker {self.node_id} does not lead {self.name}-{index}{whose}")
        if not load.loaded:
            raise CoordinatorError(LOAD_IN_PROGRESS, f"{self.name}-{index} is still loading")
        return load


@dataclass
class _Waiter:
    event: trio.Event = field(default_factory=trio.Event)
    result: JoinResult | SyncResult | None = None


@dataclass
class _Load:
    token: int
    loaded: bool = False
    end: int = -1  # the log end the load reads up to
    # Markers replicated while loading, past `end`: (producer id, commit), applied once loaded.
    completions: list[tuple[int, bool]] = field(default_factory=list)


class GroupCoordinator:
    def __init__(self, config: NodeConfig, replicas: ReplicaManager,
                 create_offsets_topic: Callable[[int, int], Awaitable[None]]) -> None:
        self.config = config
        self.replicas = replicas
        self._topic = InternalTopic(OFFSETS_TOPIC, replicas, config.node_id)
        self._create_offsets_topic = create_offsets_topic
        self.groups: dict[str, GroupState] = {}
        self.consumer_groups: dict[str, ConsumerGroupState] = {}  # KIP-848 (group.protocol=consumer)
        self._loads: dict[int, _Load] = {}
        self._tokens = 0
        self._waiters: dict[tuple[str, str, str], _Waiter] = {}
        # group -> (generation, phase, revision) last written
        self._persisted: dict[str, tuple[int, str, int]] = {}
        self._load_send, self._load_recv = trio.open_memory_channel[tuple[Partition, int]](math.inf)
        self._nursery: trio.Nursery | None = None
        self.timers = DeadlineTimers()
        self.pending_txn = PendingTxnOffsets()  # TxnOffsetCommit offsets awaiting their marker
        self.share = ShareGroupCoordinator(self)  # KIP-932 share groups
        # The metadata image's topic ids when last looked at, and the image offset at which new
        # ones showed up (regex resolutions: Kafka's lastMetadataImageWithNewTopics).
        self._seen_topic_ids: frozenset[str] | None = None
        self._new_topics_offset = -1
        # topic_metas() of the image it was last computed for (an image is never changed in place).
        self._topic_metas: tuple[object, dict[str, TopicMeta]] | None = None

    # --- leadership of __consumer_offsets partitions ------------------------
    def on_leadership(self, partition: Partition, is_leader: bool) -> None:
        """ReplicaManager leadership listener (synchronous): start or drop a load."""
        if partition.topic != OFFSETS_TOPIC:
            return
        self._tokens += 1
        if is_leader:
            self._drop_partition(partition.index)
            self._loads[partition.index] = _Load(self._tokens)
            self._load_send.send_nowait((partition, self._tokens))
        else:
            self._drop_partition(partition.index)
            self._loads.pop(partition.index, None)

    def _drop_partition(self, index: int) -> None:
        self.pending_txn.drop_partition(index)
        count = self._topic.partition_count()
        for gid in [g for g in self.consumer_groups if count and partition_for_group(g, count) == index]:
            del self.consumer_groups[gid]
            self.timers.set(gid, None)
        self.share.drop([g for g in self.share.groups if count and partition_for_group(g, count) == index])
        dropped = [gid for gid in self.groups if count and partition_for_group(gid, count) == index]
        for gid in dropped:
            del self.groups[gid]
            self.timers.set(gid, None)
            self._persisted.pop(gid, None)
            for key in [k for k in self._waiters if k[0] == gid]:
                kind, member = key[1], key[2]
                result = (JoinResult(NOT_COORDINATOR, member) if kind == "join"
                          else SyncResult(NOT_COORDINATOR))
                self._deliver(gid, [Reply(kind, member, result)])
        if dropped:
            log.info("group.partition_unloaded", partition=index, groups=len(dropped))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.timers.run, self._on_due)
            nursery.start_soon(self._expiration_loop)
            task_status.started()
            async for partition, token in self._load_recv:
                nursery.start_soon(self._load, partition, token)

    async def _load(self, partition: Partition, token: int) -> None:
        started = trio.current_time()
        pending: dict = {}
        current = self._loads.get(partition.index)
        if current is not None and current.token == token:
            current.end = partition.log_end_offset  # what load_partition reads up to
        consumer: dict[str, ConsumerGroupState] = {}
        share: list = []
        try:
            groups = await load_partition(partition, self._new_group, _now_ms(), pending, consumer,
                                          self._new_consumer_group, share)
        except Exception:
            log.exception("group.load_failed", partition=partition.index)
            return
        load = self._loads.get(partition.index)
        if load is None or load.token != token:
            return  # leadership moved while loading
        for gid, group in groups.items():
            self.groups[gid] = group
            self._persisted[gid] = _persist_mark(group)
            self._reschedule(group)
        now = _now_ms()
        for gid, cg in consumer.items():
            cg.start_timers(now)
            self.consumer_groups[gid] = cg
            self.timers.set(gid, cg.next_deadline_ms())
        share_groups = self.share.install(share, now)
        self.pending_txn.install(partition.index, pending)
        load.loaded = True
        for producer_id, commit in load.completions:
            self.complete_transaction(partition.index, producer_id, commit)
        log.info("group.partition_loaded", partition=partition.index, groups=len(groups),
                 consumer_groups=len(consumer), share_groups=share_groups,
                 seconds=round(trio.current_time() - started, 3))

    def _new_group(self, group_id: str) -> GroupState:
        return GroupState(group_id, initial_rebalance_delay_ms=self.config.group_initial_rebalance_delay_ms)

    def _new_consumer_group(self, group_id: str) -> ConsumerGroupState:
        # Kafka's group.consumer.* configs (raft_meta/config/node_config.py); a test double's config
        # without them gets Kafka's defaults.
        config = self.config
        assignors = getattr(config, "group_consumer_assignors", DEFAULT_ASSIGNORS)
        return ConsumerGroupState(
            group_id, assignors=tuple(assignors),
            session_timeout_ms=getattr(config, "group_consumer_session_timeout_ms", SESSION_TIMEOUT_MS),
            heartbeat_interval_ms=getattr(config, "group_consumer_heartbeat_interval_ms", HEARTBEAT_INTERVAL_MS),
            regex_refresh_interval_ms=getattr(config, "group_consumer_regex_refresh_interval_ms",
                                              REGEX_REFRESH_INTERVAL_MS),
            migration_policy=getattr(config, "group_consumer_migration_policy", "bidirectional"))

    def _consumer_timeouts(self, group_id: str) -> tuple[int, int]:
        """The group's session timeout and heartbeat interval: its dynamic group configs
        (IncrementalAlterConfigs on the group, KIP-848), else the broker's group.consumer.*,
        read at every heartbeat as Kafka's coordinator does."""
        own = self.replicas.image.configs.get(("group", group_id), {})
        config = self.config
        session = own.get("consumer.session.timeout.ms")
        interval = own.get("consumer.heartbeat.interval.ms")
        return (int(session) if session is not None else
                getattr(config, "group_consumer_session_timeout_ms", SESSION_TIMEOUT_MS),
                int(interval) if interval is not None else
                getattr(config, "group_consumer_heartbeat_interval_ms", HEARTBEAT_INTERVAL_MS))

    def _on_due(self, group_id: str, now: float) -> float | None:
        """The group's timer fired (at its deadline): expire what is due; its next deadline."""
        if group_id in self.share.groups:
            return self.share.on_due(group_id, now)
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            removed, records = cg.tick(now, self.topic_metas())
            for member in removed:
                log.info("group.member_expired", group=group_id, member=member, protocol="consumer")
            classic = self._downgrade(cg, now)
            if records and self._nursery is not None:
                self._nursery.start_soon(self._write_consumer_records, group_id, records, self._classic_record(classic))
            return classic.next_deadline_ms() if classic is not None else cg.next_deadline_ms()
        group = self.groups.get(group_id)
        if group is None:
            return None
        replies, removed = group.tick(now)
        for member in removed:
            log.info("group.member_expired", group=group_id, member=member)
        self._deliver(group_id, replies)
        self._persist_soon(group)
        return group.next_deadline_ms()

    def _reschedule(self, group: GroupState) -> None:
        """Set the group's timer after a request changed it."""
        if self.groups.get(group.group_id) is group:
            self.timers.set(group.group_id, group.next_deadline_ms())

    # --- lookup -----------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition of `group_id` (CoordinatorError if the topic is missing)."""
        return partition_for_group(group_id, self._topic.existing_partition_count())

    async def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` if missing (the first FindCoordinator does, as in Kafka)."""
        if self._topic.partition_count():
            return
        live = len(self.replicas.image.live_brokers())
        rf = max(1, min(self.config.offsets_topic_replication_factor, live))
        await self._create_offsets_topic(self.config.offsets_topic_num_partitions, rf)

    def _partition(self, group_id: str) -> Partition:
        index = self.partition_for(group_id)
        self._topic.check_served(index, self._loads.get(index), f" (group {group_id!r})")
        partition = self.replicas.partitions.get((OFFSETS_TOPIC, index))
        if partition is None or not partition.is_leader:
            raise CoordinatorError(NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{index} is not led here")
        return partition

    def _group(self, group_id: str, *, create: bool) -> GroupState | None:
        if not group_id:
            raise CoordinatorError(INVALID_GROUP_ID, "the group id is empty; expected a non-empty string")
        self._partition(group_id)
        if group_id in self.share.groups:
            raise CoordinatorError(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a classic group.")
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = self._new_group(group_id)
        return group

    # --- parked requests -------------------------------------------------------------
    def _deliver(self, group_id: str, replies: list[Reply]) -> None:
        for reply in replies:
            waiter = self._waiters.pop((group_id, reply.kind, reply.member_id), None)
            if waiter is not None:
                waiter.result = reply.result
                waiter.event.set()

    async def _await_reply(self, group_id: str, kind: str, member_id: str, replies: list[Reply]):
        own = None
        for i in range(len(replies) - 1, -1, -1):
            if replies[i].kind == kind and replies[i].member_id == member_id:
                own = replies.pop(i)
                break
        self._deliver(group_id, replies)
        if own is not None:
            return own.result
        waiter = _Waiter()
        self._waiters[(group_id, kind, member_id)] = waiter
        try:
            await waiter.event.wait()
        finally:
            if self._waiters.get((group_id, kind, member_id)) is waiter:
                del self._waiters[(group_id, kind, member_id)]
        return waiter.result

    # --- KIP-848 consumer groups ---------------------------------------------------------
    def topic_metas(self) -> dict[str, TopicMeta]:
        """The metadata image's topics as the assignors and the metadata hash see them (name ->
        id, partitions, each partition's replicas' racks), computed once per image. A topic
        unchanged since the last image keeps its metadata hash; the others' are computed in a
        worker thread (`_hash_topics`); a group that needs one before is computed it at once."""
        image = self.replicas.image
        if self._topic_metas is None or self._topic_metas[0] is not image:
            previous = self._topic_metas[1] if self._topic_metas is not None else {}
            metas: dict[str, TopicMeta] = {}
            for topic in image.topics.values():
                meta = _topic_meta(topic, image.brokers)
                old = previous.get(topic.name)
                metas[topic.name] = old if old is not None and old == meta else meta
            self._topic_metas = (image, metas)
            if self._nursery is not None and any(m.hash is None for m in metas.values()):
                self._nursery.start_soon(self._hash_topics, metas)
        return self._topic_metas[1]

    async def _hash_topics(self, metas: dict[str, TopicMeta]) -> None:
        unhashed = [m for m in metas.values() if m.hash is None]
        hashed = await trio.to_thread.run_sync(lambda: [with_hash(m) for m in unhashed])
        current = self._topic_metas[1] if self._topic_metas is not None else {}
        for meta in hashed:
            if current.get(meta.name) == meta:
                current[meta.name] = meta

    def _metadata_version(self) -> MetadataVersion:
        """The image's offset, and the one at which this coordinator last saw topics created (the
        first image it looks at counts, as Kafka's first metadata update does)."""
        image = self.replicas.image
        ids = frozenset(image.topics)
        if self._seen_topic_ids is None or not ids <= self._seen_topic_ids:
            self._new_topics_offset = image.offset
        self._seen_topic_ids = ids
        return MetadataVersion(image.offset, self._new_topics_offset)

    async def consumer_heartbeat(self, group_id: str, hb: Heartbeat, *, server_member_ids: bool) -> HeartbeatResult:
        """ConsumerGroupHeartbeat. `server_member_ids`: v0, where a joining member may come
        without a member id and the coordinator names it (v1: the client names itself)."""
        try:
            if not group_id:
                raise CoordinatorError(INVALID_REQUEST, "GroupId can't be empty.")
            partition = self._partition(group_id)
        except CoordinatorError as exc:
            return HeartbeatResult(exc.code, str(exc))
        group = self.consumer_groups.get(group_id)
        if group is None and group_id in self.share.groups:
            return HeartbeatResult(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        now, topics = _now_ms(), self.topic_metas()
        upgrade: list[GroupRecord] = []
        if group is None:
            classic = self.groups.get(group_id)
            if classic is not None and (classic.phase is GroupPhase.DEAD or (classic.members and hb.member_epoch != 0)):
                return HeartbeatResult(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if hb.member_epoch != 0:
                return HeartbeatResult(int(ErrorCode.UNKNOWN_MEMBER_ID),
                                       f"Group {group_id} has no member {hb.member_id}; join with epoch 0.")
            group = self._new_consumer_group(group_id)
            if classic is not None and classic.members:  # KIP-848's online upgrade
                try:
                    upgrade = group.upgrade_from(classic, topics, now)
                except HeartbeatError as exc:
                    log.info("group.upgrade_refused", group=group_id, reason=str(exc))
                    return HeartbeatResult(exc.code, str(exc))
        group.session_timeout_ms, group.heartbeat_interval_ms = self._consumer_timeouts(group_id)
        result, records = group.heartbeat(hb, topics, now, kafka_uuid if server_member_ids else None,
                                          image=self._metadata_version(), wall_ms=wall_clock_ms())
        if result.error_code and group_id not in self.consumer_groups:
            return result  # a refused join does not create the group (nor upgrade one)
        if group_id not in self.consumer_groups:
            self._take_over_classic(group, bool(upgrade))
        records = upgrade + records
        classic_after = self._downgrade(group, now)
        self.timers.set(group_id, classic_after.next_deadline_ms() if classic_after is not None
                        else group.next_deadline_ms())
        if records:
            code = await self._append_consumer_records(partition, group_id, records, self._classic_record(classic_after))
            if code:
                return HeartbeatResult(code, "the group's records could not be written")
        if not result.error_code and hb.member_epoch == 0:
            log.info("group.member_joined", group=group_id, member=result.member_id, protocol="consumer",
                     epoch=result.member_epoch, client_id=hb.client_id, instance=hb.instance_id)
        elif not result.error_code and hb.member_epoch < 0:
            log.info("group.member_left", group=group_id, member=result.member_id, protocol="consumer",
                     epoch=hb.member_epoch)
        return result

    async def _append_consumer_records(self, partition: Partition, group_id: str, records: list[GroupRecord],
                                       tail: list[tuple[bytes, bytes | None]] | None = None) -> int:
        """Write a consumer group's records with acks=all; the error to answer (0: written).
        The state already moved (the records are in the leader's log even when the wait for
        the ISR fails); a coordinator that loses the partition drops the group and reloads
        it from what was replicated. `tail`: records after them in the same batch (the
        classic group a downgrade created)."""
        try:
            await append_and_wait(partition, [encode_record(group_id, r) for r in records] + (tail or []),
                                  COMMIT_TIMEOUT_S)
            return 0
        except Exception as exc:
            log.warning("group.persist_failed", group=group_id, protocol="consumer", error=str(exc))
            return append_error_code(exc)

    async def _write_consumer_records(self, group_id: str, records: list[GroupRecord],
                                      tail: list[tuple[bytes, bytes | None]] | None = None) -> None:
        try:
            partition = self._partition(group_id)
        except CoordinatorError:
            return
        await self._append_consumer_records(partition, group_id, records, tail)

    # --- moving between the protocols (KIP-848's online upgrade and downgrade) ------------------
    def _take_over_classic(self, group: ConsumerGroupState, upgraded: bool) -> None:
        """Install a consumer group in place of its classic group, if any: an empty one's
        offsets move over; a non-empty one was upgraded (`upgrade_from`), and its parked
        JoinGroup and SyncGroup requests get REBALANCE_IN_PROGRESS (they join the consumer
        group instead)."""
        gid = group.group_id
        classic = self.groups.pop(gid, None)
        if classic is not None:
            group.offsets.update(classic.offsets)
            self._persisted.pop(gid, None)
            rejoin = int(ErrorCode.REBALANCE_IN_PROGRESS)
            for key in [k for k in self._waiters if k[0] == gid]:
                kind, member = key[1], key[2]
                result = JoinResult(rejoin, member) if kind == "join" else SyncResult(rejoin)
                self._deliver(gid, [Reply(kind, member, result)])
            classic.mark_dead()
            log.info("group.converted", group=gid, to="consumer", members=len(group.members) if upgraded else 0)
        self.consumer_groups[gid] = group

    def _downgrade(self, cg: ConsumerGroupState, now: float) -> GroupState | None:
        """The classic group a consumer group converted into (`downgraded`: its last
        consumer-protocol member left), installed in its place and rebalancing; None if it
        did not convert."""
        members = cg.downgraded
        if members is None or self.consumer_groups.get(cg.group_id) is not cg:
            return None
        cg.downgraded = None
        gid = cg.group_id
        del self.consumer_groups[gid]
        classic = self.groups[gid] = self._new_group(gid)
        classic.offsets.update(cg.offsets)
        classic.adopt(generation_id=cg.group_epoch, members=members, now_ms=now)
        self._persisted[gid] = _persist_mark(classic)
        self._deliver(gid, classic.rebalance(now))
        log.info("group.converted", group=gid, to="classic", members=len(members),
                 generation=classic.generation_id)
        return classic

    def _classic_record(self, group: GroupState | None) -> list[tuple[bytes, bytes | None]]:
        """A downgraded group's classic metadata record, as it was converted (Stable, at the
        consumer group's epoch), written after the consumer group's tombstones."""
        if group is None:
            return []
        meta = GroupMetadata(PROTOCOL_TYPE, group.generation_id, group.protocol_name, group.leader_id,
                             int(wall_clock_ms()), tuple(group.members.values()))
        return [(group_key(group.group_id), group_value(meta))]

    def consumer_describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroupState | None]:
        """ConsumerGroupDescribe: (error, message, group)."""
        try:
            if not group_id:
                raise CoordinatorError(INVALID_GROUP_ID, "the group id is empty")
            self._partition(group_id)
        except CoordinatorError as exc:
            return exc.code, str(exc), None
        group = self.consumer_groups.get(group_id)
        if group is None:
            message = (f"Group {group_id} is not a consumer group." if self.other_group_type(group_id, "consumer")
                       else f"Group {group_id} not found.")
            return GROUP_ID_NOT_FOUND, message, None
        return 0, None, group

    def other_group_type(self, group_id: str, kind: str) -> bool:
        """Whether `group_id` is held by a group of another type than `kind` ("classic",
        "consumer" or "share"): Kafka refuses it (GROUP_ID_NOT_FOUND, "is not a ... group")."""
        held = {"classic": group_id in self.groups, "consumer": group_id in self.consumer_groups,
                "share": group_id in self.share.groups}
        return any(found for other, found in held.items() if other != kind)

    # --- membership ---------------------------------------------------------------------
    async def join(self, group_id: str, member_id: str, *, client_id: str, client_host: str,
                   session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                   group_instance_id: str | None = None,
                   support_skipping_assignment: bool = False) -> JoinResult:
        try:
            if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                    <= self.config.group_max_session_timeout_ms):
                raise CoordinatorError(
                    INVALID_SESSION_TIMEOUT,
                    f"session timeout {session_timeout_ms} ms is outside "
                    f"[group.min.session.timeout.ms {self.config.group_min_session_timeout_ms}, "
                    f"group.max.session.timeout.ms {self.config.group_max_session_timeout_ms}]")
            cg = self.consumer_groups.get(group_id)
            if cg is not None and cg.members:
                join = ClassicJoin(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                                   rebalance_timeout_ms, protocol_type, tuple(protocols), require_known_member_id)
                return await self._classic_join_consumer_group(cg, join)
            if cg is not None:
                await self._drop_consumer_group(cg)
            group = self._group(group_id, create=True)
        except CoordinatorError as exc:
            return JoinResult(exc.code, member_id)
        assert group is not None
        was_new = member_id == "" or member_id not in group.members
        replaced = group.static_member_id(group_instance_id) if not member_id else None
        revision = group.revision
        member_id, replies = group.join(
            member_id, client_id=client_id, client_host=client_host, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type, protocols=protocols,
            now_ms=_now_ms(), require_known_member_id=require_known_member_id,
            group_instance_id=group_instance_id, support_skipping_assignment=support_skipping_assignment)
        self._reschedule(group)
        if replaced is not None and member_id in group.members:
            log.info("group.static_member_replaced", group=group_id, instance=group_instance_id,
                     old_member=replaced, member=member_id, phase=group.phase.value)
        elif was_new and member_id in group.members:
            log.info("group.member_joined", group=group_id, member=member_id, client_id=client_id,
                     instance=group_instance_id)
        if group.revision != revision and group.phase is GroupPhase.STABLE:
            # A static member took over without a rebalance: store the new member id before
            # answering, so a coordinator failover does not fence the process that now owns it.
            code = await self._persist_group(group)
            if code:
                replies = [Reply(r.kind, r.member_id, JoinResult(code, r.member_id))
                           if (r.kind, r.member_id) == ("join", member_id) else r for r in replies]
        result = await self._await_reply(group_id, "join", member_id, replies)
        if result.error_code == 0 and result.member_id == result.leader:
            log.info("group.rebalanced", group=group_id, generation=result.generation_id,
                     protocol=result.protocol_name, members=len(result.members))
        return result

    async def _classic_join_consumer_group(self, cg: ConsumerGroupState, join: ClassicJoin) -> JoinResult:
        """A JoinGroup to a consumer group (a classic member of a mixed group): answered at
        once by the core, once its records are written."""
        partition = self._partition(cg.group_id)
        cg.session_timeout_ms, cg.heartbeat_interval_ms = self._consumer_timeouts(cg.group_id)
        now = _now_ms()
        result, records = cg.classic_join(join, self.topic_metas(), now, kafka_uuid, wall_ms=wall_clock_ms())
        classic = self._downgrade(cg, now)  # it replaced the last consumer-protocol member
        self.timers.set(cg.group_id, classic.next_deadline_ms() if classic is not None else cg.next_deadline_ms())
        if records:
            code = await self._append_consumer_records(partition, cg.group_id, records, self._classic_record(classic))
            if code:
                return JoinResult(code, result.member_id)
        if result.error_code == 0 and not join.member_id:
            log.info("group.member_joined", group=cg.group_id, member=result.member_id, protocol="classic",
                     epoch=result.generation_id, client_id=join.client_id, instance=join.instance_id)
        return JoinResult(result.error_code, result.member_id, result.generation_id, result.protocol_name)

    async def _drop_consumer_group(self, cg: ConsumerGroupState) -> None:
        """An empty consumer group taken over by a classic member: its metadata tombstoned,
        its offsets kept (they move to the classic group)."""
        partition = self._partition(cg.group_id)
        records = [encode_record(cg.group_id, r) for r in cg.deletion_records()]
        try:
            await append_and_wait(partition, records, COMMIT_TIMEOUT_S)
        except Exception as exc:
            raise CoordinatorError(append_error_code(exc), f"could not convert group {cg.group_id}") from exc
        if self.consumer_groups.get(cg.group_id) is cg:
            del self.consumer_groups[cg.group_id]
            self.timers.set(cg.group_id, None)
            group = self.groups[cg.group_id] = self._new_group(cg.group_id)
            group.offsets.update(cg.offsets)
            log.info("group.converted", group=cg.group_id, to="classic")

    async def _delete_consumer_group(self, cg: ConsumerGroupState) -> int:
        """DeleteGroups for a consumer group: only when empty (NON_EMPTY_GROUP otherwise); its
        offsets and metadata are tombstoned, as Kafka does."""
        try:
            partition = self._partition(cg.group_id)
        except CoordinatorError as exc:
            return exc.code
        if cg.members:
            return NON_EMPTY_GROUP
        records: list[tuple[bytes, bytes | None]] = [(offset_key(cg.group_id, t, p), None) for t, p in cg.offsets]
        records += [encode_record(cg.group_id, r) for r in cg.deletion_records()]
        try:
            await append_and_wait(partition, records, COMMIT_TIMEOUT_S)
        except Exception as exc:
            return append_error_code(exc)
        if self.consumer_groups.get(cg.group_id) is cg:
            del self.consumer_groups[cg.group_id]
            self.timers.set(cg.group_id, None)
        log.info("group.deleted", group=cg.group_id, protocol="consumer")
        return 0

    async def sync(self, group_id: str, member_id: str, generation_id: int,
                   assignments: dict[str, bytes], group_instance_id: str | None = None, *,
                   protocol_type: str | None = None, protocol_name: str | None = None) -> SyncResult:
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            r = cg.classic_sync(member_id, group_instance_id, generation_id, _now_ms(), protocol_type, protocol_name,
                                topics=self.topic_metas())
            self.timers.set(group_id, cg.next_deadline_ms())
            return SyncResult(r.error_code, r.assignment, r.protocol_type, r.protocol_name)
        try:
            group = self._group(group_id, create=False)
        except CoordinatorError as exc:
            return SyncResult(exc.code)
        if group is None:
            return SyncResult(int(ErrorCode.UNKNOWN_MEMBER_ID))
        before = group.phase
        replies = group.sync(member_id, generation_id, assignments, _now_ms(), group_instance_id,
                             protocol_type=protocol_type, protocol_name=protocol_name)
        self._reschedule(group)
        if before is GroupPhase.COMPLETING_REBALANCE and group.phase is GroupPhase.STABLE:
            code = await self._persist_group(group)
            if code:
                # Kafka's answer when the assignment could not be stored: everyone rejoins.
                replies = [Reply(r.kind, r.member_id, SyncResult(code)) for r in replies]
        return await self._await_reply(group_id, "sync", member_id, replies)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> int:
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            code, _ = cg.classic_heartbeat(member_id, group_instance_id, generation_id, _now_ms())
            self.timers.set(group_id, cg.next_deadline_ms())
            return code
        try:
            group = self._group(group_id, create=False)
        except CoordinatorError as exc:
            return exc.code
        if group is None:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        code = group.heartbeat(member_id, generation_id, _now_ms(), group_instance_id)
        self._reschedule(group)
        return code

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Remove (member id, group instance id) pairs. Returns (error for the whole request,
        error per member)."""
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            return self._classic_leave_consumer_group(cg, members)
        try:
            group = self._group(group_id, create=False)
        except CoordinatorError as exc:
            return exc.code, [exc.code] * len(members)
        if group is None:
            code = int(ErrorCode.UNKNOWN_MEMBER_ID)
            return code, [code] * len(members)
        codes = []
        for member_id, instance_id in members:
            code, replies = group.leave(member_id, _now_ms(), instance_id)
            self._reschedule(group)
            if code == 0:
                log.info("group.member_left", group=group_id, member=member_id, instance=instance_id)
            self._deliver(group_id, replies)
            codes.append(code)
        self._persist_soon(group)
        top = codes[0] if len(codes) == 1 else 0
        return top, codes

    def _classic_leave_consumer_group(self, cg: ConsumerGroupState,
                                      members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        try:
            self._partition(cg.group_id)
        except CoordinatorError as exc:
            return exc.code, [exc.code] * len(members)
        codes, removed, records = cg.classic_leave(members, self.topic_metas())
        for member_id in removed:
            log.info("group.member_left", group=cg.group_id, member=member_id, protocol="classic")
        self.timers.set(cg.group_id, cg.next_deadline_ms())
        if records and self._nursery is not None:
            self._nursery.start_soon(self._write_consumer_records, cg.group_id, records)
        return (codes[0] if len(codes) == 1 else 0), codes

    # --- persistence of membership -------------------------------------------------------
    def _persist_soon(self, group: GroupState) -> None:
        """Write the group's metadata when it reached a new generation or emptied since last time."""
        if group.phase not in (GroupPhase.STABLE, GroupPhase.EMPTY):
            return
        mark = _persist_mark(group)
        if self._persisted.get(group.group_id, (0, GroupPhase.EMPTY.value, 0)) == mark:
            return
        if self._nursery is not None:
            self._persisted[group.group_id] = mark
            self._nursery.start_soon(self._persist_group, group)

    async def _persist_group(self, group: GroupState) -> int:
        self._persisted[group.group_id] = _persist_mark(group)
        stamp = self._wall_clock(group.state_timestamp_ms)
        meta = GroupMetadata(group.protocol_type or "", group.generation_id, group.protocol_name,
                             group.leader_id, int(stamp if stamp is not None else wall_clock_ms()),
                             tuple(group.members.values()))
        try:
            partition = self._partition(group.group_id)
            await append_and_wait(partition, [(group_key(group.group_id), group_value(meta))],
                                  COMMIT_TIMEOUT_S)
            return 0
        except CoordinatorError as exc:
            return exc.code
        except Exception as exc:
            log.warning("group.persist_failed", group=group.group_id, error=str(exc))
            return append_error_code(exc)

    # --- offsets ------------------------------------------------------------------------
    async def commit(self, group_id: str, member_id: str, generation_id: int,
                     offsets: dict[tuple[str, int], CommittedOffset],
                     group_instance_id: str | None = None, api_version: int = 9) -> dict[tuple[str, int], int]:
        def everyone(code: int) -> dict[tuple[str, int], int]:
            return dict.fromkeys(offsets, code)

        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            return await self._consumer_commit(cg, member_id, generation_id, offsets, api_version)
        try:
            group = self._group(group_id, create=generation_id < 0)
            partition = self._partition(group_id)
        except CoordinatorError as exc:
            return everyone(exc.code)
        if group is None:  # a member's commit (generation >= 0) to a group this coordinator lacks
            return everyone(int(ErrorCode.GROUP_ID_NOT_FOUND) if api_version >= FIRST_GROUP_NOT_FOUND_COMMIT_VERSION
                            else int(ErrorCode.ILLEGAL_GENERATION))
        code = group.validate_commit(member_id, generation_id, _now_ms(), group_instance_id)
        self._reschedule(group)
        if code or not offsets:
            return everyone(code)
        records = [(offset_key(group_id, t, p), offset_value(c)) for (t, p), c in offsets.items()]
        try:
            await append_and_wait(partition, records, COMMIT_TIMEOUT_S)
        except Exception as exc:
            log.info("group.commit_failed", group=group_id, error=str(exc))
            return everyone(append_error_code(exc))
        current = self.groups.get(group_id)
        if current is None and group.phase is GroupPhase.DEAD and self._is_served(group_id):
            # Deleted meanwhile (expired, DeleteGroups): this commit follows the group's
            # tombstone in the log, so the group lives on with it, as a reload would find it.
            current = self.groups[group_id] = self._new_group(group_id)
        if current is not None:  # None: unloaded meanwhile (the next load reads the commit)
            current.offsets.update(offsets)
        return everyone(0)

    def _by_topic_id(self, offsets: Iterable[tuple[str, int]]) -> list[tuple[str | None, int]]:
        """The committed partitions by topic id (the metadata image's: Kafka's KafkaApis resolves
        the names before its coordinator checks the member's assignment epochs)."""
        ids = self.replicas.image.topic_ids
        return [(ids.get(name), p) for name, p in offsets]

    async def _consumer_commit(self, cg: ConsumerGroupState, member_id: str, member_epoch: int,
                               offsets: dict[tuple[str, int], CommittedOffset],
                               api_version: int) -> dict[tuple[str, int], int]:
        try:
            partition = self._partition(cg.group_id)
        except CoordinatorError as exc:
            return dict.fromkeys(offsets, exc.code)
        code = cg.validate_commit(member_id, member_epoch, api_version, partitions=self._by_topic_id(offsets))
        if code or not offsets:
            return dict.fromkeys(offsets, code)
        records = [(offset_key(cg.group_id, t, p), offset_value(c)) for (t, p), c in offsets.items()]
        try:
            await append_and_wait(partition, records, COMMIT_TIMEOUT_S)
        except Exception as exc:
            log.info("group.commit_failed", group=cg.group_id, error=str(exc))
            return dict.fromkeys(offsets, append_error_code(exc))
        current = self.consumer_groups.get(cg.group_id)
        if current is not None:
            current.offsets.update(offsets)
        return dict.fromkeys(offsets, 0)

    async def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                         generation_id: int, group_instance_id: str | None,
                         offsets: dict[tuple[str, int], CommittedOffset],
                         api_version: int = 5) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: validate (KIP-447), write the offsets as one transactional batch of the
        producer to the group's partition, hold them pending until the producer's marker lands
        there (`complete_transaction`). Unknown groups are created Empty, as in Kafka; a
        consumer-protocol group checks the member and its epoch (`validate_commit`; before v6 a
        stale epoch is ILLEGAL_GENERATION, as Kafka's `supportsStaleMemberEpochError`)."""
        cg = self.consumer_groups.get(group_id)
        try:
            group = None if cg is not None else self._group(group_id, create=True)
            partition = self._partition(group_id)
        except CoordinatorError as exc:
            return dict.fromkeys(offsets, exc.code)
        if cg is not None:
            code = cg.validate_commit(member_id, generation_id, api_version, transactional=True,
                                      partitions=self._by_topic_id(offsets))
            if code == ErrorCode.STALE_MEMBER_EPOCH and api_version < FIRST_STALE_EPOCH_TXN_COMMIT_VERSION:
                code = int(ErrorCode.ILLEGAL_GENERATION)
        else:
            assert group is not None
            code = validate_txn_commit(group, member_id, generation_id, group_instance_id)
        if code or not offsets:
            return dict.fromkeys(offsets, code)
        records = [(offset_key(group_id, t, p), offset_value(c)) for (t, p), c in offsets.items()]
        # Held before the append (which happens before append_and_wait's first await): a marker
        # replicated while this write waits for the ISR (a timeout abort) then finds them.
        self.pending_txn.add(partition.index, producer_id, group_id, offsets)
        try:
            await append_and_wait(partition, records, COMMIT_TIMEOUT_S, producer=(producer_id, producer_epoch))
        except Exception as exc:
            log.info("group.txn_commit_failed", group=group_id, producer_id=producer_id, error=str(exc))
            self.pending_txn.discard(partition.index, producer_id, group_id, offsets)
            code = error_code_for(exc) if isinstance(exc, LogError) else append_error_code(exc)
            return dict.fromkeys(offsets, code)
        return dict.fromkeys(offsets, 0)

    def txn_offset_pending(self, group_id: str, tp: tuple[str, int]) -> bool:
        """Whether an open transaction holds an offset of `group_id` for `tp` here."""
        try:
            index = self.partition_for(group_id)
        except CoordinatorError:
            return False
        return self.pending_txn.is_pending(index, group_id, tp)

    def complete_transaction(self, partition_index: int, producer_id: int, commit: bool,
                             marker_offset: int | None = None) -> None:
        """A COMMIT/ABORT marker of `producer_id` (at `marker_offset`) is replicated in
        `__consumer_offsets-<index>`: its pending offsets become the groups' committed offsets,
        or are dropped. While the partition loads, a marker past what the load reads is kept
        and applied once it is loaded (one the load reads, it applies itself)."""
        load = self._loads.get(partition_index)
        if load is not None and not load.loaded:
            if marker_offset is None or marker_offset >= load.end:
                load.completions.append((producer_id, commit))
            return
        for group_id, offsets in self.pending_txn.complete(partition_index, producer_id, commit).items():
            group = self.consumer_groups.get(group_id) or self.groups.get(group_id)
            if group is not None:
                group.offsets.update(offsets)
        log.info("group.txn_offsets_completed", partition=partition_index, producer_id=producer_id,
                 committed=commit)

    def fetch_offsets(self, group_id: str, tps: list[tuple[str, int]] | None,
                      member_id: str | None = None, member_epoch: int = -1,
                      ) -> tuple[int, dict[tuple[str, int], CommittedOffset | None]]:
        """(error, committed offset per partition — None where nothing is committed).
        `tps` None means every partition the group has committed. OffsetFetch v9+ names the
        member (`member_id`, `member_epoch`), checked in a consumer-protocol group."""
        try:
            cg = self.consumer_groups.get(group_id)
            group = cg or self._group(group_id, create=False)
        except CoordinatorError as exc:
            return exc.code, dict.fromkeys(tps or [])
        code = cg.validate_fetch(member_id, member_epoch) if cg is not None else 0
        if code:
            return code, {}
        stored = group.offsets if group is not None else {}
        if tps is None:
            return 0, dict(stored)
        return 0, {tp: stored.get(tp) for tp in tps}

    # --- offset expiration (offsets.retention.minutes) ------------------------------------
    async def _expiration_loop(self) -> None:
        """Every `offsets.retention.check.interval.ms`, expire offsets and empty groups (Kafka's
        periodic group metadata cleanup)."""
        interval_s = getattr(self.config, "offsets_retention_check_interval_ms", 600_000) / 1000
        while True:
            await trio.sleep(interval_s)
            try:
                await self.expire_offsets()
            except Exception:  # a failed cleanup is retried at the next check (Kafka logs and goes on)
                log.exception("group.offsets_expiration_failed")

    async def expire_offsets(self) -> None:
        """One cleanup: for every loaded partition, decide (broker/group/offset_expiration.py)
        and write the offset and group tombstones as one acks=all batch, then drop from memory
        what is still as decided (a commit or a join meanwhile wins)."""
        count = self._topic.partition_count()
        if not count:
            return
        by_index: dict[int, list[str]] = {}
        for gid in [*self.groups, *self.consumer_groups]:
            by_index.setdefault(partition_for_group(gid, count), []).append(gid)
        for index, group_ids in sorted(by_index.items()):
            load = self._loads.get(index)
            partition = self.replicas.partitions.get((OFFSETS_TOPIC, index))
            if load is None or not load.loaded or partition is None or not partition.is_leader:
                continue
            await self._expire_partition(partition, group_ids)

    async def _expire_partition(self, partition: Partition, group_ids: list[str]) -> None:
        retention_ms = getattr(self.config, "offsets_retention_minutes", 10080) * 60_000
        now = wall_clock_ms()  # commit timestamps are wall-clock times, as in Kafka
        decided: list[tuple[GroupState | ConsumerGroupState, Expiry, dict]] = []
        records: list[tuple[bytes, bytes | None]] = []
        for gid in group_ids:
            group: GroupState | ConsumerGroupState | None = self.consumer_groups.get(gid) or self.groups.get(gid)
            if group is None:
                continue
            pending = self.pending_txn.group_partitions(partition.index, gid)
            if isinstance(group, ConsumerGroupState):
                expiry = expire_consumer(group, now, retention_ms, pending)
            else:
                expiry = expire_classic(group, now, retention_ms, pending,
                                        self._wall_clock(group.state_timestamp_ms))
            if not (expiry.expired or expiry.delete_group):
                continue
            records += [(offset_key(gid, t, p), None) for t, p in expiry.expired]
            if expiry.delete_group:
                records += ([encode_record(gid, r) for r in group.deletion_records()]
                            if isinstance(group, ConsumerGroupState) else [(group_key(gid), None)])
            decided.append((group, expiry, {tp: group.offsets[tp] for tp in expiry.expired}))
        if not records:
            return
        try:
            await append_and_wait(partition, records, COMMIT_TIMEOUT_S)
        except Exception as exc:
            log.warning("group.offsets_expiration_failed", partition=partition.index, error=str(exc))
            return
        for group, expiry, values in decided:
            for tp, value in values.items():
                if group.offsets.get(tp) is value:
                    del group.offsets[tp]
            if expiry.delete_group:
                self._forget(group)
            log.info("group.offsets_expired", group=group.group_id, partitions=len(expiry.expired),
                     group_deleted=expiry.delete_group and not self._serves(group))

    @staticmethod
    def _wall_clock(trio_ms: float | None) -> float | None:
        """A time on trio's clock (the groups' deadlines and state timestamps) as wall-clock ms."""
        return None if trio_ms is None else trio_ms + (wall_clock_ms() - _now_ms())

    def _serves(self, group: GroupState | ConsumerGroupState) -> bool:
        return group is self.consumer_groups.get(group.group_id) or group is self.groups.get(group.group_id)

    def _forget(self, group: GroupState | ConsumerGroupState) -> None:
        """Drop a group whose tombstone was written, unless it gained offsets, members or an open
        transaction meanwhile (those records follow the tombstone in the log)."""
        if not self._serves(group) or group.offsets or group.members:
            return
        if isinstance(group, GroupState) and group.phase is not GroupPhase.EMPTY:
            return
        gid = group.group_id
        if self.pending_txn.group_partitions(self.partition_for(gid), gid):
            return
        if isinstance(group, ConsumerGroupState):
            del self.consumer_groups[gid]
        else:
            group.mark_dead()
            del self.groups[gid]
            self._persisted.pop(gid, None)
        self.timers.set(gid, None)

    # --- admin --------------------------------------------------------------------------
    def describe(self, group_id: str) -> tuple[int, GroupState | None]:
        if group_id in self.share.groups:
            return 0, None  # DescribeGroups: Dead, or from v6 GROUP_ID_NOT_FOUND ("is not a classic group")
        try:
            return 0, self._group(group_id, create=False)
        except CoordinatorError as exc:
            return exc.code, None

    def list_groups(self) -> list[GroupState]:
        return [g for gid, g in self.groups.items() if self._is_served(gid)]

    def list_consumer_groups(self) -> list[ConsumerGroupState]:
        return [g for gid, g in self.consumer_groups.items() if self._is_served(gid)]

    def _is_served(self, group_id: str) -> bool:
        try:
            self._partition(group_id)
            return True
        except CoordinatorError:
            return False

    async def delete_offsets(self, group_id: str, tps: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete: (group error, error per partition). Kafka's rules: an unknown or dead
        group is GROUP_ID_NOT_FOUND; a non-empty group of another protocol NON_EMPTY_GROUP; in a
        non-empty consumer group, a partition of a topic a member subscribes to is
        GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset; the others are deleted (tombstones).
        A KIP-848 group's subscriptions are its members' subscribed topic names."""
        cg = self.consumer_groups.get(group_id)
        try:
            group = cg or self._group(group_id, create=False)
            partition = self._partition(group_id)
        except CoordinatorError as exc:
            return exc.code, {}
        if group is None or (cg is None and group.phase is GroupPhase.DEAD):
            return GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if cg is not None:
            subscribed = cg.subscribed_topics()
        elif group.members:
            if group.protocol_type != PROTOCOL_TYPE:
                return NON_EMPTY_GROUP, {}
            for member in group.members.values():
                for _, metadata in member.protocols:
                    try:
                        subscribed.update(decode_subscription(metadata).topics)
                    except ValueError:
                        continue
        codes = {tp: int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) if tp[0] in subscribed else 0 for tp in tps}
        doomed = [tp for tp, code in codes.items() if code == 0 and tp in group.offsets]
        if doomed:
            try:
                await append_and_wait(partition, [(offset_key(group_id, t, p), None) for t, p in doomed],
                                      COMMIT_TIMEOUT_S)
            except Exception as exc:
                return append_error_code(exc), {}
            for tp in doomed:
                group.offsets.pop(tp, None)
            log.info("group.offsets_deleted", group=group_id, partitions=len(doomed))
        return 0, codes

    async def delete_group(self, group_id: str) -> int:
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            return await self._delete_consumer_group(cg)
        if not group_id:  # as Kafka 4.4: no group has the empty id (not INVALID_GROUP_ID)
            return GROUP_ID_NOT_FOUND
        try:
            group = self._group(group_id, create=False)
            partition = self._partition(group_id)
        except CoordinatorError as exc:
            return exc.code
        if group is None:
            return GROUP_ID_NOT_FOUND
        if group.members:
            return NON_EMPTY_GROUP
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(group_id, t, p), None) for (t, p) in group.offsets]
        records.append((group_key(group_id), None))
        try:
            await append_and_wait(partition, records, COMMIT_TIMEOUT_S)
        except Exception as exc:
            return append_error_code(exc)
        group.mark_dead()
        if self.groups.get(group_id) is group:
            del self.groups[group_id]
            self.timers.set(group_id, None)
        self._persisted.pop(group_id, None)
        log.info("group.deleted", group=group_id)
        return 0


def _topic_meta(topic: TopicImage, brokers: Mapping[int, BrokerRegistration]) -> TopicMeta:
    """A topic of the image (Kafka's `KRaftCoordinatorMetadataImage.partitionRacks`: the rack of
    each replica whose broker is registered with one, sorted in Java's String order)."""
    def racks(p: int) -> tuple[str, ...]:
        partition = topic.partitions.get(p)
        found = [b.rack for r in (partition.replicas if partition is not None else ())
                 if (b := brokers.get(r)) is not None and b.rack is not None]
        return tuple(sorted(found, key=lambda rack: rack.encode("utf-16-be")))
    count = len(topic.partitions)
    per_partition = tuple(racks(p) for p in range(count))
    return TopicMeta(topic.topic_id, topic.name, count, per_partition if any(per_partition) else ())
