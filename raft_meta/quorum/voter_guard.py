"""A voter never forgets: the start-up guard of a formatted node's metadata journal.

A Raft voter that forgets entries it acknowledged, or a vote it cast, breaks the quorum's
safety: a committed entry may then be on a minority only, and a term may get two leaders.
pysyncobj alone cannot tell a journal that was lost from a node that never started: both are
an empty `__cluster_metadata-0`, and both used to start (a lone voter then re-created the
cluster from `bootstrap.records`). So two records are kept *outside* that directory:

- `voter.started=true` in the meta.properties of every storage dir (each log dir and the
  metadata dir), written once, fsynced, right after the voter first created its journal
  (`raft_core.create_journal`: the files exist and are durable before the mark is). One
  surviving copy is enough: a lost metadata disk that `storage format --ignore-formatted`
  stamped again is still refused, as long as one log dir is another disk.
- `voter-state-checkpoint` in metadata.log.dir (beside `__cluster_metadata-0`): the highest
  current term and commit index this voter had *synced* to its journal
  (`RaftSyncObj.durable_point`). A journal that ends before that commit index, or whose term
  went back (a restored older copy, a disk that lied about fsync), is refused too.

The trade-off: the checkpoint is written lazily, at most once per `CHECKPOINT_INTERVAL_S`
while the log moves, by a worker thread, and once more at a clean stop; never in the tick
thread, so it costs no fsync on the append path (KRaft pays none either: its `quorum-state`
file changes only with the election state). A journal that lost only what was acknowledged in
the last interval before the stop (a copy less than a second old, a fsync that lied in that
second) is therefore not detected. Writing it before every acknowledgement would close that
window at the cost of a second fsync (two: file and directory) per acknowledged batch, on a
commit path that today waits for one journal fsync. The commit index is recorded,
not the log end: a follower legitimately deletes uncommitted entries that conflict with a new
leader's, never committed ones. With metadata.log.fsync.enable=false there is no checkpoint
(nothing is synced to record) and only the `voter.started` check applies.

Observers (broker-only nodes) are not guarded: they never vote nor count toward a commit, and a
lost journal is fetched again from the leader.

`decide_start` is the decision (pure; tests/unit/test_voter_guard.py); `guard_start` its shell.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from pathlib import Path

from raftka.log.atomic_file import atomic_write
from raftka.raft_meta.config.node_config import parse_properties
from raftka.raft_meta.quorum.pysyncobj_patches import (
    DUMP_FILE,
    JOURNAL_FILE,
    META_FILE,
    JournalState,
    create_journal,
    dump_last_index,
    read_journal_state,
)
from raftka.raft_meta.quorum.storage_format import (
    META_PROPERTIES,
    mark_voter_started,
    voter_started_dirs,
)

CHECKPOINT_FILE = "voter-state-checkpoint"
CHECKPOINT_VERSION = 1
CHECKPOINT_INTERVAL_S = 1.0
GUIDE = 'docs/architecture.md, "A voter never forgets"'


class JournalLost(RuntimeError):
    """This voter's journal is missing or behind what it acknowledged: it must not start."""


@dataclass(frozen=True)
class VoterCheckpoint:
    term: int
    commit_index: int

    def merge(self, other: VoterCheckpoint | None) -> VoterCheckpoint:
        """The higher of each (a restarted voter's commit index starts below what it had)."""
        if other is None:
            return self
        return VoterCheckpoint(max(self.term, other.term), max(self.commit_index, other.commit_index))


class Action(enum.Enum):
    FIRST_START = "first start"  # formatted, never started: create the journal, then mark
    START = "start"
    REFUSE = "refuse"


@dataclass(frozen=True)
class StartDecision:
    action: Action
    mark: bool = False  # add voter.started to meta.properties (after the journal exists)
    problem: str = ""  # REFUSE: what is wrong with the journal


