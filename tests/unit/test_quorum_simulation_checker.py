"""The simulation's checker (raft_meta/quorum/simulation/checker.py), fed histories that break each
invariant it checks: every one is caught, at the step that breaks it. The checker is
incremental (each step looks only at what changed since the node's last check), so several
histories break the invariant only after steps that pass.

The nodes here are plain state holders with the pysyncobj attributes the checker reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pysyncobj.pickle as pysyncobj_pickle
import pytest
from pysyncobj.syncobj import _RAFT_STATE

from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.quorum.simulation.checker import Checker, InvariantViolation


def _command(record: bytes) -> bytes:
    """A pysyncobj command that calls a replicated method with `record` (what `_record_of` reads)."""
    return b"\x00" + pysyncobj_pickle.dumps((0, (record,), {}))


A, B, C = _command(b"a"), _command(b"b"), _command(b"c")


@dataclass
class _Node:
    name: str
    entries: list = field(default_factory=lambda: [(b"", 0, 0)])  # pysyncobj's first entry: the dump's
    commit: int = 0
    term: int = 1
    leader: bool = False
    image: MetadataImage = field(default_factory=MetadataImage)
    last: int = 0
    offsets: list = field(default_factory=list)
    payloads: list = field(default_factory=list)
    disk: object = None

    # what the checker reads (pysyncobj's private attributes, and its accessors)
    @property
    def _SyncObj__raftLog(self):
        return SimpleNamespace(entries=self.entries)

    @property
    def _SyncObj__raftCommitIndex(self):
        return self.commit

    @property
    def _SyncObj__raftCurrentTerm(self):
        return self.term

    @property
    def _SyncObj__raftState(self):
        return _RAFT_STATE.LEADER if self.leader else _RAFT_STATE.FOLLOWER

    def _getTerm(self):
        return self.term

    def _isLeader(self):
        return self.leader

    dump_loads = 0


def started(c: Checker, *nodes: _Node) -> tuple[_Node, ...]:
    """Nodes as after a start: the checker's view of what they applied begins here (as after a
    dump load: `record_applied` takes the first call as the node's starting point)."""
    for node in nodes:
        c.record_applied(node.name, node, node)
    return nodes


def step(checker: Checker, node: _Node) -> None:
    checker.after_step(node.name, node, node, node.disk)


def apply(checker: Checker, node: _Node, offset: int, record: bytes, image: MetadataImage | None = None) -> None:
    node.offsets.append(offset)
    node.payloads.append(record)
    node.last = offset
    node.image = image or MetadataImage(offset=offset)
    checker.record_applied(node.name, node, node)
    step(checker, node)


def add(checker: Checker, node: _Node, command: bytes, idx: int, term: int) -> None:
    checker.entry_added(node.name, node.entries, (command, idx, term))
    node.entries.append((command, idx, term))


# Each history: a function that drives a Checker; it must raise with the message given.
def two_leaders(c: Checker) -> None:
    a, b = started(c, _Node("a", term=2, leader=True), _Node("b", term=2))
    step(c, a)
    step(c, b)
    b.leader = True
    step(c, b)


def log_matching_command(c: Checker) -> None:
    a, b = started(c, _Node("a"), _Node("b"))
    add(c, a, A, 1, 1)
    add(c, b, A, 1, 1)
    add(c, a, B, 2, 1)
    add(c, b, C, 2, 1)


def log_matching_previous_term(c: Checker) -> None:
    a, b = started(c, _Node("a"), _Node("b"))
    add(c, a, A, 1, 1)
    add(c, a, B, 2, 2)
    add(c, b, A, 1, 2)
    add(c, b, B, 2, 2)


def committed_entry_changed(c: Checker) -> None:
    a, b = started(c, _Node("a"), _Node("b"))
    a.entries += [(A, 1, 1), (B, 2, 1)]
    a.commit = 2
    step(c, a)
    b.entries += [(A, 1, 1), (C, 2, 2)]
    b.commit = 1
    step(c, b)  # index 1 agrees
    b.commit = 2
    step(c, b)


def committed_entry_lost(c: Checker) -> None:
    a, b = started(c, _Node("a"), _Node("b"))
    a.entries += [(A, 1, 1), (B, 2, 1), (C, 3, 1)]
    a.commit = 3
    step(c, a)
    b.entries += [(A, 1, 1), (B, 2, 1)]
    step(c, b)  # b holds committed entry 2 (its commit index is still 0)
    del b.entries[2:]
    step(c, b)


def applied_another_record(c: Checker) -> None:
    a, b = started(c, _Node("a"), _Node("b"))
    apply(c, a, 1, b"a")
    apply(c, b, 1, b"b")


