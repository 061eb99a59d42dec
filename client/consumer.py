"""AsyncConsumer: manual assignment, positions, long-poll fetches on trio.

    async with AsyncConsumer("127.0.0.1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("events", 0)])
        batches = await consumer.poll(timeout_ms=1000)   # {TopicPartition: [ConsumerRecord]}

`poll` fetches in the caller's task: one Fetch per leader broker, all in
parallel; the first answer that brings records ends the round (the others
are abandoned; their positions did not move, so nothing is lost). Records
fetched but not yet returned wait in a per-partition buffer.

Consumer groups: with a `group_id`, `subscribe(topics or pattern)` joins the
group (client/group_membership.py); `poll()` (re)joins whenever a rebalance is
needed, revoking the old partitions (`on_partitions_revoked`, after an
auto-commit) and starting the new ones from their committed offsets
(`on_partitions_assigned`). With range / roundrobin rebalances are eager: every
partition is revoked before rejoining. As in Kafka's consumer, `poll()` never waits
past its timeout for the group: the join (JoinGroup, SyncGroup) and the auto-commit
before a revocation run in the consumer's nursery and stay in flight across polls (the
callbacks still run in `poll()`), and the periodic auto-commit is asynchronous. With only "cooperative-sticky" they are
cooperative (KIP-429): the join runs in the background while `poll()` keeps
fetching the partitions owned now; when it ends, only the partitions that move
away are revoked (`on_partitions_revoked` gets just those, `on_partitions_assigned`
just the new ones), and a member that gave some up rejoins so the next round can
hand them over. `group_instance_id` makes the member static (KIP-345): close()
does not leave the group, so a restart within the session timeout gets the same
partitions back without a rebalance. Heartbeats run in the consumer's nursery.

`group_protocol="consumer"` (Kafka's `group.protocol`; default "classic" as in Kafka
4.4's Java client) speaks KIP-848 instead (client/consumer_membership.py): the
coordinator assigns (`group_remote_assignor`: "uniform" or "range", None for the
broker's default) and hands out changes through ConsumerGroupHeartbeat at the interval
the broker sets. `poll()` reconciles towards each new target: partitions moving away are
committed (with auto-commit) and revoked first (`on_partitions_revoked` gets just
those), then the new ones start (`on_partitions_assigned` gets just those, possibly
none). A fenced member loses what it held (no commit) and rejoins with epoch 0;
`generation` is the member epoch. `partition_assignment_strategy`,
`session_timeout_ms` and `heartbeat_interval_ms` are classic-only (the broker's group
configs decide them).
`commit()`, `committed()` and auto-commit (subscribe mode, every
`auto_commit_interval_ms`, at close and before a revoke) store offsets at the
group coordinator.

    async with AsyncConsumer(bootstrap, group_id="billing", auto_offset_reset="earliest") as c:
        c.subscribe(["events"])
        while True:
            batches = await c.poll(timeout_ms=1000)
"""

from __future__ import annotations

import functools
import inspect
import re
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import trio

from raftka.client.bootstrap import parse_bootstrap
from raftka.client.cluster import Cluster
from raftka.client.consumer_membership import ConsumerMembership, reconciliation
from raftka.client.errors import (
    NO_ANSWER,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    error_for_code,
)
from raftka.client.fetched_records import decode_fetched
from raftka.client.group_membership import CommitFailedError, GroupMembership, OffsetAndMetadata
from raftka.client.lifecycle import ClusterClient, OwnedNursery
from raftka.client.list_offsets import EARLIEST, LATEST, list_offsets
from raftka.client.protocol import ApiKey, ErrorCode, FetchRequest
from raftka.client.records import ConsumerGroupMetadata, ConsumerRecord, TopicPartition
from raftka.client.sdk_log import get_logger
from raftka.client.security import ClientSecurity

log = get_logger("raftka.client.consumer")

_RESETS = {"earliest": EARLIEST, "latest": LATEST, "none": None}
# Kafka's isolation.level values and their wire numbers (Fetch/ListOffsets isolation_level).
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
# Kafka's group.protocol values.
GROUP_PROTOCOLS = ("classic", "consumer")