def decide_start(journal: JournalState, started: bool, checkpoint: VoterCheckpoint | None) -> StartDecision:
    """Start, first start, or refuse, from the journal directory's state, whether this node is
    marked as a started voter, and its checkpoint (None: none, or not kept without fsync)."""
    ran_before = started or checkpoint is not None
    if journal.damaged is not None:
        return StartDecision(Action.REFUSE, problem=f"cannot be read ({journal.damaged})")
    if journal.absent:
        if not ran_before:
            return StartDecision(Action.FIRST_START, mark=True)
        return StartDecision(Action.REFUSE, problem=f"is missing (no {JOURNAL_FILE}, {META_FILE} nor {DUMP_FILE})")
    if journal.first_index > 1 and not journal.dump:
        return StartDecision(Action.REFUSE, problem=f"starts at index {journal.first_index} but {DUMP_FILE}, "
                                                     "which holds everything before it, is missing")
    if ran_before:
        if not journal.journal:
            return StartDecision(Action.REFUSE, problem=f"has no {JOURNAL_FILE} (the entries)")
        if not journal.meta:
            return StartDecision(Action.REFUSE, problem=f"has no {META_FILE} (the term and the vote cast in it)")
    if checkpoint is not None:
        if journal.end_index < checkpoint.commit_index:
            return StartDecision(Action.REFUSE, problem=(
                f"ends at index {journal.end_index}, but this voter had synced and committed up to index "
                f"{checkpoint.commit_index} ({CHECKPOINT_FILE})"))
        term = max(journal.term, journal.last_term)
        if term < checkpoint.term:
            return StartDecision(Action.REFUSE, problem=(
                f"is at term {term}, but this voter had reached term {checkpoint.term} ({CHECKPOINT_FILE})"))
    return StartDecision(Action.START, mark=not started)


# --- the shell: blocking file I/O, run in a worker thread ---

def read_checkpoint(metadata_dir: Path) -> VoterCheckpoint | None:
    path = metadata_dir / CHECKPOINT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    props = parse_properties(text)
    try:
        if int(props["version"]) != CHECKPOINT_VERSION:
            raise ValueError(f"version {props['version']}")
        return VoterCheckpoint(int(props["term"]), int(props["commit.index"]))
    except (KeyError, ValueError) as exc:
        raise JournalLost(f"{str(path)!r} is damaged ({exc!r}); expected version={CHECKPOINT_VERSION}, term and "
                          f"commit.index; restore it (see {GUIDE})") from None


def write_checkpoint(metadata_dir: Path, point: VoterCheckpoint) -> None:
    text = ("# Written by raftka: the highest term and commit index this voter synced to its metadata journal.\n"
            f"version={CHECKPOINT_VERSION}\nterm={point.term}\ncommit.index={point.commit_index}\n")
    atomic_write(metadata_dir / CHECKPOINT_FILE, text.encode("utf-8"))


def guard_start(node_id: int, journal_dir: Path, storage_dirs: list[Path],
                checkpointed: bool) -> tuple[bool, VoterCheckpoint | None]:
    """Refuse (`JournalLost`, one line) or prepare this voter's start: on a first start, create
    the journal and mark every storage dir. Returns whether the node is guarded (its storage
    is formatted: a bare quorum, as some tests run, is not) and its checkpoint (None: none
    yet, or `checkpointed` is False: metadata.log.fsync.enable is off)."""
    if not any((d / META_PROPERTIES).is_file() for d in storage_dirs):
        return False, None
    metadata_dir = journal_dir.parent
    checkpoint = read_checkpoint(metadata_dir) if checkpointed else None
    marked = voter_started_dirs(storage_dirs)
    journal = read_journal_state(journal_dir)
    if checkpoint is not None and journal.dump and journal.last_index < checkpoint.commit_index \
            and journal.damaged is None:
        try:
            journal = dataclasses.replace(journal, dump_index=dump_last_index(journal_dir))
        except Exception as exc:  # noqa: BLE001 - an unreadable dump is reported, not raised
            journal = dataclasses.replace(journal, damaged=f"{DUMP_FILE}: {type(exc).__name__}: {exc}")
    decision = decide_start(journal, bool(marked), checkpoint)
    if decision.action is Action.REFUSE:
        if marked:
            evidence = f"voter.started in {', '.join(str(d / META_PROPERTIES) for d in marked)}"
        else:
            evidence = str(metadata_dir / CHECKPOINT_FILE) if checkpoint is not None else ""
        raise JournalLost(
            f"node {node_id}: the metadata journal {str(journal_dir)!r} {decision.problem}"
            + (f", yet this node has run as a metadata voter ({evidence})" if evidence else "")
            + "; a voter that forgets entries it acknowledged or votes it cast breaks the quorum's safety, so "
            f"it does not start: put back the files it last ran with there, or, if they are lost for good, "
            f"see {GUIDE}")
    if decision.action is Action.FIRST_START:
        create_journal(journal_dir)
    if decision.mark:
        mark_voter_started(storage_dirs)
    return True, checkpoint
