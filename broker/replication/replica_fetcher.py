"""Followers fetch from leaders: one fetcher task per source broker, multiplexing partitions.

A partition handed to a fetcher first truncates its log to the leader's by
leader epoch (OffsetForLeaderEpoch, Kafka's KIP-101/279 rule — never by high
watermark alone, unless the log carries no epochs at all), then fetches with
`replica_id` = this broker and the current leader epoch, appends the leader's
batches unchanged (`append_as_follower`), and takes the leader's high
watermark. A partition whose fetch fails (the leader's metadata is behind,
our epoch is stale, ...) backs off on its own; the others keep fetching.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
import trio

from raftka.broker.net.tls import inter_broker_security
from raftka.broker.replication.fetch_session_state import FINAL_EPOCH, INITIAL_EPOCH, next_epoch
from raftka.client.connection import BrokerConnection
from raftka.client.errors import KafkaConnectionError, KafkaTimeoutError
from raftka.client.protocol import ApiKey, ErrorCode
from raftka.log.errors import LogError
from raftka.log.partition_log import OffsetsNotContiguous

log = structlog.get_logger("broker.replica_fetcher")

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 10 * 1024 * 1024
PARTITION_MAX_BYTES = 1024 * 1024
BACKOFF_S = 0.2
UNDEFINED_EPOCH = -1



@dataclass(eq=False)
class _FetchState:
    partition: object  # broker.partition.Partition (avoid an import cycle)
    needs_truncation: bool = True
    retry_at: float = 0.0  # trio clock; the partition sits out fetches until then
    leader_high_watermark: int = -1  # from the last fetch answer: caught up = our log end reaches it


class ReplicaFetcherManager:
    def __init__(self, replicas) -> None:
        self.replicas = replicas
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._by_partition: dict[tuple[str, int], ReplicaFetcher] = {}
        self._nursery: trio.Nursery | None = None
        self._pending: list[tuple[object, bool]] = []

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for partition, restart in self._pending:
                self.add(partition, restart=restart)
            self._pending.clear()
            task_status.started()
            await trio.sleep_forever()

    def add(self, partition, *, restart: bool) -> None:
        """Fetch `partition` from its current leader (truncating first when `restart`)."""
        if self._nursery is None:
            self._pending.append((partition, restart))
            return
        current = self._by_partition.get(partition.key)
        if current is not None and current.leader_id == partition.leader:
            current.add(partition, restart=restart)
            return
        if current is not None:
            current.remove(partition)
        fetcher = self._fetchers.get(partition.leader)
        if fetcher is None:
            fetcher = self._fetchers[partition.leader] = ReplicaFetcher(self.replicas, partition.leader)
            self._nursery.start_soon(fetcher.run)
        fetcher.add(partition, restart=True)
        self._by_partition[partition.key] = fetcher

    def remove(self, partition) -> None:
        self._pending = [(p, r) for p, r in self._pending if p is not partition]
        fetcher = self._by_partition.pop(partition.key, None)
        if fetcher is not None:
            fetcher.remove(partition)


class ReplicaFetcher:
    def __init__(self, replicas, leader_id: int) -> None:
        self.replicas = replicas
        self.leader_id = leader_id
        self.node_id = replicas.node_id
        self.states: dict[tuple[str, int], _FetchState] = {}
        self._changed = trio.Event()
        self._sessions_supported = True
        self._reset_session()

    def add(self, partition, *, restart: bool) -> None:
        state = self.states.get(partition.key)
        if state is None or state.partition is not partition:
            self.states[partition.key] = _FetchState(partition)
        else:
            state.retry_at = 0.0
            state.needs_truncation = state.needs_truncation or restart
        self._changed.set()

    def remove(self, partition) -> None:
        self.states.pop(partition.key, None)

    def _mine(self) -> list[_FetchState]:
        return [s for s in self.states.values() if s.partition.leader == self.leader_id]

    def _active(self) -> list[_FetchState]:
        now = trio.current_time()
        return [s for s in self._mine() if s.retry_at <= now]

    async def _wait_for_work(self) -> None:
        self._changed = trio.Event()
        waiting = self._mine()
        with trio.move_on_at(min((s.retry_at for s in waiting), default=float("inf"))):
            await self._changed.wait()

    async def run(self) -> None:
        while True:
            if not self._active():
                await self._wait_for_work()
                continue
            endpoint = self.replicas.leader_endpoint(self.leader_id)
            if endpoint is None:
                await trio.sleep(BACKOFF_S)
                continue
            async with trio.open_nursery() as nursery:
                # Errors are caught inside the nursery: leaving it would wrap them in an ExceptionGroup.
                try:
                    conn = await BrokerConnection.connect(
                        nursery, endpoint[0], endpoint[1], client_id=f"raftka-replica-{self.node_id}",
                        request_timeout=FETCH_MAX_WAIT_MS / 1000.0 + 10.0, node_id=self.leader_id,
                        security=inter_broker_security(self.replicas.config))
                    self._reset_session()  # a session lives as long as its connection
                    self._sessions_supported = True
                    try:
                        await self._fetch_loop(conn)
                    finally:
                        await conn.aclose()
                except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
                    log.info("replica_fetcher.connection_failed", leader=self.leader_id, error=str(exc))
                    await trio.sleep(BACKOFF_S)
                nursery.cancel_scope.cancel()

    async def _fetch_loop(self, conn: BrokerConnection) -> None:
        while True:
            active = self._active()
            if not active:
                if not self._mine():
                    return
                await self._wait_for_work()
                continue
            to_truncate = [s for s in active if s.needs_truncation]
            if to_truncate:
                await self._truncate(conn, to_truncate)
                continue
            ready = self._unthrottled(active)
            if not ready:  # every partition waits for the follower quota (KIP-73)
                self._changed = trio.Event()
                with trio.move_on_after(BACKOFF_S):
                    await self._changed.wait()
                continue
            await self._fetch(conn, ready)

    def _unthrottled(self, states: list[_FetchState]) -> list[_FetchState]:
        """The partitions the next fetch asks for: Kafka's `shouldFollowerThrottle` leaves out
        the throttled ones not caught up while follower.replication.throttled.rate is exceeded."""
        quotas, image, now = self.replicas.quotas, self.replicas.image, trio.current_time()
        return [s for s in states if not quotas.follower_throttles(
            image, s.partition.topic, s.partition.index,
            0 <= s.leader_high_watermark <= s.partition.log.log_end_offset, now)]

    async def _truncate(self, conn: BrokerConnection, states: list[_FetchState]) -> None:
        by_topic: dict[str, list[dict]] = {}
        asked_at = {s.partition.key: s.partition.leader_epoch for s in states}  # the request's epochs
        for s in states:
            p = s.partition
            by_topic.setdefault(p.topic, []).append({
                "partition": p.index, "current_leader_epoch": p.leader_epoch,
                "leader_epoch": p.log.epoch_cache.latest_epoch})
        response = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, {
            "replica_id": self.node_id,
            "topics": [{"topic": t, "partitions": parts} for t, parts in by_topic.items()]})
        for topic in response.topics:
            for result in topic.partitions:
                state = self.states.get((topic.topic, result.partition))
                if state is None:
                    continue
                epoch = asked_at.get(state.partition.key)
                if epoch is None:
                    continue  # an answer for a partition we did not ask about
                if result.error_code:
                    self._back_off(state, result.error_code, "offset_for_leader_epoch")
                    continue
                await self._apply_truncation(state, result.leader_epoch, result.end_offset, epoch)

    async def _apply_truncation(self, state: _FetchState, leader_epoch: int, leader_end: int,
                                asked_at: int) -> None:
        p = state.partition
        requested = p.log.epoch_cache.latest_epoch
        leo = p.log.log_end_offset
        if requested == UNDEFINED_EPOCH or leader_epoch == UNDEFINED_EPOCH:
            target = min(p.high_watermark, leo)  # no epochs to compare: Kafka's fallback
        elif leader_epoch < requested:
            # The leader never saw our latest epoch: keep only what our log has of its epoch.
            _, our_end = p.log.epoch_cache.end_offset_for_epoch(leader_epoch, leo)
            target = min(leader_end, our_end if our_end >= 0 else leo)
        else:
            target = min(leader_end, leo)
        # In a worker thread under the partition's lock (replica_manager.truncate), which
        # refuses it if the partition's leader epoch moved since we asked (this node may even
        # lead now), as Kafka's fetcher drops such answers; the partition then asks again.
        if await self.replicas.truncate(p, max(target, p.log.log_start_offset), asked_at):
            state.needs_truncation = False

    def _reset_session(self) -> None:
        """Start a new fetch session with the next request (a new connection, or the leader lost ours)."""
        self._session_id = 0
        self._session_epoch = INITIAL_EPOCH
        self._session_known: dict[tuple[str, int], tuple[int, int, int]] = {}

    async def _fetch(self, conn: BrokerConnection, states: list[_FetchState]) -> None:
        """One fetch of `states` (the partitions ready to fetch) in this connection's session:
        only partitions whose position the leader does not know yet are listed, and the ones
        no longer fetched are forgotten (broker/replication/fetch_session_state.py)."""
        positions = {s.partition.key: (s.partition.log.log_end_offset, s.partition.log.log_start_offset,
                                       s.partition.leader_epoch) for s in states}
        if self._sessions_supported and self._session_id:
            listed = [s for s in states if self._session_known.get(s.partition.key) != positions[s.partition.key]]
            forgotten = [key for key in self._session_known if key not in positions]
            epoch = self._session_epoch
        else:
            listed, forgotten = states, []
            epoch = INITIAL_EPOCH if self._sessions_supported else FINAL_EPOCH
        by_topic: dict[str, list[dict]] = {}
        for s in listed:
            p = s.partition
            fetch_offset, log_start_offset, leader_epoch = positions[p.key]
            by_topic.setdefault(p.topic, []).append({
                "partition": p.index, "current_leader_epoch": leader_epoch,
                "fetch_offset": fetch_offset, "log_start_offset": log_start_offset,
                "partition_max_bytes": PARTITION_MAX_BYTES})
        forgotten_by_topic: dict[str, list[int]] = {}
        for topic, index in forgotten:
            forgotten_by_topic.setdefault(topic, []).append(index)
        response = await conn.request(ApiKey.FETCH, {
            "replica_id": self.node_id, "max_wait_ms": FETCH_MAX_WAIT_MS, "min_bytes": 1,
            "max_bytes": FETCH_MAX_BYTES, "isolation_level": 0, "session_id": self._session_id,
            "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": parts} for t, parts in by_topic.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": parts} for t, parts in forgotten_by_topic.items()],
            "rack_id": ""})
        if response.error_code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            log.info("replica_fetcher.session_reset", leader=self.leader_id, session_id=self._session_id,
                     error_code=response.error_code)
            self._reset_session()
            return
        if response.error_code:
            for s in listed:
                self._back_off(s, response.error_code, "fetch")
            return
        if self._sessions_supported:
            if not self._session_id:
                if response.session_id:
                    self._session_id, self._session_epoch = response.session_id, next_epoch(INITIAL_EPOCH)
                else:  # the leader keeps no session for us: full fetches from now on
                    self._sessions_supported = False
            else:
                self._session_epoch = next_epoch(self._session_epoch)
            for key in forgotten:
                del self._session_known[key]
            for s in listed:
                self._session_known[s.partition.key] = positions[s.partition.key]
        for topic in response.responses:
            for result in topic.partitions:
                state = self.states.get((topic.topic, result.partition_index))
                if state is None or state.needs_truncation:
                    continue
                if result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._handle_out_of_range(state, result)
                elif result.error_code:
                    self._back_off(state, result.error_code, "fetch")
                else:
                    self._append(state, result)

    def _append(self, state: _FetchState, result) -> None:
        p = state.partition
        records = result.records
        if records is not None and len(records):
            try:
                p.log.append_as_follower(records)
                self.replicas.metrics.replication_bytes_in += len(records)
                quota = self.replicas.quotas.follower
                if quota.is_throttled(self.replicas.image, p.topic, p.index):
                    quota.record(len(records), trio.current_time())
            except OffsetsNotContiguous as exc:
                log.warning("replica_fetcher.not_contiguous", topic=p.topic, partition=p.index, error=str(exc))
                state.needs_truncation = True
                return
            except LogError as exc:
                log.error("replica_fetcher.append_failed", topic=p.topic, partition=p.index, error=str(exc))
                state.needs_truncation = True
                return
        if (records is not None and len(records)) or state.leader_high_watermark < 0:
            # Kafka's fetcher updates a partition's lag on appends and on the first answer only.
            state.leader_high_watermark = result.high_watermark
        if result.log_start_offset > p.log.log_start_offset:
            p.log.increment_log_start_offset(min(result.log_start_offset, p.log.log_end_offset))
        p.update_follower_high_watermark(result.high_watermark)

    def _handle_out_of_range(self, state: _FetchState, result) -> None:
        p = state.partition
        if result.log_start_offset >= 0 and p.log.log_end_offset < result.log_start_offset:
            log.warning("replica_fetcher.behind_log_start", topic=p.topic, partition=p.index,
                        log_end_offset=p.log.log_end_offset, leader_log_start=result.log_start_offset)
            p.log.truncate_fully_and_start_at(result.log_start_offset)
            p.log_restarted()
        else:
            state.needs_truncation = True

    def _back_off(self, state: _FetchState, code: int, during: str) -> None:
        """The leader (or our metadata) is not ready for this partition: retry it a little later."""
        p = state.partition
        log.info("replica_fetcher.retry", topic=p.topic, partition=p.index, error_code=code, during=during)
        state.retry_at = trio.current_time() + BACKOFF_S
