"""pysyncobj's Raft, with its deviations from the Raft paper fixed in this one place.

`RaftSyncObj` is the `SyncObj` every voter runs (`raft_meta/quorum/quorum.py`) and the simulation
drives (`raft_meta/quorum/simulation/`). pysyncobj itself is unchanged; the fixes override its
private methods (reached through Python's name mangling; `_check_pysyncobj` fails the import
if a pysyncobj upgrade renames them). Each was found by the simulation; docs/architecture.md
("Quorum simulation and pysyncobj's deviations from Raft") names the seed that shows it.

1. **Truncate only on a conflict (Raft §5.3).** pysyncobj 0.3.17's follower deletes every
   entry after `prevLogIdx` whenever its log is longer, even when the entries match the
   leader's. A stale, re-sent or duplicated AppendEntries therefore cuts entries the follower
   has already acknowledged: the leader may have counted them toward a commit, and a new
   leader can then be elected without a committed entry. Here the follower skips the
   entries it already holds with the same term, deletes from the first entry whose term
   differs (a real conflict), and appends the rest. It acknowledges `prevLogIdx +
   len(entries)` -- what the message proved, not its own log end -- and bounds its commit
   index by that index too (its log may go on with entries the leader has not verified).
2. **A snapshot does not wipe a log that holds it (Raft §7)**, nor replace the node's own
   dump file (which must stay the one the journal starts at: seed 9220), and a snapshot
   piece does not move the commit index past what it proves (`_install_snapshot`).
3. **A vote counts once per voter** (pysyncobj counts grant messages: a duplicate made two
   leaders in one term).
4. **No busy loop after a compaction.** Without fork (raftka's setting) the dump is written
   at once, but pysyncobj notices only at the next tick; until then a leader that must send a
   snapshot gets no data and re-sends `serialized: None` in a loop for `appendEntriesPeriod`
   (a burst of messages and 100 ms of the tick thread; endless under a simulated clock:
   seed 7261 ran out of memory). The finished dump is taken into account at once.
5. **Durable before acknowledged.** With a `DurableFileJournal` (metadata.log.fsync.enable,
   the default), entries are fsynced before this node acknowledges them and before a leader
   counts itself toward a commit, in batches: acknowledgements wait in `_held_acks` while the
   journal has unsynced changes, and the start of the next tick syncs once and sends them
   all. `currentTerm`/`votedFor` are fsynced before any vote is sent. This is what KRaft
   does for its metadata log.
6. **A failed consistency check answers a point that matches** (`_match_point`): pysyncobj's
   "go on from my log end + 1" undid the leader's back-off on every heartbeat when the log
   ended with entries the leader did not have (seeds 7878, 8325, 56907, 52149).
7. **A restart keeps the journal after the dump** (`_trim_journal_to_dump`): pysyncobj
   cleared a journal that did not start with the dump's entries, even one that held them and
   synced entries after them (a power loss between a compaction and the next sync).

8. **What is durable, published** (`durable_point`): after each tick's sync, and at a clean
   stop, (current term, commit index bounded by the synced log end). The quorum records it
   outside the journal, lazily (`raft_meta/quorum/voter_guard.py`), so a restart can tell a journal
   that went back.

9. **Each follower's fetch and caught-up times, for DescribeQuorum** (`replica_times`, not a
   fix): the leader records every follower answer by Kafka's rule (`replica_times.py`).

`read_journal_state` reads a stopped node's journal files without opening them for writing
(pysyncobj's own `FileJournal` creates and resizes them): the start-up guard decides from it.

`createJournal` hook: pysyncobj builds its journal from `SyncObjConf.journalFile` inside
`SyncObj.__init__` (before its tick thread could see another). A `JournalSpec` there (a
`str` subclass naming the file) carries the factory to use instead; any other value keeps
pysyncobj's own behaviour. The hook is installed once, at import.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import pysyncobj.journal as pysyncobj_journal
import pysyncobj.pickle as pysyncobj_pickle
import pysyncobj.syncobj as pysyncobj_syncobj
from pysyncobj import SyncObj
from pysyncobj.journal import (
    FIRST_RECORD_OFFSET,
    LAST_RECORD_OFFSET_OFFSET,
    FileJournal,
    MetaStorer,
)

from raftka.raft_meta.quorum.replica_times import ReplicaTimes, on_fetch


def _check_pysyncobj() -> None:
    """Fail at import, not at run time, if pysyncobj no longer has what is overridden here."""
    missing = [name for name in ("_SyncObj__onMessageReceived", "_SyncObj__sendNextNodeIdx", "_onTick",
                                 "_SyncObj__loadDumpFile", "_SyncObj__generateRaftTimeout",
                                 "_SyncObj__tryLogCompaction")
               if not hasattr(SyncObj, name)]
    if not hasattr(pysyncobj_syncobj, "createJournal"):
        missing.append("pysyncobj.syncobj.createJournal")
    if missing:
        raise ImportError(f"pysyncobj changed: {missing} missing; raft_meta/quorum/pysyncobj_patches.py was written for pysyncobj 0.3.17")


_check_pysyncobj()


class JournalSpec(str):
    """A journal file name that also says how to open it (see the module docstring)."""

    factory: object

    def __new__(cls, path: str, factory):
        spec = super().__new__(cls, path)
        spec.factory = factory
        return spec


_pysyncobj_create_journal = pysyncobj_journal.createJournal


def _create_journal(journal_file=None):
    if isinstance(journal_file, JournalSpec):
        return journal_file.factory()
    return _pysyncobj_create_journal(journal_file)


pysyncobj_syncobj.createJournal = _create_journal


class _SyncedMetaStorer(MetaStorer):
    """pysyncobj's term/vote file, written with fsync (file and directory) before the rename counts."""

    def storeMeta(self, meta):
        path = self.getPath()
        with open(path + ".tmp", "wb") as f:
            f.write(pysyncobj_pickle.dumps(meta))
            f.flush()
            os.fsync(f.fileno())
        shutil.move(path + ".tmp", path)
        _fsync_dir(os.path.dirname(path) or ".")


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DurableFileJournal(FileJournal):
    """pysyncobj's mmap journal that knows what it has not synced yet; `sync()` makes it durable."""

    def __init__(self, journal_file: str) -> None:
        super().__init__(journal_file)
        self.dirty = False
        self._FileJournal__metaStorer = _SyncedMetaStorer(journal_file + ".meta")
        self.syncs = 0

    def add(self, command, idx, term):
        super().add(command, idx, term)
        self.dirty = True

    def clear(self):
        super().clear()
        self.dirty = True

    def deleteEntriesFrom(self, entryFrom):
        super().deleteEntriesFrom(entryFrom)
        self.dirty = True

    def sync(self) -> None:
        if not self.dirty:
            return
        mapped = self._FileJournal__journalFile
        mapped.flush()  # msync
        os.fsync(mapped._ResizableFile__f.fileno())  # the file's size changes too
        self.dirty = False
        self.syncs += 1


