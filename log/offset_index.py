"""The sparse offset index of one segment: `<base offset>.index`, Kafka's format.

Each 8-byte entry is (offset - base offset) u32 then the byte position of a
batch in the `.log` file u32, big-endian. The segment adds an entry for a
batch's base offset whenever more than `index.interval.bytes` of log were
written since the previous entry, so a lookup lands at most about one
interval before the wanted batch and the segment scans headers from there.

The entries live in memory (two `array`s, loaded once) and are looked up with
`bisect`. The file holds no descriptor open: new entries are appended to it
when the segment is flushed (roll, `flush.*` settings) or closed, and a
truncation cuts it at once. So a partition's steady state costs one descriptor
per segment (its `.log`), as in Kafka, where indexes are mmapped and their
files closed. Entries not yet written when the process dies belong to a
segment above the recovery point, whose index is rebuilt from the log on
restart; after a clean close the file holds exactly the valid entries.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import ClassVar

_ENTRY = struct.Struct(">II")
_U32_MAX = (1 << 32) - 1


class CorruptIndex(Exception):
    """An index file cannot be trusted (bad size, entries out of order); rebuild it from the log."""


def write_entries(path: Path, at: int, data: bytes, *, fsync: bool) -> None:
    """Write `data` at byte `at` of the index file `path` (created if missing), cut the file
    there, and close it again."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        position = at
        while view:
            written = os.pwrite(fd, view, position)
            view, position = view[written:], position + written
        os.ftruncate(fd, at + len(data))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def cut_entries(path: Path, size: int) -> None:
    """Cut the index file `path` to `size` bytes (a truncation reaches the disk at once)."""
    try:
        os.truncate(path, size)
    except FileNotFoundError:
        pass


class IndexFile:
    """What the offset and time indexes share: entries of two columns (`_first`, `_second`,
    the subclass's `_ENTRY` packs one entry) kept in memory, loaded once from the file, new
    ones appended to it on flush and close, a truncation cutting it at once."""

    _ENTRY: ClassVar[struct.Struct]
    _TYPECODES: ClassVar[tuple[str, str]]  # the two columns' array typecodes

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        """Open (creating if missing) and load the index at `path`.

        Raises CorruptIndex when the file size is not a multiple of the entry size or an
        entry does not follow the one before it (`_follows`).
        """
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self._ENTRY.size)
        self._first = array(self._TYPECODES[0])
        self._second = array(self._TYPECODES[1])
        data = self.path.read_bytes() if self.path.exists() else b""
        if len(data) % self._ENTRY.size:
            raise CorruptIndex(
                f"{self.path.name}: size {len(data)} is not a multiple of the {self._ENTRY.size}-byte entry"
            )
        for first, second in self._ENTRY.iter_unpack(data):
            if self._first and not self._follows(first, second):
                raise CorruptIndex(
                    f"{self.path.name}: entry {len(self._first)} ({first}, {second}) does not follow "
                    f"({self._first[-1]}, {self._second[-1]})"
                )
            self._first.append(first)
            self._second.append(second)
        self._written = len(self._first)  # entries in the file
        if not self.path.exists():
            write_entries(self.path, 0, b"", fsync=False)

    def _follows(self, first: int, second: int) -> bool:
        """Whether (first, second) may follow the last entry."""
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._first)

    @property
    def is_full(self) -> bool:
        return len(self._first) >= self.max_entries

    def _truncate(self, keep: int) -> None:
        if keep >= len(self._first):
            return
        del self._first[keep:]
        del self._second[keep:]
        if self._written > keep:
            cut_entries(self.path, keep * self._ENTRY.size)
            self._written = keep

    def reset(self) -> None:
        self._truncate(0)

    def _pending(self) -> bytes:
        return b"".join(self._ENTRY.pack(a, b) for a, b in zip(self._first[self._written:],
                                                               self._second[self._written:], strict=True))

    def flush(self) -> None:
        """Write the new entries and fsync the file."""
        count = len(self._first)
        write_entries(self.path, self._written * self._ENTRY.size, self._pending(), fsync=True)
        self._written = count

    def close(self) -> None:
        """Write the new entries (no fsync: a clean close leaves the file exact)."""
        count = len(self._first)
        if count > self._written:
            write_entries(self.path, self._written * self._ENTRY.size, self._pending(), fsync=False)
            self._written = count

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)


class OffsetIndex(IndexFile):
    """Entries (offset - base offset, position), both strictly increasing."""

    _ENTRY = _ENTRY
    _TYPECODES = ("I", "I")
    ENTRY_SIZE = _ENTRY.size

    @property
    def _relative(self) -> array[int]:
        return self._first

    @property
    def _positions(self) -> array[int]:
        return self._second

    def _follows(self, first: int, second: int) -> bool:
        return first > self._relative[-1] and second > self._positions[-1]

    @property
    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry, or (base offset, 0) when empty."""
        if not self._relative:
            return self.base_offset, 0
        return self.base_offset + self._relative[-1], self._positions[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self._relative, self._positions, strict=True)]

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must increase strictly."""
        rel = offset - self.base_offset
        if not 0 <= rel <= _U32_MAX:
            raise ValueError(
                f"{self.path.name}: offset {offset} is outside the u32 range of base offset {self.base_offset}"
            )
        if self._relative and not self._follows(rel, position):
            last_offset, last_position = self.last_entry
            raise ValueError(
                f"{self.path.name}: entry ({offset}, {position}) must come after ({last_offset}, {last_position})"
            )
        if self.is_full:
            raise ValueError(f"{self.path.name}: index is full ({self.max_entries} entries)")
        self._relative.append(rel)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`; (base offset, 0) if none."""
        i = bisect_right(self._relative, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative[i], self._positions[i]

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries pointing at or beyond `position` (the log was cut there)."""
        self._truncate(bisect_left(self._positions, position))

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the entries for offsets at or beyond `offset`."""
        self._truncate(bisect_left(self._relative, max(0, offset - self.base_offset)))

