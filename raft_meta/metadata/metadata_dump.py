"""A node's metadata log read from its files, offline (`raftka metadata dump`; Kafka's
`kafka-metadata-shell` / `kafka-dump-log --cluster-metadata-decoder`).

The files are pysyncobj's, in `<metadata.log.dir>/__cluster_metadata-0/` (raft_meta/quorum/quorum.py):

    raft.dump          gzip(pickle((state, last applied entry, the entry before, cluster)))
                       state = [SyncObj attributes, the `_MetadataLog` attributes: snapshot,
                       snapshot_offset, offsets, payloads, tail_bytes, last]
    raft.journal       header (b"PYSYNCOBJ" padded to 24 bytes, version 8, format u32,
                       end-of-records u32) then records: u32 size, u64 index, u64 term,
                       command, u32 size (little-endian); a command is one type byte
                       (0 regular, 1 no-op, 2 membership, 3 version) + pickle
    raft.journal.meta  pickle({"raftCommitIndex", "currentTerm", "votedForNodeId"})

Reading is read-only and takes no lock, so it works on a running node's directory too (as
kafka-dump-log reads a live broker's segments): the dump is replaced atomically, and the
journal is read up to its recorded end, stopping at the first torn record. The commit index
in raft.journal.meta is saved about once a second, so entries after it are listed apart as
`uncommitted` (not known to be committed): the image is built from the snapshot and the
committed records only.

Pickles are unpickled with a restricted unpickler that builds only plain data (bytes, str,
numbers, lists, tuples, dicts, sets); any class is replaced by an inert placeholder, so a
hostile file cannot run code. Errors are `MetadataDumpError`, naming the file and what is wrong.
"""

from __future__ import annotations

import codecs
import dataclasses
import gzip
import io
import pickle
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftka.raft_meta.metadata.apply import replay
from raftka.raft_meta.metadata.image import MetadataImage
from raftka.raft_meta.metadata.records import RecordBatch, UndecodableRecord, decode_record
from raftka.raft_meta.metadata.snapshot import SnapshotError, decode_snapshot, image_digest
from raftka.raft_meta.quorum.quorum import METADATA_SUBDIR

JOURNAL, DUMP, META = "raft.journal", "raft.dump", "raft.journal.meta"
_APP_NAME = b"PYSYNCOBJ"
_FIRST_RECORD_OFFSET = 24 + 8 + 4 + 4
_REGULAR, _NO_OP = 0, 1
# A dump or journal far beyond metadata.log.max.record.bytes.between.snapshots is not ours.
MAX_FILE_BYTES = 1 << 30


class MetadataDumpError(ValueError):
    """The files are not a metadata log this code can read."""