async def partitions_by_leader(cluster: Cluster, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
    """Partitions by their leader's node id; partitions without a known leader trigger one
    metadata refresh and are left out if still unknown."""
    tps = list(tps)
    if any(cluster.metadata.leader_for(tp) is None for tp in tps):
        try:
            await cluster.refresh_metadata([tp.topic for tp in tps])
        except NO_ANSWER as exc:
            log.info("consumer.metadata_refresh_failed", error=str(exc))
    out: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        leader = cluster.metadata.leader_for(tp)
        if leader is not None:
            out.setdefault(leader, []).append(tp)
    return out


@dataclass(eq=False)
class _PendingCommit:
    """The auto-commit before a revocation, running in the background: the partitions it covers
    and the offsets it commits."""

    covers: frozenset[TopicPartition]
    offsets: dict[TopicPartition, OffsetAndMetadata]
    done: trio.Event = field(default_factory=trio.Event)

    def serves(self, revoked: set[TopicPartition], consumed: dict[TopicPartition, OffsetAndMetadata]) -> bool:
        """Whether it committed what is consumed now of every partition in `revoked`."""
        return revoked <= self.covers and all(consumed.get(tp) == self.offsets.get(tp) for tp in revoked)


class NoOffsetForPartitionError(KafkaError):
    """A partition has no position and auto_offset_reset is 'none'."""

    name = "NO_OFFSET_FOR_PARTITION"


@dataclass
class _PartitionState:
    position: int | None = None
    reset_to: int | None = None  # EARLIEST/LATEST when a reset is pending
    # A partition the group assigned: its committed offset is still to be fetched (by poll(), as
    # Kafka's updateFetchPositions does; the reset policy applies only if nothing was committed).
    committed_pending: bool = False
    buffer: deque[ConsumerRecord] = field(default_factory=deque)
    high_watermark: int = -1
    last_stable_offset: int = -1  # read_committed only


class AsyncConsumer(ClusterClient):
    _what = "consumer"

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str] = "127.0.0.1:9092",
        *,
        client_id: str = "raftka-consumer",
        group_id: str | None = None,
        auto_offset_reset: str = "latest",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1 << 20,
        fetch_max_bytes: int = 50 << 20,
        isolation_level: str = "read_uncommitted",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        check_crcs: bool = True,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        partition_assignment_strategy: Iterable[str] = ("range", "roundrobin"),
        metadata_max_age_ms: int = 5000,
        group_instance_id: str | None = None,
        group_protocol: str = "classic",
        group_remote_assignor: str | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.security = security
        if group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group_protocol must be 'classic' or 'consumer', got {group_protocol!r}")
        if group_remote_assignor is not None and group_protocol != "consumer":
            raise ValueError("group_remote_assignor needs group_protocol='consumer' "
                             "(classic groups assign on the client: partition_assignment_strategy)")
        self.group_protocol = group_protocol
        self.group_remote_assignor = group_remote_assignor
        if auto_offset_reset not in _RESETS:
            raise ValueError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', got "
                f"{auto_offset_reset!r}")
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(
                f"isolation_level must be 'read_uncommitted' or 'read_committed', got "
                f"{isolation_level!r}")
        self.isolation_level = isolation_level
        self._isolation = ISOLATION_LEVELS[isolation_level]
        parse_bootstrap(bootstrap_servers)  # a bad address is a ValueError here, not in start()
        self._bootstrap = bootstrap_servers
        self.client_id = client_id
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.check_crcs = check_crcs
        self._owner = OwnedNursery()
        self._cluster: Cluster | None = None
        self._state: dict[TopicPartition, _PartitionState] = {}
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.partition_assignment_strategy = tuple(partition_assignment_strategy)
        self.metadata_max_age_ms = metadata_max_age_ms
        self._paused: set[TopicPartition] = set()
        self._group: GroupMembership | None = None
        self._subscription: tuple[str, ...] = ()
        self._pattern: re.Pattern[str] | None = None
        self._on_assigned: Callable | None = None
        self._on_revoked: Callable | None = None
        self._next_auto_commit = 0.0
        self._next_pattern_check = 0.0
        self.group_instance_id = group_instance_id
        # A cooperative join running in the background, and what it ended with.
        self._join_scope: trio.CancelScope | None = None
        self._join_outcome: list[TopicPartition] | BaseException | None = None
        self._applying = False  # a new assignment is being applied (callbacks included)
        self._commit_lock = trio.Lock()
        self._auto_committing = False  # a periodic auto-commit is out (in the background)
        self._revoke_commit: _PendingCommit | None = None  # the commit before a revocation, while out

    # --- lifecycle -------------------------------------------------------
    async def start(self) -> None:
        # Fetches may long-poll: give each request its wait on top of the timeout.
        await self._open_cluster(self.request_timeout_ms + self.fetch_max_wait_ms)

    async def close(self) -> None:
        """Commit (with auto-commit), leave the group, close every connection."""
        self._cancel_background_join()
        try:
            if self._group is not None and self._cluster is not None:
                with trio.move_on_after(self.request_timeout_ms / 1000):
                    if self.enable_auto_commit and self._group.generation_id >= 0:
                        await self._commit_quietly()
                    await self._group.leave()
        finally:
            # Runs even when the caller is being cancelled: the nursery must be exited here.
            self._group = None
            await self._close_cluster()

    # --- assignment & positions ------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions (replacing any earlier assignment).
        Partitions kept from the old assignment keep their positions. With a `group_id`, a new
        partition starts at the group's committed offset (the reset policy only if nothing was
        committed), as Kafka's consumer does; `seek*()` overrides it."""
        tps = [TopicPartition(*tp) for tp in partitions]
        old = self._state
        self._state = {tp: old.get(tp) or _PartitionState(committed_pending=bool(self.group_id)) for tp in tps}
        cluster = self._require_cluster()
        cluster.topics.update(tp.topic for tp in tps)

    def assignment(self) -> set[TopicPartition]:
        return set(self._state)

    def _partition_state(self, tp: TopicPartition) -> _PartitionState:
        try:
            return self._state[tp]
        except KeyError:
            raise IllegalStateError(
                f"{tp} is not assigned; assigned: {sorted(self._state)}") from None

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch `tp` from `offset` next."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        state = self._partition_state(TopicPartition(*tp))
        state.position, state.reset_to, state.committed_pending = offset, None, False
        state.buffer.clear()

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps or list(self._state):
            state = self._partition_state(TopicPartition(*tp))
            state.reset_to, state.position, state.committed_pending = EARLIEST, None, False
            state.buffer.clear()

    def seek_to_end(self, *tps: TopicPartition) -> None:
        for tp in tps or list(self._state):
            state = self._partition_state(TopicPartition(*tp))
            state.reset_to, state.position, state.committed_pending = LATEST, None, False
            state.buffer.clear()

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record `poll` will return for `tp`."""
        tp = TopicPartition(*tp)
        state = self._partition_state(tp)
        if state.position is None:
            await self._update_positions([tp], self.request_timeout_ms / 1000)
        assert state.position is not None
        return state.buffer[0].offset if state.buffer else state.position

    def highwater(self, tp: TopicPartition) -> int:
        """The high watermark seen in the last fetch of `tp` (-1 before any)."""
        return self._partition_state(TopicPartition(*tp)).high_watermark

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._list_offsets(list(tps), EARLIEST)

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._list_offsets(list(tps), LATEST)

    async def _update_positions(self, tps: list[TopicPartition], timeout: float) -> None:
        """Positions for `tps` (none yet): the group's committed offsets for those it assigned,
        then the reset policy for the rest (Kafka's updateFetchPositions). Each lookup is retried
        for `timeout` seconds (at least once); then KafkaTimeoutError or the last retriable error."""
        pending = [tp for tp in tps if self._state[tp].committed_pending]
        if pending:  # assigned by the group, or by assign() with a group_id
            committed = await self._require_group().fetch_offsets(pending, timeout)
            for tp, om in committed.items():
                state = self._state.get(tp)
                if state is None or not state.committed_pending:
                    continue  # revoked or seeked meanwhile
                state.committed_pending = False
                if om is not None:
                    state.position, state.reset_to = om.offset, None
        unset = [tp for tp in tps if tp in self._state and self._state[tp].position is None
                 and not self._state[tp].committed_pending]
        if unset:
            await self._reset_positions(unset, timeout)

    async def _reset_positions(self, tps: list[TopicPartition], timeout: float) -> None:
        by_target: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            state = self._state[tp]
            target = state.reset_to
            if target is None:
                target = _RESETS[self.auto_offset_reset]
                if target is None:
                    raise NoOffsetForPartitionError(
                        f"{tp.topic}/{tp.partition} has no position and auto_offset_reset "
                        "is 'none'; call seek() first")
            by_target.setdefault(target, []).append(tp)
        for target, group in by_target.items():
            offsets = await self._list_offsets(group, target, timeout)
            for tp, offset in offsets.items():
                state = self._state.get(tp)
                if state is not None and state.position is None:
                    state.position, state.reset_to = offset, None

    async def _list_offsets(self, tps: list[TopicPartition], timestamp: int, timeout: float | None = None,
                            ) -> dict[TopicPartition, int]:
        return await list_offsets(self._require_cluster(), {tp: timestamp for tp in tps},
                                  timeout=self.request_timeout_ms / 1000 if timeout is None else timeout,
                                  isolation_level=self._isolation)

    async def _group_by_leader(self, tps: Iterable[TopicPartition]
                               ) -> dict[int, list[TopicPartition]]:
        return await partitions_by_leader(self._require_cluster(), tps)

    # --- polling ---------------------------------------------------------
    async def poll(self, timeout_ms: float = 0, max_records: int | None = None,
                   ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, waiting up to `timeout_ms` for
        some to arrive; {} if none did. Raises OffsetOutOfRangeError when a
        position is out of range and auto_offset_reset is 'none'."""
        cluster = self._require_cluster()
        deadline = trio.current_time() + timeout_ms / 1000
        while True:
            if self._group is not None and not await self._group_maintenance(deadline):
                return {}  # a commit before a revocation is still out: nothing until it ends
            ready = self._drain_buffers(max_records)
            if ready:
                return ready
            if not self._state:
                if self._group is None:
                    await trio.sleep_until(deadline)
                    return {}
                # Waiting for an assignment: look again soon (a rejoin may be due or done).
                if trio.current_time() >= deadline:
                    return {}
                await trio.sleep(min(0.05, max(0.0, deadline - trio.current_time())))
                continue
            unset = [tp for tp, s in self._state.items() if s.position is None]
            if unset:
                try:
                    await self._update_positions(unset, max(0.0, deadline - trio.current_time()))
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
                    # No answer in this poll's time (the cluster may be down): Kafka's poll goes on
                    # with the partitions that have a position and looks again at the next round.
                    log.info("consumer.positions_unknown", partitions=len(unset), error=str(exc))
            remaining_ms = max(0, int((deadline - trio.current_time()) * 1000))
            try:
                got = await self._fetch_round(min(self.fetch_max_wait_ms, remaining_ms))
            except NO_ANSWER as exc:
                log.info("consumer.fetch_failed", error=str(exc))
                got = False
                await cluster.refresh_metadata_if_reachable()
                await trio.sleep(min(self.retry_backoff_ms / 1000,
                                     max(0.0, deadline - trio.current_time())))
            if not got and trio.current_time() >= deadline:
                return self._drain_buffers(max_records)

    def _drain_buffers(self, max_records: int | None) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        budget = max_records if max_records is not None else 1 << 62
        for tp, state in self._state.items():
            if budget <= 0:
                break
            if not state.buffer or tp in self._paused:
                continue
            taken: list[ConsumerRecord] = []
            while state.buffer and budget > 0:
                taken.append(state.buffer.popleft())
                budget -= 1
            out[tp] = taken
        return out

    async def _fetch_round(self, max_wait_ms: int) -> bool:
        """One parallel fetch to every leader; True if any records arrived."""
        fetchable = [tp for tp, s in self._state.items()
                     if s.position is not None and not s.buffer and tp not in self._paused]
        by_node = await self._group_by_leader(fetchable)
        if not by_node:
            await trio.sleep(min(self.retry_backoff_ms, max_wait_ms) / 1000)
            return False
        got = False
        errors: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            async def fetch_one(node_id: int, tps: list[TopicPartition]) -> None:
                nonlocal got
                try:
                    if await self._fetch_from(node_id, tps, max_wait_ms):
                        got = True
                        nursery.cancel_scope.cancel()
                except KafkaError as exc:
                    errors.append(exc)
                    nursery.cancel_scope.cancel()

            for node_id, tps in by_node.items():
                nursery.start_soon(fetch_one, node_id, tps)
        for exc in errors:
            if not isinstance(exc, NO_ANSWER):
                raise exc
        if errors and not got:
            raise errors[0]
        return got

    async def _fetch_from(self, node_id: int, tps: list[TopicPartition], max_wait_ms: int,
                          ) -> bool:
        cluster = self._require_cluster()
        topics: dict[str, list[dict]] = {}
        positions: dict[TopicPartition, int] = {}
        for tp in tps:
            position = self._state[tp].position
            assert position is not None
            positions[tp] = position
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition, "fetch_offset": position,
                "partition_max_bytes": self.max_partition_fetch_bytes})
        request = FetchRequest(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes, isolation_level=self._isolation,
            topics=[{"topic": t, "partitions": p} for t, p in topics.items()])
        response = await cluster.send_to(node_id, ApiKey.FETCH, request)
        if response.error_code:
            raise error_for_code(response.error_code, f"Fetch from broker {node_id}")
        got = False
        stale: list[TopicPartition] = []
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                state = self._state.get(tp)
                if state is None or state.position != positions.get(tp):
                    continue  # unassigned or seeked while the fetch was out
                if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._out_of_range(tp, state, positions[tp])
                    continue
                if p.error_code:
                    error = error_for_code(p.error_code, f"fetching {tp.topic}/{tp.partition}")
                    if error.invalid_metadata or error.retriable:
                        stale.append(tp)
                        continue
                    raise error
                state.high_watermark = p.high_watermark
                aborted = None
                if self._isolation:
                    # Markers and aborted transactions are skipped; the list is null when
                    # the broker has none to report.
                    aborted = [(a.producer_id, a.first_offset)
                               for a in (p.aborted_transactions or ())]
                    state.last_stable_offset = p.last_stable_offset
                fetched = decode_fetched(tp.topic, tp.partition, p.records, positions[tp],
                                         verify_crc=self.check_crcs, aborted=aborted)
                if fetched.records:
                    state.buffer.extend(fetched.records)
                    got = True
                state.position = fetched.next_offset
                if not fetched.records and fetched.partial_batch and p.records is not None \
                        and len(p.records) >= self.max_partition_fetch_bytes:
                    # Kafka returns at least one whole batch; a batch larger than
                    # the limit would stall us forever, so say so.
                    log.warning("consumer.batch_larger_than_fetch_limit", topic=tp.topic,
                                partition=tp.partition, limit=self.max_partition_fetch_bytes)
        if stale:
            cluster.mark_leader_unknown(stale)
        return got

    def _out_of_range(self, tp: TopicPartition, state: _PartitionState, offset: int) -> None:
        target = _RESETS[self.auto_offset_reset]
        if target is None:
            raise OffsetOutOfRangeError(
                f"offset {offset} of {tp.topic}/{tp.partition} is out of range and "
                "auto_offset_reset is 'none'")
        log.info("consumer.offset_reset", topic=tp.topic, partition=tp.partition,
                 out_of_range=offset, reset=self.auto_offset_reset)
        state.position, state.reset_to = None, target

    # --- pause / resume --------------------------------------------------
    def pause(self, *tps: TopicPartition) -> None:
        """Stop fetching and returning records of these assigned partitions (positions kept)."""
        for tp in tps:
            self._partition_state(TopicPartition(*tp))
            self._paused.add(TopicPartition(*tp))

    def resume(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._paused.discard(TopicPartition(*tp))

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    # --- consumer groups -------------------------------------------------
    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | None = None,
                  on_partitions_assigned: Callable | None = None,
                  on_partitions_revoked: Callable | None = None) -> None:
        """Consume `topics` (or every topic matching the regex `pattern`) as a member of
        `group_id`. The partitions arrive at the next `poll()`. Callbacks get a set of
        TopicPartition and may be plain functions or coroutines."""
        if not self.group_id:
            raise IllegalStateError("subscribe() needs a group_id; use assign() without one")
        topics = tuple(sorted(set([topics] if isinstance(topics, str) else topics)))
        if bool(topics) == bool(pattern):
            raise ValueError(f"subscribe() takes topics or a pattern, got topics={topics!r} "
                             f"pattern={pattern!r}")
        cluster = self._require_cluster()
        self._subscription = topics
        self._pattern = re.compile(pattern) if pattern else None
        self._on_assigned, self._on_revoked = on_partitions_assigned, on_partitions_revoked
        cluster.topics.update(topics)
        if self._group is None and self.group_protocol == "consumer":
            member = ConsumerMembership(
                cluster, self.group_id, remote_assignor=self.group_remote_assignor,
                rebalance_timeout_ms=self.max_poll_interval_ms, retry_backoff_ms=self.retry_backoff_ms,
                request_timeout_ms=self.request_timeout_ms, group_instance_id=self.group_instance_id)
            member.attach(lambda: self._subscription, lambda: tuple(self._state))
            self._start_group(member)
        elif self._group is None:
            self._start_group(GroupMembership(
                cluster, self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.max_poll_interval_ms,
                heartbeat_interval_ms=self.heartbeat_interval_ms,
                assignors=self.partition_assignment_strategy,
                retry_backoff_ms=self.retry_backoff_ms, request_timeout_ms=self.request_timeout_ms,
                group_instance_id=self.group_instance_id))
        assert self._group is not None
        self._group.request_rejoin("subscription changed")
        self._next_pattern_check = 0.0

    def _start_group(self, group: GroupMembership) -> None:
        group.require_stable = self._isolation == 1
        self._group = group
        assert self._owner.nursery is not None
        self._owner.nursery.start_soon(group.heartbeat_loop)

    def subscription(self) -> set[str]:
        return set(self._subscription)

    @property
    def generation(self) -> int | None:
        """The group generation this member last joined (None outside a group or before a join)."""
        if self._group is None or self._group.generation_id < 0:
            return None
        return self._group.generation_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation and member id, for a transactional producer's
        `send_offsets_to_transaction` (KIP-447). Needs a group_id."""
        if self.group_id is None:
            raise IllegalStateError("group_metadata() needs a consumer with a group_id")
        group = self._group
        if group is None:
            return ConsumerGroupMetadata(self.group_id, -1, "", self.group_instance_id)
        return ConsumerGroupMetadata(self.group_id, group.generation_id, group.member_id,
                                     self.group_instance_id)

    @property
    def rebalance_in_progress(self) -> bool:
        """True while this member is (re)joining its group. A cooperative member keeps
        consuming what it owns meanwhile; an eager one owns nothing until the join ends."""
        group = self._group
        return group is not None and (group.joining or group.needs_rejoin or self._join_scope is not None
                                      or self._join_outcome is not None or self._applying)

    async def unsubscribe(self) -> None:
        """Leave the group and drop every partition."""
        self._cancel_background_join()
        if self._group is not None:
            await self._revoke()
            await self._group.leave()
            self._group.needs_rejoin = False
        self._subscription, self._pattern = (), None
        self._state = {}

    def _require_group(self) -> GroupMembership:
        if self._group is None:
            if not self.group_id:
                raise IllegalStateError("offsets are stored per group: set group_id")
            self._group = GroupMembership(self._require_cluster(), self.group_id,
                                          retry_backoff_ms=self.retry_backoff_ms,
                                          request_timeout_ms=self.request_timeout_ms)
            self._group.require_stable = self._isolation == 1
            self._group.needs_rejoin = False  # an assign() consumer commits without joining
        return self._group

    async def _group_maintenance(self, deadline: float) -> bool:
        """A poll()'s group work, waiting no later than `deadline` (the poll's timeout): joins and
        the commits before a revocation run in the background and go on across polls, as Kafka's
        JoinGroup and commit futures do. False while a commit before a revocation is out (poll()
        then returns nothing: what it would return may be revoked once the commit ends)."""
        group = self._group
        assert group is not None
        now = trio.current_time()
        if self._pattern is not None and now >= self._next_pattern_check:
            self._next_pattern_check = now + self.metadata_max_age_ms / 1000
            try:
                matched = await self._pattern_topics()
            except NO_ANSWER as exc:  # no broker answers: the subscription stays as it is until the next check
                log.info("consumer.pattern_check_failed", group=self.group_id, error=str(exc))
                matched = self._subscription
            if matched != self._subscription:
                self._subscription = matched
                group.request_rejoin("topics matching the pattern changed")
        if group.fatal is not None:
            raise group.fatal
        if isinstance(group, ConsumerMembership):
            settled = await self._reconcile(group, deadline)
        else:
            settled = await self._classic_maintenance(group, deadline)
        if (settled and self.enable_auto_commit and now >= self._next_auto_commit and group.generation_id >= 0
                and not group.joining and not self._auto_committing):
            # Kafka's auto-commit in poll() is asynchronous: a coordinator that does not answer
            # must not hold the poll past its timeout.
            self._next_auto_commit = now + self.auto_commit_interval_ms / 1000
            self._auto_committing = True
            self._background(self._auto_commit)
        return settled

    def _background(self, fn: Callable[[], Awaitable[object]]) -> None:
        assert self._owner.nursery is not None
        self._owner.nursery.start_soon(fn)

    async def _auto_commit(self) -> None:
        try:
            await self._commit_quietly()
        finally:
            self._auto_committing = False

    async def _pattern_topics(self) -> tuple[str, ...]:
        cluster = self._require_cluster()
        assert self._pattern is not None
        metadata = await cluster.refresh_metadata(all_topics=True)
        return tuple(sorted(t for t in metadata.topics
                            if self._pattern.fullmatch(t) and not t.startswith("__")))

    # --- the consumer protocol (KIP-848) ---------------------------------------------
    async def _reconcile(self, group: ConsumerMembership, deadline: float) -> bool:
        """Move towards the coordinator's target: commit (auto-commit) and revoke what moves
        away, then start what is new, then let the next heartbeat report it. False while the
        commit before the revocation is out at `deadline`."""
        if group.ownership_lost:
            await self._lose_partitions(group)
        target = group.target
        if target is None:
            return True
        self._applying = True
        try:
            revoked, added = reconciliation(self._state, target)
            if revoked:
                if not await self._committed_before_revoke(group, revoked, deadline):
                    return False
                await self._callback(self._on_revoked, revoked)
                self._state = {tp: s for tp, s in self._state.items() if tp not in revoked}
                self._paused -= revoked
            if group.ownership_lost or group.target is not target:
                return True  # fenced, or a newer target arrived meanwhile: start over at the next poll
            self._install_assignment(sorted(target))
            log.info("consumer.reconciled", group=self.group_id, epoch=group.generation_id,
                     added=len(added), revoked=len(revoked), owned=len(target))
            await self._callback(self._on_assigned, set(added))
            if group.target is target:
                group.reconciled()
            return True
        finally:
            self._applying = False

    async def _committed_before_revoke(self, group: GroupMembership, revoked: set[TopicPartition],
                                       deadline: float) -> bool:
        """With auto-commit, commit the consumed offsets of `revoked` before they go (Kafka's
        onJoinPrepare and reconciliation do). The commit runs in the background and goes on
        across polls; True once it ended (done or failed), False while it is out at `deadline`."""
        if not (self.enable_auto_commit and group.generation_id >= 0):
            return True
        while True:
            pending = self._revoke_commit
            if pending is None:
                consumed = self._consumed_offsets()
                offsets = {tp: consumed[tp] for tp in revoked if tp in consumed}
                pending = self._revoke_commit = _PendingCommit(frozenset(revoked), offsets)
                self._background(functools.partial(self._commit_for_revoke, offsets, pending))
            with trio.move_on_at(deadline):
                await pending.done.wait()
            if not pending.done.is_set():
                return False
            self._revoke_commit = None
            if pending.serves(revoked, self._consumed_offsets()):
                return True

    async def _commit_for_revoke(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                                 pending: _PendingCommit) -> None:
        try:
            await self.commit(offsets)
        except KafkaError as exc:
            log.info("consumer.auto_commit_failed", group=self.group_id, error=str(exc))
        finally:
            pending.done.set()

    def _install_assignment(self, assigned: list[TopicPartition]) -> None:
        """Own exactly `assigned`: kept partitions keep their positions, new ones start from
        the group's committed offsets (or the reset policy), which poll() fetches: a cluster
        that is down now does not fail the assignment (Kafka fetches them in poll() too)."""
        old = self._state
        self._state = {tp: old.get(tp) or _PartitionState(committed_pending=True) for tp in assigned}
        self._paused &= set(assigned)
        self._require_cluster().topics.update(tp.topic for tp in assigned)

    # --- classic groups: eager and cooperative (KIP-429) rebalancing ---------------------
    async def _classic_maintenance(self, group: GroupMembership, deadline: float) -> bool:
        """Apply a join that ended; start one that is needed. The join runs in the background
        (its JoinGroup and SyncGroup go on across polls, as Kafka's join future does), so a
        coordinator that does not answer holds no poll() past its timeout. An eager member
        first commits (with auto-commit) and revokes everything: poll() waits for that commit
        until `deadline` and returns False while it is out."""
        if group.ownership_lost:
            await self._lose_partitions(group)
        if self._join_outcome is not None:
            outcome = self._join_outcome
            if isinstance(outcome, BaseException):
                self._join_outcome = None
                raise outcome
            self._applying = True
            try:
                if not await self._apply_assignment(group, outcome, deadline):
                    return False
                self._join_outcome = None
            finally:
                self._applying = False
        if group.needs_rejoin and self._join_scope is None and (self._subscription or self._pattern is not None):
            if not group.cooperative and self._state:
                self._applying = True
                try:
                    if not await self._committed_before_revoke(group, set(self._state), deadline):
                        return False
                    await self._revoke_all(group)
                finally:
                    self._applying = False
            self._join_scope = trio.CancelScope()
            self._background(functools.partial(self._background_join, group, self._join_scope))
        return True

    async def _revoke_all(self, group: GroupMembership) -> None:
        """An eager rebalance gives up everything before it joins."""
        revoked, self._state, self._paused = set(self._state), {}, set()
        group.ownership_lost = False  # everything is revoked anyway
        await self._callback(self._on_revoked, revoked)

    async def _background_join(self, group: GroupMembership, scope: trio.CancelScope) -> None:
        outcome: list[TopicPartition] | BaseException | None
        with scope:
            try:
                outcome = await group.ensure_active(self._subscription, self._partition_counts,
                                                    owned=lambda: tuple(self._state))
            except Exception as exc:
                if isinstance(exc, KafkaError) and exc.retriable:
                    # No answer in time (the cluster may be down): join again, as Kafka's poll does.
                    log.info("consumer.join_failed", group=self.group_id, error=str(exc))
                    await trio.sleep(group.retry_backoff)
                    group.request_rejoin(f"the join failed: {exc}")
                    outcome = None
                else:
                    outcome = exc  # handed to poll(), which raises it to the application
            if self._join_scope is scope:
                self._join_outcome = outcome
        if self._join_scope is scope:
            self._join_scope = None

    def _cancel_background_join(self) -> None:
        if self._join_scope is not None:
            self._join_scope.cancel()
            self._join_scope = None
        self._join_outcome = None

    async def _lose_partitions(self, group: GroupMembership) -> None:
        """The group went on without us: what we hold may be another member's already, so it
        is given up without a commit (Kafka's onPartitionsLost; ours calls on_partitions_revoked)."""
        group.ownership_lost = False
        if self._state:
            lost = set(self._state)
            log.info("consumer.partitions_lost", group=self.group_id, partitions=len(lost))
            self._state = {}
            self._paused.clear()
            await self._callback(self._on_revoked, lost)

    async def _apply_assignment(self, group: GroupMembership, assigned: list[TopicPartition],
                                deadline: float) -> bool:
        """Own what the join assigned. Cooperatively, what moves away is committed (with
        auto-commit) and revoked first: False while that commit is out at `deadline`. An eager
        member owns nothing here (it revoked everything before joining)."""
        if group.ownership_lost:  # reset during the join: nothing held before is ours any more
            await self._lose_partitions(group)
        old = self._state
        keep = set(assigned)
        revoked = set(old) - keep
        added = [tp for tp in assigned if tp not in old]
        if revoked:
            if not await self._committed_before_revoke(group, revoked, deadline):
                return False
            await self._callback(self._on_revoked, revoked)
        self._install_assignment(assigned)
        self._next_auto_commit = trio.current_time() + self.auto_commit_interval_ms / 1000
        log.info("consumer.assignment", group=self.group_id, generation=group.generation_id,
                 kept=len(keep) - len(added), added=len(added), revoked=len(revoked))
        await self._callback(self._on_assigned, set(added))
        if revoked:
            # KIP-429's second round: now that they are released, the leader can hand them over.
            group.request_rejoin(f"revoked {len(revoked)} partition(s) that move to other members")
        return True

    async def _revoke(self) -> None:
        """unsubscribe(): commit (with auto-commit) and revoke what is owned, waiting for the commit."""
        if not self._state:
            return
        group = self._group
        if self.enable_auto_commit and group is not None and group.generation_id >= 0:
            await self._commit_quietly()
        await self._callback(self._on_revoked, set(self._state))

    @staticmethod
    async def _callback(callback: Callable | None, tps: set[TopicPartition]) -> None:
        if callback is None:
            return
        result = callback(tps)
        if inspect.isawaitable(result):
            await result

    async def _partition_counts(self, topics: list[str]) -> dict[str, int]:
        cluster = self._require_cluster()
        await cluster.refresh_metadata(topics)
        return {t: len(cluster.metadata.partitions_for(t) or []) for t in topics}

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        out = {}
        for tp, state in self._state.items():
            if state.position is not None:
                out[tp] = OffsetAndMetadata(state.buffer[0].offset if state.buffer else state.position)
        return out

    async def _commit_quietly(self) -> None:
        try:
            await self.commit()
        except KafkaError as exc:
            log.info("consumer.auto_commit_failed", group=self.group_id, error=str(exc))

    async def commit(self, offsets: dict[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """Store `offsets` (default: the position of every assigned partition, i.e. everything
        `poll()` returned) as the group's committed offsets. Raises CommitFailedError when the
        group rebalanced meanwhile (the partitions may be another member's now)."""
        group = self._require_group()
        # One commit at a time (auto-commits run in the background): a later one never lands
        # first. Waiting for the one out counts towards this one's request_timeout_ms.
        with trio.move_on_after(self.request_timeout_ms / 1000) as bounded:
            async with self._commit_lock:
                if offsets is None:
                    chosen = self._consumed_offsets()
                else:
                    chosen = {TopicPartition(*tp): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(o)
                              for tp, o in offsets.items()}
                await group.commit(chosen, as_member=self._subscription != () or self._pattern is not None)
        if bounded.cancelled_caught:
            raise KafkaTimeoutError(f"group {self.group_id!r}: the commit did not end within "
                                    f"request_timeout_ms ({self.request_timeout_ms} ms)")

    def commit_async(self, offsets: dict[TopicPartition, int | OffsetAndMetadata] | None = None,
                     callback: Callable[[dict, BaseException | None], None] | None = None) -> None:
        """Start a commit in the background; `callback(offsets, error)` runs when it ends."""
        snapshot = dict(offsets) if offsets is not None else self._consumed_offsets()

        async def run() -> None:
            error: BaseException | None = None
            try:
                await self.commit(snapshot)
            except KafkaError as exc:
                error = exc
                log.info("consumer.commit_async_failed", group=self.group_id, error=str(exc))
            if callback is not None:
                callback(snapshot, error)

        assert self._owner.nursery is not None
        self._owner.nursery.start_soon(run)

    async def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset for `tp` (None if nothing was committed)."""
        tp = TopicPartition(*tp)
        result = await self._require_group().fetch_offsets([tp])
        om = result.get(tp)
        return om.offset if om is not None else None


__all__ = ["AsyncConsumer", "CommitFailedError", "NoOffsetForPartitionError", "OffsetAndMetadata"]
