"""The invariants the simulation checks after every step (one tick or one delivered message).

Safety (Raft's, and the metadata's):
- at most one leader per term;
- log matching: two logs that hold an entry with the same index and term hold the same
  command, and the same term just before it (so, by induction, identical prefixes);
- a committed entry never changes: every node's entries up to its commit index agree with
  the reference `committed` built from all of them;
- a running node never loses an entry it held once it was committed (pysyncobj's
  truncation of matching entries breaks exactly this); a crash may take unsynced entries;
- applied sequences are prefixes of each other: the record a node applies at offset o is
  the committed one, and the offset it applied just before o is the same on every node;
- the image digest (`raft_meta/metadata/snapshot.py::image_digest`) is equal on every node at every
  applied offset;
- every acknowledged submission is the committed record at its offset;
- durability (with fsync on): a voter acknowledges entries only once they are on its
  SimDisk's durable part, and a leader's commit index never passes its own durable log;
- pysyncobj logs no CRITICAL line.

Liveness is the runner's (`runner.py`): it needs time, not a step.
"""

from __future__ import annotations

import logging

import pysyncobj.pickle as pysyncobj_pickle
from pysyncobj.syncobj import _RAFT_STATE

from raftka.raft_meta.metadata.snapshot import image_digest

_LEADER = _RAFT_STATE.LEADER


class InvariantViolation(AssertionError):
    pass


