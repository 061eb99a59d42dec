"""The share partitions this broker leads (KIP-932, Kafka's `SharePartitionManager`): the shell
around broker/group/share_partition_state.py that ShareFetch and ShareAcknowledge drive.

- One `SharedPartition` per (group, topic, partition) this broker leads, created by the
  first ShareFetch for it: the state is read from the `Persister` (`read(key, leader_epoch)`)
  and loaded with `SharePartitionState.load`; a partition never initialized by the group
  coordinator (no state, or start offset -1) starts where `share.auto.offset.reset` says.
- Every change an answer reports (acknowledgements, releases, a closed session, expired
  locks) is written with `Persister.write` BEFORE the answer goes out, as Kafka does; a write
  that fails undoes the change (the request gets the persister's error). Acquiring writes
  nothing: an acquired record is persisted as it was before the attempt.
- Acquisition locks (`group.share.record.lock.duration.ms`, the group's
  `share.record.lock.duration.ms`) expire in one trio task (`run`), which sleeps until the
  earliest deadline of all partitions.
- Leadership lost (or a new leader epoch) drops the partition's state; the next leader reads
  it from the persister. The log start offset (retention, DeleteRecords) is applied on each
  use (`advance_log_start`).
- read_committed groups (`share.isolation.level`) read up to the last stable offset; the
  acquired records of aborted transactions (found from the `.txnindex` entries and the
  batch headers, in a worker thread) are archived at once (`archive_aborted`).
- Records made AVAILABLE again (released, timed out) and new records (the high watermark)
  wake parked share fetches (`wait_for_records`).
- Dead-letter queue (KIP-1191, broker/group/share_dlq.py): once a change that made records
  ARCHIVING is persisted (and after a load that found some), the core's `take_dlq_runs` are
  written to the group's DLQ topic by background tasks (in order per share partition, never
  holding the partition's lock while writing); when a write ends, written or not, the records
  are ARCHIVED and that is persisted (Kafka's order: ARCHIVING persisted, DLQ, ARCHIVED).

The share sessions (broker/group/share_session_state.py) live here too, one cache per broker.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog
import trio

from raftka.broker.features import SHARE_VERSION
from raftka.broker.group.share_dlq import (
    COPY_RECORD,
    TOPIC_NAME,
    DlqError,
    DlqWriter,
    dlq_enabled,
    originals_from,
)
from raftka.broker.group.share_partition_state import (
    AcknowledgementBatch,
    AcquiredRecords,
    DlqRun,
    Outcome,
    ShareConfig,
    SharePartitionState,
    start_offset_for_reset,
)
from raftka.broker.group.share_persister import Persister, PersisterError, ShareStateKey
from raftka.broker.group.share_session_state import ShareSessionCache, ShareSessionKey
from raftka.broker.net.network import ConnectionInfo
from raftka.broker.replication.partition import NotLeaderOrFollower, Partition
from raftka.broker.replication.replica_manager import ReplicaManager
from raftka.client.fetched_records import CONTROL_ABORT, AbortedFilter, control_type
from raftka.client.protocol import ErrorCode
from raftka.log.batch_header import parse_header
from raftka.log.partition_log import ReadInfo
from raftka.log.record_batch import decode_batch
from raftka.raft_meta.config.config_catalogue import group_config_value
from raftka.raft_meta.config.node_config import NodeConfig

log = structlog.get_logger("broker.share")

READ_COMMITTED = "read_committed"


def now_ms() -> int:
    """The lock clock: trio's (monotonic), in ms. Deadlines never leave this process."""
    return int(trio.current_time() * 1000)


@dataclass
class SharedPartition:
    """One (group, topic, partition) served here: its state and the leader epoch it was read at."""

    key: ShareStateKey
    topic: str
    partition: Partition
    leader_epoch: int
    state_epoch: int
    state: SharePartitionState
    lock: trio.Lock = field(default_factory=trio.Lock)


