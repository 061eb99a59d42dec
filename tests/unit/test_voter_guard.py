"""A voter never forgets (raft_meta/quorum/voter_guard.py): the start decision as a table, the journal
reader on journals pysyncobj wrote, and the shell on real directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftka.raft_meta.config.node_config import NodeConfig, parse_node_config, parse_properties
from raftka.raft_meta.quorum.pysyncobj_patches import (
    DurableFileJournal,
    JournalState,
    read_journal_state,
)
from raftka.raft_meta.quorum.storage_format import (
    MetaProperties,
    format_storage,
    random_cluster_id,
    read_meta_properties,
    write_meta_properties,
)
from raftka.raft_meta.quorum.voter_guard import (
    CHECKPOINT_FILE,
    Action,
    JournalLost,
    VoterCheckpoint,
    decide_start,
    guard_start,
    read_checkpoint,
    write_checkpoint,
)

# A journal as a voter leaves it: entries 1..40 (term 3), its term file, no dump yet.
FULL = JournalState(journal=True, meta=True, dump=False, first_index=1, last_index=40, last_term=3, term=3)
ABSENT = JournalState(journal=False, meta=False, dump=False)
CKPT = VoterCheckpoint(term=3, commit_index=38)

CONFIG = """\
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
controller.quorum.secret=voter-guard-s3cret
log.dirs={dirs}
"""

START, FIRST, REFUSE = Action.START, Action.FIRST_START, Action.REFUSE

# (journal state, marked voter.started, checkpoint) -> (action, mark, words in the problem)
TABLE = [
    # formatted, never started: create the journal, then mark
    (ABSENT, False, None, FIRST, True, ""),
    # started before, journal lost: never re-bootstrap
    (ABSENT, True, None, REFUSE, False, "is missing"),
    (ABSENT, True, CKPT, REFUSE, False, "is missing"),
    (ABSENT, False, CKPT, REFUSE, False, "is missing"),  # meta.properties re-stamped, checkpoint kept
    # a normal restart (kill -9 or clean)
    (FULL, True, CKPT, START, False, ""),
    (FULL, True, None, START, False, ""),
    # a node started before this guard existed: start, and mark it
    (FULL, False, None, START, True, ""),
    # one file of the journal lost
    (JournalState(False, True, False, term=3), True, None, REFUSE, False, "no raft.journal"),
    (JournalState(True, False, False, 1, 40, 3), True, None, REFUSE, False, "no raft.journal.meta"),
    (JournalState(True, False, False, 1, 40, 3), False, None, START, True, ""),  # crashed before the first vote
    # compacted journal without its dump
    (JournalState(True, True, False, 5001, 5040, 3, 3), True, None, REFUSE, False, "raft.dump"),
    (JournalState(True, True, False, 5001, 5040, 3, 3), False, None, REFUSE, False, "raft.dump"),
    (JournalState(True, True, True, 5001, 5040, 3, 3), True, None, START, False, ""),
    # only the dump: pysyncobj restarts from it, but the entries after it are gone
    (JournalState(False, False, True), True, None, REFUSE, False, "no raft.journal"),
    # shorter than acknowledged: an older copy
    (JournalState(True, True, False, 1, 20, 3, 3), True, CKPT, REFUSE, False, "ends at index 20"),
    (JournalState(True, True, False, 1, 38, 3, 3), True, CKPT, START, False, ""),  # exactly the commit
    # a follower's uncommitted tail replaced by a new leader's: shorter, but not below the commit
    (JournalState(True, True, False, 1, 39, 4, 4), True, CKPT, START, False, ""),
    # killed between a compaction's clear and its rewrite: the dump holds what the journal lost
    (JournalState(True, True, True, 0, 0, 0, 3, dump_index=38), True, CKPT, START, False, ""),
    (JournalState(True, True, True, 0, 0, 0, 3, dump_index=30), True, CKPT, REFUSE, False, "ends at index 30"),
    # the term went back (an older raft.journal.meta)
    (JournalState(True, True, False, 1, 40, 2, 2), True, CKPT, REFUSE, False, "at term 2"),
    (JournalState(True, True, False, 1, 40, 3, 0), True, CKPT, START, False, ""),  # last entry's term counts
    # empty journal (killed right after its creation): nothing acknowledged yet
    (JournalState(True, True, False, term=0), True, None, START, False, ""),
    (JournalState(True, True, False, term=0), True, CKPT, REFUSE, False, "ends at index 0"),
    # unreadable
    (JournalState(True, True, False, damaged="ValueError: x"), True, None, REFUSE, False, "cannot be read"),
    (JournalState(True, True, False, damaged="ValueError: x"), False, None, REFUSE, False, "cannot be read"),
]


@pytest.mark.parametrize(("journal", "started", "checkpoint", "action", "mark", "words"), TABLE)
def test_start_decision(journal, started, checkpoint, action, mark, words) -> None:
    decision = decide_start(journal, started, checkpoint)
    assert (decision.action, decision.mark) == (action, mark)
    assert words in decision.problem
    assert bool(decision.problem) == (action is REFUSE)


def test_checkpoint_merge_keeps_the_highest_of_each() -> None:
    # A restarted voter's commit index starts below what it had: the record never goes back.
    assert VoterCheckpoint(4, 10).merge(VoterCheckpoint(3, 38)) == VoterCheckpoint(4, 38)
    assert VoterCheckpoint(4, 10).merge(None) == VoterCheckpoint(4, 10)


def test_reads_what_pysyncobj_wrote(tmp_path: Path) -> None:
    journal = DurableFileJournal(str(tmp_path / "raft.journal"))
    for idx in range(7, 12):
        journal.add(b"\x00" + bytes(idx), idx, 2 if idx < 10 else 5)
    journal.setCurrentTerm(6, "n2")
    journal.sync()
    journal._destroy()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    state = read_journal_state(tmp_path)
    assert state == JournalState(True, True, False, first_index=7, last_index=11, last_term=5, term=6)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # read-only


def test_reads_an_empty_and_a_missing_journal(tmp_path: Path) -> None:
    assert read_journal_state(tmp_path / "nowhere") == JournalState(False, False, False)
    DurableFileJournal(str(tmp_path / "raft.journal"))._destroy()
    assert read_journal_state(tmp_path) == JournalState(True, False, False)


def test_a_journal_killed_before_its_header_has_no_entry(tmp_path: Path) -> None:
    (tmp_path / "raft.journal").write_bytes(b"")
    assert read_journal_state(tmp_path) == JournalState(True, False, False)


def test_a_damaged_journal_is_reported(tmp_path: Path) -> None:
    (tmp_path / "raft.journal").write_bytes(b"PYSYNCOBJ" + b"\xff" * 40)
    (tmp_path / "raft.journal.meta").write_bytes(b"not a pickle")
    state = read_journal_state(tmp_path)
    assert state.damaged is not None and "last record ends at" in state.damaged


def test_checkpoint_round_trip_and_damage(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path) is None
    write_checkpoint(tmp_path, VoterCheckpoint(7, 1234))
    assert read_checkpoint(tmp_path) == VoterCheckpoint(7, 1234)
    (tmp_path / CHECKPOINT_FILE).write_text("version=1\nterm=x\n")
    with pytest.raises(JournalLost, match="is damaged"):
        read_checkpoint(tmp_path)


def _formatted(tmp_path: Path) -> tuple[NodeConfig, list[Path], Path]:
    config = parse_node_config(parse_properties(CONFIG.format(dirs=f"{tmp_path / 'data'},{tmp_path / 'data2'}")), env={})
    format_storage(config, random_cluster_id())
    dirs = [tmp_path / "data", tmp_path / "data2"]
    return config, dirs, tmp_path / "data" / "__cluster_metadata-0"  # the default layout


def test_first_start_creates_the_journal_then_marks_every_dir(tmp_path: Path) -> None:
    _config, dirs, journal_dir = _formatted(tmp_path)
    assert guard_start(1, journal_dir, dirs, checkpointed=True) == (True, None)
    assert read_journal_state(journal_dir) == JournalState(True, True, False)
    assert all(read_meta_properties(d).voter_started for d in dirs)
    # The next start is a restart, not a first start: the journal is kept as it is.
    assert guard_start(1, journal_dir, dirs, checkpointed=True) == (True, None)


def test_a_bare_quorum_without_meta_properties_is_not_guarded(tmp_path: Path) -> None:
    journal_dir = tmp_path / "meta" / "__cluster_metadata-0"
    assert guard_start(1, journal_dir, [tmp_path / "meta"], checkpointed=True) == (False, None)
    assert not journal_dir.exists()


def test_a_lost_journal_is_refused_in_one_line_and_nothing_is_touched(tmp_path: Path) -> None:
    _config, dirs, journal_dir = _formatted(tmp_path)
    guard_start(1, journal_dir, dirs, checkpointed=True)
    for path in journal_dir.iterdir():
        path.unlink()
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    with pytest.raises(JournalLost) as caught:
        guard_start(1, journal_dir, dirs, checkpointed=True)
    message = str(caught.value)
    assert "\n" not in message
    assert str(journal_dir) in message and "is missing" in message and "voter.started" in message
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_lost_metadata_disk_stamped_again_is_still_refused(tmp_path: Path) -> None:
    # metadata.log.dir on its own disk, lost; `storage format --ignore-formatted` stamps it again.
    config, dirs, _ = _formatted(tmp_path)
    meta_dir = tmp_path / "meta"
    dirs = [*dirs, meta_dir]
    write_meta_properties(meta_dir, MetaProperties(read_meta_properties(dirs[0]).cluster_id, 1))
    guard_start(1, meta_dir / "__cluster_metadata-0", dirs, checkpointed=True)
    for path in sorted(meta_dir.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    write_meta_properties(meta_dir, MetaProperties(read_meta_properties(dirs[0]).cluster_id, 1))
    with pytest.raises(JournalLost, match="is missing"):
        guard_start(1, meta_dir / "__cluster_metadata-0", dirs, checkpointed=True)


def test_a_journal_behind_the_checkpoint_is_refused(tmp_path: Path) -> None:
    _config, dirs, journal_dir = _formatted(tmp_path)
    guard_start(1, journal_dir, dirs, checkpointed=True)
    write_checkpoint(journal_dir.parent, VoterCheckpoint(1, 5))
    with pytest.raises(JournalLost, match="ends at index 0, but this voter had synced and committed up to index 5"):
        guard_start(1, journal_dir, dirs, checkpointed=True)
    # metadata.log.fsync.enable=false keeps no checkpoint, and does not read one.
    assert guard_start(1, journal_dir, dirs, checkpointed=False) == (True, None)


def test_format_again_keeps_the_mark(tmp_path: Path) -> None:
    config, dirs, journal_dir = _formatted(tmp_path)
    guard_start(1, journal_dir, dirs, checkpointed=True)
    cluster_id = read_meta_properties(dirs[0]).cluster_id
    assert format_storage(config, cluster_id, ignore_formatted=True) == []
    assert all(read_meta_properties(d).voter_started for d in dirs)


def test_an_unreadable_journal_is_refused_without_claiming_the_node_ran(tmp_path: Path) -> None:
    _config, dirs, journal_dir = _formatted(tmp_path)
    journal_dir.mkdir()
    (journal_dir / "raft.journal").write_bytes(b"PYSYNCOBJ" + b"\xff" * 40)
    with pytest.raises(JournalLost, match="cannot be read") as caught:
        guard_start(1, journal_dir, dirs, checkpointed=True)
    assert "has run" not in str(caught.value)