class _CriticalLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.CRITICAL)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class NodeView:
    """What the checker remembers about one node since its last (re)start."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.checked_commit = 0
        self.held = 0  # highest committed index this node was seen to hold
        self.applied_last = 0
        self.dump_loads = -1
        self.digest_offset = -1
        self.new_applied: list[tuple[int, bytes | None, int]] = []


class Checker:
    def __init__(self) -> None:
        self.leaders: dict[int, str] = {}
        self.committed: dict[int, tuple[int, bytes]] = {}  # index -> (term, command)
        self.max_committed = 0
        self.entry_terms: dict[tuple[int, int], tuple[bytes, int | None]] = {}  # (idx, term) -> (command, prev term)
        self.applied: dict[int, tuple[bytes, int | None]] = {}  # offset -> (record, previous offset on the node)
        self.images: dict[int, object] = {}  # offset -> the first image seen there
        self.acks: list[tuple[str, int, bytes, str]] = []  # (request id, offset, record, node) to verify
        self.acked = 0
        self.views: dict[str, NodeView] = {}
        self.critical = _CriticalLines()
        self.watch_critical = True

    def fail(self, message: str) -> None:
        raise InvariantViolation(message)

    # --- hooks ---
    def entry_added(self, node: str, entries: list, entry: tuple) -> None:
        """SimJournal.add: the log-matching check, entry by entry (entries: the log before it)."""
        command, idx, term = entry
        prev_term = entries[-1][2] if entries and entries[-1][1] == idx - 1 else None
        known = self.entry_terms.get((idx, term))
        if known is None:
            self.entry_terms[(idx, term)] = (command, prev_term)
            return
        if known[0] != command:
            self.fail(f"log matching: {node} appended a different command at index {idx} term {term}")
        if prev_term is not None:
            if known[1] is None:
                self.entry_terms[(idx, term)] = (command, prev_term)
            elif known[1] != prev_term:
                self.fail(f"log matching: {node} holds index {idx} term {term} after term {prev_term}, "
                          f"another log after term {known[1]}")

    def ack(self, request_id: str, offset: int, record: bytes, node: str) -> None:
        self.acks.append((request_id, offset, record, node))

    def acknowledged(self, node: str, disk, message: dict) -> None:
        """A voter sends `next_node_idx` (its acknowledgement); with fsync on it must be durable."""
        if not message.get("success") or not disk.fsync:
            return
        idx = message["next_node_idx"] - 1
        durable = disk.entries
        if not durable or durable[-1][1] < idx:  # (below durable[0]: in the dump, durable too)
            end = durable[-1][1] if durable else 0
            self.fail(f"{node} acknowledged index {idx} before it was durable (durable journal ends at {end})")

    def crashed(self, node: str) -> None:
        self._view(node).reset()

    def _view(self, node: str) -> NodeView:
        view = self.views.get(node)
        if view is None:
            view = self.views[node] = NodeView()
        return view

    # --- after every step ---
    def after_step(self, node: str, sync, mlog, disk=None) -> None:
        # Incremental: each step looks only at what the step may have changed (the node's term,
        # role, log end and commit index; the entries committed since its last check; what it
        # applied since). Runs some 2 000 times per seed: pysyncobj's private attributes are
        # read directly (as `_getTerm`, `_isLeader` would).
        view = self.views.get(node) or self._view(node)
        if self.critical.lines and self.watch_critical:
            self.fail(f"pysyncobj CRITICAL on {node}: {self.critical.lines[0]}")
        commit_index = sync._SyncObj__raftCommitIndex
        if sync._SyncObj__raftState == _LEADER:
            term = sync._SyncObj__raftCurrentTerm
            leader = self.leaders.setdefault(term, node)
            if leader != node:
                self.fail(f"two leaders in term {term}: {leader} and {node}")
            if disk is not None and disk.fsync and disk.entries and commit_index > disk.entries[-1][1]:
                self.fail(f"leader {node} committed index {commit_index} beyond its durable "
                          f"journal ({disk.entries[-1][1]})")
        entries = sync._SyncObj__raftLog.entries
        first, last = entries[0][1], entries[-1][1]
        if last < view.held:
            self.fail(f"{node} lost committed entry {view.held} (its log now ends at {last}) without a crash")
        commit = commit_index if commit_index < last else last
        checked = view.checked_commit
        if checked < commit:  # else nothing newly committed to check (the full range would be empty)
            start = max(min(checked, commit), first - 1) + 1
            committed = self.committed
            for idx in range(start, commit + 1):
                command, _, entry_term = entries[idx - first]
                ref = committed.get(idx)
                if ref is None:
                    committed[idx] = (entry_term, command)
                    if idx > self.max_committed:
                        self.max_committed = idx
                elif ref[0] != entry_term or ref[1] != command:
                    self.fail(f"committed entry {idx} changed on {node}: term {ref[0]} -> {entry_term}")
        view.checked_commit = commit
        k = last if last < self.max_committed else self.max_committed
        if k > view.held and k >= first:
            ref = self.committed.get(k)
            if ref is not None and ref[0] == entries[k - first][2]:
                view.held = k
        if view.new_applied or mlog.image.offset != view.digest_offset:
            self._check_applied(node, view, mlog)
        if self.acks:
            self._check_acks()

    def record_applied(self, node: str, mlog, sync) -> None:
        """`_MetadataLog.on_change`: called after each `apply` (and after a dump load)."""
        view = self.views.get(node) or self._view(node)
        if mlog.dump_loads != view.dump_loads:  # a snapshot replaced the records: go on after it
            view.dump_loads = mlog.dump_loads
            view.applied_last = mlog.last
            return
        offset = mlog.last
        if offset == view.applied_last:
            return  # a duplicate request id: nothing applied
        if mlog.offsets and mlog.offsets[-1] == offset:
            record = mlog.payloads[-1]
        else:  # the tail just became a snapshot: the record is the journal's entry at that index
            entries = sync._SyncObj__raftLog.entries
            record = _record_of(entries[offset - entries[0][1]][0])
        view.new_applied.append((offset, record, view.applied_last))
        view.applied_last = offset

    def _check_applied(self, node: str, view: NodeView, mlog) -> None:
        for offset, record, prev in view.new_applied:
            ref = self.applied.get(offset)
            if ref is None:
                self.applied[offset] = (record, prev)
                self._check_is_committed(node, offset, record)
            elif ref[0] != record:
                self.fail(f"{node} applied a different record at offset {offset}")
            elif ref[1] != prev and ref[1] is not None and prev is not None:
                self.fail(f"{node} applied offset {offset} after offset {prev}; another node after {ref[1]}")
        view.new_applied.clear()
        image = mlog.image
        if image.offset != view.digest_offset:
            view.digest_offset = image.offset
            ref = self.images.setdefault(image.offset, image)
            # Equal images have equal digests: the digests are computed only when the images differ
            # (map order aside, which the digest ignores).
            if ref is not image and ref != image and image_digest(ref) != image_digest(image):
                self.fail(f"image digest differs at offset {image.offset} on {node}: "
                          f"{image_digest(ref)[:16]} vs {image_digest(image)[:16]}")

    def _check_is_committed(self, node: str, offset: int, record: bytes) -> None:
        ref = self.committed.get(offset)
        if ref is None:
            return  # below every log seen (compacted before it was checked)
        if _record_of(ref[1]) != record:
            self.fail(f"{node} applied offset {offset}, which is not the committed entry there")

    def _check_acks(self) -> None:
        waiting = []
        for request_id, offset, record, node in self.acks:
            ref = self.committed.get(offset)
            if ref is None:
                applied = self.applied.get(offset)
                if applied is None:
                    waiting.append((request_id, offset, record, node))
                    continue
                if applied[0] != record:
                    self.fail(f"acknowledged {request_id} (on {node}) at offset {offset}: another record is there")
            elif _record_of(ref[1]) != record:
                self.fail(f"acknowledged {request_id} (on {node}) at offset {offset} is not the committed entry")
            self.acked += 1
        self.acks = waiting


def _record_of(command: bytes) -> bytes | None:
    """The metadata record a pysyncobj command carries (None: a no-op or another command)."""
    if command[:1] != b"\x00":
        return None
    call = pysyncobj_pickle.loads(command[1:])
    if isinstance(call, tuple) and len(call) >= 2 and call[1]:
        return bytes(call[1][0])
    return None