def applied_after_another_offset(c: Checker) -> None:
    a, b = started(c, _Node("a"), _Node("b"))
    apply(c, a, 1, b"a")
    apply(c, a, 3, b"c")
    apply(c, b, 2, b"b")
    apply(c, b, 3, b"c")


def applied_not_committed(c: Checker) -> None:
    a, b = started(c, _Node("a"), _Node("b"))
    a.entries += [(A, 1, 1)]
    a.commit = 1
    step(c, a)
    apply(c, b, 1, b"b")


def image_differs(c: Checker) -> None:
    a, b = started(c, _Node("a"), _Node("b"))
    apply(c, a, 1, b"a", MetadataImage(offset=1, cluster_id="x"))
    apply(c, b, 1, b"a", MetadataImage(offset=1, cluster_id="x"))  # equal: passes
    apply(c, a, 2, b"b", MetadataImage(offset=2, next_producer_id=1000))
    apply(c, b, 2, b"b", MetadataImage(offset=2, next_producer_id=2000))


def acknowledged_not_committed(c: Checker) -> None:
    (a,) = started(c, _Node("a"))
    c.ack("r1", 1, b"b", "a")
    step(c, a)  # not committed yet: waits
    a.entries += [(A, 1, 1)]
    a.commit = 1
    step(c, a)


def acknowledged_another_applied_record(c: Checker) -> None:
    (a,) = started(c, _Node("a"))
    c.ack("r1", 1, b"b", "a")
    apply(c, a, 1, b"a")  # applied from a snapshot's journal: no committed entry seen


def acknowledged_before_durable(c: Checker) -> None:
    disk = SimpleNamespace(fsync=True, entries=[(A, 1, 1)])
    c.acknowledged("a", disk, {"type": "next_node_idx", "success": True, "next_node_idx": 2})  # index 1: durable
    c.acknowledged("a", disk, {"type": "next_node_idx", "success": True, "next_node_idx": 3})


def leader_commit_beyond_durable(c: Checker) -> None:
    (a,) = started(c, _Node("a", leader=True, disk=SimpleNamespace(fsync=True, entries=[(b"", 0, 0), (A, 1, 1)])))
    a.entries += [(A, 1, 1), (B, 2, 1)]
    a.commit = 1
    step(c, a)
    a.commit = 2
    step(c, a)


def critical_line(c: Checker) -> None:
    (a,) = started(c, _Node("a"))
    step(c, a)
    c.critical.lines.append("truncating already-applied log entries")
    step(c, a)


@pytest.mark.parametrize(("history", "message"), [
    (two_leaders, "two leaders in term 2: a and b"),
    (log_matching_command, "log matching: b appended a different command at index 2 term 1"),
    (log_matching_previous_term, "log matching: b holds index 2 term 2 after term 2, another log after term 1"),
    (committed_entry_changed, "committed entry 2 changed on b: term 1 -> 2"),
    (committed_entry_lost, r"b lost committed entry 2 \(its log now ends at 1\) without a crash"),
    (applied_another_record, "b applied a different record at offset 1"),
    (applied_after_another_offset, "b applied offset 3 after offset 2; another node after 1"),
    (applied_not_committed, "b applied offset 1, which is not the committed entry there"),
    (image_differs, "image digest differs at offset 2 on b"),
    (acknowledged_not_committed, r"acknowledged r1 \(on a\) at offset 1 is not the committed entry"),
    (acknowledged_another_applied_record, r"acknowledged r1 \(on a\) at offset 1: another record is there"),
    (acknowledged_before_durable, r"a acknowledged index 2 before it was durable \(durable journal ends at 1\)"),
    (leader_commit_beyond_durable, r"leader a committed index 2 beyond its durable journal \(1\)"),
    (critical_line, "pysyncobj CRITICAL on a: truncating already-applied log entries"),
])
def test_the_checker_catches_each_broken_invariant(history, message: str) -> None:
    with pytest.raises(InvariantViolation, match=message):
        history(Checker())


def test_a_history_that_keeps_the_invariants_passes() -> None:
    c = Checker()
    a, b = started(c, _Node("a", leader=True), _Node("b"))
    for n, (command, record) in enumerate([(A, b"a"), (B, b"b")], start=1):
        add(c, a, command, n, 1)
        add(c, b, command, n, 1)
        a.commit = b.commit = n
        step(c, a)
        step(c, b)
        c.ack(f"r{n}", n, record, "a")
        apply(c, a, n, record, MetadataImage(offset=n, next_producer_id=n))
        apply(c, b, n, record, MetadataImage(offset=n, next_producer_id=n))
    assert c.acked == 2 and not c.acks
    assert c.max_committed == 2