class _Opaque:
    """What the restricted unpickler builds for any class (a pysyncobj node, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


class _DataUnpickler(pickle.Unpickler):
    # pysyncobj pickles with protocol 2, where bytes are `_codecs.encode(text, "latin1")`.
    _ALLOWED = {("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
                ("builtins", "bytearray"): bytearray, ("builtins", "list"): list, ("builtins", "dict"): dict,
                ("builtins", "tuple"): tuple, ("_codecs", "encode"): codecs.encode}

    def find_class(self, module: str, name: str) -> Any:
        return self._ALLOWED.get((module, name), _Opaque)


def _unpickle(data: bytes, what: str) -> Any:
    try:
        return _DataUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # pickle raises many types on garbage
        raise MetadataDumpError(f"{what}: not a readable pickle ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class JournalEntry:
    index: int
    term: int
    kind: int  # command type byte
    record: bytes | None  # the metadata record of a regular entry


@dataclass(frozen=True)
class Journal:
    entries: list[JournalEntry]
    torn: str | None = None  # why reading stopped before the recorded end


def read_journal(raw: bytes) -> Journal:
    """Parse raft.journal bytes (pure)."""
    if len(raw) < _FIRST_RECORD_OFFSET or not raw.startswith(_APP_NAME):
        raise MetadataDumpError(f"{JOURNAL}: expected a pysyncobj journal header "
                                f"(starting {_APP_NAME!r}), got {raw[:16]!r} ({len(raw)} bytes)")
    (end,) = struct.unpack_from("<I", raw, _FIRST_RECORD_OFFSET - 4)
    if not _FIRST_RECORD_OFFSET <= end <= len(raw):
        raise MetadataDumpError(f"{JOURNAL}: records end at byte {end}; expected "
                                f"{_FIRST_RECORD_OFFSET}..{len(raw)} (the file size)")
    entries: list[JournalEntry] = []
    position = _FIRST_RECORD_OFFSET
    while position < end:
        if position + 4 > end:
            return Journal(entries, f"record header at byte {position} runs past the end ({end})")
        (size,) = struct.unpack_from("<I", raw, position)
        if size < 17 or position + 8 + size > end:
            return Journal(entries, f"record at byte {position} claims {size} bytes; "
                                    f"expected 17..{end - position - 8}")
        (trailer,) = struct.unpack_from("<I", raw, position + 4 + size)
        if trailer != size:
            return Journal(entries, f"record at byte {position}: size {size} but trailer {trailer}")
        index, term = struct.unpack_from("<QQ", raw, position + 4)
        command = raw[position + 20:position + 4 + size]
        entries.append(JournalEntry(index, term, command[0], _record_of(command, index)))
        position += size + 8
    return Journal(entries)


def _record_of(command: bytes, index: int) -> bytes | None:
    if command[0] != _REGULAR:
        return None
    call = _unpickle(command[1:], f"{JOURNAL} entry {index}")
    # (method id, args) or (method id, args, kwargs); the one method is apply(record_bytes).
    if isinstance(call, tuple) and len(call) >= 2 and isinstance(call[1], (tuple, list)) and call[1] \
            and isinstance(call[1][0], (bytes, bytearray)):
        return bytes(call[1][0])
    raise MetadataDumpError(f"{JOURNAL} entry {index}: expected apply(record bytes), got {call!r:.100}")


@dataclass(frozen=True)
class DumpState:
    """What raft.dump holds: the `_MetadataLog` state at Raft index `applied_index`."""

    applied_index: int
    snapshot: bytes | None
    snapshot_offset: int
    tail: list[tuple[int, bytes]]  # (offset, record) after the snapshot
    last: int


def read_dump(raw: bytes) -> DumpState:
    """Parse raft.dump bytes (pure)."""
    try:
        data = gzip.decompress(raw)
    except Exception as exc:  # gzip raises OSError, EOFError, zlib.error
        raise MetadataDumpError(f"{DUMP}: not gzip ({type(exc).__name__}: {exc})") from None
    dump = _unpickle(data, DUMP)
    if not (isinstance(dump, tuple) and len(dump) == 4 and isinstance(dump[0], list) and len(dump[0]) == 2
            and isinstance(dump[0][1], dict) and isinstance(dump[1], tuple) and len(dump[1]) >= 2):
        raise MetadataDumpError(f"{DUMP}: expected (state [syncobj, metadata log], last entry, entry, cluster), "
                                f"got {type(dump).__name__}")
    state, (_, applied_index, *_rest) = dump[0][1], dump[1]
    offsets, payloads = state.get("offsets", []), state.get("payloads", [])
    if not (isinstance(offsets, list) and isinstance(payloads, list) and len(offsets) == len(payloads)
            and all(type(o) is int for o in offsets) and all(isinstance(p, bytes) for p in payloads)):
        raise MetadataDumpError(f"{DUMP}: the metadata log's offsets and payloads are not two equal lists "
                                "of ints and bytes")
    snapshot = state.get("snapshot")
    if snapshot is not None and not isinstance(snapshot, bytes):
        raise MetadataDumpError(f"{DUMP}: the snapshot is {type(snapshot).__name__}, expected bytes")
    if type(applied_index) is not int:
        raise MetadataDumpError(f"{DUMP}: last applied index {applied_index!r} is not an int")
    return DumpState(applied_index, snapshot, int(state.get("snapshot_offset", 0)),
                     list(zip(offsets, payloads, strict=True)), int(state.get("last", offsets[-1] if offsets else 0)))


@dataclass
class MetadataLogView:
    directory: Path
    commit_index: int | None
    current_term: int | None
    dump: DumpState | None
    records: list[tuple[int, int | None, bytes]]  # committed (offset, term, record) after the snapshot
    uncommitted: list[tuple[int, int, bytes]]
    warnings: list[str] = field(default_factory=list)

    def image(self) -> MetadataImage:
        base = MetadataImage()
        if self.dump is not None and self.dump.snapshot is not None:
            try:
                base = decode_snapshot(self.dump.snapshot)
            except SnapshotError as exc:
                raise MetadataDumpError(f"{DUMP}: snapshot at offset {self.dump.snapshot_offset}: {exc}") from None
        return replay([(offset, decode_record(raw)) for offset, _, raw in self.records], base)


def metadata_files_dir(path: str | Path) -> Path:
    """The directory holding raft.journal: `path` itself or its __cluster_metadata-0."""
    path = Path(path)
    return path if (path / JOURNAL).exists() or (path / DUMP).exists() else path / METADATA_SUBDIR


def read_metadata_log(path: str | Path, attempts: int = 3) -> MetadataLogView:
    """Read the log under `path` (a metadata.log.dir or its __cluster_metadata-0).

    A running node may compact its log between our reads of the dump and the journal; then
    the two do not join and the read is tried again (`attempts` times)."""
    directory = metadata_files_dir(path)
    if not (directory / JOURNAL).exists() and not (directory / DUMP).exists():
        raise MetadataDumpError(f"{directory}: no {JOURNAL} or {DUMP}; expected a node's metadata.log.dir")
    problem = ""
    for _ in range(attempts):
        dump = read_dump(_read(directory / DUMP)) if (directory / DUMP).exists() else None
        journal = read_journal(_read(directory / JOURNAL)) if (directory / JOURNAL).exists() else Journal([])
        meta = _unpickle(_read(directory / META), META) if (directory / META).exists() else {}
        meta = meta if isinstance(meta, dict) else {}
        applied = dump.applied_index if dump is not None else 0
        newer = [e for e in journal.entries if e.index > applied]
        if newer and newer[0].index != applied + 1:
            problem = (f"{JOURNAL} starts at index {newer[0].index} but {DUMP} ends at {applied}: "
                       "the node compacted its log while it was read")
            continue
        commit = meta.get("raftCommitIndex")
        commit = commit if type(commit) is int else None
        records: list[tuple[int, int | None, bytes]] = [(o, None, p) for o, p in dump.tail] if dump else []
        uncommitted = []
        for e in newer:
            if e.record is None:
                continue
            if commit is None or e.index <= commit:
                records.append((e.index, e.term, e.record))
            else:
                uncommitted.append((e.index, e.term, e.record))
        warnings = [f"{JOURNAL}: stopped early: {journal.torn}"] if journal.torn else []
        if commit is None:
            warnings.append(f"{META}: no commit index; every journal entry is listed as committed")
        term = meta.get("currentTerm")
        return MetadataLogView(directory, commit, term if type(term) is int else None, dump, records,
                               uncommitted, warnings)
    raise MetadataDumpError(f"{directory}: {problem} ({attempts} tries)")


def _read(path: Path) -> bytes:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise MetadataDumpError(f"{path}: {size} bytes; expected at most {MAX_FILE_BYTES}")
    return path.read_bytes()


# --- JSON -------------------------------------------------------------------------------


def record_json(raw: bytes) -> dict[str, Any]:
    """A metadata record as JSON-ready data: {"type": ..., fields...}."""
    record = decode_record(raw)
    if isinstance(record, UndecodableRecord):
        return {"type": "Undecodable", "reason": record.reason, "raw_hex": record.raw.hex()}
    body: dict[str, Any] = {"type": record.TYPE}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if isinstance(record, RecordBatch) and f.name == "records":
            value = [record_json(r) for r in value]
        body[f.name] = _plain(value)
    return body


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def image_json(image: MetadataImage) -> dict[str, Any]:
    """The image as JSON-ready data (brokers, topics, configs in id/name order)."""
    return {
        "offset": image.offset,
        "cluster_id": image.cluster_id,
        "controller": {"node_id": image.controller.node_id, "epoch": image.controller.epoch},
        "brokers": [{"broker_id": b.broker_id, "incarnation_id": b.incarnation_id, "epoch": b.epoch,
                     "listeners": [{"name": n, "host": h, "port": p} for n, h, p in b.listeners],
                     "rack": b.rack, "fenced": b.fenced} for _, b in sorted(image.brokers.items())],
        "topics": [{"name": t.name, "topic_id": t.topic_id, "partitions": [
            {"partition": i, "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
             "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch}
            for i, p in sorted(t.partitions.items())]}
            for t in sorted(image.topics.values(), key=lambda t: t.name)],
        "configs": [{"resource_type": kind, "resource_name": name, "configs": dict(sorted(entries.items()))}
                    for (kind, name), entries in sorted(image.configs.items())],
        "next_producer_id": image.next_producer_id,
        "producer_id_blocks": [{"broker_id": b, "first": first, "size": size}
                               for b, (first, size) in sorted(image.producer_id_blocks.items())],
        "request_ids_remembered": len(image.request_id_order),
    }


def dump_json(view: MetadataLogView, *, with_records: bool = True) -> dict[str, Any]:
    image = view.image()
    out: dict[str, Any] = {
        "metadata_dir": str(view.directory),
        "commit_index": view.commit_index,
        "current_term": view.current_term,
        "snapshot_offset": view.dump.snapshot_offset if view.dump else 0,
        "image_offset": image.offset,
        "image_digest": image_digest(image),
        "warnings": view.warnings,
    }
    if with_records:
        out["records"] = [{"offset": o, "term": t, "record": record_json(r)} for o, t, r in view.records]
        out["uncommitted"] = [{"offset": o, "term": t, "record": record_json(r)} for o, t, r in view.uncommitted]
    else:
        out["records_count"] = len(view.records)
        out["uncommitted_count"] = len(view.uncommitted)
    out["image"] = image_json(image)
    return out
