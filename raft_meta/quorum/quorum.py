"""The metadata quorum: pysyncobj behind a small trio-facing `Quorum` interface.

This module, `quorum_transport` (pysyncobj's TCP transport, bounded against
peers that have not authenticated) and `quorum_admin` (its status utility) are
the only places pysyncobj is used; `tests/unit/test_layering.py` keeps it so. The replicated state is the
metadata log itself: a list of `(offset, record bytes)` where the offset is
the Raft index of the entry, after the latest snapshot of the image
(`raft_meta/metadata/snapshot.py`). There is exactly one replicated method,
`apply(record_bytes)`; records are versioned CBOR (`raft_meta.records`).

Threads: pysyncobj runs its own tick thread. From trio we only *enqueue*
(`apply(..., callback=cb)`); the tick thread only calls
`TrioToken.run_sync_soon` with trivial callbacks. Nothing blocks either side
on the other.

Raft: the voter is a `raft_core.RaftSyncObj`, pysyncobj with its deviations from the Raft
paper fixed in that one module (truncation only on a conflict, stale snapshots, vote counting).

Observers: a broker-only node (`process.roles=broker`) runs the same `Quorum` as an *observer*
(KRaft's word): pysyncobj's read-only node (`SyncObj(None, voters)`). It binds no port, dials
every voter, never votes nor counts toward a commit, and the leader sends it the committed log
(AppendEntries, or the dump when it is behind the latest compaction) exactly as to a follower.
It keeps its own journal and dump, so a restart replays its copy and fetches only what it
missed. `submit` on an observer fails at once (NOT_LEADER): it is never the controller.

Durability: pysyncobj journals with mmap and never fsyncs. With metadata.log.fsync.enable
(the default) the journal is a `raft_core.DurableFileJournal`: entries are fsynced, in one
batch per tick, before this voter acknowledges them or counts itself toward a commit, and the
term and vote before any vote is sent (as KRaft does), so a committed record survives the
power loss of every voter. Turned off, committed metadata survives kill -9 of a process, not
the power loss of a majority.
A voter never forgets: `open_quorum_from_config` (a formatted node) refuses to start a voter
whose journal is missing or behind what it acknowledged, and keeps the record that tells
(`raft_meta/quorum/voter_guard.py`: the `voter.started` mark and the `voter-state-checkpoint`).
Memory and disk: the latest snapshot, the records after it (at most
`metadata.log.max.record.bytes.between.snapshots` bytes) and the image at the
last offset; pysyncobj's dump is that state, its journal the entries since the
last dump (docs/architecture.md, "Metadata snapshots").
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import structlog
import trio
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.journal import FileJournal

from raftka.raft_meta.config.node_config import NodeConfig, check_secret
from raftka.raft_meta.metadata.apply import apply_entry, replay
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import (
    MetadataRecord,
    UndecodableRecord,
    decode_record,
    encode_record,
)
from raftka.raft_meta.metadata.snapshot import decode_snapshot, encode_snapshot, image_digest
from raftka.raft_meta.quorum import storage_format
from raftka.raft_meta.quorum.pysyncobj_patches import DurableFileJournal, JournalSpec, RaftSyncObj
from raftka.raft_meta.quorum.quorum_transport import QuorumTransport, TransportLimits
from raftka.raft_meta.quorum.voter_guard import (
    CHECKPOINT_INTERVAL_S,
    JournalLost,
    VoterCheckpoint,
    guard_start,
    write_checkpoint,
)

log = structlog.get_logger("raft_meta.quorum")

METADATA_SUBDIR = "__cluster_metadata-0"  # Kafka's name for the metadata log dir
# Kafka's metadata.log.max.record.bytes.between.snapshots default (20 MiB).
DEFAULT_SNAPSHOT_BYTES = 20 * 1024 * 1024
_FAIL_NAMES = {v: k for k, v in vars(FAIL_REASON).items() if k.isupper()}


class QuorumError(RuntimeError):
    """The quorum could not start (port busy, bad arguments)."""


class SubmitError(RuntimeError):
    """A submitted record's outcome is not a commit.

    `reason` is pysyncobj's (MISSING_LEADER, LEADER_CHANGED, NOT_LEADER,
    DISCARDED, QUEUE_FULL, UNKNOWN_OUTCOME) or TIMEOUT. Except for
    MISSING_LEADER and QUEUE_FULL the record MAY still commit: retry with the
    same request id, and `apply` drops the duplicate.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"metadata record not committed: {reason}{': ' + detail if detail else ''}")
        self.reason = reason


