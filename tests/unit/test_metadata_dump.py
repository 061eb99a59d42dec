"""raft_meta/metadata/metadata_dump.py on journals written by pysyncobj's own FileJournal, and on
damaged or hostile files: the reader stops at a torn record and never runs a pickle's code."""

from __future__ import annotations

import gzip
import os
import pickle
import struct
from pathlib import Path

import pytest
from pysyncobj.journal import FileJournal

from raftka.raft_meta.metadata.apply import replay
from raftka.raft_meta.metadata.metadata_dump import (
    MetadataDumpError,
    dump_json,
    read_dump,
    read_journal,
    read_metadata_log,
    record_json,
)
from raftka.raft_meta.metadata.records import (
    Partition,
    RecordBatch,
    Topic,
    decode_record,
    encode_record,
)
from raftka.raft_meta.metadata.snapshot import encode_snapshot, image_digest

RECORDS = [encode_record(Topic("t", "id-t")), encode_record(Partition("id-t", 0, (1, 2), (1, 2), 1, 4))]


def _command(record: bytes) -> bytes:
    return bytes([0]) + pickle.dumps((0, (record,)))


def _journal(path: Path, entries: list[tuple[bytes, int, int]], commit: int | None = None) -> Path:
    journal = FileJournal(str(path / "raft.journal"))
    for command, index, term in entries:
        journal.add(command, index, term)
    if commit is not None:
        journal.setRaftCommitIndex(commit)
        journal.onOneSecondTimer()  # pysyncobj saves the meta file once a second
    journal._destroy()
    return path / "raft.journal"


def test_reads_what_pysyncobj_wrote_and_splits_at_the_commit_index(tmp_path: Path) -> None:
    noop = bytes([1])
    _journal(tmp_path, [(noop, 1, 1), (_command(RECORDS[0]), 2, 1), (_command(RECORDS[1]), 3, 1),
                        (_command(encode_record(Topic("late", "id-late"))), 4, 2)], commit=3)
    view = read_metadata_log(tmp_path)
    assert [(o, t) for o, t, _ in view.records] == [(2, 1), (3, 1)]
    assert [(o, t) for o, t, _ in view.uncommitted] == [(4, 2)]
    out = dump_json(view)
    assert out["commit_index"] == 3 and out["image_offset"] == 3
    assert out["image_digest"] == image_digest(replay([(2, decode_record(RECORDS[0])), (3, decode_record(RECORDS[1]))]))
    assert out["image"]["topics"] == [{"name": "t", "topic_id": "id-t", "partitions": [
        {"partition": 0, "replicas": [1, 2], "isr": [1, 2], "leader": 1, "leader_epoch": 4, "partition_epoch": 0}]}]
    assert out["records"][0] == {"offset": 2, "term": 1, "record": {
        "type": "Topic", "name": "t", "topic_id": "id-t", "configs": [], "request_id": None}}


def _cut(raw: bytes) -> bytes:
    return raw[:-3]


def _bad_trailer(raw: bytes) -> bytes:
    end = struct.unpack_from("<I", raw, 36)[0]
    return raw[:end - 4] + b"\xff\xff\xff\xff" + raw[end:]


@pytest.mark.parametrize(("damage", "entries", "torn"), [
    (lambda raw: raw, 2, None),
    (_bad_trailer, 1, "trailer"),
    (lambda raw: raw[:36] + struct.pack("<I", struct.unpack_from("<I", raw, 36)[0] - 5) + raw[40:], 1, "claims"),
])
def test_a_torn_last_record_ends_the_journal(tmp_path: Path, damage, entries, torn) -> None:
    raw = _journal(tmp_path, [(_command(RECORDS[0]), 1, 1), (_command(RECORDS[1]), 2, 1)]).read_bytes()
    journal = read_journal(damage(raw))
    assert len(journal.entries) == entries
    assert (journal.torn is None) if torn is None else (torn in journal.torn)


@pytest.mark.parametrize(("raw", "message"), [
    (b"", "journal header"),
    (b"NOTAJOURNAL" + bytes(40), "journal header"),
    (b"PYSYNCOBJ" + bytes(27) + struct.pack("<I", 10**6), "records end at byte 1000000"),
])
def test_not_a_journal_is_refused_with_what_was_found(raw: bytes, message: str) -> None:
    with pytest.raises(MetadataDumpError, match=message):
        read_journal(raw)


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_a_hostile_pickle_runs_no_code(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    evil = gzip.compress(pickle.dumps(([{}, {"offsets": [], "payloads": [], "x": _Boom()}], ("c", 0, 0), ("c", 0, 0), set()),
                                      protocol=2))
    read_dump(evil)  # the hostile object became an inert placeholder
    with pytest.raises(MetadataDumpError, match="not gzip"):
        read_dump(b"garbage")
    with pytest.raises(MetadataDumpError, match="expected \\(state"):
        read_dump(gzip.compress(pickle.dumps(_Boom())))
    assert not (tmp_path / "pwned").exists()


def test_dump_plus_journal_tail(tmp_path: Path) -> None:
    """After a compaction the dump holds the snapshot and the journal the entries after it."""
    image = replay([(2, decode_record(RECORDS[0]))])
    state = {"snapshot": encode_snapshot(image), "snapshot_offset": 2, "offsets": [], "payloads": [],
             "tail_bytes": 0, "last": 2}
    (tmp_path / "raft.dump").write_bytes(gzip.compress(pickle.dumps(([{}, state], (b"", 2, 1), (b"", 1, 1), set()))))
    _journal(tmp_path, [(bytes([1]), 1, 1), (_command(RECORDS[0]), 2, 1), (_command(RECORDS[1]), 3, 1)], commit=3)
    out = dump_json(read_metadata_log(tmp_path))
    assert out["snapshot_offset"] == 2 and [r["offset"] for r in out["records"]] == [3]
    assert out["image_digest"] == image_digest(replay([(3, decode_record(RECORDS[1]))], image))
    # A journal that does not join the dump (a compaction between the two reads) is refused.
    (tmp_path / "raft.journal").unlink()
    _journal(tmp_path, [(_command(RECORDS[1]), 7, 1)], commit=7)
    with pytest.raises(MetadataDumpError, match="starts at index 7 but raft.dump ends at 2"):
        read_metadata_log(tmp_path, attempts=1)


def test_a_record_batch_lists_its_records() -> None:
    batch = encode_record(RecordBatch(tuple(RECORDS), request_id="r1"))
    assert [r["type"] for r in record_json(batch)["records"]] == ["Topic", "Partition"]
    assert record_json(b"\xff")["type"] == "Undecodable"
