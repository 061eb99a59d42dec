"""A voter's simulated journal: what survives a crash, and what a power loss takes away.

`SimDisk` is the node's journal "file" across restarts: `durable` (entries, term, vote,
commit index as they are on the platter) plus `pending`, the writes since the last sync
(in the page cache). A process crash (kill -9) keeps everything the page cache holds; a
power loss keeps the durable state plus a random *prefix* of the pending writes (the
unsynced tail is lost). `SimJournal` is the pysyncobj `Journal` a running node uses on it.

With `fsync` on (raftka's default, metadata.log.fsync.enable) the term and vote are
written through at once, and `RaftSyncObj` calls `sync()` before it acknowledges entries;
with it off nothing is ever synced, as pysyncobj does by itself.
"""

from __future__ import annotations

import random

from pysyncobj.journal import Journal


class SimDisk:
    def __init__(self, fsync: bool) -> None:
        self.fsync = fsync
        self.entries: list[tuple[bytes, int, int]] = []  # durable journal entries
        self.meta: dict[str, object] = {}  # durable term / votedFor / raftCommitIndex
        self.pending: list[tuple] = []  # ("add", entry) | ("delete_from", pos) | ("clear",) | ("meta", k, v)

    def open(self) -> SimJournal:
        return SimJournal(self)

    def sync(self) -> None:
        for op in self.pending:
            self._apply(op)
        self.pending = []

    def crash(self, rng: random.Random, power_loss: bool) -> int:
        """The state a restarted node finds; returns how many pending writes were lost."""
        keep = len(self.pending) if not power_loss else rng.randint(0, len(self.pending))
        lost = len(self.pending) - keep
        for op in self.pending[:keep]:
            self._apply(op)
        self.pending = []
        return lost

    def _apply(self, op: tuple) -> None:
        kind = op[0]
        if kind == "add":
            self.entries.append(op[1])
        elif kind == "delete_from":
            del self.entries[op[1]:]
        elif kind == "delete_to":
            del self.entries[:op[1]]
        elif kind == "clear":
            self.entries = []
        else:
            self.meta[op[1]] = op[2]


class SimJournal(Journal):
    """pysyncobj's journal interface over a `SimDisk` (entries are `(command, idx, term)`)."""

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk
        self.entries = list(disk.entries)
        self.dirty = False
        self.meta = dict(disk.meta)
        self.on_add = None  # the checker's log-matching hook: on_add(entries before, entry)

    def _write(self, op: tuple) -> None:
        self.disk.pending.append(op)
        self.dirty = True

    def add(self, command, idx, term):
        entry = (bytes(command), idx, term)
        if self.on_add is not None:
            self.on_add(self.entries, entry)
        self.entries.append(entry)
        self._write(("add", entry))

    def clear(self):
        self.entries = []
        self._write(("clear",))

    def deleteEntriesFrom(self, entryFrom):
        del self.entries[entryFrom:]
        self._write(("delete_from", entryFrom))

    def deleteEntriesTo(self, entryTo):
        del self.entries[:entryTo]
        self._write(("delete_to", entryTo))

    def __getitem__(self, item):
        return self.entries[item]

    def __len__(self):
        return len(self.entries)

    def _destroy(self):
        pass

    def sync(self) -> None:
        if self.disk.fsync:
            self.disk.sync()
            self.dirty = False

    def _set_meta(self, key: str, value: object, write_through: bool) -> None:
        self.meta[key] = value
        if write_through and self.disk.fsync:
            self.disk.meta[key] = value
        else:
            self.disk.pending.append(("meta", key, value))

    def setRaftCommitIndex(self, raftCommitIndex):
        self._set_meta("raftCommitIndex", raftCommitIndex, write_through=False)

    def getRaftCommitIndex(self):
        return self.meta.get("raftCommitIndex", 1)

    def setCurrentTerm(self, term, votedForNodeId):
        # pysyncobj stores these before it sends any vote; raftka fsyncs that write.
        self._set_meta("currentTerm", term, write_through=True)
        self._set_meta("votedForNodeId", votedForNodeId, write_through=True)

    def getCurrentTerm(self):
        return self.meta.get("currentTerm", 0)

    def getVotedForNodeId(self):
        return self.meta.get("votedForNodeId")