@dataclass(frozen=True)
class QuorumSettings:
    """pysyncobj timing; the defaults were measured (bench/quorum_bench.py: commit latency and
    controller failover)."""

    raft_min_timeout: float = 0.5
    raft_max_timeout: float = 1.0
    append_entries_period: float = 0.1
    leader_fallback_timeout: float = 1.0
    connection_retry_time: float = 0.5
    max_bind_retries: int = 5
    # A metadata snapshot every this many bytes of records (metadata.log.max.record.bytes.between.snapshots);
    # each one also compacts pysyncobj's log. pysyncobj compacts on its own too, after this many
    # journal entries or seconds (its dump is then the latest snapshot plus the tail after it).
    snapshot_max_record_bytes: int = DEFAULT_SNAPSHOT_BYTES
    log_compaction_min_entries: int = 5000
    log_compaction_min_time: float = 300.0
    # How long a tick waits for socket events. A lone voter has no peer whose reply would wake
    # it, so a record it appends is committed only at the next tick: 50 ms per metadata commit
    # at pysyncobj's default. It ticks every 5 ms instead (about 1 % of a core when idle).
    auto_tick_period: float = 0.05
    lone_voter_tick_period: float = 0.005
    # What a peer that has not authenticated may cost (raft_meta/quorum/quorum_transport.py), and how
    # long a lost listener may take to bind again before the node stops with an error.
    pre_auth_timeout: float = 5.0
    listener_restore_timeout: float = 10.0
    # Observers (broker-only nodes) a voter serves at once (quorum_transport.TransportLimits).
    max_observers: int = 64
    # metadata.log.fsync.enable: fsync journal entries (in batches) before acknowledging them.
    fsync: bool = True


@dataclass(frozen=True)
class CommittedRecord:
    offset: int
    raw: bytes

    def decode(self) -> MetadataRecord | UndecodableRecord:
        return decode_record(self.raw)


@dataclass(frozen=True)
class QuorumStatus:
    node_id: int
    leader_id: int | None
    term: int
    is_leader: bool
    has_quorum: bool
    commit_index: int
    last_applied: int
    last_offset: int  # offset of the last committed metadata record here (0: none)
    snapshot_offset: int  # offset of the latest metadata snapshot here (0: none)
    voters: Mapping[int, str]
    match_index: Mapping[int, int]  # leader only: each follower's replicated index
    observers: int = 0  # leader only: broker-only nodes connected and sent the log
    # leader only: each follower's (last fetch, last caught up) in ms since the epoch, -1 if never
    # in this term (pysyncobj_patches.RaftSyncObj.replica_times)
    fetch_times: Mapping[int, tuple[int, int]] = field(default_factory=dict)