JOURNAL_FILE = "raft.journal"
META_FILE = JOURNAL_FILE + ".meta"
DUMP_FILE = "raft.dump"


@dataclass(frozen=True)
class JournalState:
    """What a stopped node's journal directory holds (`read_journal_state`)."""

    journal: bool  # raft.journal exists
    meta: bool  # raft.journal.meta (current term, vote, commit index) exists
    dump: bool  # raft.dump exists
    first_index: int = 0  # the journal's first and last entries (0: no entry)
    last_index: int = 0
    last_term: int = 0
    term: int = 0  # the current term stored in raft.journal.meta
    damaged: str | None = None  # why a file could not be read
    dump_index: int = 0  # the dump's last index, when it was read (`dump_last_index`)

    @property
    def absent(self) -> bool:
        return not (self.journal or self.meta or self.dump)

    @property
    def end_index(self) -> int:
        """The last index a restart holds: pysyncobj rebuilds a journal that lacks the dump's
        entries (a kill between a compaction's clear and its rewrite) from the dump."""
        return max(self.last_index, self.dump_index)


def read_journal_state(directory: Path) -> JournalState:
    """Read the journal's first and last entries (pysyncobj's format: a 40-byte header whose
    last 4 bytes are the end of the last record; each record is `size, idx, term, command,
    size`) and the stored term. Read-only; blocking I/O."""
    journal, meta, dump = (directory / JOURNAL_FILE, directory / META_FILE, directory / DUMP_FILE)
    state = JournalState(journal.is_file(), meta.is_file(), dump.is_file())
    fields: dict[str, object] = {}
    try:
        if state.journal:
            fields.update(_journal_ends(journal))
        if state.meta:
            fields["term"] = int(pysyncobj_pickle.loads(meta.read_bytes()).get("currentTerm", 0))
    except Exception as exc:  # noqa: BLE001 - whatever makes a file unreadable is reported, not raised
        fields["damaged"] = f"{type(exc).__name__}: {exc}"
    return JournalState(state.journal, state.meta, state.dump, **fields)  # type: ignore[arg-type]


