"""The simulation's checker (raft_meta/quorum/simulation/checker.py) on hand-made states: each
invariant fires on the state that breaks it."""

from __future__ import annotations

from dataclasses import dataclass, field

import pysyncobj.pickle as pysyncobj_pickle
import pytest
from pysyncobj.syncobj import _RAFT_STATE

from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.quorum.simulation.checker import Checker, InvariantViolation

_LEADER, _FOLLOWER = _RAFT_STATE.LEADER, _RAFT_STATE.FOLLOWER


def _cmd(record: bytes) -> bytes:
    return b"\x00" + pysyncobj_pickle.dumps((0, (record,)))


@dataclass
class _Journal:
    entries: list


@dataclass
class _Sync:
    entries: list
    commit: int
    term: int = 1
    leader: bool = False

    def __post_init__(self) -> None:
        self._SyncObj__raftLog = _Journal(self.entries)
        self._SyncObj__raftCommitIndex = self.commit
        # What the checker reads directly (as _getTerm and _isLeader would).
        self._SyncObj__raftCurrentTerm = self.term
        self._SyncObj__raftState = _LEADER if self.leader else _FOLLOWER

    def _getTerm(self) -> int:
        return self.term

    def _isLeader(self) -> bool:
        return self.leader


@dataclass
class _Log:
    image: MetadataImage = field(default_factory=MetadataImage)
    dump_loads: int = 0
    last: int = 0
    offsets: list = field(default_factory=list)
    payloads: list = field(default_factory=list)


NOOP = (b"\x01", 1, 0)
A, B = _cmd(b"a"), _cmd(b"b")


def test_two_leaders_in_one_term() -> None:
    checker = Checker()
    checker.after_step("n1", _Sync([NOOP], 1, term=2, leader=True), _Log())
    with pytest.raises(InvariantViolation, match="two leaders in term 2"):
        checker.after_step("n2", _Sync([NOOP], 1, term=2, leader=True), _Log())


def test_a_committed_entry_changes() -> None:
    checker = Checker()
    checker.after_step("n1", _Sync([NOOP, (A, 2, 1)], 2), _Log())
    with pytest.raises(InvariantViolation, match="committed entry 2 changed"):
        checker.after_step("n2", _Sync([NOOP, (B, 2, 2)], 2), _Log())


def test_a_running_node_loses_a_committed_entry() -> None:
    checker = Checker()
    checker.after_step("n1", _Sync([NOOP, (A, 2, 1), (A, 3, 1)], 3), _Log())
    with pytest.raises(InvariantViolation, match="n1 lost committed entry 3"):
        checker.after_step("n1", _Sync([NOOP, (A, 2, 1)], 2), _Log())
    checker = Checker()
    checker.after_step("n1", _Sync([NOOP, (A, 2, 1), (A, 3, 1)], 3), _Log())
    checker.crashed("n1")  # a crash may take unsynced entries
    checker.after_step("n1", _Sync([NOOP, (A, 2, 1)], 2), _Log())


def test_log_matching() -> None:
    checker = Checker()
    checker.entry_added("n1", [NOOP], (A, 2, 1))
    with pytest.raises(InvariantViolation, match="different command at index 2 term 1"):
        checker.entry_added("n2", [NOOP], (B, 2, 1))
    checker.entry_added("n1", [NOOP, (A, 2, 1)], (A, 3, 2))
    with pytest.raises(InvariantViolation, match="after term 3, another log after term 1"):
        checker.entry_added("n3", [NOOP, (A, 2, 3)], (A, 3, 2))


def test_images_differ_at_one_offset() -> None:
    checker = Checker()
    checker.after_step("n1", _Sync([NOOP], 1), _Log(MetadataImage(offset=5, next_producer_id=0)))
    with pytest.raises(InvariantViolation, match="image digest differs at offset 5"):
        checker.after_step("n2", _Sync([NOOP], 1), _Log(MetadataImage(offset=5, next_producer_id=1000)))


def test_an_acknowledged_record_is_not_the_committed_one() -> None:
    checker = Checker()
    checker.after_step("n1", _Sync([NOOP, (A, 2, 1)], 2), _Log())
    checker.ack("r1", 2, b"b", "n1")
    with pytest.raises(InvariantViolation, match="acknowledged r1"):
        checker.after_step("n1", _Sync([NOOP, (A, 2, 1)], 2), _Log())


def test_an_acknowledgement_before_the_entry_is_durable() -> None:
    class Disk:
        fsync = True
        entries = [NOOP]

    with pytest.raises(InvariantViolation, match="acknowledged index 2 before it was durable"):
        Checker().acknowledged("n2", Disk(), {"type": "next_node_idx", "next_node_idx": 3, "success": True})