class _MetadataLog(SyncObjConsumer):
    """The replicated state: the latest image snapshot plus the committed records after it.

    `apply` runs in the tick thread, in log order, on every node. It appends the record to
    the tail and applies it (the pure `apply_entry`) to `image`, the image at the last applied
    offset. Once the tail holds `snapshot_bytes` bytes of records, the image becomes the new
    snapshot (`raft_meta/metadata/snapshot.py`) and the tail is emptied, then pysyncobj is asked to
    compact its log: its dump (gzip(pickle) of the attributes assigned after
    `SyncObjConsumer.__init__`: `snapshot`, `snapshot_offset`, `offsets`, `payloads`,
    `tail_bytes`, `last`) stays one snapshot plus at most one tail, and its journal restarts
    after the dumped entry. Offsets are Raft indexes: they never restart from 0.
    """

    def __init__(self, on_change, snapshot_bytes: int) -> None:
        # Attributes set before SyncObjConsumer.__init__ are excluded from snapshots.
        self.lock = threading.Lock()
        self.on_change = on_change
        self.snapshot_bytes = snapshot_bytes
        self.image = MetadataImage()  # at `last`; rebuilt from snapshot + tail after a dump load
        self.dump_loads = 0  # dumps loaded (at a restart, or installed from the leader)
        self.image_error: str | None = None  # why the last dump's snapshot could not be loaded
        super().__init__()
        self.snapshot: bytes | None = None  # encode_snapshot(image at snapshot_offset)
        self.snapshot_offset = 0
        self.offsets: list[int] = []
        self.payloads: list[bytes] = []
        self.tail_bytes = 0
        self.last = 0  # offset of the last record applied (0: none)

    @replicated
    def apply(self, record: bytes) -> int:
        # It must never raise: pysyncobj would re-apply the entry forever.
        snapshot_now = False
        try:
            offset = self._syncObj.raftLastApplied + 1
            with self.lock:
                if offset > self.last:
                    raw = bytes(record)
                    self.offsets.append(offset)
                    self.payloads.append(raw)
                    self.tail_bytes += len(raw)
                    self.last = offset
                    self.image, _ = apply_entry(self.image, decode_record(raw), offset)
                    snapshot_now = self.tail_bytes >= self.snapshot_bytes
                    if snapshot_now:
                        self._take_snapshot()
            if offset == self.last and snapshot_now:
                # Written at the next tick: the dump holds the new snapshot and an empty tail.
                self._syncObj.forceLogCompaction()
            self.on_change()
            return offset
        except Exception:  # noqa: BLE001 - see above
            return -1

    def _take_snapshot(self) -> None:
        """The image becomes the snapshot; the records it covers are dropped (lock held)."""
        self.snapshot = encode_snapshot(self.image)
        self.snapshot_offset = self.image.offset
        self.offsets, self.payloads, self.tail_bytes = [], [], 0

    def _deserialize(self, data) -> None:
        # A dump load (restart) or install (from the leader) replaces the state without `apply`
        # calls: rebuild the working image from the snapshot and the tail.
        with self.lock:
            self.dump_loads += 1
            super()._deserialize(data)
            if "last" not in data:  # a dump written before snapshots: records only
                self.last = self.offsets[-1] if self.offsets else 0
                self.tail_bytes = sum(map(len, self.payloads))
            try:
                image = MetadataImage() if self.snapshot is None else decode_snapshot(self.snapshot)
                self.image = replay([(o, decode_record(p)) for o, p in zip(self.offsets, self.payloads, strict=True)], image)
                self.image_error = None
            except Exception as exc:  # noqa: BLE001 - tick thread must not die; the loader stops on it
                log.exception("metadata.snapshot_unreadable", snapshot_offset=self.snapshot_offset)
                self.image_error = f"snapshot at offset {self.snapshot_offset} unreadable: {exc}"
                self.image = MetadataImage(offset=self.last)
        try:
            self.on_change()
        except Exception:  # noqa: BLE001 - tick thread must not die
            pass


@dataclass(frozen=True)
class Snapshot:
    """What `Quorum.feed` yields to a reader whose records were replaced by a snapshot: the
    image at `offset`, which the quorum rebuilt from its snapshot and tail, so the reader
    needs no record at or before `offset`. `error` (image None): the snapshot was unreadable."""

    offset: int
    image: MetadataImage | None
    error: str | None = None