def dump_last_index(directory: Path) -> int:
    """The index of the last entry in the dump (pysyncobj's gzip(pickle((state, last entry,
    previous entry, cluster)))). The whole dump is read: callers ask only when the journal
    alone looks short. Blocking I/O; raises on an unreadable dump."""
    with open(directory / DUMP_FILE, "rb") as f, gzip.GzipFile(fileobj=f) as g:
        return int(pysyncobj_pickle.load(g)[1][1])


def create_journal(directory: Path) -> None:
    """A new, empty journal and term file (term 0, no vote), fsynced with their directory and its
    parent before the node is marked as a started voter: a journal that exists is then never
    younger than the mark. pysyncobj opens them as it would have created them."""
    directory.mkdir(parents=True, exist_ok=True)
    journal = DurableFileJournal(str(directory / JOURNAL_FILE))
    try:
        journal.setCurrentTerm(0, None)  # _SyncedMetaStorer: fsynced, with the directory
        journal.dirty = True  # the file's creation
        journal.sync()
    finally:
        journal._destroy()
    _fsync_dir(str(directory))
    _fsync_dir(str(directory.parent))


def _journal_ends(path: Path) -> dict[str, int]:
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < FIRST_RECORD_OFFSET:  # created, killed before its header: pysyncobj reads no entry
            return {}
        f.seek(LAST_RECORD_OFFSET_OFFSET)
        end = struct.unpack("<I", f.read(4))[0]
        if end > size:
            raise ValueError(f"{path}: last record ends at {end}; expected at most the file's {size} bytes")
        if end <= FIRST_RECORD_OFFSET:  # no entry (pysyncobj reads none either)
            return {}
        f.seek(FIRST_RECORD_OFFSET + 4)
        first_index, _ = struct.unpack("<QQ", f.read(16))
        f.seek(end - 4)
        record = struct.unpack("<I", f.read(4))[0]
        f.seek(end - record - 4)
        last_index, last_term = struct.unpack("<QQ", f.read(16))
    return {"first_index": first_index, "last_index": last_index, "last_term": last_term}


