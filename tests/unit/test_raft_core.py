"""raft_meta/quorum/pysyncobj_patches.py's durable journal on real files (the Raft fixes are tested through the
simulation: tests/unit/test_quorum_simulation.py)."""

from __future__ import annotations

from pathlib import Path

from pysyncobj.journal import FileJournal

from raftka.raft_meta.quorum.pysyncobj_patches import (
    DurableFileJournal,
    JournalSpec,
    _create_journal,
)


def test_durable_journal_knows_what_is_unsynced(tmp_path: Path) -> None:
    path = str(tmp_path / "raft.journal")
    journal = DurableFileJournal(path)
    assert not journal.dirty
    journal.add(b"\x01", 1, 0)
    journal.add(b"\x00payload", 2, 1)
    assert journal.dirty
    journal.sync()
    assert (journal.dirty, journal.syncs) == (False, 1)
    journal.sync()  # nothing new: no fsync
    assert journal.syncs == 1
    journal.deleteEntriesFrom(1)
    assert journal.dirty
    journal.sync()
    journal.setCurrentTerm(3, "n2:1")  # written (and fsynced) at once
    journal._destroy()
    reopened = DurableFileJournal(path)
    assert [(e[1], e[2]) for e in reopened] == [(1, 0)]
    assert (reopened.getCurrentTerm(), reopened.getVotedForNodeId()) == (3, "n2:1")
    assert not (tmp_path / "raft.journal.meta.tmp").exists()


def test_journal_spec_picks_the_journal(tmp_path: Path) -> None:
    path = str(tmp_path / "j")
    assert isinstance(_create_journal(JournalSpec(path, lambda: DurableFileJournal(path))), DurableFileJournal)
    plain = _create_journal(str(tmp_path / "k"))
    assert type(plain) is FileJournal