class Quorum:
    """A running metadata-quorum voter. Get one from `open_quorum` / `open_quorum_from_config`.

    - `await submit(record)` -> offset once committed (raises `SubmitError`);
      works on any voter (followers forward to the leader).
    - `records_from(offset)`, `await wait_beyond(offset)`, `feed(offset)`:
      the committed records, from any offset, in commit order.
    - `status()`, `is_leader`, `term`, `leader_id`: the Raft view.
    - `await wait_state_change()`: wakes on any Raft role change.
    """

    def __init__(self, node_id: int, voters: Mapping[int, str], token: trio.lowlevel.TrioToken,
                 snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES) -> None:
        self.node_id = node_id
        self.voters = dict(voters)
        # Not a voter: follow the committed log only (pysyncobj's read-only node; see the module docstring).
        self.observer = node_id not in self.voters
        self._id_by_address = {address: nid for nid, address in self.voters.items()}
        self._token = token
        self._changed = trio.Event()
        self._state_changed = trio.Event()
        self._log = _MetadataLog(self._notify_from_tick_thread, snapshot_bytes)
        self._sync: SyncObj | None = None
        self.fatal_error: str | None = None  # set (tick thread) when the voter cannot go on
        self._fatal_scope = trio.CancelScope()
        # (offset, digest) of the image at that offset, computed off both the trio loop and the
        # tick thread by `_digest_loop` (one tuple, assigned atomically: read from any thread).
        self._digest: tuple[int, str | None] = (-1, None)
        self._digest_scope = trio.CancelScope()
        self._checkpoint_scope = trio.CancelScope()
        self._checkpoint_lock = trio.Lock()
        self._checkpoint_written: VoterCheckpoint | None = None  # in voter-state-checkpoint

    # --- called in the tick thread: trivial, never raise ---
    def _notify_from_tick_thread(self) -> None:
        try:
            self._token.run_sync_soon(self._wake, idempotent=True)
        except trio.RunFinishedError:
            pass

    def _on_transport_fatal(self, reason: str) -> None:
        # The listener is gone for good: stop the node (open_quorum raises QuorumError).
        self.fatal_error = reason
        try:
            self._token.run_sync_soon(self._fatal_scope.cancel)
        except trio.RunFinishedError:
            pass

    def _on_state_changed(self, old: int, new: int) -> None:
        try:
            self._token.run_sync_soon(self._wake_state, idempotent=True)
        except trio.RunFinishedError:
            pass

    # --- trio side ---
    def _wake(self) -> None:
        event, self._changed = self._changed, trio.Event()
        event.set()

    def _wake_state(self) -> None:
        event, self._state_changed = self._state_changed, trio.Event()
        event.set()
        self._wake()  # readers waiting on records also re-check leadership

    async def submit(self, record: MetadataRecord | bytes, timeout: float = 5.0) -> int:
        """Replicate one record; returns its offset once committed and applied here."""
        assert self._sync is not None, "quorum not started"
        if self.observer:
            raise SubmitError("NOT_LEADER", f"node {self.node_id} is an observer (process.roles=broker), not a voter")
        data = record if isinstance(record, bytes) else encode_record(record)
        done = trio.Event()
        outcome: dict[str, object] = {}
        token = self._token

        def on_result(result, error) -> None:  # tick thread: trivial, never raises
            try:
                outcome["result"], outcome["error"] = result, error
                token.run_sync_soon(done.set)
            except Exception:  # noqa: BLE001 - includes trio.RunFinishedError
                pass

        self._log.apply(data, callback=on_result)
        with trio.move_on_after(timeout) as scope:
            await done.wait()
        if scope.cancelled_caught:
            raise SubmitError("TIMEOUT", f"no outcome within {timeout} s")
        error = outcome["error"]
        if error != FAIL_REASON.SUCCESS:
            raise SubmitError(_FAIL_NAMES.get(error, str(error)))
        offset = int(outcome["result"])  # type: ignore[arg-type]
        if offset < 0:
            raise SubmitError("UNKNOWN_OUTCOME", "apply failed on this node")
        return offset

    def records_from(self, offset: int, limit: int | None = None) -> list[CommittedRecord]:
        """Committed records with offset >= `offset` still in the log (those after the latest
        snapshot), oldest first. A reader behind `snapshot_offset` needs `read_from`."""
        with self._log.lock:
            return self._tail_from(offset, limit)

    def _tail_from(self, offset: int, limit: int | None) -> list[CommittedRecord]:
        offsets, payloads = self._log.offsets, self._log.payloads
        start = bisect.bisect_left(offsets, offset)
        stop = len(offsets) if limit is None else min(len(offsets), start + limit)
        return [CommittedRecord(offsets[i], payloads[i]) for i in range(start, stop)]

    def read_from(self, offset: int) -> tuple[Snapshot | None, list[CommittedRecord]]:
        """What a reader whose next offset is `offset` needs. If `offset` is at or before the
        latest snapshot (the records it covers are gone): the image at the last applied offset
        (the snapshot with the tail applied, kept up to date in the tick thread), and no records.
        Else the records from `offset`."""
        with self._log.lock:
            state = self._log
            if offset <= state.snapshot_offset and state.snapshot is not None:
                if state.image_error is not None:
                    return Snapshot(state.snapshot_offset, None, state.image_error), []
                return Snapshot(state.image.offset, state.image), []
            return None, self._tail_from(offset, None)

    @property
    def last_offset(self) -> int:
        """Offset of the last committed record applied here (0: none)."""
        return self._log.last

    @property
    def snapshot_offset(self) -> int:
        """Offset of the latest metadata snapshot (0: none yet)."""
        return self._log.snapshot_offset

    @property
    def dump_loads(self) -> int:
        """How many pysyncobj dumps this voter loaded: its own at start, or one sent by the leader."""
        return self._log.dump_loads

    async def wait_beyond(self, offset: int) -> None:
        """Return once a record with offset > `offset` is committed here."""
        while self.last_offset <= offset:
            await self._changed.wait()

    async def wait_change(self) -> None:
        """Return at the next new record or Raft role change."""
        await self._changed.wait()

    async def wait_state_change(self) -> None:
        await self._state_changed.wait()

    def state_change_event(self) -> trio.Event:
        """The event the next Raft role change sets (for waiting on several things at once)."""
        return self._state_changed

    async def feed(self, from_offset: int = 0) -> AsyncIterator[CommittedRecord | Snapshot]:
        """Every committed record with offset >= `from_offset`, forever. Where the records a
        reader needs were replaced by a snapshot, it gets a `Snapshot` (the image at an offset
        >= `from_offset`) instead, then the records after it."""
        next_offset = from_offset
        while True:
            snapshot, batch = self.read_from(next_offset)
            if snapshot is not None:
                yield snapshot
                next_offset = snapshot.offset + 1
                continue
            if not batch:
                await self.wait_beyond(next_offset - 1)
                continue
            for record in batch:
                yield record
            next_offset = batch[-1].offset + 1

    # These read single attributes the tick thread assigns atomically; getStatus()
    # iterates dicts the tick thread mutates, so it is kept for status() only.
    @property
    def term(self) -> int:
        assert self._sync is not None
        return self._sync.raftCurrentTerm

    @property
    def is_leader(self) -> bool:
        return self._sync is not None and self._sync._isLeader()

    @property
    def leader_id(self) -> int | None:
        assert self._sync is not None
        leader = self._sync._getLeader()
        return None if leader is None else self._id_by_address.get(getattr(leader, "id", str(leader)))

    def leadership(self) -> tuple[bool, int]:
        """(is leader, current term)."""
        assert self._sync is not None
        return self._sync._isLeader(), self._sync.raftCurrentTerm

    def status(self) -> QuorumStatus:
        assert self._sync is not None
        for _ in range(10):
            try:
                s = self._sync.getStatus()
                break
            except RuntimeError:  # a dict changed size under us in the tick thread
                continue
        else:
            raise QuorumError("could not read a consistent pysyncobj status")
        leader = s["leader"]
        leader_id = None if leader is None else self._id_by_address.get(getattr(leader, "id", str(leader)))
        match = {
            self._id_by_address[key.removeprefix("match_idx_server_")]: value
            for key, value in s.items()
            if key.startswith("match_idx_server_") and key.removeprefix("match_idx_server_") in self._id_by_address
        }
        return QuorumStatus(
            node_id=self.node_id,
            leader_id=leader_id,
            term=s["raft_term"],
            is_leader=s["state"] == 2,  # pysyncobj: 0 follower, 1 candidate, 2 leader
            has_quorum=bool(s["has_quorum"]),
            commit_index=s["commit_idx"],
            last_applied=s["last_applied"],
            last_offset=self.last_offset,
            snapshot_offset=self.snapshot_offset,
            voters=dict(self.voters),
            match_index=match,
            observers=int(s.get("readonly_nodes_count", 0)) if s["state"] == 2 else 0,
            fetch_times=self._fetch_times(s["raft_term"]) if s["state"] == 2 else {},
        )

    def _fetch_times(self, term: int) -> dict[int, tuple[int, int]]:
        assert self._sync is not None
        times = dict(getattr(self._sync, "replica_times", {}))  # one C-level copy, safe from any thread
        return {self._id_by_address[address]: (t.last_fetch_ms, t.last_caught_up_ms)
                for address, t in times.items() if t.term == term and address in self._id_by_address}

    # --- the image digest (`raftka quorum status`, the chaos checker) ---
    def image_state(self) -> dict[str, object]:
        """The image this voter applied and its digest: `image_offset` (offset of the last record
        applied), `digest` (`snapshot.image_digest` of the image at `digest_offset`; it trails
        `image_offset` by at most one digest computation while records arrive), `image_error`.
        Cheap: reads attributes only, so it can answer from the tick thread."""
        digest_offset, digest = self._digest
        return {"image_offset": self._log.image.offset, "digest_offset": digest_offset, "digest": digest,
                "image_error": self._log.image_error}

    def _on_image_command(self, args, callback) -> None:
        # pysyncobj admin channel (tick thread): `TcpUtility.executeCommand(address, ["image"])`.
        callback(self.image_state(), None)

    async def _digest_loop(self, min_gap: float = 0.05) -> None:
        """Keep `_digest` at the latest image: hash it in a worker thread each time it changed,
        then rest at least four times as long as the hash took (at most ~20 % of a core on a
        huge image while records stream in; a quiet voter's digest is of its last offset)."""
        with self._digest_scope:
            while True:
                image = self._log.image  # immutable; the tick thread swaps the reference
                if image.offset == self._digest[0] or self._log.image_error is not None:
                    await self._changed.wait()
                    continue
                started = trio.current_time()
                try:
                    digest = await trio.to_thread.run_sync(image_digest, image, abandon_on_cancel=True)
                except Exception:  # noqa: BLE001 - a system task must not raise; the digest stays stale
                    log.exception("metadata.digest_failed", offset=image.offset)
                    await self._changed.wait()
                    continue
                self._digest = (image.offset, digest)
                await trio.sleep(max(min_gap, 4 * (trio.current_time() - started)))

    # --- the voter's checkpoint (raft_meta/quorum/voter_guard.py) ---
    @staticmethod
    def _new_point(sync: RaftSyncObj | None, written: VoterCheckpoint | None) -> VoterCheckpoint | None:
        """What `sync` has synced, merged with what was recorded; None: nothing new."""
        point = None if sync is None else sync.durable_point
        if point is None:
            return None
        merged = VoterCheckpoint(*point).merge(written)
        return None if merged == written else merged

    async def _write_checkpoint(self, metadata_dir: Path, sync: RaftSyncObj | None) -> None:
        async with self._checkpoint_lock:  # one writer at a time: they share the tmp file
            point = self._new_point(sync, self._checkpoint_written)
            if point is not None:
                await trio.to_thread.run_sync(write_checkpoint, metadata_dir, point)
                self._checkpoint_written = point

    async def _checkpoint_loop(self, metadata_dir: Path) -> None:
        """Record the durable point outside the journal at most every CHECKPOINT_INTERVAL_S (a
        worker thread's fsync, never the tick thread's); `open_quorum` writes the last one."""
        with self._checkpoint_scope:
            while True:
                await trio.sleep(CHECKPOINT_INTERVAL_S)  # a period, not a synchronisation
                try:
                    await self._write_checkpoint(metadata_dir, self._sync)
                except OSError as exc:  # out of descriptors or space: the next period tries again,
                    # and a late checkpoint only makes the start guard's lower bound older
                    log.warning("quorum.checkpoint_deferred", metadata_dir=str(metadata_dir), error=str(exc))
                except Exception:  # noqa: BLE001 - a system task must not raise; the next period tries again
                    log.exception("quorum.checkpoint_failed", metadata_dir=str(metadata_dir))

    def transfer_leadership(self) -> None:
        """Ask pysyncobj to hand leadership to another voter (controlled shutdown)."""
        if self._sync is not None:
            self._sync.transferLeadership()

    # --- lifecycle ---
    def _start_blocking(self, bind_address: str | None, secret: str, metadata_dir: Path,
                        settings: QuorumSettings) -> None:
        metadata_dir.mkdir(parents=True, exist_ok=True)
        self_address = None if self.observer else self.voters[self.node_id]
        journal = str(metadata_dir / "raft.journal")
        others = [address for nid, address in sorted(self.voters.items()) if nid != self.node_id]
        conf = SyncObjConf(
            autoTickPeriod=settings.auto_tick_period if others else settings.lone_voter_tick_period,
            password=secret,
            bindAddress=None if self.observer else bind_address,
            appendEntriesUseBatch=False,  # batching adds ~100 ms to every commit
            raftMinTimeout=settings.raft_min_timeout,
            raftMaxTimeout=settings.raft_max_timeout,
            appendEntriesPeriod=settings.append_entries_period,
            leaderFallbackTimeout=settings.leader_fallback_timeout,
            connectionRetryTime=settings.connection_retry_time,
            commandsWaitLeader=False,
            useFork=False,  # never fork a multi-threaded process
            dynamicMembershipChange=False,
            maxBindRetries=settings.max_bind_retries,
            logCompactionMinEntries=settings.log_compaction_min_entries,
            logCompactionMinTime=settings.log_compaction_min_time,
            journalFile=JournalSpec(journal, functools.partial(
                DurableFileJournal if settings.fsync else FileJournal, journal)),
            fullDumpFile=str(metadata_dir / "raft.dump"),
            onStateChanged=self._on_state_changed,
        )
        limits = TransportLimits(pre_auth_timeout=settings.pre_auth_timeout,
                                 restore_timeout=settings.listener_restore_timeout,
                                 max_observers=settings.max_observers)
        transport = functools.partial(QuorumTransport, limits=limits, on_fatal=self._on_transport_fatal)
        sync = RaftSyncObj(self_address, others, conf, consumers=[self._log], transportClass=transport)
        # An admin-channel command next to pysyncobj's own "status" (raft_meta/quorum/quorum_admin.py).
        sync._SyncObj__transport.setOnUtilityMessageCallback("image", self._on_image_command)
        if not others and not self.observer:
            # A lone voter has nobody to hear from: hold its election at the next tick instead of
            # after a random raftMinTimeout..raftMaxTimeout (0.5-1 s of every 1-node start).
            # pysyncobj has no setting for this; the deadline is its private attribute.
            sync._SyncObj__raftElectionDeadline = 0
        try:
            if not self.observer:  # an observer binds nothing (pysyncobj would wait forever)
                sync.waitBinded()
        except Exception as exc:
            sync.destroy_synchronous()
            raise QuorumError(
                f"quorum node {self.node_id} could not bind {bind_address} after {settings.max_bind_retries} tries "
                f"({exc}); expected a free port"
            ) from None
        self._sync = sync

    def _stop_blocking(self) -> RaftSyncObj | None:
        sync, self._sync = self._sync, None
        if sync is not None:
            sync.destroy_synchronous()
        return sync