class RaftSyncObj(SyncObj):
    """`SyncObj` with Raft's truncation rule and durable acknowledgements (module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        # (current term, commit index) known durable: published after each tick's sync (8.).
        self.durable_point: tuple[int, int] | None = None
        self._held_acks: list[tuple[object, int, bool, bool]] = []
        self._snapshot_idx: int | None = None  # last index of the snapshot just installed or kept
        self._votes: tuple[int, set[str]] = (-1, set())  # (term, voters whose vote was counted)
        # node id -> the leader's view of its fetches (9.); entries replaced whole, read from any thread
        self.replica_times: dict[str, ReplicaTimes] = {}
        super().__init__(*args, **kwargs)

    # --- durability: sync once per tick, then acknowledge ---
    def _journal_dirty(self) -> bool:
        return getattr(self._SyncObj__raftLog, "dirty", False)

    def sync_journal(self) -> None:
        """Make the journal durable and send the acknowledgements that waited for it."""
        journal = self._SyncObj__raftLog
        if getattr(journal, "dirty", False):
            journal.sync()
        held, self._held_acks = self._held_acks, []
        for node, next_idx, reset, success in held:
            SyncObj._SyncObj__sendNextNodeIdx(self, node, reset=reset, nextNodeIdx=next_idx, success=success)

    def _onTick(self, timeToWait=0.0):
        self.sync_journal()
        self._publish_durable_point()
        super()._onTick(timeToWait)

    def _doDestroy(self):
        # A clean stop of a running node (`destroy()` with the tick thread: the simulation's
        # crashes call `_doDestroy` directly, without a tick thread, and must lose what is unsynced):
        # sync what the last tick appended and publish it, so the last checkpoint is exact; and
        # store the commit index (raft.journal.meta), which pysyncobj writes once a second only:
        # a stopped voter's files then hold all it committed (`raftka metadata dump`).
        if self._SyncObj__conf.autoTick and self._SyncObj__destroying:
            self.sync_journal()
            self._publish_durable_point()
            self._SyncObj__raftLog.onOneSecondTimer()  # stores the meta if it changed
        super()._doDestroy()

    def _publish_durable_point(self) -> None:
        """After the sync: the term (stored with fsync before any vote) and the commit index,
        bounded by the log end (every entry in the log is synced now). One tuple, assigned
        atomically: read from any thread. Only a `DurableFileJournal` publishes (unsynced
        entries are no promise)."""
        journal = self._SyncObj__raftLog
        if isinstance(journal, DurableFileJournal) and not journal.dirty:
            self.durable_point = (self._SyncObj__raftCurrentTerm,
                                  min(self._SyncObj__raftCommitIndex, journal[-1][1]))

    def _SyncObj__sendNextNodeIdx(self, node, reset=False, nextNodeIdx=None, success=False):
        if nextNodeIdx is None:
            if self._snapshot_idx is not None:  # a snapshot's acknowledgement: it proved up to its index
                nextNodeIdx = self._snapshot_idx + 1
            else:
                nextNodeIdx = self._SyncObj__raftLog[-1][1] + 1
        if reset and not success:  # the consistency check failed: where the leader should go on from
            nextNodeIdx = min(nextNodeIdx, self._match_point() + 1)
        if self._held_acks or self._journal_dirty():
            self._held_acks.append((node, nextNodeIdx, reset, success))
            return
        SyncObj._SyncObj__sendNextNodeIdx(self, node, reset=reset, nextNodeIdx=nextNodeIdx, success=success)

    def _match_point(self) -> int:
        """The highest index at which this log surely matches any current leader's: its commit
        index (committed entries are in every later leader's log), its last applied entry or
        its snapshot's (the log's first entry), but never beyond its own log end.

        pysyncobj's follower answers a failed consistency check with "go on from my log end + 1"
        (prevLogIdx missing) or "from prevLogIdx" (term differs), and its leader sets nextIndex
        to that answer, stale or not, after advancing it optimistically on every send. A
        follower whose log ends with entries the leader does not have then gets, on every
        heartbeat, "log end + 1" again, which undoes the one-by-one back-off of the conflict
        answers (seeds 7878, 8325: a voter never caught up); a log longer than the leader's made
        the leader send `prevLogIdx: None`, answered with the same index forever. Bounding the
        answer by the match point makes every answer, late ones included, a point from which
        the next AppendEntries succeeds (Raft §5.3's back-off, in one round trip)."""
        log = self._SyncObj__raftLog
        point = max(self._SyncObj__raftCommitIndex, self._SyncObj__raftLastApplied, log[0][1])
        return min(point, log[-1][1])

    # --- a finished dump is acknowledged in the tick that wrote it ---
    def _SyncObj__tryLogCompaction(self):
        SyncObj._SyncObj__tryLogCompaction(self)
        if self._SyncObj__serializer._Serializer__pid in (-1, -2):  # written (or failed) without fork
            SyncObj._SyncObj__tryLogCompaction(self)

    # --- Raft §5.3: delete only conflicting entries ---
    def _SyncObj__onMessageReceived(self, node, message):
        if message.get("type") == "response_vote" and not self._first_vote(node, message["term"]):
            return
        if (message.get("type") == "append_entries" and "prevLogIdx" in message
                and message["term"] >= self._SyncObj__raftCurrentTerm):
            transmission = message.get("transmission")
            if transmission == "finish":  # the last piece of one large entry: reassemble it here
                data = self._SyncObj__recvTransmission + message["data"]
                self._SyncObj__recvTransmission = ""
                message = {k: v for k, v in message.items() if k not in ("transmission", "data")}
                message["entries"] = [pysyncobj_pickle.loads(data)]
                transmission = None
            if transmission is None:
                message = self._conflict_only(node, message)
                if message is None:
                    return
        elif (message.get("type") == "append_entries" and "prevLogIdx" not in message
              and message["term"] >= self._SyncObj__raftCurrentTerm):
            self._install_snapshot(node, message)
            return
        SyncObj._SyncObj__onMessageReceived(self, node, message)
        if message.get("type") == "next_node_idx" and self._isLeader():
            self._record_fetch(node, message)

    def _record_fetch(self, node, message) -> None:
        """A follower's answer is its fetch (9.): offsets are Raft indexes + 1 (log end offsets)."""
        node_id = getattr(node, "id", str(node))
        fetch_offset = message["next_node_idx"] if message.get("success") else None
        self.replica_times[node_id] = on_fetch(self.replica_times.get(node_id), self._SyncObj__raftCurrentTerm,
                                               fetch_offset, self._SyncObj__raftLog[-1][1] + 1,
                                               int(time.time() * 1000))

    def _first_vote(self, node, term: int) -> bool:
        """pysyncobj counts vote *messages*: a duplicated grant counts twice and can make two
        leaders in one term. A vote counts once per voter and term."""
        if self._votes[0] != term:
            self._votes = (term, set())
        if node.id in self._votes[1]:
            return False
        self._votes[1].add(node.id)
        return True

    # --- Raft §7: a snapshot does not wipe a log that already holds its last entry ---
    def _install_snapshot(self, node, message) -> None:
        """A piece of a snapshot (`serialized`). pysyncobj moves the commit index to the leader's
        (bounded by its own log end) on every piece, though nothing in it verifies this node's
        log; and on the last piece it replaces its dump file and clears the whole log even when
        this node is already past the snapshot (a stale or re-sent one), dropping entries it
        acknowledged. Here the commit index follows the leader only up to an installed (or
        already held) snapshot's index, and a snapshot whose last entry the node already holds
        (or compacted past) is discarded before it replaces anything (`_held_snapshot`)."""
        commit = message["commit_index"]
        serialized = message.get("serialized")
        held = self._held_snapshot() if serialized is not None and serialized[2] else None
        if held is not None:
            # The term and leader bookkeeping only (no entries, no snapshot), then the
            # acknowledgement of what the snapshot proved.
            SyncObj._SyncObj__onMessageReceived(self, node, {"type": "append_entries", "term": message["term"],
                                                             "commit_index": 0})
            self._SyncObj__sendNextNodeIdx(node, nextNodeIdx=held + 1, success=True)
            idx = held
        else:
            self._snapshot_idx = None
            try:
                SyncObj._SyncObj__onMessageReceived(self, node, dict(message, commit_index=0))
            finally:
                idx, self._snapshot_idx = self._snapshot_idx, None
        self._SyncObj__leaderCommitIndex = commit
        if idx is not None and min(commit, idx) > self._SyncObj__raftCommitIndex:
            self._SyncObj__raftCommitIndex = min(commit, idx)
            self._SyncObj__raftLog.setRaftCommitIndex(self._SyncObj__raftCommitIndex)

    def _held_snapshot(self) -> int | None:
        """On a snapshot's last piece (pysyncobj's last piece carries no data: every byte is in
        the incoming file already), before pysyncobj renames that file over this node's own
        dump: the snapshot's last index if this node's log holds that entry (same index and
        term) or was compacted past it. The incoming file is then dropped: replacing the dump
        by an older one while the journal is kept would leave a dump that does not match the
        journal, and pysyncobj would clear the journal at the next start (seed 9220: committed
        entries lost, a committed entry overwritten) and serve that stale dump to followers
        whose nextIndex is below its log (seeds 1984 and others: a follower never caught up)."""
        serializer = self._SyncObj__serializer
        incoming = getattr(serializer, "_Serializer__incomingTransmissionFile", None)
        if incoming is None or getattr(serializer, "_Serializer__deserializer", None) is not None:
            return None
        try:
            incoming.flush()
            with open(incoming.name, "rb") as f, gzip.GzipFile(fileobj=f) as g:
                last = pysyncobj_pickle.load(g)[1]  # the dump's last entry: (command, idx, term)
        except Exception:  # noqa: BLE001 - a broken transfer: pysyncobj's own load reports it
            return None
        log = self._SyncObj__raftLog
        first, end, idx = log[0][1], log[-1][1], last[1]
        if not (idx < first or (idx <= end and log[idx - first][2] == last[2])):
            return None
        incoming.close()
        serializer._Serializer__incomingTransmissionFile = None
        with contextlib.suppress(OSError):
            os.remove(incoming.name)
        return idx

    def _SyncObj__loadDumpFile(self, clearJournal):
        if clearJournal:  # a snapshot from the leader, installed (at startup pysyncobj passes False)
            try:
                self._snapshot_idx = self._SyncObj__serializer.deserialize()[1][1]
            except Exception:  # noqa: BLE001 - pysyncobj's own load reports it
                self._snapshot_idx = None
        else:
            self._trim_journal_to_dump()
        SyncObj._SyncObj__loadDumpFile(self, clearJournal)

    def _trim_journal_to_dump(self) -> None:
        """At startup pysyncobj keeps the journal only if it starts with the dump's last two
        entries, and otherwise clears it. A compaction writes the dump, then deletes the
        journal's head; a power loss before that deletion is synced leaves a journal that
        starts earlier but holds the dump's entries and synced, acknowledged entries after
        them: clearing it loses those. Raft §7: keep the entries that follow the snapshot's
        last one, so the head is deleted here first."""
        try:
            data = self._SyncObj__serializer.deserialize()
            prev, last = data[2], data[1]  # (command, idx, term)
        except Exception:  # noqa: BLE001 - pysyncobj's own load reports it
            return
        log = self._SyncObj__raftLog
        if not len(log):
            return
        first, end = log[0][1], log[-1][1]
        if first < prev[1] and last[1] <= end and log[prev[1] - first][2] == prev[2] \
                and log[last[1] - first][2] == last[2]:
            log.deleteEntriesTo(prev[1] - first)

    def _conflict_only(self, node, message):
        """The AppendEntries pysyncobj should process so that it truncates only on a conflict;
        None when it is fully handled here (all entries already held, log longer)."""
        log = self._SyncObj__raftLog
        prev_idx, prev_term = message["prevLogIdx"], message["prevLogTerm"]
        entries = message.get("entries", [])
        first, last = log[0][1], log[-1][1]
        if prev_idx is None or prev_idx < first or prev_idx > last or log[prev_idx - first][2] != prev_term:
            return message  # consistency check fails: pysyncobj answers it (and truncates nothing)
        verified = prev_idx + len(entries)
        skip = 0
        while skip < len(entries):
            idx = entries[skip][1]
            if idx > last or log[idx - first][2] != entries[skip][2]:
                break
            skip += 1
        message = dict(message, commit_index=min(message["commit_index"], verified))
        if skip < len(entries) or verified >= last:
            # pysyncobj deletes after the new prevLogIdx: from a conflicting entry, or nothing.
            if skip:
                message["prevLogIdx"], message["prevLogTerm"] = entries[skip - 1][1], entries[skip - 1][2]
                message["entries"] = entries[skip:]
            return message
        # Every entry is held already and the log goes on: no truncation at all. pysyncobj
        # still does the term/leader bookkeeping and the commit index (a message without
        # prevLogIdx); the acknowledgement is sent here.
        del message["prevLogIdx"], message["prevLogTerm"]
        message.pop("entries", None)
        SyncObj._SyncObj__onMessageReceived(self, node, message)
        self._SyncObj__sendNextNodeIdx(node, nextNodeIdx=verified + 1, success=True)
        return None
