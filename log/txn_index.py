"""The aborted-transaction index of one segment: `<20-digit base offset>.txnindex`.

Kafka's layout: one 34-byte big-endian entry per *aborted, non-empty*
transaction whose ABORT marker lies in the segment:

    version i16 (0) | producer_id i64 | first_offset i64 | last_offset i64 (the marker)
    | last_stable_offset i64 (the LSO just after the marker)

`last_offset` strictly increases through the file. A read_committed Fetch
collects the entries overlapping the fetched range (`collect`), and the
clients skip the aborted producers' batches with them.

The index is derived data: recovery rebuilds it by replaying the log (see
`PartitionLog.open`), so an entry whose `last_offset` is not above the last
one is taken as a replay of what is already there and skipped. The entries are
kept in memory as well (a few per segment; the file is read once at open).
Not thread-safe; blocking I/O (the broker calls it under the partition's lock
or from the log's own thread).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from raftka.log.errors import LogError

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
ENTRY_VERSION = 0


class CorruptTxnIndex(LogError):
    """A `.txnindex` file that cannot be trusted (torn entry, unknown version, offsets out of order)."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(ENTRY_VERSION, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The entries of a whole `.txnindex` file; raises CorruptTxnIndex if it is not one."""
    if len(data) % ENTRY_SIZE:
        raise CorruptTxnIndex(f"transaction index is {len(data)} bytes, not a multiple of {ENTRY_SIZE}")
    entries: list[AbortedTxn] = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != ENTRY_VERSION:
            raise CorruptTxnIndex(f"transaction index entry at position {pos} has version {version}, "
                                  f"expected {ENTRY_VERSION}")
        if entries and last <= entries[-1].last_offset:
            raise CorruptTxnIndex(f"transaction index entry at position {pos}: last offset {last} is not "
                                  f"above the previous entry's {entries[-1].last_offset}")
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


def collect(entries: list[AbortedTxn], fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
    """Kafka's TransactionIndex.collectAbortedTxns: the entries that may abort data in
    [fetch_offset, upper_bound), and True once an entry proves no later segment can hold more
    (its last stable offset is at or above `upper_bound`)."""
    found = []
    for entry in entries:
        if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
            found.append(entry)
        if entry.last_stable_offset >= upper_bound:
            return found, True
    return found, False


class TransactionIndex:
    """One segment's `.txnindex` file and its entries."""

    def __init__(self, path: Path) -> None:
        """Open the index at `path`, creating it empty if missing (`created` says which).

        Raises CorruptTxnIndex if an existing file does not decode (the caller rebuilds it)."""
        self.path = Path(path)
        self.created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(self._fd).st_size
            self.entries: list[AbortedTxn] = decode_entries(os.pread(self._fd, size, 0)) if size else []
        except CorruptTxnIndex:
            os.close(self._fd)
            raise

    @property
    def last_offset(self) -> int:
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, entry: AbortedTxn) -> bool:
        """Add an entry; False (nothing written) if its marker is not after the last entry's."""
        if entry.last_offset <= self.last_offset:
            return False
        os.write(self._fd, entry.encode())
        self.entries.append(entry)
        return True

    def reset(self) -> None:
        """Drop every entry (the segment is being recovered: replay writes them again)."""
        self._cut(0)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (the log was truncated there)."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep != len(self.entries):
            self._cut(keep)

    def _cut(self, count: int) -> None:
        os.ftruncate(self._fd, count * ENTRY_SIZE)
        del self.entries[count:]

    def flush(self) -> None:
        os.fsync(self._fd)

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