@asynccontextmanager
async def open_quorum(
    node_id: int,
    voters: Mapping[int, str],
    secret: str,
    metadata_dir: str | Path,
    bind_address: str | None = None,
    settings: QuorumSettings | None = None,
    observer: bool = False,
    storage_dirs: list[Path] | None = None,
) -> AsyncIterator[Quorum]:
    """Start this node's voter; stop it (and its tick thread) on exit.

    `voters` maps node id -> "host:port" (the same map on every node);
    `bind_address` defaults to this node's voter address; `metadata_dir` is
    the node's metadata.log.dir (the journal and dump go in a subdir).
    With `observer=True` (a broker-only node, whose id is not a voter's) the node follows
    the committed log without voting and binds nothing.
    `storage_dirs` (the node's log dirs and metadata dir): a voter whose dirs are formatted
    is guarded (`raft_meta/quorum/voter_guard.py`): it refuses to start on a lost journal, and
    records what it needs to tell one.

    Raises `QuorumError` if the voter cannot start, or, on leaving, if it had to stop:
    its quorum listener was lost and could not be bound again (the body is cancelled).
    """
    if not secret:
        raise QuorumError("the quorum secret is empty; expected controller.quorum.secret or RAFTKA_QUORUM_SECRET")
    problem = check_secret(secret)
    if problem is not None:
        raise QuorumError(problem)
    if observer and node_id in voters:
        raise QuorumError(f"node id {node_id} is a voter; expected an observer's id outside {sorted(voters)}")
    if not observer and node_id not in voters:
        raise QuorumError(f"node id {node_id} is not among the voters {sorted(voters)}")
    settings = settings or QuorumSettings()
    quorum = Quorum(node_id, voters, trio.lowlevel.current_trio_token(), settings.snapshot_max_record_bytes)
    directory = Path(metadata_dir) / METADATA_SUBDIR
    guarded, checkpoint = False, None
    if storage_dirs is not None and not observer:
        try:
            guarded, checkpoint = await trio.to_thread.run_sync(guard_start, node_id, directory, list(storage_dirs),
                                                                settings.fsync)
        except JournalLost as exc:
            raise QuorumError(str(exc)) from None
        except (OSError, storage_format.StorageError) as exc:  # reading the journal, marking meta.properties
            raise QuorumError(f"node {node_id}: could not check the metadata journal {str(directory)!r}: {exc}") from None
    # Built on the trio thread on purpose: pysyncobj's tick thread stops as soon as the thread
    # that created the SyncObj exits, and trio's worker threads exit when idle (~10 s).
    quorum._start_blocking(None if observer else bind_address or voters[node_id], secret, directory, settings)
    log.info("quorum.started", node_id=node_id, voters=dict(voters), metadata_dir=str(directory),
             role="observer" if observer else "voter")
    # A system task (it never raises), so the body's exceptions are not wrapped by a nursery.
    trio.lowlevel.spawn_system_task(quorum._digest_loop, name="raftka.quorum.digest")
    checkpointed = guarded and settings.fsync  # without fsync nothing synced is there to record
    quorum._checkpoint_written = checkpoint
    if checkpointed:
        trio.lowlevel.spawn_system_task(quorum._checkpoint_loop, Path(metadata_dir), name="raftka.quorum.checkpoint")
    try:
        with quorum._fatal_scope:
            yield quorum
    finally:
        quorum._digest_scope.cancel()
        quorum._checkpoint_scope.cancel()
        with trio.CancelScope(shield=True):
            stopped = await trio.to_thread.run_sync(quorum._stop_blocking)
            if checkpointed:  # a clean stop records the last durable point
                try:
                    await quorum._write_checkpoint(Path(metadata_dir), stopped)
                except Exception:  # noqa: BLE001 - never hides the body's exception; the start guard is a lower bound
                    log.exception("quorum.checkpoint_failed", metadata_dir=str(metadata_dir))
        log.info("quorum.stopped", node_id=node_id)
    if quorum.fatal_error is not None:
        raise QuorumError(f"quorum node {node_id} stopped: {quorum.fatal_error}")


def open_quorum_from_config(config: NodeConfig, settings: QuorumSettings | None = None):
    """`open_quorum` with everything taken from a NodeConfig."""
    voters = {v.node_id: v.address() for v in config.controller_quorum_voters}
    settings = dataclasses.replace(
        settings or QuorumSettings(),
        snapshot_max_record_bytes=config.metadata_log_max_record_bytes_between_snapshots,
        fsync=config.metadata_log_fsync_enable)
    return open_quorum(
        config.node_id,
        voters,
        config.controller_quorum_secret or "",
        config.metadata_log_dir,
        bind_address=None if not config.is_controller else config.quorum_bind_address(),
        settings=settings,
        observer=not config.is_controller,
        storage_dirs=storage_format.storage_dirs(config),
    )