@dataclass(frozen=True, slots=True)
class Acquired:
    """What one partition gave a share fetch: the records read (whole batches) and the
    offsets acquired in them."""

    info: ReadInfo | None
    ranges: tuple[AcquiredRecords, ...]

    @property
    def size(self) -> int:
        return self.info.size if self.info is not None and self.ranges else 0


NOTHING = Acquired(None, ())


class SharePartitionManager:
    def __init__(self, config: NodeConfig, replicas: ReplicaManager,
                 persister: Callable[[], Persister | None]) -> None:
        self.config = config
        self.replicas = replicas
        self._persister = persister
        self.sessions = ShareSessionCache(config.group_share_max_share_sessions)
        self._partitions: dict[tuple[str, str, int], SharedPartition] = {}
        self._released = trio.Event()  # set when records become AVAILABLE again
        self._deadlines_changed = trio.Event()
        self._loading: dict[tuple[str, str, int], trio.Event] = {}
        # Members whose records are to be released (a closed connection, a member gone from the
        # group): (group id, member id, partitions by name or None for all of the group's).
        self._leaving_send, self._leaving = trio.open_memory_channel[
            tuple[str, str, list[tuple[str, int]] | None]](math.inf)
        self._watched: set[int] = set()
        self.dlq: DlqWriter | None = None  # set by the node: the dead-letter queue writer
        self._dlq_send, self._dlq_jobs = trio.open_memory_channel[tuple[SharedPartition, DlqRun]](math.inf)
        self._dlq_order: dict[tuple[str, str, int], trio.Lock] = {}

    # -- configuration ----------------------------------------------------------------------

    def group_config(self, group_id: str, key: str) -> str:
        own = self.replicas.image.configs.get(("group", group_id), {})
        return group_config_value(key, own, self.config.raw)

    def share_config(self, group_id: str) -> ShareConfig:
        return ShareConfig(
            record_lock_duration_ms=int(self.group_config(group_id, "share.record.lock.duration.ms")),
            max_record_locks=int(self.group_config(group_id, "share.partition.max.record.locks")),
            delivery_count_limit=int(self.group_config(group_id, "share.delivery.count.limit")),
            renew_acknowledge_enabled=self.group_config(group_id, "share.renew.acknowledge.enable").lower() == "true",
            dlq_enabled=dlq_enabled(SHARE_VERSION, self.group_config(group_id, TOPIC_NAME)))

    def read_committed(self, group_id: str) -> bool:
        return self.group_config(group_id, "share.isolation.level") == READ_COMMITTED

    # -- the share partitions ---------------------------------------------------------------

    def _persister_or_raise(self) -> Persister:
        persister = self._persister()
        if persister is None:
            raise PersisterError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no share state persister on this broker")
        return persister

    def cached(self, group_id: str, topic: str, index: int) -> SharedPartition | None:
        """The partition's state if this broker serves it now (and still leads at that epoch)."""
        shared = self._partitions.get((group_id, topic, index))
        if shared is None:
            return None
        p = shared.partition
        if (not p.is_leader or p.leader_epoch != shared.leader_epoch
                or self.replicas.partitions.get((topic, index)) is not p):
            self._drop(group_id, topic, index)
            return None
        return shared

    async def get_or_load(self, key: ShareStateKey, topic: str) -> SharedPartition:
        """The share partition, read from the persister on first use. Raises PersisterError,
        or the partition's error (NOT_LEADER_OR_FOLLOWER, ...)."""
        name = (key.group_id, topic, key.partition)
        while True:
            shared = self.cached(key.group_id, topic, key.partition)
            if shared is not None:
                return shared
            loading = self._loading.get(name)
            if loading is None:
                break
            await loading.wait()  # another request is reading it
        done = self._loading[name] = trio.Event()
        try:
            partition = self.replicas.get_leader(topic, key.partition)
            epoch = partition.leader_epoch
            stored = await self._persister_or_raise().read(key, epoch)
            config = self.share_config(key.group_id)
            if not partition.is_leader or partition.leader_epoch != epoch:
                raise NotLeaderOrFollower(f"{topic}-{key.partition}: leadership changed while reading share state")
            if stored is None or stored.start_offset < 0:
                state = SharePartitionState(await self._reset_offset(key.group_id, partition), config)
                state_epoch = stored.state_epoch if stored is not None else 0
            else:
                state = SharePartitionState.load(stored.start_offset, list(stored.batches), config)
                state_epoch = stored.state_epoch
            state.advance_log_start(partition.log.log_start_offset)
            shared = SharedPartition(key, topic, partition, epoch, state_epoch, state)
            self._partitions[name] = shared
            self._start_dlq(shared)  # ARCHIVING records read back: written to the DLQ again
            log.info("share_partition.loaded", group=key.group_id, topic=topic, partition=key.partition,
                     leader_epoch=epoch, start_offset=state.start_offset, state_epoch=state_epoch,
                     persisted=stored is not None)
            return shared
        finally:
            del self._loading[name]
            done.set()

    async def _reset_offset(self, group_id: str, partition: Partition) -> int:
        reset = self.group_config(group_id, "share.auto.offset.reset").lower()
        log_start, log_end = partition.log.log_start_offset, partition.high_watermark
        found = None
        if reset.startswith("by_duration:"):
            target = int(time.time() * 1000) - iso8601_duration_ms(reset.removeprefix("by_duration:"))
            located = await self.replicas.read_log(
                partition, lambda plog: plog.batch_for_timestamp(target),
                lambda where: partition.log.record_for_timestamp(*where, target))
            found = located[0] if located is not None else log_end
        return start_offset_for_reset(reset, log_start, log_end, found)

    def on_leadership(self, partition: Partition, is_leader: bool) -> None:
        """ReplicaManager's leadership listener: a partition led no more forgets its share state
        (the next leader reads it from the persister); a new epoch here reloads it."""
        for group_id, topic, index in list(self._partitions):
            if (topic, index) == (partition.topic, partition.index):
                shared = self._partitions[(group_id, topic, index)]
                if not is_leader or shared.leader_epoch != partition.leader_epoch:
                    self._drop(group_id, topic, index)

    def _drop(self, group_id: str, topic: str, index: int) -> None:
        if self._partitions.pop((group_id, topic, index), None) is not None:
            log.info("share_partition.dropped", group=group_id, topic=topic, partition=index)
            self._deadlines_changed.set()

    # -- acquiring ----------------------------------------------------------------------------

    def readable(self, shared: SharedPartition, read_committed: bool) -> tuple[int, int]:
        """(where a share fetch reads, the end of what it may read) after applying the log start."""
        p = shared.partition
        shared.state.advance_log_start(p.log.log_start_offset)
        end = p.last_stable_offset if read_committed else p.high_watermark
        return shared.state.next_fetch_offset(), end

    def has_acquirable(self, shared: SharedPartition, read_committed: bool) -> bool:
        start, end = self.readable(shared, read_committed)
        return start < end and shared.state.can_acquire()

    async def acquire(self, shared: SharedPartition, member_id: str, max_records: int, max_bytes: int,
                      read_committed: bool, first: bool) -> Acquired:
        """Lock to `member_id` up to `max_records` records of the partition (whole batches read
        with `Partition.read`, as Fetch reads them; the batches returned end with the last one
        holding an acquired offset). `first`: this is the response's first partition with data,
        which may exceed `max_bytes` by one batch (Kafka's rule)."""
        async with shared.lock:
            shared.state.config = self.share_config(shared.key.group_id)
            start, end = self.readable(shared, read_committed)
            if start >= end or max_records <= 0 or not shared.state.can_acquire():
                return NOTHING
            p = shared.partition
            info = p.read(start, max_bytes, read_committed=read_committed)
            if not info.size or (not first and info.size > max_bytes):
                return NOTHING
            ranges = shared.state.acquire(member_id, max(info.first_offset, start), info.next_offset - 1, now_ms(),
                                          max_records, fetch_offset=start)
            if not ranges:
                return NOTHING
            self._deadlines_changed.set()
            if read_committed:
                aborted = [(t.producer_id, t.first_offset) for t in p.log.collect_aborted_txns(start, info.next_offset)]
                if aborted:
                    spans = await self.replicas.read_log(p, lambda _log: info,
                                                         lambda found: aborted_spans(found, aborted)) or []
                    ranges = shared.state.archive_aborted(member_id, ranges, spans)
                    if not ranges:
                        return NOTHING
            last = ranges[-1].last_offset
            if last + 1 < info.next_offset:  # send no batch past the last acquired offset
                info = p.read(start, max_bytes, read_committed=read_committed, before=last + 1)
            return Acquired(info, ranges)

    # -- acknowledging and releasing ------------------------------------------------------------

    async def acknowledge(self, shared: SharedPartition, member_id: str,
                          batches: list[AcknowledgementBatch]) -> tuple[int, str]:
        """Apply a member's acknowledgements and persist them before returning (error, why)."""

        def apply(state: SharePartitionState) -> Outcome:
            return state.acknowledge(member_id, batches, now_ms())

        return await self._change(shared, apply)

    async def release_member(self, group_id: str, member_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """A closed share session: the member's acquired records on these partitions are released."""
        for topic, index in partitions:
            shared = self.cached(group_id, topic, index)
            if shared is not None:
                error, why = await self._change(shared, lambda state: state.release_member(member_id))
                if error:
                    log.warning("share_partition.release_not_persisted", group=group_id, topic=topic,
                                partition=index, member=member_id, error=error, reason=why)

    async def _change(self, shared: SharedPartition, apply: Callable[[SharePartitionState], Outcome],
                      ) -> tuple[int, str]:
        """Apply a change under the partition's lock; write the new state with the persister
        before returning; undo the change when the write fails (Kafka's rollback)."""
        async with shared.lock:
            before = shared.state.copy()
            shared.state.config = self.share_config(shared.key.group_id)
            outcome = apply(shared.state)
            if outcome.error:
                return outcome.error, outcome.reason
            error, why = await self._persist(shared, before)
            if error:
                return error, why
            if outcome.released or outcome.start_offset_moved:  # records to acquire, or room in the window
                self._wake()
            self._deadlines_changed.set()
            self._start_dlq(shared)
            return 0, ""

    async def _persist(self, shared: SharedPartition, before: SharePartitionState) -> tuple[int, str]:
        state = shared.state
        batches = state.persisted_batches()
        if (state.start_offset, batches) == (before.start_offset, before.persisted_batches()):
            return 0, ""
        try:
            await self._persister_or_raise().write(shared.key, shared.state_epoch, shared.leader_epoch,
                                                   state.start_offset, batches)
        except PersisterError as exc:
            shared.state = before
            log.warning("share_partition.write_failed", group=shared.key.group_id, topic=shared.topic,
                        partition=shared.key.partition, error=exc.code, reason=exc.message)
            if exc.code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
                self._drop(shared.key.group_id, shared.topic, shared.key.partition)  # read again next time
            return exc.code, exc.message or f"share state write failed ({exc.code})"
        return 0, ""

    def watch_connection(self, conn: ConnectionInfo) -> None:
        """Let the share sessions opened on `conn` go when it closes (Kafka 4.4's share session
        cache listens to disconnects): their members' records are released."""
        if conn.connection_id in self._watched:
            return
        self._watched.add(conn.connection_id)
        conn.on_close.append(lambda: self._connection_closed(conn.connection_id))

    def _connection_closed(self, connection_id: int) -> None:
        self._watched.discard(connection_id)
        for session in self.sessions.connection_closed(str(connection_id)):
            self._leaving_send.send_nowait((session.key.group_id, session.key.member_id,
                                            self.session_partitions(session.partitions)))

    def member_left(self, group_id: str, member_id: str) -> None:
        """The member left its share group (or was fenced): its share session goes and its
        records in every partition of the group served here are released (Kafka's
        ShareGroupListener.onMemberLeave). For the group coordinator to call."""
        self.sessions.remove(ShareSessionKey(group_id, member_id))
        self._leaving_send.send_nowait((group_id, member_id, None))

    def forget_group(self, group_id: str) -> None:
        """The share group's state was deleted or rewritten (the group deleted, its offsets
        altered or deleted): forget its partitions here; the next use reads the persister."""
        for g, topic, index in list(self._partitions):
            if g == group_id:
                self._drop(g, topic, index)

    def session_partitions(self, partitions: Iterable[tuple[uuid.UUID, int]]) -> list[tuple[str, int]]:
        """A share session's (topic id, partition)s by name, those of topics still known."""
        image = self.replicas.image
        out = []
        for topic_id, index in partitions:
            topic = image.topics.get(str(topic_id))
            if topic is not None:
                out.append((topic.name, index))
        return out

    async def _release_leaving(self) -> None:
        async for group_id, member_id, partitions in self._leaving:
            if partitions is None:
                partitions = [(topic, index) for g, topic, index in list(self._partitions) if g == group_id]
            await self.release_member(group_id, member_id, partitions)
            log.info("share_session.released", group=group_id, member=member_id, partitions=len(partitions))

    # -- waiting ----------------------------------------------------------------------------------

    def _wake(self) -> None:
        self._released.set()
        self._released = trio.Event()

    async def wait_for_records(self, deadline: float) -> None:
        """Return when records may be acquirable (new records appended and committed, or
        records released), or at `deadline` (trio clock)."""
        released, data = self._released, self.replicas.data_event()
        with trio.move_on_at(deadline):
            async with trio.open_nursery() as nursery:
                for event in (released, data):
                    nursery.start_soon(_set_then_cancel, event, nursery.cancel_scope)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Expire acquisition locks and release the records of members gone."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._expire_locks)
            nursery.start_soon(self._release_leaving)
            nursery.start_soon(self._dead_letters)
            task_status.started()

    async def _expire_locks(self) -> None:
        """Sleep until the earliest lock deadline of all partitions, release what timed out,
        persist it, wake parked share fetches."""
        while True:
            changed = self._deadlines_changed = trio.Event()
            deadlines = [d for s in self._partitions.values() if (d := s.state.next_lock_deadline()) is not None]
            wake_at = min(deadlines) / 1000.0 if deadlines else math.inf
            with trio.move_on_at(wake_at):
                await changed.wait()
            now = now_ms()
            for shared in list(self._partitions.values()):
                deadline = shared.state.next_lock_deadline()
                if deadline is not None and deadline <= now:
                    error, why = await self._change(shared, lambda state: state.expire_locks(now_ms()))
                    log.info("share_partition.locks_expired", group=shared.key.group_id, topic=shared.topic,
                             partition=shared.key.partition, start_offset=shared.state.start_offset,
                             in_flight=shared.state.in_flight_count)
                    if error:
                        log.warning("share_partition.expiry_not_persisted", group=shared.key.group_id,
                                    topic=shared.topic, partition=shared.key.partition, error=error, reason=why)


    # -- the dead-letter queue ---------------------------------------------------------------------

    def _start_dlq(self, shared: SharedPartition) -> None:
        """Hand the partition's new ARCHIVING records (persisted by now) to the DLQ writers."""
        for run in shared.state.take_dlq_runs():
            self._dlq_send.send_nowait((shared, run))

    async def _dead_letters(self) -> None:
        async with trio.open_nursery() as nursery:
            async for shared, run in self._dlq_jobs:
                nursery.start_soon(self._dead_letter, shared, run)

    async def _dead_letter(self, shared: SharedPartition, run: DlqRun) -> None:
        """Write one run to the group's DLQ topic, then archive it (Kafka's
        `initiateDLQAndArchive`); the runs of one share partition in the order handed out."""
        key = (shared.key.group_id, shared.topic, shared.key.partition)
        group_id = shared.key.group_id
        async with self._dlq_order.setdefault(key, trio.Lock()):
            try:
                if self.dlq is None:
                    raise DlqError("no dead-letter queue writer on this broker")
                copy = self.group_config(group_id, COPY_RECORD).lower() == "true"
                originals = await self._originals(shared, run) if copy else {}
                await self.dlq.write(group_id, self.group_config(group_id, TOPIC_NAME), shared.topic,
                                     shared.key.partition, run, originals)
                log.info("share_dlq.written", group=group_id, topic=shared.topic, partition=shared.key.partition,
                         first_offset=run.first_offset, last_offset=run.last_offset, reason=run.reason.name)
            except Exception as exc:  # DlqError, or anything else: never the broker's end (Kafka logs it)
                log.error("share_dlq.write_failed_archiving_anyway", group=group_id, topic=shared.topic,
                          partition=shared.key.partition, first_offset=run.first_offset,
                          last_offset=run.last_offset, reason=str(exc) if isinstance(exc, DlqError) else repr(exc))
            await self._archive_dead_lettered(shared, run)

    async def _originals(self, shared: SharedPartition, run: DlqRun) -> dict[int, tuple[bytes | None, bytes | None]]:
        """The key and value of the run's records, read from the log (in a worker thread); those
        not found (gone from the log) are left out and go to the DLQ with the headers only."""
        p = shared.partition
        found: dict[int, tuple[bytes | None, bytes | None]] = {}
        offset = run.first_offset
        try:
            while offset <= run.last_offset:
                info = p.read(offset, DLQ_READ_BYTES, before=run.last_offset + 1)
                if not info.size or info.next_offset <= offset:
                    break

                def located(_log: object, read: ReadInfo = info) -> ReadInfo:
                    return read

                found.update(await self.replicas.read_log(
                    p, located, lambda got: originals_from(got, run.first_offset, run.last_offset)) or {})
                offset = info.next_offset
        except Exception as exc:  # the partition gone, a log error: headers only (Kafka's)
            log.warning("share_dlq.original_records_unreadable", group=shared.key.group_id, topic=shared.topic,
                        partition=shared.key.partition, first_offset=run.first_offset, error=str(exc))
        return found

    async def _archive_dead_lettered(self, shared: SharedPartition, run: DlqRun) -> None:
        """ARCHIVING -> ARCHIVED, persisted; kept ARCHIVED here when that write fails (Kafka logs
        it, the next write carries it). A partition no longer served here is left alone: its
        next leader reads the records ARCHIVING and writes them again."""
        async with shared.lock:
            if self.cached(shared.key.group_id, shared.topic, shared.key.partition) is not shared:
                return
            before = shared.state.copy()
            outcome = shared.state.finish_dlq(run.first_offset, run.last_offset)
            error, why = await self._persist(shared, before)
            if error:
                shared.state.finish_dlq(run.first_offset, run.last_offset)
                log.warning("share_dlq.archived_not_persisted", group=shared.key.group_id, topic=shared.topic,
                            partition=shared.key.partition, error=error, reason=why)
            if outcome.start_offset_moved:
                self._wake()


DLQ_READ_BYTES = 1 << 20  # one read of the records to copy to the DLQ


def aborted_spans(info: ReadInfo, aborted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (first, last) offsets of the batches in `info` that belong to aborted transactions
    (`aborted`: (producer id, first offset), the `.txnindex` entries), by the rule Kafka's
    clients apply (client/fetched_records.py's AbortedFilter). Reads the batches: call it in a
    worker thread."""
    data = info.read_bytes()
    rule = AbortedFilter(aborted)
    out = []
    pos = 0
    while pos < len(data):
        header = parse_header(data, pos)
        start = pos

        def is_abort_marker(at: int = start) -> bool:
            records = decode_batch(data, at).records
            return bool(records) and control_type(records[0].key) == CONTROL_ABORT

        if rule.skip(header, is_abort_marker):
            out.append((header.base_offset, header.last_offset))
        pos += header.size
    return out


async def _set_then_cancel(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def iso8601_duration_ms(text: str) -> int:
    """Java's `Duration.parse` for what `share.auto.offset.reset=by_duration:` accepts (PnDTnHnMn.nS)."""
    found = _DURATION.fullmatch(text)
    if found is None or text.upper() in ("P", "PT"):
        raise ValueError(f"by_duration:{text}: expected an ISO8601 duration PnDTnHnMn.nS")
    days, hours, minutes, seconds = found.groups()
    return round(((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
                 + float(seconds or 0) * 1000)
